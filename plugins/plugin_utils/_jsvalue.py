"""Value semantics of the recipes site's command synthesis.

Private to the vllm_fleet.recipes collection: not a public API.

The recipes site synthesises commands in JavaScript. Recipes are loose YAML,
so parity depends on a handful of JavaScript value rules: which values count as
"set", how numbers print, and how values are spliced into strings. These helpers
state those rules once so the synthesis module can read like a description of
the recipe format rather than a list of special cases.
"""

from __future__ import annotations

import math
from typing import Any, TypeGuard


def is_number(value: Any) -> TypeGuard[float]:
    """True for numbers as JavaScript's ``typeof value === "number"`` sees them."""
    kind = type(value)
    if kind is int or kind is float:
        return True
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def truthy(value: Any) -> bool:
    """JavaScript truthiness: containers are always true, NaN and "" are false."""
    kind = type(value)
    if kind is str:
        return bool(value != "")
    if kind is dict or kind is list or value is True:
        return True
    if value is None or value is False:
        return False
    if kind is int:
        return bool(value != 0)
    if kind is float:
        return not math.isnan(value) and value != 0.0
    return True


def first(*values: Any) -> Any:
    """The ``a || b || c`` chain: the first truthy value, else the last one."""
    for value in values:
        if value is None or value is False:
            continue
        kind = type(value)
        if kind is str:
            if value:
                return value
        elif kind is dict or kind is list or truthy(value):
            return value
    return values[-1]


def present(*values: Any) -> Any:
    """The ``a ?? b ?? c`` chain: the first value that is not None."""
    for value in values:
        if value is not None:
            return value
    return None


def get(mapping: Any, key: Any) -> Any:
    """Optional member access (``mapping?.[key]``) that tolerates non-mappings."""
    if isinstance(mapping, dict):
        try:
            return mapping.get(key)
        except TypeError:  # an unhashable key names no member
            return None
    return None


def items(value: Any) -> list[Any]:
    """What ``array.push(...value)`` appends: list items, or a string's characters."""
    if value is None:
        return []
    if isinstance(value, (list, tuple, str)):
        return list(value)
    raise TypeError(f"{type(value).__name__} value is not iterable: {value!r}")


def to_number(value: Any) -> float:
    """JavaScript ``Number(value)`` for the scalar types YAML and JSON produce."""
    kind = type(value)
    if kind is int or kind is float:
        return float(value)
    if value is None:
        return 0.0
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if is_number(value):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if text == "":
            return 0.0
        try:
            return float(int(text, 0)) if text.lower().startswith(("0x", "0o", "0b")) else float(text)
        except ValueError:
            return math.nan
    return math.nan


def js_min(*values: Any) -> float:
    """``Math.min``: numeric coercion, and NaN wins."""
    best = math.inf
    for value in values:
        kind = type(value)
        number = float(value) if kind is int or kind is float else to_number(value)
        if math.isnan(number):
            return math.nan
        if number < best:
            best = number
    return best


def js_max(*values: Any) -> float:
    """``Math.max``: numeric coercion, and NaN wins."""
    best = -math.inf
    for value in values:
        kind = type(value)
        number = float(value) if kind is int or kind is float else to_number(value)
        if math.isnan(number):
            return math.nan
        if number > best:
            best = number
    return best


def number_text(value: float | int) -> str:
    """``String(number)`` for the range synthesis produces (counts, ranks, sizes)."""
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == int(value) and abs(value) < 1e21:
        return str(int(value))
    return repr(value)


def text(value: Any) -> str:
    """How a value reads inside a JavaScript template literal: ``${value}``."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if is_number(value):
        return number_text(value)
    if isinstance(value, (list, tuple)):
        return ",".join("" if v is None else text(v) for v in value)
    return "[object Object]"


def as_int_if_whole(value: float) -> float | int:
    """Keep whole numbers integral so arithmetic on them prints like JavaScript."""
    if isinstance(value, float) and value.is_integer():  # False for NaN and infinities
        return int(value)
    return value


def to_plain(value: Any) -> Any:
    """Deep copy into built-in types (Ansible hands over tagged str/int/dict subclasses)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, dict):
        return {to_plain(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    for kind in (str, int, float):
        if isinstance(value, kind):
            return kind(value)
    return value
