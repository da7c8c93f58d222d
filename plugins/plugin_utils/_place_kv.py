# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Placer of ``kv_store_lb`` deployments: Mooncake-backed engine instances, a router for several.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._launch import PlacementView, Service
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._place_mooncake import place_mooncake
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._placer_base import PlacerBase
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._plan_model import (
    DEFAULT_ROUTER_PORT,
    ORDER_FOLLOWER,
    ORDER_HEAD,
)


class KVPlacer(PlacerBase):
    """``kv_instances`` instances of ``node_count`` hosts each, Mooncake master/stores, a router."""

    def place_processes(self, gpu_hosts: Sequence[str], roles: Mapping[str, list[str]]) -> None:
        self._refuse_single_node_keys("Mooncake (kv_store_lb)")
        for role in ("prefill", "decode"):
            if roles[role]:
                raise self.error("strategy", self.spec.strategy,
                                 f"no {role} hosts outside pd_cluster",
                                 f"remove the {role} role from {roles[role]}")
        engine_hosts = list(gpu_hosts)
        nodes, instances = self._shape(engine_hosts)
        per_instance = [engine_hosts[i * nodes:(i + 1) * nodes] for i in range(instances)]
        per_instance = [self.ranked(group, f"instance {i}") for i, group in enumerate(per_instance)]
        for i, group in enumerate(per_instance):
            self.common[f"VLLM_INSTANCE_{i + 1}"] = self.address(group[0])
        self.common["ROUTER_HOST"] = self.spec.router.bind_address
        views = [self.resolve({"node_count": nodes,
                               "kv_instances": {"count": instances, "current": i}})
                 for i in range(instances)]
        first = views[0]
        self._absorb(first)
        self._check_type(first, "kv_store_lb", "vllm")
        router = first.router
        router_port = self.spec.ports.router or int((router.port if router else None) or DEFAULT_ROUTER_PORT)
        self.common["ROUTER_PORT"] = str(router_port)
        self._check_router_hosts(roles["router"], router, instances)
        mounts = place_mooncake(self, roles, first.mooncake, engine_hosts)
        head_url = None
        for i, group in enumerate(per_instance):
            url = self._place_instance(i, group, views[i], mounts)
            head_url = head_url or url
        self.endpoint = head_url
        if router is not None:
            self._router(roles["router"][0], list(router.argv), router_port, router.config, router.origin)

    def _shape(self, engine_hosts: list[str]) -> tuple[int, int]:
        """``(node_count, kv_instances)``, given or derived: their product is the engine host count."""
        if not engine_hosts:
            raise self.error("group", self.decl.group, "at least one engine host",
                             "add GPU hosts to the group")
        nodes = self.spec.node_count
        instances = self.spec.kv_instances
        total = len(engine_hosts)
        if nodes is None:
            nodes = total // instances if instances else 1
        if instances is None:
            instances = max(1, total // nodes)
        if nodes * instances != total:
            raise self.error("kv_instances", instances,
                             f"kv_instances x node_count = hosts in the group "
                             f"({instances} x {nodes} != {total})",
                             f"put {nodes * instances} engine hosts in {self.decl.group!r}, or set "
                             "kv_instances / node_count to match")
        return nodes, instances

    def _check_router_hosts(self, routers: Sequence[str], router: Optional[Service], instances: int) -> None:
        """One router host when the resolution has a router (several instances), none otherwise."""
        if router is not None and not routers:
            raise self.error("pd.router_group", None,
                             f"a router host for {instances} Mooncake instances",
                             f"set vllm_pd_role: router on one host or add it to {self.decl.group}_router")
        self._one_router_host(routers)
        if routers and router is None:
            raise self.error("pd.router_group", routers,
                             "no router host: one Mooncake instance is served directly",
                             "remove the router role, or raise kv_instances")

    def _place_instance(self, i: int, group: Sequence[str], view: PlacementView,
                        mounts: list[tuple[str, str, str]]) -> Optional[str]:
        """Instance ``i``'s head (and workers when it spans hosts); returns the head's base URL."""
        nodes = len(group)
        multi = nodes > 1
        # upstream writes --master-addr as $VLLM_INSTANCE_<i+1>, or $HEAD_IP for one instance
        self.common["HEAD_IP"] = self.address(group[0])
        launch = view.engine("vllm")
        if launch is None:
            raise self.error("strategy", self.spec.strategy, f"a kv_store_lb resolution for instance {i}",
                             "check strategy, node_count and the hosts in the group")
        workers = view.engines.get("vllm_workers") or ()
        if multi and len(workers) != nodes - 1:
            raise self.error("node_count", nodes, f"{nodes - 1} worker argvs per instance",
                             "check node_count against the serving strategy")
        suffix = f"i{i}" if not multi else f"i{i}-rank0"
        head = self.engine_process(host=group[0], unit=self.unit_name(suffix), role="head" if multi else "instance",
                                   launch=launch, rank=0, instance=i, pool=f"instance{i}",
                                   start_order=ORDER_HEAD, network_host=True, multi_host=multi,
                                   restart_group=f"{self.decl.name}/instance{i}", mounts=mounts)
        for rank in range(1, nodes):
            self.engine_process(host=group[rank], unit=self.unit_name(f"i{i}-rank{rank}"),
                                role="worker", launch=workers[rank - 1], rank=rank, instance=i, pool=f"instance{i}",
                                start_order=ORDER_FOLLOWER, network_host=True, multi_host=True,
                                restart_group=f"{self.decl.name}/instance{i}", mounts=mounts)
        return head.health_url[:-len("/health")] if head.health_url else None
