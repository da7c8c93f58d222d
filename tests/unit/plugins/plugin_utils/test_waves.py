"""Start-order waves (_waves): the order a restart starts processes in, one wave after another."""

from __future__ import annotations

import pytest

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._waves import start_waves


def proc(unit: str, order: int, host: str = "a") -> dict:
    return {"unit": unit, "host": host, "start_order": order}


def test_waves_ascend_by_start_order_and_keep_the_given_order_inside_a_wave():
    procs = [proc("router", 30), proc("head", 20, "a"), proc("worker-2", 10, "c"), proc("worker-1", 10, "b")]
    waves = start_waves(procs)
    assert [w["order"] for w in waves] == [10, 20, 30]
    assert [p["unit"] for p in waves[0]["processes"]] == ["worker-2", "worker-1"]
    assert waves[0]["processes"][0] is procs[2]


def test_no_processes_no_waves():
    assert start_waves([]) == []


@pytest.mark.parametrize("order", [None, "10", 1.5, True])
def test_a_process_without_a_whole_start_order_is_named(order):
    with pytest.raises(ValueError, match=r"process 'vllm-x': start_order is .*expected a whole number"):
        start_waves([proc("ok", 1), {"unit": "vllm-x", "start_order": order}])
