# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""The deploy shapes of a resolution, in one table: how each expands and how placers read it back.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

A shape is the layout of the recipes site's output: ``pd_cluster`` (prefill
and decode pools, a router), ``kv_store_lb`` (Mooncake instances, a router),
``multi_node`` (``headArgv`` and ``workerArgvs``) and ``single_node``.
:func:`shape_of` is the one place that tells them apart. Each :class:`Shape`
has the engine's half (``expand``: every process of every rank and instance)
and placement's half (``view``: the site-shaped sections for one PD rank or
Mooncake instance, as the typed engine launches, router and Mooncake services of a
:class:`PlacementView`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._argv_tools import shell_words
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._gates import (
    PD_ROLE_PORTS,
    PD_ROLES,
    SERVE_PORT,
    follower_ranks,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._launch import (
    Launch,
    MooncakeView,
    Process,
    Service,
)


@dataclass(frozen=True)
class Expansion:
    """What a shape's ``expand`` works from.

    ``synthesise(pd_nodes=..., kv_instances=...)`` re-runs the site's synthesis
    for another rank or instance; ``launch(name, role, group, rank, argv,
    command, env, port)`` makes an engine process with its docker wrapping.
    """

    output: Mapping[str, Any]
    pd_nodes: Any
    synthesise: Callable[..., Mapping[str, Any]]
    launch: Callable[..., Process]


#: What placement reads of one rank or instance: the engine launches (keyed like the site's
#: ``docker.processes``), the router and the Mooncake services (``PlacementView``'s parts).
View = tuple[dict[str, tuple[Launch, ...]], Optional[Service], Optional[MooncakeView]]


@dataclass(frozen=True)
class Shape:
    expand: Callable[[Expansion], list[Process]]
    view: Callable[[Mapping[str, Any], Sequence[Process], Mapping[str, Any]], View]


def shape_of(output: Mapping[str, Any]) -> str:
    """The shape of a site output: its deploy type, or single/multi by its keys."""
    kind = output.get("deployType")
    if kind in ("pd_cluster", "kv_store_lb"):
        return str(kind)
    return "multi_node" if "headArgv" in output else "single_node"


def _launch(proc: Process) -> Launch:
    return Launch(argv=proc.argv, env=proc.env, docker_argv=proc.docker_argv)


def _service(proc: Optional[Process], config: Optional[Mapping[str, Any]] = None) -> Optional[Service]:
    if proc is None:
        return None
    return Service(argv=proc.argv, port=proc.port, config=config if config is not None else proc.config or {})


def _mooncake_view(by_name: Mapping[str, Process], config: Any) -> MooncakeView:
    return MooncakeView(master=_service(by_name.get("mooncake-master")), store=_service(by_name.get("mooncake-store")),
                        config=config or {})


def _router(command: str, port: Any) -> Process:
    return Process(name="router", role="router", group="router", rank=0, argv=tuple(shell_words(command)),
                   command=command, port=port)


def _mooncake_services(spec: Mapping[str, Any]) -> list[Process]:
    services = [Process(name="mooncake-master", role="mooncake_master", group="mooncake", rank=0,
                        argv=tuple(shell_words(str(spec["master"]["command"]))), command=spec["master"]["command"])]
    store = spec.get("store")
    if store:
        services.append(Process(name="mooncake-store", role="mooncake_store", group="mooncake", rank=0,
                                argv=tuple(shell_words(str(store["command"]))), command=store["command"],
                                config=store.get("config")))
    return services


# ---------------------------------------------------------------------------------------------
# pd_cluster: a process per node of each pool, the router, optional Mooncake services
# ---------------------------------------------------------------------------------------------

def _with_rank(pd_nodes: Any, role: str, rank: int) -> dict[str, Any]:
    pools = dict(pd_nodes or {})
    request = pools.get(role)
    request = {"nodes": request} if isinstance(request, int) else dict(request or {})
    request["rank"] = rank
    pools[role] = request
    return pools


def _expand_pd(x: Expansion) -> list[Process]:
    processes = []
    for role in PD_ROLES:
        pool = x.output[role]
        for rank in range(max(1, pool["nodes"] or 0)):
            rendered = pool if rank == 0 and pool["currentNode"] == 0 else \
                x.synthesise(pd_nodes=_with_rank(x.pd_nodes, role, rank))[role]
            processes.append(x.launch(f"{role}-{rank}", role, role, rank, rendered["argv"], rendered["command"],
                                      rendered["env"], PD_ROLE_PORTS[role]))
    processes.append(_router(x.output["router"]["command"], None))
    if "mooncake" in x.output:
        processes += _mooncake_services(x.output["mooncake"])
    return processes


def _view_pd(output: Mapping[str, Any], processes: Sequence[Process], overrides: Mapping[str, Any]) -> View:
    by_name = {p.name: p for p in processes}
    engines: dict[str, tuple[Launch, ...]] = {}
    pools = overrides.get("pd_nodes") or {}
    for role in PD_ROLES:
        request = pools.get(role)
        rank = int(request.get("rank") or 0) if isinstance(request, Mapping) else 0
        proc = by_name.get(f"{role}-{rank}")
        if proc is not None:
            engines[role] = (_launch(proc),)
    section = output.get("mooncake")
    mooncake = _mooncake_view(by_name, section.get("config")) if section else None
    return engines, _service(by_name.get("router"), output.get("routerConfig") or {}), mooncake


# ---------------------------------------------------------------------------------------------
# kv_store_lb: each Mooncake instance's ranks, the router, the Mooncake services
# ---------------------------------------------------------------------------------------------

def _expand_kv(x: Expansion) -> list[Process]:
    processes = []
    count = x.output["instances"]
    for instance in range(count):
        rendered = x.output if instance == 0 else \
            x.synthesise(kv_instances={"count": count, "current": instance})
        vllm = rendered["vllm"]
        group = f"instance-{instance}"
        processes.append(x.launch(f"{group}-0", "head" if "workerArgvs" in vllm else "single", group, 0,
                                  vllm["argv"], vllm["command"], vllm["env"], SERVE_PORT))
        for rank, (argv, command) in enumerate(zip(vllm.get("workerArgvs", []), vllm.get("workerCommands", []), strict=False),
                                               start=1):
            processes.append(x.launch(f"{group}-{rank}", "worker", group, rank, argv, command, vllm["env"], None))
    if x.output["router"]:
        processes.append(_router(x.output["router"]["command"], x.output["router"]["port"]))
    return processes + _mooncake_services(x.output)


def _view_kv(output: Mapping[str, Any], processes: Sequence[Process], overrides: Mapping[str, Any]) -> View:
    current = int(((overrides.get("kv_instances") or {}).get("current")) or 0)
    group = [p for p in processes if p.group == f"instance-{current}"]
    head = next((p for p in group if p.rank == 0), None)
    engines = {}
    if head is not None:
        workers = sorted((p for p in group if p.rank > 0), key=lambda p: p.rank)
        engines = {"vllm": (_launch(head),), "vllm_workers": tuple(_launch(w) for w in workers)}
    by_name = {p.name: p for p in processes}
    # the router's own keys (its port) are its configuration, as the site prints them
    router = {k: v for k, v in (output.get("router") or {}).items() if k not in ("command", "install")}
    return engines, _service(by_name.get("router"), router), _mooncake_view(by_name, output.get("mooncakeConfig"))


# ---------------------------------------------------------------------------------------------
# multi_node: the head and a worker per further rank; single_node: one process and companions
# ---------------------------------------------------------------------------------------------

def _expand_multi(x: Expansion) -> list[Process]:
    out = x.output
    processes = [x.launch("head", "head", "engine", 0, out["headArgv"], out["headCommand"], out["env"], SERVE_PORT)]
    for rank, argv, command in zip(follower_ranks(out["nodeCount"]), out["workerArgvs"], out["workerCommands"], strict=False):
        processes.append(x.launch(f"worker-{rank}", "worker", "engine", rank, argv, command, out["env"], None))
    return processes


def _view_multi(output: Mapping[str, Any], processes: Sequence[Process], overrides: Mapping[str, Any]) -> View:
    del output, overrides
    head = next(p for p in processes if p.name == "head")
    workers = tuple(_launch(p) for p in processes if p.role == "worker")
    return {"head": (_launch(head),), "workers": workers}, None, None


def _expand_single(x: Expansion) -> list[Process]:
    out = x.output
    processes = [x.launch("serve", "single", "engine", 0, out["argv"], out["command"], out["env"], SERVE_PORT)]
    for companion in out.get("companions", []):
        processes.append(Process(name=f"companion-{companion['feature'].replace(':', '-')}", role="companion",
                                 group="engine", rank=0, argv=("bash", "-c", companion["command"]),
                                 command=companion["command"]))
    return processes


def _view_single(output: Mapping[str, Any], processes: Sequence[Process], overrides: Mapping[str, Any]) -> View:
    del output, overrides
    serve = next((p for p in processes if p.name == "serve"), None)
    return ({"single": (_launch(serve),)} if serve is not None else {}), None, None


SHAPES: Mapping[str, Shape] = {
    "pd_cluster": Shape(_expand_pd, _view_pd),
    "kv_store_lb": Shape(_expand_kv, _view_kv),
    "multi_node": Shape(_expand_multi, _view_multi),
    "single_node": Shape(_expand_single, _view_single),
}
