# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Read-only host probes of vllm_host_probe: each one what a preflight task used to look at.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

Commands run through a ``run(argv) -> (rc, stdout, stderr)`` callable and the Hub through a
``fetch_json(url) -> object`` callable, so that tests drive these functions with plain stand-ins.
"""

from __future__ import annotations

import glob
import json
import os
import stat
from fnmatch import fnmatch
from importlib import metadata
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

Run = Callable[[Sequence[str]], "tuple[int, str, str]"]
FetchJson = Callable[[str], Any]

#: The CPU flags roles/preflight reports (vLLM's x86 CPU backend needs avx2).
CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")
#: Where CDI specs live, and their file names.
CDI_PATTERNS = ("*.yaml", "*.json")
SYS_CLASS_NET = "/sys/class/net"


def command_result(rc: int, stdout: str, stderr: str) -> dict[str, Any]:
    """A command's outcome as the command module reported it (trailing newlines stripped)."""
    return {"rc": rc, "stdout": stdout.rstrip("\r\n"), "stderr": stderr.rstrip("\r\n")}


def path_kind(path: str) -> dict[str, bool]:
    """``stat`` without following a final symlink, as ansible.builtin.stat does by default."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return {"exists": False, "isdir": False, "isreg": False}
    return {"exists": True, "isdir": stat.S_ISDIR(mode), "isreg": stat.S_ISREG(mode)}


def cdi_spec_count(dirs: Iterable[str]) -> int:
    """Regular, non-hidden ``*.yaml``/``*.json`` files directly in ``dirs`` (ansible.builtin.find's defaults)."""
    count = 0
    for directory in dirs:
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            if name.startswith(".") or not any(fnmatch(name, pattern) for pattern in CDI_PATTERNS):
                continue
            if path_kind(os.path.join(directory, name))["isreg"]:
                count += 1
    return count


def cpu_facts(cpuinfo: str, meminfo: str) -> dict[str, Any]:
    """The preflight CPU flags the first ``flags`` line lists (sorted) and MemTotal in bytes."""
    flags: list[str] = []
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags = sorted(set(line.split()) & set(CPU_FLAGS))
            break
    mem_total = 0
    for line in meminfo.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0] == "MemTotal:" and fields[1].isdigit():
            mem_total = int(fields[1]) * 1024
            break
    return {"flags": flags, "mem_total": mem_total}


def interface_names(sys_class_net: str = SYS_CLASS_NET) -> list[str]:
    """Network interfaces as the setup module lists them (directories of /sys/class/net)."""
    try:
        names = os.listdir(sys_class_net)
    except OSError:
        return []
    return sorted(name for name in names if os.path.isdir(os.path.join(sys_class_net, name)))


def parse_ip_addr(text: str) -> dict[str, list[str]]:
    """``ip -o addr`` -> the setup module's all_ipv4_addresses / all_ipv6_addresses (no loopback)."""
    found: dict[str, list[str]] = {"ipv4": [], "ipv6": []}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 4 or fields[2] not in ("inet", "inet6"):
            continue
        address = fields[3].split("/")[0]
        if fields[2] == "inet" and not address.startswith("127."):
            found["ipv4"].append(address)
        elif fields[2] == "inet6" and address != "::1":
            found["ipv6"].append(address)
    return found


def free_space(path: str) -> dict[str, Any]:
    """Free bytes (df's ``avail``) and mount point of the filesystem that holds ``path``.

    A path that does not exist yet is looked up at its nearest existing parent.
    """
    existing = path
    while not os.path.exists(existing):
        existing = os.path.dirname(existing) or "/"
    info = os.statvfs(existing)
    mount = os.path.realpath(existing)
    while not os.path.ismount(mount):
        mount = os.path.dirname(mount)
    return {"path": path, "mount": mount, "avail": info.f_bavail * (info.f_frsize or info.f_bsize)}


def hub_tree_bytes(tree: Any) -> int:
    """Total size of the files of a Hub ``/tree`` listing; 0 for anything else (an error answer)."""
    if not isinstance(tree, list):
        return 0
    return sum(int(entry.get("size") or 0) for entry in tree
               if isinstance(entry, Mapping) and entry.get("type") == "file")


def probe_weights(entries: Sequence[Mapping[str, Any]], fetch_json: FetchJson) -> dict[str, dict[str, Any]]:
    """Per entry: whether its revision is finished (the marker exists, or ``present`` as given) and,
    only when it is not, the free space of ``free_space_path``, the Hub size of ``tree_url`` and the
    kind of ``source``."""
    out: dict[str, dict[str, Any]] = {}
    for entry in entries:
        present = bool(entry["present"]) if entry.get("present") is not None else path_kind(entry["marker"])["exists"]
        found: dict[str, Any] = {"present": present}
        if not present:
            if entry.get("free_space_path"):
                found["free_space"] = free_space(entry["free_space_path"])
            if entry.get("tree_url"):
                try:
                    found["tree_bytes"] = hub_tree_bytes(fetch_json(entry["tree_url"]))
                except Exception:  # pylint: disable=broad-except  # any failure: size unknown
                    found["tree_bytes"] = 0
            if entry.get("source"):
                found["source"] = path_kind(entry["source"])
        out[entry["name"]] = found
    return out


def _run(run: Run, argv: Sequence[str]) -> dict[str, Any]:
    return command_result(*run(argv))


def probe_docker(request: Mapping[str, Any], run: Run) -> dict[str, Any]:
    """``docker info`` (JSON), then each wanted image and, when one is missing, DockerRootDir's free space."""
    out: dict[str, Any] = {}
    docker = request.get("docker")
    if docker:
        info = _run(run, [docker, "info", "--format", "{{json .}}"])
        try:
            info["info"] = json.loads(info["stdout"]) if info["rc"] == 0 else None
        except ValueError:
            info["info"] = None
        out["docker"] = info
        if info["info"] is not None:
            images = {ref: run([docker, "image", "inspect", "--format", "{{.Id}}", ref])[0] == 0
                      for ref in request.get("images") or []}
            out["images"] = images
            root = info["info"].get("DockerRootDir")
            if request.get("docker_root_free") and root and not all(images.values()):
                out["docker_root_free"] = free_space(root)
    if request.get("docker_version"):
        out["docker_version"] = _run(run, [request["docker_version"], "version", "--format", "{{.Server.Version}}"])
    return out


def installed_version(venv: str, name: str) -> Optional[str]:
    """The version of package ``name`` in the venv at ``venv`` (its site-packages metadata), None when absent."""
    site_dirs = sorted(glob.glob(os.path.join(venv, "lib", "python*", "site-packages")))
    if not site_dirs:
        return None
    return next((dist.version for dist in metadata.distributions(name=name, path=site_dirs)), None)


def probe(request: Mapping[str, Any], run: Run, fetch_json: FetchJson,
          read_text: Optional[Callable[[str], str]] = None) -> dict[str, Any]:
    """Everything ``request`` asks for, in one pass; keys absent from the request are absent here."""
    read = read_text or _read_text
    facts = probe_docker(request, run)
    if request.get("accelerator_count"):
        facts["accelerator_count"] = _run(run, ["/bin/bash", "-c", "set -o pipefail\n" + request["accelerator_count"]])
    if request.get("cpu"):
        facts["cpu"] = cpu_facts(read("/proc/cpuinfo"), read("/proc/meminfo"))
    if request.get("paths"):
        facts["paths"] = {path: path_kind(path) for path in request["paths"]}
    if request.get("cdi_dirs"):
        facts["cdi_specs"] = cdi_spec_count(request["cdi_dirs"])
    if request.get("network"):
        rc, stdout, _stderr = run(["ip", "-o", "addr"])
        facts["network"] = dict(parse_ip_addr(stdout if rc == 0 else ""), interfaces=interface_names())
    if request.get("weights"):
        facts["weights"] = probe_weights(request["weights"], fetch_json)
    if request.get("packages"):
        facts["packages"] = {venv: installed_version(venv, name) for venv, name in request["packages"].items()}
    return facts


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""
