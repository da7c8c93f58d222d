"""Pinned resolutions (``resolution_file``) are untrusted: a hostile value anywhere in a pinned record is
refused at its key in that file, never blamed on the recipe, ``advanced_args`` or ``extra_env``.

The property: take a plan.json the engine rendered (single node, PD with a router, Mooncake with a
router, master and store), pin it, put one hostile value (or a wrong type) at any place of a record
placement reads (an argv word, an env name or value, a docker argv word, a service command word, a
port, the image, the deploy type), and render. Either the plan renders, or the refusal names
``resolution_file``, its path and the record (``resolutions[i].resolution``).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _placement as P
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _render as R
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._errors import RecipeError
from test_hostile_input import VALUES

SEED = {"recipe": "zai-org/GLM-5.3-Flash", "hardware": "h200"}
#: name -> (selection, hosts, child groups)
SHAPES: dict[str, tuple[dict[str, Any], list[str], dict[str, list[str]]]] = {
    "single": ({"strategy": "single_node_tp"}, ["a"], {}),
    "pd": ({"strategy": "pd_cluster", "pd": {"prefill": {"parallelism": "dep"}}}, ["p0", "p1", "d0", "r"],
           {"dep_prefill": ["p0", "p1"], "dep_decode": ["d0"], "dep_router": ["r"]}),
    "mooncake": ({"strategy": "single_node_tp", "kv_offload": "kv_store_centralized_mooncake", "kv_instances": 2},
                 ["a", "b", "r", "s"], {"dep_router": ["r"], "dep_mooncake_store": ["s"]}),
}
ENGINE = P.engine_factory()


def inventory(deployment: dict[str, Any], hosts: list[str],
              children: dict[str, list[str]]) -> tuple[dict[str, Any], dict[str, list[str]]]:
    hostvars = {host: {"ansible_host": f"10.43.0.{i + 1}", "vllm_fabric_interface": "ens5",
                       "vllm_deployment": deployment} for i, host in enumerate(hosts)}
    return hostvars, {"all": list(hosts), "ungrouped": [], "dep": list(hosts), **children}


def render(shape: str, **extra: Any) -> dict[str, str]:
    selection, hosts, children = SHAPES[shape]
    return R.render(P.build_plan(*inventory(dict(SEED, **selection, **extra), hosts, children), ENGINE))


@pytest.fixture(scope="module")
def pinned() -> dict[str, dict[str, Any]]:
    """The plan.json deployment entry (with its ``resolutions``) of each shape, as the engine renders it."""
    return {shape: json.loads(render(shape)["plan.json"])["deployments"]["dep"] for shape in SHAPES}


def places(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every scalar of a record that placement reads, and every env name (as ``(..., 'env', NAME, None)``)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("docker_meta", "config"):  # JSON configs are written as JSON: any value goes
                continue
            if path and path[-1] == "env":
                yield path + (key, None)
            yield from places(item, path + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from places(item, path + (index,))
    elif path:
        yield path


def put(record: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    """Set the scalar at ``path`` to ``value``; ``(..., NAME, None)`` renames env entry NAME to ``value``."""
    if path[-1] is None:
        env = record
        for part in path[:-2]:
            env = env[part]
        env[str(value)] = env.pop(path[-2])
        return
    target = record
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value


HOSTILE = VALUES | st.sampled_from(["-p", "--privileged", "$API_KEY", "$NOPE", "0", "70000", "Foo/Bar"]) \
    | st.integers(min_value=-2, max_value=70000) | st.none() | st.booleans() | st.just([]) | st.just({})


@settings(max_examples=200, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_hostile_value_in_a_pinned_record_is_refused_at_its_key_in_the_resolution_file(pinned, tmp_path, data):
    shape = data.draw(st.sampled_from(sorted(SHAPES)), label="shape")
    entry = copy.deepcopy(pinned[shape])
    index = data.draw(st.integers(0, len(entry["resolutions"]) - 1), label="record")
    record = entry["resolutions"][index]["resolution"]
    path = data.draw(st.sampled_from(sorted(places(record), key=repr)), label="place")
    put(record, path, data.draw(HOSTILE, label="value"))
    pins = tmp_path / f"pins-{shape}.json"
    pins.write_text(json.dumps(entry))
    profile = data.draw(st.sampled_from(["hardened", "upstream"]), label="container_profile")
    try:
        render(shape, resolution_file=str(pins), container_profile=profile)
    except (RecipeError, ValueError) as exc:
        message = str(exc)
        assert f"resolution_file ({pins}) resolutions[" in message, message
        assert "recipe argv" not in message and "extra_env / recipe env" not in message, message


def test_the_pinned_plans_render_unchanged(pinned, tmp_path):
    for shape, entry in pinned.items():
        pins = Path(tmp_path / f"{shape}.json")
        pins.write_text(json.dumps(entry))
        assert json.loads(render(shape, resolution_file=str(pins))["plan.json"])["deployments"]["dep"]["processes"] \
            == entry["processes"]
