# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""The benchmark with history, worked out in Python (plugins/plugin_utils/_benchmark.py).

Documentation lives in the sidecar file benchmark_runs.yml.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _benchmark


def benchmark_runs_filter(plan_result: Any, **settings: Any) -> list[dict[str, Any]]:
    if not isinstance(plan_result, Mapping) or not isinstance(plan_result.get("plan"), Mapping):
        raise AnsibleFilterError(f"benchmark_runs: got {type(plan_result).__name__}; expected the registered result "
                                 "of vllm_fleet.recipes.vllm_plan (with 'plan')")
    unknown = sorted(set(settings) - {"client", "dataset", "input_len", "output_len", "concurrency", "num_prompts",
                                      "deployments"})
    if unknown:
        raise AnsibleFilterError(f"benchmark_runs: unknown argument(s) {unknown}")
    try:
        return _benchmark.benchmark_runs(plan_result["plan"], settings)
    except _benchmark.BenchmarkError as exc:
        raise AnsibleFilterError(f"benchmark_runs: {exc}") from exc


class FilterModule:
    """vllm_fleet.recipes benchmark filters."""

    def filters(self) -> dict:
        return {"benchmark_runs": benchmark_runs_filter}
