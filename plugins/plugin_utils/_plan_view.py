# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""plan.json: the machine-readable view of a :class:`FleetPlan` (processes, rollout batches, hosts).

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._plan_model import (
    PLAN_SCHEMA,
    DeploymentPlan,
    FleetPlan,
    Process,
)


def process_to_dict(proc: Process) -> dict[str, Any]:
    return {
        "unit": proc.unit_file,
        "deployment": proc.deployment,
        "container": proc.unit if proc.runtime == "docker" else None,
        "kind": proc.kind,
        "role": proc.role,
        "host": proc.host,
        "address": proc.address,
        "rank": proc.rank,
        "pool": proc.pool,
        "instance": proc.instance,
        "argv": list(proc.argv),
        "env": dict(proc.env),
        "secret_env_keys": sorted(proc.secret_env),
        "env_file": proc.env_file,
        "secret_file": proc.secret_file or None,
        "manifest": proc.manifest_file,
        "compile_cache": proc.compile_cache or None,
        "ports": [{"port": p.number, "purpose": p.purpose} for p in proc.ports],
        "gpus": list(proc.gpus),
        "runtime": proc.runtime,
        "image": proc.image,
        "served": None if proc.engine_args is None else {
            "model": proc.engine_args.model, "name": proc.engine_args.served_name,
            "revision_in_argv": proc.engine_args.pins_revision},
        "exec_start": list(proc.exec_argv),
        "start_order": proc.start_order,
        "restart_group": proc.restart_group,
        "health_url": proc.health_url,
        "metrics_url": proc.metrics_url,
    }


def rollout_batches(plan: DeploymentPlan) -> list[dict[str, Any]]:
    """How a rolling upgrade restarts this deployment, batch after batch.

    Independent replicas roll one at a time (drained from the router first, put back after
    their health gate and a one-token completion), then the router. Every other deployment
    (a multi-node group, PD pools, Mooncake instances) restarts as one whole batch.
    """
    def probes(procs: Iterable[Process]) -> list[dict[str, Any]]:
        out = []
        for proc in procs:
            if proc.kind == "engine" and proc.health_url:
                base = proc.health_url[:-len("/health")]
                out.append({"host": proc.host, "unit": proc.unit_file, "health_url": proc.health_url,
                            "completions_url": f"{base}/v1/completions", "model": proc.engine_args.served_name if proc.engine_args else None})
        return out

    def files(procs: Sequence[Process], with_configs: bool) -> dict[str, list[str]]:
        """host -> every file a rollback of these processes restores (units, env, configs)."""
        out: dict[str, set[str]] = {}
        for proc in procs:
            paths = out.setdefault(proc.host, set())
            paths.update({f"{plan.spec.unit_dir}/{proc.unit_file}", proc.env_file, proc.manifest_file})
            if proc.secret_file:
                paths.add(proc.secret_file)
        if with_configs:
            for cfg in plan.config_files:
                if cfg.host in out:
                    out[cfg.host].add(cfg.dest)
        return {host: sorted(paths) for host, paths in sorted(out.items())}

    def kinds(procs: Iterable[Process]) -> list[str]:
        """The process kinds a batch restarts: the roles skip the installs of other kinds."""
        return sorted({p.kind for p in procs})

    replicas = sorted((p for p in plan.processes if p.role == "replica"), key=lambda p: p.instance or 0)
    router = next((p for p in plan.processes if p.kind == "router"), None)
    if not replicas:
        groups = sorted({p.restart_group for p in plan.processes})
        return [{"name": plan.name, "groups": groups, "kinds": kinds(plan.processes), "hosts": plan.hosts,
                 "drain": None, "probes": probes(plan.processes), "files": files(plan.processes, True)}]
    batches: list[dict[str, Any]] = []
    for proc in replicas:
        members = [p for p in plan.processes if p.restart_group == proc.restart_group]
        drain = None
        if router is not None and router.health_url and proc.health_url:
            drain = {"router_host": router.host, "router_url": router.health_url[:-len("/health")],
                     "worker_url": proc.health_url[:-len("/health")]}
        batches.append({"name": proc.restart_group, "groups": [proc.restart_group], "kinds": kinds(members),
                        "hosts": sorted({p.host for p in members}), "drain": drain,
                        "probes": probes(members), "files": files(members, False)})
    if router is not None:
        batches.append({"name": router.restart_group, "groups": [router.restart_group], "kinds": ["router"],
                        "hosts": [router.host], "drain": None, "probes": [],
                        "files": files([router], True)})
    return batches


def probe_headers(fleet: FleetPlan) -> dict[str, dict[str, str]]:
    """Unit (as plan.json names it) -> the Authorization header of its API key, for the upgrade's
    completion probes. SECRET: returned only next to the rendered files (vllm_plan return_content)."""
    return {proc.unit_file: {"Authorization": f"Bearer {proc.secret_env['VLLM_API_KEY']}"}
            for plan in fleet.deployments for proc in plan.processes
            if proc.secret_file and "VLLM_API_KEY" in proc.secret_env}


def plan_to_dict(fleet: FleetPlan) -> dict[str, Any]:
    """Machine-readable plan (no secret values; callers dump it with sort_keys)."""
    deployments: dict[str, Any] = {}
    for plan in fleet.deployments:
        spec = plan.spec
        orders = sorted({p.start_order for p in plan.processes})
        deployments[plan.name] = {
            "group": plan.group,
            "recipe": spec.recipe,
            "selection": dict(plan.selection),
            "deploy_type": plan.deploy_type,
            "vendor": plan.vendor,
            "hardware": plan.hardware,
            "image": plan.image,
            "min_vllm_version": plan.min_vllm_version,
            "container_profile": spec.container_profile,
            "endpoint": plan.endpoint,
            "start_timeout_s": plan.start_timeout,
            "stop_timeout_s": spec.unit.stop_timeout,
            "hosts": plan.hosts,
            "start_order": [[p.unit_file for p in plan.processes if p.start_order == order]
                            for order in orders],
            "restart_groups": {g: sorted(p.unit_file for p in plan.processes if p.restart_group == g)
                               for g in sorted({p.restart_group for p in plan.processes})},
            "weights": {
                "cache_dir": spec.weights.cache_dir,
                "mode": spec.weights.mode,
                "source": spec.weights.source,
                "revision": spec.weights.revision,
                "endpoint": spec.weights.endpoint,
                "token_set": spec.weights.token is not None,
            },
            "processes": [process_to_dict(p) for p in plan.processes],
            "rollout": rollout_batches(plan),
            "config_files": [{"host": c.host, "dest": c.dest, "name": c.name, "mode": c.mode}
                             for c in plan.config_files],
            "resolutions": plan.resolutions,
        }
    procs_on: dict[str, list[Process]] = {}
    for plan in fleet.deployments:
        for proc in plan.processes:
            procs_on.setdefault(proc.host, []).append(proc)
    hosts: dict[str, Any] = {}
    for name in sorted(fleet.hosts):
        host = fleet.hosts[name]
        procs = procs_on.get(name, [])
        if not procs:
            continue
        hosts[name] = {
            "address": host.address,
            "address_source": host.address_source,
            "interface": host.interface,
            "gpus": fleet.gpu_assignment.get(name, {}),
            "units": sorted(p.unit_file for p in procs),
            "deployments": sorted({p.deployment for p in procs}),
        }
    return {"schema": PLAN_SCHEMA, "deployments": deployments, "hosts": hosts}
