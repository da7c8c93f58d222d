# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Load model recipes from files, recipes trees and URLs.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

Every loader returns plain dicts exactly as YAML/JSON parsing produced them
(types and key order kept) after checking them with ``_schema``. Recipes are
always handed out in SOURCE form (the ``models/<org>/<repo>.yaml`` layout);
the published-JSON API form is converted on the way in. Strategies and the
taxonomy are read by ``_catalog``; documents are parsed by ``_documents``.

Problems raise ``RecipeLoadError`` (cannot read / parse: names the file or
URL and why) or ``SchemaError`` (wrong shape: names the key path).
"""

from __future__ import annotations

import hashlib
import os
import re
import urllib.error
import urllib.parse
import urllib.request
import warnings
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._catalog import (
    KV_STORE_PREFIX,
    Catalog,
    load_catalog,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._documents import (
    MAX_DOCUMENT_BYTES,
    PathLike,
    parse_json,
    parse_yaml,
    read_capped,
    read_document,
    require_mapping,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._errors import (
    RecipeLoadError,
    SchemaError,
    SelectionError,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._schema import (
    validate_published_recipe,
    validate_recipe,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._selection import recommend_among

__all__ = [
    "LoadedRecipe",
    "RecipeCacheWarning",
    "from_published",
    "load_recipe",
    "load_recipe_from_tree",
    "load_recipe_ref",
    # _placement reads plan.json entries with ``_loader.read_capped``; its home is _documents.
    "read_capped",
]

DEFAULT_TIMEOUT = 10.0
# Keys only the published API carries; kept aside in LoadedRecipe.published.
_PUBLISHED_ONLY = ("hf_id", "source", "recommended_command")
_HF_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")


class RecipeCacheWarning(UserWarning):
    """A URL could not be fetched and a cached copy was used instead."""


@dataclass(frozen=True)
class LoadedRecipe:
    """A recipe in source form plus where it came from.

    ``data`` is the source-form dict the synthesis engine consumes (treat it
    as read-only). ``published`` holds what only the published form carries
    (``recommended_command``, ``hf_id``, ``source``, ``variant_json``),
    ``None`` for source-form input. ``warnings`` lists non-fatal problems
    (e.g. a stale cache was used).
    """

    hf_id: str
    data: dict[str, Any]
    origin: str
    form: str  # "source" | "published"
    published: dict[str, Any] | None = None
    warnings: tuple[str, ...] = ()


# --------------------------------------------------------------------------
# Recipes
# --------------------------------------------------------------------------
def _check_hf_id(hf_id: Any, origin: str) -> str:
    if not isinstance(hf_id, str) or not _HF_ID.match(hf_id) or ".." in hf_id:
        raise SchemaError("hf_id", value=hf_id, expected="'<org>/<repo>'", source=origin)
    return hf_id


def _hf_id_from_path(path: Path) -> str:
    stem = path.name[: -len(path.suffix)] if path.suffix else path.name
    return _check_hf_id(f"{path.parent.name}/{stem}", str(path))


def _default_strategy_for(compatible: Sequence[str], wanted: str, node_count: int) -> str | None:
    """The least ``default_strategy`` that makes the recommendation come out as ``wanted``."""
    if recommend_among(list(compatible), None, node_count) == wanted:
        return None
    if wanted.startswith("multi_node_"):
        sibling = "single_node_" + wanted[len("multi_node_"):]
        if sibling in compatible and recommend_among(list(compatible), sibling, node_count) == wanted:
            return sibling
    return wanted


def from_published(
    doc: Mapping[str, Any],
    *,
    serving_order: Sequence[str],
    kv_store_names: Collection[str] = (),
    origin: str = "",
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Convert a published-JSON recipe to source form.

    Returns ``(source_form, published_only)``. The published form drops
    ``compatible_strategies``, ``default_strategy`` and ``strategy_overrides``;
    ``compatible_strategies`` is rebuilt from ``recommended_command.strategy``
    plus the serving strategies among ``recommended_command.alternatives``
    (kv_store deployments excluded) in ``serving_order`` (unknown names last,
    as listed); ``default_strategy`` is set only when needed to reproduce the
    recommended strategy; ``strategy_overrides`` cannot be recovered and
    becomes ``{}``. ``doc`` is not modified.
    """
    validate_published_recipe(dict(doc), origin)
    published: dict[str, Any] = {k: doc[k] for k in _PUBLISHED_ONLY if k in doc}
    compatible = doc.get("compatible_strategies")
    default = doc.get("default_strategy")
    rec = doc.get("recommended_command")
    if compatible is None:
        if not rec:
            raise SchemaError(
                "recommended_command", expected="a mapping with 'strategy' and 'alternatives' "
                "(needed to rebuild compatible_strategies)", source=origin,
            )
        names = [rec["strategy"], *(rec.get("alternatives") or {})]
        serving = [
            n for n in dict.fromkeys(names)
            if n not in kv_store_names and not n.startswith(KV_STORE_PREFIX)
        ]
        rank = {name: i for i, name in enumerate(serving_order)}
        compatible = sorted(serving, key=lambda n: (rank.get(n, len(rank)), serving.index(n)))
        if default is None:
            node_count = rec.get("node_count") or 1
            default = _default_strategy_for(compatible, rec["strategy"], node_count)

    variant_json: dict[str, Any] = {}
    variants: dict[str, Any] = {}
    for key, variant in doc["variants"].items():
        if isinstance(variant, dict) and "json" in variant:
            variant_json[key] = variant["json"]
            variant = {k: v for k, v in variant.items() if k != "json"}
        variants[key] = variant
    if variant_json:
        published["variant_json"] = variant_json

    out: dict[str, Any] = {}
    for key, value in doc.items():
        if key in _PUBLISHED_ONLY or key in ("compatible_strategies", "default_strategy"):
            continue
        if key == "guide" and "strategy_overrides" not in out:
            out["strategy_overrides"] = doc.get("strategy_overrides") or {}
        out[key] = variants if key == "variants" else value
        if key == "variants":
            out["compatible_strategies"] = list(compatible)
            if default is not None:
                out["default_strategy"] = default
    out.setdefault("strategy_overrides", {})
    return out, published


def _catalog_order(catalog: Catalog | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    catalog = catalog if catalog is not None else load_catalog()
    return catalog.serving_strategy_names(), catalog.kv_store_names()


def _from_document(
    doc: Any, origin: str, hf_id: str | None, catalog: Catalog | None, notes: Sequence[str] = ()
) -> LoadedRecipe:
    doc = require_mapping(doc, origin, "a model recipe")
    published_form = "recommended_command" in doc or ("compatible_strategies" not in doc and "hf_id" in doc)
    if not published_form:
        if hf_id is None:
            raise RecipeLoadError(origin, reason="cannot tell the recipe's hf_id: pass hf_id")
        return LoadedRecipe(_check_hf_id(hf_id, origin), validate_recipe(doc, origin), origin, "source",
                            warnings=tuple(notes))
    serving_order, kv_names = _catalog_order(catalog)
    data, published = from_published(doc, serving_order=serving_order, kv_store_names=kv_names, origin=origin)
    doc_id = _check_hf_id(doc["hf_id"], origin)
    if hf_id is not None and hf_id != doc_id:
        raise SchemaError("hf_id", value=doc_id, expected=f"{hf_id!r} (the requested recipe)", source=origin)
    return LoadedRecipe(doc_id, validate_recipe(data, origin), origin, "published", published, tuple(notes))


def load_recipe(
    source: PathLike,
    *,
    hf_id: str | None = None,
    catalog: Catalog | None = None,
    cache_dir: PathLike | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> LoadedRecipe:
    """Load one recipe from a file, a recipes tree or an http(s) URL.

    * ``models/<org>/<repo>.yaml``: source form, ``hf_id`` from the path.
    * ``*.json``: published API form (``hf_id`` from the document).
    * a directory: an upstream-like tree; ``hf_id`` is then required.
    * ``http(s)://...``: published JSON (or source YAML if the path ends in
      ``.yaml``), cached under ``cache_dir`` (no caching when ``None``) and
      served from that cache, with a warning, when the URL is unreachable.

    ``catalog`` (default: this collection's catalog) supplies the strategy
    names used to rebuild ``compatible_strategies`` from the published form.
    """
    text = os.fspath(source)
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", text):
        return _load_url(text, hf_id=hf_id, catalog=catalog, cache_dir=cache_dir, timeout=timeout)
    path = Path(text)
    if path.is_dir():
        if hf_id is None:
            raise RecipeLoadError(str(path), reason="is a directory: pass hf_id='<org>/<repo>' to pick a recipe")
        return load_recipe_from_tree(path, hf_id, catalog=catalog)
    doc = read_document(path)
    if path.suffix.lower() == ".json":
        return _from_document(doc, str(path), hf_id, catalog)
    return _from_document(doc, str(path), hf_id or _hf_id_from_path(path), catalog)


SHIPPED_RECIPES = Path(__file__).resolve().parents[2] / "recipes"


def load_recipe_ref(ref: str, *, catalog: Catalog | None = None, recipe_dirs: Sequence[PathLike] = (),
                    base_dir: PathLike | None = None, cache_dir: PathLike | None = None) -> LoadedRecipe:
    """Load a recipe named the way users name one: ``org/name``, a file path or a URL.

    An ``org/name`` id is looked up as ``models/<org>/<name>.yaml`` under each
    of ``recipe_dirs`` (a recipes tree, or a ``models`` folder itself), then in
    the recipes this collection ships. Relative paths and dirs are taken from
    ``base_dir`` when given.
    """
    try:
        return _load_recipe_ref(ref, catalog=catalog, recipe_dirs=recipe_dirs, base_dir=base_dir,
                                cache_dir=cache_dir)
    except OSError as exc:  # a name too long for a path, a loop of links ...: reported, not raised raw
        raise RecipeLoadError(ref, reason=f"cannot read: {exc.strerror or type(exc).__name__}") from None


def _load_recipe_ref(ref: str, *, catalog: Catalog | None, recipe_dirs: Sequence[PathLike],
                     base_dir: PathLike | None, cache_dir: PathLike | None) -> LoadedRecipe:
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", ref):
        return load_recipe(ref, catalog=catalog, cache_dir=cache_dir)
    if ref.startswith(("/", "./", "../", "~")) or ref.endswith((".yaml", ".yml", ".json")):
        path = Path(ref).expanduser()
        if not path.is_absolute() and base_dir:
            path = Path(base_dir) / path
        return load_recipe(path, catalog=catalog)
    searched = [Path(base_dir) / d if base_dir and not Path(d).is_absolute() else Path(d) for d in recipe_dirs]
    searched.append(SHIPPED_RECIPES)
    for root in searched:
        if (root / "models" / f"{ref}.yaml").is_file():
            return load_recipe_from_tree(root, ref, catalog=catalog)
        if (root / f"{ref}.yaml").is_file():  # a models/ folder itself
            return load_recipe(root / f"{ref}.yaml", hf_id=ref, catalog=catalog)
    raise SelectionError("recipe", value=ref,
                         expected="a recipe id (org/name) found under " + ", ".join(str(p) for p in searched)
                         + ", a recipe file path or an http(s) URL",
                         reason="fix: check the spelling, or add the recipes tree to vllm_recipe_dirs")


def load_recipe_from_tree(root: PathLike, hf_id: str, *, catalog: Catalog | None = None) -> LoadedRecipe:
    """Load ``<root>/models/<hf_id>.yaml`` (``root`` laid out like upstream)."""
    base = Path(root)
    _check_hf_id(hf_id, str(base))
    models = base / "models"
    if not models.is_dir() and (base / "recipes" / "models").is_dir():
        models = base / "recipes" / "models"
    path = models / f"{hf_id}.yaml"
    if not path.is_file():
        raise RecipeLoadError(str(path), reason=f"no recipe for {hf_id!r} in {base}")
    return _from_document(read_document(path), str(path), hf_id, catalog)


# --------------------------------------------------------------------------
# URLs
# --------------------------------------------------------------------------
def _cache_file(cache_dir: PathLike, url: str) -> Path:
    return Path(cache_dir) / (hashlib.sha256(url.encode("utf-8")).hexdigest() + ".cache")


def _write_cache(path: Path, body: bytes) -> str | None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(body)
        os.replace(tmp, path)
    except OSError as exc:
        return f"could not write the recipe cache {path}: {exc}"
    return None


def _fetch(url: str, cache_dir: PathLike | None, timeout: float) -> tuple[bytes, list[str]]:
    request = urllib.request.Request(
        url, headers={"Accept": "application/json, application/yaml;q=0.9, */*;q=0.1",
                      "User-Agent": "vllm_fleet.recipes"},
    )
    cache = _cache_file(cache_dir, url) if cache_dir is not None else None
    # Plain urllib on purpose: this is controller-side code that must work
    # without Ansible (unit tests, tools/). The scheme is checked by the caller.
    opener = urllib.request.build_opener()
    try:
        with opener.open(request, timeout=timeout) as response:
            body = response.read(MAX_DOCUMENT_BYTES + 1)
            if len(body) > MAX_DOCUMENT_BYTES:
                raise RecipeLoadError(url, reason=f"larger than {MAX_DOCUMENT_BYTES} bytes; expected a recipe")
    except urllib.error.HTTPError as exc:
        failure = f"HTTP {exc.code} {exc.reason}"
        if exc.code < 500:
            raise RecipeLoadError(url, reason=failure) from None
    except (urllib.error.URLError, OSError) as exc:
        failure = str(getattr(exc, "reason", None) or exc)
    else:
        notes = []
        if cache is not None:
            problem = _write_cache(cache, body)
            if problem:
                notes.append(problem)
        return body, notes
    if cache is not None and cache.is_file():
        stamp = datetime.fromtimestamp(cache.stat().st_mtime, tz=UTC).isoformat(timespec="seconds")
        note = f"{url}: unreachable ({failure}); using the cached copy from {stamp} ({cache})"
        warnings.warn(note, RecipeCacheWarning, stacklevel=3)
        return cache.read_bytes(), [note]
    where = f"not in the cache {cache_dir}" if cache_dir is not None else "no cache_dir to fall back on"
    raise RecipeLoadError(url, reason=f"unreachable ({failure}) and {where}")


def _load_url(
    url: str, *, hf_id: str | None, catalog: Catalog | None, cache_dir: PathLike | None, timeout: float
) -> LoadedRecipe:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise RecipeLoadError(url, reason="only http:// and https:// URLs are supported")
    body, notes = _fetch(url, cache_dir, timeout)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecipeLoadError(url, reason=f"response is not UTF-8: {exc}") from None
    if parts.path.lower().endswith((".yaml", ".yml")):
        if hf_id is None:
            hf_id = _hf_id_from_path(Path(urllib.parse.unquote(parts.path)))
        return _from_document(parse_yaml(text, url), url, hf_id, catalog, notes)
    return _from_document(parse_json(text, url), url, hf_id, catalog, notes)
