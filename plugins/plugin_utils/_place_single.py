# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Placer of ``single_node`` deployments: one host, or ``replicas`` copies behind a router.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._placer_base import PlacerBase
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._plan_model import (
    DEFAULT_ROUTER_PORT,
    ORDER_HEAD,
)


class SingleNodePlacer(PlacerBase):
    """One host, or ``replicas`` independent copies (one per engine host) behind a router."""

    def place_processes(self, gpu_hosts: Sequence[str], roles: Mapping[str, list[str]]) -> None:
        self._check_hosts(gpu_hosts, roles)
        replicas = self.spec.replicas or 1
        view = self.resolve({})
        self._absorb(view)
        launch = view.engine("single")
        if launch is None:
            raise self.error("strategy", self.spec.strategy, "a single-node resolution",
                             "pick a single_node_* strategy for a one-host group")
        urls: list[str] = []
        self.distinct_addresses(gpu_hosts, f"the replicas of group {self.decl.group}")
        for index, host in enumerate(gpu_hosts):
            if replicas == 1:
                proc = self.engine_process(host=host, unit=self.unit_name(""), role="single", launch=launch,
                                           start_order=ORDER_HEAD)
            else:
                proc = self.engine_process(host=host, unit=self.unit_name(f"r{index}"), role="replica",
                                           launch=launch, start_order=ORDER_HEAD,
                                           instance=index, pool=f"replica{index}",
                                           restart_group=f"{self.decl.name}/replica{index}")
            if proc.health_url:
                urls.append(proc.health_url[:-len("/health")])
        self.endpoint = urls[0] if urls else None
        if roles["router"]:
            self._replica_router(roles["router"][0], urls)

    def _check_hosts(self, gpu_hosts: Sequence[str], roles: Mapping[str, list[str]]) -> None:
        """One engine host per replica, no node_count, a router only in front of replicas."""
        self._no_extra_roles(roles, ("router",))
        replicas = self.spec.replicas or 1
        if len(gpu_hosts) != replicas:
            if self.spec.replicas is None:
                raise self.error("group", f"{self.decl.group} ({len(gpu_hosts)} hosts: {list(gpu_hosts)})",
                                 f"exactly 1 host for single-node strategy {self.spec.strategy or '(recommended)'}",
                                 "put one host in the group, set replicas: N for N independent copies "
                                 "behind a router, or pick a multi_node_* strategy")
            raise self.error("replicas", replicas,
                             f"the number of engine hosts in group {self.decl.group!r} ({len(gpu_hosts)})",
                             f"set replicas: {len(gpu_hosts)} or put {replicas} engine hosts in the group")
        if self.spec.node_count not in (None, 1):
            raise self.error("node_count", self.spec.node_count, "1 for a single-node strategy",
                             "remove node_count or pick a multi_node_* strategy")
        self._one_router_host(roles["router"])
        if roles["router"] and replicas == 1:
            raise self.error("pd.router_group", roles["router"],
                             "no router host for a single copy (it is served directly)",
                             "remove the router role, or set replicas: N with N engine hosts")

    def _replica_router(self, host: str, urls: list[str]) -> None:
        """The router in front of the replicas (its argv is ours: the recipe has none)."""
        router = self.spec.router
        port = self.spec.ports.router or DEFAULT_ROUTER_PORT
        argv = ["vllm-router", "--host", router.bind_address, "--port", str(port)]
        if router.policy:
            argv += ["--policy", router.policy]
        argv += ["--worker-urls", *urls]
        self._router(host, argv, port, {"policy": router.policy, "worker_urls": urls})
