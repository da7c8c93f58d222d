"""Recipe loading: files, trees, published JSON, URLs with an offline cache."""

from __future__ import annotations

import copy
import functools
import http.server
import json
import os
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

_COLLECTIONS = str(Path(__file__).resolve().parents[4] / ".collections")
if _COLLECTIONS not in sys.path:  # harmless when conftest.py already did it
    sys.path.insert(0, _COLLECTIONS)

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._catalog import (  # noqa: E402
    load_strategies,
    load_taxonomy,
    load_upstream_tree,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._errors import (  # noqa: E402
    RecipeLoadError,
    SchemaError,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._loader import (  # noqa: E402
    LoadedRecipe,
    RecipeCacheWarning,
    from_published,
    load_recipe,
    load_recipe_from_tree,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._selection import recommend_among  # noqa: E402

REPO = Path(__file__).resolve().parents[4]
SHARED = Path(os.environ.get("VLLM_FLEET_SHARED_DIR") or REPO.parent / "shared")
UPSTREAM = SHARED / "upstream" / "recipes"
SEED_JSON = SHARED / "seed" / "GLM-5.3-Flash.json"
SHIPPED = REPO / "recipes" / "models" / "zai-org" / "GLM-5.3-Flash.yaml"
NO_SHARED = "../shared not found: tests on upstream data and the seed need it beside the checkout"

SERVING = ("single_node_tp", "single_node_tep", "single_node_dep", "multi_node_tp", "multi_node_tep",
           "multi_node_dep", "multi_node_tp_pp", "multi_node_tp_dp", "pd_cluster")
KV_STORES = ("kv_store_centralized_mooncake", "kv_store_distributed_mooncake")

needs_shared = pytest.mark.skipif(not UPSTREAM.is_dir() or not SEED_JSON.is_file(), reason=NO_SHARED)


def _upstream_models() -> list[Any]:
    files = sorted(UPSTREAM.glob("models/*/*.yaml"))
    if not files:
        return [pytest.param(None, marks=pytest.mark.skip(reason=NO_SHARED))]
    return [pytest.param(f, id=f"{f.parent.name}/{f.stem}", marks=pytest.mark.shared) for f in files]


def _yaml(path: Path) -> Any:
    with path.open(encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def _seed() -> dict[str, Any]:
    return json.loads(SEED_JSON.read_text(encoding="utf-8"))


# --------------------------------------------------------------------------
# Source-form files and trees
# --------------------------------------------------------------------------
@pytest.mark.parametrize("path", _upstream_models())
def test_source_file_loads_as_parsed(path: Path) -> None:
    loaded = load_recipe(path)
    assert isinstance(loaded, LoadedRecipe)
    assert loaded.hf_id == f"{path.parent.name}/{path.stem}"
    assert loaded.form == "source"
    assert loaded.origin == str(path)
    assert loaded.published is None
    raw = _yaml(path)  # yaml.safe_load, the reference parse
    assert loaded.data == raw
    # same types (dates, ints vs bools) and key order at every level
    assert json.dumps(loaded.data, default=repr) == json.dumps(raw, default=repr)


@pytest.mark.shared
@needs_shared
def test_tree_and_directory_loading_match_file_loading() -> None:
    by_file = load_recipe(UPSTREAM / "models" / "zai-org" / "GLM-5.2.yaml")
    by_tree = load_recipe_from_tree(UPSTREAM, "zai-org/GLM-5.2")
    by_dir = load_recipe(UPSTREAM, hf_id="zai-org/GLM-5.2")
    by_parent = load_recipe_from_tree(UPSTREAM.parent, "zai-org/GLM-5.2")  # checkout holding recipes/
    assert by_file.data == by_tree.data == by_dir.data == by_parent.data
    assert by_tree.hf_id == "zai-org/GLM-5.2"


@pytest.mark.parametrize(("call", "match"), [
    pytest.param(lambda: load_recipe_from_tree(REPO / "recipes", "nope/missing"),
                 r"models/nope/missing\.yaml: no recipe for 'nope/missing'", id="unknown hf_id"),
    pytest.param(lambda: load_recipe_from_tree(REPO / "recipes", "../../etc/passwd"),
                 r"hf_id: got '\.\./\.\./etc/passwd'", id="path traversal"),
    pytest.param(lambda: load_recipe(REPO / "recipes"),
                 r"is a directory: pass hf_id", id="directory without hf_id"),
    pytest.param(lambda: load_recipe(REPO / "recipes" / "models" / "nope" / "x.yaml"),
                 r"x\.yaml: no such file", id="missing file"),
    pytest.param(lambda: load_recipe("ftp://example.org/x.json"),
                 r"only http:// and https:// URLs", id="unsupported scheme"),
])
def test_load_problems_name_the_place(call: Any, match: str) -> None:
    with pytest.raises((RecipeLoadError, SchemaError), match=match):
        call()


def test_shipped_recipe_loads_from_our_tree() -> None:
    loaded = load_recipe_from_tree(REPO / "recipes", "zai-org/GLM-5.3-Flash")
    assert loaded.hf_id == "zai-org/GLM-5.3-Flash"
    assert loaded.data["model"]["model_id"] == "zai-org/GLM-5.3-Flash"


# --------------------------------------------------------------------------
# Malformed files
# --------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "text", "error", "match"), [
    pytest.param("org/bad.yaml", "model:\n  model_id: [unclosed\n", RecipeLoadError,
                 r"org/bad\.yaml: invalid YAML at line \d+, column \d+", id="yaml syntax"),
    pytest.param("org/dup.yaml", "model:\n  model_id: a/b\nmodel:\n  model_id: c/d\nvariants: {}\n",
                 RecipeLoadError, r"org/dup\.yaml: invalid YAML at line 3, column 1: found duplicate key 'model'",
                 id="duplicate key"),
    pytest.param("org/list.yaml", "- a\n- b\n", SchemaError,
                 r"org/list\.yaml: <document>: expected a mapping at the top level \(a model recipe\), got a list$",
                 id="not a mapping (the content is never echoed)"),
    pytest.param("org/shape.yaml", "model:\n  model_id: a/b\nvariants:\n  default: fp8\n", SchemaError,
                 r"org/shape\.yaml: variants\.default: got 'fp8' \(str\); expected a mapping", id="bad shape"),
    pytest.param("org/bad.json", '{"hf_id": "a/b", ', RecipeLoadError,
                 r"org/bad\.json: invalid JSON at line 1", id="json syntax"),
])
def test_malformed_files_name_the_file(tmp_path: Path, name: str, text: str, error: type, match: str) -> None:
    path = tmp_path / name
    path.parent.mkdir(parents=True)
    path.write_text(text, encoding="utf-8")
    with pytest.raises(error, match=match):
        load_recipe(path)


def test_yaml_merge_keys_still_work(tmp_path: Path) -> None:
    path = tmp_path / "org" / "m.yaml"
    path.parent.mkdir()
    path.write_text("x: &base {precision: fp8}\nmodel: {model_id: org/m}\n"
                    "variants:\n  default:\n    <<: *base\n    precision: bf16\n", encoding="utf-8")
    assert load_recipe(path).data["variants"]["default"] == {"precision": "bf16"}


# --------------------------------------------------------------------------
# Published JSON -> source form
# --------------------------------------------------------------------------
@needs_shared
def test_seed_json_converts_to_source_form() -> None:
    loaded = load_recipe(SEED_JSON)
    data = loaded.data
    assert loaded.form == "published"
    assert loaded.hf_id == "zai-org/GLM-5.3-Flash"
    assert data["compatible_strategies"] == [
        "single_node_tp", "single_node_tep", "single_node_dep", "multi_node_tp",
        "multi_node_tep", "multi_node_dep", "multi_node_tp_pp", "pd_cluster",
    ]
    assert "default_strategy" not in data  # single_node_tp is recommended anyway
    assert data["strategy_overrides"] == {}
    for dropped in ("recommended_command", "hf_id", "source"):
        assert dropped not in data
    assert all("json" not in v for v in data["variants"].values())
    assert loaded.published is not None
    assert loaded.published["recommended_command"]["strategy"] == "single_node_tp"
    assert loaded.published["recommended_command"]["argv"][:3] == ["vllm", "serve", "zai-org/GLM-5.3-Flash"]
    assert loaded.published["variant_json"]["nvfp4"] == "/RedHatAI/GLM-5.3-Flash-NVFP4.json"
    assert loaded.published["source"]["repo"] == "vllm-project/vllm"
    # synthesis-relevant content survives
    assert data["model"]["default_frontend"] == "rust"
    assert data["variants"]["default"]["hardware_overrides"]["ascend_950pr_8x"]["docker_image"] == (
        "quay.io/ascend/vllm-ascend:nightly-main-a5")
    assert data["strategy_hardware"]["pd_cluster"] == {"npu": "unsupported"}
    assert list(data["hardware_overrides"]) == ["hopper", "blackwell", "amd", "npu"]


@needs_shared
def test_seed_json_is_not_mutated_by_conversion() -> None:
    doc = _seed()
    before = copy.deepcopy(doc)
    from_published(doc, serving_order=SERVING, kv_store_names=KV_STORES)
    assert doc == before


def _without_guide(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k != "guide"}


@needs_shared
def test_shipped_yaml_equals_seed_json() -> None:
    shipped = load_recipe(SHIPPED)
    converted = load_recipe(SEED_JSON)
    assert shipped.hf_id == converted.hf_id
    assert _without_guide(shipped.data) == _without_guide(converted.data)
    assert list(shipped.data) == list(converted.data)
    # key order of everything the engine iterates (env, args, overrides)
    assert json.dumps(_without_guide(shipped.data)) == json.dumps(_without_guide(converted.data))
    # the guide only lost trailing blanks on some lines
    assert _lines(shipped.data["guide"]) == _lines(converted.data["guide"])


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.split("\n")]


def _published(alternatives: list[str], strategy: str, node_count: int = 1, **extra: Any) -> dict[str, Any]:
    return {
        "hf_id": "org/m",
        "model": {"model_id": "org/m"},
        "variants": {"default": {"precision": "bf16"}},
        "recommended_command": {"strategy": strategy, "node_count": node_count,
                                "alternatives": {a: f"/org/m/strategies/{a}.json" for a in alternatives}},
        **extra,
    }


@pytest.mark.parametrize(("doc", "compatible", "default"), [
    pytest.param(_published(["multi_node_tp", "single_node_tep", *KV_STORES], "single_node_tp"),
                 ["single_node_tp", "single_node_tep", "multi_node_tp"], None, id="tp recommended"),
    pytest.param(_published(["single_node_tp", "single_node_dep"], "single_node_tep"),
                 ["single_node_tp", "single_node_tep", "single_node_dep"], "single_node_tep", id="tep default"),
    pytest.param(_published(["single_node_tep", "multi_node_dep"], "multi_node_tp", node_count=2),
                 ["single_node_tep", "multi_node_tp", "multi_node_dep"], None, id="multi-node tp at 2 nodes"),
    pytest.param(_published(["single_node_tp", "single_node_tep", "multi_node_tp"], "multi_node_tep", node_count=2),
                 ["single_node_tp", "single_node_tep", "multi_node_tp", "multi_node_tep"], "single_node_tep",
                 id="multi-node tep via single-node sibling"),
    pytest.param(_published(["multi_node_tp"], "multi_node_dep", node_count=2),
                 ["multi_node_tp", "multi_node_dep"], "multi_node_dep", id="multi-node dep without sibling"),
    pytest.param(_published(["single_node_dep"], "single_node_tep"),
                 ["single_node_tep", "single_node_dep"], None, id="first compatible is recommended"),
    pytest.param(_published(["kv_store_future_thing", "my_custom", "single_node_tp"], "pd_cluster"),
                 ["single_node_tp", "pd_cluster", "my_custom"], "pd_cluster", id="unknown names last"),
    pytest.param(_published([], "multi_node_tp", compatible_strategies=["single_node_tp", "multi_node_tp"],
                            default_strategy="multi_node_tp"),
                 ["single_node_tp", "multi_node_tp"], "multi_node_tp", id="explicit lists are kept"),
])
def test_published_conversion_rebuilds_strategies(doc: dict[str, Any], compatible: list[str],
                                                  default: str | None) -> None:
    data, published = from_published(doc, serving_order=SERVING, kv_store_names=KV_STORES)
    assert data["compatible_strategies"] == compatible
    assert data.get("default_strategy") == default
    rec = doc["recommended_command"]
    assert recommend_among(compatible, default, rec["node_count"]) == rec["strategy"]
    assert published["recommended_command"] is rec
    assert list(data)[:4] == ["model", "variants", "compatible_strategies", *(["default_strategy"] if default else
                                                                              ["strategy_overrides"])]


def test_published_without_recommended_command_or_list_is_rejected() -> None:
    doc = _published([], "single_node_tp")
    del doc["recommended_command"]
    with pytest.raises(SchemaError, match="recommended_command: expected a mapping with 'strategy'"):
        from_published(doc, serving_order=SERVING, origin="x.json")


@pytest.mark.parametrize("path", _upstream_models())
def test_published_round_trip_keeps_strategy_semantics(path: Path) -> None:
    """Publish an upstream recipe the way the API does (drop the strategy
    fields, render the recommended strategy + alternatives incl. kv_store),
    load it back: same compatible set, same recommended strategy."""
    source = _yaml(path)
    compatible = source["compatible_strategies"]
    recommended = recommend_among(compatible, source.get("default_strategy"), 1)
    alternatives = [s for s in compatible if s != recommended] + list(KV_STORES)
    doc = {k: v for k, v in source.items()
           if k not in ("compatible_strategies", "default_strategy", "strategy_overrides")}
    doc["hf_id"] = f"{path.parent.name}/{path.stem}"
    doc["recommended_command"] = {"strategy": recommended, "node_count": 1,
                                  "alternatives": {a: "/x.json" for a in alternatives}}
    data = from_published(doc, serving_order=SERVING, kv_store_names=KV_STORES)[0]
    if not compatible:
        # the API still names a recommended strategy for an empty list
        assert data["compatible_strategies"] == [recommended]
        return
    assert sorted(data["compatible_strategies"]) == sorted(compatible)
    assert recommend_among(data["compatible_strategies"], data.get("default_strategy"), 1) == recommended


# --------------------------------------------------------------------------
# URLs
# --------------------------------------------------------------------------
class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:  # keep pytest output clean
        pass


@pytest.fixture()
def site(tmp_path: Path) -> Iterator[tuple[str, Path, Any]]:
    """A local recipes API on 127.0.0.1 serving files from a temp dir."""
    root = tmp_path / "www"
    (root / "zai-org").mkdir(parents=True)
    (root / "models" / "org").mkdir(parents=True)
    (root / "models" / "org" / "small.yaml").write_text(
        "model: {model_id: org/small}\nvariants: {default: {precision: bf16}}\ncompatible_strategies: []\n",
        encoding="utf-8")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(_Handler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

    try:
        yield base, root, stop
    finally:
        if thread.is_alive():
            stop()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@needs_shared
def test_url_fetch_then_cache_hit_when_offline(site: tuple[str, Path, Any], tmp_path: Path) -> None:
    base, root, stop = site
    (root / "zai-org" / "GLM-5.3-Flash.json").write_bytes(SEED_JSON.read_bytes())
    url = f"{base}/zai-org/GLM-5.3-Flash.json"
    cache = tmp_path / "cache"

    online = load_recipe(url, cache_dir=cache)
    assert online.origin == url
    assert online.form == "published"
    assert online.hf_id == "zai-org/GLM-5.3-Flash"
    assert online.warnings == ()
    assert online.data == load_recipe(SEED_JSON).data
    assert len(list(cache.iterdir())) == 1

    stop()
    with pytest.warns(RecipeCacheWarning, match="unreachable"):
        offline = load_recipe(url, cache_dir=cache, timeout=2)
    assert offline.data == online.data
    assert len(offline.warnings) == 1
    assert url in offline.warnings[0]
    assert "cached copy" in offline.warnings[0]


def test_url_yaml_source_form(site: tuple[str, Path, Any]) -> None:
    base = site[0]
    loaded = load_recipe(f"{base}/models/org/small.yaml")
    assert (loaded.hf_id, loaded.form) == ("org/small", "source")


def test_unreachable_and_uncached_url_is_a_clear_error(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_free_port()}/org/m.json"
    with pytest.raises(RecipeLoadError) as info:
        load_recipe(url, cache_dir=tmp_path / "empty", timeout=2)
    text = str(info.value)
    assert text.startswith(f"{url}: unreachable (")
    assert "not in the cache" in text
    with pytest.raises(RecipeLoadError, match="no cache_dir to fall back on"):
        load_recipe(url, timeout=2)


def test_http_404_is_not_served_from_cache(site: tuple[str, Path, Any], tmp_path: Path) -> None:
    base = site[0]
    with pytest.raises(RecipeLoadError, match=r"/nope\.json: HTTP 404"):
        load_recipe(f"{base}/nope.json", cache_dir=tmp_path)


def test_url_with_bad_json_names_the_url(site: tuple[str, Path, Any]) -> None:
    base, root = site[0], site[1]
    (root / "broken.json").write_text("{nope", encoding="utf-8")
    with pytest.raises(RecipeLoadError, match=rf"{base}/broken\.json: invalid JSON"):
        load_recipe(f"{base}/broken.json")


# --------------------------------------------------------------------------
# Strategies and taxonomy
# --------------------------------------------------------------------------
@pytest.mark.shared
@needs_shared
def test_upstream_tree_loads_as_one_strategy_map() -> None:
    taxonomy, strategies = load_upstream_tree(UPSTREAM)
    assert set(strategies) == set(SERVING) | set(KV_STORES)
    assert list(strategies)[-2:] == list(KV_STORES)  # strategies/ first, then kv_store/
    assert strategies["pd_cluster"]["router"] == {"policy": "round_robin"}
    assert taxonomy == _yaml(UPSTREAM / "taxonomy.yaml")
    assert load_strategies(UPSTREAM) == strategies  # a root with both subfolders
    assert load_taxonomy(UPSTREAM / "taxonomy.yaml") == taxonomy


def test_duplicate_strategy_names_are_rejected(tmp_path: Path) -> None:
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "s.yaml").write_text("name: s\ndeploy_type: single_node\n", encoding="utf-8")
    with pytest.raises(SchemaError, match=r"b/s\.yaml: name: got 's' \(str\).*also defined in .*a/s\.yaml"):
        load_strategies([tmp_path / "a", tmp_path / "b"])


def test_missing_strategy_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(RecipeLoadError, match=r"nowhere: no such directory"):
        load_strategies([tmp_path / "nowhere"])
