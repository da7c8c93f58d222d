#!/usr/bin/env python
"""Benchmark: resolve the whole upstream conformance corpus, recipes loaded once.

Prints the wall time and cases per second of command synthesis over every
case (docker wrapping included), best of ``--repeat`` runs, twice:

- warm: layouts and command pieces stay shared between runs, as in one
  controller process that renders many deployments;
- cold: those caches are cleared before each run, as in a fresh process.

It also prints a floor: the time Python takes only to rebuild the lists and
dicts of the corpus's expected outputs (strings shared, no synthesis at all).
No Python resolver that returns these outputs can be faster than that.

Loading YAML and reading the corpus happen before the clock starts.

``--reference PATH`` times the recipes site's own JavaScript on the same corpus
and machine, right after: PATH is ``src/lib/command-synthesis.js`` of a
vllm-project/recipes checkout (needs ``node``; nothing of it is shipped here).

    .venv/bin/python benchmarks/resolve.py [--shared ../shared] [--repeat 3] [--reference PATH]
"""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from conformance import CorpusReplay, iter_cases  # noqa: E402

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._docker import (  # noqa: E402
    docker_meta,
    docker_processes,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._synthesis import (  # noqa: E402
    clear_caches,
    resolve_command,
)

INPUTS = ("variant", "strategy", "hardware", "features")
TAIL = ("advanced_args", "node_count", "pd_nodes", "feature_modes", "kv_offload", "kv_instances")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--reference", type=Path, help="upstream src/lib/command-synthesis.js to time beside ours")
    args = parser.parse_args()
    corpus = args.shared / "upstream" / "conformance" / "cases.jsonl.gz"
    if not corpus.is_file():
        print(f"skipped: {corpus} not found")
        return 0
    replay = CorpusReplay(args.shared / "upstream" / "recipes")
    cases = list(iter_cases(corpus))
    jobs = []
    for case in cases:
        recipe = replay.recipe(case["hf_id"])
        variants = recipe.get("variants") or {}
        variant = variants.get(case["variant"]) or variants.get("default") or {}
        profile = replay.profiles.get(case["hardware"]) or {}
        jobs.append((recipe, [case[k] for k in INPUTS], [case[k] for k in TAIL], variant, profile, case["hardware"]))

    def run() -> int:
        errors = 0
        for recipe, head, tail, variant, profile, hw in jobs:
            try:
                output = resolve_command(recipe, *head, replay.strategies, replay.taxonomy, *tail)
            except Exception:  # corpus error cases: upstream raises too
                errors += 1
                continue
            docker_processes(output, docker_meta(recipe, variant, profile, hw))
        return errors

    best_of: dict[str, float] = {}
    for label, cold in (("warm", False), ("cold", True)):
        timings, cpu = [], []
        for _attempt in range(max(1, args.repeat)):
            if cold:
                clear_caches()
            gc.collect()
            start, start_cpu = time.perf_counter(), time.process_time()
            errors = run()
            timings.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
        best = best_of[label] = min(timings)
        print(f"{label}:       {best:.2f} s wall, {min(cpu):.2f} s cpu, {len(cases) / best:,.0f} cases/s "
              f"(best of {len(timings)}: {', '.join(f'{t:.2f}' for t in timings)})")
    least = floor(cases, args.repeat)
    print(f"floor:      {least:.2f} s to only rebuild the expected outputs' lists and dicts")
    print(f"cases:      {len(cases)} ({errors} expected errors)")
    if args.reference:
        upstream = reference(args.reference, replay, corpus, args.repeat)
        if upstream is None:
            return 1
        print(ratios(best_of["warm"], best_of["cold"], least, upstream))
    return 0


def ratios(warm: float, cold: float, least: float, upstream: float) -> str:
    """The target as figures: each time over the JavaScript's (1.00x or less meets it)."""
    return (f"ratio:      {warm / upstream:.2f}x the JavaScript warm, {cold / upstream:.2f}x cold "
            f"(the floor alone is {least / upstream:.2f}x)")


def _rebuilt(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        return {key: _rebuilt(item) for key, item in value.items()}
    if kind is list:
        return [_rebuilt(item) for item in value]
    return value


def floor(cases: list[dict], repeat: int) -> float:
    """Best wall time to rebuild every case's expected output and docker containers (no synthesis)."""
    expected = [(case.get("output"), case.get("docker")) for case in cases if case.get("output")]
    timings = []
    for _attempt in range(max(1, repeat)):
        gc.collect()
        start = time.perf_counter()
        for output, docker in expected:
            _rebuilt(output)
            _rebuilt(docker)
        timings.append(time.perf_counter() - start)
    return min(timings)


def reference(synthesis: Path, replay: CorpusReplay, corpus: Path, repeat: int) -> Optional[float]:
    """Time upstream's JavaScript (``resolve_reference.mjs``) on the same recipes and corpus:
    its best wall time, or None (and why) when it cannot run."""
    node = shutil.which("node")
    if node is None or not synthesis.is_file():
        print(f"reference:  skipped ({'node not found' if node is None else f'{synthesis} not found'})")
        return None
    models = replay.root / "models"
    hf_ids = [f"{path.parent.name}/{path.stem}" for path in sorted(models.glob("*/*.yaml"))]
    recipes = {hf_id: replay.recipe(hf_id) for hf_id in hf_ids}
    with tempfile.TemporaryDirectory() as tmp:
        module = Path(tmp) / "command-synthesis.mjs"
        shutil.copyfile(synthesis, module)
        data = Path(tmp) / "recipes.json"
        data.write_text(json.dumps({"recipes": recipes, "strategies": replay.strategies, "taxonomy": replay.taxonomy},
                                   default=str), encoding="utf-8")
        done = subprocess.run([node, str(Path(__file__).with_name("resolve_reference.mjs")), str(module), str(data),
                               str(corpus), str(max(1, repeat))], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(f"reference:  failed ({done.stderr.strip().splitlines()[-1:]})")
        return None
    result = json.loads(done.stdout)
    timings = result["timings"]
    print(f"reference:  {min(timings):.2f} s wall, upstream JavaScript in node (best of {len(timings)}: "
          f"{', '.join(f'{t:.2f}' for t in timings)}; {result['errors']} errors)")
    return min(timings)


if __name__ == "__main__":
    sys.exit(main())
