"""Strict selection checks: every rejection names the key, the value and what is accepted."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._catalog import load_catalog
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._engine import resolve, selection_from_mapping
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._errors import SelectionError
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._loader import load_recipe

SEED = "recipes/models/zai-org/GLM-5.3-Flash.yaml"


@pytest.fixture(scope="module")
def seed(repo_root):
    return load_recipe(repo_root / SEED)


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def _recipe_with(seed, **changes):
    data = copy.deepcopy(seed.data)
    for dotted, value in changes.items():
        node = data
        *path, last = dotted.split("__")
        for part in path:
            node = node.setdefault(part, {})
        node[last] = value
    return data


# (selection, key named, value shown, words of the accepted values or reason)
REJECTED = [
    ({"variant": "int4"}, "variant", "'int4'", "one of: bf16, default, nvfp4"),
    ({"hardware": "h300"}, "hardware", "'h300'", "h200"),
    ({"variant": "nvfp4", "hardware": "h200"}, "hardware", "'h200'", "NVIDIA blackwell hardware for precision 'nvfp4'"),
    ({"strategy": "multi_node_tpx"}, "strategy", "'multi_node_tpx'", "single_node_tp"),
    ({"hardware": "ascend_950pr_8x", "strategy": "single_node_tep"}, "strategy", "'single_node_tep'",
     "not supported on ascend_950pr_8x"),
    ({"strategy": "single_node_tp", "node_count": 2}, "node_count", "2", "1 for single-node strategy"),
    ({"strategy": "multi_node_tp", "node_count": 1}, "node_count", "1", "at least 2 for multi-node strategy"),
    ({"strategy": "multi_node_tp", "node_count": 17}, "node_count", "17", "an integer 1..16"),
    ({"node_count": "two"}, "node_count", "'two'", "an integer 1..16"),
    ({"features": ["tool_calling", "vision"]}, "features[1]", "'vision'", "one of: reasoning, spec_decoding, tool_calling"),
    ({"features": ["spec_decoding"], "feature_modes": {"spec_decoding": "eagle"}}, "feature_modes.spec_decoding",
     "'eagle'", "one of: dflash, mtp"),
    ({"hardware": "mi355x", "features": ["spec_decoding"], "feature_modes": {"spec_decoding": "dflash"}},
     "feature_modes.spec_decoding", "'dflash'", "not available for variant 'default' on mi355x"),
    ({"feature_modes": {"reasoning": "fast"}}, "feature_modes.reasoning", "'fast'", "feature 'reasoning' has no modes"),
    ({"feature_modes": {"warp": "x"}}, "feature_modes.warp", "'x'", "a feature key"),
    ({"feature_modes": {"spec_decoding": "mtp"}}, "feature_modes.spec_decoding", "'mtp'", "is not enabled"),
    ({"frontend": "go"}, "frontend", "'go'", "one of: python, rust"),
    ({"kv_offload": "nvme_magic"}, "kv_offload", "'nvme_magic'", "offloading_cpu"),
    ({"hardware": "ascend_950pr_8x", "kv_offload": "offloading_cpu"}, "kv_offload", "'offloading_cpu'",
     "hardware of brand one of: AMD, NVIDIA"),
    ({"strategy": "pd_cluster", "kv_offload": "offloading_cpu"}, "kv_offload", "'offloading_cpu'",
     "not available with strategy 'pd_cluster'"),
    ({"kv_instances": 3}, "kv_instances", "3", "unset unless kv_offload names a Mooncake"),
    ({"kv_offload": "kv_store_centralized_mooncake", "kv_instances": 0}, "kv_instances", "0", "an integer 1..16"),
    ({"hardware": "ascend_950pr_8x", "kv_offload": "kv_store_centralized_mooncake"}, "kv_offload",
     "'kv_store_centralized_mooncake'", "NVIDIA and AMD GPUs only"),
    ({"strategy": "pd_cluster", "pd_nodes": {"prefill": 1, "decode": {"nodes": 2, "parallelism": "ring"}}},
     "pd_nodes.decode.parallelism", "'ring'", "one of: dep, tep, tp"),
    ({"strategy": "pd_cluster", "pd_nodes": {"prefill": {"nodes": 2, "rank": 2}, "decode": 1}},
     "pd_nodes.prefill.rank", "2", "an integer 0..1"),
    ({"strategy": "pd_cluster", "pd_nodes": {"prefill": 1, "decode": {"nodes": 1, "replicas": 2}}},
     "pd_nodes.decode.replicas", "2", "only nodes, rank and parallelism"),
    ({"strategy": "pd_cluster", "pd_nodes": {"prefill": 0, "decode": 1}}, "pd_nodes", "{'prefill': 0",
     "both pools co-located"),
    ({"strategy": "pd_cluster", "pd_nodes": {"prefill": 1, "router": 1}}, "pd_nodes", "{'prefill': 1, 'router': 1}",
     "keys prefill and decode"),
    ({"advanced_args": ["--max-model-len", 4096]}, "advanced_args[1]", "4096", "a non-empty string"),
    ({"gpus": 8}, "selection.gpus", "8", "a key among variant, hardware"),
]


@pytest.mark.parametrize("selection, key, value, expected", REJECTED, ids=[r[1] + ":" + r[2] for r in REJECTED])
def test_rejected_selection_names_key_value_and_fix(seed, catalog, selection, key, value, expected):
    with pytest.raises(SelectionError) as caught:
        resolve(seed, selection, catalog)
    message = str(caught.value)
    assert caught.value.key == key
    assert message.startswith(f"{key}: got {value}")
    assert expected in message


def test_strategy_min_gpus_floor_is_enforced(seed, catalog):
    data = _recipe_with(seed, strategy_min_gpus={"multi_node_tp": 32})
    with pytest.raises(SelectionError) as caught:
        resolve(data, {"strategy": "multi_node_tp", "node_count": 2}, catalog)
    assert caught.value.key == "node_count"
    assert "at least 4 nodes of h200" in str(caught.value)
    assert "needs 32 GPUs (strategy_min_gpus)" in str(caught.value)


def test_unreachable_strategy_is_rejected(seed, catalog):
    data = _recipe_with(seed, strategy_min_gpus={"single_node_tep": 16})
    with pytest.raises(SelectionError) as caught:
        resolve(data, {"strategy": "single_node_tep"}, catalog)
    assert caught.value.key == "strategy"
    assert "strategy_min_gpus 16" in str(caught.value)


def test_feature_restricted_to_other_strategies(seed, catalog):
    data = _recipe_with(seed, features__reasoning__strategies=["single_node_tp"])
    with pytest.raises(SelectionError) as caught:
        resolve(data, {"strategy": "single_node_tep", "features": ["reasoning"]}, catalog)
    assert caught.value.key == "features[0]"
    assert "not available with strategy 'single_node_tep'" in str(caught.value)


def test_hardware_opted_out_by_recipe(seed, catalog):
    data = _recipe_with(seed, meta__hardware__h100="unsupported")
    with pytest.raises(SelectionError) as caught:
        resolve(data, {"hardware": "h100"}, catalog)
    assert caught.value.key == "hardware"
    assert "the recipe marks this hardware unsupported" in str(caught.value)


def test_non_scalable_hardware_cannot_go_multi_node(catalog, seed):
    data = _recipe_with(seed)
    data["variants"]["default"]["vram_minimum_gb"] = 10
    with pytest.raises(SelectionError) as caught:
        resolve(data, {"hardware": "rtx_pro_6000", "strategy": "multi_node_tp", "node_count": 2}, catalog)
    assert caught.value.key == "strategy"
    assert "cannot be clustered" in str(caught.value)


def test_valid_selections_pass_and_defaults_fill_in(seed, catalog):
    resolution = resolve(seed, {"strategy": "multi_node_tp_pp"}, catalog)
    assert resolution.selection.node_count == 2
    assert resolution.selection.hardware == "h200"
    assert resolution.selection.features == ("tool_calling", "reasoning")
    assert [p.name for p in resolution.processes] == ["head", "worker-1"]


def test_selection_from_mapping_rejects_non_list_features():
    with pytest.raises(SelectionError) as caught:
        selection_from_mapping({"features": "tool_calling"})
    assert str(caught.value).startswith("features: got 'tool_calling' (str); expected a list")


def test_kv_offload_the_recipe_opts_out_of(seed, catalog):
    data = _recipe_with(seed, kv_offload_support__lmcache="unsupported")
    with pytest.raises(SelectionError) as caught:
        resolve(data, {"kv_offload": "lmcache"}, catalog)
    assert caught.value.key == "kv_offload"
    assert "the recipe does not opt in to it (kv_offload_support)" in str(caught.value)
    assert resolve(seed, {"kv_offload": "lmcache"}, catalog).processes[-1].role == "companion"
