#!/usr/bin/python
# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Write a list of files on a host in one call (the host side of vllm_host_files)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_files_write
short_description: Write root-owned files with their modes in one call, validating before replacing
description:
  - The host side of the M(vllm_fleet.recipes.vllm_host_files) action, which builds O(specs) from
    the fleet plan; usable on its own.
  - Creates each directory of O(dirs) (C(0755), root), then writes each file of O(specs) whose
    content, mode or owner differ, atomically (a temporary file in the same directory, renamed).
  - A file with a C(validate) command is checked first, on a private copy named as the file
    (C(%s) is that copy's path). Every changed file is validated before any is written, so a
    refusal fails the task and writes nothing.
version_added: 0.1.0
author:
  - vllm_fleet maintainers (@vllm-fleet)
options:
  specs:
    description:
      - The files. Each has C(dest) (absolute path), C(content) (text), C(mode) (octal string),
        C(diff) (bool; false hides its diff, for files with secrets) and C(validate) (command, or empty).
      - Contents may hold secrets; the option is no_log.
    type: list
    elements: dict
    required: true
  dirs:
    description:
      - Directories to create first.
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    support: full
    description: Reports what it would write (and validates nothing); writes nothing.
  diff_mode:
    support: full
    description: A diff per changed file whose C(diff) is true.
  idempotent:
    support: full
    description: Writes only what differs.
  platform:
    support: full
    platforms: posix
    description: Runs as root.
seealso:
  - module: vllm_fleet.recipes.vllm_host_files
"""

EXAMPLES = r"""
- name: Write an env file and a unit
  vllm_fleet.recipes.vllm_files_write:
    dirs: [/etc/vllm-fleet/demo]
    specs:
      - {dest: /etc/vllm-fleet/demo/engine.env, content: "A=1\n", mode: "0600", diff: true, validate: ""}
      - dest: /etc/systemd/system/vllm-demo.service
        content: "{{ lookup('file', 'vllm-demo.service') }}"
        mode: "0644"
        diff: true
        validate: systemd-analyze verify %s
"""

RETURN = r"""
files:
  description: Destinations that changed (or would change in check mode).
  returned: always
  type: list
  elements: str
dirs:
  description: Directories created or fixed.
  returned: always
  type: list
  elements: str
"""

import os
import pwd
import shlex
import shutil
import subprocess
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.vllm_fleet.recipes.plugins.module_utils._atomic_write import atomic_write


def _current(dest):
    """(bytes, mode, uid, gid) of dest, or None when it does not exist."""
    try:
        with open(dest, "rb") as handle:
            data = handle.read()
        stat = os.stat(dest)
    except FileNotFoundError:
        return None
    return data, stat.st_mode & 0o7777, stat.st_uid, stat.st_gid


def _run_validate(command, data, name):
    """Run the validate command on a private copy of the candidate file; error text or ''."""
    workdir = tempfile.mkdtemp(prefix="vllm-host-files-")
    try:
        candidate = os.path.join(workdir, name)
        with open(candidate, "wb") as handle:
            handle.write(data)
        argv = [part.replace("%s", candidate) for part in shlex.split(command)]
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        return "" if proc.returncode == 0 else (proc.stderr or proc.stdout).strip() or f"exit {proc.returncode}"
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _ensure_dir(path, check):
    if os.path.isdir(path):
        stat = os.stat(path)
        if stat.st_mode & 0o7777 == 0o755 and (stat.st_uid, stat.st_gid) == (0, 0):
            return False
    if not check:
        os.makedirs(path, exist_ok=True)
        os.chmod(path, 0o755)
        os.chown(path, 0, 0)
    return True


def apply_files(module, specs, dirs):
    """Write what differs; returns (changed dests, changed dirs, diffs).

    Every changed unit is validated before any file is written: a refusal leaves the host as it was.
    """
    check = module.check_mode
    pending = []
    for spec in specs:
        data, mode = spec["content"].encode("utf-8"), int(spec["mode"], 8)
        before = _current(spec["dest"])
        if before is None or before != (data, mode, 0, 0):
            pending.append((spec, data, mode, before))
    if not check:  # check mode: what a unit calls may not be installed yet
        for spec, data, _mode, _before in pending:
            error = _run_validate(spec["validate"], data, os.path.basename(spec["dest"])) if spec["validate"] else ""
            if error:
                module.fail_json(msg=f"{spec['dest']}: {spec['validate']} refused the new unit "
                                     f"(nothing was written): {error}", files=[])
    made_dirs = [d for d in dirs if _ensure_dir(d, check)]
    changed, diffs = [], []
    for spec, data, mode, before in pending:
        changed.append(spec["dest"])
        if spec["diff"]:
            diffs.append({"before_header": spec["dest"], "after_header": spec["dest"],
                          "before": before[0].decode("utf-8", "replace") if before else "",
                          "after": spec["content"]})
        if not check:
            atomic_write(spec["dest"], data, mode, owner=(0, 0))
    return changed, made_dirs, diffs


def main():
    module = AnsibleModule(
        argument_spec={
            "specs": {"type": "list", "elements": "dict", "required": True, "no_log": True},
            "dirs": {"type": "list", "elements": "str", "default": []},
        },
        supports_check_mode=True,
    )
    if os.geteuid() != 0:
        module.fail_json(msg=f"vllm_host_files writes root-owned files: run it as root (become), not as "
                             f"{pwd.getpwuid(os.geteuid()).pw_name}")
    changed, made_dirs, diffs = apply_files(module, module.params["specs"], module.params["dirs"])
    result = {"changed": bool(changed or made_dirs), "files": changed, "dirs": made_dirs}
    if module._diff:  # pylint: disable=protected-access
        result["diff"] = diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
