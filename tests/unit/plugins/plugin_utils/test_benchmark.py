"""The benchmark with history (plugins/plugin_utils/_benchmark.py, action vllm_benchmark_report).

The result fixtures are real: `vllm bench serve` (vLLM 0.32.0, CPU engine image) against the tiny
test model, random data set, 32 input / 8 output tokens, 8 prompts at concurrency 1 and 2.
"""

from __future__ import annotations

import copy
import json
import struct
from pathlib import Path

import pytest

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _benchmark as B

FIXTURES = Path(__file__).parent / "fixtures" / "benchmark"
RESULTS = [json.loads((FIXTURES / name).read_text(encoding="utf-8")) for name in ("c1.json", "c2.json")]


def _engine(host: str, argv_extra: tuple[str, ...] = (), max_len: str = "512") -> dict:
    return {"kind": "engine", "unit": f"vllm-t-{host}.service", "host": host, "role": "replica",
            "health_url": f"http://{host}:8000/health", "image": "vllm/vllm-openai-cpu:latest-x86_64",
            "served": {"model": "org/model", "name": "served-name"},
            "argv": ["vllm", "serve", "org/model", "--max-model-len", max_len, *argv_extra]}


def _plan(router: bool = True, max_len: str = "512", router_host: str = "lb") -> dict:
    procs = [_engine("r1", max_len=max_len), _engine("r2", max_len=max_len)]
    if router:
        procs.append({"kind": "router", "unit": "vllm-t-router.service", "host": router_host, "role": "router",
                      "health_url": f"http://{router_host}:30000/health"})
    return {"deployments": {"t": {"hardware": "xeon_numa1", "image": "vllm/vllm-openai-cpu:latest-x86_64",
                                  "endpoint": f"http://{router_host if router else 'r1'}:{30000 if router else 8000}",
                                  "weights": {"cache_dir": "/srv/hf"}, "processes": procs}}}


@pytest.mark.parametrize("max_len, expected", [
    (None, (1024, 128)),
    (512, (256, 64)),
    (4096, (1024, 128)),
    (100, (50, 12)),
    (4, (2, 1)),
])
def test_default_lengths_fit_max_model_len(max_len, expected):
    assert B.default_lengths(max_len) == expected
    if max_len:
        assert sum(expected) <= max_len


def test_runs_derive_the_workload_front_door_and_container():
    run = B.benchmark_runs(_plan())[0]
    assert run["url"] == "http://lb:30000" and run["front_door"]["role"] == "router"
    assert run["workload"] == {"dataset": "random", "input_len": 256, "output_len": 64}
    assert [lvl["concurrency"] for lvl in run["levels"]] == [1, 4, 16]
    assert [lvl["num_prompts"] for lvl in run["levels"]] == [32, 32, 64]
    # the router host runs no engine: the client is the first engine's host (it has the image and tokenizer)
    assert run["client"] == "r1"
    assert run["docker"][:4] == ["docker", "run", "--rm", "--name"]
    assert "/srv/hf:/root/.cache/huggingface:ro" in run["docker"] and "HF_HUB_OFFLINE=1" in run["docker"]
    script = run["image_and_script"][2]
    assert "--model served-name --tokenizer org/model" in script
    assert "--max-concurrency 16" in script and "--result-filename c16.json" in script
    assert "OPENAI_API_KEY" not in script


def test_client_is_the_router_host_when_it_runs_an_engine_or_the_one_given():
    assert B.benchmark_runs(_plan(router_host="r2"))[0]["client"] == "r2"
    assert B.benchmark_runs(_plan(), {"client": "bench-box"})[0]["client"] == "bench-box"
    run = B.benchmark_runs(_plan(router=False))[0]
    assert run["client"] == "r1" and run["url"] == "http://r1:8000" and run["front_door"]["role"] == "replica"


@pytest.mark.parametrize("settings, message", [
    ({"input_len": 500, "output_len": 100}, "500 + vllm_benchmark_output_len 100 = 600 tokens do not fit --max-model-len 512"),
    ({"concurrency": "1,2"}, "vllm_benchmark_concurrency: got '1,2'"),
    ({"concurrency": [1, 0]}, "vllm_benchmark_concurrency: got 0"),
    ({"deployments": ["nope"]}, "['nope'] name no deployment"),
])
def test_bad_settings_are_refused_naming_the_variable(settings, message):
    with pytest.raises(B.BenchmarkError, match=None) as err:
        B.benchmark_runs(_plan(), settings)
    assert message in str(err.value)


def test_fingerprint_is_stable_and_sensitive():
    run = B.benchmark_runs(_plan())[0]
    first = B.fingerprint("sha256:aa", run["fingerprint_parts"], run["workload"])
    assert first == B.fingerprint("sha256:aa", dict(run["fingerprint_parts"]), dict(run["workload"]))
    assert len(first["id"]) == 12 and first["nodes"] == 2 and first["engines"] == 2
    other_argv = _plan()
    other_argv["deployments"]["t"]["processes"][0]["argv"].append("--enforce-eager")
    changed = [
        B.fingerprint("sha256:bb", run["fingerprint_parts"], run["workload"]),
        B.fingerprint("sha256:aa", B.benchmark_runs(other_argv)[0]["fingerprint_parts"], run["workload"]),
        B.fingerprint("sha256:aa", {**run["fingerprint_parts"], "hardware": "h200"}, run["workload"]),
        B.fingerprint("sha256:aa", {**run["fingerprint_parts"], "nodes": 3}, run["workload"]),
        B.fingerprint("sha256:aa", run["fingerprint_parts"], {**run["workload"], "output_len": 65}),
    ]
    assert len({fp["id"] for fp in changed} | {first["id"]}) == 6
    # the concurrency levels and prompt counts are not part of it: runs with more levels still compare
    more = B.benchmark_runs(_plan(), {"concurrency": [1, 2, 64], "num_prompts": 8})[0]
    assert B.fingerprint("sha256:aa", more["fingerprint_parts"], more["workload"])["id"] == first["id"]


def test_real_results_parse_into_the_figures():
    figures = B.level_figures(RESULTS[1])
    assert figures["max_concurrency"] == 2 and figures["completed"] == 8 and figures["failed"] == 0
    assert figures["request_throughput"] == pytest.approx(0.5975, abs=1e-3)
    assert figures["output_throughput"] == pytest.approx(4.780, abs=1e-3)
    for metric in ("ttft", "tpot", "itl", "e2el"):
        for stat in ("mean", "median", "p50", "p90", "p99"):
            assert isinstance(figures[f"{stat}_{metric}_ms"], float), (stat, metric)
    assert "latencies" not in figures  # the per-request lists stay out of the record
    with pytest.raises(B.BenchmarkError, match="lacks"):
        B.level_figures({"date": "x"})


def _record(results: list[dict], started: str = "20261207T035530Z") -> dict:
    run = B.benchmark_runs(_plan(), {"input_len": 32, "output_len": 8, "concurrency": [1, 2], "num_prompts": 8})[0]
    fp = B.fingerprint("sha256:aa", run["fingerprint_parts"], run["workload"])
    return B.summarize("t", started, fp, run, results)


def test_comparison_flags_only_changes_for_the_worse_over_the_threshold():
    before = _record(RESULTS)
    assert B.compare(before, None, 10)["regressions"] == []
    same = B.compare(_record(RESULTS, "20261207T040000Z"), before, 10)
    assert same["previous"] == "20261207T035530Z" and same["regressions"] == []
    assert {r["change_pct"] for r in same["rows"]} == {0.0} and len(same["rows"]) == 2 * len(B.COMPARED)
    worse = copy.deepcopy(RESULTS)
    worse[1]["output_throughput"] *= 0.85   # -15%: a regression at 10%
    worse[1]["p99_ttft_ms"] *= 1.05          # +5%: within 10%
    worse[0]["p50_tpot_ms"] *= 0.5           # better: never a regression
    result = B.compare(_record(worse), before, 10)
    assert result["regressions"] == ["t: c=2 output_throughput 4.78 -> 4.063 (-15.0%, threshold 10%)"]
    assert B.compare(_record(worse), before, 20)["regressions"] == []
    assert len(B.compare(_record(worse), before, 4)["regressions"]) == 2  # TTFT p99 +5% counts at 4%


def test_markdown_has_one_row_per_level_and_the_comparison():
    before = _record(RESULTS)
    text = B.markdown(before, B.compare(before, None, 10), history=1)
    rows = [line for line in text.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert len(rows) == 2
    assert rows[1].startswith("| 2 | 8 | 8 | 0 | 0.60 | 4.78 | 589.17 / 1804.66 / 2127.36 | 282.82 / 458.12 / 475.00 |")
    assert "First run of this fingerprint" in text
    worse = copy.deepcopy(RESULTS)
    worse[0]["request_throughput"] *= 0.5
    again = _record(worse, "20261207T040000Z")
    text = B.markdown(again, B.compare(again, before, 10), history=2)
    assert "Compared with the previous run of this fingerprint (20261207T035530Z)" in text
    assert "| 1 | request_throughput | 0.11 | 0.05 | -50.0% | REGRESSION |" in text
    assert "REGRESSIONS: t: c=1 request_throughput" in text


def test_report_action_writes_json_markdown_png_and_compares(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed: the PNG is not tested "
                        "(.venv/bin/pip install -r requirements-dev.txt)")
    from ansible_collections.vllm_fleet.recipes.plugins.action import vllm_benchmark_report as A
    first = _record(RESULTS)
    png = tmp_path / "first.png"
    assert A.plot(png, first, []) is None
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1200, 800) and len(data) > 20_000
    directory = tmp_path / "t"
    directory.mkdir()
    (directory / f"{first['started']}-{first['fingerprint']['id']}.json").write_text(json.dumps(first))
    (directory / "20261201T000000Z-000000000000.json").write_text(json.dumps({**first, "fingerprint": {"id": "0" * 12}}))
    assert [r["started"] for r in A.past_runs(directory, first["fingerprint"]["id"])] == [first["started"]]
