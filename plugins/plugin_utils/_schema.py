# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Shape and type checks for recipes, serving strategies and the taxonomy.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

The pydantic models below (built from the value shapes of ``_schema_shapes``)
describe the documents of the vLLM recipes format
(model recipes, ``strategies/*.yaml``, ``kv_store/*.yaml``, ``taxonomy.yaml``
and our own catalog, which has the same shapes). They are used ONLY to check
documents: ``validate_*`` return the very dict they were given, untouched, so
command synthesis keeps YAML types and key order. Unknown keys are tolerated
everywhere (upstream adds fields often); wrong types and shapes are reported
as :class:`SchemaError` with the dotted key path, the value and what would be
accepted.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._errors import SchemaError, key_path
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._schema_shapes import (
    SHAPE_ERROR,
    ArgList,
    DateLike,
    DockerImage,
    DocModel,
    EnvMap,
    EnvValue,
    GenerationT,
    InstallEntry,
    InstallSpec,
    Int,
    Label,
    MinGpus,
    Number,
    Opt,
    PoolNodes,
    ShellCommand,
    StrList,
    TpSpec,
    Version,
)

__all__ = [
    "KV_STORE_DEPLOY_TYPE",
    "SERVING_DEPLOY_TYPES",
    "validate_hardware_profile",
    "validate_kv_offload",
    "validate_published_recipe",
    "validate_recipe",
    "validate_strategy",
    "validate_taxonomy",
]

SERVING_DEPLOY_TYPES = ("single_node", "multi_node", "pd_cluster")
KV_STORE_DEPLOY_TYPE = "kv_store_lb"


# ------------------------------- recipes ---------------------------------
class Meta(DocModel):
    title: Opt[Label] = None
    slug: Opt[Label] = None
    provider: Opt[Label] = None
    description: Opt[str] = None
    date_added: Opt[DateLike] = None
    date_updated: Opt[DateLike] = None
    difficulty: Opt[str] = None
    tasks: Opt[StrList] = None
    performance_headline: Opt[str] = None
    related_recipes: Opt[StrList] = None
    hardware: Opt[dict[str, str]] = None
    default_hardware: Opt[str] = None
    platforms: Opt[list[dict[str, Any]]] = None


class Model(DocModel):
    model_id: str
    min_vllm_version: Opt[Version] = None
    nightly_required: Opt[bool] = None
    default_frontend: Opt[str] = None
    docker_image: Opt[DockerImage] = None
    architecture: Opt[str] = None
    parameter_count: Opt[Label] = None
    active_parameters: Opt[Label] = None
    context_length: Opt[Int] = None
    base_args: Opt[ArgList] = None
    base_env: Opt[EnvMap] = None
    # {pip: {command, note} | false | null, docker: ...}
    install: Opt[dict[str, InstallEntry]] = None
    flashinfer_autotune: Opt[bool] = None
    supports_dcp: Opt[bool] = None


class ArgsOverride(DocModel):
    args: Opt[ArgList] = None


class FeatureMode(DocModel):
    label: Opt[Label] = None
    description: Opt[str] = None
    args: Opt[ArgList] = None
    variants: Opt[StrList] = None
    hardware: Opt[dict[str, str]] = None
    hardware_overrides: Opt[dict[str, ArgsOverride]] = None


class Feature(DocModel):
    description: Opt[str] = None
    args: Opt[ArgList] = None
    default_mode: Opt[str] = None
    modes: Opt[dict[str, FeatureMode]] = None
    strategies: Opt[StrList] = None
    hardware: Opt[dict[str, str]] = None
    hardware_overrides: Opt[dict[str, ArgsOverride]] = None


class HardwareOverride(DocModel):
    extra_args: Opt[ArgList] = None
    extra_env: Opt[EnvMap] = None


class VariantHardwareOverride(HardwareOverride):
    docker_image: Opt[DockerImage] = None
    install: Opt[dict[str, Any]] = None


class Variant(DocModel):
    model_id: Opt[str] = None
    precision: Opt[str] = None
    vram_minimum_gb: Opt[Number] = None
    description: Opt[str] = None
    label: Opt[Label] = None
    min_vllm_version: Opt[Version] = None
    extra_args: Opt[ArgList] = None
    extra_env: Opt[EnvMap] = None
    hardware_overrides: Opt[dict[str, VariantHardwareOverride]] = None
    docker_image: Opt[DockerImage] = None
    tp: Opt[TpSpec] = None
    supported_hardware: Opt[StrList] = None
    precision_hardware: Opt[dict[str, str]] = None
    default_modes: Opt[dict[str, str]] = None


class PdRoleOverride(DocModel):
    vllm_args: Opt[ArgList] = None
    extra_args: Opt[ArgList] = None
    env: Opt[EnvMap] = None
    nodes: Opt[PoolNodes] = None
    parallelism: Opt[str] = None
    tp: Opt[Int] = None
    parallel_flag: Opt[str] = None
    hardware_overrides: Opt[dict[str, HardwareOverride]] = None


class StrategyOverride(DocModel):
    tp: Opt[TpSpec] = None
    vllm_args: Opt[ArgList] = None
    extra_args: Opt[ArgList] = None
    env: Opt[EnvMap] = None
    extra_env: Opt[EnvMap] = None
    hardware_overrides: Opt[dict[str, HardwareOverride]] = None
    prefill: Opt[PdRoleOverride] = None
    decode: Opt[PdRoleOverride] = None
    pool_modes: Opt[StrList] = None
    router: Opt[dict[str, Any]] = None


class HardwareNote(DocModel):
    title: Opt[str] = None
    body: Opt[str] = None
    link: Opt[dict[str, str]] = None


class Dependency(DocModel):
    command: Opt[str] = None
    note: Opt[str] = None
    brand: Opt[str] = None
    optional: Opt[bool] = None


class Recipe(DocModel):
    """A model recipe in SOURCE form (``models/<org>/<repo>.yaml``)."""

    meta: Opt[Meta] = None
    model: Model
    variants: dict[str, Variant]
    features: Opt[dict[str, Feature]] = None
    opt_in_features: Opt[StrList] = None
    compatible_strategies: Opt[StrList] = None
    default_strategy: Opt[str] = None
    strategy_overrides: Opt[dict[str, Opt[StrategyOverride]]] = None
    hardware_overrides: Opt[dict[str, Opt[HardwareOverride]]] = None
    strategy_hardware: Opt[dict[str, dict[str, str]]] = None
    strategy_min_gpus: Opt[MinGpus] = None
    kv_offload_support: Opt[dict[str, str]] = None
    hardware_opt_in_features: Opt[dict[str, StrList]] = None
    hardware_notes: Opt[dict[str, HardwareNote]] = None
    dependencies: Opt[list[Dependency]] = None
    omni: Opt[dict[str, Any]] = None
    guide: Opt[str] = None


class RecommendedCommand(DocModel):
    strategy: str
    hardware: Opt[str] = None
    variant: Opt[str] = None
    node_count: Opt[Int] = None
    alternatives: Opt[dict[str, Any]] = None


class PublishedRecipe(DocModel):
    """The published-JSON API form: source form minus strategy data, plus
    ``hf_id`` and a pre-rendered ``recommended_command``."""

    hf_id: str
    model: dict[str, Any]
    variants: dict[str, Any]
    recommended_command: Opt[RecommendedCommand] = None


# ------------------------------ strategies -------------------------------
class HardwareMatch(DocModel):
    min_gpus: Opt[Int] = None
    max_gpus: Opt[Int] = None
    multi_node: Opt[bool] = None
    architecture: Opt[str] = None


class Router(DocModel):
    policy: Opt[str] = None
    install: Opt[str] = None
    port: Opt[Int] = None


class PdRole(DocModel):
    vllm_args: Opt[ArgList] = None
    env: Opt[EnvMap] = None
    parallelism: Opt[str] = None
    tp: Opt[Int] = None
    parallel_flag: Opt[str] = None


class ServingStrategy(DocModel):
    name: str
    deploy_type: str
    display_name: Opt[str] = None
    orientation: Opt[str] = None
    description: Opt[str] = None
    hardware_match: Opt[HardwareMatch] = None
    vllm_args: Opt[ArgList] = None
    parallel_flag: Opt[str] = None
    parallelism: Opt[str] = None
    env: Opt[EnvMap] = None
    prefill: Opt[PdRole] = None
    decode: Opt[PdRole] = None
    router: Opt[Router] = None


class MooncakeVllm(DocModel):
    vllm_args: Opt[ArgList] = None
    env: Opt[EnvMap] = None
    install: Opt[InstallSpec] = None
    port: Opt[Int] = None


class MooncakePdRole(DocModel):
    args: Opt[ArgList] = None


class MooncakePd(DocModel):
    prefill: Opt[MooncakePdRole] = None
    decode: Opt[MooncakePdRole] = None


class MooncakeProcess(DocModel):
    command: Opt[ShellCommand] = None
    description: Opt[str] = None


class MooncakeStoreConfig(MooncakeProcess):
    note: Opt[str] = None
    config: Opt[dict[str, EnvValue]] = None


class MooncakeVllmConfig(DocModel):
    mode: Opt[str] = None
    note: Opt[str] = None
    template: Opt[dict[str, EnvValue]] = None


class KvStoreDeployment(DocModel):
    name: str
    deploy_type: str
    display_name: Opt[str] = None
    label: Opt[str] = None
    order: Opt[Number] = None
    description: Opt[str] = None
    router: Opt[Router] = None
    vllm: Opt[MooncakeVllm] = None
    pd: Opt[MooncakePd] = None
    mooncake_master: Opt[MooncakeProcess] = None
    mooncake_store_config: Opt[MooncakeStoreConfig] = None
    mooncake_vllm_config: Opt[MooncakeVllmConfig] = None
    min_vllm_version: Opt[Version] = None
    default_instances: Opt[Int] = None


# ------------------------------- taxonomy --------------------------------
class HardwareProfile(DocModel):
    brand: str
    generation: GenerationT
    gpu_count: Int
    vram_gb: Number
    display_name: Opt[str] = None
    description: Opt[str] = None
    multi_node: Opt[bool] = None
    scalable: Opt[bool] = None
    restricted: Opt[bool] = None
    compute_arch: Opt[str] = None


class Companion(DocModel):
    label: Opt[str] = None
    description: Opt[str] = None
    command: str


class KvOffloadOption(DocModel):
    display_name: Opt[str] = None
    label: Opt[str] = None
    group: Opt[str] = None
    order: Opt[Number] = None
    description: Opt[str] = None
    args: Opt[ArgList] = None
    env: Opt[EnvMap] = None
    strategies: Opt[StrList] = None
    brands: Opt[StrList] = None
    requires_opt_in: Opt[bool] = None
    install: Opt[str] = None
    docs_url: Opt[str] = None
    companion: Opt[Companion] = None


class KvOffloadGroup(DocModel):
    display_name: Opt[str] = None
    label: Opt[str] = None
    order: Opt[Number] = None
    sub_row_label: Opt[str] = None
    docs_url: Opt[str] = None
    tooltip: Opt[str] = None
    description: Opt[str] = None


class Task(DocModel):
    id: str
    display_name: Opt[str] = None
    description: Opt[str] = None


class Taxonomy(DocModel):
    hardware_profiles: dict[str, HardwareProfile]
    tasks: Opt[list[Task]] = None
    strategies: Opt[StrList] = None
    kv_offload_groups: Opt[dict[str, KvOffloadGroup]] = None
    kv_offload: Opt[dict[str, KvOffloadOption]] = None


# ------------------------------ validation -------------------------------
_EXPECTED_BY_TYPE = {
    "string_type": "a string",
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "a boolean (true or false)",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "list_type": "a list",
    "missing": "a value: this key is required",
}


def _to_schema_error(exc: ValidationError, source: str, prefix: str = "") -> SchemaError:
    errors = exc.errors(include_url=False)
    first = errors[0]
    loc = tuple(first["loc"])
    value = first.get("input")
    kind = first["type"]
    ctx = first.get("ctx") or {}
    if kind == SHAPE_ERROR:
        loc += tuple(ctx.get("sub", ()))
        value = ctx.get("bad", value)
        expected = str(ctx.get("expected"))
    is_key = bool(loc) and loc[-1] == "[key]"
    if is_key:
        loc = loc[:-1]
        value = loc[-1] if loc else value
        expected = "a string key"
    elif kind != SHAPE_ERROR:
        expected = _EXPECTED_BY_TYPE.get(kind, first.get("msg", "a valid value"))
    key = key_path(((prefix,) if prefix else ()) + loc, last_is_key=is_key)
    reason = ""
    if len(errors) > 1:
        others = ", ".join(key_path(tuple(e["loc"])) for e in errors[1:4])
        more = "..." if len(errors) > 4 else ""
        reason = f"{len(errors) - 1} more problem(s) at {others}{more}"
    if kind == "missing":
        return SchemaError(key, expected=expected, reason=reason, source=source)
    return SchemaError(key, value=value, expected=expected, reason=reason, source=source)


def _validate(model: type[DocModel], data: Any, source: str, what: str, prefix: str = "") -> None:
    if not isinstance(data, dict):
        raise SchemaError(prefix, value=data, expected=f"a mapping ({what})", source=source)
    try:
        model.model_validate(data)
    except ValidationError as exc:
        raise _to_schema_error(exc, source, prefix) from None


def validate_recipe(data: dict[str, Any], source: str = "") -> dict[str, Any]:
    """Check a SOURCE-form model recipe; return ``data`` itself, unchanged."""
    _validate(Recipe, data, source, "a model recipe")
    return data


def validate_published_recipe(data: dict[str, Any], source: str = "") -> dict[str, Any]:
    """Check the published-JSON specific parts (``hf_id``, ``recommended_command``)."""
    _validate(PublishedRecipe, data, source, "a published recipe")
    return data


def validate_strategy(data: dict[str, Any], source: str = "") -> dict[str, Any]:
    """Check a serving strategy or a kv_store deployment (by ``deploy_type``)."""
    kv_store = isinstance(data, dict) and data.get("deploy_type") == KV_STORE_DEPLOY_TYPE
    model = KvStoreDeployment if kv_store else ServingStrategy
    _validate(model, data, source, "a strategy document")
    return data


def validate_taxonomy(data: dict[str, Any], source: str = "") -> dict[str, Any]:
    """Check a whole taxonomy document (``hardware_profiles``, ``kv_offload``...)."""
    _validate(Taxonomy, data, source, "a taxonomy document")
    return data


def validate_hardware_profile(data: dict[str, Any], source: str = "", hw_id: str = "") -> dict[str, Any]:
    """Check one hardware profile; key paths start with ``hw_id`` when given."""
    _validate(HardwareProfile, data, source, "a hardware profile", hw_id)
    return data


def validate_kv_offload(data: dict[str, Any], source: str = "", option_id: str = "") -> dict[str, Any]:
    """Check one ``kv_offload`` option."""
    _validate(KvOffloadOption, data, source, "a kv_offload option", option_id)
    return data
