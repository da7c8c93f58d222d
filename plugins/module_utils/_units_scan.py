# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Reading the managed units back from a host: manifests (or header comments) and systemd state.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

Shared by vllm_units_info (status, teardown, rollback snapshots) and vllm_files_write (which
scans the units after writing a deploy step's files, so the step needs no separate read).
"""

from __future__ import annotations

import json
import os
import re

from ansible_collections.vllm_fleet.recipes.plugins.module_utils._systemd_show import parse_show

MANAGED_HEADER = "# Managed by vllm_fleet.recipes"
MANIFEST_SCHEMA = "vllm_fleet.unit/v1"
_MANIFEST_FIELDS = ("deployment", "recipe", "deploy_type", "process", "host", "env_file", "container")
_HEADER_FIELDS = re.compile(r"(\w+)=(\S*)")
_SHOW_PROPERTIES = ("Id", "ActiveState", "SubState", "UnitFileState", "NRestarts")


def unit_kind(plan_kind: str) -> str:
    """A plan process kind as the scan reports it: mooncake_master and mooncake_store are one kind,
    ``mooncake``, as the roles select them."""
    return "mooncake" if plan_kind.startswith("mooncake") else plan_kind


def parse_unit(path, text):
    """The header fields and the few directives status and teardown need, or None if unmanaged."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith(MANAGED_HEADER):
        return None
    info = {"unit": os.path.basename(path), "path": path, "deployment": None, "recipe": None,
            "deploy_type": None, "process": None, "host": None, "env_file": None, "container": None}
    for line in lines[1:]:
        if not line.startswith("#"):
            break
        body = line[1:].strip()
        if body.startswith("process="):
            # "process=decode rank 0 host=h200-d1 gpus=0-7": the process part has blanks.
            head, _sep, rest = body.partition(" host=")
            info["process"] = head[len("process="):]
            fields = dict(_HEADER_FIELDS.findall("host=" + rest)) if _sep else {}
            info["host"] = fields.get("host")
        else:
            for key, value in _HEADER_FIELDS.findall(body):
                if key in ("deployment", "recipe", "deploy_type"):
                    info[key] = value
    for line in lines:
        if line.startswith("EnvironmentFile=") and info["env_file"] is None:
            info["env_file"] = line.split("=", 1)[1].lstrip("-")
        elif line.startswith("ExecStartPre=") and " rm -f " in line and info["container"] is None:
            info["container"] = line.rsplit(" ", 1)[1]
    process = info["process"] or ""
    if process.startswith("watchdog") or " watchdog" in process:
        info["kind"] = "watchdog"
    elif process.startswith("router"):
        info["kind"] = "router"
    elif process.startswith("mooncake") or " mooncake" in process:
        info["kind"] = "mooncake"
    else:
        info["kind"] = "engine"
    info["manifest"] = None
    return info


def read_manifest(path, unit):
    """The manifest of ``unit`` at ``path`` as a dict, or None when missing, unreadable or not one."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("schema") != MANIFEST_SCHEMA or data.get("unit") != unit:
        return None
    return data


def from_manifest(path, manifest_path, data):
    """What the units list reports for a unit at ``path`` described by its manifest."""
    info = {"unit": os.path.basename(path), "path": path, "manifest": manifest_path}
    for key in _MANIFEST_FIELDS:
        value = data.get(key)
        info[key] = value if isinstance(value, str) else None
    info["kind"] = unit_kind(data.get("kind") if isinstance(data.get("kind"), str) else "engine")
    return info


def describe_unit(path, text, manifest_dir):
    """A managed unit's fields, from its manifest when it has one, or None if the unit is not ours."""
    if not text.startswith(MANAGED_HEADER):
        return None
    unit = os.path.basename(path)
    manifest_path = os.path.join(manifest_dir, unit + ".json")
    data = read_manifest(manifest_path, unit)
    return parse_unit(path, text) if data is None else from_manifest(path, manifest_path, data)


def file_mode(path):
    try:
        return "%04o" % (os.stat(path).st_mode & 0o7777)
    except OSError:
        return None


def collect(unit_dirs, deployments, manifest_dir):
    units = []
    for directory in unit_dirs:
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in names:
            path = os.path.join(directory, name)
            if not name.endswith(".service") or not os.path.isfile(path):
                continue
            try:
                with open(path, encoding="utf-8", errors="replace") as handle:
                    info = describe_unit(path, handle.read(), manifest_dir)
            except OSError:
                continue
            if info is None or (deployments and info["deployment"] not in deployments):
                continue
            info["env_file_mode"] = file_mode(info["env_file"]) if info["env_file"] else None
            units.append(info)
    return sorted(units, key=lambda u: u["unit"])


def with_systemd_state(module, units, query=True):
    """Add each unit's ActiveState, SubState, UnitFileState and NRestarts (one systemctl show call;
    all None without ``query``)."""
    states = {}
    if units and query:
        systemctl = module.get_bin_path("systemctl", required=True)
        cmd = [systemctl, "show", "--property=" + ",".join(_SHOW_PROPERTIES)] + [u["unit"] for u in units]
        rc, out, err = module.run_command(cmd)
        if rc != 0:
            module.fail_json(msg="systemctl show failed (rc %d): %s" % (rc, err.strip()), cmd=cmd)
        states = parse_show(out)
    for info in units:
        props = states.get(info["unit"], {})
        info["active_state"] = props.get("ActiveState")
        info["sub_state"] = props.get("SubState")
        info["unit_file_state"] = props.get("UnitFileState")
        restarts = props.get("NRestarts")
        info["n_restarts"] = int(restarts) if restarts and restarts.isdigit() else None
    return units
