"""Acceptance after a deploy (plugins/plugin_utils/_acceptance.py): what is asked of each deployment
shape, and how the answers are judged. The molecule scenarios run it against the real engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _acceptance as A

GOLDEN = Path(__file__).resolve().parent / "golden"


def golden(case: str) -> dict:
    return json.loads((GOLDEN / case / "plan.json").read_text())


def ok(probe: dict, tokens: int = 4, seconds: float = 0.5, model: str | None = None) -> dict:
    return {"item": probe, "status": 200, "elapsed": seconds,
            "json": {"model": model or probe["model"], "usage": {"completion_tokens": tokens}}}


def test_single_engine_is_its_own_front_door_and_is_warmed_twice():
    checks = A.acceptance_checks(golden("single_node_tp"))
    (dep,) = checks["deployments"]
    assert dep["front_door"]["url"] == "http://10.3.0.1:8000/v1/chat/completions"
    assert dep["client"] == "a" and dep["model"] == "zai-org/GLM-5.3-Flash"
    assert [(w["unit"], w["n"]) for w in checks["warm"]] == [("vllm-fleet.service", 1), ("vllm-fleet.service", 2)]
    assert [f["n"] for f in checks["front"]] == [1]
    assert checks["metrics"] == checks["ranks"] == []
    assert dep["prompt"] == A.PROMPT


def test_multi_node_group_lists_head_and_follower():
    checks = A.acceptance_checks(golden("multi_node_tp_pp"))
    (dep,) = checks["deployments"]
    (group,) = dep["groups"]
    assert group["head"]["host"] == "a" and group["head"]["rank"] == 0
    assert [(f["host"], f["rank"]) for f in group["followers"]] == [("b", 1)]
    assert [r["unit"] for r in checks["ranks"]] == ["vllm-fleet-rank0.service", "vllm-fleet-rank1.service"]
    # only the head has an API server: one engine warmed
    assert {w["unit"] for w in checks["warm"]} == {"vllm-fleet-rank0.service"}


def test_pd_pool_probes_through_the_router_with_a_long_prompt_and_reads_decode_metrics():
    checks = A.acceptance_checks(golden("pd_cluster_tp"))
    (dep,) = checks["deployments"]
    assert dep["client"] == "r0" and dep["front_door"]["url"] == "http://10.3.0.3:30000/v1/chat/completions"
    (pair,) = dep["pd_pairs"]
    assert pair["decode"] == "vllm-fleet-decode-0.service" and pair["prefill_hosts"] == ["p0"]
    assert pair["connector"] == "NixlConnector"
    assert checks["metrics"] == [{"deployment": "fleet", "client": "r0", "decode": pair["decode"],
                                  "metrics_url": "http://10.3.0.2:8002/metrics"}]
    assert len(dep["prompt"].split()) > 60 and dep["prompt"].endswith(A.PROMPT)
    assert {w["unit"] for w in checks["warm"]} == {"vllm-fleet-prefill-0.service", "vllm-fleet-decode-0.service"}


def test_pd_prompt_shrinks_for_a_small_max_model_len():
    assert len(A.pd_prompt(128).split()) < len(A.pd_prompt(None).split())
    assert len(A.pd_prompt(32).split()) >= 8


def test_a_named_client_sends_every_request():
    checks = A.acceptance_checks(golden("pd_cluster_tp"), client="bastion")
    assert {i["client"] for lst in ("warm", "front", "metrics") for i in checks[lst]} == {"bastion"}


def passing_observations(checks: dict) -> dict:
    return {"warm": {"results": [ok(p) for p in checks["warm"]]},
            "front": {"results": [ok(p) for p in checks["front"]]}}


def test_report_passes_and_times_the_first_request():
    checks = A.acceptance_checks(golden("single_node_tp"))
    warm = [ok(checks["warm"][0], seconds=42.0), ok(checks["warm"][1], seconds=0.3)]
    report = A.acceptance_report(checks, warm=warm, front=[ok(checks["front"][0])])
    assert report["failed"] == []
    (warm_row,) = [r for r in report["rows"] if r["check"] == "warm-up"]
    assert (warm_row["first_s"], warm_row["warm_s"]) == (42.0, 0.3)
    assert "first request 42.0 s, then 0.3 s" in warm_row["detail"]
    assert report["table"][0].split() == ["deployment", "check", "target", "result", "detail"]


@pytest.mark.parametrize("answer, reason", [
    ({"status": -1, "msg": "Connection refused"}, "HTTP -1: Connection refused"),
    ({"status": 200, "json": {"model": "zai-org/GLM-5.3-Flash", "usage": {"completion_tokens": 0}}},
     "no completion token"),
    ({"status": 200, "json": {"model": "other/model", "usage": {"completion_tokens": 3}}}, "served model 'other/model'"),
])
def test_a_bad_front_door_answer_fails_with_its_reason(answer, reason):
    checks = A.acceptance_checks(golden("single_node_tp"))
    observed = passing_observations(checks)
    observed["front"] = [dict(answer, item=checks["front"][0])]
    report = A.acceptance_report(checks, **observed)
    (failed,) = report["failed"]
    assert failed["check"] == "front door" and reason in failed["detail"]


def test_a_front_door_never_asked_fails():
    checks = A.acceptance_checks(golden("single_node_tp"))
    report = A.acceptance_report(checks, warm=passing_observations(checks)["warm"])
    assert [r["check"] for r in report["failed"]] == ["front door"]


HEAD_LISTEN = ("LISTEN 0 128 10.3.0.1:8000 0.0.0.0:* users:((\"vllm\",pid=101,fd=5))\n"
               "LISTEN 0 128 10.3.0.1:29501 0.0.0.0:* users:((\"vllm\",pid=101,fd=7))\n"
               "LISTEN 0 128 0.0.0.0:22 0.0.0.0:* users:((\"sshd\",pid=9,fd=3))\n")


def rank_output(top: str, listen: str = "", tcp: str = "") -> str:
    return f"{top}\n---\n{listen}\n---\n{tcp}"


def group_observations(checks: dict, follower_tcp: str, follower_top: str = "PID\n201\n202") -> dict:
    head, follower = checks["ranks"]
    return {"ranks": [
        {"item": head, "stdout": rank_output("PID\n101\n102", HEAD_LISTEN)},
        {"item": follower, "stdout": rank_output(follower_top, "", follower_tcp)},
    ]}


def test_follower_connected_to_the_current_head_passes():
    checks = A.acceptance_checks(golden("multi_node_tp_pp"))
    tcp = "ESTAB 0 0 10.3.0.2:40000 10.3.0.1:29501 users:((\"python3\",pid=202,fd=9))\n"
    report = A.acceptance_report(checks, **passing_observations(checks), **group_observations(checks, tcp))
    assert report["failed"] == []
    assert [r["check"] for r in report["rows"]][-2:] == ["rank alive", "rank in group"]


@pytest.mark.parametrize("tcp, top, words", [
    # connected to the head host, but to sshd: not the engine's group
    ("ESTAB 0 0 10.3.0.2:40000 10.3.0.1:22 users:((\"python3\",pid=202,fd=9))\n", "PID\n201\n202", "stale or lost"),
    # the connection belongs to a process outside the follower's engine container
    ("ESTAB 0 0 10.3.0.2:40000 10.3.0.1:29501 users:((\"python3\",pid=999,fd=9))\n", "PID\n201\n202", "stale or lost"),
    # a connection that is closing is no proof
    ("CLOSE-WAIT 0 0 10.3.0.2:40000 10.3.0.1:29501 users:((\"python3\",pid=202,fd=9))\n", "PID\n201\n202",
     "stale or lost"),
    # the follower's container is gone
    ("", "Error response from daemon: No such container", "is not running"),
])
def test_a_stale_or_lost_follower_fails(tcp, top, words):
    checks = A.acceptance_checks(golden("multi_node_tp_pp"))
    report = A.acceptance_report(checks, **passing_observations(checks), **group_observations(checks, tcp, top))
    (failed,) = report["failed"]
    assert failed["target"].startswith("vllm-fleet-rank1.service on b") and words in failed["detail"]


NIXL = '# TYPE vllm:nixl_bytes_transferred histogram\nvllm:nixl_bytes_transferred_sum{engine="0"} %s\n'


def pd_observations(checks: dict, before: str, after: str) -> dict:
    (metric,) = checks["metrics"]
    return {**passing_observations(checks),
            "metrics_before": [{"item": metric, "content": before}],
            "metrics_after": [{"item": metric, "content": after}]}


def test_pd_pair_that_moved_kv_passes_and_reports_bytes():
    checks = A.acceptance_checks(golden("pd_cluster_tp"))
    report = A.acceptance_report(checks, **pd_observations(checks, NIXL % "1024.0", NIXL % "99328.0"))
    assert report["failed"] == []
    (kv,) = [r for r in report["rows"] if r["check"] == "KV transfer"]
    assert kv["bytes"] == 98304 and "NixlConnector" in kv["detail"]


@pytest.mark.parametrize("before, after", [(NIXL % "512.0", NIXL % "512.0"), ("", ""), ("", "vllm:other 1\n")])
def test_pd_pair_that_moved_no_kv_fails_naming_the_pair(before, after):
    checks = A.acceptance_checks(golden("pd_cluster_tp"))
    report = A.acceptance_report(checks, **pd_observations(checks, before, after))
    (failed,) = report["failed"]
    assert failed["check"] == "KV transfer"
    assert failed["target"] == "vllm-fleet-prefill-0.service -> vllm-fleet-decode-0.service"
    assert "decode vllm-fleet-decode-0.service pulled no KV cache from prefill (p0)" in failed["detail"]


def test_kv_moved_compares_the_sums():
    assert A.nixl_grew(NIXL % "1", NIXL % "2")
    assert not A.nixl_grew(NIXL % "2", NIXL % "2")
    assert not A.nixl_grew("", "")
    assert A.nixl_grew("", NIXL % "3")


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_report_parsers_never_crash_on_any_text(text):
    A.metric_sum(text, A.NIXL_BYTES)
    pids = A.container_pids(text)
    A.listening_ports(text, pids)
    A.peer_links(text, pids, "10.3.0.1", {1, 2})


def test_report_rows_align_in_the_table():
    rows = [{"deployment": "d", "check": "c", "target": "t" * 10, "result": "passed", "detail": "x"},
            {"deployment": "dd", "check": "cc", "target": "t", "result": "FAILED", "detail": "y"}]
    table = A.summary_table(rows)
    assert len({line.index("passed") if "passed" in line else line.index("FAILED") for line in table[1:]}) == 1
