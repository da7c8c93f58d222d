"""One resolution's selection, resolved once and shared by every process it renders.

Private to the vllm_fleet.recipes collection: not a public API.

``SynthesisContext`` pairs the static ``Layout`` (recipe, variant, strategy,
hardware) with what the selection adds: node counts, PD pool requests, the
KV-offload option or Mooncake store, the frontend and the enabled features.
The argv, env and deploy-shape builders all read from it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Optional, cast

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._cmdline import kept_tokens
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._feature_table import FeatureBlock
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._gates import (
    hashable_key,
    pick_mode,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._jsvalue import (
    as_int_if_whole,
    first,
    get,
    is_number,
    items,
    js_max,
    js_min,
    number_text,
    present,
    to_number,
    truthy,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._synthesis_layout import Layout, layout_for


def pd_role_request(pd_nodes: Any, role: str) -> dict[str, Any]:
    """One PD pool's request: a bare node count, or ``{nodes, rank, parallelism}``."""
    raw = get(pd_nodes, role) if truthy(pd_nodes) else None
    if is_number(raw):
        return {"nodes": raw}
    if isinstance(raw, dict):
        return raw
    return {}


def _length(value: Any) -> Any:
    """``value.length`` for strings and lists; other values have none."""
    return len(value) if isinstance(value, (str, list, tuple)) else None


class SynthesisContext:
    """A ``Layout`` plus one selection's node counts, KV choices, frontend and features."""

    __slots__ = ("layout", "node_count", "total_gpus", "features", "feature_modes", "advanced_args", "pd_nodes",
                 "is_multi", "kv_offload", "kv_store", "kv_option", "kv_composing", "kv_instance_count",
                 "kv_current_instance", "frontend", "_features", "_tail_args", "_pd_requests")

    def __init__(self, recipe: Mapping[str, Any], variant_key: Any, strategy_name: Any, hardware_id: Any,
                 features: Any, strategies: Mapping[str, Any], taxonomy: Mapping[str, Any], advanced_args: Any,
                 node_count: Any, pd_nodes: Any, feature_modes: Any, kv_offload: Any,
                 kv_instances: Any, frontend: Any) -> None:
        layout = layout_for(recipe, variant_key, strategy_name, hardware_id, strategies, taxonomy)
        self.layout: Layout = layout
        self.node_count = node_count
        self.total_gpus = as_int_if_whole(layout.gpu_count * js_max(1, node_count))
        self.features = features
        self.feature_modes = feature_modes
        self.advanced_args = advanced_args
        self.pd_nodes = pd_nodes
        self.is_multi = layout.deploy_type == "multi_node" and to_number(node_count) > 1

        self.kv_offload = kv_offload
        self.kv_store, self.kv_option, default_instances = layout.kv_choice(kv_offload)
        self.kv_composing = self.kv_store is not None and layout.deploy_type != "pd_cluster"

        # a bare count, or a {count, current} request
        if truthy(kv_instances) and isinstance(kv_instances, (dict, list)):
            count, current = get(kv_instances, "count"), get(kv_instances, "current")
        else:
            count, current = kv_instances, None
        if is_number(count) and count >= 1:
            self.kv_instance_count = math.floor(count)
        else:
            self.kv_instance_count = default_instances
        if current is None and type(self.kv_instance_count) is int:  # pylint: disable=unidiomatic-typecheck
            self.kv_current_instance: float = 0  # max(0, min(count - 1, 0)) of a whole count
        else:
            self.kv_current_instance = as_int_if_whole(
                js_max(0, js_min(to_number(self.kv_instance_count) - 1, present(current, 0))))
        self.frontend = frontend if truthy(frontend) else layout.default_frontend
        self._features: Optional[list[FeatureBlock]] = None
        self._tail_args: Optional[list[Any]] = None
        self._pd_requests: dict[str, Any] = {}

    # ---------------------------------------------------------------- helpers

    def master_addr(self) -> str:
        """Where followers find rank 0: the head node, or this Mooncake instance."""
        if self.kv_composing and to_number(self.kv_instance_count) > 1:
            return f"$VLLM_INSTANCE_{number_text(as_int_if_whole(to_number(self.kv_current_instance) + 1))}"
        return "$HEAD_IP"

    def role_config(self, role: str) -> tuple[Any, Any]:
        """(recipe's strategy_overrides.<strategy>.<role>, strategy YAML's <role>)."""
        layers = self.layout.layers(role)
        return layers.override_cfg, layers.strategy_cfg

    def pd_request(self, role: str) -> dict[str, Any]:
        """One PD pool's request (see ``pd_role_request``)."""
        request = self._pd_requests.get(role)
        if request is None:
            request = self._pd_requests[role] = pd_role_request(self.pd_nodes, role)
        return request

    def pd_parallelism(self, role: str) -> Any:
        """One PD pool's parallelism: the request's, else the role's override, strategy, then "tp"."""
        return first(self.pd_request(role).get("parallelism"), self.layout.layers(role).parallelism)

    def pool_nodes(self, request: dict[str, Any]) -> Any:
        """Nodes of one PD pool; without a request, 1 on a multi-node deployment, else co-located (0)."""
        legacy = 1 if to_number(self.node_count) > 1 else 0
        nodes = request.get("nodes")
        return nodes if is_number(nodes) else legacy

    def install_for_brand(self, raw: Any) -> Any:
        """An install hint, picked per brand when it is a brand map."""
        if isinstance(raw, (dict, list)):
            brand = get(self.layout.profile, "brand")
            key = "amd" if brand == "AMD" else "nvidia" if brand == "NVIDIA" else None
            return first(get(raw, key), None) if key else None
        return first(raw, None)

    # --------------------------------------------------------------- features

    def tail_args(self) -> list[Any]:
        """Advanced, feature and KV-connector args (empty tokens dropped): the layers every process ends with."""
        if self._tail_args is None:
            advanced = self.advanced_args
            args = kept_tokens(items(advanced)) if truthy(advanced) and truthy(_length(advanced)) else []
            for block in self.active_features():
                args += block.kept_args()
            if self.kv_option is not None:
                args += kept_tokens(items(first(get(self.kv_option, "args"), [])))
            if self.kv_composing:
                args += kept_tokens(items(first(get(get(self.kv_store, "vllm"), "vllm_args"), [])))
            self._tail_args = args
        return self._tail_args

    def active_features(self) -> list[FeatureBlock]:
        """The args and env each enabled feature contributes here, in feature order."""
        if self._features is None:
            self._features = self._collect_features()
        return self._features

    def _collect_features(self) -> list[FeatureBlock]:
        """A feature with ``modes`` contributes its active mode (nothing when no
        mode runs here); a plain feature contributes itself or its per-hardware
        replacement."""
        table = self.layout.features
        active = []
        for key in items(first(self.features, [])):
            entry = table.entry(key) if hashable_key(key) else None
            if entry is None or not entry.allowed:
                continue
            if self.kv_composing and entry.companion is not None:
                continue
            if entry.moded:
                mode_key = pick_mode(get(self.feature_modes, key), entry.allowed_modes, entry.fallback_mode)
                block = entry.mode_blocks.get(mode_key) if mode_key is not None else None
                if block is not None:
                    active.append(block)
                continue
            active.append(cast(FeatureBlock, entry.plain))  # set for every feature without modes
        return active
