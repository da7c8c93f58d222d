# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Deployment declarations and per-host settings read from an Ansible inventory.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

Two inputs are modelled here, both plain data (no Ansible objects):

* ``vllm_deployment``: a mapping set on an inventory group (or an item of the
  ``vllm_deployments`` list, which lets one host carry several deployments).
  It says which recipe to run and how (:class:`DeploymentSpec`).
* per-host variables (``vllm_fabric_address``, ``vllm_pd_role``,
  ``vllm_node_rank``, ``vllm_gpu_count`` ...), normalised into
  :class:`HostSpec` by :func:`host_spec`.

:func:`collect_deployments` turns ``hostvars`` + ``groups`` into the list of
declared deployments with their member hosts. Every failure raises
:class:`InventoryError` naming the variable, the value and the fix.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Optional, Sequence

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _unitfile as U
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._errors import SelectionError

__all__ = [
    "DeploymentSpec",
    "DeclaredDeployment",
    "HostSpec",
    "InventoryError",
    "collect_deployments",
    "host_spec",
    "NAME_RE",
]

#: Deployment names end up in unit names, container names and file names.
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
_ENV_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PLACEHOLDER_NAME_RE = re.compile(r"^[A-Z][A-Z0-9_]*$")
_IFACE_RE = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")

#: Env names that hold secrets: they go to the secret file, and messages show a fingerprint.
SECRET_ENV_RE = re.compile(r"^(HF_TOKEN|VLLM_API_KEY|[A-Za-z0-9_]*_(TOKEN|KEY|PASSWORD|SECRET))$",
                           re.IGNORECASE)
#: argv flags whose value is a secret (``--api-key``, ``--hf-token``, ``--db-password`` ...).
SECRET_FLAG_RE = re.compile(r"^--(?:[a-z0-9]+-)*(?:token|key|password|secret)$")
#: A secret given as a placeholder the plan fills from the vault (``--api-key $API_KEY``).
_SECRET_PLACEHOLDERS = ("$API_KEY", "${API_KEY}")

# docker's reference grammar (github.com/distribution/reference, regexp.go).
_ALNUM = r"[a-z0-9]+"
_PATH_COMPONENT = rf"{_ALNUM}(?:(?:[._]|__|-+){_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
IMAGE_REF_RE = re.compile(
    rf"^(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
    r"(?::[\w][\w.-]{0,127})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$")
#: Host directories that must never be a read-write cache mount (``-v DIR:/root/.cache/...``).
_SYSTEM_DIRS = frozenset(("/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/opt",
                          "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var",
                          "/var/lib", "/var/run", "/var/log", "/var/cache"))
_SYSTEM_TREES = ("/proc/", "/sys/", "/dev/", "/run/", "/var/run/", "/etc/", "/boot/", "/usr/",
                 "/var/lib/docker", "/var/lib/containerd", "/bin/", "/sbin/", "/lib/", "/lib64/")
_REVISION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,254}$")

PD_ROLES = ("prefill", "decode", "router")
MOONCAKE_ROLES = ("master", "store")


class InventoryError(SelectionError):
    """An inventory variable is missing, malformed or inconsistent.

    The message always carries the variable (``key``), the value found and a
    ``fix:`` telling the operator what to change.
    """

    def __init__(self, key: str, *, value: Any = None, expected: str = "",
                 fix: str = "", source: str = "", has_value: bool = True) -> None:
        self.fix = fix
        kwargs: dict[str, Any] = {"expected": expected, "source": source,
                                  "reason": f"fix: {fix}" if fix else ""}
        if has_value:
            kwargs["value"] = value
        super().__init__(key, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_inventory_error,
                (type(self), self.key, self.value, self.expected, self.fix, self.source,
                 getattr(self, "has_value", True)))


def _rebuild_inventory_error(cls: type, key: str, value: Any, expected: str, fix: str,
                             source: str, has_value: bool) -> "InventoryError":
    return cls(key, value=value, expected=expected, fix=fix, source=source, has_value=has_value)


# --------------------------------------------------------------------------------------
# Hostile input: every string that reaches a unit, env file, path, argv or log
# --------------------------------------------------------------------------------------

def is_secret_env(name: str) -> bool:
    """``HF_TOKEN``, ``VLLM_API_KEY`` and ``*_TOKEN`` / ``*_KEY`` / ``*_PASSWORD`` / ``*_SECRET``."""
    return bool(SECRET_ENV_RE.match(name))


def redact(value: Any) -> Any:
    """``value`` with every secret replaced by its fingerprint (for messages and logs)."""
    if isinstance(value, SecretStr):
        return U.fingerprint(value.get_secret_value())
    if isinstance(value, Mapping):
        return {k: (U.fingerprint(str(v)) if isinstance(k, str) and is_secret_env(k) and v is not None
                    else redact(v)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        out: list[Any] = []
        hide_next = False
        for item in value:
            text = item if isinstance(item, str) else ""
            flag, _eq, inline = text.partition("=")
            if hide_next and text not in _SECRET_PLACEHOLDERS:
                out.append(U.fingerprint(text or str(item)))
            elif _eq and SECRET_FLAG_RE.match(flag) and inline not in _SECRET_PLACEHOLDERS:
                out.append(f"{flag}={U.fingerprint(inline)}")
            elif _eq and is_secret_env(flag):
                out.append(f"{flag}={U.fingerprint(inline)}")
            else:
                out.append(redact(item))
            hide_next = bool(SECRET_FLAG_RE.match(text))
        return out
    return value


def check_image(key: str, value: str) -> str:
    """A docker image reference (``[registry/]path[:tag][@digest]``), never a flag."""
    U.check_text(key, value, max_bytes=512, what="an image reference")
    if value.startswith("-") or not IMAGE_REF_RE.match(value) or len(value.split("@")[0]) > 255 + 129:
        raise InventoryError(key, value=value,
                             expected="a docker image reference such as 'vllm/vllm-openai:v0.11.0' "
                                      "or 'registry:5000/org/image@sha256:<hex>' (lower-case path, "
                                      "no whitespace, no leading '-')",
                             fix=f"set {key} to an image reference")
    return value


def check_host_name(name: str) -> str:
    """An inventory host name, used as a path component of the render directory."""
    shown = repr(name) if len(name) <= 80 else repr(name[:77]) + "..."
    key = f"inventory host name {shown}"
    U.check_text(key, name, max_bytes=253, what="a host name",
                 fix="rename the host in the inventory (letters, digits, '-', '_', '.')")
    if (not name or any(c in name for c in "/\\$`'\"") or ".." in name
            or name.startswith(("-", ".")) or any(c.isspace() for c in name)):
        raise InventoryError(key, value=name,
                             expected="a host name without '/', '\\', '..', '$', quotes, blanks or a "
                                      "leading '-' or '.' (it names a folder of the rendered plan)",
                             fix="rename the host in the inventory (unicode letters are fine)")
    return name


def check_address(host: str, var: str, value: str) -> str:
    """A node address other nodes can reach: not unspecified, multicast or zone-scoped."""
    key = f"hostvars[{host!r}].{var}"
    address = ipaddress.ip_address(value)
    if "%" in value:
        raise InventoryError(key, value=value,
                             expected="an address without a zone (a link-local fe80::/10 address "
                                      "with '%iface' is not reachable from other nodes)",
                             fix=f"set vllm_fabric_address on {host} to a routable address")
    if address.is_unspecified or address.is_multicast:
        raise InventoryError(key, value=value,
                             expected="the node's own unicast address (0.0.0.0, :: and multicast "
                                      "addresses name no node)",
                             fix=f"set vllm_fabric_address on {host} to its cluster-network IP")
    return value


def _check_args(key: str, args: Sequence[str], *, docker: bool) -> None:
    hide_next = False
    for index, arg in enumerate(args):
        item = f"{key}[{index}]"
        U.check_text(item, arg, secret=hide_next)
        flag, eq, inline = arg.partition("=")
        if (hide_next and arg not in _SECRET_PLACEHOLDERS) or (
                eq and SECRET_FLAG_RE.match(flag) and inline not in _SECRET_PLACEHOLDERS):
            shown = U.fingerprint(inline if eq else arg)
            raise InventoryError(key, value=f"{flag if eq else args[index - 1]} {shown}",
                                 expected="no secret on the command line (argv is visible in `ps`, "
                                          "unit files and `docker inspect`)",
                                 fix="remove it and set vllm_deployment.api_key or weights.token "
                                     "(Ansible Vault), or put it in extra_env under a *_TOKEN / "
                                     "*_KEY name: both go to the 0600 secret file")
        hide_next = bool(SECRET_FLAG_RE.match(arg)) and not docker
        if docker:  # docker's env flags: `-e NAME=value`, `--env NAME=value`, `--env=NAME=value`, `-eNAME=v`
            previous = args[index - 1] if index else ""
            named = (arg if previous in ("-e", "--env") else arg[len("--env="):] if arg.startswith("--env=")
                     else arg[2:] if arg.startswith("-e") and arg != "-e" else "")
            name = named.partition("=")[0]
            if name and is_secret_env(name):
                raise InventoryError(f"{key}[{index}]", value=f"{name}=...",
                                     expected="no secret on the docker command line",
                                     fix=f"move {name} to vllm_deployment.extra_env (secret names go "
                                         "to the 0600 secret file)")


def check_deployment_strings(spec: "DeploymentSpec", where: str) -> None:
    """Refuse any string of a ``vllm_deployment`` that cannot reach a file, path or argv unchanged."""
    for attr in ("name", "group", "recipe", "variant", "hardware", "strategy", "frontend",
                 "kv_offload", "resolution_file"):
        value = getattr(spec, attr)
        if value is not None:  # 1024 bytes: a path or URL, and short enough to quote in messages
            U.check_text(f"{where}.{attr}", value, max_bytes=1024)
    for index, feature in enumerate(spec.features or ()):
        U.check_text(f"{where}.features[{index}]", feature)
    for name, mode in spec.feature_modes.items():
        U.check_text(f"{where}.feature_modes.{name}", mode)
    _check_args(f"{where}.advanced_args", spec.advanced_args, docker=False)
    _check_args(f"{where}.container_args", spec.container_args, docker=True)
    for attr, value in (("config_dir", spec.config_dir), ("unit_dir", spec.unit_dir),
                        ("docker_binary", spec.docker_binary),
                        ("router.venv", spec.router.venv), ("mooncake.venv", spec.mooncake.venv)):
        U.check_path(f"{where}.{attr}", value)
    # The two host directories mounted read-write into the engine containers.
    for attr, cache, example in (("weights.cache_dir", spec.weights.cache_dir, "/data/huggingface"),
                                 ("compile_cache_dir", spec.compile_cache_dir, "/var/cache/vllm-fleet/compile")):
        if cache is None:
            continue
        U.check_path(f"{where}.{attr}", cache)
        if cache in _SYSTEM_DIRS or cache.startswith(_SYSTEM_TREES):
            raise InventoryError(f"{where}.{attr}", value=cache,
                                 expected="a directory of its own: it is mounted read-write into the "
                                          "container (a system directory or the docker socket's would "
                                          "hand the container the host)",
                                 fix=f"use a dedicated directory such as {example}")
    for attr, image in (("image", spec.image), ("router.image", spec.router.image)):
        if image is not None:
            check_image(f"{where}.{attr}", image)
    revision = spec.weights.revision
    if revision is not None and (not _REVISION_RE.match(revision) or ".." in revision):
        raise InventoryError(f"{where}.weights.revision", value=revision,
                             expected="a branch, tag or commit of letters, digits and '._/-' "
                                      "without '..'", fix=f"correct {where}.weights.revision")
    source = spec.weights.source
    if spec.weights.mode == "import":
        if source is None:
            raise InventoryError(f"{where}.weights.source", value=None,
                                 expected="the absolute path, on the origin host, of the pre-staged "
                                          "model directory or tar archive (weights.mode: import)",
                                 fix=f"set {where}.weights.source, e.g. /srv/models/Qwen3-0.6B")
        U.check_path(f"{where}.weights.source", source)
    elif source is not None:
        raise InventoryError(f"{where}.weights.source", value=source,
                             expected="no source unless weights.mode is import "
                                      f"(mode is {spec.weights.mode})",
                             fix=f"set {where}.weights.mode: import, or remove weights.source")
    endpoint = spec.weights.endpoint
    if endpoint is not None:
        U.check_env_value(f"{where}.weights.endpoint", endpoint)
        if not re.match(r"^https?://[^\s/]+", endpoint):
            raise InventoryError(f"{where}.weights.endpoint", value=endpoint,
                                 expected="an http(s):// URL", fix=f"correct {where}.weights.endpoint")
    if not _is_ip(spec.router.bind_address) or "%" in spec.router.bind_address:
        raise InventoryError(f"{where}.router.bind_address", value=spec.router.bind_address,
                             expected="an IP address to bind (0.0.0.0 or :: for every address)",
                             fix=f"correct {where}.router.bind_address")
    for attr, secret in (("api_key", spec.api_key), ("weights.token", spec.weights.token)):
        if secret is not None:
            U.check_text(f"{where}.{attr}", secret.get_secret_value(), secret=True)
    for name, value in spec.extra_env.items():
        if is_secret_env(name):
            U.check_text(f"{where}.extra_env.{name}", value, secret=True)
        else:
            U.check_env_value(f"{where}.extra_env.{name}", value, fix=f"simplify the value of {name}")
    for name, value in spec.placeholders.items():
        U.check_text(f"{where}.placeholders.{name}", value)


# --------------------------------------------------------------------------------------
# vllm_deployment
# --------------------------------------------------------------------------------------

class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PoolSpec(_Strict):
    """Size and parallelism of one prefill/decode pool (defaults: from the inventory)."""

    nodes: Optional[int] = Field(default=None, ge=1, le=1024)
    parallelism: Optional[Literal["tp", "tep", "dep"]] = None


class PdSpec(_Strict):
    """Prefill/decode layout. Pools come from child groups or ``vllm_pd_role``."""

    prefill: PoolSpec = PoolSpec()
    decode: PoolSpec = PoolSpec()
    #: Child group names; default ``<group>_prefill`` / ``<group>_decode`` / ``<group>_router``.
    prefill_group: Optional[str] = None
    decode_group: Optional[str] = None
    router_group: Optional[str] = None


class PortsSpec(_Strict):
    """Host ports. Unset values come from the recipe's argv or vLLM's defaults."""

    #: API port of single/head/instance processes (appends ``--port`` when the recipe has none).
    api: Optional[int] = Field(default=None, ge=1, le=65535)
    #: ``--master-port`` of the mp multi-node backend (vLLM default 29501).
    master: Optional[int] = Field(default=None, ge=1, le=65535)
    #: Value for ``$PREFILL_DP_RPC_PORT`` / ``$DECODE_DP_RPC_PORT``.
    prefill_dp_rpc: int = Field(default=29550, ge=1, le=65535)
    decode_dp_rpc: int = Field(default=29551, ge=1, le=65535)
    #: Router listen port (``$ROUTER_PORT``); default: the recipe's router port, else 30000.
    router: Optional[int] = Field(default=None, ge=1, le=65535)
    #: The router's Prometheus port (``--prometheus-port``); default vllm-router's own 29000.
    router_metrics: Optional[int] = Field(default=None, ge=1, le=65535)


class WeightsSpec(_Strict):
    """Where model weights live on each host and how they get there."""

    #: Host directory mounted at ``/root/.cache/huggingface`` in the container.
    cache_dir: str = "/root/.cache/huggingface"
    #: ``download``: fetched before start (serving runs with ``HF_HUB_OFFLINE=1``);
    #: ``shared_fs``: already present on a shared filesystem (also offline);
    #: ``container``: vLLM downloads at start (the token is then passed to the container);
    #: ``import``: pre-staged files (``source``, a directory or tar archive on the origin host)
    #: are laid out as an HF cache snapshot there, then copied like a download (offline sites).
    mode: Literal["download", "shared_fs", "container", "import"] = "download"
    #: ``import`` only: absolute path, on the origin host, of the pre-staged directory or archive.
    source: Optional[str] = None
    revision: Optional[str] = None
    endpoint: Optional[str] = None
    token: Optional[SecretStr] = None

    @field_validator("cache_dir")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError("must be an absolute path")
        return value.rstrip("/") or "/"


class RouterSpec(_Strict):
    """How the vllm-router process runs (PD clusters and multi-instance Mooncake)."""

    runtime: Literal["venv", "container"] = "venv"
    venv: str = "/opt/vllm-router"
    image: Optional[str] = None
    #: Value of ``$ROUTER_HOST`` (the router's bind address).
    bind_address: str = "0.0.0.0"
    #: ``--policy`` of the router in front of independent replicas (default: vllm-router's own).
    policy: Optional[Literal["random", "round_robin", "cache_aware", "power_of_two",
                             "consistent_hash"]] = None

    @model_validator(mode="after")
    def _image_for_container(self) -> "RouterSpec":
        if self.runtime == "container" and not self.image:
            raise ValueError("router.image is required when router.runtime is 'container'")
        return self


class MooncakeSpec(_Strict):
    """Where the Mooncake master/store binaries live (``mooncake-transfer-engine`` venv)."""

    venv: str = "/opt/mooncake"


class UnitSpec(_Strict):
    """systemd supervision knobs."""

    restart_sec: int = Field(default=30, ge=1, le=3600)
    stop_timeout: int = Field(default=120, ge=1, le=3600)
    #: Default ``TimeoutStartSec`` when the recipe sets no ``VLLM_ENGINE_READY_TIMEOUT_S``.
    start_timeout: int = Field(default=1800, ge=1, le=86400)
    #: Group watchdog of multi-node groups (docs/operations.md): one per rank host.
    watchdog: bool = True
    #: Seconds between two probes of the group head's ``/health``.
    watchdog_interval: int = Field(default=5, ge=1, le=3600)
    #: Seconds the head may fail ``/health`` (after being healthy) before the rank restarts.
    watchdog_grace: int = Field(default=30, ge=1, le=86400)


class CpuSpec(_Strict):
    """vLLM's CPU backend (Intel Xeon hardware, generation ``cpu``): the env it reads."""

    #: GiB of host memory for the KV cache of each engine (``VLLM_CPU_KVCACHE_SPACE``).
    kvcache_space_gb: int = Field(default=40, ge=1, le=65536)
    #: OpenMP thread binding (``VLLM_CPU_OMP_THREADS_BIND``): ``auto`` (one NUMA node per rank),
    #: ``nobind``, or CPU lists per rank separated by ``|`` (e.g. ``0-31|32-63``).
    omp_threads_bind: str = Field(default="auto", pattern=r"^(auto|nobind|[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*"
                                                          r"(\|[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*)*)$")
    #: CPUs per rank left to the API server and other threads when binding ``auto``.
    reserved_cpus: Optional[int] = Field(default=None, ge=0, le=4096)

    def env(self) -> dict[str, str]:
        out = {"VLLM_CPU_KVCACHE_SPACE": str(self.kvcache_space_gb), "VLLM_CPU_OMP_THREADS_BIND": self.omp_threads_bind}
        if self.reserved_cpus is not None:
            out["VLLM_CPU_NUM_OF_RESERVED_CPU"] = str(self.reserved_cpus)
        return out


class DeploymentSpec(_Strict):
    """One ``vllm_deployment`` mapping (see docs/plan.md for every key)."""

    name: Optional[str] = None
    group: Optional[str] = None
    recipe: str = Field(min_length=1)
    variant: Optional[str] = None
    hardware: Optional[str] = None
    strategy: Optional[str] = None
    features: Optional[list[str]] = None
    feature_modes: dict[str, str] = {}
    frontend: Optional[str] = None
    kv_offload: Optional[str] = None
    kv_instances: Optional[int] = Field(default=None, ge=1, le=1024)
    node_count: Optional[int] = Field(default=None, ge=1, le=1024)
    #: Independent copies of a single-node strategy, one per engine host, behind the router host.
    replicas: Optional[int] = Field(default=None, ge=1, le=1024)
    advanced_args: list[str] = []
    pd: PdSpec = PdSpec()
    ports: PortsSpec = PortsSpec()
    image: Optional[str] = None
    container_profile: Literal["hardened", "upstream"] = "hardened"
    #: ``nvidia``: ``--gpus all``; ``cdi``: ``--device nvidia.com/gpu=all``; ``none``: no
    #: accelerator flags at all (CPU-only test hosts running a stand-in engine image).
    gpu_runtime: Literal["nvidia", "cdi", "none"] = "nvidia"
    rdma: bool = False
    #: Extra docker flags inserted before the image (hardened profile only).
    container_args: list[str] = []
    weights: WeightsSpec = WeightsSpec()
    router: RouterSpec = RouterSpec()
    mooncake: MooncakeSpec = MooncakeSpec()
    #: CPU backend settings, used on Intel Xeon hardware only (env of every engine process).
    cpu: CpuSpec = CpuSpec()
    unit: UnitSpec = UnitSpec()
    api_key: Optional[SecretStr] = None
    #: Operator env added to every engine process (after the recipe's env).
    extra_env: dict[str, str] = {}
    #: Values for recipe placeholders the inventory cannot derive (e.g. ``IB_IF``).
    placeholders: dict[str, str] = {}
    config_dir: str = "/etc/vllm-fleet"
    unit_dir: str = "/etc/systemd/system"
    #: Host directory under which each engine container keeps its compile caches (vLLM's
    #: torch.compile cache, inductor's and Triton's kernels) across restarts; null: none.
    compile_cache_dir: Optional[str] = "/var/cache/vllm-fleet/compile"
    docker_binary: str = "/usr/bin/docker"
    #: JSON file of pinned resolutions (as written to plan.json) used instead of the engine.
    resolution_file: Optional[str] = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: Optional[str]) -> Optional[str]:
        if value is not None and not NAME_RE.match(value):
            raise ValueError("must match " + NAME_RE.pattern + " (used in unit and container names)")
        return value

    @field_validator("advanced_args", mode="before")
    @classmethod
    def _args(cls, value: Any) -> Any:
        if isinstance(value, str):
            raise ValueError("must be a list of argv tokens, e.g. ['--max-model-len', '8192']")
        if isinstance(value, list):
            return [str(item) if isinstance(item, (int, float)) and not isinstance(item, bool)
                    else item for item in value]
        return value

    @field_validator("extra_env")
    @classmethod
    def _env_keys(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if not _ENV_KEY_RE.match(key):
                raise ValueError(f"{key!r} is not a valid environment variable name")
        return value

    @field_validator("placeholders")
    @classmethod
    def _placeholder_names(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if not _PLACEHOLDER_NAME_RE.match(key):
                raise ValueError(f"{key!r}: placeholder names are upper case without '$', e.g. IB_IF")
        return value

    @field_validator("config_dir", "unit_dir", "docker_binary", "compile_cache_dir")
    @classmethod
    def _abs(cls, value: Optional[str]) -> Optional[str]:
        if value is None:
            return value
        if not value.startswith("/"):
            raise ValueError("must be an absolute path")
        return value.rstrip("/") or "/"

    def selection(self) -> dict[str, Any]:
        """The engine selection this declaration asks for (unset keys omitted)."""
        out: dict[str, Any] = {}
        for key in ("variant", "hardware", "strategy", "features", "frontend", "kv_offload"):
            value = getattr(self, key)
            if value is not None:
                out[key] = list(value) if isinstance(value, list) else value
        if self.feature_modes:
            out["feature_modes"] = dict(self.feature_modes)
        if self.advanced_args:
            out["advanced_args"] = list(self.advanced_args)
        return out


# --------------------------------------------------------------------------------------
# Hosts
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class HostSpec:
    """Per-host settings that placement needs, normalised from hostvars."""

    name: str
    #: Routable address for cluster traffic (``None`` when nothing provides one).
    address: Optional[str]
    #: Where ``address`` came from, for messages (``vllm_fabric_address``, ``ansible_host`` ...).
    address_source: str
    interface: Optional[str]
    pd_roles: tuple[str, ...] = ()
    mooncake_roles: tuple[str, ...] = ()
    node_rank: Optional[int] = None
    gpus: Optional[tuple[int, ...]] = None
    deployment_gpus: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    rdma_devices: Optional[str] = None
    ib_hca: Optional[str] = None
    mooncake_device: str = ""
    placeholders: Mapping[str, str] = field(default_factory=dict)


def _is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def _as_roles(host: str, var: str, value: Any, allowed: Sequence[str]) -> tuple[str, ...]:
    if value is None or value == "" or value == []:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(i, str) for i in items):
        raise InventoryError(f"hostvars[{host!r}].{var}", value=value,
                             expected=f"one of {', '.join(allowed)} (or a list of them)",
                             fix=f"set {var} on {host} to one of: {', '.join(allowed)}")
    for item in items:
        if item not in allowed:
            raise InventoryError(f"hostvars[{host!r}].{var}", value=item,
                                 expected=f"one of {', '.join(allowed)}",
                                 fix=f"set {var} on {host} to one of: {', '.join(allowed)}")
    return tuple(dict.fromkeys(items))


def _as_gpu_list(host: str, var: str, value: Any) -> tuple[int, ...]:
    items: Any = value
    if isinstance(value, str):
        items = [p.strip() for p in value.split(",") if p.strip()]
    if not isinstance(items, (list, tuple)) or not items:
        raise InventoryError(f"hostvars[{host!r}].{var}", value=value,
                             expected="a non-empty list of device indexes, e.g. [0, 1, 2, 3]",
                             fix=f"list the accelerator indexes of {host}, e.g. {var}: [0, 1, 2, 3]")
    out = []
    for item in items:
        try:
            number = int(item)
        except (TypeError, ValueError):
            number = -1
        if isinstance(item, bool) or number < 0 or str(number) != str(item).strip():
            raise InventoryError(f"hostvars[{host!r}].{var}", value=value,
                                 expected="device indexes (integers >= 0)",
                                 fix=f"use plain indexes such as [0, 1] in {var} on {host}")
        out.append(number)
    if len(set(out)) != len(out):
        raise InventoryError(f"hostvars[{host!r}].{var}", value=value,
                             expected="each device index once",
                             fix=f"remove the duplicate indexes from {var} on {host}")
    return tuple(out)


def _opt_str(host: str, var: str, value: Any) -> Optional[str]:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InventoryError(f"hostvars[{host!r}].{var}", value=value, expected="a string",
                             fix=f"quote the value of {var} on {host}")
    # control characters are refused before blanks are trimmed: "x\n" is not silently "x"
    U.check_text(f"hostvars[{host!r}].{var}", value)
    return value.strip()


def host_spec(name: str, hostvars: Mapping[str, Any]) -> HostSpec:
    """Normalise one host's variables (no facts needed; facts are used when cached)."""
    check_host_name(name)
    facts = hostvars.get("ansible_facts") if isinstance(hostvars.get("ansible_facts"), Mapping) else {}
    default_v4 = hostvars.get("ansible_default_ipv4") or (facts or {}).get("default_ipv4") or {}
    if not isinstance(default_v4, Mapping):
        default_v4 = {}

    address: Optional[str] = None
    source = ""
    explicit = _opt_str(name, "vllm_fabric_address", hostvars.get("vllm_fabric_address"))
    if explicit is not None:
        if not _is_ip(explicit):
            raise InventoryError(f"hostvars[{name!r}].vllm_fabric_address", value=explicit,
                                 expected="an IPv4 or IPv6 address",
                                 fix=f"set vllm_fabric_address on {name} to the node's cluster-network IP")
        address, source = check_address(name, "vllm_fabric_address", explicit), "vllm_fabric_address"
    else:
        ansible_host = hostvars.get("ansible_host")
        if isinstance(ansible_host, str) and _is_ip(ansible_host.strip()):
            address, source = check_address(name, "ansible_host", ansible_host.strip()), "ansible_host"
        elif isinstance(default_v4.get("address"), str) and _is_ip(default_v4["address"]):
            address = check_address(name, "ansible_default_ipv4.address", default_v4["address"])
            source = "ansible_default_ipv4.address"
        elif isinstance(ansible_host, str) and ansible_host.strip():
            source = f"ansible_host={ansible_host.strip()!r} (a name, not an IP)"

    iface = _opt_str(name, "vllm_fabric_interface", hostvars.get("vllm_fabric_interface"))
    if iface is None:
        fact_iface = default_v4.get("interface")
        iface = fact_iface if isinstance(fact_iface, str) and fact_iface else None
    if iface is not None and (not _IFACE_RE.match(iface) or iface.startswith("^") or "," in iface):
        raise InventoryError(f"hostvars[{name!r}].vllm_fabric_interface", value=iface,
                             expected="one concrete interface name such as 'ens5' "
                                      "(Gloo rejects NCCL's '^lo,docker' exclusion lists)",
                             fix=f"set vllm_fabric_interface on {name} to a single NIC name")

    node_rank = hostvars.get("vllm_node_rank")
    if node_rank is not None:
        if isinstance(node_rank, bool) or not isinstance(node_rank, int) or node_rank < 0:
            if isinstance(node_rank, str) and node_rank.isdigit():
                node_rank = int(node_rank)
            else:
                raise InventoryError(f"hostvars[{name!r}].vllm_node_rank", value=node_rank,
                                     expected="an integer >= 0 (0 is the head)",
                                     fix=f"set vllm_node_rank on {name} to 0, 1, 2 ...")

    gpus: Optional[tuple[int, ...]] = None
    if hostvars.get("vllm_gpus") not in (None, "", []):
        gpus = _as_gpu_list(name, "vllm_gpus", hostvars["vllm_gpus"])
    count = hostvars.get("vllm_gpu_count")
    if count is not None:
        if isinstance(count, str) and count.isdigit():
            count = int(count)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0 or count > 1024:
            raise InventoryError(f"hostvars[{name!r}].vllm_gpu_count", value=count,
                                 expected="an integer between 0 and 1024",
                                 fix=f"set vllm_gpu_count on {name} to its accelerator count")
        if gpus is not None and len(gpus) != count:
            raise InventoryError(f"hostvars[{name!r}].vllm_gpu_count", value=count,
                                 expected=f"{len(gpus)} (the length of vllm_gpus {list(gpus)})",
                                 fix=f"set only one of vllm_gpus / vllm_gpu_count on {name}")
        if gpus is None:
            gpus = tuple(range(count))

    dep_gpus_raw = hostvars.get("vllm_deployment_gpus") or {}
    if not isinstance(dep_gpus_raw, Mapping):
        raise InventoryError(f"hostvars[{name!r}].vllm_deployment_gpus", value=dep_gpus_raw,
                             expected="a mapping of deployment name to device indexes",
                             fix=f"write vllm_deployment_gpus on {name} as {{deployment: [0, 1]}}")
    dep_gpus = {str(k): _as_gpu_list(name, f"vllm_deployment_gpus.{k}", v)
                for k, v in dep_gpus_raw.items()}

    placeholders_raw = hostvars.get("vllm_placeholders") or {}
    if not isinstance(placeholders_raw, Mapping) or not all(
            isinstance(k, str) and _PLACEHOLDER_NAME_RE.match(k) for k in placeholders_raw):
        raise InventoryError(f"hostvars[{name!r}].vllm_placeholders", value=placeholders_raw,
                             expected="a mapping of upper-case placeholder names (no '$') to values",
                             fix=f"write vllm_placeholders on {name} as {{IB_IF: mlx5_0}}")

    texts = {var: _opt_str(name, var, hostvars.get(var))
             for var in ("vllm_rdma_devices", "vllm_ib_hca", "vllm_mooncake_device")}
    for var, text in texts.items():
        if text is not None:
            U.check_env_value(f"hostvars[{name!r}].{var}", text)
    for key, value in placeholders_raw.items():
        U.check_text(f"hostvars[{name!r}].vllm_placeholders.{key}", str(value))
    for dep in dep_gpus:
        U.check_text(f"hostvars[{name!r}].vllm_deployment_gpus", dep)

    return HostSpec(
        name=name,
        address=address,
        address_source=source,
        interface=iface,
        pd_roles=_as_roles(name, "vllm_pd_role", hostvars.get("vllm_pd_role"), PD_ROLES),
        mooncake_roles=_as_roles(name, "vllm_mooncake_role", hostvars.get("vllm_mooncake_role"),
                                 MOONCAKE_ROLES),
        node_rank=node_rank,
        gpus=gpus,
        deployment_gpus=dep_gpus,
        rdma_devices=texts["vllm_rdma_devices"],
        ib_hca=texts["vllm_ib_hca"],
        mooncake_device=texts["vllm_mooncake_device"] or "",
        placeholders={str(k): str(v) for k, v in placeholders_raw.items()},
    )


# --------------------------------------------------------------------------------------
# Deployments from hostvars + groups
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class DeclaredDeployment:
    """A validated deployment declaration bound to its inventory group."""

    name: str
    group: str
    spec: DeploymentSpec
    #: Member hosts in inventory order.
    hosts: tuple[str, ...]
    #: Where it was declared, for messages.
    source: str


def _pydantic_error(exc: ValidationError, prefix: str, source: str) -> InventoryError:
    err = exc.errors()[0]
    loc = ".".join(str(part) for part in err.get("loc", ()) if part != "__root__")
    key = f"{prefix}.{loc}" if loc else prefix
    value = redact(err.get("input"))
    if loc.endswith(("api_key", "token")) or is_secret_env(loc.rsplit(".", 1)[-1]):
        value = U.fingerprint(str(value))
    msg = str(err.get("msg", "invalid value"))
    if err.get("type") == "extra_forbidden":
        return InventoryError(key, value=value, expected="a known vllm_deployment key",
                              fix=f"remove or rename {loc!r} (see docs/plan.md for the keys)",
                              source=source)
    if err.get("type") == "missing":
        return InventoryError(key, expected="a value", has_value=False,
                              fix=f"add {loc!r} to {prefix}", source=source)
    msg = msg.removeprefix("Value error, ")
    for prefix, replacement in (("must be ", ""), ("must match ", "a value matching ")):
        if msg.startswith(prefix):
            msg = replacement + msg[len(prefix):]
    return InventoryError(key, value=value, expected=msg, fix=f"correct {key}", source=source)


def parse_deployment(raw: Any, where: str, source: str = "") -> DeploymentSpec:
    """Validate one ``vllm_deployment`` mapping."""
    if not isinstance(raw, Mapping):
        raise InventoryError(where, value=raw, expected="a mapping with at least 'recipe'",
                             fix="define vllm_deployment as a YAML mapping", source=source)
    try:
        spec = DeploymentSpec.model_validate(dict(raw))
    except ValidationError as exc:
        raise _pydantic_error(exc, where, source) from None
    check_deployment_strings(spec, where)
    return spec


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return repr(value) if not isinstance(value, (str, int, float, bool, type(None))) else value


def _group_hosts(groups: Mapping[str, Sequence[str]], name: str) -> tuple[str, ...]:
    return tuple(groups.get(name) or ())


def collect_deployments(hostvars: Mapping[str, Mapping[str, Any]],
                        groups: Mapping[str, Sequence[str]],
                        deployments_list: Optional[Sequence[Any]] = None,
                        group_declarations: Optional[Mapping[str, Any]] = None) -> list[DeclaredDeployment]:
    """Find every declared deployment.

    * ``vllm_deployment`` on a group: every member host sees the same mapping.
      The deployment's group is ``vllm_deployment.group`` when given, else the
      one inventory group whose members are exactly the hosts that share that
      mapping. Its name defaults to the group name.
    * ``vllm_deployments``: a list of mappings, each with ``group`` (and
      optionally ``name``), typically in ``group_vars/all``; use it when one
      host carries several deployments.

    ``group_declarations`` (group -> the ``vllm_deployment`` set in that group's own vars,
    templated), when the caller can see group vars: a declaration that no host ends up
    carrying (each of its hosts is in another group whose ``vllm_deployment`` wins) is
    refused instead of silently dropped.
    """
    found: dict[str, DeclaredDeployment] = {}
    ignore = {"all", "ungrouped"}

    def add(spec: DeploymentSpec, group: str, where: str) -> None:
        if group not in groups:
            raise InventoryError(f"{where}.group", value=group, expected="an inventory group",
                                 fix=f"create group {group!r} or point 'group' at an existing one")
        hosts = _group_hosts(groups, group)
        if not hosts:
            raise InventoryError(f"{where}.group", value=group,
                                 expected="a group with at least one host",
                                 fix=f"add hosts to group {group!r}")
        name = spec.name or group
        if not NAME_RE.match(name):
            raise InventoryError(f"{where}.name", value=name,
                                 expected=f"a name matching {NAME_RE.pattern}",
                                 fix="set vllm_deployment.name to letters, digits, '-', '_' or '.'")
        previous = found.get(name)
        if previous is not None:
            if previous.group == group and previous.spec == spec:
                return
            raise InventoryError(f"{where}.name", value=name,
                                 expected="a deployment name used once in the fleet",
                                 fix=f"rename one of the deployments declared on groups "
                                     f"{previous.group!r} and {group!r}")
        found[name] = DeclaredDeployment(name=name, group=group, spec=spec, hosts=hosts, source=where)

    # 1. explicit list
    if deployments_list is not None:
        if not isinstance(deployments_list, (list, tuple)):
            raise InventoryError("vllm_deployments", value=deployments_list,
                                 expected="a list of deployment mappings",
                                 fix="write vllm_deployments as a YAML list")
        for index, item in enumerate(deployments_list):
            where = f"vllm_deployments[{index}]"
            spec = parse_deployment(item, where)
            if not spec.group:
                raise InventoryError(f"{where}.group", expected="the inventory group to deploy on",
                                     has_value=False, fix=f"add 'group: <name>' to {where}")
            add(spec, spec.group, where)

    # 2. per-group vllm_deployment, seen through hostvars
    by_decl: dict[Any, list[str]] = {}
    raw_of: dict[Any, Any] = {}
    for host in sorted(hostvars):
        raw = hostvars[host].get("vllm_deployment")
        if raw is None:
            continue
        key = _freeze(raw)
        by_decl.setdefault(key, []).append(host)
        raw_of.setdefault(key, (raw, host))
    for key in sorted(by_decl, key=lambda k: sorted(by_decl[k])):
        raw, first_host = raw_of[key]
        members = set(by_decl[key])
        where = f"hostvars[{first_host!r}].vllm_deployment"
        spec = parse_deployment(raw, where)
        group = spec.group
        if group is not None:
            where = f"group {group!r} vllm_deployment"
        if group is None:
            candidates = sorted(g for g, hs in groups.items()
                                if g not in ignore and set(hs) == members)
            if len(candidates) != 1:
                raise InventoryError(
                    where, value=sorted(members),
                    expected="vllm_deployment defined on exactly one inventory group",
                    fix=("set vllm_deployment.group (and name) explicitly; "
                         + ("no group has exactly these hosts" if not candidates
                            else f"groups {candidates} all match")),
                )
            group = candidates[0]
            where = f"group {group!r} vllm_deployment"
        add(spec, group, where)

    for group, raw in sorted((group_declarations or {}).items()):
        if group in ignore or raw is None or _freeze(raw) in by_decl:
            continue
        hosts = _group_hosts(groups, group)
        others = sorted({g for h in hosts for g, hs in groups.items()
                         if g not in ignore and g != group and h in hs})
        raise InventoryError(f"group {group!r} vllm_deployment", value=list(hosts),
                             expected="a deployment whose hosts carry it (a host variable holds one "
                                      f"vllm_deployment; these hosts also belong to {others}, whose "
                                      "vllm_deployment wins)",
                             fix="declare both with the vllm_deployments list (each item with name and "
                                 "group), or keep each host in one deployment group")

    return [found[name] for name in sorted(found)]
