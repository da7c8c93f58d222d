"""Fleet copy schedules (_fanout): doubling fan-out against today's star, and what the model predicts."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._fanout import (
    CopySchedule,
    attempt_items,
    fanout_schedule,
    host_transfers,
    predicted_seconds,
    schedule,
    star_schedule,
    weights_copy_schedules,
)

HOST = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=8)


def assert_schedule_is_sound(plan: CopySchedule, holders: list[str], receivers: list[str], per_round: int) -> None:
    """Every receiver gets one copy, from a host that held a verified copy when its round began."""
    assert sorted(t.receiver for t in plan.transfers) == sorted(receivers)
    holding_before = {host: 0 for host in holders}
    for transfer in plan.transfers:
        holding_before.setdefault(transfer.receiver, transfer.round)
    for round_no in range(1, plan.rounds + 1):
        this_round = [t for t in plan.transfers if t.round == round_no]
        assert this_round, f"round {round_no} is empty"
        for transfer in this_round:
            assert holding_before[transfer.sender] < round_no, transfer
            assert transfer.sender not in transfer.fallbacks
            assert all(holding_before[host] < round_no for host in transfer.fallbacks), transfer
        senders = [t.sender for t in this_round]
        assert max(senders.count(host) for host in senders) <= per_round


@given(st.lists(HOST, min_size=2, max_size=70, unique=True), st.integers(min_value=1, max_value=3))
def test_fanout_from_one_origin_takes_log_rounds_and_no_host_sends_more(hosts, per_round):
    origin, receivers = hosts[0], hosts[1:]
    plan = fanout_schedule([origin], receivers, sends_per_round=per_round)
    assert_schedule_is_sound(plan, [origin], receivers, per_round)
    rounds = math.ceil(math.log(len(hosts)) / math.log(per_round + 1) - 1e-9)
    assert plan.rounds == rounds
    assert max(plan.sends().values()) <= rounds * per_round
    if per_round == 1:
        assert plan.sends()[origin] == rounds


@given(st.lists(HOST, min_size=2, max_size=40, unique=True), st.integers(min_value=1, max_value=39))
def test_hosts_that_already_hold_a_copy_serve_from_round_one(hosts, split):
    holders, receivers = hosts[:min(split, len(hosts) - 1)], hosts[min(split, len(hosts) - 1):]
    plan = fanout_schedule(holders, receivers)
    assert_schedule_is_sound(plan, holders, receivers, 1)
    assert len([t for t in plan.transfers if t.round == 1]) == min(len(holders), len(receivers))


def test_eight_hosts_three_rounds_with_named_fallbacks():
    hosts = [f"h{i}" for i in range(8)]
    plan = fanout_schedule(hosts[:1], hosts[1:])
    assert [(t.round, t.sender, t.receiver) for t in plan.transfers] == [
        (1, "h0", "h1"),
        (2, "h0", "h2"), (2, "h1", "h3"),
        (3, "h0", "h4"), (3, "h1", "h5"), (3, "h2", "h6"), (3, "h3", "h7"),
    ]
    # h2 and h3 have sent nothing yet, so they are tried before h1, which sent in round 2
    assert plan.for_receiver("h4").fallbacks == ("h2", "h3", "h1")
    assert plan.sends() == {"h0": 3, "h1": 2, "h2": 1, "h3": 1, "h4": 0, "h5": 0, "h6": 0, "h7": 0}
    assert plan.for_receiver("h0") is None
    assert plan.as_dict()["rounds"] == 3


def test_star_sends_everything_from_the_origin_in_batches():
    plan = star_schedule("h0", [f"h{i}" for i in range(1, 8)], parallel=3)
    assert {t.sender for t in plan.transfers} == {"h0"}
    assert [t.round for t in plan.transfers] == [1, 1, 1, 2, 2, 2, 3]
    assert plan.sends()["h0"] == 7
    assert schedule("star", ["h0", "x"], ["h1"]).transfers[0].sender == "h0"


def test_nothing_to_copy_is_an_empty_schedule():
    assert fanout_schedule(["h0"], []).rounds == 0
    assert schedule("star", [], []).transfers == ()


@pytest.mark.parametrize(("call", "message"), [
    (lambda: fanout_schedule([], ["h1"]), r"no host holds a verified copy to send to h1"),
    (lambda: fanout_schedule(["h0"], ["h1", "h0"]), r"host 'h0' is named twice"),
    (lambda: fanout_schedule(["h0"], [""]), r"receiver '' is not a host name"),
    (lambda: fanout_schedule(["h0"], ["h1"], sends_per_round=0), r"sends_per_round is 0; expected a whole number"),
    (lambda: star_schedule("h0", ["h1"], parallel=True), r"parallel is True"),
    (lambda: schedule("tree", ["h0"], ["h1"]), r"method is 'tree'; expected one of fanout, star"),
    (lambda: predicted_seconds(0, 1.0, method="star"), r"hosts is 0"),
])
def test_bad_input_is_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_the_model_for_the_issue_figures():
    # A ~700 GB checkpoint at 100 Gb/s: about 56 s a copy.
    assert predicted_seconds(64, 56.0, method="star") == 63 * 56.0
    assert predicted_seconds(64, 56.0, method="fanout") == 6 * 56.0
    assert predicted_seconds(512, 56.0, method="fanout") == 9 * 56.0
    assert predicted_seconds(8, 10.0, method="fanout", sends_per_round=2) == 2 * 2 * 10.0
    assert predicted_seconds(1, 56.0, method="fanout") == 0.0


def test_weights_views_give_one_schedule_per_copied_deployment():
    def entry(name, origin, mode="download", present=False):
        return {"name": name, "origin": origin, "mode": mode, "present": present}
    views = {
        "a": [entry("glm", "a", present=True), entry("nfs", "a", mode="shared_fs")],
        "b": [entry("glm", "a")],
        "c": [entry("glm", "a", present=True)],  # copied in an earlier run: serves from round 1
        "d": [entry("glm", "a"), entry("tiny", "d", mode="import")],
        "e": [entry("glm", "a"), entry("tiny", "d", mode="import")],
    }
    plans = weights_copy_schedules(views)
    assert sorted(plans) == ["glm", "tiny"]
    assert plans["glm"]["holders"] == ["a", "c"]
    assert [(t["round"], t["sender"], t["receiver"]) for t in plans["glm"]["transfers"]] == [
        (1, "a", "b"), (1, "c", "d"), (2, "a", "e")]
    assert plans["tiny"]["transfers"] == [{"round": 1, "sender": "d", "receiver": "e", "fallbacks": []}]
    star = weights_copy_schedules(views, method="star", parallel=1)["glm"]
    assert [(t["round"], t["sender"]) for t in star["transfers"]] == [(1, "a"), (2, "a"), (3, "a")]


def test_a_host_gets_its_transfers_with_sources_in_order():
    views = {h: [{"name": "glm", "origin": "a", "mode": "download", "present": h == "a", "repo": "r"}] for h in "abcd"}
    plans = weights_copy_schedules(views)
    mine = host_transfers(plans, views["d"], "d")
    assert mine == [{"entry": views["d"][0], "transfer": plans["glm"]["transfers"][2], "sources": ["b", "a"]}]
    assert host_transfers(plans, views["a"], "a") == []


def test_an_attempt_copies_from_the_source_of_its_number_when_ready():
    entry = {"name": "glm", "origin": "a"}
    transfers = [{"entry": entry, "sources": ["b", "a"]}, {"entry": {"name": "tiny", "origin": "d"}, "sources": ["d"]}]
    ready = {("b", "glm"): False, ("a", "glm"): True, ("d", "tiny"): True}

    def pick(source: str, name: str) -> bool:
        return ready[(source, name)]

    assert attempt_items(transfers, 0, [], pick) == [{"entry": {"name": "tiny", "origin": "d"}, "source": "d"}]
    assert attempt_items(transfers, 1, ["tiny"], pick) == [{"entry": entry, "source": "a"}]
    assert attempt_items(transfers, 2, [], pick) == []
    # a plain weights entry is a repair: copied from its origin
    assert attempt_items([entry], 0, [], pick) == [{"entry": entry, "source": "a"}]
    assert fanout_schedule(["a"], ["b", "c", "d"]).as_dict()["max_sources"] == 2
