# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Restart orchestration worked out in Python (plugins/plugin_utils/_waves.py).

Documentation lives in the sidecar file start_waves.yml.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _waves
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._filter_inputs import list_of_mappings


def start_waves_filter(processes: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    try:  # each process is checked by _waves, which names it
        return _waves.start_waves(list_of_mappings("start_waves", "a list of plan processes", processes,
                                                   elements=False))
    except ValueError as exc:
        raise AnsibleFilterError(f"start_waves: {exc}") from exc


class FilterModule:
    """vllm_fleet.recipes restart filters."""

    def filters(self) -> dict:
        return {"start_waves": start_waves_filter}
