# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Checks of what a filter of the collection is given, with the filter's name in the message.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible.errors import AnsibleFilterError


def list_of_mappings(filter_name: str, what: str, value: Any, *, elements: bool = True) -> Sequence[Mapping[str, Any]]:
    """``value`` when it is a list (of mappings, with ``elements``); else AnsibleFilterError
    ``<filter_name>: got <type>; expected <what>``."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence) \
            or (elements and not all(isinstance(item, Mapping) for item in value)):
        raise AnsibleFilterError(f"{filter_name}: got {type(value).__name__}; expected {what}")
    return value
