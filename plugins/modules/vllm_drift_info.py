#!/usr/bin/python
# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Compare what runs on a host (files, containers, host processes) with the fleet plan."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_drift_info
short_description: Report where a host differs from the fleet plan (files, argv, env, image)
description:
  - Compares the files the fleet plan installs on this host with the files on disk (by sha256, and
    mode when given), and every planned process with what actually runs.
  - For each container process, reads C(docker container inspect) and checks the running command
    (C([Path] + Args) against the plan's C(exec_start) after the image, including an
    C(--entrypoint)), the environment (every planned C(KEY=VALUE) in C(Config.Env), and no key the
    plan does not set beyond the image's own), and the image (C(Config.Image) is the planned
    reference, and the container runs the image that reference names on the host now).
  - For each host process (no container, e.g. the group watchdog or a venv router), asks systemd for
    the unit's state and main PID and checks C(/proc/PID/cmdline) and C(/proc/PID/environ).
  - Values of environment keys that look secret (C(TOKEN), C(SECRET), C(PASSWORD), C(API_KEY), or a
    name ending in C(KEY)) never appear in a detail or a diff. Secret files are compared by hash only.
  - Read-only. Used by C(playbooks/drift.yml).
version_added: 0.1.0
author:
  - vllm_fleet maintainers (@vllm-fleet)
options:
  files:
    description:
      - The files the plan installs on this host.
    type: list
    elements: dict
    default: []
    suboptions:
      dest:
        description: Path of the file on the host.
        type: path
        required: true
      sha256:
        description: sha256 (hex) of the planned content.
        type: str
        required: true
      content:
        description:
          - The planned content. When given and the file differs, the module returns a unified diff.
          - Leave it out for files that hold secrets (C(*.secret.env)); they are compared by hash only.
        type: str
      mode:
        description: Planned octal mode (C(0600)); the file's mode is compared when given.
        type: str
      unit:
        description: Unit the file belongs to, for the report. Derived from the file name when omitted.
        type: str
  processes:
    description:
      - The plan's process entries for this host (C(plan.json) C(deployments.*.processes)), as they are.
      - Keys read are C(unit), C(container) (null for host processes), C(image), C(exec_start), C(env)
        and C(secret_env_keys); other keys are ignored.
    type: list
    elements: dict
    default: []
  docker_binary:
    description: The docker CLI.
    type: path
    default: /usr/bin/docker
attributes:
  check_mode:
    support: full
    description: Read-only; runs the same in check mode.
  diff_mode:
    support: full
    description: Returns the unified diff of every differing file whose planned content was given, and of a differing command or env.
  idempotent:
    support: full
    description: Changes nothing; RV(ignore:changed) is always false.
  platform:
    support: full
    platforms: posix
    description: Hosts running the fleet's units (systemd, docker).
notes:
  - Docker flags before the image (mounts, devices, network) are not read back from the container. They
    live in the unit file, which is compared; a unit file that is current while its container was
    started from an older one shows as an C(argv), C(env) or C(image) drift only when those differ.
  - A secret the container gets through its mounted C(*.secret.env) file is not in C(Config.Env) and is
    not compared there; the secret file itself is compared by hash.
seealso:
  - name: Operations
    description: C(playbooks/drift.yml) and the other day-2 playbooks.
    link: https://github.com/vllm-fleet/recipes/blob/main/docs/operations.md
"""

EXAMPLES = r"""
- name: Compare this host with the plan
  vllm_fleet.recipes.vllm_drift_info:
    files:
      - dest: /etc/systemd/system/vllm-glm-single.service
        sha256: "{{ unit_text | hash('sha256') }}"
        content: "{{ unit_text }}"
        mode: "0644"
      - dest: /etc/vllm-fleet/glm-single/vllm-glm-single.secret.env
        sha256: "{{ secret_text | hash('sha256') }}"
        mode: "0600"
    processes: "{{ plan.deployments['glm-single'].processes | selectattr('host', 'equalto', inventory_hostname) | list }}"
  register: drift

- name: Fail when anything drifted
  ansible.builtin.assert:
    that: drift.in_sync
    fail_msg: "{{ drift.drift | map(attribute='detail') | list }}"
"""

RETURN = r"""
drift:
  description: One entry per difference, sorted by unit, then kind.
  returned: always
  type: list
  elements: dict
  contains:
    unit:
      description: The unit the difference belongs to, or C(-) for a file of no single unit (a config shared by several).
      type: str
      sample: vllm-glm-single.service
    kind:
      description: C(file), C(argv), C(env), C(image) or C(not_running).
      type: str
      sample: image
    detail:
      description: What differs. Never holds the value of a secret-looking key or the content of a secret file.
      type: str
      sample: "vllm/vllm-openai:v0.11.0 is sha256:6c1f0e2b95aa on the host now; the container still runs sha256:0b3d77e8c41f (pulled, not restarted)"
in_sync:
  description: True when RV(drift) is empty.
  returned: always
  type: bool
  sample: false
unchecked:
  description: Processes that could not be compared (no systemd to ask for a host process's PID), with the reason.
  returned: always
  type: list
  elements: dict
  sample: [{"unit": "vllm-glm-tp-rank0-watchdog.service", "reason": "systemctl not found"}]
diff:
  description:
    - Unified-diff material for C(--diff) (Ansible's C(before_header)/C(after_header)/C(before)/C(after) list)
      for each differing file with planned content, each differing command and each differing env.
  returned: always
  type: list
  elements: dict
"""

import difflib
import hashlib
import json
import os
import re

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.vllm_fleet.recipes.plugins.module_utils._systemd_show import parse_show

#: Environment keys whose values are never reported.
SECRET_KEY = re.compile(r"TOKEN|SECRET|PASSWORD|API_KEY|KEY$", re.IGNORECASE)
#: Command-line flags whose next token is never reported.
SECRET_FLAG = re.compile(r"^--?[\w-]*(token|secret|password|api[-_]key)$", re.IGNORECASE)
_ENV_LINE = re.compile(r"^(\s*(?:export\s+)?)([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
#: Order of the kinds in the report.
KINDS = ("not_running", "image", "argv", "env", "file")
HIDDEN = "<hidden>"
_FILE_SUFFIXES = (".service", ".secret.env", ".fabric.env", ".env")
_RUNNING_STATES = ("active", "activating", "reloading")
#: Keys docker may add to a container's env itself.
DOCKER_ENV = ("PATH", "HOSTNAME", "HOME", "TERM")


def looks_secret(key):
    """True for env keys whose values must not be reported."""
    return bool(SECRET_KEY.search(key or ""))


def short_id(image_id):
    """sha256:0123456789abcdef... -> sha256:0123456789ab."""
    if not image_id:
        return "(none)"
    algo, sep, digest = image_id.partition(":")
    return "%s:%s" % (algo, digest[:12]) if sep else image_id[:12]


def mask_text(text):
    """Hide the values of secret-looking ``KEY=value`` lines (env files) in a diff."""
    out = []
    for line in text.splitlines(True):
        match = _ENV_LINE.match(line.rstrip("\r\n"))
        if match and looks_secret(match.group(2)):
            ending = line[len(line.rstrip("\r\n")):]
            line = "%s%s=%s%s" % (match.group(1), match.group(2), HIDDEN, ending)
        out.append(line)
    return "".join(out)


def mask_argv(argv):
    """The argv with the value of secret flags and secret ``KEY=value`` tokens hidden."""
    out = []
    hide_next = False
    for token in argv:
        token = str(token)
        if hide_next:
            out.append(HIDDEN)
            hide_next = False
            continue
        flag, sep, _value = token.partition("=")
        if flag.startswith("-") and SECRET_FLAG.match(flag):
            if sep:
                out.append(flag + "=" + HIDDEN)
            else:
                out.append(token)
                hide_next = True
            continue
        if sep and not flag.startswith("-") and re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", flag) and looks_secret(flag):
            out.append(flag + "=" + HIDDEN)
            continue
        out.append(token)
    return out


def _quote(tokens, limit=80):
    text = " ".join(tokens)
    return "'%s'" % (text if len(text) <= limit else text[:limit - 3] + "...")


def token_diff(running, planned, limit=300):
    """A short description of how two argvs differ, token by token (secret values hidden)."""
    if list(running) != list(planned) and mask_argv(running) == mask_argv(planned):
        return "the value of a secret-looking argument differs (hidden)"
    running, planned = mask_argv(running), mask_argv(planned)
    parts = []
    matcher = difflib.SequenceMatcher(a=running, b=planned, autojunk=False)
    for tag, a_lo, a_hi, b_lo, b_hi in matcher.get_opcodes():
        if tag == "replace":
            parts.append("runs %s where the plan has %s" % (_quote(running[a_lo:a_hi]), _quote(planned[b_lo:b_hi])))
        elif tag == "delete":
            parts.append("runs extra %s" % _quote(running[a_lo:a_hi]))
        elif tag == "insert":
            parts.append("lacks %s" % _quote(planned[b_lo:b_hi]))
    text = "; ".join(parts)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def unit_for_file(dest, units):
    """The planned unit a file belongs to (``U.service``, ``U.env``, ``U.secret.env``), else ``-``."""
    name = os.path.basename(dest)
    best = None
    for unit in units:
        stem = unit[:-len(".service")] if unit.endswith(".service") else unit
        for suffix in _FILE_SUFFIXES:
            if name == stem + suffix and (best is None or len(unit) > len(best)):
                best = unit
    return best or "-"


def _entry(unit, kind, detail):
    return {"unit": unit or "-", "kind": kind, "detail": detail}


# --------------------------------------------------------------------------------------
# files
# --------------------------------------------------------------------------------------

def read_file(path, want_text):
    """What is on disk at ``path``: exists, sha256, mode, text (only when asked), error."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
        mode = "%04o" % (os.stat(path).st_mode & 0o7777)
    except FileNotFoundError:
        return {"exists": False}
    except OSError as exc:
        return {"exists": True, "error": "%s: %s" % (type(exc).__name__, exc.strerror or exc)}
    current = {"exists": True, "sha256": hashlib.sha256(data).hexdigest(), "mode": mode}
    if want_text:
        current["text"] = data.decode("utf-8", errors="replace")
    return current


def file_drift(spec, current, unit="-"):
    """Compare one planned file (``dest``, ``sha256``, ``content``, ``mode``) with ``read_file``'s view.

    Returns ``(drift entries, diff or None)``. Without planned content (secret files) nothing
    of the file's content is returned, only that it differs.
    """
    dest = spec["dest"]
    content = spec.get("content")
    if not current.get("exists"):
        diff = None
        if content is not None:
            diff = {"before_header": "%s (absent)" % dest, "after_header": "%s (plan)" % dest,
                    "before": "", "after": mask_text(content)}
        return [_entry(unit, "file", "%s is missing" % dest)], diff
    if current.get("error"):
        return [_entry(unit, "file", "%s cannot be read (%s)" % (dest, current["error"]))], None
    found = []
    diff = None
    if current["sha256"] != spec["sha256"].lower():
        if content is None:
            found.append(_entry(unit, "file", "%s differs from the plan (secret: compared by sha256 only)" % dest))
        else:
            before, after = current.get("text", ""), content
            lines = [line[:1] for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
                     if line[:1] in "+-" and line[:3] not in ("+++", "---")]
            found.append(_entry(unit, "file", "%s differs from the plan (+%d -%d lines)" % (dest, lines.count("+"), lines.count("-"))))
            diff = {"before_header": "%s (on the host)" % dest, "after_header": "%s (plan)" % dest,
                    "before": mask_text(before), "after": mask_text(after)}
    mode = spec.get("mode")
    if mode and int(str(mode), 8) != int(current["mode"], 8):
        found.append(_entry(unit, "file", "%s has mode %s, the plan %04o" % (dest, current["mode"], int(str(mode), 8))))
    return found, diff


# --------------------------------------------------------------------------------------
# containers (docker inspect)
# --------------------------------------------------------------------------------------

def split_exec_start(exec_start, image):
    """``(docker flags, entrypoint or None, command after the image)`` of a ``docker run`` argv."""
    argv = [str(t) for t in exec_start]
    if image not in argv:
        raise ValueError("image %r is not in exec_start" % image)
    cut = argv.index(image)
    flags, tail = argv[:cut], argv[cut + 1:]
    entrypoint = None
    index = 0
    while index < len(flags):
        token = flags[index]
        if token == "--entrypoint" and index + 1 < len(flags):
            entrypoint = flags[index + 1]
            index += 2
            continue
        if token.startswith("--entrypoint="):
            entrypoint = token.split("=", 1)[1]
        index += 1
    return flags, entrypoint, tail


def planned_command(exec_start, image, image_config=None):
    """What ``[Path] + Args`` of the container must be.

    Returns ``(argv, exact)``: with the image's config (its ENTRYPOINT and CMD) the full
    command, compared exactly; without it, the command after the image, which the running
    command must end with.
    """
    _flags, entrypoint, tail = split_exec_start(exec_start, image)
    if image_config is None:
        return tail, False
    if entrypoint is not None:
        # docker run --entrypoint X drops the image's CMD as well.
        prefix = [entrypoint] if entrypoint else []
        return prefix + tail, True
    prefix = list(image_config.get("Entrypoint") or [])
    return prefix + (tail or list(image_config.get("Cmd") or [])), True


def running_command(container):
    """``[Path] + Args`` of an inspected container."""
    path = container.get("Path")
    return ([path] if path else []) + [str(a) for a in container.get("Args") or []]


def argv_drift(unit, exec_start, image, container, image_config=None):
    """Drift entries (0 or 1) and a diff when the container's command is not the planned one."""
    running = running_command(container)
    planned, exact = planned_command(exec_start, image, image_config)
    if exact:
        same = running == planned
    else:
        same = len(running) >= len(planned) and running[len(running) - len(planned):] == planned
    if same:
        return [], None
    shown = planned if exact else running[:max(0, len(running) - len(planned))] + planned
    detail = "command differs: " + (token_diff(running, shown) or "differs")
    diff = {"before_header": "%s: running command (docker inspect)" % unit, "after_header": "%s: planned command" % unit,
            "before": "\n".join(mask_argv(running)) + "\n", "after": "\n".join(mask_argv(shown)) + "\n"}
    return [_entry(unit, "argv", detail)], diff


def parse_env(pairs):
    """``["K=V", ...]`` -> ``{K: V}`` (a bare ``K`` maps to None)."""
    env = {}
    for pair in pairs or []:
        key, sep, value = str(pair).partition("=")
        env[key] = value if sep else None
    return env


def _value(key, value):
    if looks_secret(key):
        return HIDDEN
    return "(unset)" if value is None else repr(value)


def env_drift(unit, planned, running_env, image_env=None, secret_keys=(), ignore_extra=()):
    """Drift entries and a diff for the planned env against a process's env.

    Every planned key must be set to the planned value. With ``image_env`` (containers), a key
    the plan does not set must not be set either, unless the image sets it to the same value or
    it is one of the plan's secret keys.
    """
    planned = {str(k): ("" if v is None else str(v)) for k, v in (planned or {}).items()}
    found = []
    involved = []
    for key in sorted(planned):
        if key in running_env and running_env[key] == planned[key]:
            continue
        if key not in running_env:
            detail = "%s is not set; the plan sets it" % key
        elif looks_secret(key):
            detail = "%s differs from the plan (secret-looking key: values hidden)" % key
        else:
            detail = "%s is %s; the plan has %s" % (key, _value(key, running_env[key]), _value(key, planned[key]))
        found.append(_entry(unit, "env", detail))
        involved.append(key)
    if image_env is not None:
        skip = set(secret_keys or ()) | set(ignore_extra or ())
        for key in sorted(running_env):
            if key in planned or key in skip or (key in image_env and image_env[key] == running_env[key]):
                continue
            found.append(_entry(unit, "env", "%s is set (%s); the plan does not set it" % (key, _value(key, running_env[key]))))
            involved.append(key)
    if not found:
        return [], None

    def lines(env):
        return "".join("%s=%s\n" % (k, HIDDEN if looks_secret(k) else env[k]) for k in sorted(involved) if k in env and env[k] is not None)
    diff = {"before_header": "%s: running env (keys that differ)" % unit, "after_header": "%s: planned env" % unit,
            "before": lines(running_env), "after": lines(planned)}
    return found, diff


def image_drift(unit, image, container, local_image_id, local_error=None):
    """Drift entries for the image: the planned reference, and the image it names on the host now."""
    configured = (container.get("Config") or {}).get("Image")
    running_id = container.get("Image")
    if configured != image:
        return [_entry(unit, "image", "runs %s; the plan has %s" % (configured, image))]
    if not local_image_id:
        reason = " (%s)" % local_error if local_error else ""
        return [_entry(unit, "image", "%s is not on the host%s; the container runs %s" % (image, reason, short_id(running_id)))]
    if local_image_id != running_id:
        return [_entry(unit, "image", "%s is %s on the host now; the container still runs %s (pulled, not restarted)"
                       % (image, short_id(local_image_id), short_id(running_id)))]
    return []


def not_running_detail(container_name, container, error=None):
    """Why a container counts as not running, or None when it runs."""
    if container is None:
        if error and "no such" not in error.lower():
            return "container %s cannot be inspected: %s" % (container_name, error)
        return "container %s does not exist" % container_name
    state = container.get("State") or {}
    if state.get("Running") and not state.get("Restarting") and not state.get("Paused"):
        return None
    status = state.get("Status") or ("restarting" if state.get("Restarting") else "not running")
    code = state.get("ExitCode")
    return "container %s is %s%s" % (container_name, status, " (exit code %s)" % code if code not in (None, 0) else "")


def container_drift(process, container, image_info=None, local_image_id=None, local_error=None, inspect_error=None):
    """Every drift of one container process; ``image_info`` is the inspected image the container runs.

    ``container`` is one element of ``docker container inspect`` (None when missing),
    ``image_info`` one element of ``docker image inspect <container's Image>``, ``local_image_id``
    the ``Id`` of ``docker image inspect <planned reference>``.
    """
    unit = process["unit"]
    name = process["container"]
    reason = not_running_detail(name, container, inspect_error)
    if reason:
        return [_entry(unit, "not_running", reason)], []
    image = process.get("image") or ""
    image_config = (image_info or {}).get("Config") if image_info else None
    found = image_drift(unit, image, container, local_image_id, local_error)
    diffs = []
    argv_found, argv_diff = argv_drift(unit, process.get("exec_start") or [], image, container, image_config)
    found += argv_found
    image_env = parse_env((image_config or {}).get("Env")) if image_info else None
    env_found, env_diff = env_drift(unit, process.get("env") or {}, parse_env((container.get("Config") or {}).get("Env")),
                                    image_env, process.get("secret_env_keys") or (), DOCKER_ENV)
    found += env_found
    diffs += [d for d in (argv_diff, env_diff) if d]
    return found, diffs


# --------------------------------------------------------------------------------------
# host processes (systemd + /proc)
# --------------------------------------------------------------------------------------

def host_argv_matches(exec_start, cmdline):
    """True when ``/proc/PID/cmdline`` is the planned argv (a script's interpreter may come first)."""
    planned = [str(t) for t in exec_start]
    if cmdline == planned:
        return True
    if not planned:
        return False
    tail = planned[1:]
    cut = len(cmdline) - len(tail)
    return cut > 0 and cmdline[cut:] == tail and planned[0] in cmdline[:cut]


def retitled(cmdline):
    """True when /proc/PID/cmdline is a rewritten process title ('vllm::router   '), not an argv.

    Units always start an absolute path, so a real argv starts with '/'; a title does not.
    """
    return not cmdline or not cmdline[0].startswith("/")


def exec_start_argv(value):
    """The argv of systemd's ``ExecStart`` property (``{ path=... ; argv[]=A B C ; ... }``)."""
    match = re.search(r"argv\[\]=(.*?) ;", value or "")
    return match.group(1).split() if match else None


def host_process_drift(process, props, cmdline=None, environ=None):
    """Drift of a process systemd runs directly: unit state, argv and env of its main PID."""
    unit = process["unit"]
    props = props or {}
    state = props.get("ActiveState") or "unknown"
    if state not in _RUNNING_STATES:
        sub = props.get("SubState")
        return [_entry(unit, "not_running", "unit is %s%s" % (state, " (%s)" % sub if sub else ""))], []
    found, diffs = [], []
    exec_start = [str(t) for t in process.get("exec_start") or []]
    if cmdline is not None and exec_start and not host_argv_matches(exec_start, cmdline):
        # A script's interpreter comes first in /proc/PID/cmdline: compare from the program on.
        shown = cmdline[cmdline.index(exec_start[0]):] if exec_start[0] in cmdline else cmdline
        found.append(_entry(unit, "argv", "command differs: " + (token_diff(shown, exec_start) or "differs")))
        diffs.append({"before_header": "%s: running command (/proc)" % unit, "after_header": "%s: planned command" % unit,
                      "before": "\n".join(mask_argv(cmdline)) + "\n", "after": "\n".join(mask_argv(exec_start)) + "\n"})
    if environ is not None:
        env_found, env_diff = env_drift(unit, process.get("env") or {}, environ)
        found += env_found
        if env_diff:
            diffs.append(env_diff)
    return found, diffs


def read_proc_list(pid, name):
    """``/proc/PID/cmdline`` or ``environ`` as a list of strings, or None when unreadable."""
    try:
        with open("/proc/%s/%s" % (pid, name), "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    items = data.split(b"\0")
    if items and items[-1] == b"":
        items.pop()
    return [item.decode("utf-8", errors="replace") for item in items]


# --------------------------------------------------------------------------------------
# module
# --------------------------------------------------------------------------------------

def sort_drift(entries):
    return sorted(entries, key=lambda e: (e["unit"] == "-", e["unit"], KINDS.index(e["kind"]), e["detail"]))


class Docker:
    """Cached ``docker container inspect`` / ``docker image inspect`` through the module."""

    def __init__(self, module, binary):
        self.module = module
        self.binary = binary
        self.cache = {}

    def inspect(self, what, ref):
        """(object, error): one inspected object, or None and the error text."""
        key = (what, ref)
        if key not in self.cache:
            if not os.path.exists(self.binary):
                self.cache[key] = (None, "%s not found" % self.binary)
            else:
                rc, out, err = self.module.run_command([self.binary, what, "inspect", "--", ref])
                result = (None, (err or out).strip() or "rc %d" % rc)
                if rc == 0:
                    try:
                        data = json.loads(out)
                        result = (data[0], None) if data else (None, "empty inspect output")
                    except ValueError as exc:
                        result = (None, "unreadable inspect output: %s" % exc)
                self.cache[key] = result
        return self.cache[key]


def check_containers(docker, processes):
    found, diffs = [], []
    for process in processes:
        container, error = docker.inspect("container", process["container"])
        image_info = local_id = local_error = None
        if container is not None:
            image_info = docker.inspect("image", container.get("Image") or "")[0] if container.get("Image") else None
            local, local_error = docker.inspect("image", process.get("image") or "")
            local_id = (local or {}).get("Id")
        entries, process_diffs = container_drift(process, container, image_info, local_id, local_error, error)
        found += entries
        diffs += process_diffs
    return found, diffs


def check_host_processes(module, processes):
    found, diffs, unchecked = [], [], []
    if not processes:
        return found, diffs, unchecked
    systemctl = module.get_bin_path("systemctl")
    if not systemctl:
        return found, diffs, [{"unit": p["unit"], "reason": "systemctl not found"} for p in processes]
    cmd = [systemctl, "show", "--property=Id,ActiveState,SubState,MainPID,ExecStart"] + [p["unit"] for p in processes]
    rc, out, err = module.run_command(cmd)
    if rc != 0:
        reason = "systemctl show failed (rc %d): %s" % (rc, err.strip())
        return found, diffs, [{"unit": p["unit"], "reason": reason} for p in processes]
    states = parse_show(out)
    for process in processes:
        props = states.get(process["unit"], {})
        pid = props.get("MainPID") or "0"
        cmdline = environ = None
        if pid.isdigit() and int(pid) > 0:
            cmdline = read_proc_list(pid, "cmdline")
            environ = read_proc_list(pid, "environ")
            environ = parse_env(environ) if environ is not None else None
        if cmdline is not None and retitled(cmdline):
            # the process rewrote its title (vllm-router shows 'vllm::router'): what systemd
            # started it with is the best evidence left
            cmdline = exec_start_argv(props.get("ExecStart", "")) or cmdline
        entries, process_diffs = host_process_drift(process, props, cmdline, environ)
        found += entries
        diffs += process_diffs
    return found, diffs, unchecked


def check_files(files, units):
    found, diffs = [], []
    for spec in files:
        unit = spec.get("unit") or unit_for_file(spec["dest"], units)
        entries, diff = file_drift(spec, read_file(spec["dest"], spec.get("content") is not None), unit)
        found += entries
        if diff:
            diffs.append(diff)
    return found, diffs


def main():
    module = AnsibleModule(
        argument_spec=dict(
            files=dict(type="list", elements="dict", default=[], options=dict(
                dest=dict(type="path", required=True),
                sha256=dict(type="str", required=True),
                content=dict(type="str"),
                mode=dict(type="str"),
                unit=dict(type="str"),
            )),
            processes=dict(type="list", elements="dict", default=[]),
            docker_binary=dict(type="path", default="/usr/bin/docker"),
        ),
        supports_check_mode=True,
    )
    processes = module.params["processes"]
    for index, process in enumerate(processes):
        missing = [key for key in ("unit", "exec_start") if not process.get(key)]
        if process.get("container") and process.get("image") not in [str(t) for t in process.get("exec_start") or []]:
            missing.append("an image that is in exec_start")
        if missing:
            module.fail_json(msg="processes[%d] (%s) lacks %s" % (index, process.get("unit"), ", ".join(missing)))
    units = [p["unit"] for p in processes]
    found, diffs = check_files(module.params["files"], units)
    containers = [p for p in processes if p.get("container")]
    entries, container_diffs = check_containers(Docker(module, module.params["docker_binary"]), containers)
    host_entries, host_diffs, unchecked = check_host_processes(module, [p for p in processes if not p.get("container")])
    drift = sort_drift(found + entries + host_entries)
    module.exit_json(changed=False, drift=drift, in_sync=not drift, unchecked=unchecked, diff=diffs + container_diffs + host_diffs)


if __name__ == "__main__":
    main()
