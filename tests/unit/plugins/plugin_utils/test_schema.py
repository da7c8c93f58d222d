"""Shape checks: every upstream recipe passes, bad input is named precisely."""

from __future__ import annotations

import copy
import os
import pickle
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

_COLLECTIONS = str(Path(__file__).resolve().parents[4] / ".collections")
if _COLLECTIONS not in sys.path:  # harmless when conftest.py already did it
    sys.path.insert(0, _COLLECTIONS)

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._errors import (  # noqa: E402
    RecipeError,
    SchemaError,
    SelectionError,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._schema import (  # noqa: E402
    validate_hardware_profile,
    validate_kv_offload,
    validate_recipe,
    validate_strategy,
    validate_taxonomy,
)

REPO = Path(__file__).resolve().parents[4]
SHARED = Path(os.environ.get("VLLM_FLEET_SHARED_DIR") or REPO.parent / "shared")
UPSTREAM = SHARED / "upstream" / "recipes"
NO_SHARED = "../shared/upstream/recipes not found: upstream data tests need it beside the checkout"
SEED_YAML = REPO / "recipes" / "models" / "zai-org" / "GLM-5.3-Flash.yaml"


def _upstream_models() -> list[Any]:
    files = sorted(UPSTREAM.glob("models/*/*.yaml"))
    if not files:
        return [pytest.param(None, marks=pytest.mark.skip(reason=NO_SHARED))]
    return [pytest.param(f, id=f"{f.parent.name}/{f.stem}", marks=pytest.mark.shared) for f in files]


def _load(path: Path) -> Any:
    with path.open(encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def _minimal() -> dict[str, Any]:
    return {
        "meta": {"title": "X", "tasks": ["text"]},
        "model": {"model_id": "org/x", "base_args": ["--a", "1"], "base_env": {"A": "1"}},
        "variants": {"default": {"precision": "bf16", "vram_minimum_gb": 16},
                     "fp8": {"precision": "fp8", "vram_minimum_gb": 8}},
        "compatible_strategies": ["single_node_tp"],
        "strategy_overrides": {},
    }


# --------------------------------------------------------------------------
# Every recipe we know of validates, untouched
# --------------------------------------------------------------------------
@pytest.mark.parametrize("path", _upstream_models())
def test_upstream_recipe_validates_and_is_returned_untouched(path: Path) -> None:
    data = _load(path)
    before = copy.deepcopy(data)
    assert validate_recipe(data, str(path)) is data
    assert data == before
    assert list(data) == list(before)


def test_shipped_seed_recipe_validates() -> None:
    data = _load(SEED_YAML)
    assert validate_recipe(data, str(SEED_YAML)) is data


@pytest.mark.shared
def test_validating_all_upstream_recipes_is_fast() -> None:
    files = sorted(UPSTREAM.glob("models/*/*.yaml"))
    if not files:
        pytest.skip(NO_SHARED)
    docs = [(_load(f), str(f)) for f in files]
    start = time.perf_counter()
    for data, source in docs:
        validate_recipe(data, source)
    per_recipe_ms = (time.perf_counter() - start) * 1000 / len(docs)
    assert len(docs) == 127
    # Measured ~0.04 ms per recipe; the bound leaves room for slow CI boxes.
    assert per_recipe_ms < 5, f"{per_recipe_ms:.3f} ms per recipe"


@pytest.mark.shared
def test_upstream_strategies_and_taxonomy_validate() -> None:
    files = sorted(UPSTREAM.glob("strategies/*.yaml")) + sorted(UPSTREAM.glob("kv_store/*.yaml"))
    if not files:
        pytest.skip(NO_SHARED)
    assert len(files) == 11
    for f in files:
        doc = _load(f)
        assert validate_strategy(doc, str(f)) is doc
    taxonomy = _load(UPSTREAM / "taxonomy.yaml")
    assert validate_taxonomy(taxonomy) is taxonomy


# --------------------------------------------------------------------------
# Shapes that must be accepted (they occur upstream, or upstream's
# synthesis documents them)
# --------------------------------------------------------------------------
Mutation = Callable[[dict[str, Any]], None]

GOOD: list[tuple[str, Mutation]] = [
    ("unknown keys everywhere", lambda d: (d.update(brand_new_field={"x": [1]}),
                                           d["model"].update(future_flag=True),
                                           d["variants"]["fp8"].update(new_thing="y"))),
    ("docker_image string", lambda d: d["model"].update(docker_image="vllm/vllm-openai:v1")),
    ("docker_image brand map", lambda d: d["model"].update(docker_image={"nvidia": "a", "amd": "b"})),
    ("docker_image CUDA map", lambda d: d["model"].update(docker_image={"cu129": "a-cu129", "cu130": "a"})),
    ("docker_image brand map with CUDA map", lambda d: d["model"].update(
        docker_image={"nvidia": {"cu129": "a", "cu130": "b"}, "amd": "c"})),
    ("variant docker_image", lambda d: d["variants"]["fp8"].update(docker_image={"amd": "x"})),
    ("variant tp int", lambda d: d["variants"]["fp8"].update(tp=4)),
    ("variant tp map", lambda d: d["variants"]["fp8"].update(tp={"h200": 2, "mi355x": 1})),
    ("strategy tp map", lambda d: d["strategy_overrides"].update(single_node_tp={"tp": {"xeon6": 2}})),
    ("strategy_min_gpus scalar", lambda d: d.update(strategy_min_gpus=16)),
    ("strategy_min_gpus map", lambda d: d.update(strategy_min_gpus={"multi_node_tp": 16, "h100": 32})),
    ("strategy_min_gpus nested map", lambda d: d.update(strategy_min_gpus={"pd_cluster": {"h100": 16}})),
    ("env values of every scalar type", lambda d: d["model"].update(base_env={"A": "1", "B": 0, "C": 1.5, "D": True})),
    ("unquoted number arg", lambda d: d["model"].update(base_args=["--max-num-seqs", 512])),
    ("nulls for optional sections", lambda d: d.update(features=None, hardware_overrides=None, opt_in_features=None)),
    ("pd role overrides", lambda d: d["strategy_overrides"].update(pd_cluster={
        "prefill": {"parallelism": "dep", "tp": 1, "nodes": 2, "env": {"X": "1"}},
        "decode": {"hardware_overrides": {"blackwell": {"extra_args": ["--x"]}}},
        "pool_modes": ["dep"], "router": {"intra_node_data_parallel_size": 1}})),
    ("feature modes", lambda d: d.update(features={"spec": {"default_mode": "mtp", "modes": {
        "mtp": {"label": "MTP", "args": ["--speculative-config", "{}"], "variants": ["default"],
                "hardware": {"amd": "unsupported"}}}}})),
    ("install false / null", lambda d: d["model"].update(install={"docker": False, "pip": None})),
    ("meta date as date", lambda d: d["meta"].update(date_added=__import__("datetime").date(2026, 1, 2))),
]


@pytest.mark.parametrize("mutate", [pytest.param(m, id=name) for name, m in GOOD])
def test_accepted_shapes(mutate: Mutation) -> None:
    data = _minimal()
    mutate(data)
    assert validate_recipe(data, "models/org/x.yaml") is data


# --------------------------------------------------------------------------
# Shapes that must be rejected, each with key path, value and expectation
# --------------------------------------------------------------------------
BAD: list[tuple[str, Mutation, str, str, str]] = [
    # id, mutation, dotted key, value repr, expected text
    ("vram_minimum_gb string", lambda d: d["variants"]["fp8"].update(vram_minimum_gb="abc"),
     "variants.fp8.vram_minimum_gb", "'abc' (str)", "a number"),
    ("vram_minimum_gb bool", lambda d: d["variants"]["fp8"].update(vram_minimum_gb=True),
     "variants.fp8.vram_minimum_gb", "True (bool)", "a number"),
    ("base_args not a list", lambda d: d["model"].update(base_args="--trust-remote-code"),
     "model.base_args", "'--trust-remote-code' (str)", "a list"),
    ("null inside base_args", lambda d: d["model"].update(base_args=["--a", None]),
     "model.base_args[1]", "None (NoneType)", "command-line token"),
    ("feature modes not a map", lambda d: d.update(features={"spec": {"modes": ["mtp", "dflash"]}}),
     "features.spec.modes", "['mtp', 'dflash'] (list)", "a mapping"),
    ("feature mode args not a list", lambda d: d.update(features={"spec": {"modes": {"mtp": {"args": "--x"}}}}),
     "features.spec.modes.mtp.args", "'--x' (str)", "a list"),
    ("variant not a mapping", lambda d: d["variants"].update(fp8="zai-org/GLM-FP8"),
     "variants.fp8", "'zai-org/GLM-FP8' (str)", "a mapping"),
    ("variants a list", lambda d: d.update(variants=[{"precision": "fp8"}]),
     "variants", "(list)", "a mapping"),
    ("model_id missing", lambda d: d["model"].pop("model_id"),
     "model.model_id", "", "required"),
    ("model missing", lambda d: d.pop("model"),
     "model", "", "required"),
    ("env value null", lambda d: d["model"].update(base_env={"HF_TOKEN": None}),
     "model.base_env.HF_TOKEN", "None (NoneType)", "a string, number or boolean"),
    ("env key not a string", lambda d: d["model"].update(base_env={1: "x"}),
     "model.base_env.1", "1 (int)", "a string key"),
    ("docker_image list", lambda d: d["model"].update(docker_image=["a", "b"]),
     "model.docker_image", "['a', 'b'] (list)", "an image string"),
    ("docker_image CUDA value not a string", lambda d: d["model"].update(
        docker_image={"nvidia": {"cu129": "a", "cu130": 13}}),
     "model.docker_image.nvidia.cu130", "13 (int)", "CUDA map"),
    ("variant tp string", lambda d: d["variants"]["fp8"].update(tp="4"),
     "variants.fp8.tp", "'4' (str)", "an integer or a map"),
    ("variant tp map value", lambda d: d["variants"]["fp8"].update(tp={"h200": 2.5}),
     "variants.fp8.tp.h200", "2.5 (float)", "an integer or a map"),
    ("strategy_min_gpus nested string", lambda d: d.update(strategy_min_gpus={"pd_cluster": {"h100": "16"}}),
     "strategy_min_gpus.pd_cluster.h100", "'16' (str)", "an integer"),
    ("compatible_strategies string", lambda d: d.update(compatible_strategies="single_node_tp"),
     "compatible_strategies", "'single_node_tp' (str)", "a list"),
    ("hardware override extra_args string", lambda d: d.update(hardware_overrides={"hopper": {"extra_args": "--x"}}),
     "hardware_overrides.hopper.extra_args", "'--x' (str)", "a list"),
    ("strategy override not a mapping", lambda d: d.update(strategy_overrides={"pd_cluster": ["x"]}),
     "strategy_overrides.pd_cluster", "['x'] (list)", "a mapping"),
    ("pd role nodes string", lambda d: d.update(strategy_overrides={"pd_cluster": {"prefill": {"nodes": "2"}}}),
     "strategy_overrides.pd_cluster.prefill.nodes", "'2' (str)", "an integer"),
    ("nightly_required string", lambda d: d["model"].update(nightly_required="yes"),
     "model.nightly_required", "'yes' (str)", "a boolean"),
    ("kv_offload_support list", lambda d: d.update(kv_offload_support=["offloading_cpu"]),
     "kv_offload_support", "(list)", "a mapping"),
    ("strategy_hardware value map", lambda d: d.update(strategy_hardware={"pd_cluster": "unsupported"}),
     "strategy_hardware.pd_cluster", "'unsupported' (str)", "a mapping"),
]


@pytest.mark.parametrize(("mutate", "key", "value", "expected"),
                         [pytest.param(m, k, v, e, id=name) for name, m, k, v, e in BAD])
def test_rejected_shapes_name_key_value_and_expectation(mutate: Mutation, key: str, value: str, expected: str) -> None:
    data = _minimal()
    mutate(data)
    with pytest.raises(SchemaError) as info:
        validate_recipe(data, "models/org/x.yaml")
    err = info.value
    assert err.key == key
    text = str(err)
    assert text.startswith(f"models/org/x.yaml: {key}: ")
    assert value in text
    assert expected in text
    assert expected in err.expected


def test_error_message_format_is_exact() -> None:
    data = _minimal()
    data["variants"]["fp8"]["vram_minimum_gb"] = "abc"
    with pytest.raises(SchemaError) as info:
        validate_recipe(data, "recipes/models/org/x.yaml")
    assert str(info.value) == (
        "recipes/models/org/x.yaml: variants.fp8.vram_minimum_gb: got 'abc' (str); expected a number"
    )
    assert info.value.value == "abc"


def test_several_problems_are_counted() -> None:
    data = _minimal()
    data["variants"]["fp8"]["vram_minimum_gb"] = "abc"
    data["model"]["base_args"] = "x"
    with pytest.raises(SchemaError, match=r"1 more problem\(s\) at "):
        validate_recipe(data, "x.yaml")


def test_top_level_not_a_mapping() -> None:
    with pytest.raises(SchemaError, match=r"got \['a'\] \(list\); expected a mapping"):
        validate_recipe(["a"], "x.yaml")  # type: ignore[arg-type]


# --------------------------------------------------------------------------
# Strategies, hardware profiles, kv_offload options
# --------------------------------------------------------------------------
STRATEGY_BAD: list[tuple[str, dict[str, Any], str, str]] = [
    ("vllm_args string", {"name": "s", "deploy_type": "single_node", "vllm_args": "--x"}, "vllm_args", "a list"),
    ("name missing", {"deploy_type": "single_node"}, "name", "required"),
    ("pd role env list", {"name": "pd", "deploy_type": "pd_cluster", "prefill": {"env": ["A=1"]}},
     "prefill.env", "a mapping"),
    ("router port string", {"name": "pd", "deploy_type": "pd_cluster", "router": {"port": "80"}},
     "router.port", "an integer"),
    ("kv_store install int", {"name": "kv_store_x", "deploy_type": "kv_store_lb", "vllm": {"install": 3}},
     "vllm.install", "a string or a map of brand to string"),
    ("kv_store template nested", {"name": "kv_store_x", "deploy_type": "kv_store_lb",
                                  "mooncake_vllm_config": {"template": {"a": {"b": 1}}}},
     "mooncake_vllm_config.template.a", "a string, number or boolean"),
    ("default_instances string", {"name": "kv_store_x", "deploy_type": "kv_store_lb", "default_instances": "2"},
     "default_instances", "an integer"),
    ("mooncake command unbalanced quote", {"name": "kv_store_x", "deploy_type": "kv_store_lb",
                                           "mooncake_master": {"command": "mooncake_master '-rpc_port=1"}},
     "mooncake_master.command", "a shell command with balanced quotes"),
]


@pytest.mark.parametrize(("doc", "key", "expected"),
                         [pytest.param(d, k, e, id=name) for name, d, k, e in STRATEGY_BAD])
def test_bad_strategy_documents(doc: dict[str, Any], key: str, expected: str) -> None:
    with pytest.raises(SchemaError) as info:
        validate_strategy(doc, "strategies/x.yaml")
    assert info.value.key == key
    assert expected in str(info.value)


HARDWARE_BAD: list[tuple[str, dict[str, Any], str, str]] = [
    ("gpu_count string", {"brand": "NVIDIA", "generation": "hopper", "gpu_count": "8", "vram_gb": 640},
     "h100.gpu_count", "an integer"),
    ("vram_gb missing", {"brand": "NVIDIA", "generation": "hopper", "gpu_count": 8},
     "h100.vram_gb", "required"),
    ("scalable string", {"brand": "NVIDIA", "generation": "hopper", "gpu_count": 8, "vram_gb": 1, "scalable": "no"},
     "h100.scalable", "a boolean"),
    ("generation int", {"brand": "NVIDIA", "generation": 9, "gpu_count": 8, "vram_gb": 1},
     "h100.generation", "a string or a list of strings"),
]


@pytest.mark.parametrize(("doc", "key", "expected"),
                         [pytest.param(d, k, e, id=name) for name, d, k, e in HARDWARE_BAD])
def test_bad_hardware_profiles(doc: dict[str, Any], key: str, expected: str) -> None:
    with pytest.raises(SchemaError) as info:
        validate_hardware_profile(doc, "hardware.yaml", "h100")
    assert info.value.key == key
    assert expected in str(info.value)


def test_hardware_generation_list_is_accepted() -> None:
    doc = {"brand": "NVIDIA", "generation": ["ada", "blackwell"], "gpu_count": 1, "vram_gb": 24, "extra": 1}
    assert validate_hardware_profile(doc) is doc


@pytest.mark.parametrize(("doc", "key", "expected"), [
    pytest.param({"requires_opt_in": "yes"}, "x.requires_opt_in", "a boolean", id="opt-in string"),
    pytest.param({"brands": "NVIDIA"}, "x.brands", "a list", id="brands string"),
    pytest.param({"companion": {"label": "L"}}, "x.companion.command", "required", id="companion no command"),
    pytest.param({"env": {"PYTHONHASHSEED": [0]}}, "x.env.PYTHONHASHSEED", "a string, number", id="env list"),
])
def test_bad_kv_offload_options(doc: dict[str, Any], key: str, expected: str) -> None:
    with pytest.raises(SchemaError) as info:
        validate_kv_offload(doc, "kv_offload.yaml", "x")
    assert info.value.key == key
    assert expected in str(info.value)


def test_taxonomy_without_hardware_profiles() -> None:
    with pytest.raises(SchemaError, match="hardware_profiles: expected a value: this key is required"):
        validate_taxonomy({"kv_offload": {}}, "taxonomy.yaml")


# --------------------------------------------------------------------------
# Error type behaviour
# --------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [RecipeError, SchemaError, SelectionError])
def test_errors_are_value_errors_and_pickle(cls: type[RecipeError]) -> None:
    err = cls("variants.fp8.tp", value="4", expected="an integer", source="x.yaml")
    assert isinstance(err, ValueError)
    clone = pickle.loads(pickle.dumps(err))
    assert clone.__class__ is cls
    assert str(clone) == str(err) == "x.yaml: variants.fp8.tp: got '4' (str); expected an integer"
    assert (clone.key, clone.value, clone.expected) == ("variants.fp8.tp", "4", "an integer")


def test_long_values_are_shortened() -> None:
    err = SchemaError("k", value="x" * 500, expected="short")
    assert len(str(err)) < 200
    assert "..." in str(err)
