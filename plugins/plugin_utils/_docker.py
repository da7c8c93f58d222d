"""The recipes site's ``docker run`` wrapping, argv for argv.

Private to the vllm_fleet.recipes collection: not a public API.

This reproduces what the recipes site prints (the ``upstream`` container
profile). Our own, stricter container flags live in ``_container``; see
docs/container-flags.md for every difference and why.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Optional

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._engine_shapes import shape_of
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._gates import PD_ROLE_PORTS, PD_ROLES, SERVE_PORT
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._jsvalue import first, get, text
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._vendors import VENDORS, Vendor, site_vendor_key

HF_CACHE_MOUNT = "~/.cache/huggingface:/root/.cache/huggingface"

#: The keys of a recipe's ``docker_image`` brand map (the site's brand keys).
_SITE_BRANDS = tuple(dict.fromkeys(vendor.site_brand for vendor in VENDORS.values()))


def _is_cuda_map(value: Any) -> bool:
    return isinstance(value, dict) and ("cu129" in value or "cu130" in value)


def _site_classification(brand: Any, generation: Any) -> tuple[Vendor, bool, bool, bool, bool]:
    """(vendor, isAmd, isTpu, isXpu, isIntel) of a profile's brand and generation, as the recipes site classifies."""
    is_amd = brand == "AMD"
    is_tpu = generation == "tpu"
    is_xpu = generation == "xpu"
    is_intel = generation == "cpu" or is_xpu or brand == "Intel"
    return VENDORS[site_vendor_key(is_tpu, is_amd, is_xpu, is_intel)], is_amd, is_tpu, is_xpu, is_intel


#: ``_site_classification`` once per hashable (brand, generation): a hardware fact, not a resolution's output.
_known_classification = lru_cache(maxsize=256)(_site_classification)


def docker_meta(recipe: Mapping[str, Any], variant: Mapping[str, Any], profile: Mapping[str, Any], hardware_id: Any = None) -> dict[str, Any]:
    """Image, device flags and brand for one hardware profile.

    Image precedence: the variant's exact-hardware ``docker_image``, then the
    variant's image, then the model's, then the brand default (nightly tags
    when the model is ``nightly_required``). A CUDA map (``{cu129, cu130}``)
    defaults to its cu130 tag.
    """
    model = get(recipe, "model")
    nightly = get(model, "nightly_required") is True
    brand = get(profile, "brand")
    generation = get(profile, "generation")
    try:
        vendor, is_amd, is_tpu, is_xpu, is_intel = _known_classification(brand, generation)
    except TypeError:  # an unhashable brand or generation
        vendor, is_amd, is_tpu, is_xpu, is_intel = _site_classification(brand, generation)
    brand_key = vendor.site_brand

    exact = get(get(get(variant, "hardware_overrides"), hardware_id), "docker_image") if hardware_id else None
    pinned: Optional[str] = exact if isinstance(exact, str) else None
    cuda_map: Optional[dict[str, Any]] = None
    for override in (get(variant, "docker_image"), get(model, "docker_image")):
        if not override or pinned or cuda_map:
            continue
        if isinstance(override, str):
            if brand_key == "nvidia":
                pinned = override
        elif isinstance(override, dict):
            if any(k in override for k in _SITE_BRANDS):
                value = override.get(brand_key)
                if isinstance(value, str):
                    pinned = value
                elif brand_key == "nvidia" and _is_cuda_map(value):
                    cuda_map = value
            elif brand_key == "nvidia" and _is_cuda_map(override):
                cuda_map = override

    image = pinned or (first(cuda_map.get("cu130"), cuda_map.get("cu129")) if cuda_map else None) \
        or (vendor.upstream_nightly_image if nightly else vendor.upstream_image)
    return {
        "image": image,
        "gpuFlags": vendor.upstream_flags_text,
        "brandKey": brand_key,
        "isAmd": is_amd,
        "isTpu": is_tpu,
        "isXpu": is_xpu,
        "isIntel": is_intel,
        "pinned": pinned,
        "cudaMap": cuda_map,
        "nightlyRequired": nightly,
    }


def _gpu_argv(meta: Mapping[str, Any]) -> tuple[str, ...]:
    vendor = site_vendor_key(meta.get("isTpu"), meta.get("isAmd"), meta.get("isXpu"), meta.get("isIntel"))
    return VENDORS[vendor].upstream_flags_argv


class _EnvFlags:
    """One env map's docker flags, formatted once and shared by every process that runs with it."""

    __slots__ = ("argv", "text", "config_mounts")

    def __init__(self, env: Optional[Mapping[str, Any]]) -> None:
        argv: list[str] = []
        lines: list[str] = []
        mounts: list[str] = []
        for key, raw in (env or {}).items():
            value = raw if isinstance(raw, str) else text(raw)
            pair = f"{key}={value}"
            argv += ("-e", pair)
            lines.append("-e " + pair)
            if isinstance(key, str) and key.endswith("_CONFIG_PATH"):
                mounts.append(f"{value}:{value}:ro")  # every *_CONFIG_PATH file is bound read-only
        self.argv = argv
        self.text = " \\\n  ".join(lines)
        self.config_mounts = mounts

    def mounts(self, model_id: Any) -> list[str]:
        """A local checkpoint path, then the config files."""
        if isinstance(model_id, str) and model_id.startswith("/"):
            return [f"{model_id}:{model_id}:ro", *self.config_mounts]
        return self.config_mounts


def docker_argv(argv: list[Any], env: Mapping[str, Any], meta: Mapping[str, Any], port: int = SERVE_PORT) -> list[Any]:
    """``docker run`` argv around a ``vllm serve`` argv (the image's entrypoint is ``vllm serve``)."""
    return _wrap_argv(argv, _EnvFlags(env), meta, port, _gpu_argv(meta))


def _wrap_argv(argv: list[Any], env: _EnvFlags, meta: Mapping[str, Any], port: int, gpu_flags: tuple[str, ...]) -> list[Any]:
    command = argv[2:] if argv[:2] == ["vllm", "serve"] else argv
    out: list[Any] = ["docker", "run", *gpu_flags, "--privileged", "--ipc=host", "-p", f"{port}:{port}",
                      "-v", HF_CACHE_MOUNT]
    for mount in env.mounts(command[0] if command else None):
        out += ("-v", mount)
    out += env.argv
    out.append(meta.get("image"))
    out += command
    return out


_SERVE = re.compile(r"^vllm serve (\S+)")
_SERVE_PREFIX = re.compile(r"^vllm serve \S+\s*\\?\n?\s*")


def _split_serve(command: str) -> tuple[str, str]:
    """(model id, flags text) of a ``vllm serve`` command in the recipes site's layout."""
    match = _SERVE.match(command)
    if match is None:
        return "MODEL", command
    model_id = match.group(1)
    rest = command[match.end():]
    if rest.startswith(" \\\n  ") and not rest[5:6].isspace():
        return model_id, rest[5:]
    return model_id, _SERVE_PREFIX.sub("", command, count=1)


def docker_command(command: str, env: Mapping[str, Any], meta: Mapping[str, Any], port: int = SERVE_PORT) -> str:
    """The shell form of ``docker_argv``, in the recipes site's line layout."""
    return _wrap_command(command, _EnvFlags(env), meta, port)


def _wrap_command(command: str, env: _EnvFlags, meta: Mapping[str, Any], port: int) -> str:
    model_id, body = _split_serve(command)
    mounts = env.mounts(model_id)
    prereq = f"# {model_id} must already exist on the host \u2014 bind-mounted read-only below.\n" \
        if mounts and model_id.startswith("/") else ""
    head = (f"{prereq}docker run {meta.get('gpuFlags')} \\\n  --privileged --ipc=host -p {port}:{port} \\\n"
            f"  -v {HF_CACHE_MOUNT} \\")
    if mounts:
        head += "\n  " + " \\\n  ".join(f"-v {m}" for m in mounts) + " \\"
    if env.text:
        head += f"\n  {env.text} \\"
    tail = f" \\\n  {body}" if body else ""
    return f"{head}\n  {text(meta.get('image'))} {model_id}{tail}"


def docker_processes(output: Mapping[str, Any], meta: Mapping[str, Any]) -> dict[str, Any]:
    """Every process of a resolution wrapped in ``docker run``, keyed as the recipes site keys them.

    ``single``, ``head``, ``workers`` (ranks 1..n-1), ``prefill``, ``decode``,
    ``vllm`` and ``vllm_workers``; each is ``{port, argv, command}``. The env
    flags are formatted once per env map, not once per process.
    """
    gpu_flags = _gpu_argv(meta)

    def wrap(argv: list[Any], command: str, env: _EnvFlags, port: int) -> dict[str, Any]:
        return {"port": port, "argv": _wrap_argv(argv, env, meta, port, gpu_flags),
                "command": _wrap_command(command, env, meta, port)}

    shape = shape_of(output)
    if shape == "pd_cluster":
        return {role: wrap(output[role]["argv"], output[role]["command"], _EnvFlags(output[role]["env"]),
                           PD_ROLE_PORTS[role]) for role in PD_ROLES}
    if shape == "kv_store_lb":
        vllm = output["vllm"]
        env = _EnvFlags(vllm["env"])
        out: dict[str, Any] = {"vllm": wrap(vllm["argv"], vllm["command"], env, SERVE_PORT)}
        if "workerArgvs" in vllm:
            out["vllm_workers"] = [wrap(a, c, env, SERVE_PORT)
                                   for a, c in zip(vllm["workerArgvs"], vllm["workerCommands"], strict=False)]
        return out
    if shape == "multi_node":
        env = _EnvFlags(output["env"])
        return {"head": wrap(output["headArgv"], output["headCommand"], env, SERVE_PORT),
                "workers": [wrap(a, c, env, SERVE_PORT)
                            for a, c in zip(output["workerArgvs"], output["workerCommands"], strict=False)]}
    return {"single": wrap(output["argv"], output["command"], _EnvFlags(output["env"]), SERVE_PORT)}
