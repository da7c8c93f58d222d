"""The recipe engine's entry point: a recipe plus a selection in, processes out.

Private to the vllm_fleet.recipes collection: not a public API.

``resolve(recipe, selection)`` is the one call the rest of the collection
makes. It fills the selection from the recipe's recommended defaults,
validates it strictly, and expands the recipes site's output into every
process a fleet runs: each multi-node rank, each node of every prefill and
decode pool, each Mooncake instance, the router and the Mooncake services.
Arguments keep the recipes site's placeholders (``$HEAD_IP``,
``$PREFILL_NODE_1`` ...); placement onto hosts fills them.
"""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Optional, Union

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._catalog import Catalog, load_catalog
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._docker import docker_argv, docker_command, docker_meta
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._errors import SelectionError
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._gates import PD_ROLE_PORTS, PD_ROLES, follower_ranks
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._jsvalue import to_plain
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._loader import LoadedRecipe
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._selection import (
    Selection,
    complete_selection,
    one_of,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._synthesis import resolve_command
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._validation import validate_selection

SERVE_PORT = 8000
SELECTION_KEYS = tuple(Selection.__dataclass_fields__)


@dataclass(frozen=True)
class Process:
    """One long-running process of a deployment.

    ``group`` names the processes that must start and restart together (a
    multi-node engine, a PD pool, a Mooncake instance); ``rank`` is the node
    index inside that group (0 = the head, which serves HTTP).
    """

    name: str
    role: str
    group: str
    rank: int
    argv: tuple[str, ...]
    command: str
    env: Mapping[str, Any] = field(default_factory=dict)
    port: Optional[int] = None
    docker_argv: Optional[tuple[str, ...]] = None
    docker_command: Optional[str] = None
    config: Optional[Mapping[str, Any]] = None

    @property
    def headless(self) -> bool:
        return "--headless" in self.argv


@dataclass(frozen=True)
class Resolution:
    """A fully resolved deployment: the selection used and every process it runs."""

    hf_id: str
    selection: Selection
    deploy_type: str
    image: str
    docker: Mapping[str, Any]
    output: Mapping[str, Any]
    processes: tuple[Process, ...]

    def process(self, name: str) -> Process:
        for proc in self.processes:
            if proc.name == name:
                return proc
        raise KeyError(name)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["selection"] = asdict(self.selection)
        return data


def selection_from_mapping(values: Mapping[str, Any]) -> Selection:
    """Build a Selection from user input, rejecting unknown keys by name."""
    if isinstance(values, Selection):
        return values
    if not isinstance(values, Mapping):
        raise SelectionError("selection", value=values, expected="a mapping of " + ", ".join(SELECTION_KEYS))
    values = to_plain(dict(values))
    unknown = [k for k in values if k not in SELECTION_KEYS]
    if unknown:
        raise SelectionError(f"selection.{unknown[0]}", value=values[unknown[0]],
                             expected="a key among " + ", ".join(SELECTION_KEYS))
    data = {k: v for k, v in values.items() if v is not None}
    for key in ("features", "advanced_args"):
        if key in data:
            if not isinstance(data[key], (list, tuple)):
                raise SelectionError(key, value=data[key], expected="a list")
            data[key] = tuple(data[key])
    if "feature_modes" in data and not isinstance(data["feature_modes"], Mapping):
        raise SelectionError("feature_modes", value=data["feature_modes"], expected="a mapping of feature to mode")
    return Selection(**data)


def _recipe_data(recipe: Union[LoadedRecipe, Mapping[str, Any]]) -> tuple[str, Mapping[str, Any]]:
    if isinstance(recipe, LoadedRecipe):
        return recipe.hf_id, recipe.data
    recipe = to_plain(recipe)
    model_id = (recipe.get("model") or {}).get("model_id", "unknown")
    return str(model_id), recipe


def resolve(recipe: Union[LoadedRecipe, Mapping[str, Any]],
            selection: Union[Selection, Mapping[str, Any], None] = None,
            catalog: Optional[Catalog] = None, *, strict: bool = True) -> Resolution:
    """Resolve a recipe and selection into every process of the deployment.

    Unset selection fields take the recipe's recommended values (default
    hardware, strategy, node count, features, PD pool sizes). With
    ``strict`` (the default) the completed selection is validated and a
    ``SelectionError`` names the first bad key.
    """
    catalog = catalog or load_catalog()
    hf_id, data = _recipe_data(recipe)
    chosen = selection_from_mapping(selection or {})
    variants = data.get("variants") or {}
    if chosen.variant not in variants:
        raise SelectionError("variant", value=chosen.variant, expected=one_of(variants))
    profiles = catalog.taxonomy.get("hardware_profiles") or {}
    if chosen.hardware is not None and chosen.hardware not in profiles:
        raise SelectionError("hardware", value=chosen.hardware, expected=one_of(profiles))
    complete = complete_selection(data, chosen, catalog.strategies, catalog.taxonomy)
    if strict:
        validate_selection(data, complete, catalog.strategies, catalog.taxonomy)
    return _expand(hf_id, data, complete, catalog)


def _synthesise(data: Mapping, sel: Selection, catalog: Catalog, **changes: Any) -> dict:
    values = {
        "pd_nodes": sel.pd_nodes, "kv_instances": sel.kv_instances,
    }
    values.update(changes)
    return resolve_command(
        data, sel.variant, sel.strategy, sel.hardware, list(sel.features or ()), catalog.strategies,
        catalog.taxonomy, list(sel.advanced_args), sel.node_count, values["pd_nodes"],
        dict(sel.feature_modes), sel.kv_offload, values["kv_instances"], sel.frontend,
    )


def _expand(hf_id: str, data: Mapping, sel: Selection, catalog: Catalog) -> Resolution:
    profile = catalog.taxonomy["hardware_profiles"][sel.hardware]
    variant = data["variants"][sel.variant]
    meta = docker_meta(data, variant, profile, sel.hardware)
    output = _synthesise(data, sel, catalog)
    kind = output["deployType"]

    def make(name: str, role: str, group: str, rank: int, argv: list, command: str, env: Mapping,
             port: Optional[int]) -> Process:
        return Process(name=name, role=role, group=group, rank=rank, argv=tuple(argv), command=command,
                       env=dict(env), port=port,
                       docker_argv=tuple(docker_argv(argv, env, meta, port or SERVE_PORT)),
                       docker_command=docker_command(command, env, meta, port or SERVE_PORT))

    processes: list[Process] = []
    if kind == "pd_cluster":
        for role in PD_ROLES:
            pool = output[role]
            ranks = range(max(1, pool["nodes"])) if pool["nodes"] else range(1)
            for rank in ranks:
                rendered = pool if rank == 0 and pool["currentNode"] == 0 else \
                    _synthesise(data, sel, catalog, pd_nodes=_with_rank(sel.pd_nodes, role, rank))[role]
                processes.append(make(f"{role}-{rank}", role, role, rank, rendered["argv"], rendered["command"],
                                      rendered["env"], PD_ROLE_PORTS[role]))
        processes.append(Process(name="router", role="router", group="router", rank=0,
                                 argv=tuple(shell_words(output["router"]["command"])),
                                 command=output["router"]["command"], port=None))
        if "mooncake" in output:
            processes += _mooncake_services(output["mooncake"])
    elif kind == "kv_store_lb":
        for instance in range(output["instances"]):
            rendered = output if instance == 0 else _synthesise(
                data, sel, catalog, kv_instances={"count": output["instances"], "current": instance})
            vllm = rendered["vllm"]
            group = f"instance-{instance}"
            processes.append(make(f"{group}-0", "head" if "workerArgvs" in vllm else "single", group, 0,
                                  vllm["argv"], vllm["command"], vllm["env"], SERVE_PORT))
            for rank, (argv, command) in enumerate(zip(vllm.get("workerArgvs", []), vllm.get("workerCommands", [])),
                                                   start=1):
                processes.append(make(f"{group}-{rank}", "worker", group, rank, argv, command, vllm["env"], None))
        if output["router"]:
            processes.append(Process(name="router", role="router", group="router", rank=0,
                                     argv=tuple(shell_words(output["router"]["command"])),
                                     command=output["router"]["command"], port=output["router"]["port"]))
        processes += _mooncake_services(output)
    elif "headArgv" in output:
        processes.append(make("head", "head", "engine", 0, output["headArgv"], output["headCommand"],
                              output["env"], SERVE_PORT))
        for rank, argv, command in zip(follower_ranks(output["nodeCount"]), output["workerArgvs"],
                                       output["workerCommands"]):
            processes.append(make(f"worker-{rank}", "worker", "engine", rank, argv, command, output["env"], None))
    else:
        processes.append(make("serve", "single", "engine", 0, output["argv"], output["command"],
                              output["env"], SERVE_PORT))
        for companion in output.get("companions", []):
            processes.append(Process(name=f"companion-{companion['feature'].replace(':', '-')}", role="companion",
                                     group="engine", rank=0, argv=("bash", "-c", companion["command"]),
                                     command=companion["command"]))
    docker = {
        "image": meta["image"],
        "meta": meta,
    }
    return Resolution(hf_id=hf_id, selection=sel, deploy_type=kind, image=meta["image"], docker=docker,
                      output=output, processes=tuple(processes))


def _with_rank(pd_nodes: Any, role: str, rank: int) -> dict:
    pools = dict(pd_nodes or {})
    request = pools.get(role)
    request = {"nodes": request} if isinstance(request, int) else dict(request or {})
    request["rank"] = rank
    pools[role] = request
    return pools


def shell_words(command: str) -> list[str]:
    """argv of a recipe's shell snippet: comments dropped, continuation lines joined."""
    return shlex.split(command.replace("\\\n", " "), comments=True)


def _mooncake_services(spec: Mapping[str, Any]) -> list[Process]:
    services = [Process(name="mooncake-master", role="mooncake_master", group="mooncake", rank=0,
                        argv=tuple(shell_words(str(spec["master"]["command"]))), command=spec["master"]["command"])]
    store = spec.get("store")
    if store:
        services.append(Process(name="mooncake-store", role="mooncake_store", group="mooncake", rank=0,
                                argv=tuple(shell_words(str(store["command"]))), command=store["command"],
                                config=store.get("config")))
    return services
