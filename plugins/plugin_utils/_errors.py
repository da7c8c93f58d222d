# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Error types shared by recipe loading, validation and selection checks.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

Every error names *where* the problem is (``key``: a dotted path such as
``variants.fp8.vram_minimum_gb``, or a file path / URL for load problems),
*what* was found (``value``) and *what would be accepted* (``expected``)::

    models/zai-org/X.yaml: variants.fp8.vram_minimum_gb: got 'abc' (str); expected a number
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["RecipeError", "RecipeLoadError", "SchemaError", "SelectionError", "describe_value", "key_path"]

_MISSING: Any = object()
_MAX_VALUE_CHARS = 120


def key_path(parts: Sequence[Any], last_is_key: bool = False) -> str:
    """The dotted path messages name: ``('variants', 'fp8', 'vram_minimum_gb')`` ->
    ``variants.fp8.vram_minimum_gb``, list positions as ``[3]`` (``last_is_key``: the last part is
    a mapping key even when it is a number)."""
    out = ""
    for index, part in enumerate(parts):
        as_key = last_is_key and index == len(parts) - 1
        if isinstance(part, int) and not isinstance(part, bool) and not as_key:
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def describe_value(value: Any) -> str:
    """Short ``repr`` of ``value`` plus its type name, e.g. ``'abc' (str)``."""
    text = repr(value)
    if len(text) > _MAX_VALUE_CHARS:
        text = text[: _MAX_VALUE_CHARS - 3] + "..."
    builtin = next((c for c in type(value).__mro__ if c.__module__ == "builtins"), type(value))
    return f"{text} ({builtin.__name__})"


class RecipeError(ValueError):
    """Base class: a recipe, catalog or selection problem at a precise place.

    Attributes:
        key: dotted path of the offending entry (or a file path / URL).
        value: the offending value (``None`` when there is none to show; see
            ``has_value``).
        expected: what would have been accepted, e.g. ``"a number"``.
        reason: free-text explanation when value/expected do not say it all.
        source: the document the key belongs to (file path, URL, recipe id).
    """

    def __init__(
        self,
        key: str,
        *,
        value: Any = _MISSING,
        expected: str = "",
        reason: str = "",
        source: str = "",
    ) -> None:
        self.key = key
        self.has_value = value is not _MISSING
        self.value = value if self.has_value else None
        self.expected = expected
        self.reason = reason
        self.source = source
        super().__init__(self._format())

    def _format(self) -> str:
        details = []
        if self.has_value:
            details.append(f"got {describe_value(self.value)}")
        if self.expected:
            details.append(f"expected {self.expected}")
        if self.reason:
            details.append(self.reason)
        where = self.key or "<document>"
        if self.source and self.source != self.key:
            where = f"{self.source}: {where}"
        return f"{where}: {'; '.join(details)}" if details else where

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only constructor: teach pickle (Ansible worker processes)
        # how to rebuild the error.
        kwargs: dict[str, Any] = {
            "expected": self.expected,
            "reason": self.reason,
            "source": self.source,
        }
        if self.has_value:
            kwargs["value"] = self.value
        return (_rebuild, (type(self), self.key, kwargs))


def _rebuild(cls: type[RecipeError], key: str, kwargs: dict[str, Any]) -> RecipeError:
    return cls(key, **kwargs)


class RecipeLoadError(RecipeError):
    """A file, directory or URL could not be read or parsed."""


class SchemaError(RecipeError):
    """A document has the wrong shape or type somewhere."""


class SelectionError(RecipeError):
    """A selection (variant, strategy, hardware, feature...) is not valid."""
