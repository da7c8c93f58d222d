"""Our catalog (recipes/catalog) against the upstream taxonomy and strategies."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

_COLLECTIONS = str(Path(__file__).resolve().parents[4] / ".collections")
if _COLLECTIONS not in sys.path:  # harmless when conftest.py already did it
    sys.path.insert(0, _COLLECTIONS)

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._catalog import (  # noqa: E402
    DEFAULT_CATALOG_DIR,
    Catalog,
    load_catalog,
    load_upstream_catalog,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._errors import (  # noqa: E402
    RecipeLoadError,
    SchemaError,
    SelectionError,
)

REPO = Path(__file__).resolve().parents[4]
SHARED = Path(os.environ.get("VLLM_FLEET_SHARED_DIR") or REPO.parent / "shared")
UPSTREAM = SHARED / "upstream" / "recipes"
NO_SHARED = "../shared/upstream/recipes not found: catalog parity tests need it beside the checkout"
SEED = REPO / "recipes" / "models" / "zai-org" / "GLM-5.3-Flash.yaml"

# Top-level prose we reworded in our own files; nothing renders it. Nested
# texts (companion.description, mooncake notes and commands...) ARE rendered
# and must match exactly.
PROSE = frozenset({"description", "tooltip"})
SYNTHESIS_HARDWARE_FIELDS = ("brand", "generation", "gpu_count", "vram_gb", "scalable", "restricted")


def _upstream_taxonomy() -> dict[str, Any]:
    path = UPSTREAM / "taxonomy.yaml"
    if not path.is_file():
        return {}
    with path.open(encoding="utf-8") as fh:
        return yaml.safe_load(fh)


UP_TAXONOMY = _upstream_taxonomy()


def _ids(section: str) -> list[Any]:
    """Parameters for every id of an upstream taxonomy section (or a skip)."""
    ids = list(UP_TAXONOMY.get(section) or ())
    if not ids:
        return [pytest.param(None, marks=pytest.mark.skip(reason=NO_SHARED))]
    return [pytest.param(i, id=i, marks=pytest.mark.shared) for i in ids]


def _strategy_ids() -> list[Any]:
    files = sorted(UPSTREAM.glob("strategies/*.yaml")) + sorted(UPSTREAM.glob("kv_store/*.yaml"))
    if not files:
        return [pytest.param(None, marks=pytest.mark.skip(reason=NO_SHARED))]
    return [pytest.param(f.stem, id=f.stem, marks=pytest.mark.shared) for f in files]


@pytest.fixture(scope="module")
def ours() -> Catalog:
    return load_catalog()


@pytest.fixture(scope="module")
def upstream() -> Catalog:
    if not UPSTREAM.is_dir():
        pytest.skip(NO_SHARED)
    return load_upstream_catalog(UPSTREAM)


def _typed(doc: Any) -> str:
    """JSON text of a document: equal only if values, YAML types (0 vs "0",
    1 vs true) AND key order (env order is visible in docker -e) are equal."""
    return json.dumps(doc, default=str)


def _without_prose(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in PROSE}


# --------------------------------------------------------------------------
# Hardware profiles
# --------------------------------------------------------------------------
@pytest.mark.parametrize("hw_id", _ids("hardware_profiles"))
def test_shared_hardware_profile_matches_upstream(ours: Catalog, upstream: Catalog, hw_id: str) -> None:
    theirs = upstream.hardware(hw_id)
    mine = ours.hardware(hw_id)
    for field in SYNTHESIS_HARDWARE_FIELDS:
        assert mine.get(field) == theirs.get(field), field
        assert type(mine.get(field)) is type(theirs.get(field)), field
    for field, value in theirs.items():
        if field not in PROSE:
            assert field in mine, field
            assert _typed(mine[field]) == _typed(value), field


def test_ascend_950pr_8x_is_one_eight_npu_node(ours: Catalog) -> None:
    hw = ours.hardware("ascend_950pr_8x")
    assert hw["gpu_count"] == 8
    assert hw["generation"] == "npu"
    assert hw["brand"] == "Huawei"
    assert hw["vram_gb"] == 8 * 128  # 128 GB HBM per 950PR NPU
    assert hw["scalable"] is False
    assert hw["restricted"] is True


def test_profiles_our_seed_recipe_names_exist(ours: Catalog) -> None:
    with SEED.open(encoding="utf-8") as fh:
        seed = yaml.safe_load(fh)
    named = set(seed["meta"]["hardware"]) | set(seed["hardware_notes"])
    for variant in seed["variants"].values():
        named |= set(variant.get("hardware_overrides") or ())
    assert named <= set(ours.hardware_ids()), named - set(ours.hardware_ids())
    generations = {p["generation"] for p in ours.taxonomy["hardware_profiles"].values()}
    keys = set(seed["hardware_overrides"])
    for per_hw in seed["strategy_hardware"].values():
        keys |= set(per_hw)
    assert keys <= generations | set(ours.hardware_ids()), keys - generations


def test_every_profile_is_well_formed(ours: Catalog) -> None:
    for hw_id, hw in ours.taxonomy["hardware_profiles"].items():
        assert hw["gpu_count"] >= 1, hw_id
        assert hw["vram_gb"] > 0, hw_id
        assert hw.get("multi_node") is False, hw_id


# --------------------------------------------------------------------------
# Strategies, kv_store deployments, kv_offload options
# --------------------------------------------------------------------------
@pytest.mark.parametrize("name", _strategy_ids())
def test_shared_strategy_matches_upstream(ours: Catalog, upstream: Catalog, name: str) -> None:
    mine = ours.strategy(name)
    theirs = upstream.strategy(name)
    assert _typed(_without_prose(mine)) == _typed(_without_prose(theirs))


@pytest.mark.parametrize("option", _ids("kv_offload"))
def test_shared_kv_offload_option_matches_upstream(ours: Catalog, upstream: Catalog, option: str) -> None:
    assert _typed(_without_prose(ours.kv_offload(option))) == _typed(_without_prose(upstream.kv_offload(option)))


@pytest.mark.parametrize("group", _ids("kv_offload_groups"))
def test_shared_kv_offload_group_matches_upstream(ours: Catalog, upstream: Catalog, group: str) -> None:
    mine = ours.taxonomy["kv_offload_groups"][group]
    theirs = upstream.taxonomy["kv_offload_groups"][group]
    assert _typed(_without_prose(mine)) == _typed(_without_prose(theirs))


@pytest.mark.shared
def test_vocabulary_matches_upstream(ours: Catalog, upstream: Catalog) -> None:
    assert ours.taxonomy["strategies"] == upstream.taxonomy["strategies"]
    assert [t["id"] for t in ours.taxonomy["tasks"]] == [t["id"] for t in upstream.taxonomy["tasks"]]
    assert list(ours.taxonomy) == list(upstream.taxonomy)
    assert ours.serving_strategy_names() == upstream.serving_strategy_names()
    assert ours.kv_store_names() == upstream.kv_store_names()
    assert list(ours.strategies) == list(upstream.strategies)


@pytest.mark.shared
def test_upstream_recipes_only_reference_what_we_have(ours: Catalog) -> None:
    files = sorted(UPSTREAM.glob("models/*/*.yaml"))
    if not files:
        pytest.skip(NO_SHARED)
    for path in files:
        with path.open(encoding="utf-8") as fh:
            recipe = yaml.safe_load(fh)
        assert set(recipe["compatible_strategies"]) <= set(ours.serving_strategy_names()), path
        assert set(recipe.get("kv_offload_support") or ()) <= set(ours.taxonomy["kv_offload"]), path


# --------------------------------------------------------------------------
# Catalog helpers and loading
# --------------------------------------------------------------------------
def test_serving_and_kv_store_names(ours: Catalog) -> None:
    assert ours.serving_strategy_names() == (
        "single_node_tp", "single_node_tep", "single_node_dep", "multi_node_tp", "multi_node_tep",
        "multi_node_dep", "multi_node_tp_pp", "multi_node_tp_dp", "pd_cluster")
    assert ours.kv_store_names() == ("kv_store_centralized_mooncake", "kv_store_distributed_mooncake")
    assert ours.strategy("pd_cluster")["deploy_type"] == "pd_cluster"
    assert ours.strategy("kv_store_distributed_mooncake")["vllm"]["env"]["PYTHONHASHSEED"] == 0


@pytest.mark.parametrize(("call", "key", "value"), [
    pytest.param(lambda c: c.hardware("h300"), "hardware", "h300", id="hardware"),
    pytest.param(lambda c: c.strategy("single_node_xp"), "strategy", "single_node_xp", id="strategy"),
    pytest.param(lambda c: c.kv_offload("nvme"), "kv_offload", "nvme", id="kv_offload"),
])
def test_unknown_ids_are_selection_errors(ours: Catalog, call: Any, key: str, value: str) -> None:
    with pytest.raises(SelectionError) as info:
        call(ours)
    assert info.value.key == key
    assert info.value.value == value
    assert info.value.expected.startswith("one of: ")


def test_default_catalog_is_cached_and_shipped_with_the_collection() -> None:
    assert DEFAULT_CATALOG_DIR == REPO / "recipes" / "catalog"
    assert load_catalog() is load_catalog()
    assert load_catalog(DEFAULT_CATALOG_DIR) is load_catalog()


def _copy_catalog(tmp_path: Path) -> Path:
    root = tmp_path / "catalog"
    shutil.copytree(DEFAULT_CATALOG_DIR, root)
    return root


def test_catalog_from_another_root(tmp_path: Path) -> None:
    root = _copy_catalog(tmp_path)
    with (root / "hardware.yaml").open("a", encoding="utf-8") as fh:
        fh.write("  lab_box:\n    brand: NVIDIA\n    generation: hopper\n    gpu_count: 2\n    vram_gb: 160\n")
    catalog = load_catalog(root)
    assert catalog.hardware("lab_box")["gpu_count"] == 2
    assert catalog.origin == str(root.resolve())


@pytest.mark.parametrize(("edit", "error", "match"), [
    pytest.param(lambda r: (r / "hardware.yaml").unlink(), RecipeLoadError,
                 r"hardware\.yaml: no such file", id="hardware.yaml missing"),
    pytest.param(lambda r: (r / "kv_offload.yaml").write_text("kv_offload: {}\nstrategies: []\n"), SchemaError,
                 r"strategies: expected each taxonomy section in one file only", id="section twice"),
    pytest.param(lambda r: (r / "strategies" / "pd_cluster.yaml").unlink(), SchemaError,
                 r"vocabulary\.yaml: strategies\[8\]: got 'pd_cluster'", id="listed strategy without file"),
    pytest.param(lambda r: (r / "hardware.yaml").write_text("hardware_profiles:\n  x: {brand: AMD}\n"), SchemaError,
                 r"hardware_profiles\.x\.generation: expected a value", id="profile incomplete"),
    pytest.param(lambda r: shutil.rmtree(r / "kv_store"), RecipeLoadError,
                 r"kv_store: no such directory", id="kv_store folder missing"),
])
def test_broken_catalogs_are_reported(tmp_path: Path, edit: Any, error: type, match: str) -> None:
    root = _copy_catalog(tmp_path)
    edit(root)
    with pytest.raises(error, match=match):
        load_catalog(root)


def test_missing_catalog_dir(tmp_path: Path) -> None:
    with pytest.raises(RecipeLoadError, match="catalog directory not found"):
        load_catalog(tmp_path / "nope")
