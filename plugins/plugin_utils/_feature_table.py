"""A recipe's features as one variant, strategy and hardware see them, worked out once per feature.

Private to the vllm_fleet.recipes collection: not a public API.

Whether a feature may run under the strategy, its companion process, the
modes allowed on this variant and hardware, and the per-hardware replacement
of its (or each mode's) args and env depend only on the ``Layout``; a
resolution then only picks the selected mode.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._gates import (
    feature_allowed_for_strategy,
    hardware_keyed,
    mode_choices,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._jsvalue import get, present, truthy


def hardware_replacement(block: Any, profile: Mapping, hardware_id: Any) -> dict:
    """A feature/mode's args and env, replaced per hardware when it declares so."""
    replacement = hardware_keyed(get(block, "hardware_overrides"), profile, hardware_id)
    return {
        "args": present(get(replacement, "args"), get(block, "args")),
        "env": present(get(replacement, "env"), get(block, "env")),
    }


class FeatureEntry:
    """One feature here: a plain ``{args, env}`` block, or its allowed modes and their blocks."""

    __slots__ = ("feature", "allowed", "companion", "moded", "plain", "allowed_modes", "fallback_mode",
                 "mode_blocks")

    def __init__(self, feature: Any, key: Any, layout: Any) -> None:
        profile, hardware_id = layout.profile, layout.hardware_id
        self.feature = feature
        self.allowed = feature_allowed_for_strategy(feature, layout.strategy_name)
        companion = get(feature, "companion")
        self.companion = companion if truthy(get(companion, "command")) else None
        modes = get(feature, "modes")
        self.moded = modes is not None and isinstance(modes, (dict, list))
        self.plain: Optional[dict] = None
        self.mode_blocks: dict = {}
        self.allowed_modes: list = []
        self.fallback_mode: Any = None
        if not self.moded:
            self.plain = hardware_replacement(feature, profile, hardware_id)
            return
        self.allowed_modes, self.fallback_mode = mode_choices(feature, key, layout.variant, layout.variant_key,
                                                              profile, hardware_id)
        for mode_key in self.allowed_modes:
            mode = modes[mode_key]
            self.mode_blocks[mode_key] = hardware_replacement(mode, profile, hardware_id) if truthy(mode) else None


class FeatureTable:
    """The ``FeatureEntry`` of each feature key of one ``Layout``, built on first use."""

    __slots__ = ("_layout", "_features", "_entries")

    def __init__(self, layout: Any) -> None:
        self._layout = layout
        self._features = get(layout.recipe, "features")
        self._entries: dict = {}

    def entry(self, key: Any) -> Optional[FeatureEntry]:
        """The entry of a hashable feature key; None when the recipe has no (truthy) such feature."""
        try:
            return self._entries[key]
        except KeyError:
            pass
        feature = get(self._features, key)
        entry = FeatureEntry(feature, key, self._layout) if truthy(feature) else None
        self._entries[key] = entry
        return entry
