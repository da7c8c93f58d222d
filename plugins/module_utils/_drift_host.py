# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""What ``vllm_drift_info`` reads on the host: files, ``docker inspect``, systemd and ``/proc``.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

Each reader hands what it found to the pure comparisons of ``_drift``. Commands run
through the module (``run_command``, ``get_bin_path``).
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.vllm_fleet.recipes.plugins.module_utils._drift import (
    Diff,
    Entry,
    container_drift,
    exec_start_argv,
    file_drift,
    host_process_drift,
    parse_env,
    retitled,
    sort_drift,
    unit_for_file,
)
from ansible_collections.vllm_fleet.recipes.plugins.module_utils._systemd_show import parse_show

#: ``(inspected object, None)`` or ``(None, error text)``.
Inspected = Tuple[Optional[Dict[str, Any]], Optional[str]]


def read_file(path: str, want_text: bool) -> Dict[str, Any]:
    """What is on disk at ``path``: exists, sha256, mode, text (only when asked), error."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
        mode = "%04o" % (os.stat(path).st_mode & 0o7777)
    except FileNotFoundError:
        return {"exists": False}
    except OSError as exc:
        return {"exists": True, "error": "%s: %s" % (type(exc).__name__, exc.strerror or exc)}
    current: Dict[str, Any] = {"exists": True, "sha256": hashlib.sha256(data).hexdigest(), "mode": mode}
    if want_text:
        current["text"] = data.decode("utf-8", errors="replace")
    return current


def read_proc_list(pid: str, name: str) -> Optional[List[str]]:
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


class Docker:
    """Cached ``docker container inspect`` / ``docker image inspect`` through the module."""

    def __init__(self, module: Any, binary: str) -> None:
        self.module = module
        self.binary = binary
        self.cache: Dict[Tuple[str, str], Inspected] = {}

    def inspect(self, what: str, ref: str) -> Inspected:
        """(object, error): one inspected object, or None and the error text."""
        key = (what, ref)
        if key not in self.cache:
            if not os.path.exists(self.binary):
                self.cache[key] = (None, "%s not found" % self.binary)
            else:
                rc, out, err = self.module.run_command([self.binary, what, "inspect", "--", ref])
                result: Inspected = (None, (err or out).strip() or "rc %d" % rc)
                if rc == 0:
                    try:
                        data = json.loads(out)
                        result = (data[0], None) if data else (None, "empty inspect output")
                    except ValueError as exc:
                        result = (None, "unreadable inspect output: %s" % exc)
                self.cache[key] = result
        return self.cache[key]


def check_containers(docker: Docker, processes: Sequence[Mapping[str, Any]]) -> Tuple[List[Entry], List[Diff]]:
    """Drift of every container process, from ``docker inspect`` of it and of its images."""
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


def check_host_processes(module: Any, processes: Sequence[Mapping[str, Any]]
                         ) -> Tuple[List[Entry], List[Diff], List[Dict[str, str]]]:
    """Drift of every host process (systemd state, ``/proc`` argv and env), and those left unchecked."""
    found: List[Entry] = []
    diffs: List[Diff] = []
    unchecked: List[Dict[str, str]] = []
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
            environ_list = read_proc_list(pid, "environ")
            environ = parse_env(environ_list) if environ_list is not None else None
        if cmdline is not None and retitled(cmdline):
            # the process rewrote its title (vllm-router shows 'vllm::router'): what systemd
            # started it with is the best evidence left
            cmdline = exec_start_argv(props.get("ExecStart", "")) or cmdline
        entries, process_diffs = host_process_drift(process, props, cmdline, environ)
        found += entries
        diffs += process_diffs
    return found, diffs, unchecked


def check_files(files: Sequence[Mapping[str, Any]], units: Sequence[str]) -> Tuple[List[Entry], List[Diff]]:
    """Drift of every planned file against what is on disk."""
    found, diffs = [], []
    for spec in files:
        unit = spec.get("unit") or unit_for_file(spec["dest"], units)
        entries, diff = file_drift(spec, read_file(spec["dest"], spec.get("content") is not None), unit)
        found += entries
        if diff:
            diffs.append(diff)
    return found, diffs


def drift_report(module: Any, files: Sequence[Mapping[str, Any]], processes: Sequence[Mapping[str, Any]],
                 docker_binary: str) -> Dict[str, Any]:
    """The module's result: ``drift``, ``in_sync``, ``unchecked`` and ``diff`` of files and processes."""
    units = [p["unit"] for p in processes]
    found, diffs = check_files(files, units)
    containers = [p for p in processes if p.get("container")]
    entries, container_diffs = check_containers(Docker(module, docker_binary), containers)
    host_entries, host_diffs, unchecked = check_host_processes(module, [p for p in processes if not p.get("container")])
    drift = sort_drift(found + entries + host_entries)
    return dict(changed=False, drift=drift, in_sync=not drift, unchecked=unchecked,
                diff=diffs + container_diffs + host_diffs)
