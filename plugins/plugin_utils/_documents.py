# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Read recipe and catalog documents: capped file reads, strict YAML and JSON parsing.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

Problems raise ``RecipeLoadError`` (cannot read / parse: names the file and
why) or ``SchemaError`` (not a mapping where one is required).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, Union

import yaml

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._errors import RecipeLoadError, SchemaError

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "PathLike",
    "parse_json",
    "parse_yaml",
    "read_capped",
    "read_document",
    "require_mapping",
]

PathLike = Union[str, "os.PathLike[str]"]


# --------------------------------------------------------------------------
# YAML / JSON parsing
# --------------------------------------------------------------------------
# libyaml's parser when PyYAML has it (15x faster, same SafeConstructor and
# resolver, identical results on every upstream file; tests check it).
_BaseSafeLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _SafeLoader(_BaseSafeLoader):  # type: ignore[misc]  # its base is picked at import time (Any)
    """PyYAML's safe loader, refusing duplicate keys as js-yaml does."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
            except TypeError:
                continue  # unhashable: the base class reports it
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"found duplicate key {key!r}", key_node.start_mark,
                )
            seen.add(key)
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping


def parse_yaml(text: str, origin: str) -> Any:
    try:
        return yaml.load(text, Loader=_SafeLoader)  # noqa: S506 - safe loader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise RecipeLoadError(origin, reason=f"invalid YAML{where}: {problem}") from None


def parse_json(text: str, origin: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecipeLoadError(
            origin, reason=f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None


#: Largest recipe, catalog or resolution document read (the biggest upstream recipe is ~40 KB).
MAX_DOCUMENT_BYTES = 8 * 1024 * 1024


def read_capped(path: PathLike, what: str = "a file") -> bytes:
    """The bytes of a regular file of at most :data:`MAX_DOCUMENT_BYTES`.

    Devices (``/dev/zero``), FIFOs and sockets are refused before anything is read, and
    the read stops one byte past the cap, so no input can exhaust the controller's memory.
    """
    fd = os.open(os.fspath(path), os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(os.fspath(path))
        if not stat.S_ISREG(info.st_mode):
            raise RecipeLoadError(os.fspath(path), reason=f"not a regular file; expected {what}")
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(MAX_DOCUMENT_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_DOCUMENT_BYTES:
        raise RecipeLoadError(os.fspath(path),
                              reason=f"larger than {MAX_DOCUMENT_BYTES} bytes; expected {what}")
    return data


def _read_text(path: Path) -> str:
    try:
        return read_capped(path, "a recipe or catalog document").decode("utf-8")
    except FileNotFoundError:
        raise RecipeLoadError(str(path), reason="no such file") from None
    except IsADirectoryError:
        raise RecipeLoadError(str(path), reason="is a directory, expected a file") from None
    except UnicodeDecodeError:
        raise RecipeLoadError(str(path), reason="cannot read: not UTF-8 text") from None
    except OSError as exc:
        raise RecipeLoadError(str(path), reason=f"cannot read: {exc.strerror or type(exc).__name__}") from None


def read_document(path: PathLike) -> Any:
    """Parse a ``.json`` file as JSON and anything else as YAML."""
    p = Path(path)
    text = _read_text(p)
    if p.suffix.lower() == ".json":
        return parse_json(text, str(p))
    return parse_yaml(text, str(p))


def require_mapping(doc: Any, origin: str, what: str) -> dict[str, Any]:
    if not isinstance(doc, dict):
        # the type only: the file may be anything the controller can read, never echo it
        raise SchemaError("", expected=f"a mapping at the top level ({what}), got a {type(doc).__name__}",
                          source=origin)
    return doc
