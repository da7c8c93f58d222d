# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""This host's share of the fleet plan that the preflight checks and the weights role read.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

``weights_view`` is the ``vllm_fleet_weights`` fact: one entry per deployment this host serves
whose weights are fetched before start (weights.mode download, import or shared_fs).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional

#: weights.mode values whose weights are fetched before the engines start.
WEIGHTS_MODES = ("download", "shared_fs", "import")
DEFAULT_REVISION = "main"


def processes_of_kind(processes: Sequence[Mapping[str, Any]], *kinds: str) -> list[Mapping[str, Any]]:
    return [proc for proc in processes if proc.get("kind") in kinds]


def docker_processes(processes: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [proc for proc in processes if proc.get("runtime") == "docker"]


def unique(values: Iterable[Any]) -> list[Any]:
    """Values in first-seen order, without repeats (Jinja's ``unique``)."""
    out: list[Any] = []
    for value in values:
        if value not in out:
            out.append(value)
    return out


def weights_deployments(processes: Sequence[Mapping[str, Any]], deployments: Mapping[str, Any]) -> list[str]:
    """Deployments with an engine on this host whose weights are fetched before start, sorted."""
    names = {proc["deployment"] for proc in processes_of_kind(processes, "engine")}
    return sorted(name for name in names
                  if name in deployments and deployments[name]["weights"]["mode"] in WEIGHTS_MODES)


def weights_entry(name: str, deployment: Mapping[str, Any], repos: Mapping[str, Any],
                  origins: Mapping[str, Any]) -> dict[str, Any]:
    """What deployment ``name`` fetches, from where, and who fetches it (without ``present``)."""
    weights = deployment["weights"]
    engines = processes_of_kind(deployment["processes"], "engine")
    hosts = sorted(unique(proc["host"] for proc in engines))
    served = engines[0]["served"]
    revision = weights.get("revision") or DEFAULT_REVISION
    repo = repos[name] if name in repos else served["model"]
    key = f"{str(repo).replace('/', '--')}@{str(revision).replace('/', '--')}"
    cache = weights["cache_dir"]
    return {
        "name": name,
        "repo": repo,
        "revision": revision,
        "pinned": weights.get("revision") is not None,
        "mode": weights["mode"],
        "source": weights.get("source"),
        "endpoint": weights["endpoint"],
        "hosts": hosts,
        "origin": origins[name] if name in origins else hosts[0],
        "cache": cache,
        "repo_dir": f"{cache}/hub/models--{str(repo).replace('/', '--')}",
        "marker": f"{cache}/.vllm-fleet/{key}.json",
        "status": f"{cache}/.vllm-fleet/{key}.status",
        "env_file": posixpath.join(posixpath.dirname(deployment["processes"][0]["env_file"]), "hf-download.env"),
        "argv_has_revision": served["revision_in_argv"],
    }


def weights_view(processes: Sequence[Mapping[str, Any]], deployments: Mapping[str, Any],
                 repos: Optional[Mapping[str, Any]] = None,
                 origins: Optional[Mapping[str, Any]] = None) -> list[dict[str, Any]]:
    """The entries of this host's deployments, sorted by name, without ``present``."""
    return [weights_entry(name, deployments[name], repos or {}, origins or {})
            for name in weights_deployments(processes, deployments)]


def with_presence(entries: Sequence[Mapping[str, Any]], present: Mapping[str, bool]) -> list[dict[str, Any]]:
    """``entries`` with ``present``: whether the finished revision's marker is on this host."""
    return [dict(entry, present=bool(present.get(entry["name"], False))) for entry in entries]
