# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Placement: bind a resolved recipe to inventory hosts.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

Input: the inventory (``hostvars`` + ``groups``) and, per declared
deployment, an :class:`BoundEngine` whose ``resolve(overrides)`` returns the
upstream resolution shape (``deployType`` single_node | multi_node |
pd_cluster | kv_store_lb, camelCase keys, plus a ``docker`` section shaped like
the recipes site's ``{image, meta, processes}``).

Placement calls ``resolve`` once per distinct rank view it needs:

* single_node: ``{}``
* multi_node: ``{"node_count": N}`` (head + ``workerArgvs`` cover every rank)
* pd_cluster: ``{"pd_nodes": None}`` for a co-located pair, else for
  ``r in range(max(P, D))``: ``{"pd_nodes": {"prefill": {"nodes": P, "rank":
  min(r, P-1)[, "parallelism": ..]}, "decode": {...}}}``
* kv_store_lb: ``{"node_count": n, "kv_instances": {"count": K, "current": i}}``
  for every instance ``i``

and produces a :class:`FleetPlan`: every process (engine ranks, router,
Mooncake master/store) bound to a host, every ``$PLACEHOLDER`` filled from
inventory variables, per-node fabric env set, accelerators assigned, ports
checked for collisions, and the exact ExecStart argv for each systemd unit.
Anything that cannot be placed raises :class:`PlacementError` (a
``SelectionError``) naming the key, the value and the fix.
"""

from __future__ import annotations

import ipaddress
import json
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._container import (
    COMPILE_CACHE_ENV,
    HARDENED_VENDORS,
    ContainerSpec,
    engine_docker_argv,
    router_docker_argv,
    visible_devices_var,
    with_secret_file,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _unitfile as U
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._errors import RecipeError
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._inventory import (
    DeclaredDeployment,
    DeploymentSpec,
    HostSpec,
    InventoryError,
    collect_deployments,
    host_spec,
    is_secret_env,
)

__all__ = [
    "BoundEngine",
    "ConfigFile",
    "DeploymentPlan",
    "FleetPlan",
    "PlacementError",
    "Port",
    "Process",
    "RecordedResolver",
    "Resolver",
    "build_plan",
    "fill_placeholders",
    "find_placeholders",
    "gpus_per_node",
    "plan_to_dict",
    "PLAN_SCHEMA",
]

PLAN_SCHEMA = "vllm_fleet.plan/v1"

Resolver = Callable[[Mapping[str, Any]], Mapping[str, Any]]

_PLACEHOLDER_RE = re.compile(r"\$\{([A-Z][A-Z0-9_]*)\}|\$([A-Z][A-Z0-9_]*)")

DEFAULT_API_PORT = 8000
DEFAULT_MASTER_PORT = 29501
DEFAULT_DP_RPC_PORT = 29550
DEFAULT_ROUTER_PORT = 30000
#: vllm-router's own default for ``--prometheus-port`` (it binds 127.0.0.1 unless told otherwise).
DEFAULT_ROUTER_METRICS_PORT = 29000

# Start order inside a deployment: lower starts first (followers before heads).
ORDER_MOONCAKE_MASTER = 0
ORDER_MOONCAKE_STORE = 5
ORDER_FOLLOWER = 10
ORDER_HEAD = 20
ORDER_ROUTER = 30
ORDER_WATCHDOG = 40

#: The group watchdog the engine role installs on every multi-node rank host (run by python3:
#: every host Ansible manages has it).
WATCHDOG_BINARY = "/usr/local/libexec/vllm-fleet/vllm-group-watchdog"
WATCHDOG_PYTHON = "/usr/bin/python3"


class PlacementError(InventoryError):
    """A deployment cannot be placed on the inventory as declared."""


def engine_error(decl: DeclaredDeployment, exc: Exception) -> PlacementError:
    """Re-raise a recipe/selection error of the engine against the inventory key that caused it."""
    key = str(getattr(exc, "key", "") or getattr(exc, "source", "") or "recipe")
    if key.startswith("pd_nodes"):
        key = "pd" + key[len("pd_nodes"):]
    loaded_path = "/" in key or key.endswith((".yaml", ".yml", ".json"))
    where = f"vllm_deployment[{decl.name}].{'recipe' if loaded_path else key}"
    expected = getattr(exc, "expected", "") or getattr(exc, "reason", "") or str(exc)
    reason = getattr(exc, "reason", "")
    if reason and reason != expected:
        expected = f"{expected} ({reason})"
    if loaded_path:
        fix = f"fix the recipe file {key} or point vllm_deployment.recipe elsewhere"
        value: Any = decl.spec.recipe
    else:
        fix = f"change {key.split('[', maxsplit=1)[0]} in the vllm_deployment of group {decl.group!r}"
        value = getattr(exc, "value", None)
    has_value = bool(getattr(exc, "has_value", True)) or loaded_path
    return PlacementError(where, value=value, expected=expected, fix=fix, has_value=has_value,
                          source=decl.source)


@dataclass
class BoundEngine:
    """The recipe engine bound to one deployment's selection.

    ``resolve(overrides)`` merges ``overrides`` (node_count, pd_nodes,
    kv_instances) into the deployment's selection and returns the resolution.
    ``hardware_profile`` is the taxonomy entry of the selected hardware
    (``brand``, ``generation``, ``gpu_count``) when known; ``hardware_id`` and
    ``selection`` describe the completed selection. An adapter may fill these
    three on its first ``resolve`` call: placement reads them afterwards.
    """

    resolve: Resolver
    hardware_profile: Optional[Mapping[str, Any]] = None
    hardware_id: Optional[str] = None
    #: A short label of the resolved selection for plan.json (variant, strategy ...).
    selection: Mapping[str, Any] = field(default_factory=dict)
    #: The recipe's ``min_vllm_version`` (the selected variant's, else the model's), enforced
    #: against the image's vLLM by ``vllm_argv_check``.
    min_vllm_version: Optional[str] = None


EngineFactory = Callable[[DeclaredDeployment], BoundEngine]


@dataclass(frozen=True)
class Port:
    number: int
    purpose: str


#: Port purpose of the NIXL side channel (one port per local data-parallel rank).
NIXL_SIDE_CHANNEL = "nixl-side-channel"


@dataclass(frozen=True)
class ConfigFile:
    """A configuration file the plan installs on a host (Mooncake JSON, router JSON)."""

    host: str
    deployment: str
    #: Absolute path on the host.
    dest: str
    #: File name inside the render directory (relative to the deployment/host folder).
    name: str
    content: Any
    mode: str = "0644"


@dataclass
class Process:
    """One supervised process: one systemd unit on one host."""

    deployment: str
    unit: str
    kind: str  # engine | router | mooncake_master | mooncake_store
    role: str  # single | head | worker | prefill | decode | router | mooncake_master | mooncake_store
    host: str
    address: str
    rank: Optional[int] = None
    pool: Optional[str] = None
    instance: Optional[int] = None
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    recipe_env_keys: list[str] = field(default_factory=list)
    secret_env: dict[str, str] = field(default_factory=dict, repr=False)
    #: env name -> the inventory key that set it (named when a value cannot be written).
    env_keys: dict[str, str] = field(default_factory=dict)
    ports: list[Port] = field(default_factory=list)
    gpus: list[int] = field(default_factory=list)
    gpu_need: int = 0
    pinned_gpus: Optional[list[int]] = None
    runtime: str = "docker"  # docker | venv
    image: Optional[str] = None
    upstream_flags: Optional[list[str]] = None
    mounts: list[tuple[str, str, str]] = field(default_factory=list)
    network_host: bool = False
    api_port: Optional[int] = None
    exec_argv: list[str] = field(default_factory=list)
    env_file: str = ""
    #: 0600 file with the secret env (``KEY=value`` lines), mounted into the container.
    secret_file: str = ""
    #: Host directory of this engine container's compile caches ("" for none).
    compile_cache: str = ""
    start_order: int = ORDER_HEAD
    health_url: Optional[str] = None
    #: Prometheus scrape URL (engine API servers, routers); None for headless ranks and the rest.
    metrics_url: Optional[str] = None
    restart_group: str = ""

    @property
    def unit_file(self) -> str:
        return f"{self.unit}.service"


@dataclass
class DeploymentPlan:
    name: str
    group: str
    spec: DeploymentSpec
    deploy_type: str
    vendor: str
    hardware: Optional[str]
    image: Optional[str]
    processes: list[Process] = field(default_factory=list)
    config_files: list[ConfigFile] = field(default_factory=list)
    resolutions: list[dict[str, Any]] = field(default_factory=list)
    endpoint: Optional[str] = None
    start_timeout: int = 1800
    selection: Mapping[str, Any] = field(default_factory=dict)
    min_vllm_version: Optional[str] = None

    @property
    def hosts(self) -> list[str]:
        return sorted({p.host for p in self.processes})


@dataclass
class FleetPlan:
    deployments: list[DeploymentPlan]
    hosts: dict[str, HostSpec]
    #: host -> deployment -> physical accelerator indexes
    gpu_assignment: dict[str, dict[str, list[int]]] = field(default_factory=dict)


# --------------------------------------------------------------------------------------
# argv helpers
# --------------------------------------------------------------------------------------

_SHORT_ALIASES = {
    "--tensor-parallel-size": ("-tp",),
    "--pipeline-parallel-size": ("-pp",),
    "--data-parallel-size": ("-dp",),
    "--data-parallel-size-local": ("-dpl",),
    "--data-parallel-start-rank": ("-dpr",),
    "--data-parallel-address": ("-dpa",),
    "--data-parallel-rpc-port": ("-dpp",),
}


def flag_value(argv: Sequence[str], name: str) -> Optional[str]:
    """Last value of ``name`` (``--x v`` or ``--x=v``; short aliases too)."""
    names = (name,) + _SHORT_ALIASES.get(name, ())
    found: Optional[str] = None
    for index, token in enumerate(argv):
        for candidate in names:
            if token == candidate and index + 1 < len(argv):
                found = argv[index + 1]
            elif token.startswith(candidate + "="):
                found = token[len(candidate) + 1:]
    return found


def has_flag(argv: Sequence[str], name: str) -> bool:
    return any(t == name or t.startswith(name + "=") for t in argv)


def _int_flag(argv: Sequence[str], name: str, default: int) -> int:
    value = flag_value(argv, name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        return default


def gpus_per_node(argv: Sequence[str]) -> int:
    """Accelerators one node needs for this vLLM argv.

    ``tp * pp * dp_local`` (``dp_local`` defaults to the DP size on one node);
    the mp backend splits ``tp * pp`` over ``--nnodes``.
    """
    tp = _int_flag(argv, "--tensor-parallel-size", 1)
    pp = _int_flag(argv, "--pipeline-parallel-size", 1)
    dp = _int_flag(argv, "--data-parallel-size", 1)
    dp_local = _int_flag(argv, "--data-parallel-size-local", dp)
    nnodes = max(1, _int_flag(argv, "--nnodes", 1))
    if has_flag(argv, "--nnodes") and nnodes > 1:
        return max(1, (tp * pp * dp) // nnodes)
    return max(1, tp * pp * dp_local)


def find_placeholders(value: Any) -> list[str]:
    """Every ``$NAME`` / ``${NAME}`` left in a string, list or mapping (sorted, unique)."""
    found: set[str] = set()

    def walk(item: Any) -> None:
        if isinstance(item, str):
            for match in _PLACEHOLDER_RE.finditer(item):
                found.add(match.group(1) or match.group(2))
        elif isinstance(item, Mapping):
            for key, sub in item.items():
                walk(key)
                walk(sub)
        elif isinstance(item, (list, tuple)):
            for sub in item:
                walk(sub)

    walk(value)
    return sorted(found)


def url_host(address: str) -> str:
    """``address`` as the host part of a URL: IPv6 literals in brackets (RFC 3986)."""
    return f"[{address}]" if ":" in address and not address.startswith("[") else address


def fill_placeholders(value: Any, mapping: Mapping[str, str]) -> Any:
    """Replace known ``$NAME`` / ``${NAME}`` tokens; unknown ones stay for the final check.

    An IPv6 address filled in where a URL host goes (after ``://``, or before ``:PORT``)
    is bracketed.
    """

    def sub(text: str) -> str:
        def repl(match: "re.Match[str]") -> str:
            name = match.group(1) or match.group(2)
            if name not in mapping:
                return match.group(0)
            value = mapping[name]
            in_url = (text[:match.start()].endswith(("://", "@"))
                      or re.match(r":[0-9]", text[match.end():match.end() + 2]) is not None)
            return url_host(value) if in_url and _is_ipv6(value) else value

        return _PLACEHOLDER_RE.sub(repl, text)

    if isinstance(value, str):
        return sub(value) if "$" in value else value
    if isinstance(value, Mapping):
        return {k: fill_placeholders(v, mapping) for k, v in value.items()}
    if isinstance(value, list):
        return [fill_placeholders(v, mapping) for v in value]
    return value


def _is_ipv6(value: str) -> bool:
    try:
        return ipaddress.ip_address(value).version == 6
    except ValueError:
        return False


def command_to_argv(command: str) -> list[str]:
    """Split a recipes-site shell command (``\\``-continued, ``#`` comment lines)."""
    lines = [line for line in command.splitlines() if not line.lstrip().startswith("#")]
    return shlex.split("\n".join(lines).replace("\\\n", " "))


def split_joined_flags(argv: Sequence[str]) -> list[str]:
    """Split argv elements that hold a flag and its value joined by a space (``"--max-model-len auto"``).

    Recipes keep such an element as one argv entry; the recipes site's shell command splits it, our
    ``ExecStart`` would pass it as one argument, and vLLM refuses it. Split the way the shell would
    (docs/engine.md, "Where the recipes site is wrong for a target"). Other elements (values such as
    JSON, which never start with ``-``) are kept as they are.
    """
    out: list[str] = []
    for token in argv:
        if token.startswith("-") and any(ch.isspace() for ch in token):
            try:
                out += shlex.split(token)
                continue
            except ValueError:
                pass
        out.append(token)
    return out


def router_argv_for_pinned(argv: Sequence[str]) -> list[str]:
    """A vllm-router argv the pinned vllm-router (0.1.17) accepts.

    The Mooncake ``kv_store_lb`` recipes render one ``--backend-url URL`` per instance, a flag
    vllm-router 0.1.17 (the newest published) does not have; it takes ``--worker-urls URL...``.
    The URLs move to one ``--worker-urls`` where the first ``--backend-url`` was (docs/engine.md).
    """
    out: list[str] = []
    urls: list[str] = []
    at: Optional[int] = None
    index = 0
    while index < len(argv):
        token = argv[index]
        if token == "--backend-url" and index + 1 < len(argv):
            urls.append(argv[index + 1])
            index += 2
        elif token.startswith("--backend-url="):
            urls.append(token.split("=", 1)[1])
            index += 1
        else:
            out.append(token)
            index += 1
            continue
        at = len(out) if at is None else at
    if at is not None:
        out[at:at] = ["--worker-urls", *urls]
    return out


# --------------------------------------------------------------------------------------
# Recorded resolutions (plan.json pins, resolution_file, tests)
# --------------------------------------------------------------------------------------

def overrides_key(overrides: Mapping[str, Any]) -> str:
    return json.dumps(overrides, sort_keys=True, separators=(",", ":"))


class RecordedResolver:
    """Serve resolutions from records ``{"overrides": {...}, "resolution": {...}}``.

    This is how a reviewed plan is pinned: plan.json lists, per deployment,
    every resolution placement asked for. Feeding them back through
    ``vllm_deployment.resolution_file`` reproduces the plan without the engine.
    """

    def __init__(self, records: Iterable[Mapping[str, Any]], source: str = "resolutions") -> None:
        self._by_key: dict[str, Mapping[str, Any]] = {}
        self.source = source
        for index, record in enumerate(records):
            if not isinstance(record, Mapping) or "resolution" not in record:
                raise PlacementError(f"{source}[{index}]", value=type(record).__name__,
                                     expected="a mapping with 'overrides' and 'resolution'",
                                     fix="use the 'resolutions' list of a plan.json deployment")
            self._by_key[overrides_key(record.get("overrides") or {})] = record["resolution"]

    def __call__(self, overrides: Mapping[str, Any]) -> Mapping[str, Any]:
        key = overrides_key(overrides)
        if key not in self._by_key:
            raise PlacementError(f"{self.source}", value=dict(overrides),
                                 expected="a recorded resolution for these overrides "
                                          f"(have: {sorted(self._by_key)})",
                                 fix="re-render with the engine and pin the new plan.json")
        return self._by_key[key]


# --------------------------------------------------------------------------------------
# Placement
# --------------------------------------------------------------------------------------

def _vendor(profile: Optional[Mapping[str, Any]], hardware_id: Optional[str],
            docker_meta: Mapping[str, Any]) -> str:
    brand = str((profile or {}).get("brand") or "").lower()
    generation = str((profile or {}).get("generation") or "").lower()
    hw = (hardware_id or "").lower()
    if brand in ("huawei", "ascend") or generation == "npu" or hw.startswith("ascend"):
        return "ascend"
    if brand == "amd" or docker_meta.get("isAmd"):
        return "amd"
    if brand == "google" or generation == "tpu" or docker_meta.get("isTpu"):
        return "tpu"
    if generation == "cpu":
        return "cpu"
    if brand == "intel" or docker_meta.get("isIntel") or docker_meta.get("isXpu"):
        return "intel"
    return "nvidia"


def _sanitize(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "-", name)


class _DeploymentPlacer:
    """Places one declared deployment (see module docstring)."""

    def __init__(self, decl: DeclaredDeployment, engine: BoundEngine,
                 hosts: Mapping[str, HostSpec], groups: Mapping[str, Sequence[str]]) -> None:
        self.decl = decl
        self.spec = decl.spec
        self.engine = engine
        self.hosts = hosts
        self.groups = groups
        self.where = f"vllm_deployment[{decl.name}]"
        self._cache: dict[str, Mapping[str, Any]] = {}
        self.resolutions: list[dict[str, Any]] = []
        self.processes: list[Process] = []
        self.config_files: list[ConfigFile] = []
        self.common: dict[str, str] = {}
        self.deploy_type = ""
        self.vendor = "nvidia"
        self.image: Optional[str] = None
        self.start_timeout = self.spec.unit.start_timeout
        self.endpoint: Optional[str] = None

    # -- errors ---------------------------------------------------------------------
    def error(self, key: str, value: Any, expected: str, fix: str) -> PlacementError:
        return PlacementError(f"{self.where}.{key}" if key else self.where, value=value,
                              expected=expected, fix=fix, source=self.decl.source,
                              has_value=value is not None)

    # -- resolution -----------------------------------------------------------------
    def resolve(self, overrides: Mapping[str, Any]) -> Mapping[str, Any]:
        key = overrides_key(overrides)
        if key not in self._cache:
            try:
                result = self.engine.resolve(dict(overrides))
            except PlacementError:
                raise
            except RecipeError as exc:
                raise engine_error(self.decl, exc) from None
            if not isinstance(result, Mapping) or "deployType" not in result:
                raise self.error("recipe", self.spec.recipe,
                                 "the engine to return a resolution with deployType",
                                 "check the recipe and selection")
            self._cache[key] = result
            self.resolutions.append({"overrides": json.loads(key), "resolution": result})
        return self._cache[key]

    # -- host roles -----------------------------------------------------------------
    def _child(self, explicit: Optional[str], suffix: str) -> set[str]:
        name = explicit or f"{self.decl.group}_{suffix}"
        if explicit and explicit not in self.groups:
            raise self.error(f"pd.{suffix}_group", explicit, "an existing inventory group",
                             f"create group {explicit!r} or remove pd.{suffix}_group")
        return set(self.groups.get(name) or ())

    def roles(self) -> dict[str, list[str]]:
        """Role -> hosts (inventory order) for PD/router/Mooncake roles."""
        order = list(self.decl.hosts)
        pd = self.spec.pd
        sets = {
            "prefill": self._child(pd.prefill_group, "prefill"),
            "decode": self._child(pd.decode_group, "decode"),
            "router": self._child(pd.router_group, "router"),
            "master": self._child(None, "mooncake_master"),
            "store": self._child(None, "mooncake_store"),
        }
        for host in order:
            spec = self.hosts[host]
            for role in spec.pd_roles:
                sets[role].add(host)
            for role in spec.mooncake_roles:
                sets[role].add(host)
        for role, members in sets.items():
            outside = sorted(members - set(order))
            if outside:
                raise self.error("group", self.decl.group, f"{role} hosts inside the deployment group",
                                 f"add {outside} to group {self.decl.group!r} or drop their {role} role")
        return {role: [h for h in order if h in members] for role, members in sets.items()}

    def ranked(self, hosts: Sequence[str], what: str) -> list[str]:
        """Order hosts by ``vllm_node_rank`` where given, inventory order otherwise."""
        count = len(hosts)
        slots: list[Optional[str]] = [None] * count
        rest = []
        for host in hosts:
            rank = self.hosts[host].node_rank
            if rank is None:
                rest.append(host)
                continue
            if rank >= count:
                raise PlacementError(f"hostvars[{host!r}].vllm_node_rank", value=rank,
                                     expected=f"a rank below {count} ({what} has {count} hosts)",
                                     fix=f"use ranks 0..{count - 1} in {what}")
            if slots[rank] is not None:
                raise PlacementError(f"hostvars[{host!r}].vllm_node_rank", value=rank,
                                     expected=f"a rank used once in {what}",
                                     fix=f"{slots[rank]} and {host} both claim rank {rank}; renumber one")
            slots[rank] = host
        it = iter(rest)
        ordered = [slot if slot is not None else next(it) for slot in slots]
        self.distinct_addresses(ordered, what)
        return ordered

    def distinct_addresses(self, hosts: Sequence[str], what: str) -> None:
        """Ranks on different hosts must have different addresses (each rank binds its own)."""
        seen: dict[str, str] = {}
        for host in hosts:
            address = self.address(host)
            if address in seen and seen[address] != host:
                raise PlacementError(f"hostvars[{host!r}].{self.hosts[host].address_source or 'vllm_fabric_address'}",
                                     value=address,
                                     expected=f"an address of its own ({seen[address]} in {what} has it too)",
                                     fix=f"give {host} and {seen[address]} their own cluster-network "
                                         "addresses (vllm_fabric_address)")
            seen.setdefault(address, host)

    # -- placeholders ----------------------------------------------------------------
    def address(self, host: str) -> str:
        spec = self.hosts[host]
        if spec.address is None:
            src = f" ({spec.address_source})" if spec.address_source else ""
            raise PlacementError(f"hostvars[{host!r}].vllm_fabric_address", has_value=False,
                                 expected=f"a routable IP address for {host}{src}",
                                 fix=f"set vllm_fabric_address (or ansible_host) on {host} to its "
                                     "cluster-network IP, or render with cached facts")
        return spec.address

    def interface(self, host: str, why: str) -> str:
        iface = self.hosts[host].interface
        if iface is None:
            raise PlacementError(f"hostvars[{host!r}].vllm_fabric_interface", has_value=False,
                                 expected=f"one concrete interface name ({why})",
                                 fix=f"set vllm_fabric_interface on {host}, e.g. ens5")
        return iface

    def mapping(self, host: str) -> dict[str, str]:
        spec = self.hosts[host]
        out: dict[str, str] = {}
        out.update(self.spec.placeholders)
        out.update(spec.placeholders)
        out.update(self.common)
        if spec.interface is not None:
            out["IFACE_NAME"] = spec.interface
        if spec.ib_hca is not None:
            out["IB_IF"] = spec.ib_hca
        out["MOONCAKE_DEVICE_NAME"] = spec.mooncake_device
        return out

    def check_filled(self, proc: Process, value: Any, what: str) -> None:
        left = find_placeholders(value)
        if not left:
            return
        name = left[0]
        fixes = {
            "IFACE_NAME": f"set vllm_fabric_interface on {proc.host} (one NIC name, e.g. ens5)",
            "IB_IF": f"set vllm_ib_hca on {proc.host} (e.g. mlx5_0) or "
                     "vllm_deployment.placeholders.IB_IF",
        }
        # the key named is the one to set, not the internal place the placeholder sits in
        keys = {"IFACE_NAME": f"hostvars[{proc.host!r}].vllm_fabric_interface",
                "IB_IF": f"hostvars[{proc.host!r}].vllm_ib_hca"}
        raise PlacementError(
            keys.get(name, f"{self.where}.placeholders.{name}"), value=f"${name}",
            expected=f"every placeholder filled on host {proc.host} (unresolved in the {what} of "
                     f"{proc.unit}: " + ", ".join("$" + n for n in left) + ")",
            fix=fixes.get(name, f"set vllm_deployment.placeholders.{name} or host var "
                                f"vllm_placeholders.{name} on {proc.host}"),
            source=self.decl.source)

    # -- building processes ------------------------------------------------------------
    def unit_name(self, suffix: str) -> str:
        base = f"vllm-{_sanitize(self.decl.name)}"
        return f"{base}-{suffix}" if suffix else base

    def _api_key_filter(self, argv: list[str], unit: str) -> list[str]:
        out: list[str] = []
        index = 0
        while index < len(argv):
            token = argv[index]
            if token == "--api-key" or token.startswith("--api-key="):
                value = token.split("=", 1)[1] if "=" in token else (
                    argv[index + 1] if index + 1 < len(argv) else "")
                step = 1 if "=" in token else 2
                if value not in ("$API_KEY", "${API_KEY}"):
                    raise self.error("advanced_args", "--api-key <literal>",
                                     "no secret on the command line (argv is visible in "
                                     "`ps`, unit files and `docker inspect`)",
                                     "remove --api-key from advanced_args and set "
                                     "vllm_deployment.api_key (vault); it reaches vLLM as VLLM_API_KEY "
                                     "through the 0600 env file")
                if self.spec.api_key is None:
                    raise self.error("api_key", None,
                                     f"a value: {unit} uses --api-key $API_KEY",
                                     "set vllm_deployment.api_key (from a vault); it is passed as "
                                     "VLLM_API_KEY in the 0600 env file")
                index += step
                continue
            out.append(token)
            index += 1
        return out

    def engine_process(self, *, host: str, unit: str, role: str, argv: Sequence[str],
                       env: Mapping[str, Any], docker_proc: Optional[Mapping[str, Any]],
                       rank: Optional[int] = None, pool: Optional[str] = None,
                       instance: Optional[int] = None, start_order: int = ORDER_HEAD,
                       network_host: bool = False, multi_host: bool = False,
                       restart_group: str = "", extra_env: Optional[Mapping[str, str]] = None,
                       mounts: Sequence[tuple[str, str, str]] = ()) -> Process:
        address = self.address(host)
        proc = Process(deployment=self.decl.name, unit=unit, kind="engine", role=role, host=host,
                       address=address, rank=rank, pool=pool, instance=instance,
                       start_order=start_order, network_host=network_host,
                       restart_group=restart_group or self.decl.name)
        mapping = self.mapping(host)
        program = split_joined_flags([str(t) for t in argv])
        if self.spec.api_key is not None or "$API_KEY" in program or any(
                t.startswith("--api-key") for t in program):
            program = self._api_key_filter(program, unit)
        program = fill_placeholders(program, mapping)

        # API port: recipe --port, else ports.api (appended), else vLLM's 8000.
        headless = has_flag(program, "--headless")
        recipe_port = flag_value(program, "--port")
        wanted = self.spec.ports.api
        if wanted is not None and role not in ("prefill", "decode"):
            if recipe_port is not None and recipe_port != str(wanted):
                raise self.error("ports.api", wanted,
                                 f"the recipe's own --port {recipe_port} (or unset)",
                                 "remove ports.api or drop --port from advanced_args")
            if recipe_port is None:
                program += ["--port", str(wanted)]
                recipe_port = str(wanted)
        if self.spec.ports.master is not None and has_flag(program, "--nnodes") \
                and not has_flag(program, "--master-port"):
            program += ["--master-port", str(self.spec.ports.master)]
        api_port = int(recipe_port) if recipe_port and recipe_port.isdigit() else DEFAULT_API_PORT
        proc.argv = program
        proc.api_port = None if headless else api_port

        # Environment: recipe env (filled, order kept), then per-node env.
        final_env: dict[str, str] = {}
        for key, value in env.items():
            final_env[str(key)] = fill_placeholders(str(value) if not isinstance(value, bool)
                                                    else str(value).lower(), mapping)
        proc.recipe_env_keys = list(final_env)
        pinned = final_env.get("CUDA_VISIBLE_DEVICES")
        if pinned is not None and "$" not in pinned:
            try:
                proc.pinned_gpus = [int(x) for x in pinned.split(",") if x.strip() != ""]
            except ValueError:
                raise self.error("env.CUDA_VISIBLE_DEVICES", pinned, "comma-separated indexes",
                                 "fix the recipe's CUDA_VISIBLE_DEVICES") from None
        proc.gpu_need = len(proc.pinned_gpus) if proc.pinned_gpus else gpus_per_node(program)

        node_env: dict[str, str] = {}
        if network_host:
            node_env["VLLM_HOST_IP"] = address
        if multi_host:
            iface = self.interface(host, "multi-node NCCL/Gloo traffic")
            node_env["NCCL_SOCKET_IFNAME"] = iface
            node_env["GLOO_SOCKET_IFNAME"] = iface
            if self.vendor == "ascend":
                node_env["HCCL_IF_IP"] = address
                node_env["HCCL_SOCKET_IFNAME"] = iface
                node_env["TP_SOCKET_IFNAME"] = iface
        if role in ("prefill", "decode"):
            node_env["VLLM_NIXL_SIDE_CHANNEL_HOST"] = address
        hspec = self.hosts[host]
        if hspec.rdma_devices and (role in ("prefill", "decode") or "UCX_NET_DEVICES" in final_env):
            node_env["UCX_NET_DEVICES"] = hspec.rdma_devices
        if self.spec.rdma and hspec.ib_hca and "NCCL_IB_HCA" not in final_env:
            node_env["NCCL_IB_HCA"] = hspec.ib_hca
        if self.vendor == "cpu":
            node_env.update(self.spec.cpu.env())
        if self.spec.weights.mode in ("download", "shared_fs", "import"):
            node_env["HF_HUB_OFFLINE"] = "1"
        if self.spec.weights.endpoint and self.spec.weights.mode == "container":
            node_env["HF_ENDPOINT"] = self.spec.weights.endpoint
        node_env.update(extra_env or {})
        proc.env_keys = self._env_keys(host, env, node_env)
        for key, value in self.spec.extra_env.items():
            proc.env_keys[key] = f"{self.where}.extra_env.{key}"
            if is_secret_env(key):  # a secret never goes to the plain env file, argv or plan
                proc.secret_env[key] = value
                final_env.pop(key, None)
                node_env.pop(key, None)
            else:
                node_env[key] = value
        for key, value in node_env.items():
            final_env[key] = value
        proc.env = final_env

        if self.spec.api_key is not None:
            proc.secret_env["VLLM_API_KEY"] = self.spec.api_key.get_secret_value()
            proc.env_keys["VLLM_API_KEY"] = f"{self.where}.api_key"
        if self.spec.weights.mode == "container" and self.spec.weights.token is not None:
            proc.secret_env["HF_TOKEN"] = self.spec.weights.token.get_secret_value()
            proc.env_keys["HF_TOKEN"] = f"{self.where}.weights.token"

        # Container: image and the upstream flags (for the upstream profile).
        proc.runtime = "docker"
        proc.image = self.spec.image or self.image
        proc.mounts = list(mounts)
        if docker_proc is not None:
            upstream = [str(t) for t in docker_proc.get("argv") or []]
            image = self.image
            if image in upstream:
                cut = upstream.index(image)
                proc.upstream_flags = fill_placeholders(upstream[2:cut], mapping)
        if proc.health_url is None and proc.api_port is not None:
            proc.health_url = f"http://{url_host(address)}:{proc.api_port}/health"
        if proc.health_url is not None:
            proc.metrics_url = proc.health_url[:-len("/health")] + "/metrics"
        proc.env_file = f"{self.spec.config_dir}/{self.decl.name}/{unit}.env"
        if proc.secret_env:
            proc.secret_file = f"{self.spec.config_dir}/{self.decl.name}/{unit}.secret.env"

        self.check_filled(proc, proc.argv, "argv")
        self.check_filled(proc, proc.env, "env")
        if proc.upstream_flags is not None and self.spec.container_profile == "upstream":
            self.check_filled(proc, proc.upstream_flags, "docker")
        for key, value in proc.env.items():
            U.check_env_value(proc.env_keys.get(key, f"{self.where}.env.{key}"), value,
                              fix=f"simplify the value of {key} (extra_env / recipe env / host vars)")
        self._ports(proc)
        self.processes.append(proc)
        return proc

    def _env_keys(self, host: str, recipe_env: Mapping[str, Any],
                  node_env: Mapping[str, str]) -> dict[str, str]:
        """env name -> the inventory key (or recipe entry) its value comes from."""
        hostvar = f"hostvars[{host!r}]"
        filled_by = {"IFACE_NAME": f"{hostvar}.vllm_fabric_interface", "IB_IF": f"{hostvar}.vllm_ib_hca"}
        by_name = {"UCX_NET_DEVICES": f"{hostvar}.vllm_rdma_devices", "NCCL_IB_HCA": f"{hostvar}.vllm_ib_hca",
                   "HF_ENDPOINT": f"{self.where}.weights.endpoint"}
        for name in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME", "TP_SOCKET_IFNAME"):
            by_name[name] = f"{hostvar}.vllm_fabric_interface"
        for name in ("VLLM_HOST_IP", "HCCL_IF_IP", "VLLM_NIXL_SIDE_CHANNEL_HOST"):
            by_name[name] = f"{hostvar}.{self.hosts[host].address_source or 'vllm_fabric_address'}"
        keys: dict[str, str] = {}
        for name, raw in recipe_env.items():
            placeholders = find_placeholders(str(raw))
            keys[str(name)] = " / ".join(
                filled_by.get(p, f"{self.where}.placeholders.{p} or {hostvar}.vllm_placeholders.{p}")
                for p in placeholders) + f" (filling the recipe's env {name})" if placeholders \
                else f"{self.where}.recipe env {name}"
        keys.update({name: by_name.get(name, f"{self.where}.env.{name}") for name in node_env})
        return keys

    def _ports(self, proc: Process) -> None:
        argv = proc.argv
        ports: list[Port] = []
        if proc.api_port is not None:
            ports.append(Port(proc.api_port, "api"))
        nnodes = _int_flag(argv, "--nnodes", 1)
        if nnodes > 1 and _int_flag(argv, "--node-rank", 0) == 0:
            ports.append(Port(_int_flag(argv, "--master-port", DEFAULT_MASTER_PORT), "mp-master"))
        dp = _int_flag(argv, "--data-parallel-size", 1)
        dp_local = _int_flag(argv, "--data-parallel-size-local", dp)
        start = _int_flag(argv, "--data-parallel-start-rank", 0)
        if dp > dp_local and start == 0 and has_flag(argv, "--data-parallel-address"):
            ports.append(Port(_int_flag(argv, "--data-parallel-rpc-port", DEFAULT_DP_RPC_PORT),
                              "dp-rpc"))
        base = proc.env.get("VLLM_NIXL_SIDE_CHANNEL_PORT")
        if base is not None and base.isdigit():
            count = dp_local if dp > 1 else 1
            for offset in range(count):
                ports.append(Port(int(base) + start + offset, NIXL_SIDE_CHANNEL))
        proc.ports = ports

    def service_process(self, *, host: str, unit: str, kind: str, argv: Sequence[str],
                        venv: str, start_order: int, port: Optional[int] = None,
                        port_purpose: str = "", health_path: Optional[str] = None,
                        container_image: Optional[str] = None) -> Process:
        """Router / Mooncake processes (venv binaries, or a container for the router)."""
        address = self.address(host)
        mapping = self.mapping(host)
        program = fill_placeholders([str(t) for t in argv], mapping)
        proc = Process(deployment=self.decl.name, unit=unit, kind=kind, role=kind, host=host,
                       address=address, argv=program, start_order=start_order,
                       restart_group=f"{self.decl.name}/{kind}", network_host=True)
        proc.env_file = f"{self.spec.config_dir}/{self.decl.name}/{unit}.env"
        if port is not None:
            proc.ports = [Port(port, port_purpose)]
            if health_path:
                proc.health_url = f"http://{url_host(address)}:{port}{health_path}"
        if container_image:
            proc.runtime = "docker"
            proc.image = container_image
            proc.exec_argv = router_docker_argv(name=unit, image=container_image, program_argv=program,
                                                env_file=proc.env_file,
                                                docker_binary=self.spec.docker_binary)
        else:
            proc.runtime = "venv"
            proc.exec_argv = [f"{venv}/bin/{program[0]}"] + program[1:]
        self.check_filled(proc, proc.argv, "argv")
        self.processes.append(proc)
        return proc

    # -- deploy types ----------------------------------------------------------------
    def place(self) -> DeploymentPlan:
        roles = self.roles()
        role_only = set(roles["router"]) | set(roles["master"]) | set(roles["store"])
        gpu_hosts = [h for h in self.decl.hosts
                     if h not in role_only or h in roles["prefill"] or h in roles["decode"]]
        kind = self._expected_type(gpu_hosts, roles)
        if self.spec.kv_instances is not None and kind != "kv_store_lb":
            raise self.error("kv_instances", self.spec.kv_instances,
                             "kv_instances only with a Mooncake store (kv_offload: "
                             f"kv_store_centralized_mooncake or kv_store_distributed_mooncake); this "
                             f"deployment is {kind}",
                             "remove kv_instances, or set kv_offload to a Mooncake store")
        if kind == "pd_cluster":
            self.place_pd(roles)
        elif kind == "kv_store_lb":
            self.place_kv(roles, gpu_hosts)
        elif kind == "multi_node":
            self.place_multi(gpu_hosts, roles)
        else:
            self.place_single(gpu_hosts, roles)
        self.add_watchdogs()
        return DeploymentPlan(
            name=self.decl.name, group=self.decl.group, spec=self.spec,
            deploy_type=self.deploy_type, vendor=self.vendor, hardware=self.engine.hardware_id,
            image=self.spec.image or self.image, processes=self.processes,
            config_files=self.config_files, resolutions=self.resolutions,
            endpoint=self.endpoint, start_timeout=self.start_timeout,
            selection=dict(self.engine.selection) or self.spec.selection(),
            min_vllm_version=getattr(self.engine, "min_vllm_version", None))

    def _expected_type(self, gpu_hosts: Sequence[str], roles: Mapping[str, list[str]]) -> str:
        strategy = self.spec.strategy
        kv = self.spec.kv_offload or ""
        if strategy is None:
            probe = self.resolve({})
            kind = str(probe.get("deployType"))
            return kind
        if strategy == "pd_cluster":
            return "pd_cluster"
        if kv.startswith("kv_store_"):
            return "kv_store_lb"
        if strategy.startswith("multi_node"):
            return "multi_node"
        return "single_node"

    def _absorb(self, res: Mapping[str, Any]) -> None:
        docker = res.get("docker") or {}
        meta = docker.get("meta") or {}
        if self.image is None:
            self.image = docker.get("image") or meta.get("image")
        self.vendor = _vendor(self.engine.hardware_profile, self.engine.hardware_id, meta)
        env = res.get("env") or (res.get("vllm") or {}).get("env") or \
            (res.get("prefill") or {}).get("env") or {}
        # the operator's extra_env wins over the recipe's (it also reaches the container env)
        timeout = self.spec.extra_env.get("VLLM_ENGINE_READY_TIMEOUT_S", env.get("VLLM_ENGINE_READY_TIMEOUT_S"))
        if timeout is not None and str(timeout).isdigit():
            self.start_timeout = int(str(timeout))
        self.deploy_type = str(res.get("deployType"))
        if self.spec.container_profile == "hardened" and self.vendor not in HARDENED_VENDORS:
            raise self.error("container_profile", "hardened",
                             f"a vendor with hardened flags ({', '.join(HARDENED_VENDORS)}); "
                             f"this hardware is {self.vendor}",
                             "set container_profile: upstream for this deployment")

    def _check_type(self, res: Mapping[str, Any], expected: str, shape_key: str) -> None:
        if res.get("deployType") != expected or shape_key not in res:
            raise self.error("strategy", self.spec.strategy,
                             f"a {expected} resolution (got {res.get('deployType')!r})",
                             "check strategy, node_count and the hosts in the group")

    def _no_extra_roles(self, roles: Mapping[str, list[str]], allowed: Sequence[str]) -> None:
        for role in ("prefill", "decode", "router", "master", "store"):
            if role not in allowed and roles[role]:
                raise self.error("strategy", self.spec.strategy or self.deploy_type,
                                 f"no {role} hosts for this strategy",
                                 f"remove the {role} role from {roles[role]} or use a strategy "
                                 "that has that role")

    def place_single(self, gpu_hosts: Sequence[str], roles: Mapping[str, list[str]]) -> None:
        """One host, or ``replicas`` independent copies (one per engine host) behind a router."""
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
        if len(roles["router"]) > 1:
            raise self.error("pd.router_group", roles["router"], "exactly one router host",
                             "keep vllm_pd_role: router on one host only")
        if roles["router"] and replicas == 1:
            raise self.error("pd.router_group", roles["router"],
                             "no router host for a single copy (it is served directly)",
                             "remove the router role, or set replicas: N with N engine hosts")
        res = self.resolve({})
        self._absorb(res)
        if "argv" not in res:
            raise self.error("strategy", self.spec.strategy, "a single-node resolution",
                             "pick a single_node_* strategy for a one-host group")
        docker = (res.get("docker") or {}).get("processes") or {}
        urls: list[str] = []
        self.distinct_addresses(gpu_hosts, f"the replicas of group {self.decl.group}")
        for index, host in enumerate(gpu_hosts):
            if replicas == 1:
                proc = self.engine_process(host=host, unit=self.unit_name(""), role="single",
                                           argv=res["argv"], env=res.get("env") or {},
                                           docker_proc=docker.get("single"), start_order=ORDER_HEAD)
            else:
                proc = self.engine_process(host=host, unit=self.unit_name(f"r{index}"), role="replica",
                                           argv=res["argv"], env=res.get("env") or {},
                                           docker_proc=docker.get("single"), start_order=ORDER_HEAD,
                                           instance=index, pool=f"replica{index}",
                                           restart_group=f"{self.decl.name}/replica{index}")
            if proc.health_url:
                urls.append(proc.health_url[:-len("/health")])
        self.endpoint = urls[0] if urls else None
        if roles["router"]:
            router = self.spec.router
            port = self.spec.ports.router or DEFAULT_ROUTER_PORT
            argv = ["vllm-router", "--host", router.bind_address, "--port", str(port)]
            if router.policy:
                argv += ["--policy", router.policy]
            argv += ["--worker-urls", *urls]
            self._router(roles["router"][0], argv, port, {"policy": router.policy, "worker_urls": urls})

    def add_watchdogs(self) -> None:
        """One group watchdog per rank of every multi-node group (vllm issue #32136).

        Each watches the group head's ``/health``; when the head fails for longer than
        ``unit.watchdog_grace`` after having been healthy, it restarts its own rank so the
        group forms again (headless followers never rejoin a restarted head on their own).
        """
        unit_spec = self.spec.unit
        if not unit_spec.watchdog:
            return
        groups: dict[str, list[Process]] = {}
        for proc in self.processes:
            if proc.kind == "engine" and proc.role in ("head", "worker") and has_flag(proc.argv, "--nnodes"):
                groups.setdefault(proc.restart_group, []).append(proc)
        for members in groups.values():
            head = next((p for p in members if p.role == "head" and p.health_url), None)
            if head is None or len(members) < 2:
                continue
            for proc in members:
                argv = [WATCHDOG_PYTHON, WATCHDOG_BINARY, "--unit", proc.unit_file, "--head-url", head.health_url or "",
                        "--interval", str(unit_spec.watchdog_interval),
                        "--grace", str(unit_spec.watchdog_grace),
                        "--rearm-after", str(self.start_timeout),
                        "--state-file", f"/run/vllm-fleet/{proc.unit}.watchdog.json"]
                dog = Process(deployment=self.decl.name, unit=f"{proc.unit}-watchdog", kind="watchdog",
                              role="watchdog", host=proc.host, address=proc.address, rank=proc.rank,
                              pool=proc.pool, instance=proc.instance, argv=argv, runtime="host",
                              exec_argv=list(argv), start_order=ORDER_WATCHDOG,
                              restart_group=proc.restart_group, network_host=True)
                dog.env_file = f"{self.spec.config_dir}/{self.decl.name}/{dog.unit}.env"
                self.processes.append(dog)

    def _refuse_single_node_keys(self, kind: str) -> None:
        """``replicas`` belongs to single-node strategies only: refused, never ignored."""
        if self.spec.replicas is not None and self.spec.replicas != 1:
            raise self.error("replicas", self.spec.replicas,
                             f"no replicas for a {kind} deployment (replicas copies a single-node "
                             "strategy, one per host)",
                             "remove replicas, or pick a single_node_* strategy")

    def place_multi(self, gpu_hosts: Sequence[str], roles: Mapping[str, list[str]]) -> None:
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
        res = self.resolve({"node_count": count})
        self._absorb(res)
        self._check_type(res, "multi_node", "headArgv")
        workers = list(res.get("workerArgvs") or [])
        if len(workers) != count - 1:
            raise self.error("node_count", count, f"{count - 1} worker argvs from the engine",
                             "report this recipe: the engine returned "
                             f"{len(workers)} worker ranks")
        docker = (res.get("docker") or {}).get("processes") or {}
        docker_workers = list(docker.get("workers") or [])
        env = res.get("env") or {}
        head = self.engine_process(host=ordered[0], unit=self.unit_name("rank0"), role="head",
                                   argv=res["headArgv"], env=env, docker_proc=docker.get("head"),
                                   rank=0, start_order=ORDER_HEAD, network_host=True, multi_host=True)
        for rank in range(1, count):
            self.engine_process(host=ordered[rank], unit=self.unit_name(f"rank{rank}"),
                                role="worker", argv=workers[rank - 1], env=env,
                                docker_proc=docker_workers[rank - 1] if rank - 1 < len(docker_workers) else None,
                                rank=rank, start_order=ORDER_FOLLOWER, network_host=True,
                                multi_host=True)
        self.endpoint = head.health_url[:-len("/health")] if head.health_url else None

    # PD ------------------------------------------------------------------------------
    def place_pd(self, roles: Mapping[str, list[str]]) -> None:
        self._refuse_single_node_keys("pd_cluster")
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
        if not routers:
            raise self.error("pd.router_group", None, "a router host for the PD cluster",
                             f"add a host to group {self.decl.group}_router or set "
                             "vllm_pd_role: router on one host")
        if len(routers) > 1:
            raise self.error("pd.router_group", routers, "exactly one router host",
                             "keep vllm_pd_role: router on one host only")
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
        router = routers[0]
        self.common["PREFILL_DP_RPC_PORT"] = str(self.spec.ports.prefill_dp_rpc)
        self.common["DECODE_DP_RPC_PORT"] = str(self.spec.ports.decode_dp_rpc)
        for role, pool in pools.items():
            for index, host in enumerate(pool):
                self.common[f"{role.upper()}_NODE_{index + 1}"] = self.address(host)
        self.common["ROUTER_HOST"] = self.spec.router.bind_address

        views: list[Mapping[str, Any]] = []
        if colocated:
            views.append(self.resolve({"pd_nodes": None}))
        else:
            for r in range(max(len(pools["prefill"]), len(pools["decode"]))):
                request = {}
                for role, pool in pools.items():
                    entry: dict[str, Any] = {"nodes": len(pool), "rank": min(r, len(pool) - 1)}
                    parallelism = getattr(self.spec.pd, role).parallelism
                    if parallelism is not None:
                        entry["parallelism"] = parallelism
                    request[role] = entry
                views.append(self.resolve({"pd_nodes": request}))
        first = views[0]
        self._absorb(first)
        self._check_type(first, "pd_cluster", "prefill")
        router_port = self.spec.ports.router or int((first.get("router") or {}).get("port") or
                                                    DEFAULT_ROUTER_PORT)
        self.common["ROUTER_PORT"] = str(router_port)
        mooncake = first.get("mooncake")
        mooncake_mounts = self._mooncake(roles, mooncake, self.decl.hosts) if mooncake else []

        multi = {role: len(pool) > 1 for role, pool in pools.items()}
        for role, pool in pools.items():
            for rank, host in enumerate(pool):
                view = views[0] if colocated else views[rank]
                part = view.get(role) or {}
                if "argv" not in part:
                    raise self.error(f"pd.{role}", view.get("deployType"),
                                     f"a {role} section in the resolution", "check the recipe")
                headless = has_flag(part["argv"], "--headless")
                docker = ((view.get("docker") or {}).get("processes") or {}).get(role)
                self.engine_process(
                    host=host, unit=self.unit_name(f"{role}-{rank}"), role=role,
                    argv=part["argv"], env=part.get("env") or {}, docker_proc=docker,
                    rank=rank, pool=role, start_order=ORDER_FOLLOWER if headless else ORDER_HEAD,
                    network_host=True, multi_host=multi[role],
                    restart_group=f"{self.decl.name}/{role}", mounts=mooncake_mounts)
        router_cmd = (first.get("router") or {}).get("command")
        if not router_cmd:
            raise self.error("strategy", "pd_cluster", "a router command in the resolution",
                             "check the recipe's pd_cluster strategy")
        self._router(router, command_to_argv(router_cmd), router_port,
                     first.get("routerConfig") or {})

    def _router(self, host: str, argv: list[str], port: int, config: Mapping[str, Any]) -> None:
        spec = self.spec.router
        image = spec.image if spec.runtime == "container" else None
        argv, metrics_port = self._router_metrics(argv)
        proc = self.service_process(host=host, unit=self.unit_name("router"), kind="router",
                                    argv=router_argv_for_pinned(argv), venv=spec.venv, start_order=ORDER_ROUTER, port=port,
                                    port_purpose="router", health_path="/health",
                                    container_image=image)
        # --- observability (issue 15): the router's Prometheus port is a port like any other
        proc.ports.append(Port(metrics_port, "router-metrics"))
        proc.metrics_url = f"http://{url_host(proc.address)}:{metrics_port}/metrics"
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

    # Mooncake -------------------------------------------------------------------------
    def _mooncake(self, roles: Mapping[str, list[str]], section: Mapping[str, Any],
                  engine_hosts: Sequence[str]) -> list[tuple[str, str, str]]:
        """Place master/store, write configs; return the engine-side config mount."""
        master_hosts = roles["master"]
        if len(master_hosts) > 1:
            raise self.error("mooncake", master_hosts, "one Mooncake master host",
                             "keep vllm_mooncake_role: master on one host")
        if master_hosts:
            master = master_hosts[0]
        elif roles["router"]:
            master = roles["router"][0]
        else:
            master = [h for h in self.decl.hosts if h not in roles["store"]][0]
        self.common["MOONCAKE_MASTER_IP"] = self.address(master)
        base = f"{self.spec.config_dir}/{self.decl.name}"
        config_path = f"{base}/mooncake.json"
        store_path = f"{base}/mooncake-store.json"
        self.common["MOONCAKE_CONFIG_PATH"] = config_path
        self.common["MOONCAKE_STORE_CONFIG_PATH"] = store_path
        venv = self.spec.mooncake.venv

        master_cmd = (section.get("master") or {}).get("command")
        if master_cmd:
            argv = command_to_argv(master_cmd)
            port = None
            for token in argv:
                if token.startswith("-rpc_port="):
                    port = int(token.split("=", 1)[1])
            self.service_process(host=master, unit=self.unit_name("mooncake-master"),
                                 kind="mooncake_master", argv=argv, venv=venv,
                                 start_order=ORDER_MOONCAKE_MASTER, port=port,
                                 port_purpose="mooncake-master-rpc")
        store = section.get("store")
        if store:
            if not roles["store"]:
                raise self.error("mooncake", None,
                                 "at least one Mooncake store host (centralized topology)",
                                 "set vllm_mooncake_role: store on a host with spare RAM, or add it "
                                 f"to group {self.decl.group}_mooncake_store")
            for host in roles["store"]:
                argv = command_to_argv(store["command"])
                proc = self.service_process(host=host, unit=self.unit_name("mooncake-store"),
                                            kind="mooncake_store", argv=argv, venv=venv,
                                            start_order=ORDER_MOONCAKE_STORE)
                cfg = fill_placeholders(dict(store.get("config") or {}), {
                    **self.mapping(host),
                    "MOONCAKE_STORE_DEVICE_NAME": self.hosts[host].mooncake_device})
                self.check_filled(proc, cfg, "mooncake-store.json")
                self.config_files.append(ConfigFile(host=host, deployment=self.decl.name,
                                                    dest=store_path, name="mooncake-store.json",
                                                    content=cfg))
        elif roles["store"]:
            raise self.error("mooncake", roles["store"],
                             "no store hosts for the distributed (embedded) topology",
                             "remove vllm_mooncake_role: store, or use kv_store_centralized_mooncake")
        config = section.get("config") or section.get("mooncakeConfig")
        if config:
            for host in engine_hosts:
                if host in roles["router"] or (host in roles["master"] and host not in roles["prefill"]
                                               and host not in roles["decode"]) \
                        or host in roles["store"]:
                    continue
                cfg = fill_placeholders(dict(config), self.mapping(host))
                left = find_placeholders(cfg)
                if left:
                    raise self.error("mooncake.config", "$" + left[0],
                                     f"every placeholder filled on {host}",
                                     f"set vllm_placeholders.{left[0]} on {host}")
                self.config_files.append(ConfigFile(host=host, deployment=self.decl.name,
                                                    dest=config_path, name="mooncake.json",
                                                    content=cfg))
        return [(config_path, config_path, "ro")]

    def place_kv(self, roles: Mapping[str, list[str]], gpu_hosts: Sequence[str]) -> None:
        self._refuse_single_node_keys("Mooncake (kv_store_lb)")
        for role in ("prefill", "decode"):
            if roles[role]:
                raise self.error("strategy", self.spec.strategy,
                                 f"no {role} hosts outside pd_cluster",
                                 f"remove the {role} role from {roles[role]}")
        engine_hosts = list(gpu_hosts)
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
        multi = nodes > 1
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
        router_section = first.get("router")
        router_port = self.spec.ports.router or int((router_section or {}).get("port") or
                                                    DEFAULT_ROUTER_PORT)
        self.common["ROUTER_PORT"] = str(router_port)
        if router_section and not roles["router"]:
            raise self.error("pd.router_group", None,
                             f"a router host for {instances} Mooncake instances",
                             f"set vllm_pd_role: router on one host or add it to {self.decl.group}_router")
        if len(roles["router"]) > 1:
            raise self.error("pd.router_group", roles["router"], "exactly one router host",
                             "keep vllm_pd_role: router on one host only")
        if roles["router"] and not router_section:
            raise self.error("pd.router_group", roles["router"],
                             "no router host: one Mooncake instance is served directly",
                             "remove the router role, or raise kv_instances")
        section = {"master": first.get("master"), "store": first.get("store"),
                   "config": first.get("mooncakeConfig")}
        mounts = self._mooncake(roles, section, engine_hosts)
        head_url = None
        for i, group in enumerate(per_instance):
            # upstream writes --master-addr as $VLLM_INSTANCE_<i+1>, or $HEAD_IP for one instance
            self.common["HEAD_IP"] = self.address(group[0])
            vllm = views[i].get("vllm") or {}
            docker = (views[i].get("docker") or {}).get("processes") or {}
            env = vllm.get("env") or {}
            workers = list(vllm.get("workerArgvs") or [])
            if multi and len(workers) != nodes - 1:
                raise self.error("node_count", nodes, f"{nodes - 1} worker argvs per instance",
                                 "check node_count against the serving strategy")
            suffix = f"i{i}" if not multi else f"i{i}-rank0"
            head = self.engine_process(host=group[0], unit=self.unit_name(suffix), role="head" if multi else "instance",
                                       argv=vllm["argv"], env=env, docker_proc=docker.get("vllm"),
                                       rank=0, instance=i, pool=f"instance{i}",
                                       start_order=ORDER_HEAD, network_host=True, multi_host=multi,
                                       restart_group=f"{self.decl.name}/instance{i}", mounts=mounts)
            head_url = head_url or (head.health_url[:-len("/health")] if head.health_url else None)
            docker_workers = list(docker.get("vllm_workers") or [])
            for rank in range(1, nodes):
                self.engine_process(host=group[rank], unit=self.unit_name(f"i{i}-rank{rank}"),
                                    role="worker", argv=workers[rank - 1], env=env,
                                    docker_proc=docker_workers[rank - 1] if rank - 1 < len(docker_workers) else None,
                                    rank=rank, instance=i, pool=f"instance{i}",
                                    start_order=ORDER_FOLLOWER, network_host=True, multi_host=True,
                                    restart_group=f"{self.decl.name}/instance{i}", mounts=mounts)
        self.endpoint = head_url
        if router_section:
            self._router(roles["router"][0], command_to_argv(router_section["command"]), router_port,
                         {k: v for k, v in router_section.items() if k not in ("command", "install")})


# --------------------------------------------------------------------------------------
# Fleet-level: GPUs, ports, exec argv
# --------------------------------------------------------------------------------------

def _host_capacity(host: HostSpec, plans: Sequence[DeploymentPlan],
                   profiles: Mapping[str, Optional[Mapping[str, Any]]]) -> Optional[list[int]]:
    if host.gpus is not None:
        return list(host.gpus)
    counts = set()
    for plan in plans:
        profile = profiles.get(plan.name) or {}
        count = profile.get("gpu_count")
        if isinstance(count, int) and count > 0:
            counts.add(count)
    if len(counts) == 1:
        return list(range(counts.pop()))
    return None


def _assign_gpus(fleet: FleetPlan, profiles: Mapping[str, Optional[Mapping[str, Any]]]) -> None:
    by_host: dict[str, list[Process]] = {}
    for plan in fleet.deployments:
        for proc in plan.processes:
            if proc.kind == "engine":
                by_host.setdefault(proc.host, []).append(proc)
    names = {plan.name for plan in fleet.deployments}
    for host_name, host in sorted(fleet.hosts.items()):
        here = {p.deployment for p in by_host.get(host_name, [])}
        for dep in host.deployment_gpus:
            if dep not in here:
                known = dep in names
                raise PlacementError(
                    f"hostvars[{host_name!r}].vllm_deployment_gpus.{dep}", value=dep,
                    expected=(f"a deployment with engines on {host_name} ({', '.join(sorted(here)) or 'none'})"
                              if known else f"a deployment of this inventory ({', '.join(sorted(names))})"),
                    fix=f"remove {dep!r} from vllm_deployment_gpus on {host_name} or correct its name")
    for host_name in sorted(by_host):
        host = fleet.hosts[host_name]
        procs = by_host[host_name]
        deps = sorted({p.deployment for p in procs})
        plans = [p for p in fleet.deployments if p.name in deps]
        # relative layout per deployment
        need: dict[str, int] = {}
        relative: dict[int, list[int]] = {}
        for dep in deps:
            dep_procs = [p for p in procs if p.deployment == dep]
            pinned = [i for p in dep_procs if p.pinned_gpus for i in p.pinned_gpus]
            offset = (max(pinned) + 1) if pinned else 0
            for proc in dep_procs:
                if proc.pinned_gpus:
                    relative[id(proc)] = list(proc.pinned_gpus)
                else:
                    relative[id(proc)] = list(range(offset, offset + proc.gpu_need))
                    offset += proc.gpu_need
            need[dep] = offset
        capacity = _host_capacity(host, plans, profiles)
        if capacity is None:
            if len(deps) > 1:
                raise PlacementError(f"hostvars[{host_name!r}].vllm_gpu_count", has_value=False,
                                     expected=f"the accelerator count of {host_name}, which carries "
                                              f"{len(deps)} deployments ({', '.join(deps)})",
                                     fix=f"set vllm_gpu_count (or vllm_gpus) on {host_name}")
            capacity = list(range(need[deps[0]]))
        free = list(capacity)
        slices: dict[str, list[int]] = {}
        for dep in deps:
            explicit = host.deployment_gpus.get(dep)
            if explicit is None:
                continue
            outside = [i for i in explicit if i not in capacity]
            taken = [i for i in explicit if i not in free]
            if outside:
                raise PlacementError(f"hostvars[{host_name!r}].vllm_deployment_gpus.{dep}",
                                     value=list(explicit),
                                     expected=f"indexes among {host_name}'s accelerators {capacity}",
                                     fix=f"remove {outside} or raise vllm_gpu_count on {host_name}")
            if taken:
                raise PlacementError(f"hostvars[{host_name!r}].vllm_deployment_gpus.{dep}",
                                     value=list(explicit),
                                     expected="accelerators not given to another deployment",
                                     fix=f"indexes {taken} on {host_name} are assigned twice; "
                                         "split the devices between deployments")
            if len(explicit) < need[dep]:
                raise PlacementError(f"hostvars[{host_name!r}].vllm_deployment_gpus.{dep}",
                                     value=list(explicit),
                                     expected=f"at least {need[dep]} accelerators for {dep}",
                                     fix=f"list {need[dep]} device indexes for {dep} on {host_name}")
            slices[dep] = list(explicit)
            free = [i for i in free if i not in explicit]
        for dep in deps:
            if dep in slices:
                continue
            if need[dep] > len(free):
                total = sum(need.values())
                raise PlacementError(
                    f"hostvars[{host_name!r}].vllm_gpu_count", value=len(capacity),
                    expected=f"at least {total} accelerators for "
                             + ", ".join(f"{d} ({need[d]})" for d in deps),
                    fix=f"move a deployment off {host_name}, shrink its parallelism, or fix "
                        f"vllm_gpu_count on {host_name}")
            slices[dep] = free[:need[dep]]
            free = free[need[dep]:]
        fleet.gpu_assignment[host_name] = {dep: slices[dep] for dep in deps}
        for proc in procs:
            slice_ = slices[proc.deployment]
            rel = relative[id(proc)]
            if rel and max(rel) >= len(slice_):
                raise PlacementError(f"hostvars[{host_name!r}].vllm_gpu_count",
                                     value=len(slice_),
                                     expected=f"device index {max(rel)} for {proc.unit}",
                                     fix=f"give {proc.deployment} more accelerators on {host_name}")
            proc.gpus = [slice_[i] for i in rel]


def _finish_env(plan: DeploymentPlan, host_gpus: Sequence[int], proc: Process) -> None:
    var = visible_devices_var(plan.vendor)
    physical = ",".join(str(i) for i in proc.gpus)
    if plan.vendor == "amd":
        if "CUDA_VISIBLE_DEVICES" in proc.env:
            # HIP indexes are relative to ROCR's mask.
            proc.env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(len(proc.gpus)))
    elif "CUDA_VISIBLE_DEVICES" in proc.env:
        proc.env["CUDA_VISIBLE_DEVICES"] = physical
    if var is not None and proc.gpus:
        proc.env[var] = physical


#: First internal port (VLLM_PORT) handed to the n-th host-network engine of a shared host.
VLLM_PORT_BASE = 25000
VLLM_PORT_STRIDE = 100


def _spread_internal_ports(fleet: FleetPlan) -> None:
    """Give each host-network engine on a shared host its own ``VLLM_PORT`` base.

    vLLM picks its internal ports from ``VLLM_PORT`` upwards (random free ports
    when unset); two instances on one host network can race for the same ones
    (EADDRINUSE). A value set by the recipe or ``extra_env`` is kept.
    """
    by_host: dict[str, list[Process]] = {}
    for plan in fleet.deployments:
        for proc in plan.processes:
            if proc.kind == "engine" and proc.network_host:
                by_host.setdefault(proc.host, []).append(proc)
    for procs in by_host.values():
        if len(procs) < 2:
            continue
        for index, proc in enumerate(sorted(procs, key=lambda p: (p.deployment, p.unit))):
            proc.env.setdefault("VLLM_PORT", str(VLLM_PORT_BASE + VLLM_PORT_STRIDE * index))


def _separate_side_channels(fleet: FleetPlan) -> None:
    """Give NIXL engines that share a host disjoint side-channel port ranges.

    Every engine binds ``VLLM_NIXL_SIDE_CHANNEL_PORT`` plus its data-parallel
    index, so the recipe's prefill base (5557) and decode base (5558) overlap as
    soon as the prefill engine runs two local DP ranks on the decode engine's
    host. The engine with the lower base keeps the recipe's value; the other
    moves up to the next free range (peers learn the port from the KV transfer
    parameters, nothing else names it). A value set in ``extra_env`` is kept,
    and a clash with it is reported by the port check.
    """
    # host -> (process, its side-channel ports, whether extra_env sets the base)
    by_host: dict[str, list[tuple[Process, list[int], bool]]] = {}
    taken_by_host: dict[str, set[int]] = {}
    for plan in fleet.deployments:
        user_set = "VLLM_NIXL_SIDE_CHANNEL_PORT" in plan.spec.extra_env
        for proc in plan.processes:
            taken = taken_by_host.setdefault(proc.host, set())
            numbers = [port.number for port in proc.ports if port.purpose == NIXL_SIDE_CHANNEL]
            taken.update(port.number for port in proc.ports if port.purpose != NIXL_SIDE_CHANNEL)
            if numbers:
                by_host.setdefault(proc.host, []).append((proc, numbers, user_set))
    for host, engines in by_host.items():
        taken = taken_by_host[host]
        for proc, numbers, user_set in sorted(engines, key=lambda e: (e[0].deployment, min(e[1]), e[0].unit)):
            if user_set or taken.isdisjoint(numbers):
                taken.update(numbers)
                continue
            base = int(proc.env["VLLM_NIXL_SIDE_CHANNEL_PORT"])
            offsets = [number - base for number in numbers]
            moved = base
            while any(moved + offset in taken for offset in offsets):
                moved += 1
            if moved + max(offsets) > 65535:
                continue  # nothing free above: the port check names the clash
            proc.env["VLLM_NIXL_SIDE_CHANNEL_PORT"] = str(moved)
            proc.ports = [port for port in proc.ports if port.purpose != NIXL_SIDE_CHANNEL] + [
                Port(moved + offset, NIXL_SIDE_CHANNEL) for offset in offsets]
            taken.update(moved + offset for offset in offsets)


def _check_ports(fleet: FleetPlan) -> None:
    seen: dict[tuple[str, int], Process] = {}
    for plan in fleet.deployments:
        for proc in plan.processes:
            for port in proc.ports:
                key = (proc.host, port.number)
                other = seen.get(key)
                if other is not None:
                    fix = ("set vllm_deployment.ports.api (or ports.router / ports.router_metrics / "
                           "ports.master) on one of them" if other.deployment != proc.deployment else
                           "give the two processes different ports in the recipe or inventory")
                    if port.purpose == NIXL_SIDE_CHANNEL:
                        fix = ("remove VLLM_NIXL_SIDE_CHANNEL_PORT from extra_env: placement gives each "
                               "engine of a host its own side-channel range")
                    raise PlacementError(
                        f"hostvars[{proc.host!r}] port {port.number}", value=port.number,
                        expected=f"a free port on {proc.host}: {other.unit} ({other.deployment}, "
                                 f"{_purpose(other, port.number)}) and {proc.unit} "
                                 f"({proc.deployment}, {port.purpose}) both listen on it",
                        fix=fix)
                seen[key] = proc


def _purpose(proc: Process, number: int) -> str:
    return next((p.purpose for p in proc.ports if p.number == number), "?")


def _exec_argv(plan: DeploymentPlan, fleet: FleetPlan, proc: Process) -> None:
    if proc.kind != "engine":
        return
    spec = plan.spec
    host_gpus = fleet.hosts[proc.host].gpus
    if host_gpus is None:
        count = max([*proc.gpus, -1]) + 1
        host_gpus = tuple(range(count))
    multi = plan.deploy_type in ("multi_node",) or (
        plan.deploy_type in ("pd_cluster", "kv_store_lb") and proc.role in ("head", "worker"))
    if spec.compile_cache_dir and spec.container_profile == "hardened":
        proc.compile_cache = f"{spec.compile_cache_dir.rstrip('/')}/{proc.unit}"
        for key, value in COMPILE_CACHE_ENV:  # the operator's extra_env wins
            if key not in proc.env:
                proc.env[key] = value
                proc.env_keys[key] = f"vllm_deployment[{plan.name}].compile_cache_dir"
    container = ContainerSpec(
        name=proc.unit, image=proc.image or "", vendor=plan.vendor, program_argv=proc.argv,
        env_file=proc.env_file, weights_dir=spec.weights.cache_dir, network_host=proc.network_host,
        api_port=proc.api_port, gpus=proc.gpus, host_gpus=host_gpus, gpu_runtime=spec.gpu_runtime,
        rdma=spec.rdma, multi_node=multi, mounts=proc.mounts, extra_args=spec.container_args,
        docker_binary=spec.docker_binary, compile_cache_dir=proc.compile_cache or None)
    if not proc.image:
        raise PlacementError(f"vllm_deployment[{plan.name}].image", has_value=False,
                             expected="a container image (the recipe gives none for this hardware)",
                             fix="set vllm_deployment.image")
    if spec.container_profile == "upstream":
        if proc.upstream_flags is None:
            raise PlacementError(f"vllm_deployment[{plan.name}].container_profile", value="upstream",
                                 expected=f"the recipes site's docker argv for {proc.unit}",
                                 fix="use container_profile: hardened for this deployment")
        recipe_env = {k: proc.env[k] for k in proc.recipe_env_keys if k in proc.env}
        proc.exec_argv = engine_docker_argv(container, "upstream", upstream_flags=proc.upstream_flags,
                                            env=recipe_env)
    else:
        proc.exec_argv = engine_docker_argv(container, "hardened")
    if proc.secret_file:
        proc.exec_argv = with_secret_file(proc.exec_argv, proc.image, proc.argv, proc.secret_file)


def build_plan(hostvars: Mapping[str, Mapping[str, Any]], groups: Mapping[str, Sequence[str]],
               engine_factory: EngineFactory, *,
               deployments_list: Optional[Sequence[Any]] = None,
               group_declarations: Optional[Mapping[str, Any]] = None) -> FleetPlan:
    """Compile every declared deployment of an inventory into one :class:`FleetPlan`.

    Args:
        hostvars: ``hostvars`` (host -> variables), facts included when cached.
        groups: ``groups`` (group -> member hosts in inventory order).
        engine_factory: ``DeclaredDeployment -> BoundEngine``.
        deployments_list: the ``vllm_deployments`` list, when used.
        group_declarations: group -> the ``vllm_deployment`` of that group's own vars, when
            the caller sees group vars (a shadowed declaration is then refused).

    Raises:
        PlacementError / InventoryError / the engine's SelectionError.
    """
    declared = collect_deployments(hostvars, groups, deployments_list, group_declarations)
    if not declared:
        raise PlacementError("vllm_deployment", has_value=False,
                             expected="at least one inventory group with a vllm_deployment mapping",
                             fix="set vllm_deployment (recipe, strategy, hardware ...) in the "
                                 "group_vars of the group to deploy")
    names = sorted({h for d in declared for h in d.hosts})
    hosts = {name: host_spec(name, hostvars.get(name) or {}) for name in names}
    plans: list[DeploymentPlan] = []
    profiles: dict[str, Optional[Mapping[str, Any]]] = {}
    for decl in declared:
        try:
            engine = engine_factory(decl)
        except PlacementError:
            raise
        except RecipeError as exc:
            raise engine_error(decl, exc) from None
        placer = _DeploymentPlacer(decl, engine, hosts, groups)
        plans.append(placer.place())
        profiles[decl.name] = engine.hardware_profile
    fleet = FleetPlan(deployments=plans, hosts=hosts)
    _assign_gpus(fleet, profiles)
    _separate_side_channels(fleet)
    for plan in plans:
        for proc in plan.processes:
            if proc.kind == "engine":
                _finish_env(plan, fleet.hosts[proc.host].gpus or (), proc)
                _exec_argv(plan, fleet, proc)
    _spread_internal_ports(fleet)
    _check_ports(fleet)
    for plan in plans:
        plan.processes.sort(key=lambda p: (p.start_order, p.pool or "", p.rank or 0, p.unit))
    return fleet


# --------------------------------------------------------------------------------------
# plan.json
# --------------------------------------------------------------------------------------

def process_to_dict(proc: Process) -> dict[str, Any]:
    return {
        "unit": proc.unit_file,
        "deployment": proc.deployment,
        "container": proc.unit if proc.runtime == "docker" else None,
        "kind": proc.kind,
        "role": proc.role,
        "host": proc.host,
        "address": proc.address,
        "rank": proc.rank,
        "pool": proc.pool,
        "instance": proc.instance,
        "argv": list(proc.argv),
        "env": dict(proc.env),
        "secret_env_keys": sorted(proc.secret_env),
        "env_file": proc.env_file,
        "secret_file": proc.secret_file or None,
        "compile_cache": proc.compile_cache or None,
        "ports": [{"port": p.number, "purpose": p.purpose} for p in proc.ports],
        "gpus": list(proc.gpus),
        "runtime": proc.runtime,
        "image": proc.image,
        "exec_start": list(proc.exec_argv),
        "start_order": proc.start_order,
        "restart_group": proc.restart_group,
        "health_url": proc.health_url,
        "metrics_url": proc.metrics_url,
    }


def served_model(argv: Sequence[str]) -> Optional[str]:
    """The model name the OpenAI API answers to: ``--served-model-name``, else the model."""
    name = flag_value(argv, "--served-model-name")
    if name:
        return name
    model = flag_value(argv, "--model")
    if model:
        return model
    args = list(argv)
    return args[2] if args[:2] == ["vllm", "serve"] and len(args) > 2 else None


def rollout_batches(plan: DeploymentPlan) -> list[dict[str, Any]]:
    """How a rolling upgrade restarts this deployment, batch after batch.

    Independent replicas roll one at a time (drained from the router first, put back after
    their health gate and a one-token completion), then the router. Every other deployment
    (a multi-node group, PD pools, Mooncake instances) restarts as one whole batch.
    """
    def probes(procs: Iterable[Process]) -> list[dict[str, Any]]:
        out = []
        for proc in procs:
            if proc.kind == "engine" and proc.health_url:
                base = proc.health_url[:-len("/health")]
                out.append({"host": proc.host, "unit": proc.unit_file, "health_url": proc.health_url,
                            "completions_url": f"{base}/v1/completions", "model": served_model(proc.argv)})
        return out

    def files(procs: Sequence[Process], with_configs: bool) -> dict[str, list[str]]:
        """host -> every file a rollback of these processes restores (units, env, configs)."""
        out: dict[str, set[str]] = {}
        for proc in procs:
            paths = out.setdefault(proc.host, set())
            paths.update({f"{plan.spec.unit_dir}/{proc.unit_file}", proc.env_file})
            if proc.secret_file:
                paths.add(proc.secret_file)
        if with_configs:
            for cfg in plan.config_files:
                if cfg.host in out:
                    out[cfg.host].add(cfg.dest)
        return {host: sorted(paths) for host, paths in sorted(out.items())}

    def kinds(procs: Iterable[Process]) -> list[str]:
        """The process kinds a batch restarts: the roles skip the installs of other kinds."""
        return sorted({p.kind for p in procs})

    replicas = sorted((p for p in plan.processes if p.role == "replica"), key=lambda p: p.instance or 0)
    router = next((p for p in plan.processes if p.kind == "router"), None)
    if not replicas:
        groups = sorted({p.restart_group for p in plan.processes})
        return [{"name": plan.name, "groups": groups, "kinds": kinds(plan.processes), "hosts": plan.hosts,
                 "drain": None, "probes": probes(plan.processes), "files": files(plan.processes, True)}]
    batches: list[dict[str, Any]] = []
    for proc in replicas:
        members = [p for p in plan.processes if p.restart_group == proc.restart_group]
        drain = None
        if router is not None and router.health_url and proc.health_url:
            drain = {"router_host": router.host, "router_url": router.health_url[:-len("/health")],
                     "worker_url": proc.health_url[:-len("/health")]}
        batches.append({"name": proc.restart_group, "groups": [proc.restart_group], "kinds": kinds(members),
                        "hosts": sorted({p.host for p in members}), "drain": drain,
                        "probes": probes(members), "files": files(members, False)})
    if router is not None:
        batches.append({"name": router.restart_group, "groups": [router.restart_group], "kinds": ["router"],
                        "hosts": [router.host], "drain": None, "probes": [],
                        "files": files([router], True)})
    return batches


def plan_to_dict(fleet: FleetPlan) -> dict[str, Any]:
    """Machine-readable plan (no secret values; callers dump it with sort_keys)."""
    deployments: dict[str, Any] = {}
    for plan in fleet.deployments:
        spec = plan.spec
        orders = sorted({p.start_order for p in plan.processes})
        deployments[plan.name] = {
            "group": plan.group,
            "recipe": spec.recipe,
            "selection": dict(plan.selection),
            "deploy_type": plan.deploy_type,
            "vendor": plan.vendor,
            "hardware": plan.hardware,
            "image": plan.image,
            "min_vllm_version": plan.min_vllm_version,
            "container_profile": spec.container_profile,
            "endpoint": plan.endpoint,
            "start_timeout_s": plan.start_timeout,
            "stop_timeout_s": spec.unit.stop_timeout,
            "hosts": plan.hosts,
            "start_order": [[p.unit_file for p in plan.processes if p.start_order == order]
                            for order in orders],
            "restart_groups": {g: sorted(p.unit_file for p in plan.processes if p.restart_group == g)
                               for g in sorted({p.restart_group for p in plan.processes})},
            "weights": {
                "cache_dir": spec.weights.cache_dir,
                "mode": spec.weights.mode,
                "source": spec.weights.source,
                "revision": spec.weights.revision,
                "endpoint": spec.weights.endpoint,
                "token_set": spec.weights.token is not None,
            },
            "processes": [process_to_dict(p) for p in plan.processes],
            "rollout": rollout_batches(plan),
            "config_files": [{"host": c.host, "dest": c.dest, "name": c.name, "mode": c.mode}
                             for c in plan.config_files],
            "resolutions": plan.resolutions,
        }
    hosts: dict[str, Any] = {}
    for name in sorted(fleet.hosts):
        spec = fleet.hosts[name]
        procs = [p for plan in fleet.deployments for p in plan.processes if p.host == name]
        if not procs:
            continue
        hosts[name] = {
            "address": spec.address,
            "address_source": spec.address_source,
            "interface": spec.interface,
            "gpus": fleet.gpu_assignment.get(name, {}),
            "units": sorted(p.unit_file for p in procs),
            "deployments": sorted({p.deployment for p in procs}),
        }
    return {"schema": PLAN_SCHEMA, "deployments": deployments, "hosts": hosts}


# --------------------------------------------------------------------------------------
# Engine adapter: _engine.resolve(recipe, selection, catalog) -> the view placement reads
# --------------------------------------------------------------------------------------


def _docker_entry(proc: Any) -> dict[str, Any]:
    return {"port": proc.port, "argv": list(proc.docker_argv or ())}


def resolution_view(res: Any, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Turn an ``_engine.Resolution`` into the upstream-shaped view for ``overrides``.

    The engine expands every rank itself; the view for a PD rank ``r`` carries
    that rank's ``argv``/``env`` in ``prefill``/``decode``; the view for Mooncake
    instance ``i`` carries that instance's ``vllm`` section. ``docker.processes``
    is shaped like the recipes site's (single, head, workers, prefill, decode,
    vllm, vllm_workers).
    """
    out = dict(res.output)
    procs = {p.name: p for p in res.processes}
    docker: dict[str, Any] = {}
    kind = out.get("deployType")
    if kind == "pd_cluster":
        pd = overrides.get("pd_nodes") or {}
        for role in ("prefill", "decode"):
            rank = int((pd.get(role) or {}).get("rank") or 0) if isinstance(pd.get(role), Mapping) else 0
            proc = procs.get(f"{role}-{rank}")
            if proc is None:
                continue
            section = dict(out[role])
            section.update(argv=list(proc.argv), env=dict(proc.env), command=proc.command, currentNode=rank)
            out[role] = section
            docker[role] = _docker_entry(proc)
    elif kind == "kv_store_lb":
        current = int(((overrides.get("kv_instances") or {}).get("current")) or 0)
        head = procs.get(f"instance-{current}-0")
        if head is not None:
            prefix = f"instance-{current}-"
            ranks = sorted(int(n[len(prefix):]) for n in procs
                           if n.startswith(prefix) and n[len(prefix):].isdigit())
            workers = [procs[f"{prefix}{r}"] for r in ranks if r > 0]
            section = dict(out.get("vllm") or {})
            section.update(argv=list(head.argv), env=dict(head.env))
            if workers:
                section["workerArgvs"] = [list(w.argv) for w in workers]
            out["vllm"] = section
            out["currentInstance"] = current
            docker["vllm"] = _docker_entry(head)
            docker["vllm_workers"] = [_docker_entry(w) for w in workers]
    elif "headArgv" in out:
        docker["head"] = _docker_entry(procs["head"])
        docker["workers"] = [_docker_entry(p) for p in res.processes if p.role == "worker"]
    elif "serve" in procs:
        docker["single"] = _docker_entry(procs["serve"])
    out["docker"] = {"image": res.image, "meta": dict(res.docker.get("meta") or {}), "processes": docker}
    return out


def engine_factory(*, catalog: Any = None, recipe_dirs: Sequence[str] = (), base_dir: Optional[str] = None,
                   cache_dir: Optional[str] = None) -> EngineFactory:
    """A factory binding the collection's recipe engine (``_engine.resolve``) to deployments.

    ``vllm_deployment.resolution_file`` short-circuits the engine with pinned
    resolutions (:class:`RecordedResolver`).
    """
    from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _catalog, _engine, _loader

    cat = catalog or _catalog.load_catalog()

    def factory(decl: DeclaredDeployment) -> BoundEngine:
        spec = decl.spec
        profiles = cat.taxonomy.get("hardware_profiles") or {}
        if spec.resolution_file:
            import os
            path = spec.resolution_file
            if not os.path.isabs(path) and base_dir:
                path = os.path.join(base_dir, path)
            try:
                data = json.loads(_loader.read_capped(path, "a JSON plan.json deployment entry"))
            except RecipeError as exc:
                raise PlacementError(f"vllm_deployment[{decl.name}].resolution_file", value=path,
                                     expected="a readable JSON list of pinned resolutions",
                                     fix=f"point resolution_file at a valid file ({exc.reason})") from None
            except (OSError, ValueError) as exc:
                # the reason only (strerror / JSON position): never the file's content
                reason = getattr(exc, "strerror", None) or type(exc).__name__
                if isinstance(exc, json.JSONDecodeError):
                    reason = f"invalid JSON at line {exc.lineno}, column {exc.colno}"
                raise PlacementError(f"vllm_deployment[{decl.name}].resolution_file", value=path,
                                     expected="a readable JSON list of pinned resolutions",
                                     fix=f"point resolution_file at a valid file ({reason})") from None
            records = data.get("resolutions", data) if isinstance(data, Mapping) else data
            return BoundEngine(resolve=RecordedResolver(records, source=path),
                               hardware_profile=profiles.get(spec.hardware or ""),
                               hardware_id=spec.hardware, selection=spec.selection())
        recipe = _loader.load_recipe_ref(spec.recipe, catalog=cat, recipe_dirs=recipe_dirs, base_dir=base_dir,
                                         cache_dir=cache_dir)
        base = spec.selection()
        cache: dict[str, Any] = {}
        bound = BoundEngine(resolve=lambda o: {})

        def resolve(overrides: Mapping[str, Any]) -> Mapping[str, Any]:
            selection = dict(base)
            if "node_count" in overrides:
                selection["node_count"] = overrides["node_count"]
            if "pd_nodes" in overrides:
                pd = overrides["pd_nodes"]
                selection["pd_nodes"] = None if pd is None else {
                    role: {k: v for k, v in dict(entry).items() if k != "rank"} for role, entry in pd.items()}
            if "kv_instances" in overrides:
                kv = overrides["kv_instances"] or {}
                selection["kv_instances"] = kv.get("count") if isinstance(kv, Mapping) else kv
            key = overrides_key(selection)
            if key not in cache:
                cache[key] = _engine.resolve(recipe, selection, cat)
                res = cache[key]
                if bound.hardware_id is None:
                    from dataclasses import asdict
                    bound.hardware_id = res.selection.hardware
                    bound.hardware_profile = profiles.get(res.selection.hardware)
                    sel = asdict(res.selection)
                    bound.selection = {k: (list(v) if isinstance(v, tuple) else v)
                                       for k, v in sel.items() if v not in (None, (), {}, [])}
                    data = getattr(recipe, "data", None) or {}
                    variant = (data.get("variants") or {}).get(res.selection.variant) or {}
                    wanted = variant.get("min_vllm_version") or (data.get("model") or {}).get("min_vllm_version")
                    bound.min_vllm_version = str(wanted) if wanted else None
            return resolution_view(cache[key], overrides)

        bound.resolve = resolve
        return bound

    return factory
