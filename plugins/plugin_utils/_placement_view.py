# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""What a placer reads of one resolution: typed, read once from the site-shaped record.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

The engine answers placement with a record shaped like the recipes site's
output (plus its ``docker`` wrapping); plan.json pins those records and
``resolution_file`` replays them. :func:`placement_view` reads a record, from
either source, into a :class:`PlacementView` once, so placers work on typed
launches and never on the record's camelCase keys or command text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._argv_tools import shell_words
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._engine_shapes import shape_of
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._gates import PD_ROLES


@dataclass(frozen=True)
class Launch:
    """One engine process: its argv and env, and the recipes site's ``docker run`` argv for it."""

    argv: tuple[str, ...]
    env: Mapping[str, Any]
    docker_argv: Optional[tuple[str, ...]] = None


@dataclass(frozen=True)
class Service:
    """A router or Mooncake process: its argv, port and configuration."""

    argv: tuple[str, ...]
    port: Any = None
    config: Mapping[str, Any] = field(default_factory=dict)


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


def placement_view(record: Mapping[str, Any]) -> PlacementView:
    """Read one site-shaped resolution record. ValueError for a router or Mooncake command that
    does not split into words."""
    docker = _mapping(record.get("docker"))
    meta = _mapping(docker.get("meta"))
    shape = shape_of(record)
    engines, router, mooncake = _READERS[shape](record, _mapping(docker.get("processes")))
    return PlacementView(shape=shape, deploy_type=str(record.get("deployType")),
                         image=docker.get("image") or meta.get("image"), docker_meta=meta, engines=engines,
                         router=router, mooncake=mooncake)


Sections = tuple[dict[str, tuple[Launch, ...]], Optional[Service], Optional[MooncakeView]]


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _docker_argv(entry: Any) -> Optional[tuple[str, ...]]:
    return tuple(str(t) for t in entry.get("argv") or ()) if isinstance(entry, Mapping) else None


def _launches(argvs: Any, env: Any, docker: Any) -> tuple[Launch, ...]:
    """A launch per argv, each with the docker entry of the same index (None past the list's end)."""
    entries = list(docker) if isinstance(docker, list) else []
    return tuple(Launch(tuple(argv), _mapping(env), _docker_argv(entries[i]) if i < len(entries) else None)
                 for i, argv in enumerate(argvs or ()))


def _service(section: Any, config: Optional[Mapping[str, Any]] = None) -> Optional[Service]:
    """A service from a ``{command, port?, config?}`` section; None without a command."""
    if not isinstance(section, Mapping) or not section.get("command"):
        return None
    own = section.get("config")
    return Service(argv=tuple(shell_words(str(section["command"]))), port=section.get("port"),
                   config=_mapping(config if config is not None else own))


def _single(record: Mapping[str, Any], docker: Mapping[str, Any]) -> Sections:
    if "argv" not in record:
        return {}, None, None
    return {"single": _launches([record["argv"]], record.get("env"), [docker.get("single")])}, None, None


def _multi(record: Mapping[str, Any], docker: Mapping[str, Any]) -> Sections:
    env = record.get("env")
    return {"head": _launches([record["headArgv"]], env, [docker.get("head")]),
            "workers": _launches(record.get("workerArgvs"), env, docker.get("workers"))}, None, None


def _pd(record: Mapping[str, Any], docker: Mapping[str, Any]) -> Sections:
    engines = {}
    for role in PD_ROLES:
        part = _mapping(record.get(role))
        if "argv" in part:
            engines[role] = _launches([part["argv"]], part.get("env"), [docker.get(role)])
    section = record.get("mooncake")
    mooncake = None
    if section:
        section = _mapping(section)
        mooncake = MooncakeView(master=_service(section.get("master")), store=_service(section.get("store")),
                                config=_mapping(section.get("config") or section.get("mooncakeConfig")))
    return engines, _service(record.get("router"), _mapping(record.get("routerConfig"))), mooncake


def _kv(record: Mapping[str, Any], docker: Mapping[str, Any]) -> Sections:
    vllm = _mapping(record.get("vllm"))
    engines = {}
    if "argv" in vllm:
        engines["vllm"] = _launches([vllm["argv"]], vllm.get("env"), [docker.get("vllm")])
        engines["vllm_workers"] = _launches(vllm.get("workerArgvs"), vllm.get("env"), docker.get("vllm_workers"))
    router = _mapping(record.get("router"))
    # the router's own keys (its port) are its configuration, as the site prints them
    router_config = {k: v for k, v in router.items() if k not in ("command", "install")}
    mooncake = MooncakeView(master=_service(record.get("master")), store=_service(record.get("store")),
                            config=_mapping(record.get("mooncakeConfig")))
    return engines, _service(router, router_config), mooncake


_READERS = {"single_node": _single, "multi_node": _multi, "pd_cluster": _pd, "kv_store_lb": _kv}
