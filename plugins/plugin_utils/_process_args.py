"""The argv of one synthesised process, before dedupe, in the recipes site's layer order.

Private to the vllm_fleet.recipes collection: not a public API.

Layers: model, variant, strategy plus its parallel layout (single node,
multi-node ranks, or a PD pool), strategy overrides, hardware overrides,
advanced args, features, then KV connectors (which must win the last-wins
dedupe).
"""

from __future__ import annotations

import math
from typing import Any, Optional

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._cmdline import kept_tokens
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._jsvalue import (
    as_int_if_whole,
    get,
    items,
    js_max,
    js_min,
    number_text,
    present,
    text,
    to_number,
    truthy,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._synthesis_context import SynthesisContext


def process_args(ctx: SynthesisContext, role: Optional[str], node_role: Optional[str],
                 node_rank: Any = 1) -> list[Any]:
    """One process's argv, empty tokens already dropped (``kept_tokens``) but not yet deduplicated.

    ``role`` is a PD pool, ``node_role`` head/worker of a multi-node deployment.
    """
    layers = ctx.layout.layers(role)
    if role is None and layers.single_node is not None and not ctx.is_multi and ctx.layout.deploy_type != "pd_cluster":
        return [*layers.single_node, *ctx.tail_args()]
    args = [*layers.head, *kept_tokens(_parallel_args(ctx, role, node_role, node_rank)), *layers.middle,
            *ctx.tail_args()]
    if role and ctx.layout.deploy_type == "pd_cluster":
        pd_args = get(get(get(ctx.kv_store, "pd"), role), "args")
        if truthy(pd_args):
            args += kept_tokens(items(pd_args))
    return args


def _parallel_args(ctx: SynthesisContext, role: Optional[str], node_role: Optional[str],
                   node_rank: Any) -> list[str]:
    layout = ctx.layout
    parallel_flag = layout.parallel_flag
    if not ctx.is_multi and layout.deploy_type != "pd_cluster":
        return [parallel_flag, text(layout.single_node_tp)]
    if ctx.is_multi:
        return _multi_node_args(ctx, node_role, node_rank)
    if layout.deploy_type == "pd_cluster":
        return _pd_pool_args(ctx, role)
    return [parallel_flag, text(layout.single_node_tp)]


def _multi_node_args(ctx: SynthesisContext, node_role: Optional[str], node_rank: Any) -> list[str]:
    """The parallel layout of one rank of a multi-node deployment."""
    layout = ctx.layout
    mp_rank = as_int_if_whole(js_max(1, node_rank)) if node_role == "worker" else 0
    master = ctx.master_addr()
    nodes = ctx.node_count
    parallelism = layout.parallelism
    out: list[str] = []
    if layout.parallel_flag == "--data-parallel-size":
        dp_local = layout.dep_local_size()
        out += ["--data-parallel-size", number_text(ctx.total_gpus),
                "--data-parallel-size-local", number_text(layout.gpu_count),
                "--data-parallel-address", master]
        if node_role == "worker":
            out += ["--data-parallel-start-rank", number_text(as_int_if_whole(mp_rank * dp_local))]
    elif parallelism == "tp_pp":
        out += ["--tensor-parallel-size", number_text(layout.gpu_count),
                "--pipeline-parallel-size", text(nodes),
                "--nnodes", text(nodes),
                "--node-rank", number_text(mp_rank),
                "--master-addr", master]
        if mp_rank > 0:
            out.append("--headless")
    elif parallelism == "tp_dp":
        out += ["--tensor-parallel-size", number_text(layout.gpu_count),
                "--data-parallel-size", text(nodes),
                "--data-parallel-size-local", "1",
                "--data-parallel-address", master]
        if node_role == "worker":
            out += ["--data-parallel-start-rank", number_text(mp_rank)]
    else:
        out += ["--tensor-parallel-size", number_text(ctx.total_gpus),
                "--nnodes", text(nodes),
                "--node-rank", number_text(mp_rank),
                "--master-addr", master]
        if mp_rank > 0:
            out.append("--headless")
    return out


def _pd_pool_args(ctx: SynthesisContext, role: Optional[str]) -> list[str]:
    if role is None:
        raise TypeError("pd_cluster needs a role (prefill or decode) for every process")
    layout = ctx.layout
    request = ctx.pd_request(role)
    pool_nodes = ctx.pool_nodes(request)
    pool_gpus = (as_int_if_whole(math.floor(layout.gpu_count / 2)) if pool_nodes == 0
                 else as_int_if_whole(pool_nodes * layout.gpu_count))
    parallelism = ctx.pd_parallelism(role)
    allowed = layout.pool_modes
    if parallelism not in allowed:
        parallelism = allowed[0]
    if parallelism == "dep":
        return _dep_pool_args(ctx, role, request, pool_nodes)
    upper = role.upper()
    out = [layout.layers(role).parallel_flag, number_text(as_int_if_whole(js_max(1, pool_gpus)))]
    if parallelism == "tep":
        out.append("--enable-expert-parallel")
    if to_number(pool_nodes) > 1:
        node_index = as_int_if_whole(js_max(0, js_min(to_number(pool_nodes) - 1, present(request.get("rank"), 0))))
        out += ["--nnodes", text(pool_nodes), "--node-rank", number_text(node_index),
                "--master-addr", f"${upper}_NODE_1"]
        if node_index > 0:
            out.append("--headless")
    return out


def _dep_pool_args(ctx: SynthesisContext, role: str, request: dict[str, Any], pool_nodes: Any) -> list[str]:
    """A data+expert-parallel PD pool: one DP rank group per node, hybrid load balancing across nodes."""
    override_cfg, strategy_cfg = ctx.role_config(role)
    upper = role.upper()
    out: list[str] = []
    pool = as_int_if_whole(js_max(1, pool_nodes))
    explicit_tp = get(override_cfg, "tp")
    if explicit_tp is None:
        explicit_tp = get(strategy_cfg, "tp")
    tp_declared = (isinstance(override_cfg, dict) and "tp" in override_cfg and override_cfg["tp"] is not None) \
        or (isinstance(strategy_cfg, dict) and "tp" in strategy_cfg)
    role_tp = explicit_tp if explicit_tp is not None else 1
    dp_local = as_int_if_whole(js_max(1, math.floor(ctx.layout.gpu_count / to_number(role_tp))))
    node_index = as_int_if_whole(js_max(0, js_min(to_number(pool) - 1, present(request.get("rank"), 0))))
    if tp_declared:
        out += ["--tensor-parallel-size", text(role_tp)]
    out += ["--data-parallel-size", number_text(as_int_if_whole(pool * dp_local)),
            "--data-parallel-size-local", number_text(dp_local),
            "--data-parallel-start-rank", number_text(as_int_if_whole(node_index * dp_local)),
            "--data-parallel-address", f"${upper}_NODE_1",
            "--data-parallel-rpc-port", f"${upper}_DP_RPC_PORT"]
    if pool > 1:
        out.append("--data-parallel-hybrid-lb")
    out.append("--enable-expert-parallel")
    return out
