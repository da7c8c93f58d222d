# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Fleet-level resources once every deployment is placed: accelerators, ports, ExecStart argv.

:func:`finish_fleet` is the stage from the placed fleet (every deployment's processes as its
placer built them) to the final one. It reads the placed processes once to decide each
engine's accelerators, NIXL side-channel base and internal port base, then builds each
finished engine from its placed one (:func:`finished_engine`); nothing is changed in place.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Optional

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._container import (
    COMPILE_CACHE_ENV,
    ContainerSpec,
    engine_docker_argv,
    visible_devices_var,
    with_secret_file,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._inventory import HostSpec
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._plan_model import (
    NIXL_SIDE_CHANNEL,
    DeploymentPlan,
    FleetPlan,
    PlacementError,
    Port,
    Process,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._vendors import VENDORS


def _host_capacity(host: HostSpec, plans: Sequence[DeploymentPlan],
                   profiles: Mapping[str, Optional[Mapping[str, Any]]]) -> Optional[list[int]]:
    if host.gpus is not None:
        return list(host.gpus)
    counts = set()
    for plan in plans:
        profile = profiles.get(plan.name) or {}
        count = profile.get("gpu_count")
        if isinstance(count, int) and count > 0:
            counts.add(count)
    if len(counts) == 1:
        return list(range(counts.pop()))
    return None


#: A process's identity across the fleet: (deployment, unit).
ProcessKey = tuple[str, str]


def process_key(proc: Process) -> ProcessKey:
    return (proc.deployment, proc.unit)


def finish_fleet(placed: FleetPlan, profiles: Mapping[str, Optional[Mapping[str, Any]]]) -> FleetPlan:
    """The final fleet: every engine with its accelerators, side-channel and internal ports, env and
    ExecStart argv; processes in start order; ports checked for collisions."""
    gpus, assignment = assign_gpus(placed, profiles)
    side_channels = separate_side_channels(placed)
    vllm_ports = spread_internal_ports(placed)
    plans = []
    for plan in placed.deployments:
        processes = []
        for proc in plan.processes:
            if proc.kind == "engine":
                key = process_key(proc)
                proc = finished_engine(plan, placed.hosts, proc, gpus.get(key, []), side_channels.get(key),
                                       vllm_ports.get(key))
            processes.append(proc)
        processes.sort(key=lambda p: (p.start_order, p.pool or "", p.rank or 0, p.unit))
        plans.append(replace(plan, processes=processes))
    fleet = FleetPlan(deployments=plans, hosts=placed.hosts, gpu_assignment=assignment)
    check_ports(fleet)
    return fleet


def finished_engine(plan: DeploymentPlan, hosts: Mapping[str, HostSpec], proc: Process, gpus: list[int],
                    side_channel: Optional[int], vllm_port: Optional[str]) -> Process:
    """A placed engine made final: its physical accelerators and their visible-devices env, a moved
    NIXL side-channel base, the compile cache, ``VLLM_PORT`` and the ExecStart argv."""
    env = dict(proc.env)
    ports = proc.ports
    if side_channel is not None:
        base = int(env["VLLM_NIXL_SIDE_CHANNEL_PORT"])
        env["VLLM_NIXL_SIDE_CHANNEL_PORT"] = str(side_channel)
        ports = [port for port in ports if port.purpose != NIXL_SIDE_CHANNEL] + [
            Port(port.number - base + side_channel, NIXL_SIDE_CHANNEL)
            for port in ports if port.purpose == NIXL_SIDE_CHANNEL]
    env.update(visible_devices_env(plan.vendor, env, gpus))
    env_keys = proc.env_keys
    compile_cache = ""
    spec = plan.spec
    if spec.compile_cache_dir and spec.container_profile == "hardened":
        compile_cache = f"{spec.compile_cache_dir.rstrip('/')}/{proc.unit}"
        added = {key: value for key, value in COMPILE_CACHE_ENV if key not in env}  # the operator's extra_env wins
        env.update(added)
        env_keys = {**env_keys, **{key: f"vllm_deployment[{plan.name}].compile_cache_dir" for key in added}}
    if vllm_port is not None:
        env.setdefault("VLLM_PORT", vllm_port)  # a recipe's or extra_env's own value is kept
    finished = replace(proc, gpus=list(gpus), env=env, env_keys=env_keys, ports=ports, compile_cache=compile_cache)
    return replace(finished, exec_argv=engine_exec_argv(plan, hosts, finished))


def assign_gpus(fleet: FleetPlan, profiles: Mapping[str, Optional[Mapping[str, Any]]]
                ) -> tuple[dict[ProcessKey, list[int]], dict[str, dict[str, list[int]]]]:
    """Every engine's physical accelerators, and host -> deployment -> the indexes it holds."""
    by_host: dict[str, list[Process]] = {}
    for plan in fleet.deployments:
        for proc in plan.processes:
            if proc.kind == "engine":
                by_host.setdefault(proc.host, []).append(proc)
    _check_deployment_gpus_names(fleet, by_host)
    gpus: dict[ProcessKey, list[int]] = {}
    assignment: dict[str, dict[str, list[int]]] = {}
    for host_name in sorted(by_host):
        host = fleet.hosts[host_name]
        procs = by_host[host_name]
        deps = sorted({p.deployment for p in procs})
        plans = [p for p in fleet.deployments if p.name in deps]
        need, relative = _relative_layout(procs, deps)
        capacity = _host_capacity(host, plans, profiles)
        if capacity is None:
            if len(deps) > 1:
                raise PlacementError(f"hostvars[{host_name!r}].vllm_gpu_count", has_value=False,
                                     expected=f"the accelerator count of {host_name}, which carries "
                                              f"{len(deps)} deployments ({', '.join(deps)})",
                                     fix=f"set vllm_gpu_count (or vllm_gpus) on {host_name}")
            capacity = list(range(need[deps[0]]))
        slices = _slices(host_name, host, deps, need, capacity, pinned_at(procs))
        assignment[host_name] = {dep: slices[dep] for dep in deps}
        for proc in procs:
            slice_ = slices[proc.deployment]
            rel = relative[process_key(proc)]
            if rel and max(rel) >= len(slice_):
                raise PlacementError(f"hostvars[{host_name!r}].vllm_gpu_count",
                                     value=len(slice_),
                                     expected=f"device index {max(rel)} for {proc.unit}",
                                     fix=f"give {proc.deployment} more accelerators on {host_name}"
                                         + pinned_at([proc]))
            gpus[process_key(proc)] = [slice_[i] for i in rel]
    return gpus, assignment


def _check_deployment_gpus_names(fleet: FleetPlan, by_host: Mapping[str, list[Process]]) -> None:
    """Every ``vllm_deployment_gpus`` key names a deployment with engines on that host."""
    names = {plan.name for plan in fleet.deployments}
    for host_name, host in sorted(fleet.hosts.items()):
        here = {p.deployment for p in by_host.get(host_name, [])}
        for dep in host.deployment_gpus:
            if dep not in here:
                known = dep in names
                raise PlacementError(
                    f"hostvars[{host_name!r}].vllm_deployment_gpus.{dep}", value=dep,
                    expected=(f"a deployment with engines on {host_name} ({', '.join(sorted(here)) or 'none'})"
                              if known else f"a deployment of this inventory ({', '.join(sorted(names))})"),
                    fix=f"remove {dep!r} from vllm_deployment_gpus on {host_name} or correct its name")


def _relative_layout(procs: Sequence[Process], deps: Sequence[str]
                     ) -> tuple[dict[str, int], dict[ProcessKey, list[int]]]:
    """Per deployment, the accelerators it needs on the host; per process, its relative indexes."""
    need: dict[str, int] = {}
    relative: dict[ProcessKey, list[int]] = {}
    for dep in deps:
        dep_procs = [p for p in procs if p.deployment == dep]
        pinned = [i for p in dep_procs if p.pinned_gpus for i in p.pinned_gpus]
        offset = (max(pinned) + 1) if pinned else 0
        for proc in dep_procs:
            if proc.pinned_gpus:
                relative[process_key(proc)] = list(proc.pinned_gpus)
            else:
                relative[process_key(proc)] = list(range(offset, offset + proc.gpu_need))
                offset += proc.gpu_need
        need[dep] = offset
    return need, relative


def pinned_at(procs: Sequence[Process]) -> str:
    """``; argv pinned at KEY`` for processes read from a pinned record (``resolution_file``), else ""."""
    keys = sorted({proc.origin for proc in procs if proc.origin})
    return f"; argv pinned at {', '.join(keys)}" if keys else ""


def _slices(host_name: str, host: HostSpec, deps: Sequence[str], need: Mapping[str, int],
            capacity: list[int], pinned: str = "") -> dict[str, list[int]]:
    """deployment -> its physical accelerators: ``vllm_deployment_gpus`` first, the rest in order."""
    free = list(capacity)
    slices: dict[str, list[int]] = {}
    for dep in deps:
        explicit = host.deployment_gpus.get(dep)
        if explicit is None:
            continue
        outside = [i for i in explicit if i not in capacity]
        taken = [i for i in explicit if i not in free]
        if outside:
            raise PlacementError(f"hostvars[{host_name!r}].vllm_deployment_gpus.{dep}",
                                 value=list(explicit),
                                 expected=f"indexes among {host_name}'s accelerators {capacity}",
                                 fix=f"remove {outside} or raise vllm_gpu_count on {host_name}")
        if taken:
            raise PlacementError(f"hostvars[{host_name!r}].vllm_deployment_gpus.{dep}",
                                 value=list(explicit),
                                 expected="accelerators not given to another deployment",
                                 fix=f"indexes {taken} on {host_name} are assigned twice; "
                                     "split the devices between deployments")
        if len(explicit) < need[dep]:
            raise PlacementError(f"hostvars[{host_name!r}].vllm_deployment_gpus.{dep}",
                                 value=list(explicit),
                                 expected=f"at least {need[dep]} accelerators for {dep}",
                                 fix=f"list {need[dep]} device indexes for {dep} on {host_name}")
        slices[dep] = list(explicit)
        free = [i for i in free if i not in explicit]
    for dep in deps:
        if dep in slices:
            continue
        if need[dep] > len(free):
            total = sum(need.values())
            raise PlacementError(
                f"hostvars[{host_name!r}].vllm_gpu_count", value=len(capacity),
                expected=f"at least {total} accelerators for "
                         + ", ".join(f"{d} ({need[d]})" for d in deps),
                fix=f"move a deployment off {host_name}, shrink its parallelism, or fix "
                    f"vllm_gpu_count on {host_name}{pinned}")
        slices[dep] = free[:need[dep]]
        free = free[need[dep]:]
    return slices


def visible_devices_env(vendor_key: str, env: Mapping[str, str], gpus: Sequence[int]) -> dict[str, str]:
    """The env that shows an engine its accelerators: the vendor's visible-devices variable, and the
    recipe's own CUDA_VISIBLE_DEVICES rewritten to what the process sees."""
    out: dict[str, str] = {}
    physical = ",".join(str(i) for i in gpus)
    if "CUDA_VISIBLE_DEVICES" in env:
        vendor = VENDORS.get(vendor_key)
        if vendor is not None and vendor.cuda_indexes_relative:  # e.g. HIP indexes are relative to ROCR's mask
            out["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(len(gpus)))
        else:
            out["CUDA_VISIBLE_DEVICES"] = physical
    var = visible_devices_var(vendor_key)
    if var is not None and gpus:
        out[var] = physical
    return out


#: First internal port (VLLM_PORT) handed to the n-th host-network engine of a shared host.
VLLM_PORT_BASE = 25000
VLLM_PORT_STRIDE = 100


def spread_internal_ports(fleet: FleetPlan) -> dict[ProcessKey, str]:
    """Each host-network engine on a shared host: its own ``VLLM_PORT`` base.

    vLLM picks its internal ports from ``VLLM_PORT`` upwards (random free ports
    when unset); two instances on one host network can race for the same ones
    (EADDRINUSE). A value set by the recipe or ``extra_env`` is kept.
    """
    by_host: dict[str, list[Process]] = {}
    for plan in fleet.deployments:
        for proc in plan.processes:
            if proc.kind == "engine" and proc.network_host:
                by_host.setdefault(proc.host, []).append(proc)
    bases: dict[ProcessKey, str] = {}
    for procs in by_host.values():
        if len(procs) < 2:
            continue
        for index, proc in enumerate(sorted(procs, key=lambda p: (p.deployment, p.unit))):
            bases[process_key(proc)] = str(VLLM_PORT_BASE + VLLM_PORT_STRIDE * index)
    return bases


def separate_side_channels(fleet: FleetPlan) -> dict[ProcessKey, int]:
    """NIXL engines that share a host: the new side-channel base of each one that must move.

    Every engine binds ``VLLM_NIXL_SIDE_CHANNEL_PORT`` plus its data-parallel
    index, so the recipe's prefill base (5557) and decode base (5558) overlap as
    soon as the prefill engine runs two local DP ranks on the decode engine's
    host. The engine with the lower base keeps the recipe's value; the other
    moves up to the next free range (peers learn the port from the KV transfer
    parameters, nothing else names it). A value set in ``extra_env`` is kept,
    and a clash with it is reported by the port check.
    """
    # host -> (process, its side-channel ports, whether extra_env sets the base)
    by_host: dict[str, list[tuple[Process, list[int], bool]]] = {}
    taken_by_host: dict[str, set[int]] = {}
    for plan in fleet.deployments:
        user_set = "VLLM_NIXL_SIDE_CHANNEL_PORT" in plan.spec.extra_env
        for proc in plan.processes:
            taken = taken_by_host.setdefault(proc.host, set())
            numbers = [port.number for port in proc.ports if port.purpose == NIXL_SIDE_CHANNEL]
            taken.update(port.number for port in proc.ports if port.purpose != NIXL_SIDE_CHANNEL)
            if numbers:
                by_host.setdefault(proc.host, []).append((proc, numbers, user_set))
    moves: dict[ProcessKey, int] = {}
    for host, engines in by_host.items():
        taken = taken_by_host[host]
        for proc, numbers, user_set in sorted(engines, key=lambda e: (e[0].deployment, min(e[1]), e[0].unit)):
            if user_set or taken.isdisjoint(numbers):
                taken.update(numbers)
                continue
            base = int(proc.env["VLLM_NIXL_SIDE_CHANNEL_PORT"])
            offsets = [number - base for number in numbers]
            moved = base
            while any(moved + offset in taken for offset in offsets):
                moved += 1
            if moved + max(offsets) > 65535:
                continue  # nothing free above: the port check names the clash
            moves[process_key(proc)] = moved
            taken.update(moved + offset for offset in offsets)
    return moves


def check_ports(fleet: FleetPlan) -> None:
    seen: dict[tuple[str, int], Process] = {}
    for plan in fleet.deployments:
        for proc in plan.processes:
            for port in proc.ports:
                key = (proc.host, port.number)
                other = seen.get(key)
                if other is not None:
                    fix = ("set vllm_deployment.ports.api (or ports.router / ports.router_metrics / "
                           "ports.master) on one of them" if other.deployment != proc.deployment else
                           "give the two processes different ports in the recipe or inventory")
                    if port.purpose == NIXL_SIDE_CHANNEL:
                        fix = ("remove VLLM_NIXL_SIDE_CHANNEL_PORT from extra_env: placement gives each "
                               "engine of a host its own side-channel range")
                    raise PlacementError(
                        f"hostvars[{proc.host!r}] port {port.number}", value=port.number,
                        expected=f"a free port on {proc.host}: {other.unit} ({other.deployment}, "
                                 f"{_purpose(other, port.number)}) and {proc.unit} "
                                 f"({proc.deployment}, {port.purpose}) both listen on it",
                        fix=fix + pinned_at([other, proc]))
                seen[key] = proc


def _purpose(proc: Process, number: int) -> str:
    return next((p.purpose for p in proc.ports if p.number == number), "?")


def engine_exec_argv(plan: DeploymentPlan, hosts: Mapping[str, HostSpec], proc: Process) -> list[str]:
    """The ExecStart argv of an engine with its accelerators and env: its container (hardened flags,
    or the recipes site's own for ``container_profile: upstream``), with the secret shim when needed."""
    spec = plan.spec
    host_gpus = hosts[proc.host].gpus
    if host_gpus is None:
        count = max([*proc.gpus, -1]) + 1
        host_gpus = tuple(range(count))
    # Ranks of a multi-node group (multi-node TP/PP, a Mooncake instance over several hosts)
    # are "head"/"worker" whatever the deploy type; the placers name every other engine
    # single, replica, instance, prefill or decode.
    multi = proc.role in ("head", "worker")
    container = ContainerSpec(
        name=proc.unit, image=proc.image or "", vendor=plan.vendor, program_argv=proc.argv,
        env_file=proc.env_file, weights_dir=spec.weights.cache_dir, network_host=proc.network_host,
        api_port=proc.api_port, gpus=proc.gpus, host_gpus=host_gpus, gpu_runtime=spec.gpu_runtime,
        rdma=spec.rdma, multi_node=multi, mounts=proc.mounts, extra_args=spec.container_args,
        docker_binary=spec.docker_binary, compile_cache_dir=proc.compile_cache or None)
    if not proc.image:
        raise PlacementError(f"vllm_deployment[{plan.name}].image", has_value=False,
                             expected="a container image (the recipe gives none for this hardware)",
                             fix="set vllm_deployment.image")
    if spec.container_profile == "upstream":
        if proc.upstream_flags is None:
            raise PlacementError(f"vllm_deployment[{plan.name}].container_profile", value="upstream",
                                 expected=f"the recipes site's docker argv for {proc.unit}",
                                 fix="use container_profile: hardened for this deployment")
        recipe_env = {k: proc.env[k] for k in proc.recipe_env_keys if k in proc.env}
        argv = engine_docker_argv(container, "upstream", upstream_flags=proc.upstream_flags, env=recipe_env)
    else:
        argv = engine_docker_argv(container, "hardened")
    if proc.secret_file:
        argv = with_secret_file(argv, proc.image, proc.argv, proc.secret_file)
    return argv
