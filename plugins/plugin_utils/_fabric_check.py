# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""The fabric check before a multi-node group or a prefill/decode pool starts (docs/verify.md).

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

In: the compiled plan. Out (:func:`fabric_checks`): per multi-node group, the
``docker run`` argv of each rank's throwaway container (the engine image, the
engine's device flags, its ``<unit>.fabric.env``) that runs a torch.distributed
all-reduce over the group on a free port next to the engine's master port; per
prefill/decode pool, the prefill side channels every decode host must reach.
:func:`fabric_report` turns what the hosts printed into one line per group and
pair and the failures, each naming the host, the interface, the address and the
underlying error. roles/fabric/tasks/collective.yml runs the commands.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Mapping, Sequence
from typing import Any, Optional

#: Where the engine's container reads its secret env file (plugins/plugin_utils/_container.py).
SECRET_MOUNT = "/run/vllm-fleet/secret.env"
#: Seconds a probe container may take to start and import torch before its timeout starts
#: (a loaded 2-core CI host took most of a minute; a GPU host initialises its driver too).
STARTUP_S = 120
#: Where the probe script is bound inside the throwaway container.
SCRIPT_IN_CONTAINER = "/opt/vllm-fleet/collective_check.py"
#: torch.distributed backend per vendor (RCCL is "nccl" in torch); every other vendor: gloo on CPU.
BACKENDS = {"nvidia": "nccl", "amd": "nccl", "ascend": "hccl"}
#: The engine's master port when the plan lists none (vLLM's --master-port default).
DEFAULT_MASTER_PORT = 29501
#: docker run options of the engine that do not carry over to the probe container.
_DROP = {"--name", "--env-file", "--restart", "-p", "--publish", "--network", "--net", "--entrypoint", "-e", "--env"}
_DROP_FLAGS = {"--rm", "-d", "--detach", "-i", "-t", "-it"}
_NO_VALUE = _DROP_FLAGS | {"--privileged", "--init", "--read-only"}
#: Device names that mean RDMA (Mellanox/InfiniBand HCAs) in UCX_NET_DEVICES / NCCL_IB_HCA.
_RDMA_DEVICE = re.compile(r"^\^?=?(mlx|ib|bnxt_re|irdma|hfi|qedr|efa|erdma|rxe)", re.I)
#: UCX transports that are RDMA.
_RDMA_TRANSPORTS = {"rc", "rc_verbs", "rc_mlx5", "ud", "ud_verbs", "ud_mlx5", "dc", "dc_mlx5", "srd"}
_IFACE_KEYS = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME")


def fabric_env_path(env_file: str) -> str:
    """``<unit>.fabric.env`` beside an engine's env file (what roles/fabric writes)."""
    return re.sub(r"[.]env$", ".fabric.env", env_file)


def _interface(env: Mapping[str, Any], backend: str) -> Optional[str]:
    first = {"gloo": "GLOO_SOCKET_IFNAME", "nccl": "NCCL_SOCKET_IFNAME", "hccl": "HCCL_SOCKET_IFNAME"}[backend]
    for key in (first, *_IFACE_KEYS):
        if env.get(key):
            return str(env[key])
    return None


def _own_mount(value: str, config_dir: str) -> bool:
    """A bind mount of the engine's own files: caches, and anything in its configuration directory
    (the secret env file). The probe runs before the deploy writes them, and docker would create a
    missing source as a directory where the file belongs."""
    source, target = (value.split(":") + [""])[:2]
    return (target.startswith("/root/.cache") or target == SECRET_MOUNT
            or (bool(config_dir) and (source == config_dir or source.startswith(config_dir.rstrip("/") + "/"))))


def device_options(exec_start: Sequence[str], image: str, config_dir: str = "") -> list[str]:
    """The engine's ``docker run`` options that the probe container needs too (devices, GPUs, IPC,
    shared memory, ulimits, driver mounts), without its name, env, ports, network, caches or the
    files of its configuration directory ``config_dir``."""
    words = [str(w) for w in exec_start]
    if "run" not in words or image not in words[words.index("run") + 1:]:
        return []
    start = words.index("run") + 1
    options, kept, index = words[start: words.index(image, start)], [], 0
    while index < len(options):
        word = options[index]
        name = word.split("=", 1)[0]
        takes_value = "=" not in word and name not in _NO_VALUE and index + 1 < len(options)
        pair = options[index: index + 2] if takes_value else [word]
        index += len(pair)
        value = pair[-1] if takes_value else word.partition("=")[2]
        if name in _DROP or name in _DROP_FLAGS:
            continue
        if name in ("-v", "--volume") and _own_mount(value, config_dir):
            continue
        kept.extend(pair)
    return kept


def _master_port(head: Mapping[str, Any]) -> int:
    for port in head.get("ports") or []:
        if port.get("purpose") in ("mp-master", "dp-rpc"):
            return int(port["port"])
    return DEFAULT_MASTER_PORT


def _free_port(wanted: int, taken: set[int]) -> int:
    while wanted in taken:
        wanted += 1
    return wanted


def deadline_s(timeout_s: int) -> int:
    """Seconds a probe container may run in all: the rendezvous and collective (``timeout_s``,
    plus the script's 10 s grace) after the container started and imported torch
    (:data:`STARTUP_S`)."""
    return int(timeout_s) + 10 + STARTUP_S


def _probe_argv(rank: Mapping[str, Any], group: Mapping[str, Any], script: str, settings: Mapping[str, Any]) -> list[str]:
    timeout = int(settings["timeout_s"])
    return ["timeout", "--kill-after=10", str(deadline_s(timeout)),
            "docker", "run", "--rm", "--name", rank["container"], "--network", "host",
            *rank["device_options"], "--env-file", rank["env_file"],
            "-v", f"{script}:{SCRIPT_IN_CONTAINER}:ro", "--entrypoint", "python3", group["image"],
            SCRIPT_IN_CONTAINER, "collective", "--backend", group["backend"], "--rank", str(rank["rank"]),
            "--world-size", str(group["world_size"]), "--master-addr", group["master_addr"],
            "--master-port", str(group["master_port"]), "--timeout", str(timeout),
            "--size-mb", str(int(settings["size_mb"]))]


def _groups(name: str, dep: Mapping[str, Any], script: str, settings: Mapping[str, Any]) -> list[dict[str, Any]]:
    engines = [p for p in dep.get("processes", []) if p.get("kind") == "engine" and p.get("image")]
    taken = {int(port["port"]) for proc in dep.get("processes", []) for port in proc.get("ports") or []}
    by_group: dict[str, list[Mapping[str, Any]]] = {}
    for proc in engines:
        by_group.setdefault(proc.get("restart_group") or proc["unit"], []).append(proc)
    backend = BACKENDS.get(str(dep.get("vendor")), "gloo")
    groups = []
    for group_name, procs in sorted(by_group.items()):
        if len({p["host"] for p in procs}) < 2:
            continue
        procs = sorted(procs, key=lambda p: (p.get("rank") or 0, p["unit"]))
        head = procs[0]
        group: dict[str, Any] = {
            "deployment": name, "group": group_name, "backend": backend, "image": head["image"],
            "world_size": len(procs), "master_addr": str(head.get("address") or head["env"].get("VLLM_HOST_IP")),
            "master_port": _free_port(_master_port(head) + int(settings["port_offset"]), taken),
            "head_host": head["host"], "timeout_s": int(settings["timeout_s"]),
        }
        group["ranks"] = [{
            "deployment": name, "group": group_name, "host": p["host"], "unit": p["unit"], "rank": index,
            "address": p.get("address") or (p.get("env") or {}).get("VLLM_HOST_IP"),
            "interface": _interface(p.get("env") or {}, backend),
            "env_file": fabric_env_path(str(p["env_file"])),
            "container": f"{str(p['unit']).removesuffix('.service')}-fabric-check",
            "device_options": device_options(p.get("exec_start") or [], str(p["image"]),
                                             posixpath.dirname(str(p["env_file"]))),
        } for index, p in enumerate(procs)]
        for rank in group["ranks"]:
            rank["argv"] = _probe_argv(rank, group, script, settings)
        groups.append(group)
    return groups


def rdma_declared(env: Mapping[str, Any]) -> list[str]:
    """RDMA devices named by ``UCX_NET_DEVICES`` / ``NCCL_IB_HCA`` (``mlx5_0:1``, ``ib0`` ...)."""
    names = []
    for key in ("UCX_NET_DEVICES", "NCCL_IB_HCA"):
        for item in str(env.get(key) or "").split(","):
            if item and _RDMA_DEVICE.match(item.strip()):
                names.append(item.strip())
    return names


def _pairs(name: str, dep: Mapping[str, Any], script: str, settings: Mapping[str, Any]) -> list[dict[str, Any]]:
    engines = [p for p in dep.get("processes", []) if p.get("kind") == "engine" and p.get("image")]
    prefill = [p for p in engines if p.get("role") == "prefill" and (p.get("env") or {}).get("VLLM_NIXL_SIDE_CHANNEL_PORT")]
    decode = [p for p in engines if p.get("role") == "decode"]
    pairs: list[dict[str, Any]] = []
    for pre in prefill:
        env = pre.get("env") or {}
        address = str(env.get("VLLM_NIXL_SIDE_CHANNEL_HOST") or pre.get("address"))
        port = int(env["VLLM_NIXL_SIDE_CHANNEL_PORT"])
        listen = ["timeout", "--kill-after=5", str(int(settings["timeout_s"]) + 10), "python3", script, "listen",
                  "--address", address, "--port", str(port), "--accept", str(len(decode)),
                  "--timeout", str(int(settings["timeout_s"]))]
        pairs.extend({"deployment": name, "prefill": pre["unit"], "prefill_host": pre["host"], "address": address,
                      "port": port, "listen_argv": listen, "decode": dec["unit"], "decode_host": dec["host"],
                      "decode_address": dec.get("address"),
                      "interface": _interface(dec.get("env") or {}, "nccl")} for dec in decode)
    return pairs


def _ucx_probes(name: str, dep: Mapping[str, Any], script: str) -> list[dict[str, Any]]:
    probes = []
    for proc in dep.get("processes", []):
        if proc.get("kind") != "engine" or proc.get("role") not in ("prefill", "decode") or not proc.get("image"):
            continue
        env_file = fabric_env_path(str(proc["env_file"]))
        probes.append({"deployment": name, "host": proc["host"], "unit": proc["unit"],
                       "rdma": rdma_declared(proc.get("env") or {}),
                       "argv": ["timeout", "--kill-after=5", "90", "docker", "run", "--rm", "--network", "host",
                                "--env-file", env_file, "-v", f"{script}:{SCRIPT_IN_CONTAINER}:ro",
                                "--entrypoint", "python3", str(proc["image"]), SCRIPT_IN_CONTAINER, "ucx"]})
    return probes


def fabric_checks(plan: Mapping[str, Any], script: str, *, timeout_s: int = 60, port_offset: int = 100,
                  size_mb: int = 16) -> dict[str, Any]:
    """Per deployment: ``groups`` (multi-node groups of more than one host, each rank's probe
    ``argv``), ``pairs`` (one per decode engine and prefill side channel), ``ucx`` (one probe per
    PD engine), and the flat ``ranks`` list the role loops over. ``script``: the probe script's path
    on the hosts. Single-node deployments give nothing."""
    settings = {"timeout_s": timeout_s, "port_offset": port_offset, "size_mb": size_mb}
    groups, pairs, ucx = [], [], []
    for name, dep in sorted((plan.get("deployments") or {}).items()):
        groups.extend(_groups(name, dep, script, settings))
        pairs.extend(_pairs(name, dep, script, settings))
        ucx.extend(_ucx_probes(name, dep, script))
    if not pairs:
        ucx = []
    listeners = list({(p["prefill_host"], p["address"], p["port"]): p for p in pairs}.values())
    return {"groups": groups, "ranks": [rank for group in groups for rank in group["ranks"]],
            "pairs": pairs, "listeners": listeners, "ucx": ucx, "deadline_s": deadline_s(timeout_s),
            "hosts": sorted({r["host"] for g in groups for r in g["ranks"]}
                            | {h for p in pairs for h in (p["prefill_host"], p["decode_host"])})}


def _last_json(stdout: str) -> Optional[dict[str, Any]]:
    for line in reversed((stdout or "").splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                return record
    return None


def _tail(text: str, lines: int = 6) -> str:
    rows = [row.strip() for row in (text or "").splitlines() if row.strip().strip("^~") and not row.startswith("frame #")]
    return " | ".join(rows[-lines:])


def rank_failure(rank: Mapping[str, Any], group: Mapping[str, Any], result: Mapping[str, Any]) -> Optional[str]:
    """The message for a rank whose probe failed (None when it passed): the host, the interface and
    address it used, the master it joined, and the underlying error."""
    record = _last_json(str(result.get("stdout") or ""))
    if record and record.get("ok") and result.get("rc", 0) == 0:
        return None
    rc = result.get("rc")
    if rc in (124, 137):
        cause = f"no answer within {group.get('timeout_s', '?')} s (the outer timeout killed the probe, rc {rc})"
    else:
        cause = (record or {}).get("error") or result.get("msg") or f"rc {rc}"
    stderr = _tail(str(result.get("stderr") or ""), 3)
    seen = (record or {}).get("env") or {}
    interface = _interface(seen, group["backend"]) or rank.get("interface") or "(none set)"
    address = seen.get("VLLM_HOST_IP") or rank.get("address")
    return (f"{rank['host']}: {group['backend']} all-reduce of group {group['group']} (rank {rank['rank']} of "
            f"{group['world_size']}) failed on interface {interface}, address "
            f"{address}, master {group['master_addr']}:{group['master_port']}: {cause}"
            + (f"; stderr: {stderr}" if stderr else ""))


def _gbps(value: float) -> str:
    return f"{value:.2f} GB/s" if value >= 0.1 else f"{value * 1000:.1f} MB/s"


def group_line(group: Mapping[str, Any], results: Mapping[str, Mapping[str, Any]]) -> tuple[str, list[str]]:
    """One readable line for a group and its failures. ``results``: per rank unit, the registered
    result of its probe (``rc``, ``stdout``, ``stderr``)."""
    failures, records = [], []
    for rank in group["ranks"]:
        result = results.get(rank["unit"]) or {"rc": None, "msg": "the probe did not run on this host"}
        message = rank_failure(rank, group, result)
        if message:
            failures.append(message)
        else:
            records.append(_last_json(str(result.get("stdout"))) or {})
    head = f"{group['group']}: {group['backend']} all-reduce over {group['ranks'][0].get('interface') or 'the default route'} " \
           f"{group['world_size']} ranks"
    if failures:
        return f"{head}: FAILED ({len(failures)} of {group['world_size']} ranks)", failures
    busbw = min(float(r.get("busbw_gbps") or 0) for r in records)
    latency = max(float(r.get("latency_s") or 0) for r in records)
    size = int(records[0].get("bytes") or 0) // (1024 * 1024)
    return f"{head}: busbw {_gbps(busbw)} ({size} MiB), latency {latency * 1000:.2f} ms", []


def pair_line(pair: Mapping[str, Any], result: Mapping[str, Any]) -> tuple[str, list[str]]:
    """One line per decode host and prefill side channel, and the failure (``wait_for`` result)."""
    where = f"{pair['decode_host']} -> {pair['prefill_host']} KV side channel {pair['address']}:{pair['port']}"
    if not result.get("failed") and not result.get("skipped"):
        return f"{where}: reachable", []
    cause = result.get("msg") or "not reached"
    return f"{where}: FAILED", [f"{pair['decode_host']}: cannot reach {pair['prefill']} on {pair['prefill_host']} at "
                                f"{pair['address']}:{pair['port']} (NIXL side channel) from interface "
                                f"{pair.get('interface') or '(none set)'}, address {pair.get('decode_address')}: {cause}"]


def ucx_line(probe: Mapping[str, Any], result: Mapping[str, Any], rdma_fallback: str = "fail") -> tuple[str, list[str], list[str]]:
    """(line, failures, warnings) for one engine's UCX transports. RDMA devices declared while
    UCX offers no RDMA transport: a failure (``rdma_fallback`` ``fail``) or a warning (``warn``)."""
    record = _last_json(str(result.get("stdout") or "")) or {}
    where = f"{probe['host']} {probe['unit']} UCX"
    if not record.get("ucx_info"):
        return f"{where}: ucx_info not in image" + (" (cannot tell RDMA from TCP)" if probe["rdma"] else ""), [], []
    transports = list(record.get("transports") or [])
    line = f"{where}: {', '.join(transports) or 'no transports'}"
    if probe["rdma"] and not set(transports) & _RDMA_TRANSPORTS:
        message = (f"{probe['host']}: {probe['unit']} declares RDMA devices {', '.join(probe['rdma'])} but UCX offers "
                   f"only {', '.join(transports) or 'no transports'}: the KV transfer would fall back to TCP")
        return line + ": RDMA FALLBACK", ([message] if rdma_fallback == "fail" else []), \
            ([message] if rdma_fallback != "fail" else [])
    return line, [], []


def _item(result: Mapping[str, Any]) -> Mapping[str, Any]:
    """The loop item of a registered result; for ``async_status`` over poll-0 jobs, the job's own item."""
    item = result.get("item")
    if not isinstance(item, Mapping):
        return {}
    nested = item.get("item")
    return nested if "unit" not in item and "decode" not in item and isinstance(nested, Mapping) else item


def fabric_report(checks: Mapping[str, Any], ranks: Sequence[Mapping[str, Any]] = (),
                  pairs: Sequence[Mapping[str, Any]] = (), ucx: Sequence[Mapping[str, Any]] = (),
                  rdma_fallback: str = "fail") -> dict[str, Any]:
    """``lines`` (one per group, pair and UCX probe), ``failures`` and ``warnings``. The results are
    the registered loop items of the role's probe tasks (each with its ``item``)."""
    by_unit = {_item(r)["unit"]: r for r in ranks if "unit" in _item(r)}
    by_pair = {(_item(r)["decode"], _item(r)["prefill"]): r for r in pairs if "decode" in _item(r)}
    by_probe = {_item(r)["unit"]: r for r in ucx if "unit" in _item(r)}
    lines, failures, warnings = [], [], []
    for group in checks.get("groups", []):
        line, failed = group_line(group, by_unit)
        lines.append(line)
        failures.extend(failed)
    for pair in checks.get("pairs", []):
        line, failed = pair_line(pair, by_pair.get((pair["decode"], pair["prefill"]), {"failed": True,
                                                                                       "msg": "not probed"}))
        lines.append(line)
        failures.extend(failed)
    for probe in checks.get("ucx", []):
        line, failed, warned = ucx_line(probe, by_probe.get(probe["unit"], {}), rdma_fallback)
        lines.append(line)
        failures.extend(failed)
        warnings.extend(warned)
    return {"lines": lines, "failures": failures, "warnings": warnings, "passed": not failures}
