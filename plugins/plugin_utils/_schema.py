# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Shape and type checks for recipes, serving strategies and the taxonomy.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

The pydantic models below describe the documents of the vLLM recipes format
(model recipes, ``strategies/*.yaml``, ``kv_store/*.yaml``, ``taxonomy.yaml``
and our own catalog, which has the same shapes). They are used ONLY to check
documents: ``validate_*`` return the very dict they were given, untouched, so
command synthesis keeps YAML types and key order. Unknown keys are tolerated
everywhere (upstream adds fields often); wrong types and shapes are reported
as :class:`SchemaError` with the dotted key path, the value and what would be
accepted.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Annotated, Any, Optional

from pydantic import BaseModel, ConfigDict, PlainValidator, ValidationError
from pydantic_core import PydanticCustomError

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._errors import SchemaError

__all__ = [
    "validate_recipe",
    "validate_published_recipe",
    "validate_strategy",
    "validate_taxonomy",
    "validate_hardware_profile",
    "validate_kv_offload",
    "KV_STORE_DEPLOY_TYPE",
    "SERVING_DEPLOY_TYPES",
]

SERVING_DEPLOY_TYPES = ("single_node", "multi_node", "pd_cluster")
KV_STORE_DEPLOY_TYPE = "kv_store_lb"

Path_ = tuple[Any, ...]


# --------------------------------------------------------------------------
# Value shapes that are unions. They are checked by small functions rather
# than pydantic unions so that one bad value gives ONE error at the exact
# key path (pydantic unions report one error per member).
# --------------------------------------------------------------------------
class _Bad(Exception):
    def __init__(self, sub: Path_, value: Any) -> None:
        super().__init__()
        self.sub = sub
        self.value = value


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_scalar(v: Any) -> bool:
    return isinstance(v, (str, int, float, bool))


def _map_of(v: Any, item_ok: Callable[[Any], bool], sub: Path_ = ()) -> None:
    """Raise _Bad unless ``v`` is a mapping with str keys and ok values."""
    if not isinstance(v, dict):
        raise _Bad(sub, v)
    for key, item in v.items():
        if not isinstance(key, str):
            raise _Bad(sub + (key,), key)
        if not item_ok(item):
            raise _Bad(sub + (key,), item)


def _shape(expected: str, check: Callable[[Any], None]) -> Any:
    """An ``Annotated`` type validated by ``check`` (raises ``_Bad``)."""

    def validate(value: Any) -> Any:
        try:
            check(value)
        except _Bad as bad:
            raise PydanticCustomError(
                "recipe_shape",
                "expected {expected}",
                {"expected": expected, "sub": bad.sub, "bad": bad.value},
            ) from None
        return value

    return Annotated[Any, PlainValidator(validate)]


def _pred(expected: str, ok: Callable[[Any], bool]) -> Any:
    def check(v: Any) -> None:
        if not ok(v):
            raise _Bad((), v)

    return _shape(expected, check)


def _check_docker_image(v: Any) -> None:
    # "image:tag" | {cu129, cu130} | {nvidia, amd, tpu, intel} where a brand
    # value is a string or (for nvidia) a CUDA map.
    if isinstance(v, str):
        return
    if not isinstance(v, dict):
        raise _Bad((), v)
    for key, item in v.items():
        if not isinstance(key, str):
            raise _Bad((key,), key)
        if isinstance(item, dict):
            _map_of(item, lambda x: isinstance(x, str), (key,))
        elif not isinstance(item, str):
            raise _Bad((key,), item)


def _check_tp(v: Any) -> None:
    # 4 | {h200: 2, b200: 1}
    if not _is_int(v):
        _map_of(v, _is_int)


def _check_min_gpus(v: Any) -> None:
    # 8 | {single_node_tp: 8, h100: 32} | {pd_cluster: {h100: 16}}
    if _is_int(v):
        return
    if not isinstance(v, dict):
        raise _Bad((), v)
    for key, item in v.items():
        if not isinstance(key, str):
            raise _Bad((key,), key)
        if isinstance(item, dict):
            _map_of(item, _is_int, (key,))
        elif not _is_int(item):
            raise _Bad((key,), item)


def _check_install(v: Any) -> None:
    # "uv pip install x" | {nvidia: "...", amd: "..."}
    if not isinstance(v, str):
        _map_of(v, lambda x: isinstance(x, str) or x is None)


Number = _pred("a number", _is_number)
Int = _pred("an integer", _is_int)
# Command-line tokens: YAML authors quote them, but an unquoted number is
# still rendered by the recipes site, so numbers are accepted too.
ArgToken = _pred("a string (one command-line token)", lambda v: isinstance(v, (str, int, float)) and not isinstance(v, bool))
EnvValue = _pred("a string, number or boolean (an environment value)", _is_scalar)
# Pure metadata that authors sometimes leave unquoted ("0.23", 8, 2026-01-01).
Label = _pred("a string", lambda v: isinstance(v, (str, int, float)) and not isinstance(v, bool))
DateLike = _pred("a date or a string", lambda v: isinstance(v, (str, datetime.date)))
GenerationT = _pred(
    "a string or a list of strings",
    lambda v: isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v)),
)
DockerImage = _shape(
    "an image string, a brand map ({nvidia: ..., amd: ...}), a CUDA map ({cu129: ..., cu130: ...}) "
    "or a brand map whose nvidia value is a CUDA map",
    _check_docker_image,
)
TpSpec = _shape("an integer or a map of hardware id/generation to integer", _check_tp)
MinGpus = _shape(
    "an integer, or a map of strategy/hardware id to an integer or to a map of hardware id to integer",
    _check_min_gpus,
)
InstallEntry = _pred(
    "a mapping of strings ({command: ..., note: ...}), false or null",
    lambda v: v is None
    or isinstance(v, bool)
    or (isinstance(v, dict) and all(isinstance(x, str) or x is None for x in v.values())),
)
InstallSpec = _shape("a string or a map of brand to string", _check_install)

ArgList = list[ArgToken]
EnvMap = dict[str, EnvValue]
StrList = list[str]
Opt = Optional


class _Doc(BaseModel):
    """Strict types, unknown keys allowed, no coercion."""

    model_config = ConfigDict(strict=True, extra="allow", frozen=True, protected_namespaces=())


# ------------------------------- recipes ---------------------------------
class Meta(_Doc):
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


class Model(_Doc):
    model_id: str
    min_vllm_version: Opt[Label] = None
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


class ArgsOverride(_Doc):
    args: Opt[ArgList] = None


class FeatureMode(_Doc):
    label: Opt[Label] = None
    description: Opt[str] = None
    args: Opt[ArgList] = None
    variants: Opt[StrList] = None
    hardware: Opt[dict[str, str]] = None
    hardware_overrides: Opt[dict[str, ArgsOverride]] = None


class Feature(_Doc):
    description: Opt[str] = None
    args: Opt[ArgList] = None
    default_mode: Opt[str] = None
    modes: Opt[dict[str, FeatureMode]] = None
    strategies: Opt[StrList] = None
    hardware: Opt[dict[str, str]] = None
    hardware_overrides: Opt[dict[str, ArgsOverride]] = None


class HardwareOverride(_Doc):
    extra_args: Opt[ArgList] = None
    extra_env: Opt[EnvMap] = None


class VariantHardwareOverride(HardwareOverride):
    docker_image: Opt[DockerImage] = None
    install: Opt[dict[str, Any]] = None


class Variant(_Doc):
    model_id: Opt[str] = None
    precision: Opt[str] = None
    vram_minimum_gb: Opt[Number] = None
    description: Opt[str] = None
    label: Opt[Label] = None
    min_vllm_version: Opt[Label] = None
    extra_args: Opt[ArgList] = None
    extra_env: Opt[EnvMap] = None
    hardware_overrides: Opt[dict[str, VariantHardwareOverride]] = None
    docker_image: Opt[DockerImage] = None
    tp: Opt[TpSpec] = None
    supported_hardware: Opt[StrList] = None
    precision_hardware: Opt[dict[str, str]] = None
    default_modes: Opt[dict[str, str]] = None


class PdRoleOverride(_Doc):
    vllm_args: Opt[ArgList] = None
    extra_args: Opt[ArgList] = None
    env: Opt[EnvMap] = None
    nodes: Opt[Int] = None
    parallelism: Opt[str] = None
    tp: Opt[Int] = None
    parallel_flag: Opt[str] = None
    hardware_overrides: Opt[dict[str, HardwareOverride]] = None


class StrategyOverride(_Doc):
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


class HardwareNote(_Doc):
    title: Opt[str] = None
    body: Opt[str] = None
    link: Opt[dict[str, str]] = None


class Dependency(_Doc):
    command: Opt[str] = None
    note: Opt[str] = None
    brand: Opt[str] = None
    optional: Opt[bool] = None


class Recipe(_Doc):
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


class RecommendedCommand(_Doc):
    strategy: str
    hardware: Opt[str] = None
    variant: Opt[str] = None
    node_count: Opt[Int] = None
    alternatives: Opt[dict[str, Any]] = None


class PublishedRecipe(_Doc):
    """The published-JSON API form: source form minus strategy data, plus
    ``hf_id`` and a pre-rendered ``recommended_command``."""

    hf_id: str
    model: dict[str, Any]
    variants: dict[str, Any]
    recommended_command: Opt[RecommendedCommand] = None


# ------------------------------ strategies -------------------------------
class HardwareMatch(_Doc):
    min_gpus: Opt[Int] = None
    max_gpus: Opt[Int] = None
    multi_node: Opt[bool] = None
    architecture: Opt[str] = None


class Router(_Doc):
    policy: Opt[str] = None
    install: Opt[str] = None
    port: Opt[Int] = None


class PdRole(_Doc):
    vllm_args: Opt[ArgList] = None
    env: Opt[EnvMap] = None
    parallelism: Opt[str] = None
    tp: Opt[Int] = None
    parallel_flag: Opt[str] = None


class ServingStrategy(_Doc):
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


class MooncakeVllm(_Doc):
    vllm_args: Opt[ArgList] = None
    env: Opt[EnvMap] = None
    install: Opt[InstallSpec] = None
    port: Opt[Int] = None


class MooncakePdRole(_Doc):
    args: Opt[ArgList] = None


class MooncakePd(_Doc):
    prefill: Opt[MooncakePdRole] = None
    decode: Opt[MooncakePdRole] = None


class MooncakeProcess(_Doc):
    command: Opt[str] = None
    description: Opt[str] = None


class MooncakeStoreConfig(MooncakeProcess):
    note: Opt[str] = None
    config: Opt[dict[str, EnvValue]] = None


class MooncakeVllmConfig(_Doc):
    mode: Opt[str] = None
    note: Opt[str] = None
    template: Opt[dict[str, EnvValue]] = None


class KvStoreDeployment(_Doc):
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
    min_vllm_version: Opt[Label] = None
    default_instances: Opt[Int] = None


# ------------------------------- taxonomy --------------------------------
class HardwareProfile(_Doc):
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


class Companion(_Doc):
    label: Opt[str] = None
    description: Opt[str] = None
    command: str


class KvOffloadOption(_Doc):
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


class KvOffloadGroup(_Doc):
    display_name: Opt[str] = None
    label: Opt[str] = None
    order: Opt[Number] = None
    sub_row_label: Opt[str] = None
    docs_url: Opt[str] = None
    tooltip: Opt[str] = None
    description: Opt[str] = None


class Task(_Doc):
    id: str
    display_name: Opt[str] = None
    description: Opt[str] = None


class Taxonomy(_Doc):
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


def _dotted(loc: Path_, last_is_key: bool = False) -> str:
    out = ""
    for i, part in enumerate(loc):
        as_key = last_is_key and i == len(loc) - 1
        if isinstance(part, int) and not isinstance(part, bool) and not as_key:
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _to_schema_error(exc: ValidationError, source: str, prefix: str = "") -> SchemaError:
    errors = exc.errors(include_url=False)
    first = errors[0]
    loc = tuple(first["loc"])
    value = first.get("input")
    kind = first["type"]
    ctx = first.get("ctx") or {}
    if kind == "recipe_shape":
        loc += tuple(ctx.get("sub", ()))
        value = ctx.get("bad", value)
        expected = str(ctx.get("expected"))
    is_key = bool(loc) and loc[-1] == "[key]"
    if is_key:
        loc = loc[:-1]
        value = loc[-1] if loc else value
        expected = "a string key"
    elif kind != "recipe_shape":
        expected = _EXPECTED_BY_TYPE.get(kind, first.get("msg", "a valid value"))
    key = _dotted(((prefix,) if prefix else ()) + loc, last_is_key=is_key)
    reason = ""
    if len(errors) > 1:
        others = ", ".join(_dotted(tuple(e["loc"])) for e in errors[1:4])
        more = "..." if len(errors) > 4 else ""
        reason = f"{len(errors) - 1} more problem(s) at {others}{more}"
    if kind == "missing":
        return SchemaError(key, expected=expected, reason=reason, source=source)
    return SchemaError(key, value=value, expected=expected, reason=reason, source=source)


def _validate(model: type[_Doc], data: Any, source: str, what: str, prefix: str = "") -> None:
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
