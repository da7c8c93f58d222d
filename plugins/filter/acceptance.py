# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Acceptance after a deploy, worked out in Python (plugins/plugin_utils/_acceptance.py).

Documentation lives in the sidecar files acceptance_checks.yml, acceptance_report.yml and
acceptance_kv_moved.yml.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from ansible.errors import AnsibleFilterError

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _acceptance


def _plan_result(name: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping) or not isinstance(value.get("plan"), Mapping):
        raise AnsibleFilterError(f"{name}: got {type(value).__name__}; expected the registered result of "
                                 "vllm_fleet.recipes.vllm_plan (with 'plan')")
    return value


def acceptance_checks_filter(plan_result: Any, client: Optional[str] = None) -> dict[str, Any]:
    return _acceptance.acceptance_checks(_plan_result("acceptance_checks", plan_result)["plan"], client=client)


def acceptance_report_filter(checks: Any, **observed: Any) -> dict[str, Any]:
    if not isinstance(checks, Mapping) or not isinstance(checks.get("deployments"), list):
        raise AnsibleFilterError(f"acceptance_report: got {type(checks).__name__}; expected what "
                                 "acceptance_checks returned")
    unknown = sorted(set(observed) - {"warm", "front", "ranks", "metrics_before", "metrics_after"})
    if unknown:
        raise AnsibleFilterError(f"acceptance_report: unknown argument(s) {unknown}")
    try:
        return _acceptance.acceptance_report(checks, **observed)
    except (KeyError, TypeError, IndexError) as exc:
        raise AnsibleFilterError(f"acceptance_report: a registered result is not shaped as expected: {exc!r}") from exc


def acceptance_kv_moved_filter(after: Any, before: Any) -> bool:
    return _acceptance.nixl_grew(str(before or ""), str(after or ""))


class FilterModule:
    """vllm_fleet.recipes acceptance filters."""

    def filters(self) -> dict:
        return {"acceptance_checks": acceptance_checks_filter, "acceptance_report": acceptance_report_filter, "acceptance_kv_moved": acceptance_kv_moved_filter}
