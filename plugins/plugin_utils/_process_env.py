"""The environment of one synthesised process, layered like its argv.

Private to the vllm_fleet.recipes collection: not a public API.

Layers: model and variant env, strategy (or PD role) env, the KV-offload
option, the Mooncake store, PD device pinning, strategy overrides, hardware
overrides, features, then the frontend switch. PD pools drop NVL4-only
settings off GB200/GB300 and bind a non-zero DEP rank to its own node.
"""

from __future__ import annotations

import math
from typing import Any, Optional

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._gates import FRONTENDS
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._jsvalue import (
    as_int_if_whole,
    first,
    get,
    is_number,
    text,
    to_number,
    truthy,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._synthesis_context import SynthesisContext
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._synthesis_layout import merge_env

# NCCL symmetric-memory, cross-node NVLink and UCX device settings only make
# sense on GB200/GB300 NVL4 trays; pd_cluster drops them everywhere else.
NVL4_ONLY_ENV_KEYS = (
    "VLLM_USE_NCCL_SYMM_MEM",
    "NCCL_CUMEM_ENABLE",
    "NCCL_MNNVL_ENABLE",
    "NCCL_NVLS_ENABLE",
    "UCX_NET_DEVICES",
)
NVL4_HARDWARE_IDS = frozenset({"gb200", "gb300"})

FRONTEND_ENV = "VLLM_USE_RUST_FRONTEND"


def process_env(ctx: SynthesisContext, role: Optional[str]) -> dict[str, Any]:
    """The environment of one process (``role``: a PD pool, or None)."""
    layout = ctx.layout
    is_pd = layout.deploy_type == "pd_cluster"
    layers = layout.layers(role)
    env = dict(layers.env_head)
    if ctx.kv_option is not None:
        merge_env(env, get(ctx.kv_option, "env"))
    if ctx.kv_composing or (is_pd and role and truthy(get(ctx.kv_store, "pd"))):
        merge_env(env, get(get(ctx.kv_store, "vllm"), "env"))
    if is_pd and role:
        _pin_pool_devices(ctx, env, role)
    env.update(layers.env_tail)
    for block in ctx.active_features():
        merge_env(env, block.env)
    if ctx.frontend in FRONTENDS:
        env[FRONTEND_ENV] = "1" if ctx.frontend == "rust" else "0"
    if is_pd and layout.hardware_id not in NVL4_HARDWARE_IDS:
        for key in NVL4_ONLY_ENV_KEYS:
            env.pop(key, None)
    if is_pd and role:
        _point_at_own_node(ctx, env, role)
    return env


def _pin_pool_devices(ctx: SynthesisContext, env: dict[str, Any], role: str) -> None:
    """Whole nodes own every local GPU; a co-located pool takes its half."""
    gpu_count = ctx.layout.gpu_count
    pool_nodes = ctx.pool_nodes(ctx.pd_request(role))
    count = int(to_number(gpu_count)) if is_number(gpu_count) else 1
    if to_number(pool_nodes) >= 1:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(count))
        if to_number(pool_nodes) >= 2:
            env["GLOO_SOCKET_IFNAME"] = "$IFACE_NAME"
            env["NCCL_SOCKET_IFNAME"] = "$IFACE_NAME"
        return
    half = math.floor(gpu_count / 2)
    if half > 0:
        ids = range(half) if role == "prefill" else range(half, count)
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in ids)


def _point_at_own_node(ctx: SynthesisContext, env: dict[str, Any], role: str) -> None:
    """A non-zero DEP rank binds per-node values to its own node, not node 1."""
    request = ctx.pd_request(role)
    rank = first(request.get("rank"), 0)
    if not (to_number(rank) > 0 and ctx.pd_parallelism(role) == "dep"):
        return
    upper = role.upper()
    old, new = f"${upper}_NODE_1", f"${upper}_NODE_{text(as_int_if_whole(to_number(rank) + 1))}"
    for key, value in env.items():
        if value == old:
            env[key] = new
