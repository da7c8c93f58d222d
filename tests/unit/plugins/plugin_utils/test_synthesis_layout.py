"""Per-combination layout facts (_synthesis_layout): immutable, shared, and what resolutions are built from."""

from __future__ import annotations

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._synthesis import clear_caches, resolve_command
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._synthesis_layout import layout_for

TAXONOMY = {"hardware_profiles": {"h200": {"brand": "NVIDIA", "generation": "hopper", "gpu_count": 8}},
            "kv_offload": {}}
STRATEGIES = {
    "single_node_tp": {"deploy_type": "single_node", "vllm_args": ["--enable-x", ""]},
    "mooncake": {"deploy_type": "kv_store_lb", "default_instances": 3},
}
RECIPE = {
    "model": {"model_id": "org/model", "base_args": ["--trust-remote-code", ""]},
    "variants": {"default": {"tp": 4}},
    "strategy_overrides": {"single_node_tp": {"extra_args": ["--max-num-seqs", "8"]}},
    "hardware_overrides": {"hopper": {"extra_args": ["--kv-cache-dtype", "fp8"]}},
}


def test_layers_are_tuples_and_single_node_is_head_parallel_middle():
    layers = layout_for(RECIPE, "default", "single_node_tp", "h200", STRATEGIES, TAXONOMY).layers(None)
    assert layers.head == ("--trust-remote-code", "--enable-x")
    assert layers.middle == ("--max-num-seqs", "8", "--kv-cache-dtype", "fp8")
    assert layers.single_node == (*layers.head, "--tensor-parallel-size", "4", *layers.middle)


def test_a_caller_mutating_one_output_changes_no_later_one():
    first = resolve_command(RECIPE, "default", "single_node_tp", "h200", [], STRATEGIES, TAXONOMY)
    first["argv"].append("--mutated")
    again = resolve_command(RECIPE, "default", "single_node_tp", "h200", [], STRATEGIES, TAXONOMY)
    assert again["argv"] == ["vllm", "serve", "org/model", "--trust-remote-code", "--enable-x",
                             "--tensor-parallel-size", "4", "--max-num-seqs", "8", "--kv-cache-dtype", "fp8"]


def test_kv_choice_carries_the_store_default_instance_count():
    layout = layout_for(RECIPE, "default", "single_node_tp", "h200", STRATEGIES, TAXONOMY)
    assert layout.kv_choice("mooncake")[0] is STRATEGIES["mooncake"]
    assert layout.kv_choice("mooncake")[2] == 3
    assert layout.kv_choice(None)[2] == layout.kv_choice(["unhashable"])[2] == 2


def test_clear_caches_forgets_shared_layouts_and_the_next_resolution_is_the_same():
    before = resolve_command(RECIPE, "default", "single_node_tp", "h200", [], STRATEGIES, TAXONOMY)
    shared = layout_for(RECIPE, "default", "single_node_tp", "h200", STRATEGIES, TAXONOMY)
    clear_caches()
    assert layout_for(RECIPE, "default", "single_node_tp", "h200", STRATEGIES, TAXONOMY) is not shared
    assert resolve_command(RECIPE, "default", "single_node_tp", "h200", [], STRATEGIES, TAXONOMY) == before
