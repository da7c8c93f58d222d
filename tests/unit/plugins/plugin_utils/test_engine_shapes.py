"""The shape table: which shape an output has, and the view one placer reads for a rank or instance."""

from __future__ import annotations

import pytest

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._engine_shapes import SHAPES, shape_of
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._launch import Process


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


def test_pd_view_carries_the_requested_rank_of_each_pool():
    output = {"deployType": "pd_cluster", "prefill": {"nodes": 2, "argv": ["rank0"]},
              "decode": {"nodes": 1, "argv": ["rank0"]}}
    processes = [proc("prefill-0", "prefill", "prefill", 0, 8001), proc("prefill-1", "prefill", "prefill", 1, 8001),
                 proc("decode-0", "decode", "decode", 0, 8002)]
    sections, docker = SHAPES["pd_cluster"].view(output, processes,
                                                 {"pd_nodes": {"prefill": {"nodes": 2, "rank": 1}, "decode": 1}})
    assert sections["prefill"] == {"nodes": 2, "argv": ["vllm", "serve", "prefill-1"], "env": {"RANK": "1"},
                                   "command": "prefill-1", "currentNode": 1}
    assert sections["decode"]["argv"] == ["vllm", "serve", "decode-0"] and sections["decode"]["currentNode"] == 0
    assert docker == {"prefill": {"port": 8001, "argv": ["docker", "run", "prefill-1"]},
                      "decode": {"port": 8002, "argv": ["docker", "run", "decode-0"]}}


def test_kv_view_takes_the_current_instance_with_its_workers_in_rank_order():
    output = {"deployType": "kv_store_lb", "vllm": {"argv": ["instance0"], "port": 8000}}
    processes = [proc("instance-0-0", "head", "instance-0", 0, 8000), proc("instance-1-2", "worker", "instance-1", 2),
                 proc("instance-1-0", "head", "instance-1", 0, 8000), proc("instance-1-1", "worker", "instance-1", 1)]
    sections, docker = SHAPES["kv_store_lb"].view(output, processes, {"kv_instances": {"count": 2, "current": 1}})
    assert sections["currentInstance"] == 1
    assert sections["vllm"]["argv"] == ["vllm", "serve", "instance-1-0"] and sections["vllm"]["port"] == 8000
    assert sections["vllm"]["workerArgvs"] == [["vllm", "serve", "instance-1-1"], ["vllm", "serve", "instance-1-2"]]
    assert [d["argv"][-1] for d in docker["vllm_workers"]] == ["instance-1-1", "instance-1-2"]


def test_multi_and_single_views_replace_no_section():
    processes = [proc("head", "head", "engine", 0, 8000), proc("worker-1", "worker", "engine", 1)]
    sections, docker = SHAPES["multi_node"].view({"headArgv": []}, processes, {})
    assert sections == {} and docker["head"]["port"] == 8000 and [w["argv"][-1] for w in docker["workers"]] == ["worker-1"]
    assert SHAPES["single_node"].view({"argv": []}, [proc("serve", "single", "engine", 0, 8000)], {})[1] == \
        {"single": {"port": 8000, "argv": ["docker", "run", "serve"]}}
