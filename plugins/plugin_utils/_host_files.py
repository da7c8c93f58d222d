# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Which of a host's plan files one deploy step installs, and what a change of them restarts.

Pure functions behind the ``vllm_host_files`` action (plugins/action/vllm_host_files.py): the
action hands the selected files to the host, and works out from the files that changed which
units and restart groups must restart. No ansible-core import (the scan's kind rule comes from
module_utils/_units_scan, which has none either): unit tests call these directly.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional

from ansible_collections.vllm_fleet.recipes.plugins.module_utils._units_scan import unit_kind

UNIT_SUFFIX = ".service"
#: Unit manifests (``<unit>.service.json``, _plan_model.UNIT_MANIFEST_DIR): they describe a unit
#: and restart nothing.
MANIFEST_SUFFIX = ".service.json"
ENV_SUFFIX = ".env"
UNIT_MODE = "0644"
ENV_MODE = "0600"
DIR_MODE = "0755"
#: systemd states in which a unit counts as running (anything else restarts its group).
RUNNING_STATES = ("active", "activating", "reloading")

Process = Mapping[str, Any]
PlanFile = Mapping[str, Any]


#: Mode of an engine's compile cache directory.
COMPILE_CACHE_MODE = "0700"


def file_kind(dest: str) -> str:
    """'unit', 'env', 'manifest' or 'config', from the destination's name."""
    if dest.endswith(UNIT_SUFFIX):
        return "unit"
    if dest.endswith(MANIFEST_SUFFIX):
        return "manifest"
    if dest.endswith(ENV_SUFFIX):
        return "env"
    return "config"


def select_processes(processes: Sequence[Process], kinds: Iterable[str],
                     only_groups: Optional[Iterable[str]] = None) -> list[dict[str, Any]]:
    """This step's processes: of these kinds, and of these restart groups when given (a rollout batch)."""
    kinds = set(kinds)
    groups = set(only_groups or ())
    return [dict(p) for p in processes
            if p["kind"] in kinds and (not groups or p["restart_group"] in groups)]


def _owned_names(procs: Sequence[Process], configs: Iterable[str]) -> set[str]:
    names = {p["unit"] for p in procs}
    names |= {os.path.basename(p["manifest"]) for p in procs if p.get("manifest")}
    names |= {os.path.basename(p["env_file"]) for p in procs if p.get("env_file")}
    names |= {os.path.basename(p["secret_file"]) for p in procs if p.get("secret_file")}
    if procs:
        names |= set(configs)
    return names


def select_files(host_files: Sequence[PlanFile], procs: Sequence[Process], configs: Iterable[str]) -> list[dict[str, Any]]:
    """The host's plan files that belong to these processes (their units, env and secret files, configs)."""
    names = _owned_names(procs, configs)
    return [dict(f) for f in host_files if os.path.basename(f["dest"]) in names]


def secret_files(procs: Sequence[Process]) -> set[str]:
    """Env files that hold secrets (API keys): their diff is never shown."""
    return {p["secret_file"] for p in procs if p.get("secret_file")}


def directories(files: Sequence[PlanFile], procs: Sequence[Process] = ()) -> list[Any]:
    """The directories a step creates before its files (``vllm_files_write`` dirs): those of its env and
    config files (unit directories exist already), then each process's compile cache as
    ``{path, mode}`` (0700: compiled kernels, kept across restarts and upgrades)."""
    parents: list[Any] = sorted({os.path.dirname(f["dest"]) for f in files if file_kind(f["dest"]) != "unit"})
    caches = sorted({p["compile_cache"] for p in procs if p.get("compile_cache")})
    return parents + [{"path": cache, "mode": COMPILE_CACHE_MODE} for cache in caches]


def file_specs(files: Sequence[PlanFile], contents: Mapping[str, str], procs: Sequence[Process],
               validate: str = "") -> list[dict[str, Any]]:
    """What the host writes, per file: content, mode, whether a diff may be shown, validate command.

    A unit is validated (``%s`` = the candidate file, ``%n`` = the unit's name) before it replaces
    anything; env files are 0600, and a secret file's diff is hidden.
    """
    secrets = secret_files(procs)
    specs = []
    for entry in files:
        dest = entry["dest"]
        kind = file_kind(dest)
        if entry["src"] not in contents:
            raise ValueError(f"the plan has no rendered content for {dest} ({entry['src']}); compile it with "
                             f"return_content: true")
        mode = {"unit": UNIT_MODE, "env": ENV_MODE}.get(kind, str(entry.get("mode") or UNIT_MODE))
        specs.append({
            "dest": dest,
            "content": contents[entry["src"]],
            "mode": mode,
            "diff": dest not in secrets,
            "validate": validate.replace("%n", os.path.basename(dest)) if kind == "unit" and validate else "",
        })
    return specs


def changed_units(procs: Sequence[Process], changed_dests: Iterable[str]) -> list[str]:
    """Units to restart for these changed files: a changed unit, env or secret file restarts its own
    unit; a changed config file restarts every unit of the step; a manifest restarts nothing."""
    changed = set(changed_dests)
    units = {os.path.basename(d) for d in changed if file_kind(d) == "unit"}
    units |= {p["unit"] for p in procs if p.get("env_file") in changed or p.get("secret_file") in changed}
    if any(file_kind(d) == "config" for d in changed):
        units |= {p["unit"] for p in procs}
    return sorted(units)


def inactive_units(procs: Sequence[Process], units_info: Sequence[Mapping[str, Any]]) -> list[str]:
    """Units of these processes that systemd reports as not running."""
    mine = {p["unit"] for p in procs}
    return sorted(u["unit"] for u in units_info
                  if u["unit"] in mine and u.get("active_state") not in RUNNING_STATES)


def changed_groups(procs: Sequence[Process], units: Iterable[str], inactive: Iterable[str] = (),
                   changed_images: Iterable[str] = (), force_groups: Iterable[str] = ()) -> list[str]:
    """Restart groups of this host to restart: a changed or stopped unit, a changed image, or forced
    (new weights)."""
    restart = set(units) | set(inactive)
    images = set(changed_images)
    forced = set(force_groups)
    return sorted({p["restart_group"] for p in procs
                   if p["unit"] in restart or p.get("image") in images or p["restart_group"] in forced})


#: The units directory systemd reads; a plan's units may live in others too.
SYSTEM_UNIT_DIR = "/etc/systemd/system"


def unit_dirs(host_files: Sequence[PlanFile]) -> list[str]:
    """Where this host's managed units are: systemd's directory and every directory of a plan unit."""
    dirs = [SYSTEM_UNIT_DIR] + [os.path.dirname(f["dest"]) for f in host_files if file_kind(f["dest"]) == "unit"]
    return list(dict.fromkeys(dirs))


def stale_units(units_info: Sequence[Mapping[str, Any]], kinds: Iterable[str],
                planned_units: Iterable[str]) -> list[dict[str, Any]]:
    """Units of these kinds on the host (as scanned) that the plan no longer places there."""
    wanted = {unit_kind(kind) for kind in kinds}
    planned = set(planned_units)
    return [{key: u.get(key) for key in ("unit", "path", "env_file", "manifest", "deployment")}
            for u in units_info if u.get("kind") in wanted and u["unit"] not in planned]


#: Unit file states ansible.builtin.systemd_service counts as enabled.
ENABLED_STATES = ("enabled", "enabled-runtime", "static", "generated", "transient")


def units_to_enable(procs: Sequence[Process], present: Sequence[Mapping[str, Any]], check_mode: bool) -> list[str]:
    """This step's units that are not enabled at boot yet. In check mode a new unit was not written,
    so only the ones present on the host are listed."""
    enabled = {u["unit"] for u in present if u.get("unit_file_state") in ENABLED_STATES}
    known = {u["unit"] for u in present}
    units = dict.fromkeys(p["unit"] for p in procs)
    return [unit for unit in units if unit not in enabled and (unit in known or not check_mode)]
