"""JavaScript value rules of command synthesis (_jsvalue), fast paths included."""

from __future__ import annotations

import math

import pytest

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._jsvalue import (
    as_int_if_whole,
    first,
    get,
    is_number,
    js_max,
    js_min,
    truthy,
)


class Tagged(str):
    """A str subclass, as Ansible hands over tagged values."""


@pytest.mark.parametrize(("values", "expected"), [
    (("", 0, None), None),
    (("", None, 0), 0),
    ((0, "a"), "a"),
    ((math.nan, 5), 5),
    ((False, 0.0, "x"), "x"),
    (([], 1), []),
    (({}, 1), {}),
    ((True, 1), True),
    ((None,), None),
    (("only",), "only"),
])
def test_first_is_the_or_chain(values, expected):
    result = first(*values)
    assert result == expected and type(result) is type(expected)


SAMPLES = ("", "a", Tagged(""), Tagged("t"), 0, 1, 0.0, math.nan, -2.5, True, False, None, [], [0], {}, {"k": 0}, ())


@pytest.mark.parametrize("head", SAMPLES)
@pytest.mark.parametrize("tail", SAMPLES)
def test_first_agrees_with_truthy(head, tail):
    """``first`` takes the first value ``truthy`` accepts, else the last value (same object)."""
    for values in ((head, tail), (head, head, tail), (tail,)):
        expected = next((v for v in values[:-1] if truthy(v)), values[-1])
        assert first(*values) is expected


@pytest.mark.parametrize(("values", "expected"), [
    ((1, 3), 3.0), ((1, "4"), 4.0), ((True, 0), 1.0), ((1, None), 1.0), ((), -math.inf), ((2, -1.5), 2.0),
])
def test_js_max_coerces_like_math_max(values, expected):
    result = js_max(*values)
    assert result == expected and isinstance(result, float)


@pytest.mark.parametrize("values", [(1, math.nan), (1, "x"), ("x", 1), (1, {}), (math.nan,)])
def test_nan_wins_in_js_max_and_js_min(values):
    assert math.isnan(js_max(*values)) and math.isnan(js_min(*values))


def test_js_min_coerces_like_math_min():
    assert js_min(3, "2", 5.5) == 2.0 and js_min() == math.inf and js_min(False, 1) == 0.0


@pytest.mark.parametrize(("value", "expected"), [(3.0, 3), (-0.0, 0), (2.5, 2.5), (7, 7), (math.inf, math.inf)])
def test_as_int_if_whole(value, expected):
    result = as_int_if_whole(value)
    assert result == expected and type(result) is type(expected)


def test_as_int_if_whole_keeps_nan():
    assert math.isnan(as_int_if_whole(math.nan))


@pytest.mark.parametrize(("value", "expected"), [(1, True), (1.5, True), (True, False), ("1", False), (None, False)])
def test_is_number(value, expected):
    assert is_number(value) is expected


def test_get_tolerates_non_mappings_and_unhashable_keys():
    assert get({"a": 1}, "a") == 1 and get(None, "a") is None and get({"a": 1}, ["a"]) is None
