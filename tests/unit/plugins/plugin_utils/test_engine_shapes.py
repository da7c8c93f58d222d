"""The shape table: which shape an output has, and the view one placer reads for a rank or instance."""

from __future__ import annotations

import pytest

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._engine_shapes import SHAPES, shape_of
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._launch import Launch, Process, Service


@pytest.mark.parametrize("output, shape", [
    ({"deployType": "pd_cluster", "prefill": {}}, "pd_cluster"),
    ({"deployType": "kv_store_lb", "vllm": {}}, "kv_store_lb"),
    ({"deployType": "multi_node", "headArgv": []}, "multi_node"),
    ({"deployType": "multi_node", "argv": []}, "single_node"),  # a multi-node strategy on one node
    ({"deployType": "single_node", "argv": []}, "single_node"),
    ({"argv": []}, "single_node"),
])
def test_shape_of(output, shape):
    assert shape_of(output) == shape


def proc(name: str, role: str, group: str, rank: int, port=None) -> Process:
    return Process(name=name, role=role, group=group, rank=rank, argv=("vllm", "serve", name), command=name,
                   env={"RANK": str(rank)}, port=port, docker_argv=("docker", "run", name))


def test_pd_view_carries_the_requested_rank_of_each_pool_the_router_and_mooncake():
    output = {"deployType": "pd_cluster", "prefill": {"nodes": 2}, "decode": {"nodes": 1},
              "routerConfig": {"policy": "round_robin"}, "mooncake": {"config": {"protocol": "rdma"}}}
    processes = [proc("prefill-0", "prefill", "prefill", 0, 8001), proc("prefill-1", "prefill", "prefill", 1, 8001),
                 proc("decode-0", "decode", "decode", 0, 8002), proc("router", "router", "router", 0),
                 proc("mooncake-master", "mooncake_master", "mooncake", 0)]
    engines, router, mooncake = SHAPES["pd_cluster"].view(
        output, processes, {"pd_nodes": {"prefill": {"nodes": 2, "rank": 1}, "decode": 1}})
    assert engines == {"prefill": (Launch(("vllm", "serve", "prefill-1"), {"RANK": "1"}, ("docker", "run", "prefill-1")),),
                       "decode": (Launch(("vllm", "serve", "decode-0"), {"RANK": "0"}, ("docker", "run", "decode-0")),)}
    assert router == Service(("vllm", "serve", "router"), None, {"policy": "round_robin"})
    assert mooncake.master.argv == ("vllm", "serve", "mooncake-master") and mooncake.store is None
    assert mooncake.config == {"protocol": "rdma"}


def test_kv_view_takes_the_current_instance_with_its_workers_in_rank_order():
    output = {"deployType": "kv_store_lb", "router": {"command": "r", "install": "x", "port": 30080},
              "mooncakeConfig": {"mode": "x"}}
    processes = [proc("instance-0-0", "head", "instance-0", 0, 8000), proc("instance-1-2", "worker", "instance-1", 2),
                 proc("instance-1-0", "head", "instance-1", 0, 8000), proc("instance-1-1", "worker", "instance-1", 1),
                 proc("router", "router", "router", 0, 30080)]
    engines, router, mooncake = SHAPES["kv_store_lb"].view(output, processes,
                                                           {"kv_instances": {"count": 2, "current": 1}})
    assert engines["vllm"][0].argv == ("vllm", "serve", "instance-1-0")
    assert [w.argv[-1] for w in engines["vllm_workers"]] == ["instance-1-1", "instance-1-2"]
    assert router.port == 30080 and router.config == {"port": 30080}
    assert mooncake.master is None and mooncake.config == {"mode": "x"}


def test_multi_and_single_views_have_their_engines_only():
    processes = [proc("head", "head", "engine", 0, 8000), proc("worker-1", "worker", "engine", 1)]
    engines, router, mooncake = SHAPES["multi_node"].view({"headArgv": []}, processes, {})
    assert engines["head"][0].argv[-1] == "head" and [w.argv[-1] for w in engines["workers"]] == ["worker-1"]
    assert router is None and mooncake is None
    assert SHAPES["single_node"].view({"argv": []}, [proc("serve", "single", "engine", 0, 8000)], {})[0] == \
        {"single": (Launch(("vllm", "serve", "serve"), {"RANK": "0"}, ("docker", "run", "serve")),)}
