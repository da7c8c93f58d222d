# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Building one placed process: an engine rank (argv, env, container, ports) or a service.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _unitfile as U
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._argv_tools import (
    EngineArgs,
    engine_args,
    fill_placeholders,
    find_placeholders,
    has_flag,
    split_joined_flags,
    url_host,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._container import router_docker_argv
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._deployment_spec import drain_seconds
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._inventory import (
    DeclaredDeployment,
    is_secret_env,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._launch import Launch, Origin
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._placer_context import PlacerContext
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._plan_model import (
    DEFAULT_API_PORT,
    DEFAULT_DP_RPC_PORT,
    DEFAULT_MASTER_PORT,
    NIXL_SIDE_CHANNEL,
    ORDER_HEAD,
    PlacementError,
    Port,
    Process,
    deployment_error,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._vendors import VENDORS

#: The fix for a value of a pinned record (``resolution_file``).
REPIN = "re-render and pin the new plan.json (or correct the value in the resolution file)"
_NO_SECRET_IN_ARGV = "no secret on the command line (argv is visible in `ps`, unit files and `docker inspect`)"


def drop_api_key(decl: DeclaredDeployment, argv: list[str], unit: str, origin: Optional[Origin] = None) -> list[str]:
    """``argv`` without ``--api-key $API_KEY`` (the key reaches vLLM through the secret env file).

    ``origin``: where a pinned record wrote the argv, named instead of ``advanced_args``."""
    out: list[str] = []
    index = 0
    while index < len(argv):
        token = argv[index]
        if token == "--api-key" or token.startswith("--api-key="):
            value = token.split("=", 1)[1] if "=" in token else (
                argv[index + 1] if index + 1 < len(argv) else "")
            step = 1 if "=" in token else 2
            if value not in ("$API_KEY", "${API_KEY}"):
                if origin is not None:  # a pinned record wrote it: named at its key in the resolution file
                    raise PlacementError(origin.argv, value="--api-key <literal>", expected=_NO_SECRET_IN_ARGV,
                                         fix=f"remove --api-key from the resolution file or {REPIN}; set "
                                             "vllm_deployment.api_key (vault) instead", source=decl.source)
                raise deployment_error(decl, "advanced_args", "--api-key <literal>", _NO_SECRET_IN_ARGV,
                                       "remove --api-key from advanced_args and set "
                                       "vllm_deployment.api_key (vault); it reaches vLLM as VLLM_API_KEY "
                                       "through the 0600 env file")
            if decl.spec.api_key is None:
                raise deployment_error(decl, "api_key", None,
                                       f"a value: {unit} uses --api-key $API_KEY",
                                       "set vllm_deployment.api_key (from a vault); it is passed as "
                                       "VLLM_API_KEY in the 0600 env file")
            index += step
            continue
        out.append(token)
        index += 1
    return out


def env_sources(where: str, host: str, address_source: Optional[str], recipe_env: Mapping[str, Any],
                node_env: Mapping[str, str], pinned: str = "") -> dict[str, str]:
    """env name -> the inventory key (or recipe entry) its value comes from.

    ``pinned``: the key of the recipe env in a pinned record (``resolution_file``), named instead of
    the recipe's env."""
    hostvar = f"hostvars[{host!r}]"
    filled_by = {"IFACE_NAME": f"{hostvar}.vllm_fabric_interface", "IB_IF": f"{hostvar}.vllm_ib_hca"}
    by_name = {"UCX_NET_DEVICES": f"{hostvar}.vllm_rdma_devices", "NCCL_IB_HCA": f"{hostvar}.vllm_ib_hca",
               "HF_ENDPOINT": f"{where}.weights.endpoint"}
    for name in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME", "TP_SOCKET_IFNAME"):
        by_name[name] = f"{hostvar}.vllm_fabric_interface"
    for name in ("VLLM_HOST_IP", "HCCL_IF_IP", "VLLM_NIXL_SIDE_CHANNEL_HOST"):
        by_name[name] = f"{hostvar}.{address_source or 'vllm_fabric_address'}"
    keys: dict[str, str] = {}
    for name, raw in recipe_env.items():
        placeholders = find_placeholders(str(raw))
        written = f"{pinned}.{name}" if pinned else f"{where}.recipe env {name}"
        keys[str(name)] = " / ".join(
            filled_by.get(p, f"{where}.placeholders.{p} or {hostvar}.vllm_placeholders.{p}")
            for p in placeholders) + (f" (filling {written})" if pinned else f" (filling the recipe's env {name})") \
            if placeholders else written
    keys.update({name: by_name.get(name, f"{where}.env.{name}") for name in node_env})
    return keys


def engine_ports(api_port: Optional[int], args: EngineArgs, env: Mapping[str, str]) -> list[Port]:
    """The ports an engine rank listens on, from its API port, final argv (``args``) and env."""
    ports: list[Port] = []
    if api_port is not None:
        ports.append(Port(api_port, "api"))
    if args.nnodes > 1 and args.node_rank == 0:
        ports.append(Port(args.master_port if args.master_port is not None else DEFAULT_MASTER_PORT, "mp-master"))
    if args.dp > args.dp_local and args.dp_start_rank == 0 and args.dp_address:
        ports.append(Port(args.dp_rpc_port if args.dp_rpc_port is not None else DEFAULT_DP_RPC_PORT, "dp-rpc"))
    base = env.get("VLLM_NIXL_SIDE_CHANNEL_PORT")
    if base is not None and base.isdigit():
        count = args.dp_local if args.dp > 1 else 1
        for offset in range(count):
            ports.append(Port(int(base) + args.dp_start_rank + offset, NIXL_SIDE_CHANNEL))
    return ports


@dataclass(frozen=True)
class EngineEnv:
    """An engine rank's environment, split by where it is written."""

    #: The plain env file's entries: the recipe's env (filled, order kept), then the node's.
    env: dict[str, str]
    #: The recipe's own env names (the upstream container profile passes only these).
    recipe_keys: list[str]
    #: 0600 secret env file entries (API key, HF token, secret-looking extra_env).
    secret: dict[str, str]
    #: env name -> the inventory key (or recipe entry) that set it.
    sources: dict[str, str]
    #: Accelerator indexes the recipe pins with a literal CUDA_VISIBLE_DEVICES, else None.
    pinned_gpus: Optional[list[int]]


class ProcessPlacer(PlacerContext):
    """Adds engine ranks and services (router, Mooncake) to the deployment's processes."""

    def engine_process(self, *, host: str, unit: str, role: str, launch: Launch,
                       rank: Optional[int] = None, pool: Optional[str] = None,
                       instance: Optional[int] = None, start_order: int = ORDER_HEAD,
                       network_host: bool = False, multi_host: bool = False,
                       restart_group: str = "", extra_env: Optional[Mapping[str, str]] = None,
                       mounts: Sequence[tuple[str, str, str]] = ()) -> Process:
        """One engine rank, built once from its launch: argv, env, container, ports and URLs."""
        address = self.address(host)
        mapping = self.mapping(host)
        if launch.origin is not None:
            self._check_pinned(launch.argv, launch.origin)
        argv, args = self._engine_argv(unit, role, launch.argv, mapping, launch.origin)
        api_port = None if args.headless else (
            int(args.port) if args.port and args.port.isdigit() else DEFAULT_API_PORT)
        env = self._engine_env(host=host, address=address, role=role, network_host=network_host,
                               recipe_env=launch.env, mapping=mapping, multi_host=multi_host,
                               extra_env=extra_env or {}, origin=launch.origin)
        health_url = f"http://{url_host(address)}:{api_port}/health" if api_port is not None else None
        config_dir = f"{self.spec.config_dir}/{self.decl.name}"
        proc = Process(deployment=self.decl.name, unit=unit, kind="engine", role=role, host=host,
                       address=address, rank=rank, pool=pool, instance=instance,
                       argv=argv, env=env.env, recipe_env_keys=env.recipe_keys, secret_env=env.secret,
                       env_keys=env.sources, ports=engine_ports(api_port, args, env.env),
                       gpu_need=len(env.pinned_gpus) if env.pinned_gpus else args.gpus_per_node,
                       pinned_gpus=env.pinned_gpus, runtime="docker", image=self.spec.image or self.image,
                       upstream_flags=self._upstream_flags(launch, mapping), mounts=list(mounts),
                       network_host=network_host, api_port=api_port, engine_args=args,
                       env_file=f"{config_dir}/{unit}.env",
                       secret_file=f"{config_dir}/{unit}.secret.env" if env.secret else "",
                       start_order=start_order, health_url=health_url,
                       metrics_url=health_url[:-len("/health")] + "/metrics" if health_url else None,
                       restart_group=restart_group or self.decl.name,
                       origin=launch.origin.argv if launch.origin is not None else "")
        self._check_engine(proc, launch)
        self.processes.append(proc)
        return proc

    def _check_pinned(self, argv: Sequence[str], origin: Origin) -> None:
        """Each word of a pinned record's argv, refused at its key in the resolution file."""
        for index, word in enumerate(argv):
            U.check_text(origin.word(index), word, fix=REPIN)

    def _engine_argv(self, unit: str, role: str, argv: Sequence[str], mapping: Mapping[str, str],
                     origin: Optional[Origin] = None) -> tuple[list[str], EngineArgs]:
        """The filled program argv (recipe --port, else ports.api appended) and what it says
        (:class:`EngineArgs`), read once more only when we appended flags."""
        program = split_joined_flags([str(t) for t in argv])
        if self.spec.api_key is not None or "$API_KEY" in program or any(
                t.startswith("--api-key") for t in program):
            program = drop_api_key(self.decl, program, unit, origin)
        program = fill_placeholders(program, mapping)
        args = engine_args(program)
        written = len(program)
        wanted = self.spec.ports.api
        if wanted is not None and role not in ("prefill", "decode"):
            if args.port is not None and args.port != str(wanted):
                raise self.error("ports.api", wanted,
                                 f"the recipe's own --port {args.port} (or unset)",
                                 "remove ports.api or drop --port from advanced_args")
            if args.port is None:
                program += ["--port", str(wanted)]
        if self.spec.ports.master is not None and args.nnodes > 1 and not has_flag(program, "--master-port"):
            program += ["--master-port", str(self.spec.ports.master)]
        drain = drain_seconds(self.spec.unit, self.spec.image or self.image)
        if drain and not args.headless and not has_flag(program, "--shutdown-timeout"):
            program += ["--shutdown-timeout", str(drain)]  # a planned stop drains (docs/operations.md#drain)
        if len(program) != written:  # flags of ours were appended: read the final argv
            args = engine_args(program)
        if args.served_name:  # the recipe's model or --served-model-name: a name plan.json and PLAN.md show
            U.check_name(f"vllm_deployment[{self.decl.name}] served model name (--served-model-name, else the "
                         "recipe's model)", args.served_name, what="a served model name")
        return program, args

    def _engine_env(self, *, host: str, address: str, role: str, network_host: bool, recipe_env: Mapping[str, Any],
                    mapping: Mapping[str, str], multi_host: bool, extra_env: Mapping[str, str],
                    origin: Optional[Origin] = None) -> EngineEnv:
        """Recipe env (filled, order kept), then per-node env; secrets go to the secret env."""
        final_env: dict[str, str] = {}
        for key, value in recipe_env.items():
            final_env[str(key)] = fill_placeholders(str(value) if not isinstance(value, bool)
                                                    else str(value).lower(), mapping)
        recipe_keys = list(final_env)
        pinned_gpus: Optional[list[int]] = None
        pinned = final_env.get("CUDA_VISIBLE_DEVICES")
        if pinned is not None and "$" not in pinned:
            try:
                pinned_gpus = [int(x) for x in pinned.split(",") if x.strip() != ""]
            except ValueError:
                if origin is not None:
                    raise PlacementError(f"{origin.env}.CUDA_VISIBLE_DEVICES", value=pinned,
                                         expected="comma-separated indexes", fix=REPIN,
                                         source=self.decl.source) from None
                raise self.error("env.CUDA_VISIBLE_DEVICES", pinned, "comma-separated indexes",
                                 "fix the recipe's CUDA_VISIBLE_DEVICES") from None
        node_env = self._node_env(host=host, address=address, role=role, network_host=network_host,
                                  recipe_env=final_env, multi_host=multi_host)
        node_env.update(extra_env)
        sources = env_sources(self.where, host, self.hosts[host].address_source, recipe_env, node_env,
                              origin.env if origin is not None else "")
        secret: dict[str, str] = {}
        for key, value in self.spec.extra_env.items():
            sources[key] = f"{self.where}.extra_env.{key}"
            if is_secret_env(key) or key in self.spec.vault_env:  # never in the plain env file, argv or plan
                secret[key] = value
                final_env.pop(key, None)
                node_env.pop(key, None)
            else:
                node_env[key] = value
        final_env.update(node_env)
        if self.spec.api_key is not None:
            secret["VLLM_API_KEY"] = self.spec.api_key.get_secret_value()
            sources["VLLM_API_KEY"] = f"{self.where}.api_key"
        if self.spec.weights.mode == "container" and self.spec.weights.token is not None:
            secret["HF_TOKEN"] = self.spec.weights.token.get_secret_value()
            sources["HF_TOKEN"] = f"{self.where}.weights.token"
        return EngineEnv(env=final_env, recipe_keys=recipe_keys, secret=secret, sources=sources,
                         pinned_gpus=pinned_gpus)

    def _node_env(self, *, host: str, address: str, role: str, network_host: bool, recipe_env: Mapping[str, str],
                  multi_host: bool) -> dict[str, str]:
        """The env this node sets: addresses, fabric interfaces, RDMA devices, vendor and weights env."""
        node_env: dict[str, str] = {}
        if network_host:
            node_env["VLLM_HOST_IP"] = address
        if multi_host:
            iface = self.interface(host, "multi-node NCCL/Gloo traffic")
            node_env["NCCL_SOCKET_IFNAME"] = iface
            node_env["GLOO_SOCKET_IFNAME"] = iface
            for name, source in VENDORS[self.vendor].fabric_env:  # the vendor's own fabric (Ascend HCCL)
                node_env[name] = address if source == "address" else iface
        if role in ("prefill", "decode"):
            node_env["VLLM_NIXL_SIDE_CHANNEL_HOST"] = address
        hspec = self.hosts[host]
        if hspec.rdma_devices and (role in ("prefill", "decode") or "UCX_NET_DEVICES" in recipe_env):
            node_env["UCX_NET_DEVICES"] = hspec.rdma_devices
        if self.spec.rdma and hspec.ib_hca and "NCCL_IB_HCA" not in recipe_env:
            node_env["NCCL_IB_HCA"] = hspec.ib_hca
        if self.vendor == "cpu":
            node_env.update(self.spec.cpu.env())
        if self.spec.weights.mode in ("download", "shared_fs", "import"):
            node_env["HF_HUB_OFFLINE"] = "1"
        if self.spec.weights.endpoint and self.spec.weights.mode == "container":
            node_env["HF_ENDPOINT"] = self.spec.weights.endpoint
        return node_env

    def _upstream_flags(self, launch: Launch, mapping: Mapping[str, str]) -> Optional[list[str]]:
        """The recipes site's docker flags for this rank (between ``docker run`` and the image), filled."""
        if launch.docker_argv is None:
            return None
        upstream = list(launch.docker_argv)
        if self.image not in upstream:
            if launch.origin is not None and self.spec.container_profile == "upstream":
                raise PlacementError(launch.origin.docker, value=upstream[:3] + ["..."],
                                     expected=f"a docker run argv with the image {self.image} "
                                              "(container_profile: upstream runs it)",
                                     fix=REPIN, source=self.decl.source)
            return None
        options: list[str] = fill_placeholders(upstream[2:upstream.index(self.image)], mapping)
        return options

    def _check_engine(self, proc: Process, launch: Launch) -> None:
        """No placeholder left in argv, env or upstream docker flags; every env value writable.

        A value of a pinned record (``resolution_file``) is refused at its key in that file."""
        origin = launch.origin
        self.check_filled(proc, proc.argv, "argv", origin.argv if origin else "")
        self.check_filled(proc, proc.env, "env", origin.env if origin else "")
        if proc.upstream_flags is not None and self.spec.container_profile == "upstream":
            if origin is not None and launch.docker_argv is not None:
                self._check_pinned(launch.docker_argv, Origin(argv=origin.docker))
            self.check_filled(proc, proc.upstream_flags, "docker", origin.docker if origin else "")
        for key, value in proc.env.items():
            source = proc.env_keys.get(key, f"{self.where}.env.{key}")
            pinned = origin is not None and source.startswith(origin.env)
            U.check_env_value(source, value, fix=f"simplify the value of {key} in the resolution file, or {REPIN}"
                              if pinned else f"simplify the value of {key} (extra_env / recipe env / host vars)")

    def service_process(self, *, host: str, unit: str, kind: str, argv: Sequence[str],
                        venv: str, start_order: int, port: Optional[int] = None,
                        port_purpose: str = "", health_path: Optional[str] = None,
                        container_image: Optional[str] = None, metrics_port: Optional[int] = None,
                        origin: Optional[Origin] = None) -> Process:
        """Router / Mooncake processes (venv binaries, or a container for the router), built once.

        ``origin``: where a pinned record wrote the service's command (its words are refused there)."""
        if origin is not None:
            self._check_pinned(argv, origin)
        address = self.address(host)
        program = fill_placeholders([str(t) for t in argv], self.mapping(host))
        env_file = f"{self.spec.config_dir}/{self.decl.name}/{unit}.env"
        ports = [Port(port, port_purpose)] if port is not None else []
        if metrics_port is not None:
            ports.append(Port(metrics_port, f"{kind}-metrics"))
        if container_image:
            exec_argv = router_docker_argv(name=unit, image=container_image, program_argv=program,
                                           env_file=env_file, docker_binary=self.spec.docker_binary)
        else:
            exec_argv = [f"{venv}/bin/{program[0]}"] + program[1:]
        proc = Process(deployment=self.decl.name, unit=unit, kind=kind, role=kind, host=host,
                       address=address, argv=program, ports=ports,
                       runtime="docker" if container_image else "venv", image=container_image or None,
                       network_host=True, exec_argv=exec_argv, env_file=env_file, start_order=start_order,
                       health_url=f"http://{url_host(address)}:{port}{health_path}"
                       if port is not None and health_path else None,
                       metrics_url=f"http://{url_host(address)}:{metrics_port}/metrics"
                       if metrics_port is not None else None,
                       restart_group=f"{self.decl.name}/{kind}", origin=origin.argv if origin else "")
        self.check_filled(proc, proc.argv, "argv", origin.argv if origin else "")
        self.processes.append(proc)
        return proc
