"""Command synthesis with the recipes site's semantics, argv for argv.

Private to the vllm_fleet.recipes collection: not a public API.

``resolve_command`` turns a recipe plus a selection into the processes the
recipes site would print: one ``vllm serve`` argv for a single node, a head and
one argv per follower rank for multi-node strategies, prefill/decode pools plus
a vllm-router line for disaggregated serving, and the Mooncake KV-store shell
around any serving strategy. It is a parity layer: it reproduces upstream's
silent fallbacks (unknown variants fall back to ``default``, unknown strategies
behave as single-node). Deployments go through the strict checks in
``_selection`` first.

All inputs are the plain structures ``yaml.safe_load`` returns: ``recipe`` is a
``models/<org>/<repo>.yaml`` document, ``strategies`` maps every serving
strategy and KV-store deployment by name, and ``taxonomy`` holds
``hardware_profiles`` and ``kv_offload``.

The work is spread over: ``_gates`` (hardware-keyed lookups and gates),
``_synthesis_layout`` (what a recipe/variant/strategy/hardware combination
fixes), ``_synthesis_context`` (what the selection adds), ``_process_args`` and
``_process_env`` (one process), ``_deploy_shapes`` (the output per deploy type)
and ``_cmdline`` (argv dedupe and command layout).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _cmdline, _synthesis_layout
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._deploy_shapes import (
    kv_store,
    multi_node,
    pd_cluster,
    single_node,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._jsvalue import to_number
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._synthesis_context import SynthesisContext

ResolveFn = Callable[..., dict[str, Any]]


def resolve_command(recipe: Mapping[str, Any], variant: Any, strategy: Any, hardware: Any, features: Any,
                    strategies: Mapping[str, Any], taxonomy: Mapping[str, Any], advanced_args: Any = (),
                    node_count: Any = 1, pd_nodes: Any = None, feature_modes: Any = None,
                    kv_offload: Any = None, kv_instances: Any = None, frontend: Any = None) -> dict[str, Any]:
    """Resolve one selection into the recipes site's output shape (camelCase keys).

    The positional order is the recipes site's own, so a conformance case can
    be replayed argument for argument. ``frontend`` ("rust" or "python") picks
    the API-server frontend; left unset, the recipe's ``default_frontend``
    decides.
    """
    ctx = SynthesisContext(recipe, variant, strategy, hardware, features, strategies, taxonomy,
                           advanced_args, node_count, pd_nodes, feature_modes or {}, kv_offload,
                           kv_instances, frontend)
    deploy_type = ctx.layout.deploy_type
    if deploy_type == "pd_cluster":
        return pd_cluster(ctx)
    if ctx.kv_composing:
        return kv_store(ctx)
    if deploy_type == "multi_node" and to_number(node_count) > 1:
        return multi_node(ctx)
    return single_node(ctx)


def clear_caches() -> None:
    """Forget the shared layouts and command pieces, as in a fresh process (benchmarks, tests)."""
    _synthesis_layout.clear_layouts()
    _cmdline.clear_pieces()
