# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""The weights role's fleet copy schedule, worked out in Python (plugins/plugin_utils/_fanout.py).

Documentation lives in the sidecar files weights_copy_schedule.yml, weights_copy_transfers.yml and
weights_copy_attempt.yml.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _fanout
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._filter_inputs import list_of_mappings


def weights_copy_schedule_filter(hosts: Sequence[str], hostvars: Mapping[str, Any], method: str = _fanout.FANOUT,
                                 sends_per_round: int = 1, parallel: int = 4) -> dict[str, dict[str, Any]]:
    if isinstance(hosts, (str, bytes)) or not all(isinstance(host, str) for host in hosts):
        raise AnsibleFilterError(f"weights_copy_schedule: got {hosts!r}; expected a list of host names")
    views = {}
    for host in hosts:
        view = (hostvars.get(host) or {}).get("vllm_fleet_weights") or []
        views[host] = list_of_mappings("weights_copy_schedule", f"a list of weights entries for host {host}", view)
    try:
        return _fanout.weights_copy_schedules(views, method=method, sends_per_round=sends_per_round,
                                              parallel=parallel)
    except (KeyError, ValueError) as exc:
        raise AnsibleFilterError(f"weights_copy_schedule: {exc}") from exc


def weights_copy_transfers_filter(schedules: Mapping[str, Any], entries: Sequence[Mapping[str, Any]],
                                  host: str) -> list[dict[str, Any]]:
    if not isinstance(schedules, Mapping):
        raise AnsibleFilterError(f"weights_copy_transfers: got {type(schedules).__name__}; expected the result "
                                 "of weights_copy_schedule")
    view = list_of_mappings("weights_copy_transfers", "a list of weights entries (vllm_fleet_weights)", entries)
    try:
        return _fanout.host_transfers(schedules, view, str(host))
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"weights_copy_transfers: {exc}") from exc


def weights_copy_attempt_filter(transfers: Sequence[Mapping[str, Any]], attempt: int, done: Sequence[str],
                                play_hosts: Sequence[str], hostvars: Mapping[str, Any]) -> list[dict[str, Any]]:
    items = list_of_mappings("weights_copy_attempt", "a list of transfers ({entry, sources})", transfers)

    def ready(source: str, name: str) -> bool:
        """In the play, holding a verified copy of ``name``, its transfer key published."""
        if source not in play_hosts:
            return False
        source_vars = hostvars.get(source) or {}
        return name in (source_vars.get("__weights_holds") or []) and bool(source_vars.get("__weights_sync_pubkey"))

    try:
        return _fanout.attempt_items(items, int(attempt), list(done or []), ready)
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"weights_copy_attempt: {exc}") from exc


class FilterModule:
    """vllm_fleet.recipes fleet copy filters."""

    def filters(self) -> dict:
        return {"weights_copy_schedule": weights_copy_schedule_filter,
                "weights_copy_transfers": weights_copy_transfers_filter,
                "weights_copy_attempt": weights_copy_attempt_filter}
