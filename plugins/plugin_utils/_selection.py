"""Selections: the recipes site's defaults, and strict checks for deployments.

Private to the vllm_fleet.recipes collection: not a public API.

Two halves:

* Defaults, as the recipes site's published API picks them: default hardware
  for a variant, the recommended strategy and node count, the default feature
  set, and PD pool sizes (``published_renderings``).
* ``validate_selection``: the strict layer a deployment goes through. Where the
  parity layer silently falls back (unknown variant -> ``default``, unknown
  mode -> first mode), this raises ``SelectionError`` naming the key, the value
  and what would be accepted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Optional

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._errors import SelectionError
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._jsvalue import first, get, is_number
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._synthesis import (
    FRONTENDS,
    MAX_NODES,
    PD_ROLES,
    effective_compatible_strategies,
    feature_allowed_for_strategy,
    gpu_count_of,
    kv_offload_allowed_for_strategy,
    kv_offload_brand_supported,
    kv_offload_supported_for_recipe,
    mode_allowed_for_variant,
    mode_supported,
    nodes_for_strategy,
    pd_pool_modes,
    strategy_reachable,
    strategy_supported_on,
)

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

    def with_(self, **changes: Any) -> "Selection":
        return replace(self, **changes)


# --------------------------------------------------------------------------
# Hardware compatibility
# --------------------------------------------------------------------------

def precision_constraint(variant: Mapping) -> Optional[Mapping]:
    return first(get(variant, "precision_hardware"), PRECISION_HARDWARE.get(get(variant, "precision")), None)


def matches_constraint(profile: Mapping, constraint: Optional[Mapping]) -> bool:
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


def precision_compatible(profile: Mapping, variant: Mapping) -> bool:
    return matches_constraint(profile, precision_constraint(variant))


def hardware_supported(recipe: Mapping, hardware_id: str) -> bool:
    return get(get(get(recipe, "meta"), "hardware"), hardware_id) != "unsupported"


def variant_hardware_supported(variant: Mapping, hardware_id: str) -> bool:
    allowed = get(variant, "supported_hardware")
    return not isinstance(allowed, list) or not allowed or hardware_id in allowed


def variant_vram_minimum_gb(variant: Mapping, hardware_id: Optional[str] = None) -> float:
    """The variant's VRAM floor; a map may give per-hardware floors (``default`` else)."""
    raw = get(variant, "vram_minimum_gb")
    if isinstance(raw, dict):
        raw = first(raw.get(hardware_id) if hardware_id else None, raw.get("default"), 0)
    return raw if is_number(raw) else 0


def fits_single_node(profile: Mapping, variant: Mapping, hardware_id: Optional[str] = None) -> bool:
    node_vram = profile.get("vram_gb") if is_number(profile.get("vram_gb")) else 0
    model_vram = variant_vram_minimum_gb(variant, hardware_id)
    if model_vram <= 0 or node_vram <= 0:
        return True
    return model_vram <= node_vram


def hardware_scalable(profile: Mapping) -> bool:
    return get(profile, "scalable") is not False


def variant_runs_on(profile: Mapping, variant: Mapping, hardware_id: Optional[str] = None) -> bool:
    if not precision_compatible(profile, variant):
        return False
    if hardware_id and not variant_hardware_supported(variant, hardware_id):
        return False
    return hardware_scalable(profile) or fits_single_node(profile, variant, hardware_id)


def pick_fitting_variant(recipe: Mapping, profile: Mapping, hardware_id: Optional[str] = None) -> Optional[str]:
    """On non-scalable hardware: the largest variant that still fits one box."""
    fitting = [(key, v) for key, v in (get(recipe, "variants") or {}).items()
               if variant_runs_on(profile, v, hardware_id)]
    if not fitting:
        return None
    fitting.sort(key=lambda kv: -(first(get(kv[1], "vram_minimum_gb"), 0) or 0))
    return fitting[0][0]


def pd_fits_single_node(profile: Mapping, variant: Mapping, hardware_id: Optional[str] = None) -> bool:
    """A co-located PD pair splits one node, so the node must hold the model twice."""
    if not profile or not variant:
        return False
    gpus = profile.get("gpu_count") if is_number(profile.get("gpu_count")) else 0
    if gpus < 2:
        return False
    node_vram = profile.get("vram_gb") if is_number(profile.get("vram_gb")) else 0
    return node_vram >= 2 * variant_vram_minimum_gb(variant, hardware_id)


def kv_store_brand_supported(profile: Mapping) -> bool:
    """Mooncake's transfer engine ships CUDA and ROCm builds only."""
    return get(profile, "brand") in ("NVIDIA", "AMD")


def listed_hardware(profiles: Mapping[str, Mapping], variant: Mapping, recipe: Mapping) -> list[str]:
    """Hardware a variant may render on: precision, recipe opt-outs, variant allowlist."""
    return [hw for hw, profile in profiles.items()
            if precision_compatible(profile, variant)
            and hardware_supported(recipe, hw)
            and variant_hardware_supported(variant, hw)]


def pick_default_hardware(profiles: Mapping[str, Mapping], variant: Mapping, recipe: Mapping) -> str:
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
        return authored
    if constraint and constraint.get("generation") == "blackwell":
        for preferred in ("b200", "gb200"):
            if preferred in candidates:
                return preferred
    if "h200" in candidates:
        return "h200"
    brand_rank = {"NVIDIA": 0, "AMD": 1}
    candidates.sort(key=lambda hw: (brand_rank.get(profiles[hw].get("brand"), 9), hw))
    return candidates[0] if candidates else "h200"


def published_hardware(recipe: Mapping, variant_key: str, profiles: Mapping[str, Mapping]) -> list[str]:
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

def recommend_strategy(recipe: Mapping, node_count: int = 1) -> str:
    """TP first; a recipe's ``default_strategy`` wins (its multi-node sibling past one node)."""
    return recommend_among(effective_compatible_strategies(recipe), get(recipe, "default_strategy"), node_count)


def recommend_among(compatible: list, explicit: Optional[str], node_count: int = 1) -> str:
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


def default_features(recipe: Mapping, hardware_id: Optional[str], variant_key: str = "default") -> list[str]:
    """Every feature except opt-ins; a variant's ``default_modes`` forces its features on."""
    opt_in = set(get(recipe, "opt_in_features") or [])
    opt_in.update(get(get(recipe, "hardware_opt_in_features"), hardware_id) or [])
    forced = set(get(get(get(recipe, "variants"), variant_key), "default_modes") or {})
    return [f for f in (get(recipe, "features") or {}) if f in forced or f not in opt_in]


def pick_pd_nodes(profile: Mapping, variant: Mapping, recipe: Mapping, strategies: Mapping,
                  hardware_id: Optional[str]) -> Any:
    """PD pool sizes: co-located (None) when a node holds two copies, else nodes per role.

    Returns ``"skip"`` when a role would need more than four nodes.
    """
    if pd_fits_single_node(profile, variant, hardware_id):
        return None
    node_vram = profile.get("vram_gb") if is_number(profile.get("vram_gb")) else 0
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


def published_renderings(recipe: Mapping, variant_key: str, hardware_id: str,
                         strategies: Mapping, taxonomy: Mapping) -> list[PublishedRendering]:
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
            return kind == "multi_node" if nodes > 1 else kind != "multi_node"
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


def default_selection(recipe: Mapping, strategies: Mapping, taxonomy: Mapping,
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


def complete_selection(recipe: Mapping, selection: Selection, strategies: Mapping, taxonomy: Mapping) -> Selection:
    """Fill what the user left unset from the recipe's recommended selection."""
    recommended = default_selection(recipe, strategies, taxonomy, selection.variant, selection.hardware)
    strategy = selection.strategy or recommended.strategy
    node_count = selection.node_count
    if node_count is None:
        if strategy == recommended.strategy:
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


# --------------------------------------------------------------------------
# Strict validation
# --------------------------------------------------------------------------

def one_of(names: Any) -> str:
    listed = ", ".join(sorted(str(n) for n in names))
    return f"one of: {listed}" if listed else "nothing (none is defined)"


def _require_int(key: str, value: Any, low: int, high: Optional[int] = None) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < low or (high is not None and value > high):
        bound = f"{low}..{high}" if high is not None else f">= {low}"
        raise SelectionError(key, value=value, expected=f"an integer {bound}")


def validate_selection(recipe: Mapping, selection: Selection, strategies: Mapping, taxonomy: Mapping) -> Selection:
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
    if hw not in profiles:
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


def _min_gpus_text(recipe: Mapping, strategy: str, hw: str) -> str:
    from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._synthesis import min_gpus_for
    return f"strategy_min_gpus {min_gpus_for(recipe, strategy, hw)}"


def _validate_nodes(recipe: Mapping, selection: Selection, strategy: str, kind: Any,
                    profile: Mapping, hw: str, gpus: Any) -> None:
    nodes = selection.node_count
    _require_int("node_count", nodes, 1, MAX_NODES)
    if kind == "single_node" and nodes != 1:
        raise SelectionError("node_count", value=nodes, expected=f"1 for single-node strategy {strategy!r}")
    if kind == "multi_node" and nodes < 2:
        single = [s for s in effective_compatible_strategies(recipe) if s.startswith("single_node_")]
        hint = f"; on one node use {one_of(single)}" if single else ""
        raise SelectionError("node_count", value=nodes,
                             expected=f"at least 2 for multi-node strategy {strategy!r}{hint}")
    if kind == "multi_node" and not hardware_scalable(profile):
        raise SelectionError("strategy", value=strategy, reason=f"{hw} cannot be clustered (scalable: false)")
    from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._synthesis import min_gpus_for
    floor = min_gpus_for(recipe, strategy, hw)
    if kind in ("single_node", "multi_node") and nodes * gpus < floor:
        raise SelectionError("node_count", value=nodes,
                             expected=f"at least {math.ceil(floor / gpus)} nodes of {hw}: strategy {strategy!r} "
                             f"needs {floor} GPUs (strategy_min_gpus)")
    if kind == "pd_cluster":
        _validate_pd_nodes(recipe, selection, profile, hw, gpus)


def _validate_pd_nodes(recipe: Mapping, selection: Selection, profile: Mapping, hw: str, gpus: Any) -> None:
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


def _validate_features(recipe: Mapping, selection: Selection, strategy: str, variant: Mapping,
                       profile: Mapping, hw: str) -> None:
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


def _validate_kv(recipe: Mapping, selection: Selection, strategy: str, strategies: Mapping,
                 taxonomy: Mapping, profile: Mapping) -> None:
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
