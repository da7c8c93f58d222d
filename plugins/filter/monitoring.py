# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Filters for Prometheus: file_sd targets and alert rules of a fleet plan, figures from /metrics.

Thin wrappers over plugin_utils/_monitoring.py. Documentation lives in the sidecar files
prometheus_file_sd.yml, prometheus_rules.yml and fleet_figures.yml.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ansible.errors import AnsibleFilterError

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._requirements import missing_requirement

try:
    from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _monitoring
    from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._errors import RecipeError
except ImportError as exc:  # raised at use, with the package to install
    IMPORT_ERROR: Optional[ImportError] = exc
else:
    IMPORT_ERROR = None


def _ready(name: str) -> None:
    if IMPORT_ERROR is not None:
        raise AnsibleFilterError(missing_requirement(f"vllm_fleet.recipes.{name}", IMPORT_ERROR))


def _plan(plan: Any) -> Mapping[str, Any]:
    """A plan.json mapping, or the registered result of vllm_plan (which holds it under ``plan``)."""
    if isinstance(plan, Mapping) and isinstance(plan.get("plan"), Mapping):
        plan = plan["plan"]
    if not isinstance(plan, Mapping) or not isinstance(plan.get("deployments"), Mapping):
        raise AnsibleFilterError(f"plan: got {type(plan).__name__}; expected plan.json's mapping (with "
                                 "'deployments') or the registered result of vllm_fleet.recipes.vllm_plan")
    return plan


def prometheus_file_sd_filter(plan: Any) -> dict:
    _ready("prometheus_file_sd")
    return {name.rsplit("/", 1)[1]: text for name, text in _monitoring.file_sd_files(_plan(plan)).items()}


def prometheus_rules_filter(thresholds: Optional[Mapping[str, Any]] = None) -> str:
    _ready("prometheus_rules")
    if thresholds is not None and not isinstance(thresholds, Mapping):
        raise AnsibleFilterError(f"vllm_monitoring_alerts: got {thresholds!r} ({type(thresholds).__name__}); "
                                 "expected a mapping of threshold names to values")
    try:
        return _monitoring.alert_rules_text(thresholds)
    except RecipeError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def fleet_figures_filter(scrapes: Sequence[Mapping[str, Any]]) -> dict:
    _ready("fleet_figures")
    if not isinstance(scrapes, Sequence) or isinstance(scrapes, (str, bytes)):
        raise AnsibleFilterError(f"scrapes: got {type(scrapes).__name__}; expected the list of results of an "
                                 "ansible.builtin.uri loop over plan processes (return_content: true)")
    return _monitoring.fleet_figures([s for s in scrapes if isinstance(s, Mapping)])


class FilterModule:
    """vllm_fleet.recipes Prometheus filters."""

    def filters(self) -> dict:
        return {"prometheus_file_sd": prometheus_file_sd_filter, "prometheus_rules": prometheus_rules_filter,
                "fleet_figures": fleet_figures_filter}
