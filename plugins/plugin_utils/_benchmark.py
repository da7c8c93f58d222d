# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""The benchmark with history: what ``vllm bench serve`` runs per deployment, and what its results say.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

* :func:`benchmark_runs`: from ``plan.json``, per deployment with an API server, the front door
  (the router, else the first engine), the client host, the engine image, the tokenizer, the
  workload (defaults from ``--max-model-len``) and the ``docker run`` argv of the bench container;
* :func:`fingerprint`: what ran (image ID, engines' argv, hardware, node count, workload), hashed;
* :func:`summarize` / :func:`compare` / :func:`markdown`: the run record, the comparison with
  the previous run of the same fingerprint (regressions over a threshold), the Markdown summary.

Stdlib only; nothing here talks to a host (roles/benchmark runs the container, the action
vllm_benchmark_report writes the files and the plot).
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Mapping, Sequence
from typing import Any, Optional, cast

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._argv_tools import flag_value

#: Where the bench container sees the deployment's weights cache (the engines mount it there too).
CONTAINER_HF_CACHE = "/root/.cache/huggingface"
#: Where the bench container writes one result JSON per concurrency level.
CONTAINER_RESULTS = "/vllm-bench-results"
#: Percentiles asked of ``vllm bench serve`` (``--metric-percentiles``).
PERCENTILES = (50, 90, 99)
#: Latency metrics kept per level: vLLM's result keys are ``mean_<m>_ms``, ``p<N>_<m>_ms``.
LATENCY_METRICS = ("ttft", "tpot", "itl", "e2el")
#: Throughput keys of vLLM's result JSON kept per level.
THROUGHPUT_KEYS = ("request_throughput", "output_throughput", "total_token_throughput")
#: Counts and settings kept per level.
COUNT_KEYS = ("completed", "failed", "num_prompts", "max_concurrency", "duration",
              "total_input_tokens", "total_output_tokens")
#: What a regression is measured on: key -> +1 if higher is better, -1 if lower is better.
COMPARED = {"request_throughput": 1, "output_throughput": 1,
            "p50_ttft_ms": -1, "p99_ttft_ms": -1, "p50_tpot_ms": -1, "p99_tpot_ms": -1}
#: Default workload without a readable ``--max-model-len``.
DEFAULT_INPUT_LEN = 1024
DEFAULT_OUTPUT_LEN = 128


class BenchmarkError(ValueError):
    """A setting or a result that cannot be used; the message names it and its value."""


def default_lengths(max_model_len: Optional[int]) -> tuple[int, int]:
    """(input, output) tokens per request: 1024 and 128, shrunk to half and an eighth of
    ``--max-model-len`` when it is smaller (so input + output always fits, with room for the
    tokenizer's re-encoding of random prompts)."""
    if not max_model_len:
        return DEFAULT_INPUT_LEN, DEFAULT_OUTPUT_LEN
    return max(1, min(DEFAULT_INPUT_LEN, max_model_len // 2)), max(1, min(DEFAULT_OUTPUT_LEN, max_model_len // 8))


def prompts_for(concurrency: int, num_prompts: int) -> int:
    """Prompts sent at one concurrency level: ``num_prompts``, or when 0, 32 or four waves."""
    return num_prompts if num_prompts > 0 else max(32, 4 * concurrency)


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).isdigit() or int(value) < 1:
        raise BenchmarkError(f"{name}: got {value!r} ({type(value).__name__}); expected a positive integer")
    return int(value)


def _max_model_len(argv: Sequence[str]) -> Optional[int]:
    value = flag_value(argv, "--max-model-len")
    return int(value) if value and value.isdigit() else None


def argv_hash(engines: Sequence[Mapping[str, Any]]) -> str:
    """sha256 of every engine's argv, in plan order (hosts and addresses are not in the argv's
    meaning of 'what ran'; the order of flags is)."""
    return hashlib.sha256(json.dumps([list(p.get("argv") or []) for p in engines]).encode()).hexdigest()


def _client(deployment: Mapping[str, Any], engines: Sequence[Mapping[str, Any]],
            routers: Sequence[Mapping[str, Any]], client: Optional[str]) -> str:
    """The router's host when it runs an engine of the deployment too, else the first engine's:
    the bench container needs the engine image and the weights cache (the tokenizer), which only
    engine hosts hold."""
    if client:
        return client
    engine_hosts: list[str] = [p["host"] for p in engines]
    if routers and routers[0]["host"] in engine_hosts:
        return cast(str, routers[0]["host"])
    return engine_hosts[0]


def bench_argv(url: str, model: str, tokenizer: str, input_len: int, output_len: int,
               concurrency: int, num_prompts: int, dataset: str = "random") -> list[str]:
    """One ``vllm bench serve`` command line (one concurrency level)."""
    return ["vllm", "bench", "serve", "--backend", "vllm", "--base-url", url, "--endpoint", "/v1/completions",
            "--model", model, "--tokenizer", tokenizer, "--dataset-name", dataset,
            "--random-input-len", str(input_len), "--random-output-len", str(output_len),
            "--num-prompts", str(num_prompts), "--max-concurrency", str(concurrency), "--request-rate", "inf",
            "--ignore-eos", "--seed", "0", "--percentile-metrics", ",".join(LATENCY_METRICS),
            "--metric-percentiles", ",".join(str(p) for p in PERCENTILES), "--disable-tqdm",
            "--save-result", "--result-dir", CONTAINER_RESULTS, "--result-filename", f"c{concurrency}.json"]


def _run(name: str, dep: Mapping[str, Any], settings: Mapping[str, Any]) -> Optional[dict[str, Any]]:
    procs = dep.get("processes", [])
    engines = [p for p in procs if p.get("kind") == "engine"]
    api = [p for p in engines if isinstance(p.get("health_url"), str) and p["health_url"].endswith("/health")]
    routers = [p for p in procs if p.get("kind") == "router" and p.get("health_url")]
    if not api:
        return None
    served = api[0].get("served") or {}
    model = served.get("name") or served.get("model") or ""
    max_len = _max_model_len(api[0].get("argv") or [])
    default_in, default_out = default_lengths(max_len)
    input_len = _positive_int("vllm_benchmark_input_len", settings.get("input_len") or default_in)
    output_len = _positive_int("vllm_benchmark_output_len", settings.get("output_len") or default_out)
    if max_len and input_len + output_len > max_len:
        raise BenchmarkError(f"{name}: vllm_benchmark_input_len {input_len} + vllm_benchmark_output_len "
                             f"{output_len} = {input_len + output_len} tokens do not fit --max-model-len "
                             f"{max_len}; lower them or leave them unset (default {default_in} + {default_out})")
    levels = settings.get("concurrency") or [1, 4, 16]
    if isinstance(levels, (str, bytes)) or not isinstance(levels, Sequence):
        raise BenchmarkError(f"vllm_benchmark_concurrency: got {levels!r} ({type(levels).__name__}); "
                             "expected a list of positive integers")
    levels = sorted({_positive_int("vllm_benchmark_concurrency", level) for level in levels})
    num_prompts = int(settings.get("num_prompts") or 0)
    dataset = str(settings.get("dataset") or "random")
    tokenizer = served.get("model") or model
    url = (dep.get("endpoint") or api[0]["health_url"][: -len("/health")]).rstrip("/")
    door = (routers or api)[0]
    commands = [bench_argv(url, model, tokenizer, input_len, output_len, c, prompts_for(c, num_prompts), dataset)
                for c in levels]
    image = api[0].get("image") or dep.get("image")
    weights_dir = (dep.get("weights") or {}).get("cache_dir") or CONTAINER_HF_CACHE
    docker = ["docker", "run", "--rm", "--name", f"vllm-bench-{name}", "--network", "host",
              "-v", f"{weights_dir}:{CONTAINER_HF_CACHE}:ro", "-e", "HF_HUB_OFFLINE=1",
              "--entrypoint", "/bin/sh"]
    return {
        "deployment": name,
        "client": _client(dep, api, routers, settings.get("client")),
        "url": url,
        "front_door": {"unit": door["unit"], "host": door["host"], "role": "router" if routers else door.get("role")},
        "image": image,
        "weights_dir": weights_dir,
        "model": model,
        "tokenizer": tokenizer,
        "key_unit": api[0]["unit"],
        "max_model_len": max_len,
        "workload": {"dataset": dataset, "input_len": input_len, "output_len": output_len},
        "levels": [{"concurrency": c, "num_prompts": prompts_for(c, num_prompts),
                    "result": f"c{c}.json"} for c in levels],
        # the argv: docker + [-v DIR:results_mount] + [--env-file FILE] + image_and_script
        "docker": docker,
        "results_mount": CONTAINER_RESULTS,
        "image_and_script": [image, "-c", " && ".join(shlex.join(cmd) for cmd in commands)],
        "fingerprint_parts": {"argv_sha256": argv_hash(engines), "hardware": dep.get("hardware"),
                              "nodes": len({p["host"] for p in engines}), "engines": len(engines)},
    }


def benchmark_runs(plan: Mapping[str, Any], settings: Optional[Mapping[str, Any]] = None) -> list[dict[str, Any]]:
    """One run per deployment with an API server (sorted by name); ``settings``: ``client``,
    ``dataset``, ``input_len``, ``output_len`` (0/None: from ``--max-model-len``), ``concurrency``
    (list), ``num_prompts`` (per level; 0: :func:`prompts_for`), ``deployments`` (names; empty: all)."""
    settings = settings or {}
    wanted = set(settings.get("deployments") or [])
    runs = [run for name, dep in sorted(plan.get("deployments", {}).items())
            if (not wanted or name in wanted) and (run := _run(name, dep, settings)) is not None]
    if wanted - {run["deployment"] for run in runs}:
        raise BenchmarkError(f"vllm_benchmark_deployments: {sorted(wanted - {r['deployment'] for r in runs})} "
                             f"name no deployment with an API server in the plan "
                             f"({sorted(plan.get('deployments', {}))})")
    return runs


def fingerprint(image_id: str, parts: Mapping[str, Any], workload: Mapping[str, Any]) -> dict[str, Any]:
    """What ran, and its short hash (12 hex digits): the same image ID, engines' argv, hardware,
    node and engine counts, dataset and lengths give the same fingerprint."""
    what = {"image_id": image_id, **{k: parts.get(k) for k in ("argv_sha256", "hardware", "nodes", "engines")},
            "workload": {k: workload.get(k) for k in ("dataset", "input_len", "output_len")}}
    digest = hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:12]
    return {"id": digest, **what}


def level_figures(result: Mapping[str, Any]) -> dict[str, Any]:
    """The figures of one ``vllm bench serve`` result JSON (one concurrency level)."""
    missing = [k for k in ("completed", "request_throughput", "mean_ttft_ms") if k not in result]
    if missing:
        raise BenchmarkError(f"a vllm bench serve result lacks {missing} (keys: {sorted(result)[:12]}...)")
    out: dict[str, Any] = {k: result.get(k) for k in COUNT_KEYS + THROUGHPUT_KEYS}
    out["failed"] = int(result.get("failed") or 0)
    for metric in LATENCY_METRICS:
        for stat in ("mean", "median", *(f"p{p}" for p in PERCENTILES)):
            key = f"{stat}_{metric}_ms"
            if key in result:
                out[key] = result[key]
    return out


def summarize(deployment: str, started: str, fp: Mapping[str, Any], run: Mapping[str, Any],
              results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The run record stored on the controller (one JSON file per run)."""
    levels = sorted((level_figures(r) for r in results), key=lambda r: r.get("max_concurrency") or 0)
    return {"deployment": deployment, "started": started, "fingerprint": dict(fp),
            "url": run.get("url"), "client": run.get("client"), "model": run.get("model"),
            "workload": dict(run.get("workload") or {}),
            "vllm_version": next((r.get("vllm_version") for r in results if r.get("vllm_version")), None),
            "levels": levels,
            "failed": sum(level["failed"] for level in levels)}


def compare(current: Mapping[str, Any], previous: Optional[Mapping[str, Any]],
            threshold_pct: float) -> dict[str, Any]:
    """Per concurrency level both runs have, the change of each :data:`COMPARED` figure in percent;
    a regression is a change for the worse of more than ``threshold_pct``."""
    if not previous:
        return {"previous": None, "rows": [], "regressions": []}
    before = {lvl.get("max_concurrency"): lvl for lvl in previous.get("levels", [])}
    rows, regressions = [], []
    for level in current.get("levels", []):
        old = before.get(level.get("max_concurrency"))
        if old is None:
            continue
        for key, better in COMPARED.items():
            new_value, old_value = level.get(key), old.get(key)
            if not isinstance(new_value, (int, float)) or not isinstance(old_value, (int, float)) or not old_value:
                continue
            change = (new_value - old_value) / old_value * 100
            worse = -change * better
            row = {"concurrency": level.get("max_concurrency"), "metric": key, "before": old_value,
                   "after": new_value, "change_pct": round(change, 1), "regression": worse > threshold_pct}
            rows.append(row)
            if row["regression"]:
                regressions.append(f"{current.get('deployment')}: c={row['concurrency']} {key} {old_value:.4g} -> {new_value:.4g} "
                                   f"({change:+.1f}%, threshold {threshold_pct:g}%)")
    return {"previous": previous.get("started"), "rows": rows, "regressions": regressions}


def _fmt(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, float) else ("-" if value is None else str(value))


def markdown(record: Mapping[str, Any], comparison: Mapping[str, Any], history: int = 0) -> str:
    """The Markdown summary: what ran, one table row per concurrency level, the comparison."""
    fp, work = record["fingerprint"], record.get("workload") or {}
    lines = [f"# Benchmark of {record['deployment']} ({record['started']})", "",
             f"- front door: {record.get('url')} (model {record.get('model')}), client {record.get('client')}",
             f"- workload: {work.get('dataset')} dataset, {work.get('input_len')} input / "
             f"{work.get('output_len')} output tokens per request",
             f"- fingerprint {fp['id']}: image {str(fp.get('image_id'))[:19]}, argv sha256 "
             f"{str(fp.get('argv_sha256'))[:12]}, hardware {fp.get('hardware')}, {fp.get('nodes')} node(s), "
             f"{fp.get('engines')} engine(s); runs of this fingerprint so far: {history}", "",
             "| concurrency | prompts | completed | failed | req/s | output tok/s | TTFT p50 / p90 / p99 (ms) "
             "| TPOT p50 / p90 / p99 (ms) | ITL p50 / p99 (ms) |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for lvl in record.get("levels", []):
        def trio(metric: str, stats: Sequence[str] = ("p50", "p90", "p99"), level: Mapping[str, Any] = lvl) -> str:
            return " / ".join(_fmt(level.get(f"{s}_{metric}_ms")) for s in stats)
        lines.append(f"| {lvl.get('max_concurrency')} | {lvl.get('num_prompts')} | {lvl.get('completed')} | "
                     f"{lvl.get('failed')} | {_fmt(lvl.get('request_throughput'))} | "
                     f"{_fmt(lvl.get('output_throughput'))} | {trio('ttft')} | {trio('tpot')} | "
                     f"{trio('itl', ('p50', 'p99'))} |")
    lines.append("")
    if not comparison.get("previous"):
        lines.append("First run of this fingerprint: nothing to compare with.")
    else:
        lines += [f"Compared with the previous run of this fingerprint ({comparison['previous']}):", "",
                  "| concurrency | metric | before | after | change | |", "|---:|---|---:|---:|---:|---|"]
        lines += [f"| {r['concurrency']} | {r['metric']} | {_fmt(float(r['before']))} | {_fmt(float(r['after']))} | "
                  f"{r['change_pct']:+.1f}% | {'REGRESSION' if r['regression'] else ''} |"
                  for r in comparison.get("rows", [])]
        lines += ["", (f"REGRESSIONS: {'; '.join(comparison['regressions'])}" if comparison.get("regressions")
                       else "No regression over the threshold.")]
    return "\n".join(lines) + "\n"
