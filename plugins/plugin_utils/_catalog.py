# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""The hardware / strategy / KV-offload catalog that command synthesis reads.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

A :class:`Catalog` bundles the two inputs the synthesis engine takes besides
the recipe: ``taxonomy`` (same shape as upstream ``taxonomy.yaml``:
``hardware_profiles``, ``tasks``, ``strategies``, ``kv_offload_groups``,
``kv_offload``) and ``strategies`` (every serving strategy and kv_store
deployment keyed by ``name``). Both are plain dicts as parsed from YAML;
treat them as read-only, they are cached and shared.

Our own catalog lives in ``recipes/catalog/`` of this collection::

    hardware.yaml       hardware_profiles
    kv_offload.yaml     kv_offload_groups, kv_offload
    vocabulary.yaml     tasks, strategies (canonical strategy order)
    strategies/*.yaml   serving strategies
    kv_store/*.yaml     Mooncake KV-store deployments

The strategy and taxonomy documents of an upstream-like tree are read here
too (:func:`load_strategies`, :func:`load_taxonomy`, :func:`load_upstream_tree`).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._documents import (
    PathLike,
    read_document,
    require_mapping,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._errors import (
    RecipeLoadError,
    SchemaError,
    SelectionError,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._schema import (
    KV_STORE_DEPLOY_TYPE,
    validate_strategy,
    validate_taxonomy,
)

__all__ = [
    "DEFAULT_CATALOG_DIR",
    "Catalog",
    "is_kv_store",
    "load_catalog",
    "load_strategies",
    "load_taxonomy",
    "load_upstream_catalog",
    "load_upstream_tree",
]

# <collection>/plugins/plugin_utils/_catalog.py -> <collection>/recipes/catalog
DEFAULT_CATALOG_DIR = Path(__file__).resolve().parents[2] / "recipes" / "catalog"

# Files merged into the taxonomy, in upstream's section order.
_TAXONOMY_FILES = (("hardware.yaml", True), ("vocabulary.yaml", False), ("kv_offload.yaml", False))
_SECTION_ORDER = ("hardware_profiles", "tasks", "strategies", "kv_offload_groups", "kv_offload")
KV_STORE_PREFIX = "kv_store_"


# --------------------------------------------------------------------------
# Strategies and taxonomy (upstream layout)
# --------------------------------------------------------------------------
def _strategy_dirs(dir_or_dirs: PathLike | Iterable[PathLike]) -> list[Path]:
    if isinstance(dir_or_dirs, (str, os.PathLike)):
        one = Path(dir_or_dirs)
        if (one / "strategies").is_dir():
            return [one / "strategies", one / "kv_store"]
        return [one]
    return [Path(d) for d in dir_or_dirs]


def load_strategies(dir_or_dirs: PathLike | Iterable[PathLike]) -> dict[str, dict[str, Any]]:
    """Every ``*.yaml`` strategy document of the given directories, keyed by
    ``name`` (serving strategies and kv_store deployments in one map).

    A single directory holding a ``strategies/`` subfolder (a recipes tree)
    is expanded to its ``strategies/`` and ``kv_store/``. Directories are read in the order given, files in
    name order; a directory that does not exist is an error.
    """
    out: dict[str, dict[str, Any]] = {}
    origins: dict[str, str] = {}
    for directory in _strategy_dirs(dir_or_dirs):
        if not directory.is_dir():
            raise RecipeLoadError(str(directory), reason="no such directory")
        for path in sorted(directory.glob("*.yaml")):
            doc = require_mapping(read_document(path), str(path), "a strategy")
            validate_strategy(doc, str(path))
            name = doc["name"]
            if name in out:
                raise SchemaError("name", value=name, expected="a name no other strategy file uses",
                                  reason=f"also defined in {origins[name]}", source=str(path))
            out[name] = doc
            origins[name] = str(path)
    return out


def load_taxonomy(path: PathLike) -> dict[str, Any]:
    """Parse and check a ``taxonomy.yaml`` document."""
    doc = require_mapping(read_document(path), os.fspath(path), "a taxonomy")
    return validate_taxonomy(doc, os.fspath(path))


def is_kv_store(name: str, doc: Mapping[str, Any] | None) -> bool:
    """Whether a strategy map entry is a kv_store deployment."""
    if doc is not None and doc.get("deploy_type") == KV_STORE_DEPLOY_TYPE:
        return True
    return name.startswith(KV_STORE_PREFIX)


def load_upstream_tree(root: PathLike) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """``(taxonomy, strategies)`` of an upstream-like recipes directory.

    ``root`` holds ``taxonomy.yaml``, ``strategies/`` and ``kv_store/`` (or
    is a checkout holding them under ``recipes/``).
    """
    base = Path(root)
    if not (base / "taxonomy.yaml").is_file() and (base / "recipes" / "taxonomy.yaml").is_file():
        base = base / "recipes"
    taxonomy = load_taxonomy(base / "taxonomy.yaml")
    strategies = load_strategies([base / "strategies", base / "kv_store"])
    return taxonomy, strategies


# --------------------------------------------------------------------------
# The catalog
# --------------------------------------------------------------------------
def _one_of(names: Any) -> str:
    return "one of: " + ", ".join(sorted(names)) if names else "nothing (the catalog is empty)"


@dataclass(frozen=True, eq=False)
class Catalog:
    """Taxonomy + strategy map, as the synthesis engine consumes them."""

    taxonomy: dict[str, Any]
    strategies: dict[str, dict[str, Any]]
    origin: str = ""

    def hardware_ids(self) -> tuple[str, ...]:
        return tuple(self.taxonomy.get("hardware_profiles") or {})

    def hardware(self, hw_id: str) -> dict[str, Any]:
        """The hardware profile ``hw_id``; SelectionError when unknown."""
        profiles: dict[str, dict[str, Any]] = self.taxonomy.get("hardware_profiles") or {}
        if hw_id not in profiles:
            raise SelectionError("hardware", value=hw_id, expected=_one_of(profiles), source=self.origin)
        return profiles[hw_id]

    def strategy(self, name: str) -> dict[str, Any]:
        """A serving strategy or kv_store deployment; SelectionError when unknown."""
        if name not in self.strategies:
            raise SelectionError("strategy", value=name, expected=_one_of(self.strategies), source=self.origin)
        return self.strategies[name]

    def kv_offload(self, option_id: str) -> dict[str, Any]:
        """A ``taxonomy.kv_offload`` option; SelectionError when unknown."""
        options: dict[str, dict[str, Any]] = self.taxonomy.get("kv_offload") or {}
        if option_id not in options:
            raise SelectionError("kv_offload", value=option_id, expected=_one_of(options), source=self.origin)
        return options[option_id]

    def serving_strategy_names(self) -> tuple[str, ...]:
        """Serving strategies (not kv_store) in canonical order: the taxonomy's
        ``strategies`` list first, then any others in map order."""
        serving = [n for n, doc in self.strategies.items() if not is_kv_store(n, doc)]
        listed = [n for n in self.taxonomy.get("strategies") or () if n in serving]
        return tuple(listed + [n for n in serving if n not in listed])

    def kv_store_names(self) -> tuple[str, ...]:
        """kv_store deployments (``deploy_type: kv_store_lb``) in map order."""
        return tuple(n for n, doc in self.strategies.items() if is_kv_store(n, doc))


def _check_listed_strategies(taxonomy: dict[str, Any], strategies: dict[str, Any], origin: str) -> None:
    for i, name in enumerate(taxonomy.get("strategies") or ()):
        if name not in strategies:
            raise SchemaError(f"strategies[{i}]", value=name,
                              expected=f"a strategy with a document ({_one_of(strategies)})", source=origin)


@functools.lru_cache(maxsize=8)
def _load_catalog(root: Path) -> Catalog:
    if not root.is_dir():
        raise RecipeLoadError(str(root), reason="catalog directory not found")
    taxonomy: dict[str, Any] = {}
    found_in: dict[str, str] = {}
    for name, required in _TAXONOMY_FILES:
        path = root / name
        if not path.is_file():
            if required:
                raise RecipeLoadError(str(path), reason="no such file (every catalog needs one)")
            continue
        doc = read_document(path)
        if not isinstance(doc, dict):
            raise SchemaError("", value=doc, expected="a mapping of taxonomy sections", source=str(path))
        for section, value in doc.items():
            if section in taxonomy:
                raise SchemaError(section, expected="each taxonomy section in one file only",
                                  reason=f"also in {found_in[section]}", source=str(path))
            taxonomy[section] = value
            found_in[section] = str(path)
    ordered = {k: taxonomy[k] for k in _SECTION_ORDER if k in taxonomy}
    ordered.update((k, v) for k, v in taxonomy.items() if k not in ordered)
    validate_taxonomy(ordered, str(root))
    strategies = load_strategies([root / "strategies", root / "kv_store"])
    _check_listed_strategies(ordered, strategies, str(root / "vocabulary.yaml"))
    return Catalog(ordered, strategies, str(root))


def load_catalog(root: PathLike | None = None) -> Catalog:
    """Load (once, then cached) a catalog laid out like ``recipes/catalog``;
    default: the catalog shipped with this collection."""
    return _load_catalog(Path(root).resolve() if root is not None else DEFAULT_CATALOG_DIR)


@functools.lru_cache(maxsize=8)
def _load_upstream(root: Path) -> Catalog:
    taxonomy, strategies = load_upstream_tree(root)
    _check_listed_strategies(taxonomy, strategies, str(root / "taxonomy.yaml"))
    return Catalog(taxonomy, strategies, str(root))


def load_upstream_catalog(upstream_recipes_dir: PathLike) -> Catalog:
    """Catalog from an upstream vllm-project/recipes tree (``taxonomy.yaml``,
    ``strategies/``, ``kv_store/``), cached per directory."""
    return _load_upstream(Path(upstream_recipes_dir).resolve())
