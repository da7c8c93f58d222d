# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""The fabric check before a group or pool starts, worked out in Python (plugins/plugin_utils/_fabric_check.py).

Documentation lives in the sidecar files fabric_checks.yml and fabric_report.yml.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _fabric_check


def fabric_checks_filter(plan_result: Any, script: str, timeout_s: int = 60, port_offset: int = 100,
                         size_mb: int = 16) -> dict[str, Any]:
    if not isinstance(plan_result, Mapping) or not isinstance(plan_result.get("plan"), Mapping):
        raise AnsibleFilterError(f"fabric_checks: got {type(plan_result).__name__}; expected the registered result "
                                 "of vllm_fleet.recipes.vllm_plan (with 'plan')")
    for name, value in (("timeout_s", timeout_s), ("port_offset", port_offset), ("size_mb", size_mb)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise AnsibleFilterError(f"fabric_checks: {name} is {value!r} ({type(value).__name__}); expected an "
                                     "integer of at least 1")
    try:
        return _fabric_check.fabric_checks(plan_result["plan"], str(script), timeout_s=timeout_s,
                                           port_offset=port_offset, size_mb=size_mb)
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"fabric_checks: the plan is not shaped as expected: {exc!r}") from exc


def fabric_report_filter(checks: Any, ranks: Any = (), pairs: Any = (), ucx: Any = (),
                         rdma_fallback: str = "fail") -> dict[str, Any]:
    if not isinstance(checks, Mapping) or not isinstance(checks.get("groups"), list):
        raise AnsibleFilterError(f"fabric_report: got {type(checks).__name__}; expected what fabric_checks returned")
    if rdma_fallback not in ("fail", "warn"):
        raise AnsibleFilterError(f"fabric_report: rdma_fallback is {rdma_fallback!r}; expected 'fail' or 'warn'")
    results = {}
    for name, value in (("ranks", ranks), ("pairs", pairs), ("ucx", ucx)):
        if not isinstance(value, (list, tuple)) or not all(isinstance(item, Mapping) for item in value):
            raise AnsibleFilterError(f"fabric_report: {name} is {type(value).__name__}; expected a list of "
                                     "registered loop results")
        results[name] = list(value)
    return _fabric_check.fabric_report(checks, results["ranks"], results["pairs"], results["ucx"], rdma_fallback)


class FilterModule:
    """vllm_fleet.recipes fabric check filters."""

    def filters(self) -> dict:
        return {"fabric_checks": fabric_checks_filter, "fabric_report": fabric_report_filter}
