# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Container flag profiles: the exact ``docker run`` argv of every engine process.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

Two profiles (docs/container-flags.md lists every difference):

``upstream``
    The recipes site's own ``docker run`` flags, token for token, as found in
    the resolution's ``docker.processes``. Only what running under systemd
    requires is changed: ``--rm --name NAME`` and ``--env-file`` are added
    after ``run``, placeholders are filled, ``-e KEY=VALUE`` values are the
    placed values (same keys, same order), the ``~/.cache/huggingface`` mount
    source becomes the weights cache directory (systemd runs no shell to
    expand ``~``), and ``-p`` follows the process's API port.

``hardened`` (default)
    Per-vendor least-privilege flags, no ``--privileged``, every environment
    variable through the 0600 ``--env-file`` (none on the command line),
    ``--network host`` for multi-node, PD and Mooncake deployments, RDMA
    devices only when asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._vendors import (
    ASCEND_DRIVER_MOUNTS,
    HARDENED_VENDORS,
    VENDORS,
    visible_devices_var,
)

__all__ = [
    "ASCEND_DRIVER_MOUNTS",
    "HARDENED_VENDORS",
    "ContainerSpec",
    "engine_docker_argv",
    "rdma_flags",
    "router_docker_argv",
    "vendor_flags",
    "visible_devices_var",
]

#: Path the vLLM images read the Hugging Face cache from.
CONTAINER_HF_CACHE = "/root/.cache/huggingface"
#: vLLM's own cache root in its images (``VLLM_CACHE_ROOT``: torch.compile artifacts).
CONTAINER_VLLM_CACHE = "/root/.cache/vllm"
#: Kernel caches that live outside ``VLLM_CACHE_ROOT`` by default (``/tmp``, ``~/.triton``),
#: put under it so that one mount keeps every compiled kernel across restarts.
COMPILE_CACHE_ENV = (("TORCHINDUCTOR_CACHE_DIR", f"{CONTAINER_VLLM_CACHE}/torchinductor"),
                     ("TRITON_CACHE_DIR", f"{CONTAINER_VLLM_CACHE}/triton"))


@dataclass(frozen=True)
class ContainerSpec:
    """Everything needed to build one engine container's argv."""

    name: str
    image: str
    #: vendor (a key of ``_vendors.VENDORS``): nvidia | amd | ascend | cpu (Intel Xeon, the x86 CPU
    #: backend) | tpu | intel (XPU)
    vendor: str
    #: The program argv (``vllm serve MODEL ...``), fully placed.
    program_argv: Sequence[str]
    env_file: str
    weights_dir: str
    network_host: bool
    #: Host port published with ``-p`` when not on the host network.
    api_port: Optional[int]
    #: Physical accelerator indexes of the host this container may use.
    gpus: Sequence[int] = ()
    #: All accelerator indexes of the host (Ascend passes every /dev/davinciN).
    host_gpus: Sequence[int] = ()
    gpu_runtime: str = "nvidia"
    rdma: bool = False
    multi_node: bool = False
    #: (host_path, container_path, options) bind mounts, e.g. the Mooncake config.
    mounts: Sequence[tuple[str, str, str]] = ()
    extra_args: Sequence[str] = ()
    docker_binary: str = "/usr/bin/docker"
    #: Host directory mounted at CONTAINER_VLLM_CACHE (hardened profile; the env file carries
    #: COMPILE_CACHE_ENV), None for none.
    compile_cache_dir: Optional[str] = None


def vendor_flags(vendor: str, *, gpu_runtime: str = "nvidia", host_gpus: Sequence[int] = (),
                 multi_node: bool = False) -> list[str]:
    """Hardened device flags for one vendor (no ``--privileged``), from the vendor table.

    ``gpu_runtime="none"`` drops the device flags (test hosts without accelerators).
    """
    if gpu_runtime == "none":
        return ["--ipc=host"]
    entry = VENDORS.get(vendor)
    if entry is None or entry.hardened_flags is None:
        raise ValueError(f"no hardened flags for vendor {vendor!r}")
    return entry.hardened_flags(gpu_runtime, host_gpus, multi_node)


def rdma_flags() -> list[str]:
    """RDMA opt-in: without /dev/infiniband NCCL silently falls back to TCP."""
    return ["--device", "/dev/infiniband", "--cap-add", "IPC_LOCK",
            "--ulimit", "memlock=-1", "--ulimit", "stack=67108864"]


def _program_after_image(vendor: str, program_argv: Sequence[str]) -> list[str]:
    # vllm/vllm-openai(-rocm) images have ENTRYPOINT ["vllm", "serve"]: the model and
    # flags follow the image. vllm-ascend images have no entrypoint: pass the program.
    argv = list(program_argv)
    entry = VENDORS.get(vendor)
    if (entry is None or entry.image_serve_entrypoint) and argv[:2] == ["vllm", "serve"]:
        return argv[2:]
    return argv


def hardened_engine_argv(spec: ContainerSpec) -> list[str]:
    """``docker run`` argv for the hardened profile."""
    argv = [spec.docker_binary, "run", "--rm", "--name", spec.name]
    argv += vendor_flags(spec.vendor, gpu_runtime=spec.gpu_runtime,
                         host_gpus=spec.host_gpus or spec.gpus, multi_node=spec.multi_node)
    if spec.rdma:
        argv += rdma_flags()
    if spec.network_host:
        argv += ["--network", "host"]
    elif spec.api_port is not None:
        argv += ["-p", f"{spec.api_port}:{spec.api_port}"]
    argv += ["-v", f"{spec.weights_dir}:{CONTAINER_HF_CACHE}"]
    if spec.compile_cache_dir:
        argv += ["-v", f"{spec.compile_cache_dir}:{CONTAINER_VLLM_CACHE}"]
    for host_path, container_path, options in spec.mounts:
        argv += ["-v", f"{host_path}:{container_path}" + (f":{options}" if options else "")]
    argv += ["--env-file", spec.env_file]
    argv += list(spec.extra_args)
    argv.append(spec.image)
    argv += _program_after_image(spec.vendor, spec.program_argv)
    return argv


def upstream_engine_argv(spec: ContainerSpec, upstream_flags: Sequence[str],
                         env: dict[str, str], weights_home: str) -> list[str]:
    """``docker run`` argv for the upstream profile.

    ``upstream_flags`` are the tokens between ``run`` and the image in the
    recipes site's docker argv, with placeholders already filled. ``-e K=V``
    values are replaced by ``env[K]``; ``-p A:A`` follows ``spec.api_port``;
    the ``~/.cache/huggingface`` mount source becomes ``spec.weights_dir`` and
    any other leading ``~`` becomes ``weights_home`` (systemd runs no shell).
    """
    argv = [spec.docker_binary, "run", "--rm", "--name", spec.name, "--env-file", spec.env_file]
    flags = list(upstream_flags)
    index = 0
    while index < len(flags):
        token = flags[index]
        if token in ("-e", "--env") and index + 1 < len(flags):
            key = flags[index + 1].split("=", 1)[0]
            value = env.get(key, flags[index + 1].split("=", 1)[1] if "=" in flags[index + 1] else "")
            argv += [token, f"{key}={value}"]
            index += 2
            continue
        if token in ("-p", "--publish") and index + 1 < len(flags) and spec.api_port is not None:
            argv += [token, f"{spec.api_port}:{spec.api_port}"]
            index += 2
            continue
        if token in ("-v", "--volume") and index + 1 < len(flags):
            source = flags[index + 1]
            if source.startswith("~/.cache/huggingface:"):
                source = spec.weights_dir + source[len("~/.cache/huggingface"):]
            elif source.startswith("~/"):
                source = weights_home + source[1:]
            argv += [token, source]
            index += 2
            continue
        argv.append(token)
        index += 1
    argv.append(spec.image)
    # The recipes site always puts the model after the image (entrypoint ``vllm serve``).
    program = list(spec.program_argv)
    argv += program[2:] if program[:2] == ["vllm", "serve"] else program
    return argv


def engine_docker_argv(spec: ContainerSpec, profile: str, *,
                       upstream_flags: Optional[Sequence[str]] = None,
                       env: Optional[dict[str, str]] = None,
                       weights_home: str = "/root") -> list[str]:
    """Build the engine container argv for ``profile`` (``hardened`` or ``upstream``)."""
    if profile == "hardened":
        return hardened_engine_argv(spec)
    if profile == "upstream":
        if upstream_flags is None:
            raise ValueError("the upstream profile needs the resolution's docker argv")
        return upstream_engine_argv(spec, upstream_flags, env or {}, weights_home)
    raise ValueError(f"unknown container profile {profile!r}")


#: Where a process's secret file is mounted inside its container (read-only).
SECRET_MOUNT = "/run/vllm-fleet/secret.env"
# Read by /bin/sh before exec'ing the program: the secrets become the program's
# environment without ever being part of the container's configuration (docker inspect).
# The file is never sourced: each ``KEY=value`` line is split by ``export`` and nothing in
# a value is evaluated (no quotes, ``$(...)`` or backticks), as with ``docker --env-file``.
SECRET_SHIM = ('while IFS= read -r line; do case $line in ""|"#"*) ;; *) export "$line" || exit 2 ;; '
               f'esac; done < {SECRET_MOUNT} && exec "$@"')


def with_secret_file(argv: Sequence[str], image: str, program_argv: Sequence[str],
                     secret_file: str) -> list[str]:
    """Rewrite a ``docker run`` argv so secrets come from a mounted 0600 file.

    ``--env-file`` values are stored in the container's config and shown by
    ``docker inspect``; a file read by a ``/bin/sh`` shim at start is not. The
    image's entrypoint is replaced by the shim, which execs the full program
    (``vllm serve ...``) with the secrets in its environment.
    """
    args = list(argv)
    if image not in args:
        raise ValueError(f"image {image!r} is not in the docker argv")
    cut = args.index(image)
    return (args[:cut] + ["-v", f"{secret_file}:{SECRET_MOUNT}:ro", "--entrypoint", "/bin/sh", image,
                          "-c", SECRET_SHIM, "vllm-fleet-secrets"] + list(program_argv))


def router_docker_argv(*, name: str, image: str, program_argv: Sequence[str], env_file: str,
                       docker_binary: str = "/usr/bin/docker") -> list[str]:
    """vllm-router in a container: host network, no devices, the binary as entrypoint."""
    program = list(program_argv)
    return [docker_binary, "run", "--rm", "--name", name, "--network", "host",
            "--env-file", env_file, "--entrypoint", program[0], image] + program[1:]
