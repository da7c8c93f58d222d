#!/usr/bin/env python
"""Benchmark: resolve the whole upstream conformance corpus, recipes loaded once.

Prints the wall time and cases per second of command synthesis over every
case (docker wrapping included), best of ``--repeat`` runs. Loading YAML and
reading the corpus happen before the clock starts. Reference: upstream's
JavaScript does this corpus in about 1.6 s on our machines.

    .venv/bin/python benchmarks/resolve.py [--shared ../shared] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from conformance import CorpusReplay, iter_cases  # noqa: E402

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._docker import (  # noqa: E402
    docker_meta,
    docker_processes,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._synthesis import resolve_command  # noqa: E402

INPUTS = ("variant", "strategy", "hardware", "features")
TAIL = ("advanced_args", "node_count", "pd_nodes", "feature_modes", "kv_offload", "kv_instances")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    parser.add_argument("--repeat", type=int, default=3)
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

    timings, cpu = [], []
    for _attempt in range(max(1, args.repeat)):
        gc.collect()
        start, start_cpu = time.perf_counter(), time.process_time()
        errors = run()
        timings.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    best = min(timings)
    print(f"cases:      {len(cases)} ({errors} expected errors)")
    print(f"wall time:  {best:.2f} s (best of {len(timings)}: {', '.join(f'{t:.2f}' for t in timings)})")
    print(f"cpu time:   {min(cpu):.2f} s (best; wall minus time lost to other processes)")
    print(f"throughput: {len(cases) / best:,.0f} cases/s")
    print("reference:  upstream JavaScript, about 1.6 s for this corpus")
    return 0


if __name__ == "__main__":
    sys.exit(main())
