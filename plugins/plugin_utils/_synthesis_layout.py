"""What command synthesis knows before it looks at a selection's features, node counts or KV choices.

Private to the vllm_fleet.recipes collection: not a public API.

A ``Layout`` depends only on the recipe, variant, strategy and hardware, so it
is computed once per combination and shared by every resolution of it (the
inputs are treated as read-only and recognised by identity). Its argv layers
are tuples: long-lived, immutable, and never tracked by the garbage collector.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Optional

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._cmdline import kept_tokens
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._feature_table import FeatureTable
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._gates import (
    generation_override,
    gpu_count_of,
    hashable_key,
    kv_offload_allowed_for_strategy,
    kv_offload_brand_supported,
    kv_offload_supported_for_recipe,
    pd_pool_modes,
    resolve_frontend,
    single_node_tp,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._jsvalue import (
    as_int_if_whole,
    first,
    get,
    items,
    text,
    to_number,
    truthy,
)

#: Not computed yet (a lazily filled Layout slot).
_UNSET: Any = object()


def merge_env(env: dict[str, Any], source: Any) -> None:
    """``Object.assign(env, source)`` for mapping sources; anything else adds nothing."""
    if isinstance(source, dict):
        env.update(source)


class Layout:
    """The recipe, variant, strategy and hardware of a resolution, with their static argv and env layers."""

    __slots__ = (
        "recipe", "variant_key", "variant", "strategy_name", "strategy", "hardware_id", "profile",
        "gpu_count", "deploy_type", "overrides", "single_node_tp", "model_id",
        "model_and_variant_args", "hardware_args", "hardware_env", "model_and_variant_env",
        "default_frontend", "strategy_args", "override_args", "parallel_flag", "parallelism", "pool_modes",
        "features", "strategies", "kv_options", "_role_layers", "_kv_choices", "_dep_local",
    )

    def __init__(self, recipe: Mapping[str, Any], variant_key: Any, strategy_name: Any, hardware_id: Any,
                 strategies: Mapping[str, Any], taxonomy: Mapping[str, Any]) -> None:
        variants = get(recipe, "variants")
        variant = first(get(variants, variant_key) if hashable_key(variant_key) else None,
                        get(variants, "default"), {})
        strategy = first(get(strategies, strategy_name) if hashable_key(strategy_name) else None, {})
        profile = first(get(get(taxonomy, "hardware_profiles"), hardware_id) if hashable_key(hardware_id) else None,
                        {})
        overrides = get(get(recipe, "strategy_overrides"), strategy_name) if hashable_key(strategy_name) else None
        model = get(recipe, "model")
        self.recipe = recipe
        self.variant_key = variant_key
        self.variant = variant
        self.strategy_name = strategy_name
        self.strategy = strategy
        self.hardware_id = hardware_id
        self.profile = profile
        self.gpu_count = gpu_count_of(profile)
        self.deploy_type = get(strategy, "deploy_type")
        self.overrides = overrides
        self.single_node_tp = single_node_tp(recipe, variant, profile, strategy_name, hardware_id)
        self.model_id = first(get(variant, "model_id"), get(model, "model_id"), "unknown")
        self.default_frontend = resolve_frontend(recipe, None, profile, hardware_id, strategy_name)
        self.strategy_args = tuple(items(first(get(strategy, "vllm_args"), None)))
        self.override_args = tuple(items(first(get(overrides, "extra_args"), None))
                                   + items(first(get(overrides, "vllm_args"), None))) if truthy(overrides) else ()
        self.parallel_flag = first(get(strategy, "parallel_flag"), "--tensor-parallel-size")
        self.parallelism = get(strategy, "parallelism")
        self.pool_modes = tuple(pd_pool_modes(recipe)) if self.deploy_type == "pd_cluster" else ("tp",)
        self.features = FeatureTable(self)
        self.strategies = strategies
        self.kv_options = get(taxonomy, "kv_offload")
        self._role_layers: dict[Optional[str], RoleLayers] = {}
        self._kv_choices: dict[Any, Any] = {}
        self._dep_local: Any = _UNSET
        self._static_layers(model)

    def _static_layers(self, model: Any) -> None:
        """The model/variant and hardware-override argv and env layers.

        A strategy's generation block replaces the recipe baseline and the
        variant delta; the strategy's exact-GPU block adds on top.
        """
        variant, profile, hardware_id = self.variant, self.profile, self.hardware_id
        variant_exact = get(get(variant, "hardware_overrides"), hardware_id) if hashable_key(hardware_id) else None
        strategy_gen = generation_override(get(self.overrides, "hardware_overrides"), profile)
        generation_blocks = [strategy_gen] if truthy(strategy_gen) else [
            generation_override(get(self.recipe, "hardware_overrides"), profile),
            generation_override(get(variant, "hardware_overrides"), profile),
        ]
        exact = get(get(self.overrides, "hardware_overrides"), hardware_id) if hashable_key(hardware_id) else None
        hardware_args: list[Any] = []
        hardware_env: dict[str, Any] = {}
        for block in (*generation_blocks, exact):
            hardware_args += items(first(get(block, "extra_args"), None))
            merge_env(hardware_env, get(block, "extra_env"))
        static_env: dict[str, Any] = {}
        for block in (get(model, "base_env"), get(variant, "extra_env"), get(variant_exact, "extra_env")):
            merge_env(static_env, block)
        self.model_and_variant_args = tuple(items(first(get(model, "base_args"), None))
                                            + items(first(get(variant, "extra_args"), None))
                                            + items(first(get(variant_exact, "extra_args"), None)))
        self.hardware_args = tuple(hardware_args)
        self.hardware_env = hardware_env
        self.model_and_variant_env = static_env

    def layers(self, role: Optional[str]) -> RoleLayers:
        """The static argv and env layers of one process role (a PD pool, or None)."""
        layers = self._role_layers.get(role)
        if layers is None:
            layers = RoleLayers(self, role)
            self._role_layers[role] = layers
        return layers

    def dep_local_size(self) -> Any:
        """DP ranks per node of a multi-node DEP rank: the GPU count, unless the strategy override's
        args (vllm_args, extra_args, its generation and exact-hardware blocks) pin
        ``--data-parallel-size-local`` (its last value; NaN when the flag ends the list)."""
        if self._dep_local is _UNSET:
            block = self.overrides
            overrides = get(block, "hardware_overrides")
            exact = get(overrides, self.hardware_id) if hashable_key(self.hardware_id) else None
            declared = (items(first(get(block, "vllm_args"), []))
                        + items(first(get(block, "extra_args"), []))
                        + items(first(get(generation_override(overrides, self.profile), "extra_args"), []))
                        + items(first(get(exact, "extra_args"), [])))
            flag = "--data-parallel-size-local"
            if flag in declared:
                index = len(declared) - 1 - declared[::-1].index(flag)
                self._dep_local = as_int_if_whole(to_number(declared[index + 1])) if index + 1 < len(declared) \
                    else math.nan
            else:
                self._dep_local = self.gpu_count
        return self._dep_local

    def kv_choice(self, kv_offload: Any) -> tuple[Any, Any, Any]:
        """(Mooncake store, KV-offload option, the store's default instance count) a ``kv_offload``
        selection names here; the store and option may be None.

        An option gated off by the strategy, the recipe or the brand is
        silently dropped, as on the recipes site.
        """
        if not hashable_key(kv_offload):
            return None, None, 2
        choice = self._kv_choices.get(kv_offload)
        if choice is None:
            choice = self._kv_choice(kv_offload)
            self._kv_choices[kv_offload] = choice
        return choice

    def _kv_choice(self, kv_offload: Any) -> tuple[Any, Any, Any]:
        store = get(self.strategies, kv_offload) if truthy(kv_offload) else None
        option = get(self.kv_options, kv_offload)
        allowed = (
            truthy(option)
            and kv_offload_allowed_for_strategy(option, self.strategy_name, self.strategy)
            and kv_offload_supported_for_recipe(option, kv_offload, self.recipe)
            and kv_offload_brand_supported(option, self.profile)
        )
        store = store if get(store, "deploy_type") == "kv_store_lb" else None
        return store, option if allowed else None, first(get(store, "default_instances"), 2)


class RoleLayers:
    """What every process of one role starts and ends with, around the per-selection layers.

    argv: ``head`` + parallel layout + ``middle`` + advanced/feature/KV args (each without empty tokens);
    ``single_node`` is ``head`` + the single-node parallel layout + ``middle`` (role None only).
    env: ``env_head`` + KV and PD pinning + ``env_tail`` + features and frontend.
    """

    __slots__ = ("head", "middle", "single_node", "env_head", "env_tail", "override_cfg", "strategy_cfg",
                 "parallelism", "parallel_flag", "dep_tp")

    def __init__(self, layout: Layout, role: Optional[str]) -> None:
        strategy, overrides = layout.strategy, layout.overrides
        is_pd = layout.deploy_type == "pd_cluster"
        role_strategy = get(strategy, role) if role else None
        # recipe's strategy_overrides.<strategy>.<role>, strategy YAML's <role>
        self.override_cfg = first(get(overrides, role), {})
        self.strategy_cfg = first(role_strategy, {})
        self._pool_defaults(layout)
        role_exact = get(get(get(overrides, role), "hardware_overrides"), layout.hardware_id) \
            if role and hashable_key(layout.hardware_id) else None
        head = list(layout.model_and_variant_args)
        if not is_pd:
            head += layout.strategy_args
        elif role and truthy(get(role_strategy, "vllm_args")):
            head += items(get(role_strategy, "vllm_args"))
        if role is None:
            middle = list(layout.override_args)
        elif truthy(overrides):
            block = get(overrides, role)
            middle = items(first(get(block, "extra_args"), None)) + items(first(get(block, "vllm_args"), None))
        else:
            middle = []
        middle += layout.hardware_args
        if role:
            middle += items(first(get(role_exact, "extra_args"), None))
        self.head = tuple(kept_tokens(head))
        self.middle = tuple(kept_tokens(middle))
        self.single_node = None if role else (
            *self.head, *kept_tokens((layout.parallel_flag, text(layout.single_node_tp))), *self.middle)
        self.env_head = dict(layout.model_and_variant_env)
        merge_env(self.env_head, get(strategy, "env") if not is_pd else get(role_strategy, "env") if role else None)
        tail: dict[str, Any] = {}
        if truthy(overrides):
            merge_env(tail, get(overrides, "env"))
            merge_env(tail, get(get(overrides, role), "env") if role else get(overrides, "extra_env"))
        tail.update(layout.hardware_env)
        if role:
            merge_env(tail, get(role_exact, "extra_env"))
        self.env_tail = tail

    def _pool_defaults(self, layout: Layout) -> None:
        """A PD pool's parallelism, parallel flag and DEP TP size when its request names none."""
        override_cfg, strategy_cfg = self.override_cfg, self.strategy_cfg
        self.parallelism = first(get(override_cfg, "parallelism"), get(strategy_cfg, "parallelism"), "tp")
        self.parallel_flag = first(get(override_cfg, "parallel_flag"), get(strategy_cfg, "parallel_flag"),
                                   get(layout.strategy, "parallel_flag"), "--tensor-parallel-size")
        self.dep_tp = first(get(override_cfg, "tp"), get(strategy_cfg, "tp"), 1)


_LAYOUT_CACHE: dict[tuple[Any, ...], tuple[tuple[Any, ...], Layout]] = {}
_LAYOUT_CACHE_SIZE = 16384  # the upstream corpus alone has ~8,500 combinations: 4,096 thrashed


def clear_layouts() -> None:
    """Drop every shared ``Layout``."""
    _LAYOUT_CACHE.clear()


def layout_for(recipe: Mapping[str, Any], variant_key: Any, strategy_name: Any, hardware_id: Any,
               strategies: Mapping[str, Any], taxonomy: Mapping[str, Any]) -> Layout:
    """The shared ``Layout`` of one recipe/variant/strategy/hardware combination."""
    key: Optional[tuple[Any, ...]]
    key = (id(recipe), variant_key, strategy_name, hardware_id, id(strategies), id(taxonomy))
    try:
        hit = _LAYOUT_CACHE.get(key)
    except TypeError:  # an unhashable selection value: computed, never cached
        hit = key = None
    if hit is not None and hit[0][0] is recipe and hit[0][1] is strategies and hit[0][2] is taxonomy:
        return hit[1]
    layout = Layout(recipe, variant_key, strategy_name, hardware_id, strategies, taxonomy)
    if key is not None:
        if len(_LAYOUT_CACHE) >= _LAYOUT_CACHE_SIZE:
            _LAYOUT_CACHE.clear()
        _LAYOUT_CACHE[key] = ((recipe, strategies, taxonomy), layout)
    return layout
