# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Offline rendering of a fleet plan into reviewable files.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

Every function here is pure: it takes a :class:`FleetPlan` and returns text.
:func:`render` returns ``{relative_path: content}`` for the whole fleet::

    plan.json                                  machine-readable plan (sorted keys)
    PLAN.md                                    per deployment: a Mermaid topology diagram (_plan_diagram),
                                               then host -> process -> rank -> ports -> GPUs -> image -> command
    <deployment>/<host>/<unit>.service         one systemd unit per process
    <deployment>/<host>/<unit>.env             its environment file (install with mode 0600)
    <deployment>/<host>/<unit>.docker.json     the docker argv (container processes)
    <deployment>/<host>/router.json            vllm-router settings (PD, multi-instance Mooncake)
    <deployment>/<host>/mooncake.json          Mooncake client config (engine hosts)
    <deployment>/<host>/mooncake-store.json    Mooncake store config (store hosts)
    monitoring/targets/<deployment>.json       Prometheus file_sd targets (_monitoring)
    monitoring/vllm-fleet.rules.yml            Prometheus alert rules (_monitoring)

Output is deterministic: no timestamps, sorted keys, stable order, so
re-rendering unchanged input changes no byte. :func:`file_mode` gives the
mode to write each file with (env files 0600).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from typing import Any, Optional

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _monitoring
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _unitfile as U
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._argv_tools import find_placeholders
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._plan_diagram import deployment_diagram, number_ranges
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._plan_model import (
    UNIT_MANIFEST_SCHEMA,
    DeploymentPlan,
    FleetPlan,
    Process,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._plan_view import plan_to_dict

__all__ = [
    "MANAGED_HEADER",
    "RenderError",
    "file_mode",
    "install_manifest",
    "render",
    "render_env_file",
    "render_plan_json",
    "render_plan_md",
    "render_secret_file",
    "render_unit",
    "render_unit_manifest",
    "systemd_quote",
]

MANAGED_HEADER = "Managed by vllm_fleet.recipes"
#: One quoted ``Exec*`` argument (re-exported for callers and tests).
systemd_quote = U.systemd_quote


class RenderError(ValueError):
    """The plan would produce a broken or unsafe file."""


def file_mode(path: str) -> int:
    """Mode to write a rendered file with: env files hold secrets (0600)."""
    return 0o600 if path.endswith(".env") else 0o644


def _describe(proc: Process) -> str:
    where = proc.role if proc.rank is None else f"{proc.role} rank {proc.rank}"
    if proc.instance is not None:
        where = f"instance {proc.instance} {where}"
    return where


def _keys(plan: DeploymentPlan, proc: Process) -> dict[str, str]:
    """Inventory keys named when a value of ``proc`` cannot be written."""
    where = f"vllm_deployment[{plan.name}]"
    # a pinned record (resolution_file) wrote the program's argv where the recipe would have
    recipe = proc.origin or "recipe argv"
    return {
        "host": f"inventory host name {proc.host!r}",
        "argv": f"{where} command of {proc.unit} on {proc.host} ({recipe}, advanced_args, "
                "container_args, image, placeholders)",
        "env_file": f"{where}.config_dir",
        "docker": f"{where}.docker_binary",
    }


def render_unit(plan: DeploymentPlan, proc: Process) -> str:
    """The systemd unit of one process (docker-wrapped or a venv binary)."""
    spec = plan.spec
    docker = spec.docker_binary
    stop = spec.unit.stop_timeout
    keys = _keys(plan, proc)
    comments = [
        (f"{MANAGED_HEADER}: re-rendered from the inventory; local edits are overwritten.", "header"),
        (f"deployment={plan.name} recipe={spec.recipe} deploy_type={plan.deploy_type}",
         f"vllm_deployment[{plan.name}].recipe"),
        (f"process={_describe(proc)} host={proc.host} gpus=" + (",".join(str(g) for g in proc.gpus) or "-"),
         keys["host"]),
    ]
    unit: list[U.Directive] = [
        ("Description", f"vLLM {plan.name}: {_describe(proc)} on {proc.host}", keys["host"]),
        ("Documentation", "https://github.com/vllm-project/recipes", "Documentation"),
    ]
    if proc.runtime == "docker":
        unit += [("After", "docker.service network-online.target", "After"),
                 ("Requires", "docker.service", "Requires"),
                 ("Wants", "network-online.target", "Wants")]
    else:
        unit += [("After", "network-online.target", "After"), ("Wants", "network-online.target", "Wants")]
    service: list[U.Directive] = [
        ("Type", "exec", "Type"),
        ("EnvironmentFile", U.check_path(keys["env_file"], proc.env_file), keys["env_file"]),
    ]
    if proc.runtime == "docker":
        service.append(("ExecStartPre", U.exec_directive("ExecStartPre", [docker, "rm", "-f", proc.unit],
                                                         keys["docker"], prefix="-", one_per_line=False)))
    service.append(("ExecStart", U.exec_directive("ExecStart", proc.exec_argv, keys["argv"])))
    if proc.runtime == "docker":
        service.append(("ExecStop", U.exec_directive("ExecStop", [docker, "stop", "-t", str(stop), proc.unit],
                                                     keys["docker"], one_per_line=False)))
    service += [
        ("Restart", "on-failure", "Restart"),
        ("RestartSec", str(spec.unit.restart_sec), "unit.restart_sec"),
        ("TimeoutStartSec", str(plan.start_timeout), "unit.start_timeout"),
        ("TimeoutStopSec", str(stop + 30), "unit.stop_timeout"),
        ("NoNewPrivileges", "yes", "NoNewPrivileges"),
        ("PrivateTmp", "yes", "PrivateTmp"),
        ("ProtectSystem", "full", "ProtectSystem"),
    ]
    if proc.runtime != "docker":
        service.append(("ProtectHome", "yes", "ProtectHome"))
    service.append(("SyslogIdentifier", proc.unit, f"vllm_deployment[{plan.name}].name"))
    return U.unit_file(comments, [("Unit", unit), ("Service", service),
                                  ("Install", [("WantedBy", "multi-user.target", "WantedBy")])])


def _env_key(plan: DeploymentPlan, proc: Process, name: str) -> str:
    return proc.env_keys.get(name) or f"vllm_deployment[{plan.name}] env {name} of {proc.unit}"


def render_env_file(plan: DeploymentPlan, proc: Process) -> str:
    """The 0600 env file: the container env (hardened) or what upstream's ``-e`` flags lack."""
    env: dict[str, str] = dict(proc.env)
    if proc.kind == "engine" and plan.spec.container_profile == "upstream":
        for key in proc.recipe_env_keys:
            env.pop(key, None)
    return U.env_file(
        [f"{MANAGED_HEADER}: install with mode 0600 (may hold secrets).", f"{proc.unit} on {proc.host}"],
        [(key, value, _env_key(plan, proc, key)) for key, value in env.items()])


def render_secret_file(proc: Process, plan: Optional[DeploymentPlan] = None) -> str:
    """The 0600 secret file, read by the container's shim (``KEY=value``, nothing evaluated)."""
    where = f"vllm_deployment[{plan.name if plan else proc.deployment}]"
    return U.env_file(
        [f"{MANAGED_HEADER}: install with mode 0600 (holds secrets).",
         f"{proc.unit} on {proc.host}: mounted read-only, read by the shim before the program starts"],
        [(key, proc.secret_env[key], proc.env_keys.get(key) or f"{where} secret {key}")
         for key in sorted(proc.secret_env)], secret=True)


def render_unit_manifest(plan: DeploymentPlan, proc: Process) -> str:
    """The unit's JSON manifest: what status, prune and teardown need to know about it on its host."""
    return _json({
        "schema": UNIT_MANIFEST_SCHEMA,
        "managed_by": "vllm_fleet.recipes",
        "unit": proc.unit_file,
        "path": f"{plan.spec.unit_dir}/{proc.unit_file}",
        "deployment": plan.name,
        "recipe": plan.spec.recipe,
        "deploy_type": plan.deploy_type,
        "process": _describe(proc),
        "kind": proc.kind,
        "role": proc.role,
        "rank": proc.rank,
        "host": proc.host,
        "env_file": proc.env_file,
        "secret_file": proc.secret_file or None,
        "container": proc.unit if proc.runtime == "docker" else None,
        "image": proc.image,
        "restart_group": proc.restart_group,
    })


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _base(plan: DeploymentPlan, host: str) -> str:
    return f"{plan.name}/{host}"


def install_manifest(fleet: FleetPlan) -> dict[str, list[dict[str, str]]]:
    """host -> files to install: rendered path (``src``), target path, mode."""
    out: dict[str, list[dict[str, str]]] = {}
    for plan in fleet.deployments:
        for proc in plan.processes:
            base = _base(plan, proc.host)
            files = out.setdefault(proc.host, [])
            files.append({"src": f"{base}/{proc.unit_file}",
                          "dest": f"{plan.spec.unit_dir}/{proc.unit_file}", "mode": "0644"})
            files.append({"src": f"{base}/{proc.unit}.env", "dest": proc.env_file, "mode": "0600"})
            files.append({"src": f"{base}/{proc.unit_file}.json", "dest": proc.manifest_file, "mode": "0644"})
            if proc.secret_file:
                files.append({"src": f"{base}/{proc.unit}.secret.env", "dest": proc.secret_file, "mode": "0600"})
        for cfg in plan.config_files:
            out.setdefault(cfg.host, []).append(
                {"src": f"{_base(plan, cfg.host)}/{cfg.name}", "dest": cfg.dest, "mode": cfg.mode})
    return {host: sorted(files, key=lambda f: f["src"]) for host, files in sorted(out.items())}


def render_plan_json(fleet: FleetPlan) -> str:
    data = plan_to_dict(fleet)
    manifest = install_manifest(fleet)
    for host, entry in data["hosts"].items():
        entry["files"] = manifest.get(host, [])
    return _json(data)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{_md_cell(text)}{pad}{fence}"


def _ports_text(proc: Process) -> str:
    """``8001 (api), 5565-5572 (nixl-side-channel)``: consecutive ports of one purpose folded."""
    by_purpose: dict[str, list[int]] = {}
    for port in proc.ports:
        by_purpose.setdefault(port.purpose, []).append(port.number)
    return ", ".join(f"{number_ranges(numbers)} ({purpose})" for purpose, numbers in by_purpose.items()) or "-"


def render_plan_md(fleet: FleetPlan) -> str:
    """Human-readable plan: per deployment a topology diagram and a table, then per-host totals."""
    out = [
        "# vLLM fleet plan",
        "",
        f"{MANAGED_HEADER}. Rendered offline from the inventory: review it, then deploy.",
        "",
    ]
    for plan in fleet.deployments:
        spec = plan.spec
        sel = plan.selection
        out += [
            f"## Deployment `{plan.name}` (group `{plan.group}`)",
            "",
            "```mermaid",
            deployment_diagram(plan).rstrip("\n"),
            "```",
            "",
            f"- recipe: `{spec.recipe}`"
            + "".join(f", {k}: `{sel[k]}`" for k in ("variant", "strategy", "hardware") if sel.get(k)),
            f"- deploy type: {plan.deploy_type}; vendor: {plan.vendor}; "
            f"container profile: {spec.container_profile}",
            f"- image: `{plan.image}`",
            f"- endpoint: {plan.endpoint or '-'}",
            f"- start timeout: {plan.start_timeout} s; weights: {spec.weights.mode} "
            f"in `{spec.weights.cache_dir}`",
        ]
        orders = sorted({p.start_order for p in plan.processes})
        steps = ["[" + ", ".join(p.unit_file for p in plan.processes if p.start_order == o) + "]"
                 for o in orders]
        out += [f"- start order: {' -> '.join(steps)}", ""]
        out += [
            "| host | process | rank/role | ports | GPUs | image | command |",
            "|---|---|---|---|---|---|---|",
        ]
        for proc in sorted(plan.processes, key=lambda p: (p.host, p.start_order, p.unit)):
            ports = _ports_text(proc)
            rank = proc.role if proc.rank is None else f"{proc.role} / rank {proc.rank}"
            if proc.instance is not None:
                rank = f"instance {proc.instance}: {rank}"
            image = f"`{proc.image}`" if proc.image else f"venv `{proc.exec_argv[0]}`"
            out.append("| " + " | ".join([
                proc.host, f"`{proc.unit_file}`", rank, ports, number_ranges(proc.gpus), image,
                _code(shlex.join(proc.argv)),
            ]) + " |")
        out.append("")
    out += ["## Hosts", "", "| host | address | interface | units | GPUs by deployment |",
            "|---|---|---|---|---|"]
    data = plan_to_dict(fleet)
    for name, entry in data["hosts"].items():
        gpus = "; ".join(f"{d}: {number_ranges(g)}" for d, g in entry["gpus"].items()) or "-"
        out.append(f"| {name} | {entry['address']} | {entry['interface'] or '-'} | "
                   f"{len(entry['units'])} | {gpus} |")
    out.append("")
    return "\n".join(out)


def render(fleet: FleetPlan, alerts: Optional[Mapping[str, Any]] = None) -> dict[str, str]:
    """Every file of the plan, ``{relative_path: content}`` (see module docstring).

    ``alerts``: the alert thresholds (``vllm_monitoring_alerts``) of the rule file.
    """
    files: dict[str, str] = {}
    for plan in fleet.deployments:
        for proc in plan.processes:
            base = _base(plan, proc.host)
            files[f"{base}/{proc.unit_file}"] = render_unit(plan, proc)
            files[f"{base}/{proc.unit}.env"] = render_env_file(plan, proc)
            files[f"{base}/{proc.unit_file}.json"] = render_unit_manifest(plan, proc)
            if proc.secret_file:
                files[f"{base}/{proc.unit}.secret.env"] = render_secret_file(proc, plan)
            if proc.runtime == "docker":
                files[f"{base}/{proc.unit}.docker.json"] = _json(proc.exec_argv)
        for cfg in plan.config_files:
            files[f"{_base(plan, cfg.host)}/{cfg.name}"] = _json(cfg.content)
    for path in files:  # every folder name is a validated deployment or host name
        if any(part in ("", ".", "..") for part in path.split("/")):
            raise RenderError(f"refusing to render {path!r}: it would leave the render directory")
    files["plan.json"] = render_plan_json(fleet)
    files["PLAN.md"] = render_plan_md(fleet)
    # observability (issue 15): Prometheus file_sd targets, one per deployment, and the alert rules
    files.update(_monitoring.render_files(plan_to_dict(fleet), alerts))
    check_no_placeholders(files)
    return dict(sorted(files.items()))


def check_no_placeholders(files: Mapping[str, str]) -> None:
    """Raise when any rendered artifact (inputs recorded in plan.json aside) still holds ``$NAME``."""
    for path, content in files.items():
        if path == "plan.json":
            data = json.loads(content)
            for dep in data["deployments"].values():
                # the selection and pinned resolutions are inputs and keep the recipe's placeholders
                copy = {k: v for k, v in dep.items() if k not in ("resolutions", "selection")}
                if find_placeholders(copy):
                    raise RenderError(f"plan.json: {find_placeholders(copy)}")
        elif not path.endswith(".env") and find_placeholders(content):
            raise RenderError(f"{path}: {find_placeholders(content)}")
