# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""The cluster-network (fabric) part of an engine's environment, and the fabric role's env files.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

The fabric settings (NCCL/Gloo, UCX/NIXL, HCCL, Mooncake and the host address)
are already in each engine's env in the plan; the fabric role also writes them
to a 0600 ``<unit>.fabric.env`` beside the unit's own env file for operators and
their tools, and preflight checks the interfaces, addresses and RDMA devices they name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._unitfile import env_file

#: Env names that describe the cluster network.
FABRIC_KEY = re.compile(r"^(NCCL_|GLOO_|UCX_|NIXL_|VLLM_NIXL_|HCCL_|TP_SOCKET_IFNAME$|VLLM_HOST_IP$|MC_|MOONCAKE_)")
FABRIC_IFACE_KEYS = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME", "TP_SOCKET_IFNAME")
FABRIC_ADDRESS_KEYS = ("VLLM_HOST_IP", "HCCL_IF_IP", "VLLM_NIXL_SIDE_CHANNEL_HOST")
FABRIC_RDMA_KEYS = ("UCX_NET_DEVICES", "NCCL_IB_HCA")


def fabric_env(env: Mapping[str, Any]) -> dict[str, str]:
    """The fabric entries of one process's env, sorted by name."""
    return {key: str(env[key]) for key in sorted(env) if FABRIC_KEY.match(key)}


def fabric_env_files(processes: Sequence[Mapping[str, Any]], host: str) -> list[dict[str, str]]:
    """One 0600 ``<unit>.fabric.env`` spec (``{dest, mode, content}``) per engine of ``processes`` that
    has fabric settings, beside the engine's own env file. ``host`` names the host in the comment."""
    specs = []
    for proc in processes:
        if proc.get("kind") != "engine":
            continue
        env = fabric_env(proc.get("env") or {})
        if not env:
            continue
        unit, own = str(proc["unit"]), str(proc["env_file"])
        comments = [f"Managed by vllm_fleet.recipes (fabric role): the cluster-network settings of {unit}",
                    f"on {host}, from the fleet plan. The unit's own env file carries them too."]
        entries = [(name, value, f"fabric env of {unit}.{name}") for name, value in env.items()]
        specs.append({"dest": re.sub(r"[.]env$", ".fabric.env", own), "mode": "0600",
                      "content": env_file(comments, entries)})
    return specs
