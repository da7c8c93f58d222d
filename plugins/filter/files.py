# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Filters over the one env-file writer (plugins/plugin_utils/_unitfile.py).

Documentation lives in the sidecar files env_file.yml and fabric_env_files.yml.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ansible.errors import AnsibleFilterError

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _fabric, _unitfile
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._filter_inputs import list_of_mappings


def env_file_filter(env: Mapping[str, Any], comments: Optional[Sequence[str]] = None,
                    secret: bool = False, key: str = "env") -> str:
    if not isinstance(env, Mapping):
        raise AnsibleFilterError(f"env_file: got {type(env).__name__}; expected a mapping of name to value")
    entries = [(str(name), "" if value is None else str(value), f"{key}.{name}") for name, value in env.items()]
    try:
        return _unitfile.env_file(list(comments or ()), entries, secret=secret)
    except _unitfile.UnsafeValueError as exc:
        raise AnsibleFilterError(str(exc)) from None


def fabric_env_files_filter(processes: Sequence[Mapping[str, Any]], host: str) -> list[dict[str, str]]:
    try:
        return _fabric.fabric_env_files(list_of_mappings("fabric_env_files", "a list of plan processes", processes),
                                        str(host))
    except KeyError as exc:
        raise AnsibleFilterError(f"fabric_env_files: an engine process has no {exc}; expected plan processes") from None
    except _unitfile.UnsafeValueError as exc:
        raise AnsibleFilterError(str(exc)) from None


class FilterModule:
    """vllm_fleet.recipes file writers."""

    def filters(self) -> dict:
        return {"env_file": env_file_filter, "fabric_env_files": fabric_env_files_filter}
