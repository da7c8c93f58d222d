# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""The placement plan's data model: processes, deployment and fleet plans, ports, start orders.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._argv_tools import EngineArgs
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._errors import SchemaError, describe_value
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._inventory import (
    DeclaredDeployment,
    DeploymentSpec,
    HostSpec,
    InventoryError,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._launch import PlacementView

PLAN_SCHEMA = "vllm_fleet.plan/v1"

#: overrides -> the resolution placement reads: a ``PlacementView``, or a record of one
#: (``_placement_view``: a pinned plan.json record, or the recipes site's output shape).
Resolver = Callable[[Mapping[str, Any]], Union[PlacementView, Mapping[str, Any]]]

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
#: Each unit's JSON manifest on its host (what it is, where its files are): read by
#: vllm_units_info for status, prune and teardown instead of parsing the unit's comments.
UNIT_MANIFEST_DIR = "/var/lib/vllm-fleet/units"
UNIT_MANIFEST_SCHEMA = "vllm_fleet.unit/v1"


class PlacementError(InventoryError):
    """A deployment cannot be placed on the inventory as declared."""


def engine_error(decl: DeclaredDeployment, exc: Exception) -> PlacementError:
    """Re-raise a recipe/selection error of the engine against the inventory key that caused it.

    A shape error inside a recipe (or catalog) document names that document and the key path in
    it: the inventory is not where it can be fixed.
    """
    if isinstance(exc, SchemaError) and exc.source and exc.key and exc.key != "hf_id" \
            and exc.source != exc.key:
        expected = exc.expected + (f" ({exc.reason})" if exc.reason else "")
        return PlacementError(exc.key, value=exc.value, expected=expected, has_value=exc.has_value,
                              fix=f"correct {exc.key} in {exc.source} (the recipe of deployment "
                                  f"{decl.name!r})", source=exc.source)
    key = str(getattr(exc, "key", "") or getattr(exc, "source", "") or "recipe")
    if key.startswith("pd_nodes"):
        key = "pd" + key[len("pd_nodes"):]
    loaded_path = "/" in key or key.endswith((".yaml", ".yml", ".json"))
    expected = getattr(exc, "expected", "") or getattr(exc, "reason", "") or str(exc)
    reason = getattr(exc, "reason", "")
    if reason and reason != expected:
        expected = f"{expected} ({reason})"
    if key == "hf_id":  # the recipe's id, read from the file name or document `recipe:` points at
        expected = (f"a recipe whose id is {expected} (the recipe at {getattr(exc, 'source', '') or 'it'} "
                    f"gives {describe_value(getattr(exc, 'value', None))})")
        key, loaded_path = getattr(exc, "source", "") or key, True
    where = f"vllm_deployment[{decl.name}].{'recipe' if loaded_path else key}"
    if loaded_path:
        fix = f"fix the recipe file {key} or point vllm_deployment.recipe elsewhere"
        value: Any = decl.spec.recipe
    else:
        fix = f"change {key.split('[', maxsplit=1)[0]} in the vllm_deployment of group {decl.group!r}"
        value = getattr(exc, "value", None)
    has_value = bool(getattr(exc, "has_value", True)) or loaded_path
    return PlacementError(where, value=value, expected=expected, fix=fix, has_value=has_value,
                          source=decl.source)


def deployment_error(decl: DeclaredDeployment, key: str, value: Any, expected: str,
                     fix: str) -> PlacementError:
    """A :class:`PlacementError` at ``vllm_deployment[<name>].<key>`` of ``decl``."""
    where = f"vllm_deployment[{decl.name}]"
    return PlacementError(f"{where}.{key}" if key else where, value=value, expected=expected,
                          fix=fix, source=decl.source, has_value=value is not None)


def overrides_key(overrides: Mapping[str, Any]) -> str:
    return json.dumps(overrides, sort_keys=True, separators=(",", ":"))


@dataclass
class BoundEngine:
    """The recipe engine bound to one deployment's selection.

    ``resolve(overrides)`` merges ``overrides`` (node_count, pd_nodes,
    kv_instances) into the deployment's selection and returns the resolution
    (see ``Resolver``).
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
    #: Pinned resolutions (``resolution_file``): overrides -> the key of the record served for them,
    #: as messages name it; None for the engine.
    origin: Optional[Callable[[Mapping[str, Any]], str]] = None


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


@dataclass(frozen=True)
class Process:
    """One supervised process: one systemd unit on one host.

    Built whole by its placer; the fleet stage (``_fleet_resources.finish_fleet``) derives the
    final engine from the placed one with ``dataclasses.replace``. Nothing assigns to a field
    or changes its lists and dicts in place after construction.
    """

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
    #: What an engine's final argv says (served model, parallel layout, ports), read once at
    #: placement; None for other kinds.
    engine_args: Optional[EngineArgs] = None
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
    #: The key of its argv in a pinned record (``resolution_file``): named when a word of it cannot
    #: be written; "" for the engine's resolutions.
    origin: str = ""

    @property
    def unit_file(self) -> str:
        return f"{self.unit}.service"

    @property
    def manifest_file(self) -> str:
        return f"{UNIT_MANIFEST_DIR}/{self.unit_file}.json"


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class FleetPlan:
    deployments: list[DeploymentPlan]
    hosts: dict[str, HostSpec]
    #: host -> deployment -> physical accelerator indexes
    gpu_assignment: dict[str, dict[str, list[int]]] = field(default_factory=dict)
