# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Value shapes and the base model of the recipe-format schema (``_schema``).

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

Field types such as ``ArgList``, ``DockerImage`` or ``MinGpus`` that the
document models of ``_schema`` are built from, and ``DocModel``, their strict,
extra-tolerant base. A value of the wrong shape raises a pydantic error of
type :data:`SHAPE_ERROR` carrying the sub-path, the bad value and what would
be accepted, which ``_schema`` turns into one ``SchemaError``.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from typing import Annotated, Any, Optional, TypeVar

from pydantic import BaseModel, ConfigDict, PlainValidator
from pydantic_core import PydanticCustomError

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._argv_tools import shell_words

__all__ = [
    "SHAPE_ERROR",
    "VERSION_RE",
    "ArgList",
    "ArgToken",
    "DateLike",
    "DocModel",
    "DockerImage",
    "EnvMap",
    "EnvValue",
    "GenerationT",
    "InstallEntry",
    "InstallSpec",
    "Int",
    "Label",
    "MinGpus",
    "Number",
    "Opt",
    "Path_",
    "PoolNodes",
    "StrList",
    "TpSpec",
    "Version",
]

#: pydantic error type of a value of the wrong shape (``ctx``: ``expected``, ``sub``, ``bad``).
SHAPE_ERROR = "recipe_shape"

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


def _shape(expected: str, check: Callable[[Any], None]) -> PlainValidator:
    """The validator of an ``Annotated[Any, ...]`` shape: ``check`` (raises ``_Bad``)."""

    def validate(value: Any) -> Any:
        try:
            check(value)
        except _Bad as bad:
            raise PydanticCustomError(
                SHAPE_ERROR,
                "expected {expected}",
                {"expected": expected, "sub": bad.sub, "bad": bad.value},
            ) from None
        return value

    return PlainValidator(validate)


def _pred(expected: str, ok: Callable[[Any], bool]) -> PlainValidator:
    def check(v: Any) -> None:
        if not ok(v):
            raise _Bad((), v)

    return _shape(expected, check)


def _scalar_or_keyed(v: Any, leaf: Callable[[Any], bool]) -> None:
    """A leaf value, or a map of string keys to leaves or to maps of leaves."""
    if leaf(v):
        return
    if not isinstance(v, dict):
        raise _Bad((), v)
    for key, item in v.items():
        if not isinstance(key, str):
            raise _Bad((key,), key)
        if isinstance(item, dict):
            _map_of(item, leaf, (key,))
        elif not leaf(item):
            raise _Bad((key,), item)


def _is_str(v: Any) -> bool:
    return isinstance(v, str)


def _splits(command: str) -> bool:
    try:
        shell_words(command)
    except ValueError:
        return False
    return True


def _check_docker_image(v: Any) -> None:
    # "image:tag" | {cu129, cu130} | {nvidia, amd, tpu, intel} where a brand
    # value is a string or (for nvidia) a CUDA map.
    _scalar_or_keyed(v, _is_str)


def _check_tp(v: Any) -> None:
    # 4 | {h200: 2, b200: 1}
    if not _is_int(v):
        _map_of(v, _is_int)


def _check_pool_nodes(v: Any) -> None:
    # 2 | {default: 2, gb300: 1}: a PD pool's node count, per hardware id (the recipes site's builder)
    if not _is_pool_size(v):
        _map_of(v, _is_pool_size)


def _is_pool_size(v: Any) -> bool:
    return _is_int(v) and v >= 1


#: What a recipe's ``min_vllm_version`` may hold: a release (``0.10.1``, ``0.11.0rc1``,
#: ``0.12.0.post1``, ``0.13.0.dev3``) or ``nightly``. Nothing after it: the whole value is the
#: version, so a value is never half-read.
VERSION_RE = re.compile(r"\Av?[0-9]{1,4}(?:\.[0-9]{1,6}){0,3}(?:(?:a|b|rc)[0-9]{1,4})?"
                        r"(?:\.post[0-9]{1,4})?(?:\.dev[0-9]{1,6})?\Z|\Anightly\Z")


def _is_version(v: Any) -> bool:
    return (isinstance(v, str) or _is_int(v)) and VERSION_RE.match(str(v)) is not None


def _check_min_gpus(v: Any) -> None:
    # 8 | {single_node_tp: 8, h100: 32} | {pd_cluster: {h100: 16}}
    _scalar_or_keyed(v, _is_int)


def _check_install(v: Any) -> None:
    # "uv pip install x" | {nvidia: "...", amd: "..."}
    if not isinstance(v, str):
        _map_of(v, lambda x: isinstance(x, str) or x is None)


Number = Annotated[Any, _pred("a number", _is_number)]
Int = Annotated[Any, _pred("an integer", _is_int)]
# Command-line tokens: YAML authors quote them, but an unquoted number is
# still rendered by the recipes site, so numbers are accepted too.
ArgToken = Annotated[Any, _pred("a string (one command-line token)", lambda v: isinstance(v, (str, int, float)) and not isinstance(v, bool))]
ShellCommand = Annotated[Any, _pred("a shell command with balanced quotes", lambda v: isinstance(v, str) and _splits(v))]
EnvValue = Annotated[Any, _pred("a string, number or boolean (an environment value)", _is_scalar)]
# Pure metadata that authors sometimes leave unquoted ("0.23", 8, 2026-01-01).
Label = Annotated[Any, _pred("a string", lambda v: isinstance(v, (str, int, float)) and not isinstance(v, bool))]
DateLike = Annotated[Any, _pred("a date or a string", lambda v: isinstance(v, (str, datetime.date)))]
GenerationT = Annotated[Any, _pred(
    "a string or a list of strings",
    lambda v: isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v)),
)]
DockerImage = Annotated[Any, _shape(
    "an image string, a brand map ({nvidia: ..., amd: ...}), a CUDA map ({cu129: ..., cu130: ...}) "
    "or a brand map whose nvidia value is a CUDA map",
    _check_docker_image,
)]
TpSpec = Annotated[Any, _shape("an integer or a map of hardware id/generation to integer", _check_tp)]
PoolNodes = Annotated[Any, _shape("a node count (an integer >= 1), or a map of hardware id (or 'default') to a node count",
                                  _check_pool_nodes)]
Version = Annotated[Any, _pred("a vLLM version string such as \"0.10.1\", \"0.11.0rc1\" or \"nightly\" (quoted: YAML reads "
                               "0.10 as the number 0.1), and nothing after it", _is_version)]
MinGpus = Annotated[Any, _shape(
    "an integer, or a map of strategy/hardware id to an integer or to a map of hardware id to integer",
    _check_min_gpus,
)]
InstallEntry = Annotated[Any, _pred(
    "a mapping of strings ({command: ..., note: ...}), false or null",
    lambda v: v is None
    or isinstance(v, bool)
    or (isinstance(v, dict) and all(isinstance(x, str) or x is None for x in v.values())),
)]
InstallSpec = Annotated[Any, _shape("a string or a map of brand to string", _check_install)]

ArgList = list[ArgToken]
EnvMap = dict[str, EnvValue]
StrList = list[str]
_T = TypeVar("_T")
#: ``Opt[X]`` is ``Optional[X]`` (a generic alias, so that type checkers read it too).
Opt = Optional[_T]


class DocModel(BaseModel):
    """Strict types, unknown keys allowed, no coercion."""

    model_config = ConfigDict(strict=True, extra="allow", frozen=True, protected_namespaces=())
