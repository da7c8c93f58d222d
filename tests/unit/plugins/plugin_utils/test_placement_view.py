"""The typed view placers read (_placement_view): every engine launch, router and Mooncake service of
real site records (the conformance corpus), read once; and what a malformed pinned record gives."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._argv_tools import shell_words
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._launch import Launch
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._placement_view import placement_view, view_record
from fleet_corpus import load_cases, with_docker

HF_IDS = ("Qwen/Qwen3.8-2.4T-A95B", "MiniMaxAI/MiniMax-M2")


@pytest.fixture(scope="module")
def records(shared_dir):
    """One corpus record (output plus docker) per shape, multi-node ones spanning 3 nodes."""
    found: dict[str, dict] = {}
    for case in load_cases(shared_dir, HF_IDS):
        output = case["output"]
        shape = output["deployType"] if output["deployType"] in ("pd_cluster", "kv_store_lb") else \
            "multi_node" if "headArgv" in output else "single_node"
        if shape == "kv_store_lb" and "workerArgvs" not in output["vllm"]:
            continue
        if shape == "pd_cluster" and "mooncake" not in output:
            continue
        if shape in ("multi_node", "kv_store_lb") and case["node_count"] != 3:
            continue
        found.setdefault(shape, with_docker(case))
    assert sorted(found) == ["kv_store_lb", "multi_node", "pd_cluster", "single_node"]
    return found


def docker(record: dict, key: str, index: int | None = None) -> tuple:
    entry = record["docker"]["processes"][key]
    return tuple((entry[index] if index is not None else entry)["argv"])


def test_single_node(records):
    record = records["single_node"]
    view = placement_view(record)
    assert (view.shape, view.deploy_type, view.image) == ("single_node", "single_node", record["docker"]["image"])
    assert view.engines == {"single": (Launch(tuple(record["argv"]), record["env"], docker(record, "single")),)}
    assert view.router is None and view.mooncake is None
    assert view.env == record["env"]


def test_multi_node_head_and_each_worker_with_its_own_docker_argv(records):
    record = records["multi_node"]
    view = placement_view(record)
    assert view.engine("head") == Launch(tuple(record["headArgv"]), record["env"], docker(record, "head"))
    assert [w.argv for w in view.engines["workers"]] == [tuple(a) for a in record["workerArgvs"]]
    assert [w.docker_argv for w in view.engines["workers"]] == [docker(record, "workers", i) for i in range(2)]


def test_pd_cluster_pools_router_and_mooncake(records):
    record = records["pd_cluster"]
    view = placement_view(record)
    for role in ("prefill", "decode"):
        part = record[role]
        assert view.engine(role) == Launch(tuple(part["argv"]), part["env"], docker(record, role))
    assert view.env == record["prefill"]["env"]
    assert view.router.argv == tuple(shell_words(record["router"]["command"]))
    assert view.router.config == record["routerConfig"]
    section = record["mooncake"]
    assert view.mooncake.master.argv == tuple(shell_words(section["master"]["command"]))
    assert view.mooncake.config == section["config"]
    assert "#" not in " ".join(view.mooncake.master.argv)  # the recipe's comment lines are gone


def test_kv_store_instance_router_and_services(records):
    record = records["kv_store_lb"]
    view = placement_view(record)
    vllm = record["vllm"]
    assert view.engine("vllm") == Launch(tuple(vllm["argv"]), vllm["env"], docker(record, "vllm"))
    assert [w.argv for w in view.engines["vllm_workers"]] == [tuple(a) for a in vllm["workerArgvs"]]
    assert view.mooncake.config == record["mooncakeConfig"]
    if record["router"]:
        assert view.router.port == record["router"]["port"]
        assert view.router.config == {"port": record["router"]["port"]}
    else:
        assert view.router is None


def test_a_pinned_record_short_of_docker_entries_gets_none_for_the_missing_ones(records):
    record = dict(records["multi_node"], docker={"image": "img:1", "processes": {"workers": []}})
    view = placement_view(record)
    assert view.image == "img:1"
    assert view.engine("head").docker_argv is None
    assert [w.docker_argv for w in view.engines["workers"]] == [None, None]


def test_a_record_without_an_engine_section_has_no_launch():
    view = placement_view({"deployType": "pd_cluster", "prefill": {"nodes": 1}})
    assert view.engines == {} and view.engine("prefill") is None and view.env == {}


def test_an_unbalanced_router_command_is_a_value_error():
    with pytest.raises(ValueError):
        placement_view({"deployType": "pd_cluster", "router": {"command": "vllm-router --policy 'x"}})


# --------------------------------------------------------------------------------------
# Pinned records are untrusted: any JSON in any part placement reads is read or refused
# with a ValueError naming the key, never another exception.
# --------------------------------------------------------------------------------------

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                    max_leaves=8)
PARTS = {
    "single_node": ["argv", "env"],
    "multi_node": ["headArgv", "workerArgvs", "env"],
    "pd_cluster": ["prefill", "decode", "router", "routerConfig", "mooncake"],
    "kv_store_lb": ["vllm", "router", "master", "store", "mooncakeConfig"],
}


def test_a_router_port_that_is_not_a_number_is_refused_by_key(records):
    record = dict(records["kv_store_lb"], router={"command": "vllm-router --port 1", "port": "80; rm"})
    with pytest.raises(ValueError, match=r"router\.port: got '80; rm'; expected a port number"):
        placement_view(record)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_json_in_a_pinned_record_is_read_or_refused_by_key(records, data):
    shape = data.draw(st.sampled_from(sorted(PARTS)))
    record = dict(records[shape])
    for key in data.draw(st.lists(st.sampled_from(PARTS[shape] + ["docker"]), min_size=1, max_size=3)):
        record[key] = data.draw(JSON)
    if shape == "multi_node" and "headArgv" not in record:
        record["headArgv"] = []
    try:
        view = placement_view(record)
    except ValueError as exc:
        assert ":" in str(exc)  # "<key>: what is wrong"
    else:
        assert all(isinstance(word, str) for launches in view.engines.values() for launch in launches
                   for word in launch.argv)
        assert view.router is None or view.router.port is None or \
            (isinstance(view.router.port, int) and not isinstance(view.router.port, bool))


# --------------------------------------------------------------------------------------
# Typed records (plan.json's resolutions): written by view_record, read back unchanged.
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", ["single_node", "multi_node", "pd_cluster", "kv_store_lb"])
def test_a_typed_record_reads_back_as_the_same_view_through_json(records, shape):
    view = placement_view(records[shape])
    record = json.loads(json.dumps(view_record(view)))
    assert "engines" in record and "headArgv" not in record and "docker" not in record
    assert placement_view(record) == view


TYPED_PARTS = ["shape", "image", "docker_meta", "engines", "router", "mooncake"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_json_in_a_typed_record_is_read_or_refused_by_key(records, data):
    record = view_record(placement_view(records[data.draw(st.sampled_from(sorted(PARTS)))]))
    for key in data.draw(st.lists(st.sampled_from(TYPED_PARTS), min_size=1, max_size=3)):
        record[key] = data.draw(JSON)
    try:
        view = placement_view(record)
    except ValueError as exc:
        assert ":" in str(exc)
    else:
        assert all(isinstance(word, str) for launches in view.engines.values() for launch in launches
                   for word in launch.argv)
