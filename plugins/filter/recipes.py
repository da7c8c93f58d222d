# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Filters over the recipe engine: resolve a recipe, or read its recommended selection.

Documentation lives in the sidecar files resolve.yml and default_selection.yml.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from ansible.errors import AnsibleFilterError

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._requirements import missing_requirement

try:
    from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._catalog import load_catalog
    from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._engine import resolve
    from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._errors import RecipeError
    from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._loader import LoadedRecipe, load_recipe_ref
    from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._selection import default_selection as _default
except ImportError as exc:  # raised at use, with the package to install
    IMPORT_ERROR: Optional[ImportError] = exc
else:
    IMPORT_ERROR = None


def _engine_ready(name: str) -> None:
    if IMPORT_ERROR is not None:
        raise AnsibleFilterError(missing_requirement(f"vllm_fleet.recipes.{name}", IMPORT_ERROR))


def _recipe(source: Any, catalog_dir: Optional[str]) -> tuple[Any, Any]:
    catalog = load_catalog(catalog_dir) if catalog_dir else load_catalog()
    if isinstance(source, Mapping):
        hf_id = source.get("hf_id") or (source.get("model") or {}).get("model_id", "unknown")
        return LoadedRecipe(str(hf_id), dict(source), "<inline>", "source"), catalog
    if not isinstance(source, str):
        raise AnsibleFilterError(f"recipe: got {source!r} ({type(source).__name__}); "
                                 "expected a path, an http(s) URL or a recipe mapping")
    return load_recipe_ref(source, catalog=catalog), catalog


def resolve_filter(recipe: Any, selection: Optional[Mapping[str, Any]] = None, catalog_dir: Optional[str] = None,
                   strict: bool = True) -> dict:
    _engine_ready("resolve")
    try:
        loaded, catalog = _recipe(recipe, catalog_dir)
        return resolve(loaded, selection or {}, catalog, strict=strict).to_dict()
    except RecipeError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def default_selection_filter(recipe: Any, variant: str = "default", hardware: Optional[str] = None,
                             catalog_dir: Optional[str] = None) -> dict:
    _engine_ready("default_selection")
    try:
        loaded, catalog = _recipe(recipe, catalog_dir)
        chosen = _default(loaded.data, catalog.strategies, catalog.taxonomy, variant, hardware)
    except RecipeError as exc:
        raise AnsibleFilterError(str(exc)) from exc
    return {
        "variant": chosen.variant, "hardware": chosen.hardware, "strategy": chosen.strategy,
        "features": list(chosen.features or ()), "node_count": chosen.node_count,
        "pd_nodes": chosen.pd_nodes, "kv_offload": chosen.kv_offload,
    }


class FilterModule:
    """vllm_fleet.recipes filters."""

    def filters(self) -> dict:
        return {"resolve": resolve_filter, "default_selection": default_selection_filter}
