# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""The recipe engine's output types: a ``Resolution`` and its ``Process`` launches, and the
``PlacementView`` of one resolution that placers read.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

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

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["selection"] = asdict(self.selection)
        return data


@dataclass(frozen=True)
class Origin:
    """Where a pinned record (``resolution_file``) wrote a part of a view: the full key paths that
    messages name when a value from it is refused (``vllm_deployment[d].resolution_file (PATH)
    resolutions[0].resolution.engines.single[0].argv``). Empty for the parts a record lacks."""

    argv: str = ""
    env: str = ""
    docker: str = ""
    port: str = ""
    image: str = ""
    deploy_type: str = ""
    #: ``argv`` names a shell command the argv was split from (a service's ``command``).
    command: bool = False

    def word(self, index: int) -> str:
        """The key of argv word ``index``."""
        return f"{self.argv} (word {index})" if self.command else f"{self.argv}[{index}]"


@dataclass(frozen=True)
class Launch:
    """One engine process: its argv and env, and the recipes site's ``docker run`` argv for it.

    ``origin``: where a pinned record wrote it (None for the engine's own resolutions).
    """

    argv: tuple[str, ...]
    env: Mapping[str, Any]
    docker_argv: Optional[tuple[str, ...]] = None
    origin: Optional[Origin] = field(default=None, compare=False)

    @property
    def headless(self) -> bool:
        """A rank that serves no HTTP (``--headless``): it starts before the ranks that do."""
        return "--headless" in self.argv


@dataclass(frozen=True)
class Service:
    """A router or Mooncake process: its argv, port and configuration."""

    argv: tuple[str, ...]
    port: Optional[int] = None
    config: Mapping[str, Any] = field(default_factory=dict)
    origin: Optional[Origin] = field(default=None, compare=False)


@dataclass(frozen=True)
class MooncakeView:
    """The Mooncake master, the store (centralized topology only) and the engine-side config."""

    master: Optional[Service]
    store: Optional[Service]
    config: Mapping[str, Any]


@dataclass(frozen=True)
class PlacementView:
    """One resolution as placement reads it.

    ``engines`` is keyed like the site's ``docker.processes``: ``single``;
    ``head`` and ``workers`` (ranks 1..n-1); ``prefill`` and ``decode`` (this
    rank of each pool); ``vllm`` and ``vllm_workers`` (one Mooncake instance).
    """

    shape: str
    deploy_type: str
    image: Optional[str]
    docker_meta: Mapping[str, Any]
    engines: Mapping[str, tuple[Launch, ...]]
    router: Optional[Service] = None
    mooncake: Optional[MooncakeView] = None
    #: Where a pinned record wrote the view (its ``image`` and ``deploy_type``); None for the engine's.
    origin: Optional[Origin] = field(default=None, compare=False)

    @property
    def env(self) -> Mapping[str, Any]:
        """The env of the first engine process (the one every rank of the view shares)."""
        for launches in self.engines.values():
            if launches:
                return launches[0].env
        return {}

    def engine(self, key: str) -> Optional[Launch]:
        launches = self.engines.get(key) or ()
        return launches[0] if launches else None
