"""Features as a layout sees them (_feature_table): argv tokens worked out once, bad args raise only when used."""

from __future__ import annotations

import pytest

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._synthesis import resolve_command

TAXONOMY = {"hardware_profiles": {"h200": {"brand": "NVIDIA", "generation": "hopper", "gpu_count": 8}},
            "kv_offload": {}}
STRATEGIES = {"single_node_tp": {"deploy_type": "single_node"}}
RECIPE = {
    "model": {"model_id": "org/model"},
    "variants": {"default": {"tp": 1}},
    "features": {
        "good": {"args": ["--a", "", "--b"], "env": {"G": "1"},
                 "hardware_overrides": {"hopper": {"args": ["--hopper-only", ""]}}},
        "bad": {"args": 5, "env": {"B": "1"}},
        "modes": {"modes": {"on": {"args": ["--m", "on"]}, "off": {"args": []}}},
    },
}


def resolve(features, **kw):
    return resolve_command(RECIPE, "default", "single_node_tp", "h200", features, STRATEGIES, TAXONOMY, **kw)


def test_feature_args_per_hardware_without_empty_tokens():
    out = resolve(["good"], advanced_args=["--x", ""])
    assert out["argv"] == ["vllm", "serve", "org/model", "--tensor-parallel-size", "1", "--x", "--hopper-only"]
    assert out["env"] == {"G": "1"}


def test_args_that_are_no_list_raise_only_when_the_feature_is_selected():
    assert resolve(["good"])["argv"][-1] == "--hopper-only"
    with pytest.raises(TypeError, match="int value is not iterable"):
        resolve(["good", "bad"])


def test_a_moded_feature_adds_its_selected_mode():
    assert resolve(["modes"], feature_modes={"modes": "on"})["argv"][-2:] == ["--m", "on"]
    assert resolve(["modes"], feature_modes={"modes": "off"})["argv"][-1] == "1"
