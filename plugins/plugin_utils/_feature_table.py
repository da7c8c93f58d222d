"""A recipe's features as one variant, strategy and hardware see them, worked out once per feature.

Private to the vllm_fleet.recipes collection: not a public API.

Whether a feature may run under the strategy, its companion process, the
modes allowed on this variant and hardware, and the per-hardware replacement
of its (or each mode's) args and env depend only on the ``Layout``; a
resolution then only picks the selected mode.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional, cast

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._cmdline import kept_tokens
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._gates import (
    feature_allowed_for_strategy,
    hardware_keyed,
    mode_choices,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._jsvalue import first, get, items, present, truthy


class FeatureBlock:
    """A feature's (or mode's) args and env here, replaced per hardware when it declares so.

    Its argv tokens, empty ones dropped, are worked out once; args that are
    not a list or string raise only when a resolution uses the block.
    """

    __slots__ = ("args", "env", "_kept_args")

    def __init__(self, block: Any, profile: Mapping[str, Any], hardware_id: Any) -> None:
        replacement = hardware_keyed(get(block, "hardware_overrides"), profile, hardware_id)
        self.args = present(get(replacement, "args"), get(block, "args"))
        self.env = present(get(replacement, "env"), get(block, "env"))
        try:
            self._kept_args: Optional[tuple[Any, ...]] = tuple(kept_tokens(items(first(self.args, None))))
        except TypeError:
            self._kept_args = None

    def kept_args(self) -> tuple[Any, ...]:
        """The argv tokens the block adds (``kept_tokens``); TypeError for args that are not a list or string."""
        if self._kept_args is None:
            items(first(self.args, None))  # raises the resolution's TypeError
        return cast("tuple[Any, ...]", self._kept_args)


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
        self.plain: Optional[FeatureBlock] = None
        self.mode_blocks: dict[Any, Optional[FeatureBlock]] = {}
        self.allowed_modes: list[Any] = []
        self.fallback_mode: Any = None
        if not self.moded:
            self.plain = FeatureBlock(feature, profile, hardware_id)
            return
        self.allowed_modes, self.fallback_mode = mode_choices(feature, key, layout.variant, layout.variant_key,
                                                              profile, hardware_id)
        for mode_key in self.allowed_modes:
            mode = modes[mode_key]
            self.mode_blocks[mode_key] = FeatureBlock(mode, profile, hardware_id) if truthy(mode) else None


class FeatureTable:
    """The ``FeatureEntry`` of each feature key of one ``Layout``, built on first use."""

    __slots__ = ("_layout", "_features", "_entries")

    def __init__(self, layout: Any) -> None:
        self._layout = layout
        self._features = get(layout.recipe, "features")
        self._entries: dict[Any, Optional[FeatureEntry]] = {}

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
