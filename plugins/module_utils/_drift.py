# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Drift comparisons of ``vllm_drift_info``: what runs on a host against the fleet plan.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

Pure functions: each compares what was read from the host (a file's hash and mode, a
``docker container inspect`` object, ``/proc/PID/cmdline`` and ``environ``) with the plan
and returns drift entries (``{"unit", "kind", "detail"}``) and ``--diff`` material. Reading
the host is ``_drift_host``'s job. Values of secret-looking keys and flags never appear in
an entry or a diff.
"""

from __future__ import annotations

import difflib
import os
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, cast

#: One difference: ``{"unit": ..., "kind": ..., "detail": ...}``.
Entry = Dict[str, str]
#: Ansible's ``--diff`` material: ``before_header``, ``after_header``, ``before``, ``after``.
Diff = Dict[str, str]

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


def looks_secret(key: Optional[str]) -> bool:
    """True for env keys whose values must not be reported."""
    return bool(SECRET_KEY.search(key or ""))


def short_id(image_id: Optional[str]) -> str:
    """sha256:0123456789abcdef... -> sha256:0123456789ab."""
    if not image_id:
        return "(none)"
    algo, sep, digest = image_id.partition(":")
    return "%s:%s" % (algo, digest[:12]) if sep else image_id[:12]


def mask_text(text: str) -> str:
    """Hide the values of secret-looking ``KEY=value`` lines (env files) in a diff."""
    out = []
    for line in text.splitlines(True):
        match = _ENV_LINE.match(line.rstrip("\r\n"))
        if match and looks_secret(match.group(2)):
            ending = line[len(line.rstrip("\r\n")):]
            line = "%s%s=%s%s" % (match.group(1), match.group(2), HIDDEN, ending)
        out.append(line)
    return "".join(out)


def mask_argv(argv: Sequence[Any]) -> List[str]:
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


def _quote(tokens: Sequence[str], limit: int = 80) -> str:
    text = " ".join(tokens)
    return "'%s'" % (text if len(text) <= limit else text[:limit - 3] + "...")


def token_diff(running: Sequence[str], planned: Sequence[str], limit: int = 300) -> str:
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


def unit_for_file(dest: str, units: Sequence[str]) -> str:
    """The planned unit a file belongs to (``U.service``, ``U.env``, ``U.secret.env``), else ``-``."""
    name = os.path.basename(dest)
    best = None
    for unit in units:
        stem = unit[:-len(".service")] if unit.endswith(".service") else unit
        for suffix in _FILE_SUFFIXES:
            if name == stem + suffix and (best is None or len(unit) > len(best)):
                best = unit
    return best or "-"


def _entry(unit: Optional[str], kind: str, detail: str) -> Entry:
    return {"unit": unit or "-", "kind": kind, "detail": detail}


def sort_drift(entries: Sequence[Entry]) -> List[Entry]:
    """Entries sorted by unit (files of no single unit last), then kind, then detail."""
    return sorted(entries, key=lambda e: (e["unit"] == "-", e["unit"], KINDS.index(e["kind"]), e["detail"]))


def first_invalid_process(processes: Sequence[Mapping[str, Any]]) -> Optional[str]:
    """Why the first unusable process entry cannot be compared, or None when all can."""
    for index, process in enumerate(processes):
        missing = [key for key in ("unit", "exec_start") if not process.get(key)]
        if process.get("container") and process.get("image") not in [str(t) for t in process.get("exec_start") or []]:
            missing.append("an image that is in exec_start")
        if missing:
            return "processes[%d] (%s) lacks %s" % (index, process.get("unit"), ", ".join(missing))
    return None


# --------------------------------------------------------------------------------------
# files
# --------------------------------------------------------------------------------------

def file_drift(spec: Mapping[str, Any], current: Mapping[str, Any],
               unit: str = "-") -> Tuple[List[Entry], Optional[Diff]]:
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

def split_exec_start(exec_start: Sequence[Any], image: str) -> Tuple[List[str], Optional[str], List[str]]:
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


def planned_command(exec_start: Sequence[Any], image: str,
                    image_config: Optional[Mapping[str, Any]] = None) -> Tuple[List[str], bool]:
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


def running_command(container: Mapping[str, Any]) -> List[str]:
    """``[Path] + Args`` of an inspected container."""
    path = container.get("Path")
    return ([path] if path else []) + [str(a) for a in container.get("Args") or []]


def argv_drift(unit: str, exec_start: Sequence[Any], image: str, container: Mapping[str, Any],
               image_config: Optional[Mapping[str, Any]] = None) -> Tuple[List[Entry], Optional[Diff]]:
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


def parse_env(pairs: Optional[Sequence[Any]]) -> Dict[str, Optional[str]]:
    """``["K=V", ...]`` -> ``{K: V}`` (a bare ``K`` maps to None)."""
    env: Dict[str, Optional[str]] = {}
    for pair in pairs or []:
        key, sep, value = str(pair).partition("=")
        env[key] = value if sep else None
    return env


def _value(key: str, value: Optional[str]) -> str:
    if looks_secret(key):
        return HIDDEN
    return "(unset)" if value is None else repr(value)


def env_drift(unit: str, planned: Optional[Mapping[str, Any]], running_env: Mapping[str, Optional[str]],
              image_env: Optional[Mapping[str, Optional[str]]] = None, secret_keys: Sequence[str] = (),
              ignore_extra: Sequence[str] = ()) -> Tuple[List[Entry], Optional[Diff]]:
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

    def lines(env: Mapping[str, Optional[str]]) -> str:
        return "".join("%s=%s\n" % (k, HIDDEN if looks_secret(k) else env[k]) for k in sorted(involved) if k in env and env[k] is not None)
    diff = {"before_header": "%s: running env (keys that differ)" % unit, "after_header": "%s: planned env" % unit,
            "before": lines(running_env), "after": lines(planned)}
    return found, diff


def image_drift(unit: str, image: str, container: Mapping[str, Any], local_image_id: Optional[str],
                local_error: Optional[str] = None) -> List[Entry]:
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


def not_running_detail(container_name: str, container: Optional[Mapping[str, Any]],
                       error: Optional[str] = None) -> Optional[str]:
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


def container_drift(process: Mapping[str, Any], container: Optional[Mapping[str, Any]],
                    image_info: Optional[Mapping[str, Any]] = None, local_image_id: Optional[str] = None,
                    local_error: Optional[str] = None,
                    inspect_error: Optional[str] = None) -> Tuple[List[Entry], List[Diff]]:
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
    container = cast(Mapping[str, Any], container)  # not None here: a missing one has a reason above
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

def host_argv_matches(exec_start: Sequence[Any], cmdline: Sequence[str]) -> bool:
    """True when ``/proc/PID/cmdline`` is the planned argv (a script's interpreter may come first)."""
    planned = [str(t) for t in exec_start]
    if cmdline == planned:
        return True
    if not planned:
        return False
    tail = planned[1:]
    cut = len(cmdline) - len(tail)
    return cut > 0 and cmdline[cut:] == tail and planned[0] in cmdline[:cut]


def retitled(cmdline: Sequence[str]) -> bool:
    """True when /proc/PID/cmdline is a rewritten process title ('vllm::router   '), not an argv.

    Units always start an absolute path, so a real argv starts with '/'; a title does not.
    """
    return not cmdline or not cmdline[0].startswith("/")


def exec_start_argv(value: Optional[str]) -> Optional[List[str]]:
    """The argv of systemd's ``ExecStart`` property (``{ path=... ; argv[]=A B C ; ... }``)."""
    match = re.search(r"argv\[\]=(.*?) ;", value or "")
    return match.group(1).split() if match else None


def host_process_drift(process: Mapping[str, Any], props: Optional[Mapping[str, str]],
                       cmdline: Optional[List[str]] = None,
                       environ: Optional[Mapping[str, Optional[str]]] = None) -> Tuple[List[Entry], List[Diff]]:
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
