# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Preflight of the deploy roles: what to probe on a host, and the checks over the answer.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

``probe_request`` says what vllm_host_probe reads on the host (nothing the checks do not use);
``evaluate`` runs the checks of the groups asked for over its facts. The groups are the roles'
former preflight task files: ``host`` (roles/preflight: docker, devices, accelerators, CPU, disk,
fabric interface), ``image``, ``weights``, ``fabric``, ``engine``, ``router``, ``monitoring``.
"""

from __future__ import annotations

import itertools
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Optional
from urllib.parse import quote

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _preflight_checks as C
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._errors import RecipeError
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._fabric import (
    FABRIC_ADDRESS_KEYS,
    FABRIC_IFACE_KEYS,
    FABRIC_KEY,
    FABRIC_RDMA_KEYS,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._host_view import (
    docker_processes,
    processes_of_kind,
    unique,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._monitoring import alert_rules_text
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._vendors import VENDORS

CHECK_GROUPS = ("host", "image", "weights", "fabric", "engine", "router", "monitoring")
#: Groups that read this host's weights view (vllm_fleet_weights); ``[]`` computes only the view.
VIEW_GROUPS = frozenset(("host", "weights"))
DEFAULT_DOCKER = "/usr/bin/docker"
#: The package the router role installs into each venv router's venv.
ROUTER_PACKAGE = "vllm-router"
DEFAULT_HUB = "https://huggingface.co"
CDI_DIRS = ("/etc/cdi", "/var/run/cdi")
ENGINE_KINDS = ("engine", "mooncake_master", "mooncake_store", "watchdog")


@dataclass(frozen=True)
class Inputs:  # pylint: disable=too-many-instance-attributes  # one field per role variable
    """The role variables the checks read (named as the roles name them; defaults: the roles' defaults)."""

    vllm_fleet_host: Mapping[str, Any]
    vllm_fleet_deployments: Mapping[str, Any]
    #: This host's weights view when an earlier task computed it; None: computed here.
    vllm_fleet_weights: Optional[Sequence[Mapping[str, Any]]] = None
    vllm_weights_repos: Mapping[str, Any] = field(default_factory=dict)
    vllm_weights_origin: Mapping[str, Any] = field(default_factory=dict)
    vllm_preflight_accelerator_count: Any = ""
    vllm_preflight_cpu_engine_overhead_gb: Any = 4
    vllm_preflight_image_bytes: Any = 32212254720
    vllm_preflight_weights_bytes: Mapping[str, Any] = field(default_factory=dict)
    vllm_preflight_disk_margin_bytes: Any = 1073741824
    vllm_preflight_query_hub: Any = True
    vllm_image_digests: Mapping[str, Any] = field(default_factory=dict)
    vllm_image_archives: Mapping[str, Any] = field(default_factory=dict)
    vllm_image_registry_credentials: Sequence[Any] = ()
    vllm_fabric_check: Any = True
    vllm_router_package: Any = "vllm-router==0.1.17"
    vllm_monitoring_alert_thresholds: Any = None
    vllm_monitoring_file_sd_dir: Any = "/etc/prometheus/file_sd/vllm-fleet"
    vllm_monitoring_rules_file: Any = "/etc/prometheus/rules/vllm-fleet.rules.yml"
    vllm_monitoring_config_file: Any = "/etc/prometheus/prometheus.yml"
    vllm_monitoring_scrape_interval: Any = "15s"
    vllm_monitoring_evaluation_interval: Any = "15s"
    vllm_monitoring_install: Any = True
    ansible_os_family: Optional[str] = None
    ansible_distribution: Optional[str] = None

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @property
    def processes(self) -> list[Mapping[str, Any]]:
        return list(self.vllm_fleet_host.get("processes") or [])

    @property
    def docker_processes(self) -> list[Mapping[str, Any]]:
        return docker_processes(self.processes)

    @property
    def docker(self) -> str:
        procs = self.docker_processes
        return procs[0]["exec_start"][0] if procs else DEFAULT_DOCKER

    @property
    def vendors(self) -> list[str]:
        deployments = unique(proc["deployment"] for proc in self.processes if proc.get("gpus"))
        return unique(self.vllm_fleet_deployments[name]["vendor"] for name in deployments)

    @property
    def gpu_indexes(self) -> list[int]:
        return sorted(unique(index for indexes in (self.vllm_fleet_host.get("gpus") or {}).values()
                             for index in indexes))

    @property
    def vendor(self) -> str:
        """The vendor whose tool counts the accelerators (the first one of this host's deployments)."""
        vendors = self.vendors
        return vendors[0] if vendors else ""

    @property
    def declared_accelerators(self) -> str:
        return str(self.vllm_preflight_accelerator_count)


def needs_view(checks: Sequence[str]) -> bool:
    return not checks or bool(VIEW_GROUPS.intersection(checks))


# --- queued checks: one host read for the checks of every role ---------------------------

#: The fact a deferred check is queued in (playbooks/_preflight.yml runs the queue at its end).
QUEUE_FACT = "vllm_fleet_preflight_queue"
#: Inputs every role passes alike: a queued entry leaves them out (the run of the queue passes them once).
SHARED_INPUTS = frozenset(("vllm_fleet_host", "vllm_fleet_deployments", "vllm_fleet_weights"))


def queue_entry(checks: Sequence[str], inputs: Mapping[str, Any]) -> dict[str, Any]:
    """What a deferred check leaves in the queue: its checks and the inputs only its role passes."""
    return {"checks": list(checks), "inputs": {key: value for key, value in inputs.items() if key not in SHARED_INPUTS}}


def queued_with(queue: Any, checks: Sequence[str], inputs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``queue`` with this deferred check as its last entry, replacing an earlier entry of the same checks
    (a role deferring again, or an entry left by a run that stopped before the queue ran)."""
    entry = queue_entry(checks, inputs)
    earlier = queue if isinstance(queue, (list, tuple)) else []
    return [old for old in earlier if not (isinstance(old, Mapping) and old.get("checks") == entry["checks"])] + [entry]


def merge_queued(checks: Sequence[str], inputs: Mapping[str, Any],
                 queued: Sequence[Mapping[str, Any]]) -> tuple[list[str], dict[str, Any]]:
    """``checks`` and ``inputs`` joined with the queued entries': one run, one host read, for all of them.

    Two roles passing the same variable pass the same value (each role's default or the
    inventory's); a difference is refused, naming the variable.
    """
    wanted = set(checks)
    merged = dict(inputs)
    for index, entry in enumerate(queued):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("checks"), (list, tuple)) \
                or not isinstance(entry.get("inputs"), Mapping):
            raise RecipeError(f"queued[{index}]", value=entry,
                              expected="{checks: [...], inputs: {...}} as a deferred vllm_preflight task leaves it")
        unknown = [check for check in entry["checks"] if check not in CHECK_GROUPS]
        if unknown:
            raise RecipeError(f"queued[{index}].checks", value=unknown, expected=f"any of {', '.join(CHECK_GROUPS)}")
        foreign = sorted(set(entry["inputs"]) - set(Inputs.names()))
        if foreign:
            raise RecipeError(f"queued[{index}].inputs", value=foreign, expected=f"keys among {', '.join(Inputs.names())}")
        wanted.update(entry["checks"])
        for key, value in entry["inputs"].items():
            if key in merged and merged[key] != value:
                raise RecipeError(f"queued[{index}].inputs.{key}",
                                  reason="differs from the value another check of the run passed; "
                                         "the checks of one run read each variable once")
            merged[key] = value
    return [check for check in CHECK_GROUPS if check in wanted], merged


# --- what the units' docker argv needs on the host -------------------------------------

def _docker_pairs(inputs: Inputs) -> list[tuple[str, str]]:
    tokens = [token for proc in inputs.docker_processes for token in proc["exec_start"]]
    return list(itertools.pairwise(tokens))


def docker_devices(inputs: Inputs) -> list[str]:
    return unique(value for flag, value in _docker_pairs(inputs) if flag == "--device")


def device_paths(inputs: Inputs) -> list[str]:
    return unique(re.sub(":.*$", "", device) for device in docker_devices(inputs) if device.startswith("/"))


def cdi_devices(inputs: Inputs) -> list[str]:
    return [device for device in docker_devices(inputs) if not device.startswith("/")]


def mount_sources(inputs: Inputs, weights: Sequence[Mapping[str, Any]]) -> list[str]:
    """Bind-mount sources that must exist already (not the config dir, weights caches or compile caches)."""
    caches = unique(entry["cache"] for entry in weights)
    owned = re.compile("^(/etc/vllm-fleet/|" + ("|".join(re.escape(c) for c in caches) or "^$") + ")")
    compile_caches = [proc["compile_cache"] for proc in inputs.docker_processes if proc.get("compile_cache")]
    sources = (value.split(":")[0] for flag, value in _docker_pairs(inputs) if flag in ("-v", "--volume"))
    return unique(src for src in sources if src.startswith("/") and not owned.match(src) and src not in compile_caches)


def needs_nvidia_runtime(inputs: Inputs) -> bool:
    return any("--gpus" in proc["exec_start"] for proc in inputs.docker_processes)


def cpu_engines(inputs: Inputs) -> list[Mapping[str, Any]]:
    cpu = {name for name, dep in inputs.vllm_fleet_deployments.items() if dep.get("vendor") == "cpu"}
    return [proc for proc in processes_of_kind(inputs.processes, "engine") if proc["deployment"] in cpu]


def accelerator_tool(vendor: str) -> str:
    """The count command's name for messages (roles/preflight named npu-smi for any other vendor)."""
    known = VENDORS.get(vendor)
    return known.count_tool if known is not None and known.count_tool else "npu-smi"


def count_command(vendor: str) -> Optional[str]:
    known = VENDORS.get(vendor)
    return known.count_command if known is not None else None


# --- fabric ---------------------------------------------------------------------------

def fabric_env(inputs: Inputs) -> list[tuple[str, str]]:
    return [(key, str(value)) for proc in processes_of_kind(inputs.processes, "engine")
            for key, value in (proc.get("env") or {}).items() if FABRIC_KEY.match(key)]


def fabric_interfaces(env: Sequence[tuple[str, str]]) -> list[str]:
    names = (name for key, value in env if key in FABRIC_IFACE_KEYS for name in value.split(","))
    return unique(name for name in names if not name.startswith("^"))


def fabric_addresses(env: Sequence[tuple[str, str]]) -> list[str]:
    return unique(value for key, value in env if key in FABRIC_ADDRESS_KEYS)


def rdma_devices(env: Sequence[tuple[str, str]]) -> list[str]:
    names = (name for key, value in env if key in FABRIC_RDMA_KEYS for name in value.split(","))
    return unique(re.sub(":.*$", "", re.sub("^[=^]", "", name)) for name in names if name not in ("all", ""))


def fabric_checked(inputs: Inputs) -> bool:
    return bool(boolean(inputs.vllm_fabric_check, strict=False))


# --- routers ----------------------------------------------------------------------------

def router_venvs(inputs: Inputs) -> list[str]:
    """The venvs this host's venv routers run from (``<venv>/bin/vllm-router``)."""
    return unique(posixpath.dirname(posixpath.dirname(proc["exec_start"][0]))
                  for proc in processes_of_kind(inputs.processes, "router") if proc.get("runtime") == "venv")


# --- images -----------------------------------------------------------------------------

def image_references(inputs: Inputs) -> list[str]:
    return sorted(unique(proc["image"] for proc in inputs.docker_processes if proc.get("image")))


def archived_images(inputs: Inputs) -> list[str]:
    return [ref for ref in image_references(inputs) if ref in inputs.vllm_image_archives]


# --- weights ----------------------------------------------------------------------------

def hub_tree_url(entry: Mapping[str, Any]) -> str:
    base = re.sub("/$", "", entry.get("endpoint") or DEFAULT_HUB)
    return f"{base}/api/models/{entry['repo']}/tree/{quote(str(entry['revision']), safe='/')}?recursive=true"


def arrives_here(entry: Mapping[str, Any]) -> bool:
    """Weights that take space on this host's disk when not present (not on a shared filesystem)."""
    return bool(entry["mode"] != "shared_fs")


def weights_probe(inputs: Inputs, checks: Sequence[str], view: Sequence[Mapping[str, Any]],
                  host: str) -> list[dict[str, Any]]:
    """vllm_host_probe's ``weights`` request: markers, and what the checks read for a revision not yet here."""
    known = inputs.vllm_fleet_weights is not None
    query_hub = boolean(inputs.vllm_preflight_query_hub, strict=False)
    out = []
    for entry in view:
        wanted: dict[str, Any] = {"name": entry["name"]}
        if known:
            wanted["present"] = bool(entry["present"])
        else:
            wanted["marker"] = entry["marker"]
        if "host" in checks and arrives_here(entry):
            wanted["free_space_path"] = entry["cache"]
            if query_hub and entry["name"] not in inputs.vllm_preflight_weights_bytes:
                wanted["tree_url"] = hub_tree_url(entry)
        if "weights" in checks and entry["origin"] == host and entry["mode"] == "import" and entry.get("source"):
            wanted["source"] = entry["source"]
        out.append(wanted)
    return out


def probe_request(inputs: Inputs, checks: Sequence[str], view: Sequence[Mapping[str, Any]],
                  host: str) -> dict[str, Any]:
    """What vllm_host_probe reads for ``checks`` (empty: nothing to read on the host)."""
    request: dict[str, Any] = {}
    paths: list[str] = []
    if needs_view(checks) and view:
        request["weights"] = weights_probe(inputs, checks, view, host)
    if "host" in checks:
        if inputs.docker_processes:
            request.update(docker=inputs.docker, images=image_references(inputs), docker_root_free=True)
        paths += device_paths(inputs) + mount_sources(inputs, view)
        if cdi_devices(inputs):
            request["cdi_dirs"] = list(CDI_DIRS)
        indexes = inputs.gpu_indexes
        if indexes and not inputs.declared_accelerators and count_command(inputs.vendor):
            request["accelerator_count"] = count_command(inputs.vendor)
        if cpu_engines(inputs):
            request["cpu"] = True
        if inputs.vllm_fleet_host.get("interface"):
            paths.append(f"/sys/class/net/{inputs.vllm_fleet_host['interface']}")
    if "image" in checks:
        paths += [inputs.vllm_image_archives[ref] for ref in archived_images(inputs)
                  if isinstance(inputs.vllm_image_archives[ref], str)]
    if "fabric" in checks and fabric_checked(inputs):
        env = fabric_env(inputs)
        if fabric_interfaces(env) or fabric_addresses(env):
            request["network"] = True
        paths += [f"/sys/class/infiniband/{device}" for device in rdma_devices(env)]
    if "engine" in checks:
        engines = docker_processes(processes_of_kind(inputs.processes, *ENGINE_KINDS))
        if engines:
            request["docker_version"] = engines[0]["exec_start"][0]
    venvs = router_venvs(inputs) if "router" in checks else []
    if venvs:
        request["packages"] = {venv: ROUTER_PACKAGE for venv in venvs}
    if paths:
        request["paths"] = unique(paths)
    return request


def monitoring_threshold_errors(thresholds: Any) -> list[str]:
    """What the prometheus_rules filter refuses (the alert rules are built from these thresholds)."""
    if thresholds is not None and not isinstance(thresholds, Mapping):
        return [f"vllm_monitoring_alerts: got {thresholds!r} ({type(thresholds).__name__}); "
                "expected a mapping of threshold names to values"]
    try:
        alert_rules_text(thresholds)
    except RecipeError as exc:
        return [str(exc)]
    return []


@dataclass
class Findings:
    """What the checks found: failures (the task fails) and warnings."""

    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _host_checks(inputs: Inputs, host: str, view: Sequence[Mapping[str, Any]], facts: Mapping[str, Any],
                 found: Findings) -> None:
    """roles/preflight: docker, devices and mounts, CDI, accelerators, CPU, disk, fabric interface."""
    docker = facts.get("docker")
    units = [proc["unit"] for proc in inputs.docker_processes]
    if docker is not None:
        found.errors += C.docker_errors(host, inputs.docker, units, docker)
        if docker["rc"] == 0 and docker.get("info") is not None and needs_nvidia_runtime(inputs):
            found.errors += C.runtime_errors(host, docker["info"])
    kinds = facts.get("paths") or {}
    found.errors += C.missing_paths_errors(host, device_paths(inputs) + mount_sources(inputs, view), kinds)
    found.errors += C.cdi_errors(host, cdi_devices(inputs), facts.get("cdi_specs", 0))
    indexes = inputs.gpu_indexes
    if indexes:
        declared = inputs.declared_accelerators
        result = facts.get("accelerator_count") or {"rc": 3, "stdout": "", "stderr": f"unsupported vendor {inputs.vendor}"}
        found.errors += C.accelerator_errors(
            host, max(indexes) + 1, C.accelerators_found(declared, result),
            "vllm_preflight_accelerator_count" if declared else accelerator_tool(inputs.vendor),
            indexes, list(inputs.vllm_fleet_host.get("gpus") or {}), inputs.vendors)
    engines = cpu_engines(inputs)
    if engines:
        cpu = facts.get("cpu") or {"flags": [], "mem_total": 0}
        found.errors += C.cpu_errors(host, cpu["flags"], cpu["mem_total"],
                                     [(proc.get("env") or {}).get("VLLM_CPU_KVCACHE_SPACE", "0") for proc in engines],
                                     inputs.vllm_preflight_cpu_engine_overhead_gb)
    _disk_checks(inputs, host, view, facts, found)
    interface = inputs.vllm_fleet_host.get("interface")
    if interface:
        found.errors += C.interface_errors(host, interface, kinds[f"/sys/class/net/{interface}"])


def _disk_checks(inputs: Inputs, host: str, view: Sequence[Mapping[str, Any]], facts: Mapping[str, Any],
                 found: Findings) -> None:
    """Weights that still have to arrive, then images the host does not have, per filesystem."""
    probed = facts.get("weights") or {}
    sizes = inputs.vllm_preflight_weights_bytes
    weights = [{"what": f"{entry['repo']}@{entry['revision']}",
                "bytes": C.as_int(sizes[entry["name"]] if entry["name"] in sizes
                                  else probed[entry["name"]].get("tree_bytes", 0)),
                **probed[entry["name"]]["free_space"]}
               for entry in view if not entry["present"] and arrives_here(entry)]
    found.warnings += C.unknown_size_warnings(host, weights)
    root = facts.get("docker_root_free")
    images = [{"what": f"image {ref}", "bytes": C.as_int(inputs.vllm_preflight_image_bytes), **root}
              for ref, present in (facts.get("images") or {}).items() if not present and root]
    found.errors += C.disk_errors(host, weights + images, C.as_int(inputs.vllm_preflight_disk_margin_bytes))


def _weights_checks(inputs: Inputs, host: str, view: Sequence[Mapping[str, Any]], facts: Mapping[str, Any],
                    found: Findings) -> None:
    found.errors += C.weights_errors(host, view)
    origins_here = [entry for entry in view if entry["origin"] == host]
    found.warnings += C.unpinned_warnings(origins_here)
    probed = facts.get("weights") or {}
    sources = {name: entry["source"] for name, entry in probed.items() if "source" in entry}
    found.errors += C.source_errors(host, origins_here, sources)


def _fabric_checks(inputs: Inputs, host: str, facts: Mapping[str, Any], found: Findings) -> None:
    if not fabric_checked(inputs):
        return
    env = fabric_env(inputs)
    network = facts.get("network") or {"interfaces": [], "ipv4": [], "ipv6": []}
    found.errors += C.fabric_interface_errors(host, fabric_interfaces(env), env, network["interfaces"])
    found.errors += C.fabric_address_errors(host, fabric_addresses(env), env, network["ipv4"], network["ipv6"])
    found.errors += C.rdma_errors(host, rdma_devices(env), facts.get("paths") or {})


def _image_checks(inputs: Inputs, host: str, facts: Mapping[str, Any], found: Findings) -> None:
    archives = inputs.vllm_image_archives
    found.errors += C.digest_errors(inputs.vllm_image_digests)
    found.errors += C.archive_path_errors(archives)
    found.errors += C.credential_errors(inputs.vllm_image_registry_credentials)
    archived = [ref for ref in archived_images(inputs) if isinstance(archives[ref], str)]
    found.errors += C.archive_on_host_errors(host, archived, archives, facts.get("paths") or {})


def _monitoring_checks(inputs: Inputs, host: str, found: Findings) -> None:
    found.errors += monitoring_threshold_errors(inputs.vllm_monitoring_alert_thresholds)
    found.errors += C.monitoring_path_errors(
        inputs.vllm_monitoring_file_sd_dir, inputs.vllm_monitoring_rules_file, inputs.vllm_monitoring_config_file,
        inputs.vllm_monitoring_scrape_interval, inputs.vllm_monitoring_evaluation_interval)
    found.errors += C.monitoring_os_errors(host, boolean(inputs.vllm_monitoring_install, strict=False),
                                           inputs.ansible_os_family, inputs.ansible_distribution)


def evaluate(inputs: Inputs, checks: Sequence[str], view: Sequence[Mapping[str, Any]], facts: Mapping[str, Any],
             host: str) -> Findings:
    """Run the checks of ``checks`` (in CHECK_GROUPS order) over vllm_host_probe's ``facts``."""
    found = Findings()
    if "host" in checks:
        _host_checks(inputs, host, view, facts, found)
    if "image" in checks:
        _image_checks(inputs, host, facts, found)
    if "weights" in checks:
        _weights_checks(inputs, host, view, facts, found)
    if "fabric" in checks:
        _fabric_checks(inputs, host, facts, found)
    if "engine" in checks:
        engines = docker_processes(processes_of_kind(inputs.processes, *ENGINE_KINDS))
        if engines:
            found.errors += C.engine_docker_errors(host, engines[0]["exec_start"][0],
                                                   [proc["unit"] for proc in engines], facts["docker_version"])
    if "router" in checks:
        found.errors += C.router_package_errors(inputs.vllm_router_package)
    if "monitoring" in checks:
        _monitoring_checks(inputs, host, found)
    return found
