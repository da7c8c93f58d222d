"""docker_meta's site classification (_docker): the same for cached and unhashable brand/generation values."""

from __future__ import annotations

import pytest

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._docker import docker_meta


@pytest.mark.parametrize(("profile", "expected"), [
    ({"brand": "NVIDIA", "generation": "hopper"}, ("nvidia", False, False, False, False)),
    ({"brand": "AMD", "generation": "mi300"}, ("amd", True, False, False, False)),
    ({"brand": "Google", "generation": "tpu"}, ("tpu", False, True, False, False)),
    ({"brand": "Intel", "generation": "xpu"}, ("intel", False, False, True, True)),
    ({"brand": "Intel", "generation": "cpu"}, ("intel", False, False, False, True)),
    ({"brand": "NVIDIA", "generation": ["ada", "hopper"]}, ("nvidia", False, False, False, False)),
    ({"brand": ["AMD"], "generation": None}, ("nvidia", False, False, False, False)),
    ({}, ("nvidia", False, False, False, False)),
])
def test_classification(profile, expected):
    for _call in ("first", "cached"):  # the second from the per-(brand, generation) cache where hashable
        meta = docker_meta({"model": {}}, {}, profile)
        assert (meta["brandKey"], meta["isAmd"], meta["isTpu"], meta["isXpu"], meta["isIntel"]) == expected


def test_image_precedence_and_a_fresh_dict_per_call():
    recipe = {"model": {"docker_image": {"nvidia": "model:nv", "amd": "model:amd"}}}
    variant = {"docker_image": {"cu129": "v:129", "cu130": "v:130"},
               "hardware_overrides": {"h200": {"docker_image": "exact:h200"}}}
    nvidia = {"brand": "NVIDIA", "generation": "hopper"}
    assert docker_meta(recipe, variant, nvidia, "h200")["image"] == "exact:h200"
    assert docker_meta(recipe, variant, nvidia, "b200")["image"] == "v:130"
    assert docker_meta(recipe, variant, {"brand": "AMD"}, "mi355x")["image"] == "model:amd"
    assert docker_meta(recipe, {}, nvidia) is not docker_meta(recipe, {}, nvidia)
