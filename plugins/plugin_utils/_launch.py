# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""The recipe engine's output types: a ``Resolution`` and its ``Process`` launches.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Optional

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._selection import Selection


@dataclass(frozen=True)
class Process:
    """One long-running process of a deployment.

    ``group`` names the processes that must start and restart together (a
    multi-node engine, a PD pool, a Mooncake instance); ``rank`` is the node
    index inside that group (0 = the head, which serves HTTP).
    """

    name: str
    role: str
    group: str
    rank: int
    argv: tuple[str, ...]
    command: str
    env: Mapping[str, Any] = field(default_factory=dict)
    port: Optional[int] = None
    docker_argv: Optional[tuple[str, ...]] = None
    docker_command: Optional[str] = None
    config: Optional[Mapping[str, Any]] = None

    @property
    def headless(self) -> bool:
        return "--headless" in self.argv


@dataclass(frozen=True)
class Resolution:
    """A fully resolved deployment: the selection used and every process it runs."""

    hf_id: str
    selection: Selection
    deploy_type: str
    image: str
    docker: Mapping[str, Any]
    output: Mapping[str, Any]
    processes: tuple[Process, ...]

    def process(self, name: str) -> Process:
        for proc in self.processes:
            if proc.name == name:
                return proc
        raise KeyError(name)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["selection"] = asdict(self.selection)
        return data
