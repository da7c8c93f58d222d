"""Selections: the recipes site's defaults, and the hardware predicates they rest on.

Private to the vllm_fleet.recipes collection: not a public API.

Defaults, as the recipes site's published API picks them: default hardware
for a variant, the recommended strategy and node count, the default feature
set, and PD pool sizes (``published_renderings``). The strict checks a
deployment's selection goes through live in ``_validation``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Optional, cast

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._errors import SelectionError
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._gates import (
    effective_compatible_strategies,
    nodes_for_strategy,
    strategy_reachable,
    strategy_supported_on,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._jsvalue import first, get, is_number

# Precisions that need a given hardware unless the variant says otherwise.
PRECISION_HARDWARE = {
    "nvfp4": {"brand": "NVIDIA", "generation": "blackwell"},
    "fp4": {"brand": "NVIDIA", "generation": "blackwell"},
}
# Most nodes a PD pool is sized to automatically before the site gives up.
MAX_AUTO_PD_NODES = 4


@dataclass(frozen=True)
class Selection:
    """What to run: the recipes site's builder choices, as one value.

    ``features=None`` means the recipe's default feature set; ``node_count``
    is nodes per deployment (per instance under Mooncake); ``pd_nodes`` sizes
    the prefill/decode pools (``{"prefill": 1, "decode": 2}`` or per-role
    ``{nodes, rank, parallelism}``).
    """

    variant: str = "default"
    hardware: Optional[str] = None
    strategy: Optional[str] = None
    features: Optional[tuple[str, ...]] = None
    feature_modes: Mapping[str, str] = field(default_factory=dict)
    node_count: Optional[int] = None
    pd_nodes: Optional[Mapping[str, Any]] = None
    kv_offload: Optional[str] = None
    kv_instances: Any = None
    advanced_args: tuple[str, ...] = ()
    frontend: Optional[str] = None

    def with_(self, **changes: Any) -> Selection:
        return replace(self, **changes)


# --------------------------------------------------------------------------
# Hardware compatibility
# --------------------------------------------------------------------------

def precision_constraint(variant: Mapping[str, Any]) -> Optional[Mapping[str, Any]]:
    return cast(Optional[Mapping[str, Any]], first(get(variant, "precision_hardware"), PRECISION_HARDWARE.get(get(variant, "precision")), None))


def matches_constraint(profile: Mapping[str, Any], constraint: Optional[Mapping[str, Any]]) -> bool:
    if not constraint:
        return True
    if constraint.get("brand") and profile.get("brand") != constraint["brand"]:
        return False
    if constraint.get("generation"):
        generation = first(profile.get("generation"), profile.get("gpu_generation"))
        generations = generation if isinstance(generation, list) else [generation]
        if constraint["generation"] not in generations:
            return False
    return True


def precision_compatible(profile: Mapping[str, Any], variant: Mapping[str, Any]) -> bool:
    return matches_constraint(profile, precision_constraint(variant))


def hardware_supported(recipe: Mapping[str, Any], hardware_id: str) -> bool:
    return bool(get(get(get(recipe, "meta"), "hardware"), hardware_id) != "unsupported")


def variant_hardware_supported(variant: Mapping[str, Any], hardware_id: str) -> bool:
    allowed = get(variant, "supported_hardware")
    return not isinstance(allowed, list) or not allowed or hardware_id in allowed


def variant_vram_minimum_gb(variant: Mapping[str, Any], hardware_id: Optional[str] = None) -> float:
    """The variant's VRAM floor; a map may give per-hardware floors (``default`` else)."""
    raw = get(variant, "vram_minimum_gb")
    if isinstance(raw, dict):
        raw = first(raw.get(hardware_id) if hardware_id else None, raw.get("default"), 0)
    return raw if is_number(raw) else 0


def fits_single_node(profile: Mapping[str, Any], variant: Mapping[str, Any], hardware_id: Optional[str] = None) -> bool:
    vram = profile.get("vram_gb")
    node_vram = vram if is_number(vram) else 0
    model_vram = variant_vram_minimum_gb(variant, hardware_id)
    if model_vram <= 0 or node_vram <= 0:
        return True
    return model_vram <= node_vram


def hardware_scalable(profile: Mapping[str, Any]) -> bool:
    return get(profile, "scalable") is not False


def variant_runs_on(profile: Mapping[str, Any], variant: Mapping[str, Any], hardware_id: Optional[str] = None) -> bool:
    if not precision_compatible(profile, variant):
        return False
    if hardware_id and not variant_hardware_supported(variant, hardware_id):
        return False
    return hardware_scalable(profile) or fits_single_node(profile, variant, hardware_id)


def pick_fitting_variant(recipe: Mapping[str, Any], profile: Mapping[str, Any], hardware_id: Optional[str] = None) -> Optional[str]:
    """On non-scalable hardware: the largest variant that still fits one box."""
    fitting = [(key, v) for key, v in (get(recipe, "variants") or {}).items()
               if variant_runs_on(profile, v, hardware_id)]
    if not fitting:
        return None
    fitting.sort(key=lambda kv: -(first(get(kv[1], "vram_minimum_gb"), 0) or 0))
    return cast(str, fitting[0][0])


def pd_fits_single_node(profile: Mapping[str, Any], variant: Mapping[str, Any], hardware_id: Optional[str] = None) -> bool:
    """A co-located PD pair splits one node, so the node must hold the model twice."""
    if not profile or not variant:
        return False
    count = profile.get("gpu_count")
    gpus = count if is_number(count) else 0
    if gpus < 2:
        return False
    vram = profile.get("vram_gb")
    node_vram = vram if is_number(vram) else 0
    return node_vram >= 2 * variant_vram_minimum_gb(variant, hardware_id)


def kv_store_brand_supported(profile: Mapping[str, Any]) -> bool:
    """Mooncake's transfer engine ships CUDA and ROCm builds only."""
    return get(profile, "brand") in ("NVIDIA", "AMD")


def listed_hardware(profiles: Mapping[str, Mapping[str, Any]], variant: Mapping[str, Any], recipe: Mapping[str, Any]) -> list[str]:
    """Hardware a variant may render on: precision, recipe opt-outs, variant allowlist."""
    return [hw for hw, profile in profiles.items()
            if precision_compatible(profile, variant)
            and hardware_supported(recipe, hw)
            and variant_hardware_supported(variant, hw)]


def pick_default_hardware(profiles: Mapping[str, Mapping[str, Any]], variant: Mapping[str, Any], recipe: Mapping[str, Any]) -> str:
    """The author's ``meta.default_hardware`` if it fits, else B200/GB200 for Blackwell-only, else H200."""
    constraint = precision_constraint(variant)
    declared = get(get(recipe, "meta"), "hardware") or {}
    candidates = [hw for hw, profile in profiles.items()
                  if matches_constraint(profile, constraint)
                  and hardware_supported(recipe, hw)
                  and variant_hardware_supported(variant, hw)
                  and (not profile.get("restricted") or hw in declared)]
    authored = get(get(recipe, "meta"), "default_hardware")
    if authored and authored in candidates:
        return cast(str, authored)
    if constraint and constraint.get("generation") == "blackwell":
        for preferred in ("b200", "gb200"):
            if preferred in candidates:
                return preferred
    if "h200" in candidates:
        return "h200"
    brand_rank: dict[Any, int] = {"NVIDIA": 0, "AMD": 1}
    candidates.sort(key=lambda hw: (brand_rank.get(profiles[hw].get("brand"), 9), hw))
    return candidates[0] if candidates else "h200"


def published_hardware(recipe: Mapping[str, Any], variant_key: str, profiles: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Hardware the published API renders a variant on, default first."""
    variant = get(get(recipe, "variants"), variant_key) or {}
    default = pick_default_hardware(profiles, variant, recipe)
    declared = get(get(recipe, "meta"), "hardware") or {}
    listed = [hw for hw in listed_hardware(profiles, variant, recipe)
              if not profiles[hw].get("restricted") or hw in declared]
    return list(dict.fromkeys([default, *listed]))


# --------------------------------------------------------------------------
# Strategy and feature defaults
# --------------------------------------------------------------------------

def recommend_strategy(recipe: Mapping[str, Any], node_count: int = 1) -> str:
    """TP first; a recipe's ``default_strategy`` wins (its multi-node sibling past one node)."""
    return recommend_among(effective_compatible_strategies(recipe), get(recipe, "default_strategy"), node_count)


def recommend_among(compatible: list[Any], explicit: Optional[str], node_count: int = 1) -> str:
    """The recommended strategy out of ``compatible``, given a recipe's ``default_strategy``."""
    if explicit and explicit in compatible:
        if node_count > 1 and explicit.startswith("single_node_"):
            sibling = "multi_node_" + explicit[len("single_node_"):]
            if sibling in compatible:
                return sibling
        else:
            return explicit
    if node_count > 1:
        for name in ("multi_node_tp", "multi_node_dep", "multi_node_tep"):
            if name in compatible:
                return name
    if "single_node_tp" in compatible:
        return "single_node_tp"
    return compatible[0] if compatible else "single_node_tp"


def default_features(recipe: Mapping[str, Any], hardware_id: Optional[str], variant_key: str = "default") -> list[str]:
    """Every feature except opt-ins; a variant's ``default_modes`` forces its features on."""
    opt_in = set(get(recipe, "opt_in_features") or [])
    opt_in.update(get(get(recipe, "hardware_opt_in_features"), hardware_id) or [])
    forced = set(get(get(get(recipe, "variants"), variant_key), "default_modes") or {})
    return [f for f in (get(recipe, "features") or {}) if f in forced or f not in opt_in]


def pick_pd_nodes(profile: Mapping[str, Any], variant: Mapping[str, Any], recipe: Mapping[str, Any], strategies: Mapping[str, Any],
                  hardware_id: Optional[str]) -> Any:
    """PD pool sizes: co-located (None) when a node holds two copies, else nodes per role.

    Returns ``"skip"`` when a role would need more than four nodes.
    """
    if pd_fits_single_node(profile, variant, hardware_id):
        return None
    vram = profile.get("vram_gb")
    node_vram = vram if is_number(vram) else 0
    model_vram = variant_vram_minimum_gb(variant, hardware_id)
    if node_vram <= 0 or model_vram <= 0:
        return None
    per_role = math.ceil(model_vram / node_vram)
    if per_role > MAX_AUTO_PD_NODES:
        return "skip"

    def floored(role: str) -> int:
        mode = first(get(get(get(get(recipe, "strategy_overrides"), "pd_cluster"), role), "parallelism"),
                     get(get(get(strategies, "pd_cluster"), role), "parallelism"), "tp")
        return max(per_role, nodes_for_strategy(recipe, mode, profile.get("gpu_count"), hardware_id))

    return {"prefill": floored("prefill"), "decode": floored("decode")}


@dataclass(frozen=True)
class PublishedRendering:
    """One rendering the published API serves: a selection under an API key."""

    key: str
    selection: Selection
    recommended: bool = False


def published_renderings(recipe: Mapping[str, Any], variant_key: str, hardware_id: str,
                         strategies: Mapping[str, Any], taxonomy: Mapping[str, Any]) -> list[PublishedRendering]:
    """The recommended rendering and every alternative for one variant on one hardware.

    Mirrors the recipes site's static API: non-scalable hardware swaps an
    oversized variant for the largest one that fits; Mooncake deployments
    compose with a serving strategy; PD sizes its pools by VRAM.
    """
    variant = get(get(recipe, "variants"), variant_key)
    if variant is None or "omni" in (get(get(recipe, "meta"), "tasks") or []):
        return []
    profile = get(get(taxonomy, "hardware_profiles"), hardware_id) or {}
    scalable = hardware_scalable(profile)
    if not scalable and not fits_single_node(profile, variant, hardware_id):
        fitting = pick_fitting_variant(recipe, profile, hardware_id)
        if fitting is None:
            return []
        variant_key, variant = fitting, recipe["variants"][fitting]
    gpus = profile.get("gpu_count")

    def deploy_type(name: str) -> Any:
        return get(get(strategies, name), "deploy_type")

    def nodes_for(name: str) -> int:
        floor = 2 if deploy_type(name) == "multi_node" else 1
        return max(floor, nodes_for_strategy(recipe, name, gpus, hardware_id))

    kv_ids = [name for name in strategies if deploy_type(name) == "kv_store_lb"]
    compatible = []
    for name in dict.fromkeys([*effective_compatible_strategies(recipe), *kv_ids]):
        if deploy_type(name) == "kv_store_lb":
            if scalable and kv_store_brand_supported(profile) and \
                    get(get(get(recipe, "kv_cache_strategy_hardware"), name), hardware_id) != "unsupported":
                compatible.append(name)
            continue
        if not strategy_supported_on(recipe, name, profile, hardware_id):
            continue
        if not strategy_reachable(recipe, name, deploy_type(name), gpus, hardware_id):
            continue
        if scalable or (not name.startswith("multi_node_") and name != "pd_cluster"):
            compatible.append(name)

    supports_multi = scalable and any(n.startswith("multi_node_") for n in compatible)
    base_nodes = 2 if not fits_single_node(profile, variant, hardware_id) and supports_multi else 1
    recommended = recommend_strategy(recipe, base_nodes)
    if recommended not in compatible:
        recommended = next((n for n in compatible if deploy_type(n) != "kv_store_lb" and n != "pd_cluster"),
                           next((n for n in compatible if deploy_type(n) != "kv_store_lb"), recommended))
    features = tuple(default_features(recipe, hardware_id, variant_key))
    base = Selection(variant=variant_key, hardware=hardware_id, features=features)

    out = []
    rec_pd = pick_pd_nodes(profile, variant, recipe, strategies, hardware_id) if recommended == "pd_cluster" else None
    if rec_pd == "skip":
        return []
    out.append(PublishedRendering(recommended, base.with_(
        strategy=recommended, node_count=max(base_nodes, nodes_for(recommended)), pd_nodes=rec_pd), True))

    def kv_serving_for(nodes: int) -> Optional[str]:
        def usable(name: str) -> bool:
            kind = deploy_type(name)
            if name not in strategies or kind in ("pd_cluster", "kv_store_lb"):
                return False
            if get(strategies[name], "kv_offload") is False:
                return False
            return bool(kind == "multi_node") if nodes > 1 else bool(kind != "multi_node")
        preferred = recommend_strategy(recipe, nodes)
        if usable(preferred):
            return preferred
        return next((n for n in effective_compatible_strategies(recipe) if usable(n)), None)

    for name in compatible:
        if name == recommended:
            continue
        if name == "pd_cluster":
            pd = pick_pd_nodes(profile, variant, recipe, strategies, hardware_id)
            if pd == "skip":
                continue
            out.append(PublishedRendering(name, base.with_(strategy=name, node_count=1, pd_nodes=pd)))
        elif deploy_type(name) == "kv_store_lb":
            nodes = 1 if fits_single_node(profile, variant, hardware_id) else 2
            serving = kv_serving_for(nodes)
            if serving is None and nodes == 2:
                nodes, serving = 1, kv_serving_for(1)
            if serving is None:
                continue
            if deploy_type(serving) == "multi_node":
                nodes = max(nodes, nodes_for_strategy(recipe, serving, gpus, hardware_id))
            out.append(PublishedRendering(name, base.with_(strategy=serving, node_count=nodes, kv_offload=name)))
        else:
            out.append(PublishedRendering(name, base.with_(strategy=name, node_count=nodes_for(name))))
    return out


def default_selection(recipe: Mapping[str, Any], strategies: Mapping[str, Any], taxonomy: Mapping[str, Any],
                      variant: str = "default", hardware: Optional[str] = None) -> Selection:
    """The recipes site's recommended selection for a variant (on its default hardware)."""
    profiles = get(taxonomy, "hardware_profiles") or {}
    variant_obj = get(get(recipe, "variants"), variant)
    if variant_obj is None:
        raise SelectionError("variant", value=variant, expected=one_of(get(recipe, "variants") or {}))
    hw = hardware or pick_default_hardware(profiles, variant_obj, recipe)
    for rendering in published_renderings(recipe, variant, hw, strategies, taxonomy):
        if rendering.recommended:
            return rendering.selection
    raise SelectionError("hardware", value=hw, reason=f"variant {variant!r} has no rendering on this hardware")


def complete_selection(recipe: Mapping[str, Any], selection: Selection, strategies: Mapping[str, Any], taxonomy: Mapping[str, Any]) -> Selection:
    """Fill what the user left unset from the recipe's recommended selection."""
    recommended = default_selection(recipe, strategies, taxonomy, selection.variant, selection.hardware)
    strategy = selection.strategy or recommended.strategy
    node_count = selection.node_count
    if node_count is None:
        if get(get(strategies, strategy), "deploy_type") == "single_node":
            node_count = 1  # one node's command, though the site may recommend it at 2 nodes (fits_single_node)
        elif strategy == recommended.strategy:
            node_count = recommended.node_count
        else:
            gpus = get(get(get(taxonomy, "hardware_profiles"), recommended.hardware), "gpu_count")
            floor = 2 if get(get(strategies, strategy), "deploy_type") == "multi_node" else 1
            node_count = max(floor, nodes_for_strategy(recipe, strategy, gpus, recommended.hardware))
    pd_nodes = selection.pd_nodes
    if pd_nodes is None and get(get(strategies, strategy), "deploy_type") == "pd_cluster":
        profile = get(get(taxonomy, "hardware_profiles"), recommended.hardware) or {}
        picked = pick_pd_nodes(profile, recipe["variants"][selection.variant], recipe, strategies,
                               recommended.hardware)
        pd_nodes = picked if isinstance(picked, dict) else None
    return replace(
        selection,
        hardware=recommended.hardware,
        strategy=strategy,
        features=recommended.features if selection.features is None else tuple(selection.features),
        node_count=node_count,
        pd_nodes=pd_nodes,
    )


def one_of(names: Any) -> str:
    """``one of: a, b, c`` (sorted) for messages; says so when there is nothing to offer."""
    listed = ", ".join(sorted(str(n) for n in names))
    return f"one of: {listed}" if listed else "nothing (none is defined)"
