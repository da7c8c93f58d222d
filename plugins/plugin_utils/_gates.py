"""Hardware-keyed lookups and the strategy, feature, mode and KV-offload gates.

Private to the vllm_fleet.recipes collection: not a public API.

Command synthesis and the strict selection layer ask the same questions of a
recipe: which hardware-keyed block applies to a profile, whether a strategy,
feature mode or KV-offload option may run here, how many GPUs and nodes a
strategy needs. The answers follow the recipes site's rules, including its
silent fallbacks.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Optional, cast

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._jsvalue import (
    as_int_if_whole,
    first,
    get,
    is_number,
    js_max,
    present,
    to_number,
    truthy,
)

# Largest deployment the recipes site offers, per deployment and per PD pool.
MAX_NODES = 16

PD_ROLES = ("prefill", "decode")
#: The ports the recipes site gives a served engine, and each PD pool's engines.
SERVE_PORT = 8000
PD_ROLE_PORTS = {"prefill": 8001, "decode": 8002}
FRONTENDS = ("rust", "python")


# --------------------------------------------------------------------------
# Hardware-keyed lookups
# --------------------------------------------------------------------------

def generation_of(profile: Mapping[str, Any]) -> Any:
    """A profile's generation; consumer cards may list several, the first counts."""
    gen = first(get(profile, "generation"), get(profile, "gpu_generation"))
    return gen[0] if isinstance(gen, list) and gen else gen


def brand_key(profile: Mapping[str, Any]) -> Optional[str]:
    brand = get(profile, "brand")
    return brand.lower() if isinstance(brand, str) else None


def hardware_keyed(mapping: Any, profile: Mapping[str, Any], hardware_id: Any) -> Any:
    """Look a hardware-keyed map up by exact id, then generation, brand, ``default``."""
    if not isinstance(mapping, dict):
        return None
    gen = generation_of(profile)
    brand = brand_key(profile)
    return present(
        mapping.get(hardware_id) if hardware_id is not None else None,
        mapping.get(gen) if truthy(gen) and hashable_key(gen) else None,
        mapping.get(brand) if brand else None,
        mapping.get("default"),
    )


def generation_override(overrides: Any, profile: Mapping[str, Any]) -> Any:
    """A ``hardware_overrides`` block for the profile's generation (NVIDIA: or ``nvidia``)."""
    gen = generation_of(profile)
    block = get(overrides, gen) if hashable_key(gen) else None
    if truthy(block):
        return block
    return get(overrides, "nvidia") if get(profile, "brand") == "NVIDIA" else None


def hashable_key(value: Any) -> bool:
    """True for the scalar values YAML produces, which can key a mapping lookup."""
    return isinstance(value, (str, int, float, bool)) or value is None


# --------------------------------------------------------------------------
# Strategy, hardware and feature gates (shared with the selection layer)
# --------------------------------------------------------------------------

def gpu_count_of(profile: Mapping[str, Any], fallback: int = 1) -> Any:
    count = get(profile, "gpu_count")
    return count if is_number(count) else fallback


def single_node_tp(recipe: Mapping[str, Any], variant: Mapping[str, Any], profile: Mapping[str, Any],
                   strategy_name: str = "single_node_tp", hardware_id: Any = None) -> Any:
    """TP size of a single-node strategy: declared sizes first, else fit by VRAM."""
    gpu_count = gpu_count_of(profile)
    if strategy_name != "single_node_tp":
        return gpu_count
    is_cpu = get(profile, "generation") == "cpu"
    declared_sources = (
        get(variant, "tp"),
        get(get(get(recipe, "strategy_overrides"), strategy_name), "tp"),
    )
    for raw in declared_sources:
        declared = raw if is_number(raw) else hardware_keyed(raw, profile, hardware_id)
        if is_number(declared) and declared > 0:
            return declared if is_cpu else min(declared, gpu_count)
    vram = get(profile, "vram_gb")
    per_gpu = vram / gpu_count if truthy(vram) and truthy(gpu_count) and is_number(vram) else 0
    needed = first(get(variant, "vram_minimum_gb"), 0)
    if not truthy(needed) or not truthy(per_gpu) or per_gpu <= 0:
        return gpu_count
    return 1 if needed <= per_gpu else gpu_count


def effective_compatible_strategies(recipe: Mapping[str, Any]) -> list[str]:
    """``compatible_strategies`` plus strategies granted ``supported`` per hardware."""
    listed = first(get(recipe, "compatible_strategies"), [])
    listed = list(listed) if isinstance(listed, list) else []
    grants = get(recipe, "strategy_hardware")
    opt_ins = [
        name for name, gate in (grants.items() if isinstance(grants, dict) else [])
        if name not in listed and isinstance(gate, dict) and "supported" in gate.values()
    ]
    return listed + opt_ins


def strategy_supported_on(recipe: Mapping[str, Any], strategy_name: str, profile: Mapping[str, Any], hardware_id: Any) -> bool:
    gate = hardware_keyed(get(get(recipe, "strategy_hardware"), strategy_name), profile, hardware_id)
    if gate is not None:
        return bool(gate != "unsupported")
    return bool(strategy_name in first(get(recipe, "compatible_strategies"), []))


def min_gpus_for(recipe: Mapping[str, Any], key: Optional[str], gpu_id: Any = None) -> Any:
    """The recipe's GPU floor (``strategy_min_gpus``) for a strategy or PD pool mode."""
    floors = get(recipe, "strategy_min_gpus")
    if floors is None:
        return 0
    if is_number(floors):
        return floors

    def from_block(block: Any) -> Any:
        if block is None:
            return 0
        if is_number(block):
            return block
        return present(get(block, key), get(block, f"multi_node_{key}"), get(block, f"single_node_{key}"), 0)

    return as_int_if_whole(js_max(from_block(floors), from_block(get(floors, gpu_id)) if truthy(gpu_id) else 0))


def nodes_for_strategy(recipe: Mapping[str, Any], key: Optional[str], gpus_per_node: Any, gpu_id: Any = None) -> int:
    nodes = math.ceil(to_number(min_gpus_for(recipe, key, gpu_id)) / to_number(first(gpus_per_node, 8)))
    return nodes if nodes else 1


def strategy_reachable(recipe: Mapping[str, Any], key: str, deploy_type: Any, gpus_per_node: Any, gpu_id: Any = None) -> bool:
    max_nodes = MAX_NODES if deploy_type in ("multi_node", "pd_cluster") else 1
    return max_nodes * to_number(first(gpus_per_node, 8)) >= to_number(min_gpus_for(recipe, key, gpu_id))


def recipe_pool_nodes(recipe: Mapping[str, Any], role: str, hardware_id: Any) -> int:
    """The node count the recipe gives a PD pool on this hardware (the recipes site's builder).

    ``strategy_overrides.pd_cluster.<role>.nodes`` is an integer (every hardware) or a map
    ``{default: 2, gb300: 1}``: the exact hardware id's count, else ``default``, else 1. Only
    exact ids are read (not generations or brands), as the builder does.
    """
    raw = get(get(get(get(recipe, "strategy_overrides"), "pd_cluster"), role), "nodes")
    if isinstance(raw, Mapping):
        exact = raw.get(hardware_id) if isinstance(hardware_id, str) else None
        raw = exact if _whole(exact) else raw.get("default")
    return int(raw) if _whole(raw) and raw >= 1 else 1


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def pd_pool_modes(recipe: Mapping[str, Any]) -> list[str]:
    """Parallelism modes a PD pool may use, derived from the strategy suffixes offered."""
    modes = set()
    for name in effective_compatible_strategies(recipe):
        if name == "pd_cluster" or not isinstance(name, str):
            continue
        if re.search(r"(?:^|_)dep$", name):
            modes.add("dep")
        elif re.search(r"(?:^|_)tep$", name):
            modes.add("tep")
        elif re.search(r"(?:^|_)tp(?:_pp|_dp)?$", name):
            modes.add("tp")
    ordered: list[str] = [m for m in ("tp", "tep", "dep") if m in modes] or ["tp"]
    restrict = get(get(get(recipe, "strategy_overrides"), "pd_cluster"), "pool_modes")
    if isinstance(restrict, list) and restrict:
        narrowed = [m for m in ordered if m in restrict]
        if narrowed:
            ordered = narrowed
    return ordered


def feature_allowed_for_strategy(feature: Any, strategy_name: str) -> bool:
    allow = get(feature, "strategies")
    return not isinstance(allow, list) or not allow or strategy_name in allow


def kv_offload_allowed_for_strategy(option: Any, strategy_name: str, strategy: Mapping[str, Any]) -> bool:
    if not truthy(option):
        return False
    if get(strategy, "deploy_type") in ("pd_cluster", "kv_store_lb"):
        return False
    allow = get(option, "strategies")
    return not isinstance(allow, list) or not allow or strategy_name in allow


def kv_offload_supported_for_recipe(option: Any, option_key: Any, recipe: Mapping[str, Any]) -> bool:
    if not truthy(option):
        return False
    support = get(get(recipe, "kv_offload_support"), option_key) if hashable_key(option_key) else None
    if support == "unsupported":
        return False
    return support == "verified" if truthy(get(option, "requires_opt_in")) else True


def kv_offload_brand_supported(option: Any, profile: Mapping[str, Any]) -> bool:
    allow = get(option, "brands")
    return not isinstance(allow, list) or not allow or get(profile, "brand") in allow


def mode_supported(mode: Any, profile: Mapping[str, Any], hardware_id: Any) -> bool:
    gates = get(mode, "hardware")
    if not isinstance(gates, dict):
        return True
    gen = generation_of(profile)
    if truthy(gen) and hashable_key(gen) and gates.get(gen) == "unsupported":
        return False
    return not (truthy(hardware_id) and gates.get(hardware_id) == "unsupported")


def mode_allowed_for_variant(mode: Any, variant_key: Any) -> bool:
    allow = get(mode, "variants")
    return not isinstance(allow, list) or not allow or variant_key in allow


def resolve_mode_key(feature: Any, feature_key: str, variant: Any, variant_key: Any,
                     profile: Mapping[str, Any], hardware_id: Any, selected: Any) -> Optional[str]:
    """The active mode of a single-select feature on this variant and hardware."""
    allowed, fallback = mode_choices(feature, feature_key, variant, variant_key, profile, hardware_id)
    mode: Optional[str] = pick_mode(selected, allowed, fallback)
    return mode


def mode_choices(feature: Any, feature_key: str, variant: Any, variant_key: Any,
                 profile: Mapping[str, Any], hardware_id: Any) -> tuple[list[Any], Any]:
    """(modes allowed on this variant and hardware, the mode used when the selection names none of them).

    The fallback is the variant's default mode, then the feature's, then the
    first allowed mode; None when no mode is allowed.
    """
    modes = get(feature, "modes")
    if not isinstance(modes, dict):
        return [], None
    allowed = [
        key for key, mode in modes.items()
        if mode_allowed_for_variant(mode, variant_key) and mode_supported(mode, profile, hardware_id)
    ]
    if not allowed:
        return [], None
    for candidate in (get(get(variant, "default_modes"), feature_key), get(feature, "default_mode")):
        if truthy(candidate) and candidate in allowed:
            return allowed, candidate
    return allowed, allowed[0]


def pick_mode(selected: Any, allowed: list[Any], fallback: Any) -> Any:
    """The selected mode when it is allowed, else the fallback."""
    return selected if truthy(selected) and selected in allowed else fallback


def resolve_frontend(recipe: Mapping[str, Any], selected: Any, profile: Mapping[str, Any], hardware_id: Any,
                     strategy_name: Any = None) -> Optional[str]:
    """The API-server frontend: explicit choice, then strategy/hardware overrides, then the model default."""
    if truthy(selected):
        return cast(str, selected)
    strategy_block = get(get(recipe, "strategy_overrides"), strategy_name) if hashable_key(strategy_name) else None
    for overrides in (get(strategy_block, "hardware_overrides"), get(recipe, "hardware_overrides")):
        chosen = get(hardware_keyed(overrides, profile, hardware_id), "frontend")
        if truthy(chosen):
            return cast(str, chosen)
    default = get(get(recipe, "model"), "default_frontend")
    if isinstance(default, dict):
        default = hardware_keyed(default, profile, hardware_id)
    return default if truthy(default) else None


def follower_ranks(nodes: Any) -> list[int]:
    """Ranks 1..n-1: every follower node renders its own command."""
    count = int(js_max(0, to_number(first(nodes, 1)) - 1))
    return list(range(1, count + 1))
