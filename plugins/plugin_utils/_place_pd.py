# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Placer of ``pd_cluster`` deployments: prefill and decode pools behind one router.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._launch import PlacementView
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._place_mooncake import place_mooncake
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._placer_base import PlacerBase
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._plan_model import (
    DEFAULT_ROUTER_PORT,
    ORDER_FOLLOWER,
    ORDER_HEAD,
)


class PDPlacer(PlacerBase):
    """Prefill and decode pools (or one co-located pair), their ranks, the router, Mooncake."""

    def place_processes(self, gpu_hosts: Sequence[str], roles: Mapping[str, list[str]]) -> None:
        self._refuse_single_node_keys("pd_cluster")
        prefill, decode, colocated = self._pool_hosts(roles)
        routers = roles["router"]
        if not routers:
            raise self.error("pd.router_group", None, "a router host for the PD cluster",
                             f"add a host to group {self.decl.group}_router or set "
                             "vllm_pd_role: router on one host")
        self._one_router_host(routers)
        for role, pool in (("prefill", prefill), ("decode", decode)):
            want = getattr(self.spec.pd, role).nodes
            if want is not None and want != (1 if colocated else len(pool)):
                raise self.error(f"pd.{role}.nodes", want,
                                 f"the number of {role} hosts ({len(pool)}: {list(pool)})",
                                 f"set pd.{role}.nodes: {len(pool)} or change the {role} pool")
        if self.spec.ports.api is not None:
            raise self.error("ports.api", self.spec.ports.api,
                             "unset for PD (prefill/decode ports come from the recipe)",
                             "remove ports.api")
        pools = {"prefill": self.ranked(prefill, "the prefill pool"),
                 "decode": self.ranked(decode, "the decode pool")}
        self.distinct_addresses(list(dict.fromkeys(pools["prefill"] + pools["decode"])), "the PD cluster")
        self._set_pool_addresses(pools)
        views = self._views(pools, colocated)
        first = views[0]
        self._absorb(first)
        self._check_type(first, "pd_cluster", "prefill")
        router = first.router
        if router is None:
            raise self.error("strategy", "pd_cluster", "a router command in the resolution",
                             "check the recipe's pd_cluster strategy")
        router_port = self.spec.ports.router or int(router.port or DEFAULT_ROUTER_PORT)
        self.common["ROUTER_PORT"] = str(router_port)
        mooncake_mounts = place_mooncake(self, roles, first.mooncake, self.decl.hosts) if first.mooncake else []
        self._place_pools(pools, views, colocated, mooncake_mounts)
        self._router(routers[0], list(router.argv), router_port, router.config, router.origin)

    def _pool_hosts(self, roles: Mapping[str, list[str]]) -> tuple[list[str], list[str], bool]:
        """The prefill and decode hosts, and whether they are one co-located pair."""
        prefill, decode, routers = roles["prefill"], roles["decode"], roles["router"]
        unassigned = [h for h in self.decl.hosts
                      if h not in prefill and h not in decode and h not in routers
                      and h not in roles["master"] and h not in roles["store"]]
        colocated = False
        if not prefill and not decode and len(unassigned) == 1:
            prefill = decode = list(unassigned)
            unassigned = []
        if unassigned:
            raise self.error("group", unassigned, "every host in a PD group to have a role",
                             f"set vllm_pd_role (prefill/decode/router) on {unassigned} or add "
                             f"them to {self.decl.group}_prefill / {self.decl.group}_decode")
        if not prefill:
            raise self.error("pd.prefill", [], "at least one prefill host",
                             f"add hosts to group {self.decl.group}_prefill or set "
                             "vllm_pd_role: prefill")
        if not decode:
            raise self.error("pd.decode", [], "at least one decode host",
                             f"add hosts to group {self.decl.group}_decode or set "
                             "vllm_pd_role: decode")
        both = sorted(set(prefill) & set(decode))
        if both:
            if len(prefill) == 1 and len(decode) == 1:
                colocated = True
            else:
                raise self.error("pd", both, "disjoint prefill and decode pools",
                                 f"give {both} only one of prefill/decode (a host may be in "
                                 "both only for a single co-located pair)")
        return prefill, decode, colocated

    def _set_pool_addresses(self, pools: Mapping[str, list[str]]) -> None:
        """The placeholders naming the pools' nodes, DP RPC ports and the router's bind address."""
        self.common["PREFILL_DP_RPC_PORT"] = str(self.spec.ports.prefill_dp_rpc)
        self.common["DECODE_DP_RPC_PORT"] = str(self.spec.ports.decode_dp_rpc)
        for role, pool in pools.items():
            for index, host in enumerate(pool):
                self.common[f"{role.upper()}_NODE_{index + 1}"] = self.address(host)
        self.common["ROUTER_HOST"] = self.spec.router.bind_address

    def _views(self, pools: Mapping[str, list[str]], colocated: bool) -> list[PlacementView]:
        """One resolution per rank view: ``r in range(max(P, D))`` (one for a co-located pair)."""
        if colocated:
            return [self.resolve({"pd_nodes": None})]
        views: list[PlacementView] = []
        for r in range(max(len(pools["prefill"]), len(pools["decode"]))):
            request = {}
            for role, pool in pools.items():
                entry: dict[str, Any] = {"nodes": len(pool), "rank": min(r, len(pool) - 1)}
                parallelism = getattr(self.spec.pd, role).parallelism
                if parallelism is not None:
                    entry["parallelism"] = parallelism
                request[role] = entry
            views.append(self.resolve({"pd_nodes": request}))
        return views

    def _place_pools(self, pools: Mapping[str, list[str]], views: Sequence[PlacementView],
                     colocated: bool, mounts: list[tuple[str, str, str]]) -> None:
        multi = {role: len(pool) > 1 for role, pool in pools.items()}
        for role, pool in pools.items():
            for rank, host in enumerate(pool):
                view = views[0] if colocated else views[rank]
                launch = view.engine(role)
                if launch is None:
                    raise self.error(f"pd.{role}", view.deploy_type,
                                     f"a {role} section in the resolution", "check the recipe")
                self.engine_process(
                    host=host, unit=self.unit_name(f"{role}-{rank}"), role=role, launch=launch,
                    rank=rank, pool=role, start_order=ORDER_FOLLOWER if launch.headless else ORDER_HEAD,
                    network_host=True, multi_host=multi[role],
                    restart_group=f"{self.decl.name}/{role}", mounts=mounts)
