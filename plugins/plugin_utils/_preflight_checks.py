# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""The preflight checks: pure functions from inputs and probed facts to error messages.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

Each returns a list of messages (empty: the check passes), worded as the roles' assert tasks
worded them: the key, the value found and what would be accepted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ansible.module_utils.common.text.formatters import bytes_to_human

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._host_view import unique

#: Jinja's truncate filter: texts up to this much longer than the length are kept whole.
TRUNCATE_LEEWAY = 5
_DIGITS = re.compile(r"^[0-9]+$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_ARCHIVE_PATH = re.compile(r"^/[^\x00-\x1f]*$")
_HUB_REPO = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_PINNED_REQUIREMENT = re.compile(r"^[A-Za-z0-9_.-]+(\[[^]]*\])?\s*(==|>=|~=|<=|@)\s*\S+")
_DURATION = re.compile(r"^[1-9][0-9]*(ms|s|m|h|d)$")
_RULES_FILE = re.compile(r"^/.*\.ya?ml$")


def truncate(text: str, length: int, end: str = "...") -> str:
    """Jinja's ``truncate`` filter with its defaults (the roles' messages used it): cut at a word boundary.

    Jinja is not imported here: it is ansible-core's dependency, not one this collection declares.
    """
    if len(text) <= length + TRUNCATE_LEEWAY:
        return text
    return text[:length - len(end)].rsplit(" ", 1)[0] + end


def matches(pattern: re.Pattern[str], value: Any) -> bool:
    """Ansible's ``is match`` test: the value as text, matched at its start."""
    return bool(pattern.match(str(value)))


def gib(size: int) -> float:
    return round(size / 2**30, 1)


# --- host (roles/preflight) -------------------------------------------------------------

def docker_errors(host: str, docker: str, units: Sequence[str], result: Mapping[str, Any]) -> list[str]:
    if result["rc"] == 0:
        return []
    found = (f"no {docker}" if result["rc"] == 2
             else f"a daemon that does not answer ({truncate(result['stderr'].strip(), 200)})")
    return [f"host {host}: docker: found {found}; needed: the docker engine (docker.service) for {', '.join(units)}"]


def runtime_errors(host: str, info: Mapping[str, Any]) -> list[str]:
    runtimes = info.get("Runtimes") or {}
    if "nvidia" in runtimes:
        return []
    return [f"host {host}: docker runtimes: found {', '.join(runtimes)}; needed: nvidia (the units run docker --gpus). "
            "Install nvidia-container-toolkit and run `nvidia-ctk runtime configure --runtime=docker`, "
            "or set gpu_runtime: cdi (or none on test hosts)"]


def missing_paths_errors(host: str, paths: Sequence[str], kinds: Mapping[str, Mapping[str, bool]]) -> list[str]:
    missing = [path for path in paths if not kinds[path]["exists"]]
    if not missing:
        return []
    return [f"host {host}: found no {', '.join(missing)}; needed by the units' docker --device/-v flags "
            "(accelerator driver installed? RDMA devices present?)"]


def cdi_errors(host: str, cdi_devices: Sequence[str], spec_count: int) -> list[str]:
    if not cdi_devices or spec_count > 0:
        return []
    return [f"host {host}: found no CDI spec in /etc/cdi or /var/run/cdi; needed for --device {', '.join(cdi_devices)}. "
            "Run `nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml`"]


def accelerators_found(declared: str, result: Optional[Mapping[str, Any]]) -> str:
    """The declared count, else the count command's output, else its error, else ``no output``."""
    if declared:
        return declared
    result = result or {}
    return (result.get("stdout", "").strip()
            or truncate(result.get("stderr", "").strip(), 120) or "no output")


def accelerator_errors(host: str, needed: int, found: str, source: str, indexes: Sequence[int],
                       gpu_keys: Sequence[str], vendors: Sequence[str]) -> list[str]:
    countable = bool(_DIGITS.match(found))
    if countable and int(found) >= needed:
        return []
    shown = found if countable else f"none countable ({found})"
    return [f"host {host}: accelerators: found {shown} ({source}); needed {needed} "
            f"(devices {','.join(str(i) for i in indexes)} of {', '.join(gpu_keys)}, vendor {', '.join(vendors)})"]


def cpu_errors(host: str, flags: Sequence[str], mem_total: int, kv_spaces: Sequence[Any], overhead_gb: Any) -> list[str]:
    needed = (sum(as_int(space) for space in kv_spaces) + len(kv_spaces) * as_int(overhead_gb)) * 2**30
    if "avx2" in flags and mem_total >= needed:
        return []
    return [f"host {host}: CPU flags: found {', '.join(flags) or 'none of avx2, avx512f'} "
            f"(needed: avx2; avx512f and amx_bf16 are faster); memory: found {gib(mem_total)} GiB, "
            f"needed {gib(needed)} GiB ({len(kv_spaces)} engine(s): cpu.kvcache_space_gb each + {overhead_gb} GiB). "
            "Lower vllm_deployment.cpu.kvcache_space_gb or place fewer engines on this host"]


def as_int(value: Any) -> int:
    """Jinja's ``int`` filter: 0 for what is not a number."""
    try:
        return int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError):
            return 0


def unknown_size_warnings(host: str, needs: Sequence[Mapping[str, Any]]) -> list[str]:
    return [f"host {host}: the size of {need['what']} is unknown (the Hub API did not answer); "
            "set vllm_preflight_weights_bytes to check the disk for it"
            for need in needs if need["bytes"] == 0]


def disk_errors(host: str, needs: Sequence[Mapping[str, Any]], margin: int) -> list[str]:
    """``needs``: ``what`` arrives on filesystem ``mount`` (``avail`` bytes free), taking ``bytes``."""
    errors = []
    for mount in unique(need["mount"] for need in needs):
        here = [need for need in needs if need["mount"] == mount]
        needed = sum(need["bytes"] for need in here) + margin
        avail = here[0]["avail"]
        if avail < needed:
            errors.append(f"host {host}: filesystem {mount}: found {bytes_to_human(avail)} free; needed "
                          f"{bytes_to_human(needed)} for {', '.join(need['what'] for need in here)} "
                          f"(+{bytes_to_human(margin)} margin)")
    return errors


def interface_errors(host: str, interface: str, kind: Mapping[str, bool]) -> list[str]:
    if kind["exists"]:
        return []
    return [f"host {host}: fabric interface: found no '{interface}' in /sys/class/net; needed: the NIC on the "
            "cluster network (vllm_fabric_interface) for NCCL/Gloo/NIXL/HCCL"]


# --- fabric (roles/fabric) -------------------------------------------------------------

def fabric_interface_errors(host: str, wanted: Sequence[str], env: Sequence[tuple[str, str]],
                            interfaces: Sequence[str]) -> list[str]:
    return [f"host {host}: interface: found no '{name}' (interfaces: {', '.join(sorted(interfaces))}); needed by "
            f"{', '.join(unique(key for key, value in env if re.search(re.escape(name), value)))}. "
            "Fix: set vllm_fabric_interface to the cluster NIC"
            for name in wanted if name not in interfaces]


def fabric_address_errors(host: str, wanted: Sequence[str], env: Sequence[tuple[str, str]],
                          ipv4: Sequence[str], ipv6: Sequence[str]) -> list[str]:
    return [f"host {host}: address: found {', '.join(ipv4)}; needed {address} "
            f"(set in {', '.join(unique(key for key, value in env if value == address))}). "
            "Fix: set vllm_fabric_address to this host's cluster-network address"
            for address in wanted if address not in list(ipv4) + list(ipv6)]


def rdma_errors(host: str, devices: Sequence[str], kinds: Mapping[str, Mapping[str, bool]]) -> list[str]:
    missing = [device for device in devices if not kinds[f"/sys/class/infiniband/{device}"]["exists"]]
    if not missing:
        return []
    return [f"host {host}: RDMA devices: found no {', '.join(missing)} in /sys/class/infiniband; "
            "needed by UCX_NET_DEVICES / NCCL_IB_HCA (vllm_rdma_devices, vllm_ib_hca)"]


# --- image (roles/image) ---------------------------------------------------------------

def digest_errors(digests: Mapping[str, Any]) -> list[str]:
    return [f"vllm_image_digests['{key}']: got {truncate(str(value), 80)}; expected "
            "'sha256:' followed by 64 hex digits (docker buildx imagetools inspect IMAGE shows it)"
            for key, value in digests.items() if not (isinstance(value, str) and _DIGEST.match(value))]


def archive_path_errors(archives: Mapping[str, Any]) -> list[str]:
    return [f"vllm_image_archives['{key}']: got {truncate(str(value), 80)}; expected the absolute "
            f"path of a docker save archive on each host that runs {key}"
            for key, value in archives.items()
            if not (isinstance(value, str) and _ARCHIVE_PATH.match(value) and "/../" not in value + "/")]


def _filled(entry: Mapping[str, Any], key: str) -> bool:
    value = entry.get(key)
    return value is not None and len(str(value)) > 0


def credential_errors(credentials: Sequence[Any]) -> list[str]:
    """By index, so that no value is shown."""
    return [f"vllm_image_registry_credentials[{index}]: expected a mapping with registry, username and password "
            "(the password from Ansible Vault)"
            for index, entry in enumerate(credentials)
            if not (isinstance(entry, Mapping) and isinstance(entry.get("registry", ""), str)
                    and all(_filled(entry, key) for key in ("registry", "username", "password")))]


def archive_on_host_errors(host: str, archived: Sequence[str], archives: Mapping[str, Any],
                           kinds: Mapping[str, Mapping[str, bool]]) -> list[str]:
    return [f"vllm_image_archives['{ref}']: {archives[ref]} is not a file on {host}; "
            f"expected the docker save archive of {ref} there (the host loads it instead of pulling)"
            for ref in archived if not (kinds[archives[ref]]["exists"] and kinds[archives[ref]]["isreg"])]


# --- weights (roles/weights) -----------------------------------------------------------

def weights_errors(host: str, entries: Sequence[Mapping[str, Any]]) -> list[str]:
    errors = [f"deployment {e['name']} on {host}: the engine serves '{e['repo']}', which is not a Hub repository "
              f"id (org/name); set vllm_weights_repos['{e['name']}'], or weights.mode: container"
              for e in entries if not matches(_HUB_REPO, e["repo"])]
    errors += [f"vllm_weights_origin['{e['name']}']: got '{e['origin']}'; expected one of its engine hosts: "
               f"{', '.join(e['hosts'])}" for e in entries if e["origin"] not in e["hosts"]]
    errors += [f"deployment {e['name']}: weights.revision is '{e['revision']}' but the engine argv has no --revision; "
               "serving runs with HF_HUB_OFFLINE=1 and would look up refs/main. Fix: add "
               f"['--revision', '{e['revision']}'] to vllm_deployment.advanced_args"
               for e in entries if not (e["revision"] == "main" or e["argv_has_revision"])]
    return errors


def unpinned_warnings(origins_here: Sequence[Mapping[str, Any]]) -> list[str]:
    return [f"deployment {e['name']}: weights.revision is not set, so 'main' is fetched once and then kept "
            "(a finished revision is never fetched again). Pin weights.revision for reproducible fleets."
            for e in origins_here if not e["pinned"]]


def source_errors(host: str, entries: Sequence[Mapping[str, Any]], kinds: Mapping[str, Mapping[str, bool]]) -> list[str]:
    """``kinds``: deployment name -> the source's kind (for the entries whose source was looked up)."""
    errors = []
    for entry in entries:
        kind = kinds.get(entry["name"])
        if kind is None or (kind["exists"] and (kind["isdir"] or kind["isreg"])):
            continue
        errors.append(
            f"vllm_deployment[{entry['name']}].weights.source: '{entry['source']}' is not a directory or file on "
            f"{host} (the deployment's origin host); expected the pre-staged model directory or tar archive there. "
            f"Put it there, or set vllm_weights_origin['{entry['name']}'] to the host that has it.")
    return errors


# --- engine, router, monitoring --------------------------------------------------------

def engine_docker_errors(host: str, docker: str, units: Sequence[str], result: Mapping[str, Any]) -> list[str]:
    if result["rc"] == 0:
        return []
    return [f"host {host}: found no answering docker engine ({docker} version: {result['stderr'].strip()}); "
            f"needed: docker with docker.service for {', '.join(units)}. "
            "Fix: install docker (playbooks/deploy.yml's preflight play checks this too)."]


def router_package_errors(package: Any) -> list[str]:
    if matches(_PINNED_REQUIREMENT, package):
        return []
    return [f"vllm_router_package: got '{package}'; expected a pinned pip requirement such as "
            "'vllm-router==0.1.17' (a version resolved at run time makes fleets drift)"]


def monitoring_path_errors(file_sd_dir: Any, rules_file: Any, config_file: Any,
                           scrape_interval: Any, evaluation_interval: Any) -> list[str]:
    if (matches(re.compile("^/"), file_sd_dir) and matches(_RULES_FILE, rules_file)
            and matches(re.compile("^/"), config_file) and matches(_DURATION, scrape_interval)
            and matches(_DURATION, evaluation_interval)):
        return []
    return ["vllm_monitoring_file_sd_dir, vllm_monitoring_config_file: absolute paths; vllm_monitoring_rules_file: an "
            "absolute path ending in .yml; vllm_monitoring_scrape_interval / _evaluation_interval: Prometheus durations "
            f"such as 15s. Got {file_sd_dir}, {rules_file}, {config_file}, {scrape_interval}, {evaluation_interval}."]


def monitoring_os_errors(host: str, install: bool, os_family: Optional[str], distribution: Optional[str]) -> list[str]:
    if not install or os_family == "Debian":
        return []
    shown = "?" if distribution is None else distribution
    return [f"vllm_monitoring_install: {host} runs {shown}; the role installs Prometheus with apt "
            "(Debian, Ubuntu). Install Prometheus yourself and set vllm_monitoring_install: false."]
