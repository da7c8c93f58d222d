"""Strict checks for a deployment's selection: ``validate_selection``.

Private to the vllm_fleet.recipes collection: not a public API.

The strict layer a deployment goes through. Where the parity layer silently
falls back (unknown variant -> ``default``, unknown mode -> first mode), this
raises ``SelectionError`` naming the key, the value and what would be accepted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Optional

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._errors import SelectionError
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._gates import (
    FRONTENDS,
    MAX_NODES,
    PD_ROLES,
    effective_compatible_strategies,
    feature_allowed_for_strategy,
    gpu_count_of,
    kv_offload_allowed_for_strategy,
    kv_offload_brand_supported,
    kv_offload_supported_for_recipe,
    min_gpus_for,
    mode_allowed_for_variant,
    mode_supported,
    nodes_for_strategy,
    pd_pool_modes,
    strategy_reachable,
    strategy_supported_on,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._jsvalue import get
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._selection import (
    Selection,
    hardware_scalable,
    hardware_supported,
    kv_store_brand_supported,
    listed_hardware,
    one_of,
    precision_compatible,
    precision_constraint,
    variant_hardware_supported,
)


def _require_int(key: str, value: Any, low: int, high: Optional[int] = None) -> int:
    """``value`` when it is an integer in ``low``..``high``; SelectionError else."""
    if not isinstance(value, int) or isinstance(value, bool) or value < low or (high is not None and value > high):
        bound = f"{low}..{high}" if high is not None else f">= {low}"
        raise SelectionError(key, value=value, expected=f"an integer {bound}")
    return value


def validate_selection(recipe: Mapping[str, Any], selection: Selection, strategies: Mapping[str, Any], taxonomy: Mapping[str, Any]) -> Selection:
    """Check a complete selection against the recipe and catalog; return it unchanged.

    Raises ``SelectionError`` on the first problem, naming the key, the value
    and what would be accepted.
    """
    variants = get(recipe, "variants") or {}
    if selection.variant not in variants:
        raise SelectionError("variant", value=selection.variant, expected=one_of(variants))
    variant = variants[selection.variant]
    profiles = get(taxonomy, "hardware_profiles") or {}
    hw = selection.hardware
    if hw is None or hw not in profiles:
        raise SelectionError("hardware", value=hw, expected=one_of(profiles))
    profile = profiles[hw]
    if not precision_compatible(profile, variant):
        constraint = precision_constraint(variant) or {}
        needs = " ".join(str(v) for v in (constraint.get("brand"), constraint.get("generation")) if v)
        raise SelectionError("hardware", value=hw, expected=f"{needs} hardware for precision "
                             f"{get(variant, 'precision')!r} of variant {selection.variant!r}: "
                             + one_of(listed_hardware(profiles, variant, recipe)))
    if not hardware_supported(recipe, hw):
        raise SelectionError("hardware", value=hw, reason="the recipe marks this hardware unsupported",
                             expected=one_of(listed_hardware(profiles, variant, recipe)))
    if not variant_hardware_supported(variant, hw):
        raise SelectionError("hardware", value=hw, expected=f"hardware listed by variant {selection.variant!r}: "
                             + one_of(variant.get("supported_hardware") or []))

    offered = [s for s in effective_compatible_strategies(recipe) if s in strategies]
    strategy = selection.strategy
    if strategy not in offered:
        raise SelectionError("strategy", value=strategy, expected=one_of(offered))
    if not strategy_supported_on(recipe, strategy, profile, hw):
        usable = [s for s in offered if strategy_supported_on(recipe, s, profile, hw)]
        raise SelectionError("strategy", value=strategy, reason=f"not supported on {hw}",
                             expected=one_of(usable))
    kind = get(strategies[strategy], "deploy_type")
    gpus = gpu_count_of(profile)
    if not strategy_reachable(recipe, strategy, kind, gpus, hw):
        raise SelectionError("strategy", value=strategy, reason=f"the recipe needs more GPUs than {hw} can reach "
                             f"with it ({_min_gpus_text(recipe, strategy, hw)})")

    _validate_nodes(recipe, selection, strategy, kind, profile, hw, gpus)
    _validate_features(recipe, selection, strategy, variant, profile, hw)
    _validate_kv(recipe, selection, strategy, strategies, taxonomy, profile)
    if selection.frontend is not None and selection.frontend not in FRONTENDS:
        raise SelectionError("frontend", value=selection.frontend, expected=one_of(FRONTENDS))
    for index, token in enumerate(selection.advanced_args):
        if not isinstance(token, str) or token == "":
            raise SelectionError(f"advanced_args[{index}]", value=token, expected="a non-empty string")
    return selection


def _min_gpus_text(recipe: Mapping[str, Any], strategy: str, hw: str) -> str:
    return f"strategy_min_gpus {min_gpus_for(recipe, strategy, hw)}"


def _validate_nodes(recipe: Mapping[str, Any], selection: Selection, strategy: str, kind: Any,
                    profile: Mapping[str, Any], hw: str, gpus: Any) -> None:
    nodes = _require_int("node_count", selection.node_count, 1, MAX_NODES)
    if kind == "single_node" and nodes != 1:
        raise SelectionError("node_count", value=nodes, expected=f"1 for single-node strategy {strategy!r}")
    if kind == "multi_node" and nodes < 2:
        single = [s for s in effective_compatible_strategies(recipe) if s.startswith("single_node_")]
        hint = f"; on one node use {one_of(single)}" if single else ""
        raise SelectionError("node_count", value=nodes,
                             expected=f"at least 2 for multi-node strategy {strategy!r}{hint}")
    if kind == "multi_node" and not hardware_scalable(profile):
        raise SelectionError("strategy", value=strategy, reason=f"{hw} cannot be clustered (scalable: false)")
    floor = min_gpus_for(recipe, strategy, hw)
    if kind in ("single_node", "multi_node") and nodes * gpus < floor:
        raise SelectionError("node_count", value=nodes,
                             expected=f"at least {math.ceil(floor / gpus)} nodes of {hw}: strategy {strategy!r} "
                             f"needs {floor} GPUs (strategy_min_gpus)")
    if kind == "pd_cluster":
        _validate_pd_nodes(recipe, selection, profile, hw, gpus)


def _validate_pd_nodes(recipe: Mapping[str, Any], selection: Selection, profile: Mapping[str, Any], hw: str, gpus: Any) -> None:
    pd = selection.pd_nodes
    if pd is None:
        if not hardware_scalable(profile) or gpus < 2:
            raise SelectionError("pd_nodes", value=None, expected=f"explicit pools: {hw} cannot host a co-located pair")
        return
    if not isinstance(pd, Mapping) or set(pd) - set(PD_ROLES):
        raise SelectionError("pd_nodes", value=pd, expected="a mapping with keys prefill and decode")
    modes = pd_pool_modes(recipe)
    for role in PD_ROLES:
        raw = pd.get(role)
        request = {"nodes": raw} if isinstance(raw, int) and not isinstance(raw, bool) else raw
        if not isinstance(request, Mapping):
            raise SelectionError(f"pd_nodes.{role}", value=raw, expected="a node count or {nodes, rank, parallelism}")
        unknown = set(request) - {"nodes", "rank", "parallelism"}
        if unknown:
            raise SelectionError(f"pd_nodes.{role}.{sorted(unknown)[0]}", value=request[sorted(unknown)[0]],
                                 expected="only nodes, rank and parallelism")
        nodes = request.get("nodes", 1)
        _require_int(f"pd_nodes.{role}.nodes", nodes, 0, MAX_NODES)
        if "rank" in request:
            _require_int(f"pd_nodes.{role}.rank", request["rank"], 0, max(0, nodes - 1))
        mode = request.get("parallelism")
        if mode is not None and mode not in modes:
            raise SelectionError(f"pd_nodes.{role}.parallelism", value=mode, expected=one_of(modes))
        floor = nodes_for_strategy(recipe, mode or "tp", gpus, hw)
        if nodes and nodes < floor:
            raise SelectionError(f"pd_nodes.{role}.nodes", value=nodes,
                                 expected=f"at least {floor} (strategy_min_gpus for {mode or 'tp'} on {hw})")
    sizes = [pd[r] if isinstance(pd[r], int) else pd[r].get("nodes", 1) for r in PD_ROLES]
    if (0 in sizes) and sizes != [0, 0]:
        raise SelectionError("pd_nodes", value=pd, expected="both pools co-located (0) or both on whole nodes")


def _validate_features(recipe: Mapping[str, Any], selection: Selection, strategy: str, variant: Mapping[str, Any],
                       profile: Mapping[str, Any], hw: str) -> None:
    known = get(recipe, "features") or {}
    for index, key in enumerate(selection.features or ()):
        if key not in known:
            raise SelectionError(f"features[{index}]", value=key, expected=one_of(known))
        if not feature_allowed_for_strategy(known[key], strategy):
            raise SelectionError(f"features[{index}]", value=key,
                                 reason=f"not available with strategy {strategy!r}",
                                 expected=f"one of the strategies {known[key].get('strategies')}")
    for key, mode in (selection.feature_modes or {}).items():
        feature = known.get(key)
        if feature is None:
            raise SelectionError(f"feature_modes.{key}", value=mode, expected=f"a feature key: {one_of(known)}")
        modes = feature.get("modes")
        if not isinstance(modes, dict):
            with_modes = [k for k, f in known.items() if isinstance(get(f, "modes"), dict)]
            raise SelectionError(f"feature_modes.{key}", value=mode,
                                 reason=f"feature {key!r} has no modes", expected=f"a feature with modes: {one_of(with_modes)}")
        allowed = [m for m, spec in modes.items()
                   if mode_allowed_for_variant(spec, selection.variant) and mode_supported(spec, profile, hw)]
        if mode not in modes:
            raise SelectionError(f"feature_modes.{key}", value=mode, expected=one_of(modes))
        if mode not in allowed:
            raise SelectionError(f"feature_modes.{key}", value=mode,
                                 reason=f"not available for variant {selection.variant!r} on {hw}",
                                 expected=one_of(allowed))
        if key not in (selection.features or ()):
            raise SelectionError(f"feature_modes.{key}", value=mode,
                                 reason=f"feature {key!r} is not enabled", expected=f"{key!r} listed in features")


def _validate_kv(recipe: Mapping[str, Any], selection: Selection, strategy: str, strategies: Mapping[str, Any],
                 taxonomy: Mapping[str, Any], profile: Mapping[str, Any]) -> None:
    choice = selection.kv_offload
    if choice is None:
        if selection.kv_instances is not None:
            raise SelectionError("kv_instances", value=selection.kv_instances,
                                 expected="unset unless kv_offload names a Mooncake kv_store deployment")
        return
    options = get(taxonomy, "kv_offload") or {}
    stores = [n for n, s in strategies.items() if get(s, "deploy_type") == "kv_store_lb"]
    if choice in stores:
        if not kv_store_brand_supported(profile):
            raise SelectionError("kv_offload", value=choice, reason="Mooncake runs on NVIDIA and AMD GPUs only")
        if not hardware_scalable(profile):
            raise SelectionError("kv_offload", value=choice, reason="Mooncake needs scalable hardware")
        if selection.kv_instances is not None:
            count = selection.kv_instances.get("count") if isinstance(selection.kv_instances, Mapping) \
                else selection.kv_instances
            _require_int("kv_instances", count, 1, MAX_NODES)
        return
    if choice not in options:
        raise SelectionError("kv_offload", value=choice, expected=one_of([*options, *stores]))
    option = options[choice]
    strategy_spec = strategies[strategy]
    if not kv_offload_allowed_for_strategy(option, strategy, strategy_spec):
        raise SelectionError("kv_offload", value=choice, reason=f"not available with strategy {strategy!r}")
    if not kv_offload_supported_for_recipe(option, choice, recipe):
        raise SelectionError("kv_offload", value=choice,
                             reason="the recipe does not opt in to it (kv_offload_support)")
    if not kv_offload_brand_supported(option, profile):
        raise SelectionError("kv_offload", value=choice, expected=f"hardware of brand {one_of(option.get('brands'))}")
