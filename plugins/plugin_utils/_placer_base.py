# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""The base of the deploy-type placers: the resolution's image and vendor, role checks, the
router, the watchdogs (multi-node groups, single-node engines), and the finished :class:`DeploymentPlan`.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._argv_tools import (
    fill_placeholders,
    flag_value,
    has_flag,
    router_argv_for_pinned,
    url_host,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._container import HARDENED_VENDORS
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._inventory_checks import check_image
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._launch import Origin, PlacementView
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._placer_process import REPIN, ProcessPlacer
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._plan_model import (
    DEFAULT_ROUTER_METRICS_PORT,
    ORDER_ROUTER,
    ORDER_WATCHDOG,
    WATCHDOG_BINARY,
    WATCHDOG_PYTHON,
    ConfigFile,
    DeploymentPlan,
    PlacementError,
    Process,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._vendors import vendor_key

#: A deploy type as the engine names them (a pinned record's is checked: it names folders and rows).
_DEPLOY_TYPE_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
#: Engines that serve the API alone on one node; each gets its own watchdog (add_watchdogs).
SINGLE_ENGINE_ROLES = ("single", "replica", "instance")


class PlacerBase(ProcessPlacer):
    """Places one declared deployment; a subclass per deploy type places its processes."""

    def place(self, gpu_hosts: Sequence[str], roles: Mapping[str, list[str]]) -> DeploymentPlan:
        self.place_processes(gpu_hosts, roles)
        self.check_placeholders_used()
        self.add_watchdogs()
        return DeploymentPlan(
            name=self.decl.name, group=self.decl.group, spec=self.spec,
            deploy_type=self.deploy_type, vendor=self.vendor, hardware=self.engine.hardware_id,
            image=self.spec.image or self.image, processes=self.processes,
            config_files=self.config_files, resolutions=self.resolutions.records,
            endpoint=self.endpoint, start_timeout=self.start_timeout,
            selection=dict(self.engine.selection) or self.spec.selection(),
            min_vllm_version=getattr(self.engine, "min_vllm_version", None))

    def place_processes(self, gpu_hosts: Sequence[str], roles: Mapping[str, list[str]]) -> None:
        """Add this deploy type's processes and config files (``gpu_hosts``: the engine hosts)."""
        raise NotImplementedError

    # -- the resolution ------------------------------------------------------------------
    def _absorb(self, view: PlacementView) -> None:
        if self.image is None:
            self.image = view.image
            if view.origin is not None and self.spec.image is None:  # a pinned record's image
                if not view.image:
                    raise PlacementError(view.origin.image, value=view.image,
                                         expected="a container image (the pinned record gives none; "
                                                  "vllm_deployment.image would be used instead)",
                                         fix=REPIN, source=self.decl.source)
                check_image(view.origin.image, view.image)  # never a docker flag
        self.vendor = vendor_key(self.engine.hardware_profile, self.engine.hardware_id, view.docker_meta)
        env = view.env
        # the operator's extra_env wins over the recipe's (it also reaches the container env)
        timeout = self.spec.extra_env.get("VLLM_ENGINE_READY_TIMEOUT_S", env.get("VLLM_ENGINE_READY_TIMEOUT_S"))
        if timeout is not None and str(timeout).isdigit():
            self.start_timeout = int(str(timeout))
        if view.origin is not None and not _DEPLOY_TYPE_RE.match(view.deploy_type):
            raise PlacementError(view.origin.deploy_type, value=view.deploy_type,
                                 expected="a deploy type (single_node, multi_node, pd_cluster, kv_store_lb ...)",
                                 fix=REPIN, source=self.decl.source)
        self.deploy_type = view.deploy_type
        if self.spec.container_profile == "hardened" and self.vendor not in HARDENED_VENDORS:
            raise self.error("container_profile", "hardened",
                             f"a vendor with hardened flags ({', '.join(HARDENED_VENDORS)}); "
                             f"this hardware is {self.vendor}",
                             "set container_profile: upstream for this deployment")

    def _check_type(self, view: PlacementView, expected: str, engine: str) -> None:
        """The view is of the deploy type this placer places, with the engine process it starts from."""
        if view.origin is not None and view.deploy_type != expected:
            raise PlacementError(view.origin.deploy_type, value=view.deploy_type,
                                 expected=f"{expected} (strategy {self.spec.strategy!r} with these hosts places "
                                          f"a {expected} deployment)",
                                 fix=f"pin the plan.json of this strategy: {REPIN}", source=self.decl.source)
        if view.deploy_type != expected or engine not in view.engines:
            raise self.error("strategy", self.spec.strategy,
                             f"a {expected} resolution (got {view.deploy_type!r})",
                             "check strategy, node_count and the hosts in the group")

    # -- role and key checks ----------------------------------------------------------------
    def _no_extra_roles(self, roles: Mapping[str, list[str]], allowed: Sequence[str]) -> None:
        for role in ("prefill", "decode", "router", "master", "store"):
            if role not in allowed and roles[role]:
                raise self.error("strategy", self.spec.strategy or self.deploy_type,
                                 f"no {role} hosts for this strategy",
                                 f"remove the {role} role from {roles[role]} or use a strategy "
                                 "that has that role")

    def _refuse_single_node_keys(self, kind: str) -> None:
        """``replicas`` belongs to single-node strategies only: refused, never ignored."""
        if self.spec.replicas is not None and self.spec.replicas != 1:
            raise self.error("replicas", self.spec.replicas,
                             f"no replicas for a {kind} deployment (replicas copies a single-node "
                             "strategy, one per host)",
                             "remove replicas, or pick a single_node_* strategy")

    def _one_router_host(self, routers: Sequence[str]) -> None:
        if len(routers) > 1:
            raise self.error("pd.router_group", routers, "exactly one router host",
                             "keep vllm_pd_role: router on one host only")

    # -- router -------------------------------------------------------------------------------
    def _router(self, host: str, argv: list[str], port: int, config: Mapping[str, Any],
                origin: Optional[Origin] = None) -> None:
        """The router: ``origin`` where a pinned record wrote its command."""
        if origin is not None:
            self._check_pinned(argv, origin)
        spec = self.spec.router
        image = spec.image if spec.runtime == "container" else None
        argv, metrics_port = self._router_metrics(argv)
        proc = self.service_process(host=host, unit=self.unit_name("router"), kind="router",
                                    argv=router_argv_for_pinned(argv), venv=spec.venv,
                                    start_order=ORDER_ROUTER, port=port,
                                    port_purpose="router", health_path="/health",
                                    container_image=image, metrics_port=metrics_port, origin=origin)
        self.endpoint = f"http://{url_host(proc.address)}:{port}"
        content = {
            "argv": proc.argv,
            "routerConfig": fill_placeholders(dict(config), self.mapping(host)),
            "url": self.endpoint,
        }
        self.check_filled(proc, content, "router.json")
        self.config_files.append(ConfigFile(host=host, deployment=self.decl.name,
                                            dest=f"{self.spec.config_dir}/{self.decl.name}/router.json",
                                            name="router.json", content=content))

    def _router_metrics(self, argv: list[str]) -> tuple[list[str], int]:
        """The router argv with a reachable Prometheus endpoint, and that endpoint's port.

        vllm-router always serves metrics, on 127.0.0.1:29000 unless told otherwise: a second
        router on the host panics ("Address already in use") and a remote Prometheus cannot
        scrape it. Our deviation from the recipes site: when the argv lacks them, append
        ``--prometheus-host`` (``router.bind_address``) and ``--prometheus-port``
        (``ports.router_metrics``, else 29000). A recipe's own ``--prometheus-port`` is kept.
        """
        wanted = self.spec.ports.router_metrics
        given = flag_value(argv, "--prometheus-port")
        out = list(argv)
        if given is not None:
            if not given.isdigit() or (wanted is not None and int(given) != wanted):
                raise self.error("ports.router_metrics", wanted if wanted is not None else given,
                                 f"the router command's own --prometheus-port {given}",
                                 "remove ports.router_metrics (the recipe sets the port)")
            port = int(given)
        else:
            port = wanted if wanted is not None else DEFAULT_ROUTER_METRICS_PORT
            out += ["--prometheus-port", str(port)]
        if not has_flag(out, "--prometheus-host"):
            out += ["--prometheus-host", self.spec.router.bind_address]
        return out, port

    # -- watchdogs: multi-node groups and single-node engines ----------------------------------
    def _progress_probe(self, head: Process) -> list[str]:
        """The watchdog's completion probe of an engine that serves the API: a lost follower or a
        wedged engine can leave /health green, and only a request that never completes shows it.
        The API key stays in the secret env file."""
        unit_spec = self.spec.unit
        served = head.engine_args.served_name if head.engine_args is not None else None
        if not unit_spec.watchdog_probe_interval or not served or not head.health_url:
            return []
        out = ["--probe-url", head.health_url[:-len("/health")] + "/v1/completions", "--model", served,
               "--probe-every", str(unit_spec.watchdog_probe_interval),
               "--probe-timeout", str(unit_spec.watchdog_probe_timeout)]
        return out + (["--secret-env", head.secret_file] if head.secret_file else [])

    def _supervised(self) -> list[tuple[Process, list[Process]]]:
        """(head, members) of what the watchdogs supervise: every multi-node group (vllm issue
        #32136), and every single-node engine that serves the API alone (a single engine, a
        replica, a KV-offload instance), a group of one. Prefill and decode pools are not yet."""
        groups: dict[str, list[Process]] = {}
        out: list[tuple[Process, list[Process]]] = []
        for proc in self.processes:
            if proc.kind != "engine" or proc.engine_args is None:
                continue
            if proc.role in ("head", "worker") and proc.engine_args.nnodes > 1:
                groups.setdefault(proc.restart_group, []).append(proc)
            elif proc.role in SINGLE_ENGINE_ROLES and proc.engine_args.nnodes <= 1 and proc.health_url:
                out.append((proc, [proc]))
        for members in groups.values():
            head = next((p for p in members if p.role == "head" and p.health_url), None)
            if head is not None and len(members) > 1:
                out.append((head, members))
        return out

    def add_watchdogs(self) -> None:
        """One watchdog per rank of every multi-node group and per single-node engine.

        Each watches its head's ``/health`` (a single engine is its own head); when the head fails
        for longer than ``unit.watchdog_grace`` after having been healthy, it restarts its own
        engine, so a group forms again (headless followers never rejoin a restarted head on their
        own) and a wedged single engine serves again. The head's own watchdog also probes a
        completion, and restarts the head when no request completes for that long (a lost
        follower, a wedged engine).
        """
        unit_spec = self.spec.unit
        if not unit_spec.watchdog:
            return
        for head, members in self._supervised():
            for proc in members:
                argv = [WATCHDOG_PYTHON, WATCHDOG_BINARY, "--unit", proc.unit_file, "--head-url", head.health_url or "",
                        "--interval", str(unit_spec.watchdog_interval),
                        "--grace", str(unit_spec.watchdog_grace),
                        "--rearm-after", str(self.start_timeout),
                        "--state-file", f"/run/vllm-fleet/{proc.unit}.watchdog.json"]
                if proc.runtime == "docker":
                    argv += ["--container", proc.unit]
                if proc is head:
                    argv += self._progress_probe(head)
                if len(members) == 1:
                    argv.append("--single")
                unit = f"{proc.unit}-watchdog"
                self.processes.append(Process(
                    deployment=self.decl.name, unit=unit, kind="watchdog", role="watchdog", host=proc.host,
                    address=proc.address, rank=proc.rank, pool=proc.pool, instance=proc.instance, argv=argv,
                    runtime="host", exec_argv=list(argv), start_order=ORDER_WATCHDOG,
                    restart_group=proc.restart_group, network_host=True,
                    env_file=f"{self.spec.config_dir}/{self.decl.name}/{unit}.env"))
