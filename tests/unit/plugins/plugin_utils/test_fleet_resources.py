"""The fleet stage (``_fleet_resources.finish_fleet``): placed processes in, final processes out,
the placed ones left as their placers built them."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _fleet_resources as F
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _placement as P
from fleets import SEED, seed_fleet

#: Prefill and decode on one host with two local DP ranks each: the decode side channel moves,
#: both engines get their own VLLM_PORT base, accelerators and a compile cache.
SHARED_HOST = dict(SEED, strategy="pd_cluster", advanced_args=["--data-parallel-size", "2"],
                   compile_cache_dir="/var/cache/vllm-fleet/compile")


def placed_and_final(monkeypatch) -> tuple[P.FleetPlan, P.FleetPlan, P.FleetPlan]:
    """(the placed fleet after the fleet stage ran, a copy taken before it ran, the final fleet)."""
    seen: dict[str, P.FleetPlan] = {}

    def spy(placed, profiles):
        seen["placed"], seen["before"] = placed, copy.deepcopy(placed)
        return F.finish_fleet(placed, profiles)

    monkeypatch.setattr(P, "finish_fleet", spy)
    final = seed_fleet(SHARED_HOST, ["g", "r"], host_vars={"r": {"vllm_pd_role": "router"}})
    return seen["placed"], seen["before"], final


def engines(fleet: P.FleetPlan) -> dict[str, P.Process]:
    return {p.unit: p for d in fleet.deployments for p in d.processes if p.kind == "engine"}


def test_the_fleet_stage_derives_final_engines_and_leaves_the_placed_ones_unchanged(monkeypatch):
    placed, before, final = placed_and_final(monkeypatch)
    assert placed == before
    placed_engines, final_engines = engines(placed), engines(final)
    dec = "vllm-fleet-decode-0"
    # what the stage decided is on the final engine only
    assert placed_engines[dec].env["VLLM_NIXL_SIDE_CHANNEL_PORT"] == "5558"
    assert final_engines[dec].env["VLLM_NIXL_SIDE_CHANNEL_PORT"] == "5559"
    for unit, proc in final_engines.items():
        source = placed_engines[unit]
        assert source.gpus == [] and source.exec_argv == [] and source.compile_cache == ""
        assert len(proc.gpus) == source.gpu_need > 0 and proc.exec_argv and proc.compile_cache.endswith(unit)
        assert "VLLM_PORT" in proc.env and "VLLM_PORT" not in source.env
        # placement's own facts pass through unchanged
        assert (proc.argv, proc.engine_args, proc.secret_env) == (source.argv, source.engine_args, source.secret_env)
    assert sorted(final_engines) == sorted(placed_engines)
    held = sorted(gpu for proc in final_engines.values() for gpu in proc.gpus)
    assert held == list(range(len(held))) and final.gpu_assignment == {"g": {"fleet": held}}


def test_side_channels_and_internal_ports_are_decided_on_the_placed_fleet(monkeypatch):
    placed, _before, _final = placed_and_final(monkeypatch)
    assert F.separate_side_channels(placed) == {("fleet", "vllm-fleet-decode-0"): 5559}
    assert F.spread_internal_ports(placed) == {("fleet", "vllm-fleet-decode-0"): "25000",
                                               ("fleet", "vllm-fleet-prefill-0"): "25100"}


def test_a_process_cannot_be_changed_after_it_is_built(monkeypatch):
    _placed, _before, final = placed_and_final(monkeypatch)
    proc = next(iter(engines(final).values()))
    with pytest.raises(dataclasses.FrozenInstanceError):
        proc.gpus = [7]  # type: ignore[misc]
