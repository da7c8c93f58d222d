# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Start-order waves: the order a set of plan processes (re)starts in, one wave after another.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

A process's ``start_order`` (plan.json) says when it starts: Mooncake
services, then multi-node followers, then heads, then routers. A restart
starts every process of a wave and waits for its health gates before the next.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def start_waves(processes: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``[{order, processes}]`` by ascending ``start_order``; a wave keeps the order it was given.

    ValueError naming the process when it has no whole-number ``start_order``.
    """
    waves: dict[int, list[Mapping[str, Any]]] = {}
    for proc in processes:
        order = proc.get("start_order") if isinstance(proc, Mapping) else None
        if isinstance(order, bool) or not isinstance(order, int):
            name = proc.get("unit", proc) if isinstance(proc, Mapping) else proc
            raise ValueError(f"process {name!r}: start_order is {order!r}; expected a whole number "
                             "(a process of plan.json)")
        waves.setdefault(order, []).append(proc)
    return [{"order": order, "processes": waves[order]} for order in sorted(waves)]
