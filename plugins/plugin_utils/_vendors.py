# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""The vendor table: everything vllm_fleet knows about each accelerator vendor.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

One ``Vendor`` per key of ``VENDORS``; every other module reads this table
instead of keeping its own per-vendor mapping. A new vendor is one entry here
plus its hardware profiles in ``recipes/catalog/hardware.yaml``.

Two classifications exist on purpose:

``vendor_key``
    Ours: the vendor a deployment runs on (``nvidia``, ``amd``, ``ascend``,
    ``cpu``, ``tpu``, ``intel``), from the hardware profile, the hardware id
    and the resolution's docker meta.
``site_vendor_key``
    The recipes site's, for the ``upstream`` profile only and token for token:
    it is case-sensitive, checks TPU before AMD and knows no Ascend (an Ascend
    profile gets the NVIDIA image and ``--gpus all`` there). Its answer is a
    key of this table too, so the site's images and flags live here as well.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

__all__ = [
    "ASCEND_DRIVER_MOUNTS",
    "ASCEND_MULTI_NODE_MOUNTS",
    "HARDENED_VENDORS",
    "VENDORS",
    "Vendor",
    "site_vendor_key",
    "vendor_key",
    "visible_devices_var",
]

#: ``(gpu_runtime, host_gpus, multi_node) -> flags``: a vendor's hardened device flags.
HardenedFlags = Callable[[str, Sequence[int], bool], list[Any]]

#: Read-only host paths the Ascend runtime needs inside the container (vllm-ascend quick start).
ASCEND_DRIVER_MOUNTS = (
    "/usr/local/dcmi",
    "/usr/local/bin/npu-smi",
    "/usr/local/Ascend/driver/lib64/",
    "/usr/local/Ascend/driver/version.info",
    "/etc/ascend_install.info",
)
#: Extra Ascend mounts for multi-node HCCL (link checks with hccn_tool): the paths of the
#: vllm-ascend multi-node guides (hccn_tool ships with the driver, under its tools/).
ASCEND_MULTI_NODE_MOUNTS = ("/usr/local/Ascend/driver/tools/hccn_tool", "/etc/hccn.conf")
#: Ascend device nodes passed besides one ``/dev/davinciN`` per NPU.
ASCEND_CONTROL_DEVICES = ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc")


def _nvidia_hardened(gpu_runtime: str, host_gpus: Sequence[int], multi_node: bool) -> list[str]:
    gpu = ["--device", "nvidia.com/gpu=all"] if gpu_runtime == "cdi" else ["--gpus", "all"]
    return gpu + ["--ipc=host"]


def _amd_hardened(gpu_runtime: str, host_gpus: Sequence[int], multi_node: bool) -> list[str]:
    return ["--device", "/dev/kfd", "--device", "/dev/dri", "--group-add", "video", "--ipc=host"]


def _ascend_hardened(gpu_runtime: str, host_gpus: Sequence[int], multi_node: bool) -> list[str]:
    flags: list[str] = []
    for device in [f"/dev/davinci{index}" for index in host_gpus] + list(ASCEND_CONTROL_DEVICES):
        flags += ["--device", device]
    for path in ASCEND_DRIVER_MOUNTS + (ASCEND_MULTI_NODE_MOUNTS if multi_node else ()):
        flags += ["-v", f"{path}:{path}:ro"]
    return flags + ["--ipc=host"]


def _cpu_hardened(gpu_runtime: str, host_gpus: Sequence[int], multi_node: bool) -> list[str]:
    # No devices. vLLM's CPU backend moves tensors between its processes through
    # /dev/shm: a private one as large as the recipes site's (--shm-size=16g), not the host's IPC.
    return ["--shm-size", "16g"]


@dataclass(frozen=True)
class Vendor:
    """One accelerator vendor: images, device flags, device masking, fabric and preflight."""

    key: str
    #: The recipes site's brand key (``docker meta.brandKey``, the keys of a recipe's
    #: ``docker_image`` brand map).
    site_brand: str
    #: The recipes site's default images (release, nightly); None: the site has none.
    upstream_image: Optional[str]
    upstream_nightly_image: Optional[str]
    #: The recipes site's device flags, as it prints them (shell text, its line layout) and as
    #: its argv. Both are the site's own bytes: the text sometimes writes ``--opt=value`` where
    #: the argv has two tokens, so neither is derived from the other (tests check they agree).
    upstream_flags_text: str
    upstream_flags_argv: tuple[str, ...]
    #: Hardened device flags (no ``--privileged``); None: ``hardened`` refuses the vendor.
    hardened_flags: Optional[HardenedFlags]
    #: The variable that masks accelerators; None: none is set.
    visible_devices_var: Optional[str]
    #: A recipe's ``CUDA_VISIBLE_DEVICES`` counts from 0 inside ``visible_devices_var``'s mask
    #: (HIP under ROCR) instead of naming physical indexes.
    cuda_indexes_relative: bool
    #: Read-only host paths bound into every container, and the extra ones for multi-node.
    driver_mounts: tuple[str, ...]
    multi_node_mounts: tuple[str, ...]
    #: The image's entrypoint is ``vllm serve`` (the model follows the image); False: the full
    #: program argv follows the image.
    image_serve_entrypoint: bool
    #: Per-node fabric variables of multi-node engines: (name, ``address`` | ``interface``).
    fabric_env: tuple[tuple[str, str], ...]
    #: Shell command that prints the host's accelerator count (roles/preflight), and its name
    #: for messages; None: preflight cannot count them.
    count_command: Optional[str]
    count_tool: Optional[str]


_NVIDIA_FLAGS = ("--gpus all", ("--gpus", "all"))
_CPU_IMAGE = "vllm/vllm-openai-cpu:latest-x86_64"
_XPU_IMAGE = "vllm/vllm-openai-xpu:latest"

#: Every vendor, in the order messages list them.
VENDORS: dict[str, Vendor] = {vendor.key: vendor for vendor in (
    Vendor(key="nvidia", site_brand="nvidia",
           upstream_image="vllm/vllm-openai:latest", upstream_nightly_image="vllm/vllm-openai:nightly",
           upstream_flags_text=_NVIDIA_FLAGS[0], upstream_flags_argv=_NVIDIA_FLAGS[1],
           hardened_flags=_nvidia_hardened, visible_devices_var="CUDA_VISIBLE_DEVICES",
           cuda_indexes_relative=False, driver_mounts=(), multi_node_mounts=(), image_serve_entrypoint=True,
           fabric_env=(), count_command="nvidia-smi --query-gpu=index --format=csv,noheader | grep -c .",
           count_tool="nvidia-smi"),
    Vendor(key="amd", site_brand="amd",
           upstream_image="vllm/vllm-openai-rocm:latest", upstream_nightly_image="vllm/vllm-openai-rocm:nightly",
           upstream_flags_text="--device=/dev/kfd --device=/dev/dri \\\n"
                               "  --security-opt seccomp=unconfined --group-add video",
           upstream_flags_argv=("--device=/dev/kfd", "--device=/dev/dri", "--security-opt", "seccomp=unconfined",
                                "--group-add", "video"),
           hardened_flags=_amd_hardened, visible_devices_var="ROCR_VISIBLE_DEVICES",
           cuda_indexes_relative=True, driver_mounts=(), multi_node_mounts=(), image_serve_entrypoint=True,
           fabric_env=(),
           count_command="if command -v amd-smi >/dev/null; then amd-smi list --csv | tail -n +2 | grep -c .; "
                         "else rocm-smi --showid --csv | grep -c '^card'; fi",
           count_tool="amd-smi/rocm-smi"),
    # The recipes site knows no Ascend: its upstream image and flags are NVIDIA's.
    Vendor(key="ascend", site_brand="nvidia",
           upstream_image="vllm/vllm-openai:latest", upstream_nightly_image="vllm/vllm-openai:nightly",
           upstream_flags_text=_NVIDIA_FLAGS[0], upstream_flags_argv=_NVIDIA_FLAGS[1],
           hardened_flags=_ascend_hardened, visible_devices_var="ASCEND_RT_VISIBLE_DEVICES",
           cuda_indexes_relative=False, driver_mounts=ASCEND_DRIVER_MOUNTS,
           multi_node_mounts=ASCEND_MULTI_NODE_MOUNTS, image_serve_entrypoint=False,
           fabric_env=(("HCCL_IF_IP", "address"), ("HCCL_SOCKET_IFNAME", "interface"),
                       ("TP_SOCKET_IFNAME", "interface")),
           count_command="npu-smi info -l | sed -n 's/.*Total Count *: *\\([0-9]*\\).*/\\1/p' | head -n 1",
           count_tool="npu-smi"),
    # Intel Xeon (generation ``cpu``): the x86 CPU backend.
    Vendor(key="cpu", site_brand="intel", upstream_image=_CPU_IMAGE, upstream_nightly_image=None,
           upstream_flags_text="--shm-size=16g", upstream_flags_argv=("--shm-size", "16g"),
           hardened_flags=_cpu_hardened, visible_devices_var=None, cuda_indexes_relative=False,
           driver_mounts=(), multi_node_mounts=(), image_serve_entrypoint=True, fabric_env=(),
           count_command="ls -d /sys/devices/system/node/node[0-9]* | grep -c .",
           count_tool="NUMA nodes in /sys/devices/system/node"),
    Vendor(key="tpu", site_brand="tpu",
           upstream_image="vllm/vllm-tpu:latest", upstream_nightly_image="vllm/vllm-tpu:nightly",
           upstream_flags_text="--privileged --network host \\\n  -v /dev/shm:/dev/shm",
           upstream_flags_argv=("--privileged", "--network", "host", "-v", "/dev/shm:/dev/shm"),
           hardened_flags=None, visible_devices_var=None, cuda_indexes_relative=False,
           driver_mounts=(), multi_node_mounts=(), image_serve_entrypoint=True, fabric_env=(),
           count_command=None, count_tool=None),
    # Intel GPUs (generation ``xpu``); the site has one XPU image, release and nightly alike.
    Vendor(key="intel", site_brand="intel", upstream_image=_XPU_IMAGE, upstream_nightly_image=_XPU_IMAGE,
           upstream_flags_text="--device /dev/dri \\\n  -v /dev/dri/by-path:/dev/dri/by-path --shm-size=16g",
           upstream_flags_argv=("--device", "/dev/dri", "-v", "/dev/dri/by-path:/dev/dri/by-path",
                                "--shm-size", "16g"),
           hardened_flags=None, visible_devices_var=None, cuda_indexes_relative=False,
           driver_mounts=(), multi_node_mounts=(), image_serve_entrypoint=True, fabric_env=(),
           count_command=None, count_tool=None),
)}

#: Vendors the ``hardened`` container profile has flags for.
HARDENED_VENDORS = tuple(key for key, vendor in VENDORS.items() if vendor.hardened_flags is not None)


def vendor_key(profile: Optional[Mapping[str, Any]], hardware_id: Optional[str] = None,
               docker_meta: Optional[Mapping[str, Any]] = None) -> str:
    """Our vendor of a hardware profile (``brand``, ``generation``; any case), hardware id and docker meta."""
    brand = str((profile or {}).get("brand") or "").lower()
    generation = str((profile or {}).get("generation") or "").lower()
    meta = docker_meta or {}
    if brand in ("huawei", "ascend") or generation == "npu" or (hardware_id or "").lower().startswith("ascend"):
        return "ascend"
    if brand == "amd" or meta.get("isAmd"):
        return "amd"
    if brand == "google" or generation == "tpu" or meta.get("isTpu"):
        return "tpu"
    if generation == "cpu":
        return "cpu"
    if brand == "intel" or meta.get("isIntel") or meta.get("isXpu"):
        return "intel"
    return "nvidia"


def site_vendor_key(is_tpu: Optional[bool], is_amd: Optional[bool], is_xpu: Optional[bool], is_intel: Optional[bool]) -> str:
    """The recipes site's classification (its ``is*`` flags, see the module docstring) as a key of VENDORS."""
    if is_tpu:
        return "tpu"
    if is_amd:
        return "amd"
    if is_xpu:
        return "intel"
    return "cpu" if is_intel else "nvidia"


def visible_devices_var(vendor: str) -> Optional[str]:
    """The variable that masks accelerators for ``vendor`` (None for none or an unknown vendor)."""
    entry = VENDORS.get(vendor)
    return entry.visible_devices_var if entry else None
