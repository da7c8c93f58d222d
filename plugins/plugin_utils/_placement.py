# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Placement: bind a resolved recipe to inventory hosts.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

Input: the inventory (``hostvars`` + ``groups``) and, per declared
deployment, an :class:`BoundEngine` whose ``resolve(overrides)`` returns the
upstream resolution shape (``deployType`` single_node | multi_node |
pd_cluster | kv_store_lb, camelCase keys, plus a ``docker`` section shaped like
the recipes site's ``{image, meta, processes}``).

Placement calls ``resolve`` once per distinct rank view it needs:

* single_node: ``{}``
* multi_node: ``{"node_count": N}`` (head + ``workerArgvs`` cover every rank)
* pd_cluster: ``{"pd_nodes": None}`` for a co-located pair, else for
  ``r in range(max(P, D))``: ``{"pd_nodes": {"prefill": {"nodes": P, "rank":
  min(r, P-1)[, "parallelism": ..]}, "decode": {...}}}``
* kv_store_lb: ``{"node_count": n, "kv_instances": {"count": K, "current": i}}``
  for every instance ``i``

and produces a :class:`FleetPlan`: every process (engine ranks, router,
Mooncake master/store) bound to a host, every ``$PLACEHOLDER`` filled from
inventory variables, per-node fabric env set, accelerators assigned, ports
checked for collisions, and the exact ExecStart argv for each systemd unit.
Anything that cannot be placed raises :class:`PlacementError` (a
``SelectionError``) naming the key, the value and the fix.

This module is the entry point and the one dispatch point from a deploy type to its
placer (:data:`PLACERS`); the pieces live in ``_plan_model`` (the plan's dataclasses),
``_argv_tools``, ``_placer_context`` / ``_placer_process`` / ``_placer_base`` (what the
placers share), ``_place_single`` / ``_place_multi`` / ``_place_pd`` / ``_place_kv`` (one
placer per deploy type), ``_fleet_resources`` (accelerators, ports, ExecStart) and
``_plan_view`` (plan.json).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from typing import Any, Optional

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _catalog, _engine, _loader
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._argv_tools import (
    fill_placeholders,
    find_placeholders,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._engine_shapes import SHAPES, shape_of
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._errors import RecipeError
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._fleet_resources import finish_fleet
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._inventory import (
    DeclaredDeployment,
    DeploymentSpec,
    HostSpec,
    collect_deployments,
    host_spec,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._launch import PlacementView, Resolution
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._place_kv import KVPlacer
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._place_multi import MultiNodePlacer
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._place_pd import PDPlacer
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._place_single import SingleNodePlacer
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._placer_base import PlacerBase
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._placer_context import (
    Resolutions,
    engine_hosts,
    host_roles,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._plan_model import (
    PLAN_SCHEMA,
    BoundEngine,
    ConfigFile,
    DeploymentPlan,
    EngineFactory,
    FleetPlan,
    PlacementError,
    Port,
    Process,
    Resolver,
    deployment_error,
    engine_error,
    overrides_key,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._plan_view import plan_to_dict

# The plan's types, placeholders and plan_to_dict are re-exported: they are this module's
# documented interface (docs/plan.md) and what most tests read through it.
__all__ = [
    "PLAN_SCHEMA",
    "BoundEngine",
    "ConfigFile",
    "DeploymentPlan",
    "FleetPlan",
    "PlacementError",
    "Port",
    "Process",
    "RecordedResolver",
    "Resolver",
    "build_plan",
    "engine_factory",
    "fill_placeholders",
    "find_placeholders",
    "plan_to_dict",
]


# --------------------------------------------------------------------------------------
# Recorded resolutions (plan.json pins, resolution_file, tests)
# --------------------------------------------------------------------------------------

class RecordedResolver:
    """Serve resolutions from records ``{"overrides": {...}, "resolution": {...}}``.

    This is how a reviewed plan is pinned: plan.json lists, per deployment,
    every resolution placement asked for. Feeding them back through
    ``vllm_deployment.resolution_file`` reproduces the plan without the engine.
    ``source``: the key of the records list as messages name it
    (``vllm_deployment[d].resolution_file (PATH) resolutions``).
    """

    def __init__(self, records: Iterable[Mapping[str, Any]], source: str = "resolutions") -> None:
        self._by_key: dict[str, Mapping[str, Any]] = {}
        self._index: dict[str, int] = {}
        self.source = source
        for index, record in enumerate(records):
            if not isinstance(record, Mapping) or "resolution" not in record:
                raise PlacementError(f"{source}[{index}]", value=type(record).__name__,
                                     expected="a mapping with 'overrides' and 'resolution'",
                                     fix="use the 'resolutions' list of a plan.json deployment")
            key = overrides_key(record.get("overrides") or {})
            self._by_key[key] = record["resolution"]
            self._index[key] = index

    def __call__(self, overrides: Mapping[str, Any]) -> Mapping[str, Any]:
        key = overrides_key(overrides)
        if key not in self._by_key:
            raise PlacementError(f"{self.source}", value=dict(overrides),
                                 expected="a recorded resolution for these overrides "
                                          f"(have: {sorted(self._by_key)})",
                                 fix="re-render with the engine and pin the new plan.json")
        return self._by_key[key]

    def origin(self, overrides: Mapping[str, Any]) -> str:
        """The key of the record served for ``overrides`` (``<source>[i].resolution``)."""
        return f"{self.source}[{self._index[overrides_key(overrides)]}].resolution"


# --------------------------------------------------------------------------------------
# The deploy type and its placer
# --------------------------------------------------------------------------------------

#: Deploy type (the resolution's ``deployType``) -> its placer. Any other type is placed
#: as single_node.
PLACERS: Mapping[str, type[PlacerBase]] = {
    "single_node": SingleNodePlacer,
    "multi_node": MultiNodePlacer,
    "pd_cluster": PDPlacer,
    "kv_store_lb": KVPlacer,
}


def deploy_type(spec: DeploymentSpec, resolutions: Resolutions) -> str:
    """The deploy type the declaration asks for; without a strategy, the recommended resolution's."""
    strategy = spec.strategy
    kv = spec.kv_offload or ""
    if strategy is None:
        return resolutions.resolve({}).deploy_type
    if strategy == "pd_cluster":
        return "pd_cluster"
    if kv.startswith("kv_store_"):
        return "kv_store_lb"
    if strategy.startswith("multi_node"):
        return "multi_node"
    return "single_node"


def place_deployment(decl: DeclaredDeployment, engine: BoundEngine, hosts: Mapping[str, HostSpec],
                     groups: Mapping[str, Sequence[str]]) -> DeploymentPlan:
    """Place one declared deployment with the placer of its deploy type."""
    roles = host_roles(decl, hosts, groups)
    resolutions = Resolutions(decl, engine)
    kind = deploy_type(decl.spec, resolutions)
    if decl.spec.kv_instances is not None and kind != "kv_store_lb":
        raise deployment_error(decl, "kv_instances", decl.spec.kv_instances,
                               "kv_instances only with a Mooncake store (kv_offload: "
                               f"kv_store_centralized_mooncake or kv_store_distributed_mooncake); this "
                               f"deployment is {kind}",
                               "remove kv_instances, or set kv_offload to a Mooncake store")
    placer = PLACERS.get(kind, SingleNodePlacer)(decl, engine, hosts, groups, resolutions)
    return placer.place(engine_hosts(decl, roles), roles)


# --------------------------------------------------------------------------------------
# The fleet
# --------------------------------------------------------------------------------------

def build_plan(hostvars: Mapping[str, Mapping[str, Any]], groups: Mapping[str, Sequence[str]],
               engine_factory: EngineFactory, *,
               deployments_list: Optional[Sequence[Any]] = None,
               group_declarations: Optional[Mapping[str, Any]] = None) -> FleetPlan:
    """Compile every declared deployment of an inventory into one :class:`FleetPlan`.

    Args:
        hostvars: ``hostvars`` (host -> variables), facts included when cached.
        groups: ``groups`` (group -> member hosts in inventory order).
        engine_factory: ``DeclaredDeployment -> BoundEngine``.
        deployments_list: the ``vllm_deployments`` list, when used.
        group_declarations: group -> the ``vllm_deployment`` of that group's own vars, when
            the caller sees group vars (a shadowed declaration is then refused).

    Raises:
        PlacementError / InventoryError / the engine's SelectionError.
    """
    declared = collect_deployments(hostvars, groups, deployments_list, group_declarations)
    if not declared:
        raise PlacementError("vllm_deployment", has_value=False,
                             expected="at least one inventory group with a vllm_deployment mapping",
                             fix="set vllm_deployment (recipe, strategy, hardware ...) in the "
                                 "group_vars of the group to deploy")
    names = sorted({h for d in declared for h in d.hosts})
    hosts = {name: host_spec(name, hostvars.get(name) or {}) for name in names}
    plans: list[DeploymentPlan] = []
    profiles: dict[str, Optional[Mapping[str, Any]]] = {}
    for decl in declared:
        try:
            engine = engine_factory(decl)
        except PlacementError:
            raise
        except RecipeError as exc:
            raise engine_error(decl, exc) from None
        plans.append(place_deployment(decl, engine, hosts, groups))
        profiles[decl.name] = engine.hardware_profile
    return finish_fleet(FleetPlan(deployments=plans, hosts=hosts), profiles)


# --------------------------------------------------------------------------------------
# Engine adapter: _engine.resolve(recipe, selection, catalog) -> the view placement reads
# --------------------------------------------------------------------------------------


def placement_of(res: Resolution, overrides: Mapping[str, Any]) -> PlacementView:
    """What placement reads of an ``_engine.Resolution`` for ``overrides``: the launches of the
    PD rank or Mooncake instance they name (every rank for the other shapes), the router and the
    Mooncake services, typed. Each shape's view is in ``_engine_shapes.SHAPES``.
    """
    shape = shape_of(res.output)
    engines, router, mooncake = SHAPES[shape].view(res.output, res.processes, overrides)
    meta = dict(res.docker.get("meta") or {})
    return PlacementView(shape=shape, deploy_type=str(res.output.get("deployType")),
                         image=res.image or meta.get("image"), docker_meta=meta, engines=engines, router=router,
                         mooncake=mooncake)


def _pinned_records(decl: DeclaredDeployment, base_dir: Optional[str]) -> tuple[str, Any]:
    """The key of the records ``vllm_deployment.resolution_file`` pins, as messages name it
    (``vllm_deployment[d].resolution_file (PATH) resolutions``), and the records."""
    path = decl.spec.resolution_file or ""
    if not os.path.isabs(path) and base_dir:
        path = os.path.join(base_dir, path)
    try:
        data = json.loads(_loader.read_capped(path, "a JSON plan.json deployment entry"))
    except RecipeError as exc:
        raise PlacementError(f"vllm_deployment[{decl.name}].resolution_file", value=path,
                             expected="a readable JSON list of pinned resolutions",
                             fix=f"point resolution_file at a valid file ({exc.reason})") from None
    except (OSError, ValueError) as exc:
        # the reason only (strerror / JSON position): never the file's content
        reason = getattr(exc, "strerror", None) or type(exc).__name__
        if isinstance(exc, json.JSONDecodeError):
            reason = f"invalid JSON at line {exc.lineno}, column {exc.colno}"
        raise PlacementError(f"vllm_deployment[{decl.name}].resolution_file", value=path,
                             expected="a readable JSON list of pinned resolutions",
                             fix=f"point resolution_file at a valid file ({reason})") from None
    key = f"vllm_deployment[{decl.name}].resolution_file ({path})"
    if isinstance(data, Mapping):
        return f"{key} resolutions", data.get("resolutions", data)
    return key, data


def _engine_selection(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The deployment's selection with placement's overrides (node_count, pd_nodes, kv_instances)."""
    selection = dict(base)
    if "node_count" in overrides:
        selection["node_count"] = overrides["node_count"]
    if "pd_nodes" in overrides:
        pd = overrides["pd_nodes"]
        selection["pd_nodes"] = None if pd is None else {
            role: {k: v for k, v in dict(entry).items() if k != "rank"} for role, entry in pd.items()}
    if "kv_instances" in overrides:
        kv = overrides["kv_instances"] or {}
        selection["kv_instances"] = kv.get("count") if isinstance(kv, Mapping) else kv
    return selection


def _describe_selection(bound: BoundEngine, res: Resolution, recipe: Any,
                        profiles: Mapping[Any, Any]) -> None:
    """Fill the bound engine's hardware, selection label and min_vLLM version from a resolution."""
    bound.hardware_id = res.selection.hardware
    bound.hardware_profile = profiles.get(res.selection.hardware)
    sel = asdict(res.selection)
    bound.selection = {k: (list(v) if isinstance(v, tuple) else v)
                       for k, v in sel.items() if v not in (None, (), {}, [])}
    data = getattr(recipe, "data", None) or {}
    variant = (data.get("variants") or {}).get(res.selection.variant) or {}
    wanted = variant.get("min_vllm_version") or (data.get("model") or {}).get("min_vllm_version")
    bound.min_vllm_version = str(wanted) if wanted else None


def engine_factory(*, catalog: Any = None, recipe_dirs: Sequence[str] = (), base_dir: Optional[str] = None,
                   cache_dir: Optional[str] = None) -> EngineFactory:
    """A factory binding the collection's recipe engine (``_engine.resolve``) to deployments.

    ``vllm_deployment.resolution_file`` short-circuits the engine with pinned
    resolutions (:class:`RecordedResolver`).
    """
    cat = catalog or _catalog.load_catalog()
    recipes: dict[str, Any] = {}  # ref -> LoadedRecipe (read-only): deployments sharing a recipe load it once

    def load(ref: str) -> Any:
        if ref not in recipes:
            recipes[ref] = _loader.load_recipe_ref(ref, catalog=cat, recipe_dirs=recipe_dirs, base_dir=base_dir,
                                                   cache_dir=cache_dir)
        return recipes[ref]

    def factory(decl: DeclaredDeployment) -> BoundEngine:
        spec = decl.spec
        profiles = cat.taxonomy.get("hardware_profiles") or {}
        if spec.resolution_file:
            source, records = _pinned_records(decl, base_dir)
            resolver = RecordedResolver(records, source=source)
            return BoundEngine(resolve=resolver, origin=resolver.origin,
                               hardware_profile=profiles.get(spec.hardware or ""),
                               hardware_id=spec.hardware, selection=spec.selection())
        recipe = load(spec.recipe)
        base = spec.selection()
        cache: dict[str, Resolution] = {}
        bound = BoundEngine(resolve=lambda o: {})

        def resolve(overrides: Mapping[str, Any]) -> PlacementView:
            selection = _engine_selection(base, overrides)
            key = overrides_key(selection)
            if key not in cache:
                cache[key] = _engine.resolve(recipe, selection, cat)
                if bound.hardware_id is None:
                    _describe_selection(bound, cache[key], recipe, profiles)
            return placement_of(cache[key], overrides)

        bound.resolve = resolve
        return bound

    return factory
