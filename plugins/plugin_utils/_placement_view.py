# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Records of the view placement reads of a resolution (``PlacementView``): written to plan.json, read back.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

plan.json pins, per deployment, every view placement asked for, as a typed
record (:func:`view_record`); ``resolution_file`` replays them.
:func:`placement_view` reads such a record, and also a record in the recipes
site's output shape (plan.json before typed records, and the conformance
corpus the tests place), so placers only ever see the typed view. Records are
untrusted: every part placement reads is type-checked and refused by its key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._argv_tools import shell_words
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._engine_shapes import View, shape_of
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._gates import PD_ROLES
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._launch import (
    Launch,
    MooncakeView,
    Origin,
    PlacementView,
    Service,
)


def view_record(view: PlacementView) -> dict[str, Any]:
    """The JSON record of a view (plan.json's ``resolutions``); :func:`placement_view` reads it back."""
    return {
        "shape": view.shape, "deploy_type": view.deploy_type, "image": view.image,
        "docker_meta": dict(view.docker_meta),
        "engines": {key: [{"argv": list(launch.argv), "env": dict(launch.env),
                           "docker_argv": None if launch.docker_argv is None else list(launch.docker_argv)}
                          for launch in launches] for key, launches in view.engines.items()},
        "router": _service_record(view.router),
        "mooncake": None if view.mooncake is None else {
            "master": _service_record(view.mooncake.master), "store": _service_record(view.mooncake.store),
            "config": dict(view.mooncake.config)},
    }


def _service_record(service: Optional[Service]) -> Optional[dict[str, Any]]:
    if service is None:
        return None
    return {"argv": list(service.argv), "port": service.port, "config": dict(service.config)}


class RecordError(ValueError):
    """A part of a record placement cannot read: ``key`` (relative to the record) and what is wrong."""

    def __init__(self, key: str, expected: str, found: str = "", problem: str = "") -> None:
        """``problem``: the message's text after the key, when not ``got FOUND; expected EXPECTED``."""
        self.key = key
        self.expected = expected
        self.found = found
        super().__init__(f"{key}: {problem}" if problem else
                         f"{key}: got {found}; expected {expected}" if found else f"{key}: expected {expected}")


def placement_view(record: Mapping[str, Any], origin: str = "") -> PlacementView:
    """Read one resolution record: typed (:func:`view_record`), or in the recipes site's shape.

    :class:`RecordError` (a ValueError) naming the record's key when a part placement reads has the
    wrong type (an argv that is not a list of scalars, an env that is not a mapping ...) or a router or
    Mooncake command does not split into words: pinned records are untrusted input.
    ``origin``: the key of a pinned record as messages name it (``vllm_deployment[d].resolution_file
    (PATH) resolutions[0].resolution``): every launch and service then carries the keys of its parts
    (:class:`Origin`), so that a value refused later names where it was written.
    """
    if "engines" in record:
        return _typed(record, origin)
    docker = _mapping(record.get("docker"), "docker")
    meta = _mapping(docker.get("meta"), "docker.meta")
    image_key = "docker.image" if docker.get("image") else "docker.meta.image"
    image = _image(docker.get("image") or meta.get("image"), image_key)
    shape = shape_of(record)
    engines, router, mooncake = _READERS[shape](record, _mapping(docker.get("processes"), "docker.processes"),
                                                origin)
    return PlacementView(shape=shape, deploy_type=str(record.get("deployType")), image=image, docker_meta=meta,
                         engines=engines, router=router, mooncake=mooncake,
                         origin=_origin(origin, image=image_key, deploy_type="deployType"))


def _origin(prefix: str, command: bool = False, **keys: str) -> Optional[Origin]:
    """The :class:`Origin` of a part of a pinned record (None when the record is not pinned)."""
    if not prefix:
        return None
    return Origin(command=command, **{part: f"{prefix}.{key}" for part, key in keys.items() if key})


def _mapping(value: Any, key: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise RecordError(key, "a mapping", type(value).__name__)
    return value


def _image(value: Any, key: str) -> Optional[str]:
    if value is not None and not isinstance(value, str):
        raise RecordError(key, "an image reference", type(value).__name__)
    return value


def _port(value: Any, key: str) -> Optional[int]:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536):
        raise RecordError(key, "a port number (1-65535)", repr(value))
    return value


def _list(value: Any, key: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise RecordError(key, "a list", type(value).__name__)
    return value


def _argv(value: Any, key: str) -> tuple[str, ...]:
    words = _list(value, key)
    if not all(isinstance(word, (str, int, float)) and not isinstance(word, bool) for word in words):
        raise RecordError(key, "a list of strings (one argv word each)")
    return tuple(str(word) for word in words)


def _docker_argv(entry: Any, key: str) -> Optional[tuple[str, ...]]:
    return _argv(_mapping(entry, key).get("argv"), f"{key}.argv") if entry is not None else None


def _launches(argvs: list[Any], env: Any, docker: list[Any], keys: tuple[str, str, str],
              origin: str, indexed: bool = True) -> tuple[Launch, ...]:
    """A launch per argv, each with the docker entry of the same index (None past the list's end).

    ``keys``: the record's keys of the argvs, the env and the docker entries; ``indexed``: the argvs
    are a list of argv lists (``workerArgvs``), else one argv (``headArgv``).
    """
    key, env_key, docker_key = keys
    env = _mapping(env, env_key)
    out = []
    for i, argv in enumerate(argvs):
        argv_key = f"{key}[{i}]" if indexed else key
        docker_at = f"{docker_key}[{i}]" if indexed else docker_key
        out.append(Launch(_argv(argv, argv_key), env,
                          _docker_argv(docker[i], docker_at) if i < len(docker) else None,
                          _origin(origin, argv=argv_key, env=env_key, docker=f"{docker_at}.argv")))
    return tuple(out)


def _service(section: Any, key: str, origin: str, config: Optional[Mapping[str, Any]] = None) -> Optional[Service]:
    """A service from a ``{command, port?, config?}`` section; None without a command."""
    section = _mapping(section, key)
    command = section.get("command")
    if not command:
        return None
    if not isinstance(command, str):
        raise RecordError(f"{key}.command", "a shell command", type(command).__name__)
    try:
        argv = tuple(shell_words(command))
    except ValueError as exc:
        raise RecordError(f"{key}.command", "a shell command with balanced quotes", found=str(exc),
                          problem=f"{exc} (a shell command with balanced quotes)") from None
    own = _mapping(section.get("config"), f"{key}.config")
    return Service(argv=argv, port=_port(section.get("port"), f"{key}.port"),
                   config=config if config is not None else own,
                   origin=_origin(origin, command=True, argv=f"{key}.command", port=f"{key}.port"))


def _single(record: Mapping[str, Any], docker: Mapping[str, Any], origin: str) -> View:
    if "argv" not in record:
        return {}, None, None
    return {"single": _launches([record["argv"]], record.get("env"), [docker.get("single")],
                                ("argv", "env", "docker.processes.single"), origin, indexed=False)}, None, None


def _multi(record: Mapping[str, Any], docker: Mapping[str, Any], origin: str) -> View:
    env = record.get("env")
    return {"head": _launches([record["headArgv"]], env, [docker.get("head")],
                              ("headArgv", "env", "docker.processes.head"), origin, indexed=False),
            "workers": _launches(_list(record.get("workerArgvs"), "workerArgvs"), env,
                                 _list(docker.get("workers"), "docker.processes.workers"),
                                 ("workerArgvs", "env", "docker.processes.workers"), origin)}, None, None


def _pd(record: Mapping[str, Any], docker: Mapping[str, Any], origin: str) -> View:
    engines = {}
    for role in PD_ROLES:
        part = _mapping(record.get(role), role)
        if "argv" in part:
            engines[role] = _launches([part["argv"]], part.get("env"), [docker.get(role)],
                                      (f"{role}.argv", f"{role}.env", f"docker.processes.{role}"), origin,
                                      indexed=False)
    mooncake = None
    if record.get("mooncake"):
        section = _mapping(record["mooncake"], "mooncake")
        mooncake = MooncakeView(master=_service(section.get("master"), "mooncake.master", origin),
                                store=_service(section.get("store"), "mooncake.store", origin),
                                config=_mapping(section.get("config") or section.get("mooncakeConfig"),
                                                "mooncake.config"))
    router = _service(record.get("router"), "router", origin, _mapping(record.get("routerConfig"), "routerConfig"))
    return engines, router, mooncake


def _kv(record: Mapping[str, Any], docker: Mapping[str, Any], origin: str) -> View:
    vllm = _mapping(record.get("vllm"), "vllm")
    engines = {}
    if "argv" in vllm:
        engines["vllm"] = _launches([vllm["argv"]], vllm.get("env"), [docker.get("vllm")],
                                    ("vllm.argv", "vllm.env", "docker.processes.vllm"), origin, indexed=False)
        engines["vllm_workers"] = _launches(_list(vllm.get("workerArgvs"), "vllm.workerArgvs"), vllm.get("env"),
                                            _list(docker.get("vllm_workers"), "docker.processes.vllm_workers"),
                                            ("vllm.workerArgvs", "vllm.env", "docker.processes.vllm_workers"),
                                            origin)
    router = _mapping(record.get("router"), "router")
    # the router's own keys (its port) are its configuration, as the site prints them
    router_config = {k: v for k, v in router.items() if k not in ("command", "install")}
    mooncake = MooncakeView(master=_service(record.get("master"), "master", origin),
                            store=_service(record.get("store"), "store", origin),
                            config=_mapping(record.get("mooncakeConfig"), "mooncakeConfig"))
    return engines, _service(router, "router", origin, router_config), mooncake


def _typed(record: Mapping[str, Any], origin: str) -> PlacementView:
    shape = record.get("shape")
    if not isinstance(shape, str) or shape not in _READERS:
        raise RecordError("shape", f"one of {', '.join(sorted(_READERS))}", repr(shape))
    image = _image(record.get("image"), "image")
    engines = {}
    for key, launches in _mapping(record.get("engines"), "engines").items():
        engines[str(key)] = tuple(_typed_launch(item, f"engines.{key}[{i}]", origin)
                                  for i, item in enumerate(_list(launches, f"engines.{key}")))
    mooncake = None
    if record.get("mooncake") is not None:
        section = _mapping(record["mooncake"], "mooncake")
        mooncake = MooncakeView(master=_typed_service(section.get("master"), "mooncake.master", origin),
                                store=_typed_service(section.get("store"), "mooncake.store", origin),
                                config=_mapping(section.get("config"), "mooncake.config"))
    return PlacementView(shape=str(shape), deploy_type=str(record.get("deploy_type")), image=image,
                         docker_meta=_mapping(record.get("docker_meta"), "docker_meta"), engines=engines,
                         router=_typed_service(record.get("router"), "router", origin), mooncake=mooncake,
                         origin=_origin(origin, image="image", deploy_type="deploy_type"))


def _typed_launch(item: Any, key: str, origin: str) -> Launch:
    if not isinstance(item, Mapping):
        raise RecordError(key, "a mapping with argv, env and docker_argv", type(item).__name__)
    docker = item.get("docker_argv")
    return Launch(argv=_argv(item.get("argv"), f"{key}.argv"), env=_mapping(item.get("env"), f"{key}.env"),
                  docker_argv=None if docker is None else _argv(docker, f"{key}.docker_argv"),
                  origin=_origin(origin, argv=f"{key}.argv", env=f"{key}.env", docker=f"{key}.docker_argv"))


def _typed_service(section: Any, key: str, origin: str) -> Optional[Service]:
    if section is None:
        return None
    section = _mapping(section, key)
    return Service(argv=_argv(section.get("argv"), f"{key}.argv"), port=_port(section.get("port"), f"{key}.port"),
                   config=_mapping(section.get("config"), f"{key}.config"),
                   origin=_origin(origin, argv=f"{key}.argv", port=f"{key}.port"))


_READERS = {"single_node": _single, "multi_node": _multi, "pd_cluster": _pd, "kv_store_lb": _kv}
