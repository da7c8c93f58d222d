# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Parsing of ``systemctl show`` output, shared by the modules that read unit state.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.
"""

from __future__ import annotations


def parse_show(text):
    """``systemctl show`` output for several units: Id -> properties."""
    states = {}
    for block in text.strip().split("\n\n"):
        props = {}
        for line in block.splitlines():
            key, _sep, value = line.partition("=")
            props[key] = value
        if props.get("Id"):
            states[props["Id"]] = props
    return states
