# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""The ``vllm_deployment`` mapping as pydantic models (:class:`DeploymentSpec`).

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

The models check types, ranges and names; the strings they hold are checked
for hostile content by ``_inventory_checks`` (``check_deployment_strings``).
docs/plan.md documents every key.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Optional

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    field_validator,
    model_validator,
)

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._argv_tools import compact_json
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._image_refs import parse_reference

__all__ = [
    "DRAIN_DEFAULT_S",
    "DRAIN_SINCE",
    "NAME_RE",
    "PLACEHOLDER_NAME_RE",
    "Count",
    "CpuSpec",
    "DeploymentSpec",
    "MooncakeSpec",
    "PdSpec",
    "PoolSpec",
    "PortsSpec",
    "RouterSpec",
    "UnitSpec",
    "WeightsSpec",
    "drain_seconds",
    "image_vllm_version",
    "read_integer",
]

#: Deployment names end up in unit names, container names and file names.
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
_ENV_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PLACEHOLDER_NAME_RE = re.compile(r"^[A-Z][A-Z0-9_]*$")
_DIGITS_RE = re.compile(r"^[0-9]+$")
#: What a refusal of a boolean where a number belongs says.
NOT_A_BOOLEAN = "an integer, not a boolean (YAML reads true/yes/on as a boolean)"


def read_integer(value: Any) -> Optional[int]:
    """The one number reader of the inventory: the integer ``value`` is, or ``None``.

    A boolean is never a number (YAML ``true``/``yes`` would otherwise count as 1); a
    string of ASCII digits is (INI ``:vars`` and templated values are strings); a float
    only when it is whole (pydantic's own rule for ``int`` fields).
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return int(value)
    if isinstance(value, str) and _DIGITS_RE.match(value):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _integer(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError(f"must be {NOT_A_BOOLEAN}")
    number = read_integer(value)
    return value if number is None else number  # anything else: pydantic's own int message


#: Every integer field of ``vllm_deployment``: booleans refused, the rest as pydantic reads ints.
Count = Annotated[int, BeforeValidator(_integer)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PoolSpec(_Strict):
    """Size and parallelism of one prefill/decode pool (defaults: from the inventory)."""

    nodes: Optional[Count] = Field(default=None, ge=1, le=1024)
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
    api: Optional[Count] = Field(default=None, ge=1, le=65535)
    #: ``--master-port`` of the mp multi-node backend (vLLM default 29501).
    master: Optional[Count] = Field(default=None, ge=1, le=65535)
    #: Value for ``$PREFILL_DP_RPC_PORT`` / ``$DECODE_DP_RPC_PORT``.
    prefill_dp_rpc: Count = Field(default=29550, ge=1, le=65535)
    decode_dp_rpc: Count = Field(default=29551, ge=1, le=65535)
    #: Router listen port (``$ROUTER_PORT``); default: the recipe's router port, else 30000.
    router: Optional[Count] = Field(default=None, ge=1, le=65535)
    #: The router's Prometheus port (``--prometheus-port``); default vllm-router's own 29000.
    router_metrics: Optional[Count] = Field(default=None, ge=1, le=65535)


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
    def _image_for_container(self) -> RouterSpec:
        if self.runtime == "container" and not self.image:
            raise ValueError("router.image is required when router.runtime is 'container'")
        return self


class MooncakeSpec(_Strict):
    """Where the Mooncake master/store binaries live (``mooncake-transfer-engine`` venv)."""

    venv: str = "/opt/mooncake"


class UnitSpec(_Strict):
    """systemd supervision knobs."""

    restart_sec: Count = Field(default=30, ge=1, le=3600)
    stop_timeout: Count = Field(default=120, ge=1, le=3600)
    #: Default ``TimeoutStartSec`` when the recipe sets no ``VLLM_ENGINE_READY_TIMEOUT_S``.
    start_timeout: Count = Field(default=1800, ge=1, le=86400)
    #: Watchdogs (docs/operations.md, group supervision): one per rank of a multi-node group, one per
    #: single-node engine (single, replica, KV-offload instance).
    watchdog: bool = True
    #: Seconds between two probes of the group head's ``/health``.
    watchdog_interval: Count = Field(default=5, ge=1, le=3600)
    #: Seconds the head may fail ``/health`` (after being healthy) before the rank restarts.
    watchdog_grace: Count = Field(default=30, ge=1, le=86400)
    #: Seconds between two one-token completions the head's watchdog sends (0: no probe).
    watchdog_probe_interval: Count = Field(default=30, ge=0, le=3600)
    #: Seconds one probe may take before it counts as no progress (with no token generated).
    watchdog_probe_timeout: Count = Field(default=60, ge=1, le=3600)
    #: ``vllm serve --shutdown-timeout``: seconds a stopping engine finishes its in-flight
    #: requests (``/health`` answers 503 meanwhile); 0 aborts them. Unset: :data:`DRAIN_DEFAULT_S`
    #: where the image's vLLM has the flag (docs/operations.md#drain).
    shutdown_timeout: Optional[Count] = Field(default=None, ge=0, le=3600)

    @model_validator(mode="after")
    def _drain_inside_stop(self) -> UnitSpec:
        if self.shutdown_timeout is not None and self.shutdown_timeout >= self.stop_timeout:
            raise ValueError(f"unit.shutdown_timeout ({self.shutdown_timeout}) must be below unit.stop_timeout "
                             f"({self.stop_timeout}): docker stop kills the engine after stop_timeout seconds")
        return self


#: Drain seconds when ``unit.shutdown_timeout`` is unset and the image's vLLM has the flag.
DRAIN_DEFAULT_S = 30
#: The first vLLM release with ``--shutdown-timeout`` (vllm-project/vllm#34730).
DRAIN_SINCE = (0, 18)
_TAG_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)(?:[.\-+_].*)?$")


def image_vllm_version(image: Optional[str]) -> Optional[tuple[int, int]]:
    """The vLLM (major, minor) an image's tag names (``vllm/vllm-openai:v0.17.1``), else None."""
    if not image:
        return None
    suffix = parse_reference(image).suffix  # ":tag", "@sha256:...", ":tag@sha256:..." or ""
    if not suffix.startswith(":"):
        return None
    match = _TAG_VERSION_RE.match(suffix[1:].split("@", 1)[0])
    return (int(match.group(1)), int(match.group(2))) if match else None


def drain_seconds(unit: UnitSpec, image: Optional[str]) -> int:
    """``--shutdown-timeout`` for an engine: the setting, else 0 when the image's tag names a
    vLLM older than :data:`DRAIN_SINCE`, else :data:`DRAIN_DEFAULT_S` (the argv check in the
    image refuses the flag, with its words, should an untagged image lack it)."""
    if unit.shutdown_timeout is not None:
        return unit.shutdown_timeout
    version = image_vllm_version(image)
    if version is not None and version < DRAIN_SINCE:
        return 0
    return min(DRAIN_DEFAULT_S, unit.stop_timeout - 1)  # docker stop must not cut the drain


class CpuSpec(_Strict):
    """vLLM's CPU backend (Intel Xeon hardware, generation ``cpu``): the env it reads."""

    #: GiB of host memory for the KV cache of each engine (``VLLM_CPU_KVCACHE_SPACE``).
    kvcache_space_gb: Count = Field(default=40, ge=1, le=65536)
    #: OpenMP thread binding (``VLLM_CPU_OMP_THREADS_BIND``): ``auto`` (one NUMA node per rank),
    #: ``nobind``, or CPU lists per rank separated by ``|`` (e.g. ``0-31|32-63``).
    omp_threads_bind: str = Field(default="auto", pattern=r"^(auto|nobind|[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*"
                                                          r"(\|[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*)*)$")
    #: CPUs per rank left to the API server and other threads when binding ``auto``.
    reserved_cpus: Optional[Count] = Field(default=None, ge=0, le=4096)

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
    kv_instances: Optional[Count] = Field(default=None, ge=1, le=1024)
    node_count: Optional[Count] = Field(default=None, ge=1, le=1024)
    #: Independent copies of a single-node strategy, one per engine host, behind the router host.
    replicas: Optional[Count] = Field(default=None, ge=1, le=1024)
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
    #: ``extra_env`` names whose value the operator encrypted with Ansible Vault (set by
    #: ``_inventory.parse_deployment``, not by the user): secret whatever the name.
    _vault_env: frozenset[str] = PrivateAttr(default_factory=frozenset)

    @property
    def vault_env(self) -> frozenset[str]:
        """The ``extra_env`` names that hold a Vault value (written to the 0600 secret env file)."""
        return self._vault_env

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
        if isinstance(value, list):  # a JSON value written over several lines is put on one (compact_json)
            return [str(item) if isinstance(item, (int, float)) and not isinstance(item, bool)
                    else compact_json(item) if isinstance(item, str) else item for item in value]
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
            if not PLACEHOLDER_NAME_RE.match(key):
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
