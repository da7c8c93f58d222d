"""The recipes site's output shape for each deploy type, keyed in camelCase as the site keys it.

Private to the vllm_fleet.recipes collection: not a public API.

``single_node`` (with companion processes), ``multi_node`` (a head and one
argv per follower rank), ``pd_cluster`` (prefill and decode pools plus a
vllm-router line) and ``kv_store_lb`` (the Mooncake KV-store shell around any
serving strategy).
"""

from __future__ import annotations

import math
from typing import Any

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._cmdline import render_kept
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._gates import (
    PD_ROLE_PORTS,
    PD_ROLES,
    follower_ranks,
    hashable_key,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._jsvalue import (
    as_int_if_whole,
    first,
    get,
    is_number,
    items,
    js_max,
    js_min,
    present,
    text,
    to_number,
    truthy,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._process_args import process_args
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._process_env import process_env
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._synthesis_context import SynthesisContext


def rendered(ctx: SynthesisContext, args: list[Any]) -> tuple[str, list[Any]]:
    """(command string, argv) of one process (``process_args`` output), from one dedupe pass."""
    return render_kept(ctx.layout.model_id, args)


def _follower_processes(ctx: SynthesisContext) -> list[tuple[str, list[Any]]]:
    return [rendered(ctx, process_args(ctx, None, "worker", rank)) for rank in follower_ranks(ctx.node_count)]


def single_node(ctx: SynthesisContext) -> dict[str, Any]:
    command, argv = rendered(ctx, process_args(ctx, None, None))
    result = {
        "deployType": first(ctx.layout.deploy_type, "single_node"),
        "command": command,
        "argv": argv,
        "env": process_env(ctx, None),
    }
    companions = _companions(ctx)
    if companions:
        result["companions"] = companions
    return result


def multi_node(ctx: SynthesisContext) -> dict[str, Any]:
    head = rendered(ctx, process_args(ctx, None, "head"))
    workers = _follower_processes(ctx)
    return {
        "deployType": "multi_node",
        "nodeCount": ctx.node_count,
        "headCommand": head[0],
        "workerCommand": workers[0][0],
        "workerCommands": [w[0] for w in workers],
        "headArgv": head[1],
        "workerArgv": workers[0][1],
        "workerArgvs": [w[1] for w in workers],
        "env": process_env(ctx, None),
    }


def _companions(ctx: SynthesisContext) -> list[dict[str, Any]]:
    """Helper processes that run beside ``vllm serve`` on the same node."""
    table = ctx.layout.features
    out = []
    for key in items(first(ctx.features, [])):
        entry = table.entry(key) if hashable_key(key) else None
        if entry is None or entry.companion is None or not entry.allowed:
            continue
        companion = entry.companion
        out.append({
            "feature": key,
            "label": first(get(companion, "label"), key),
            "description": first(get(companion, "description"), ""),
            "command": text(companion["command"]).rstrip(),
        })
    option = ctx.kv_option
    companion = get(option, "companion")
    if option is not None and truthy(get(companion, "command")):
        install = get(option, "install")
        description = [first(get(companion, "description"), ""), f"Requires: {text(install)}" if truthy(install) else ""]
        out.append({
            "feature": f"kv_offload:{text(ctx.kv_offload)}",
            "label": first(get(companion, "label"), ctx.kv_offload),
            "description": " ".join(d for d in description if truthy(d)),
            "command": text(companion["command"]).rstrip(),
        })
    return out


def mooncake_services(ctx: SynthesisContext) -> dict[str, Any]:
    """The Mooncake master and store processes of a KV-store deployment."""
    store = ctx.kv_store
    master = get(store, "mooncake_master")
    store_cfg = get(store, "mooncake_store_config")
    return {
        "master": {
            "command": first(get(master, "command"), "mooncake_master"),
            "description": first(get(master, "description"), ""),
        },
        "store": {
            "command": get(store_cfg, "command"),
            "description": first(get(store_cfg, "description"), ""),
            "config": first(get(store_cfg, "config"), None),
            "note": first(get(store_cfg, "note"), ""),
        } if truthy(store_cfg) else None,
    }


def kv_store(ctx: SynthesisContext) -> dict[str, Any]:
    """Mooncake KV store: N vLLM instances (each possibly multi-node) behind a cache-aware router."""
    store = ctx.kv_store
    instances = ctx.kv_instance_count
    multi = ctx.layout.deploy_type == "multi_node" and to_number(ctx.node_count) > 1
    command, argv = rendered(ctx, process_args(ctx, None, "head" if multi else None))
    vllm: dict[str, Any] = {"command": command, "argv": argv}
    if multi:
        workers = _follower_processes(ctx)
        vllm.update({
            "workerCommand": workers[0][0],
            "workerArgv": workers[0][1],
            "workerCommands": [w[0] for w in workers],
            "workerArgvs": [w[1] for w in workers],
        })
    vllm["env"] = process_env(ctx, None)
    vllm["install"] = ctx.install_for_brand(get(get(store, "vllm"), "install"))
    router_cfg = get(store, "router")
    router_port = first(get(router_cfg, "port"), 30080)
    vllm_port = first(get(get(store, "vllm"), "port"), 8000)
    count = int(to_number(instances)) if is_number(instances) else 0
    router_lines = [
        f"vllm-router --policy {text(first(get(router_cfg, 'policy'), 'cache_aware'))} \\",
        *[f"    --backend-url http://$VLLM_INSTANCE_{i + 1}:{text(vllm_port)} \\" for i in range(count)],
        "    --host $ROUTER_HOST \\",
        "    --port $ROUTER_PORT \\",
        "    --cache-threshold 0.5 \\",
        "    --balance-abs-threshold 4 \\",
        "    --balance-rel-threshold 1.1",
    ]
    services = mooncake_services(ctx)
    return {
        "deployType": "kv_store_lb",
        "servingStrategy": ctx.layout.strategy_name,
        "nodeCount": ctx.node_count,
        "instances": instances,
        "currentInstance": ctx.kv_current_instance,
        "master": services["master"],
        "store": services["store"],
        "vllm": vllm,
        "router": {
            "command": "\n".join(router_lines),
            "install": first(get(router_cfg, "install"), "uv pip install vllm-router"),
            "port": router_port,
        } if to_number(instances) > 1 else None,
        "mooncakeConfig": first(get(get(store, "mooncake_vllm_config"), "template"), {}),
        "mooncakeConfigNote": first(get(get(store, "mooncake_vllm_config"), "note"), ""),
    }


def pool_meta(ctx: SynthesisContext, role: str) -> dict[str, Any]:
    """Sizes of one PD pool as the recipes site reports them."""
    gpu_count = ctx.layout.gpu_count
    request = ctx.pd_request(role)
    nodes = ctx.pool_nodes(request)
    parallelism = ctx.pd_parallelism(role)
    pool_gpus = (as_int_if_whole(math.floor(gpu_count / 2)) if nodes == 0
                 else as_int_if_whole(nodes * gpu_count))
    is_dep = parallelism == "dep"
    tp = ctx.layout.layers(role).dep_tp if is_dep else pool_gpus
    dp_local = as_int_if_whole(js_max(1, math.floor(gpu_count / to_number(tp)))) if is_dep else 0
    dp_size = as_int_if_whole(js_max(1, nodes) * dp_local) if is_dep else 1
    in_pool = js_max(1, nodes)
    current = as_int_if_whole(js_max(0, js_min(in_pool - 1, present(request.get("rank"), 0))))
    return {
        "nodes": nodes, "parallelism": parallelism, "tp": tp, "dpLocal": dp_local,
        "dpSize": dp_size, "poolGpus": pool_gpus, "currentNode": current,
        "startRank": as_int_if_whole(current * dp_local),
    }


def _pd_router_command(ctx: SynthesisContext, meta: dict[str, Any]) -> str:
    """The vllm-router line in front of the prefill and decode pools."""
    policy = first(get(get(ctx.layout.strategy, "router"), "policy"), "round_robin")

    def endpoints(role: str) -> list[str]:
        pool = meta[role]
        count = int(js_max(1, first(pool["nodes"], 1))) if pool["parallelism"] == "dep" else 1
        flag = f"--{role}"
        return [f"    {flag} http://${role.upper()}_NODE_{i + 1}:{PD_ROLE_PORTS[role]} \\" for i in range(count)]

    intra_dp = get(get(ctx.layout.overrides, "router"), "intra_node_data_parallel_size")
    if intra_dp is None:
        intra_dp = as_int_if_whole(js_max(first(meta["prefill"]["dpLocal"], 0), first(meta["decode"]["dpLocal"], 0), 1))
    return "\n".join([
        f"vllm-router --policy {text(policy)} \\",
        "    --vllm-pd-disaggregation \\",
        *endpoints("prefill"),
        *endpoints("decode"),
        "    --host $ROUTER_HOST \\",
        "    --port $ROUTER_PORT \\",
        f"    --intra-node-data-parallel-size {text(intra_dp)}",
    ])


def pd_cluster(ctx: SynthesisContext) -> dict[str, Any]:
    """Disaggregated prefill/decode pools behind a vllm-router."""
    meta = {role: pool_meta(ctx, role) for role in PD_ROLES}
    router_command = _pd_router_command(ctx, meta)
    role_args = {role: process_args(ctx, role, None) for role in PD_ROLES}
    result: dict[str, Any] = {"deployType": "pd_cluster", "nodeCount": ctx.node_count}
    store = ctx.kv_store
    if truthy(get(store, "pd")):
        result["mooncake"] = {**mooncake_services(ctx), **{
            "config": first(get(get(store, "mooncake_vllm_config"), "template"), {}),
            "configNote": first(get(get(store, "mooncake_vllm_config"), "note"), ""),
            "install": ctx.install_for_brand(get(get(store, "vllm"), "install")),
        }}
    for role in PD_ROLES:
        command, argv = rendered(ctx, role_args[role])
        result[role] = {
            "command": command,
            "argv": argv,
            "env": process_env(ctx, role),
            **meta[role],
        }
    result["router"] = {"command": router_command, "install": "uv pip install vllm-router"}
    result["routerConfig"] = first(get(ctx.layout.strategy, "router"), {"policy": "round_robin"})
    return result
