"""The recipe engine's entry point: a recipe plus a selection in, processes out.

Private to the vllm_fleet.recipes collection: not a public API.

``resolve(recipe, selection)`` is the one call the rest of the collection
makes. It fills the selection from the recipe's recommended defaults,
validates it strictly, and expands the recipes site's output into every
process a fleet runs: each multi-node rank, each node of every prefill and
decode pool, each Mooncake instance, the router and the Mooncake services.
Arguments keep the recipes site's placeholders (``$HEAD_IP``,
``$PREFILL_NODE_1`` ...); placement onto hosts fills them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional, Union

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._catalog import Catalog, load_catalog
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._docker import docker_argv, docker_command, docker_meta
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._engine_shapes import SHAPES, Expansion, shape_of
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._errors import SelectionError
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._gates import SERVE_PORT
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._jsvalue import to_plain
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._launch import Process, Resolution
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._loader import LoadedRecipe
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._selection import (
    Selection,
    complete_selection,
    one_of,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._synthesis import resolve_command
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._validation import validate_selection

__all__ = ("Process", "Resolution", "resolve", "selection_from_mapping")

SELECTION_KEYS = tuple(Selection.__dataclass_fields__)


def selection_from_mapping(values: Union[Selection, Mapping[str, Any]]) -> Selection:
    """Build a Selection from user input, rejecting unknown keys by name."""
    if isinstance(values, Selection):
        return values
    if not isinstance(values, Mapping):
        raise SelectionError("selection", value=values, expected="a mapping of " + ", ".join(SELECTION_KEYS))
    plain: dict[str, Any] = to_plain(dict(values))
    unknown = [k for k in plain if k not in SELECTION_KEYS]
    if unknown:
        raise SelectionError(f"selection.{unknown[0]}", value=plain[unknown[0]],
                             expected="a key among " + ", ".join(SELECTION_KEYS))
    data = {k: v for k, v in plain.items() if v is not None}
    for key in ("features", "advanced_args"):
        if key in data:
            if not isinstance(data[key], (list, tuple)):
                raise SelectionError(key, value=data[key], expected="a list")
            data[key] = tuple(data[key])
    if "feature_modes" in data and not isinstance(data["feature_modes"], Mapping):
        raise SelectionError("feature_modes", value=data["feature_modes"], expected="a mapping of feature to mode")
    return Selection(**data)


def _recipe_data(recipe: Union[LoadedRecipe, Mapping[str, Any]]) -> tuple[str, Mapping[str, Any]]:
    if isinstance(recipe, LoadedRecipe):
        return recipe.hf_id, recipe.data
    data: Mapping[str, Any] = to_plain(recipe)
    model_id = (data.get("model") or {}).get("model_id", "unknown")
    return str(model_id), data


def resolve(recipe: Union[LoadedRecipe, Mapping[str, Any]],
            selection: Union[Selection, Mapping[str, Any], None] = None,
            catalog: Optional[Catalog] = None, *, strict: bool = True) -> Resolution:
    """Resolve a recipe and selection into every process of the deployment.

    Unset selection fields take the recipe's recommended values (default
    hardware, strategy, node count, features, PD pool sizes). With
    ``strict`` (the default) the completed selection is validated and a
    ``SelectionError`` names the first bad key.
    """
    catalog = catalog or load_catalog()
    hf_id, data = _recipe_data(recipe)
    chosen = selection_from_mapping(selection or {})
    variants = data.get("variants") or {}
    if chosen.variant not in variants:
        raise SelectionError("variant", value=chosen.variant, expected=one_of(variants))
    profiles = catalog.taxonomy.get("hardware_profiles") or {}
    if chosen.hardware is not None and chosen.hardware not in profiles:
        raise SelectionError("hardware", value=chosen.hardware, expected=one_of(profiles))
    complete = complete_selection(data, chosen, catalog.strategies, catalog.taxonomy)
    if strict:
        validate_selection(data, complete, catalog.strategies, catalog.taxonomy)
    return _expand(hf_id, data, complete, catalog)


def _synthesise(data: Mapping[str, Any], sel: Selection, catalog: Catalog, **changes: Any) -> dict[str, Any]:
    values = {
        "pd_nodes": sel.pd_nodes, "kv_instances": sel.kv_instances,
    }
    values.update(changes)
    return resolve_command(
        data, sel.variant, sel.strategy, sel.hardware, list(sel.features or ()), catalog.strategies,
        catalog.taxonomy, list(sel.advanced_args), sel.node_count, values["pd_nodes"],
        dict(sel.feature_modes), sel.kv_offload, values["kv_instances"], sel.frontend,
    )


def _expand(hf_id: str, data: Mapping[str, Any], sel: Selection, catalog: Catalog) -> Resolution:
    profile = catalog.taxonomy["hardware_profiles"][sel.hardware]
    variant = data["variants"][sel.variant]
    meta = docker_meta(data, variant, profile, sel.hardware)
    output = _synthesise(data, sel, catalog)

    def launch(name: str, role: str, group: str, rank: int, argv: list[Any], command: str, env: Mapping[str, Any],
               port: Optional[int]) -> Process:
        return Process(name=name, role=role, group=group, rank=rank, argv=tuple(argv), command=command,
                       env=dict(env), port=port,
                       docker_argv=tuple(docker_argv(argv, env, meta, port or SERVE_PORT)),
                       docker_command=docker_command(command, env, meta, port or SERVE_PORT))

    expansion = Expansion(output=output, pd_nodes=sel.pd_nodes, launch=launch,
                          synthesise=lambda **changes: _synthesise(data, sel, catalog, **changes))
    processes = SHAPES[shape_of(output)].expand(expansion)
    return Resolution(hf_id=hf_id, selection=sel, deploy_type=output["deployType"], image=meta["image"],
                      docker={"image": meta["image"], "meta": meta}, output=output, processes=tuple(processes))
