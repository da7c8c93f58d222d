#!/usr/bin/env python
"""Benchmark: the cost of vllm_argv_check per distinct engine argv, cold and cached.

Cold: an empty cache, so one throwaway container of the image imports vLLM, builds the
``vllm serve`` parser and checks every argv. Cached: the same call again, answered from the
cache on the host (one ``docker image inspect``, no container). Prints both, per argv.

    .venv/bin/python benchmarks/argv_check.py [--image localhost:5000/vllm-cpu-test:v1] [--count 20]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / ".collections"))  # `make collections` links this checkout there

from ansible_collections.vllm_fleet.recipes.plugins.module_utils import _argv_check as M  # noqa: E402


def argvs(count: int) -> list[list[str]]:
    """``count`` distinct, valid argvs (as different plans would render them)."""
    return [["vllm", "serve", "Qwen/Qwen3-0.6B", "--max-model-len", str(512 + i), "--dtype", "bfloat16",
             "--enforce-eager", "--port", str(8000 + i)] for i in range(count)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--image", default="localhost:5000/vllm-cpu-test:v1")
    parser.add_argument("--count", type=int, default=20)
    args = parser.parse_args()
    processes = [{"argv": a, "deployment": "bench", "unit": f"u{i}"} for i, a in enumerate(argvs(args.count))]
    with tempfile.TemporaryDirectory() as cache:
        timings = {}
        for label in ("cold", "cached"):
            check = M.ArgvCheck(kind="engine", processes=processes, image=args.image,
                                pythons=["python3", "/opt/vllm/bin/python"], env={"VLLM_TARGET_DEVICE": "cpu"},
                                cache_dir=cache)
            started = time.monotonic()
            results, version = check.check()
            timings[label] = (time.monotonic() - started, check.setup_s, sorted(check.check_ms))
            assert all(r["ok"] for r in results), [r for r in results if not r["ok"]]
    cold, setup, parse_ms = timings["cold"]
    cached = timings["cached"][0]
    n = args.count
    print(f"vLLM {version} in {args.image}, {n} distinct argvs")
    print(f"cold:   {cold:8.2f} s total, {cold / n:8.3f} s per argv; of it: import + parser {setup:.2f} s "
          f"once, parsing {sum(parse_ms):.0f} ms (median {parse_ms[len(parse_ms) // 2]:.1f} ms per argv), "
          f"the rest container start and exit")
    print(f"cached: {cached * 1000:8.1f} ms total, {cached * 1000 / n:8.2f} ms per argv (no container)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
