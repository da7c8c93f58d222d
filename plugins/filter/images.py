# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""The image role's pulls, worked out in Python (plugins/plugin_utils/_image_refs.py).

Documentation lives in the sidecar file image_pulls.yml.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ansible.errors import AnsibleFilterError

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _image_refs


def _mapping(value: Any, key: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise AnsibleFilterError(f"image_pulls: {key} is a {type(value).__name__}; expected a mapping")
    return value


def image_pulls_filter(references: Sequence[str], mirrors: Optional[Mapping[str, str]] = None,
                       digests: Optional[Mapping[str, str]] = None, archives: Optional[Mapping[str, str]] = None,
                       policy: str = "not_present",
                       present: Optional[Mapping[str, bool]] = None) -> list[dict[str, object]]:
    if isinstance(references, (str, bytes)) or not all(isinstance(ref, str) for ref in references):
        raise AnsibleFilterError(f"image_pulls: got {references!r}; expected a list of image references")
    return _image_refs.image_pulls(references, _mapping(mirrors, "vllm_image_registry_mirrors"),
                                   _mapping(digests, "vllm_image_digests"),
                                   _mapping(archives, "vllm_image_archives"), policy,
                                   _mapping(present, "vllm_fleet_images_present"))


class FilterModule:
    """vllm_fleet.recipes image filters."""

    def filters(self) -> dict:
        return {"image_pulls": image_pulls_filter}
