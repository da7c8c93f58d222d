# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Store a benchmark run on the controller, compare it with the last run of its fingerprint, plot.

Docs: plugins/modules/vllm_benchmark_report.py. The pure parts (fingerprint, figures, comparison,
Markdown) live in plugins/plugin_utils/_benchmark.py; this action writes the files. matplotlib is
optional: without it the JSON and the Markdown are still written and the result says how to install it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _benchmark

#: Lines of the plot: (result key, label).
LATENCY_LINES = (("p50_ttft_ms", "TTFT p50"), ("p99_ttft_ms", "TTFT p99"),
                 ("p50_tpot_ms", "TPOT p50"), ("p99_tpot_ms", "TPOT p99"))


def past_runs(directory: Path, fingerprint_id: str) -> list[dict[str, Any]]:
    """Earlier run records of this fingerprint in ``directory``, oldest first (file names begin
    with the UTC time)."""
    runs = []
    for path in sorted(directory.glob(f"*-{fingerprint_id}.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and (record.get("fingerprint") or {}).get("id") == fingerprint_id:
            runs.append(record)
    return runs


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def plot(path: Path, record: Mapping[str, Any], history: Sequence[Mapping[str, Any]]) -> Optional[str]:
    """Write the PNG: latency and throughput against concurrency (this run), and per concurrency
    level over the runs of this fingerprint. Returns None, or why no plot was written."""
    try:
        import matplotlib  # pylint: disable=import-outside-toplevel
        matplotlib.use("Agg")
        from matplotlib import pyplot  # pylint: disable=import-outside-toplevel
    except ImportError:
        return (f"no PNG: matplotlib is not installed for the controller's Python ({sys.executable}); "
                f"install it with: {sys.executable} -m pip install matplotlib")
    levels = record.get("levels", [])
    conc = [lvl.get("max_concurrency") for lvl in levels]
    fig, axes = pyplot.subplots(2, 2, figsize=(12, 8))
    fig.suptitle(f"{record['deployment']}: vllm bench serve, {record['started']} "
                 f"(fingerprint {record['fingerprint']['id']})")
    ax = axes[0][0]
    for key, label in LATENCY_LINES:
        ax.plot(conc, [lvl.get(key) for lvl in levels], marker="o", label=label)
    ax.set(title="Latency against concurrency", xlabel="concurrency", ylabel="ms (log)", yscale="log")
    ax.legend()
    ax = axes[0][1]
    ax.plot(conc, [lvl.get("output_throughput") for lvl in levels], marker="o", color="tab:green", linewidth=3,
            label="output tok/s")
    ax.set(title="Throughput against concurrency", xlabel="concurrency", ylabel="output tokens/s")
    twin = ax.twinx()
    twin.plot(conc, [lvl.get("request_throughput") for lvl in levels], marker="s", color="tab:purple",
              linestyle="--", label="requests/s")
    twin.set_ylabel("requests/s")
    ax.legend(loc="upper left")
    twin.legend(loc="lower right")
    runs = [*history, record]
    labels = [str(run.get("started")) for run in runs]
    for level in conc:
        def series(key: str, level: Any = level) -> list[Any]:
            return [next((lvl.get(key) for lvl in run.get("levels", []) if lvl.get("max_concurrency") == level), None)
                    for run in runs]
        axes[1][0].plot(range(len(runs)), series("p99_ttft_ms"), marker="o", label=f"TTFT p99, c={level}")
        axes[1][0].plot(range(len(runs)), series("p99_tpot_ms"), marker="x", linestyle="--", label=f"TPOT p99, c={level}")
        axes[1][1].plot(range(len(runs)), series("output_throughput"), marker="o", label=f"c={level}")
    axes[1][0].set_yscale("log")
    for ax, title, ylabel in ((axes[1][0], "Latency over runs of this fingerprint", "ms (log)"),
                              (axes[1][1], "Output throughput over runs of this fingerprint", "output tokens/s")):
        ax.set(title=title, ylabel=ylabel, xlabel="run (UTC start)")
        ax.set_xticks(range(len(runs)))
        ax.set_xticklabels(labels, rotation=20, fontsize=7)
        ax.legend(fontsize=7)
    for ax in (axes[0][0], axes[0][1]):
        ax.set_xticks(conc)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=100)
    pyplot.close(fig)
    os.replace(tmp, path)
    return None


class ActionModule(ActionBase):
    """Write the run's JSON, Markdown and PNG on the controller; return the comparison."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("run", "image_id", "results", "started", "dir", "threshold_pct", "plot"))

    def run(self, tmp: Any = None, task_vars: Optional[dict] = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        del tmp
        # The same spec as the module's documentation stub (plugins/modules/vllm_benchmark_report.py).
        _spec, args = self.validate_argument_spec(argument_spec={
            "run": {"type": "dict", "required": True},
            "image_id": {"type": "str", "required": True},
            "results": {"type": "list", "elements": "dict", "required": True},
            "started": {"type": "str", "required": True},
            "dir": {"type": "path", "required": True},
            "threshold_pct": {"type": "float", "default": 10},
            "plot": {"type": "bool", "default": True},
        })
        if self._task.check_mode:
            return {**result, "skipped": True, "changed": False, "msg": "check mode: nothing benchmarked, nothing written"}
        for name in ("run", "image_id", "results", "started", "dir"):
            if not args.get(name):
                raise AnsibleActionFail(f"vllm_benchmark_report: {name} is empty (got {args.get(name)!r})")
        run, results = args["run"], args["results"]
        if not isinstance(run, Mapping) or not isinstance(results, list) or not all(isinstance(r, Mapping) for r in results):
            raise AnsibleActionFail("vllm_benchmark_report: run must be one item of the benchmark_runs filter and "
                                    f"results a list of parsed result JSON objects (got {type(run).__name__}, "
                                    f"{type(results).__name__})")
        try:
            threshold = float(args["threshold_pct"])
            fp = _benchmark.fingerprint(str(args["image_id"]), run.get("fingerprint_parts") or {}, run.get("workload") or {})
            record = _benchmark.summarize(run["deployment"], str(args["started"]), fp, run, results)
        except (_benchmark.BenchmarkError, KeyError, TypeError, ValueError) as exc:
            raise AnsibleActionFail(f"vllm_benchmark_report: {exc}") from exc
        directory = Path(str(args["dir"])) / run["deployment"]
        directory.mkdir(parents=True, exist_ok=True)
        history = past_runs(directory, fp["id"])
        comparison = _benchmark.compare(record, history[-1] if history else None, threshold)
        record["comparison"] = comparison
        stem = directory / f"{record['started']}-{fp['id']}"
        text = _benchmark.markdown(record, comparison, history=len(history) + 1)
        _write(stem.with_suffix(".json"), json.dumps(record, indent=2, sort_keys=True) + "\n")
        _write(stem.with_suffix(".md"), text)
        png_skipped = plot(stem.with_suffix(".png"), record, history) if args["plot"] else "plot: false"
        return {**result, "changed": False, "json": str(stem.with_suffix(".json")), "markdown_path": str(stem.with_suffix(".md")),
                "png": None if png_skipped else str(stem.with_suffix(".png")), "png_skipped": png_skipped,
                "fingerprint": fp, "history": len(history), "comparison": comparison,
                "regressions": comparison["regressions"], "failed_requests": record["failed"], "markdown": text}
