# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Placer of ``multi_node`` deployments: one engine group, a rank per host.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._placer_base import PlacerBase
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._plan_model import (
    ORDER_FOLLOWER,
    ORDER_HEAD,
)


class MultiNodePlacer(PlacerBase):
    """A head (rank 0) and a worker per further host, ordered by ``vllm_node_rank``."""

    def place_processes(self, gpu_hosts: Sequence[str], roles: Mapping[str, list[str]]) -> None:
        self._refuse_single_node_keys("multi-node")
        self._no_extra_roles(roles, ())
        count = len(gpu_hosts)
        if self.spec.node_count is not None and self.spec.node_count != count:
            raise self.error("node_count", self.spec.node_count,
                             f"the number of hosts in group {self.decl.group!r} ({count})",
                             f"set node_count: {count} or put {self.spec.node_count} hosts in the group")
        if count < 2:
            raise self.error("group", f"{self.decl.group} ({count} host)",
                             f"at least 2 hosts for multi-node strategy {self.spec.strategy}",
                             "add hosts to the group, or use a single_node_* strategy on one host")
        ordered = self.ranked(gpu_hosts, f"group {self.decl.group}")
        self.common["HEAD_IP"] = self.address(ordered[0])
        view = self.resolve({"node_count": count})
        self._absorb(view)
        self._check_type(view, "multi_node", "head")
        workers = view.engines.get("workers") or ()
        if len(workers) != count - 1:
            raise self.error("node_count", count, f"{count - 1} worker argvs from the engine",
                             "report this recipe: the engine returned "
                             f"{len(workers)} worker ranks")
        head = self.engine_process(host=ordered[0], unit=self.unit_name("rank0"), role="head",
                                   launch=view.engines["head"][0], rank=0, start_order=ORDER_HEAD,
                                   network_host=True, multi_host=True)
        for rank in range(1, count):
            self.engine_process(host=ordered[rank], unit=self.unit_name(f"rank{rank}"), role="worker",
                                launch=workers[rank - 1], rank=rank, start_order=ORDER_FOLLOWER,
                                network_host=True, multi_host=True)
        self.endpoint = head.health_url[:-len("/health")] if head.health_url else None
