# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Upgrade snapshot and rollback steps worked out in Python (plugins/plugin_utils/_rollback.py).

Documentation lives in the sidecar files snapshot_containers.yml and rollback_steps.yml.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _rollback
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._filter_inputs import list_of_mappings


def snapshot_containers_filter(inspected: Any) -> dict[str, dict[str, str]]:
    try:
        return _rollback.snapshot_containers(
            list_of_mappings("snapshot_containers", "docker inspect output", inspected))
    except ValueError as exc:
        raise AnsibleFilterError(f"snapshot_containers: {exc}") from exc


def rollback_steps_filter(slurped: Any, batch_files: Any, processes: Any) -> dict[str, list[dict[str, Any]]]:
    if not isinstance(batch_files, Mapping):
        raise AnsibleFilterError(f"rollback_steps: batch files got {type(batch_files).__name__}; "
                                 "expected host -> paths (a rollout batch's files)")
    try:
        return _rollback.rollback_steps(
            list_of_mappings("rollback_steps", "the results of slurping each host's manifest.json", slurped),
            batch_files, list_of_mappings("rollback_steps", "a list of plan processes", processes))
    except ValueError as exc:
        raise AnsibleFilterError(f"rollback_steps: {exc}") from exc


class FilterModule:
    """vllm_fleet.recipes upgrade rollback filters."""

    def filters(self) -> dict:
        return {"snapshot_containers": snapshot_containers_filter, "rollback_steps": rollback_steps_filter}
