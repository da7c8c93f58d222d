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
  - Creates each directory of O(dirs) (root-owned, with its mode, O(dir_mode) by default; like
    M(ansible.builtin.file), missing parents get the same mode), then writes each file of O(specs)
    whose content, mode or owner differ, atomically (a temporary file in the same directory, renamed).
  - A file with a C(validate) command is checked first, on a private copy named as the file
    (C(%s) is that copy's path). Every changed file is validated before any is written, so a
    refusal fails the task and writes nothing.
version_added: 0.1.0
author:
  - vllm_fleet maintainers (@vllm-fleet)
options:
  specs:
    description:
      - The files, written root-owned.
    type: list
    elements: dict
    default: []
    suboptions:
      dest:
        description: Absolute path of the file.
        type: str
        required: true
      content:
        description:
          - The text of the file (written as UTF-8). It may hold secrets, so the option is no_log;
            the module's diffs get their text back from the action plugin of the same name.
          - The action plugin also turns off the module's invocation entry in the host's journal, as
            Ansible's masking misses a multi-line content inside the logged list.
        type: str
        required: true
      mode:
        description: Octal mode, for example C("0600").
        type: str
        required: true
      diff:
        description: Show a diff of the file in diff mode; false hides it (files with secrets).
        type: bool
        default: true
      validate:
        description:
          - Command that checks the new content before it replaces anything (C(%s) is the path of a
            private copy named as the file); empty for none.
        type: str
        default: ""
  dirs:
    description:
      - Directories to create (or fix) first, root-owned. Each item is a path, which gets
        O(dir_mode), or a dict C({path, mode}).
    type: list
    elements: raw
    default: []
  dir_mode:
    description:
      - Octal mode of the directories of O(dirs) given without their own C(mode).
    type: str
    default: "0755"
  units:
    description:
      - After writing, read back the managed units as M(vllm_fleet.recipes.vllm_units_info) does (same
        fields, systemd state included) and return them as RV(units). Omitted, nothing is read.
      - Saves a deploy step a separate remote read of its units.
    type: dict
    suboptions:
      unit_dirs:
        description: Directories searched for unit files.
        type: list
        elements: path
        default: [/etc/systemd/system]
      deployments:
        description: Only units of these deployments; all managed units when empty.
        type: list
        elements: str
        default: []
      manifest_dir:
        description: Directory of the units' JSON manifests.
        type: path
        default: /var/lib/vllm-fleet/units
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
# not run by tests/unit/test_install.py: writes under /etc and /usr/local as root on a deploy host
- name: Write an env file and a unit
  vllm_fleet.recipes.vllm_files_write:
    dirs: [/etc/vllm-fleet/demo]
    specs:
      - {dest: /etc/vllm-fleet/demo/engine.env, content: "A=1\n", mode: "0600", diff: false}
      - dest: /etc/systemd/system/vllm-demo.service
        content: "{{ lookup('file', 'vllm-demo.service') }}"
        mode: "0644"
        validate: systemd-analyze verify %s

- name: Create private cache directories (0700) next to a 0755 one, and install a script
  vllm_fleet.recipes.vllm_files_write:
    dir_mode: "0700"
    dirs:
      - /var/cache/vllm-fleet/demo
      - {path: /usr/local/libexec/vllm-fleet, mode: "0755"}
    specs:
      - dest: /usr/local/libexec/vllm-fleet/vllm-group-watchdog
        content: "{{ lookup('file', 'vllm-group-watchdog', rstrip=false) }}"
        mode: "0755"
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
units:
  description: The managed units after writing, as M(vllm_fleet.recipes.vllm_units_info) returns them.
  returned: when O(units) is set
  type: list
  elements: dict
"""

import os
import pwd
import shlex
import shutil
import subprocess
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.vllm_fleet.recipes.plugins.module_utils._atomic_write import atomic_write
from ansible_collections.vllm_fleet.recipes.plugins.module_utils._files_write_args import FILES_WRITE_ARGUMENT_SPEC
from ansible_collections.vllm_fleet.recipes.plugins.module_utils._units_scan import collect, with_systemd_state


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


def _ensure_dir(path, mode, check):
    """Create path (and its missing parents, as ansible.builtin.file does) root-owned with mode,
    or fix an existing one's mode and owner; True when something changed (or would)."""
    if os.path.isdir(path):
        stat = os.stat(path)
        if stat.st_mode & 0o7777 == mode and (stat.st_uid, stat.st_gid) == (0, 0):
            return False
        if not check:
            os.chmod(path, mode)
            os.chown(path, 0, 0)
        return True
    if not check:
        current = os.sep
        for part in path.strip(os.sep).split(os.sep):
            current = os.path.join(current, part)
            if not os.path.isdir(current):
                os.mkdir(current)
                os.chmod(current, mode)
                os.chown(current, 0, 0)
    return True


def dir_specs(dirs, default_mode):
    """(path, mode) of each O(dirs) item: a path (default_mode) or {path, mode}; ValueError when malformed."""
    out = []
    for item in dirs:
        entry = item if isinstance(item, dict) else {"path": item}
        path, mode = entry.get("path"), entry.get("mode") or default_mode
        if not isinstance(path, str) or not os.path.isabs(path) or set(entry) - {"path", "mode"}:
            raise ValueError(f"dirs: {item!r} is neither an absolute path nor {{path, mode}}")
        out.append((path, _mode(mode, f"dirs: {path}")))
    return out


def _mode(text, where):
    try:
        return int(str(text), 8)
    except ValueError:
        raise ValueError(f"{where}: mode {text!r} is not an octal number") from None


def apply_files(module, specs, dirs):
    """Write what differs; dirs as dir_specs returns them. Returns (changed dests, changed dirs, diffs).

    Every changed unit is validated before any file is written: a refusal leaves the host as it was.
    """
    check = module.check_mode
    pending = []
    for spec in specs:
        data, mode = spec["content"].encode("utf-8"), _mode(spec["mode"], spec["dest"])
        before = _current(spec["dest"])
        if before is None or before != (data, mode, 0, 0):
            pending.append((spec, data, mode, before))
    if not check:  # check mode: what a unit calls may not be installed yet
        for spec, data, _file_mode, _before in pending:
            command = spec.get("validate") or ""
            error = _run_validate(command, data, os.path.basename(spec["dest"])) if command else ""
            if error:
                module.fail_json(msg=f"{spec['dest']}: {spec['validate']} refused the new unit "
                                     f"(nothing was written): {error}", files=[])
    made_dirs = [path for path, mode in dirs if _ensure_dir(path, mode, check)]
    changed, diffs = [], []
    for spec, data, mode, before in pending:
        changed.append(spec["dest"])
        if spec.get("diff", True):
            diffs.append({"before_header": spec["dest"], "after_header": spec["dest"],
                          "before": before[0].decode("utf-8", "replace") if before else "",
                          "after": spec["content"]})
        if not check:
            atomic_write(spec["dest"], data, mode, owner=(0, 0))
    return changed, made_dirs, diffs


def main():
    module = AnsibleModule(
        argument_spec=FILES_WRITE_ARGUMENT_SPEC,
        supports_check_mode=True,
    )
    if os.geteuid() != 0:
        module.fail_json(msg=f"vllm_files_write writes root-owned files: run it as root (become), not as "
                             f"{pwd.getpwuid(os.geteuid()).pw_name}")
    try:
        dirs = dir_specs(module.params["dirs"], module.params["dir_mode"])
        changed, made_dirs, diffs = apply_files(module, module.params["specs"], dirs)
    except ValueError as exc:
        module.fail_json(msg=f"vllm_files_write: {exc}", files=[], dirs=[])
    else:
        result = {"changed": bool(changed or made_dirs), "files": changed, "dirs": made_dirs}
        if module._diff:  # pylint: disable=protected-access
            result["diff"] = diffs
        scan = module.params["units"]
        if scan is not None:
            result["units"] = with_systemd_state(module, collect(scan["unit_dirs"], set(scan["deployments"]),
                                                                 scan["manifest_dir"]))
        module.exit_json(**result)


if __name__ == "__main__":
    main()
