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

from typing import Any, Mapping, Optional

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._argv_tools import shell_words
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._engine_shapes import View, shape_of
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._gates import PD_ROLES
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._launch import (
    Launch,
    MooncakeView,
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


def placement_view(record: Mapping[str, Any]) -> PlacementView:
    """Read one resolution record: typed (:func:`view_record`), or in the recipes site's shape.

    ValueError naming the record's key when a part placement reads has the wrong type (an argv
    that is not a list of scalars, an env that is not a mapping ...) or a router or Mooncake
    command does not split into words: pinned records are untrusted input.
    """
    if "engines" in record:
        return _typed(record)
    docker = _mapping(record.get("docker"), "docker")
    meta = _mapping(docker.get("meta"), "docker.meta")
    image = _image(docker.get("image") or meta.get("image"), "docker.image")
    shape = shape_of(record)
    engines, router, mooncake = _READERS[shape](record, _mapping(docker.get("processes"), "docker.processes"))
    return PlacementView(shape=shape, deploy_type=str(record.get("deployType")), image=image, docker_meta=meta,
                         engines=engines, router=router, mooncake=mooncake)


def _mapping(value: Any, key: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{key}: got {type(value).__name__}; expected a mapping")
    return value


def _image(value: Any, key: str) -> Optional[str]:
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{key}: got {type(value).__name__}; expected an image reference")
    return value


def _port(value: Any, key: str) -> Optional[int]:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise ValueError(f"{key}: got {value!r}; expected a port number")
    return value


def _list(value: Any, key: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{key}: got {type(value).__name__}; expected a list")
    return value


def _argv(value: Any, key: str) -> tuple[str, ...]:
    words = _list(value, key)
    if not all(isinstance(word, (str, int, float)) and not isinstance(word, bool) for word in words):
        raise ValueError(f"{key}: expected a list of strings (one argv word each)")
    return tuple(str(word) for word in words)


def _docker_argv(entry: Any, key: str) -> Optional[tuple[str, ...]]:
    return _argv(_mapping(entry, key).get("argv"), f"{key}.argv") if entry is not None else None


def _launches(argvs: list[Any], env: Any, docker: list[Any], key: str, docker_key: str) -> tuple[Launch, ...]:
    """A launch per argv, each with the docker entry of the same index (None past the list's end)."""
    env = _mapping(env, f"{key}.env")
    return tuple(Launch(_argv(argv, f"{key}[{i}]"), env,
                        _docker_argv(docker[i], f"{docker_key}[{i}]") if i < len(docker) else None)
                 for i, argv in enumerate(argvs))


def _service(section: Any, key: str, config: Optional[Mapping[str, Any]] = None) -> Optional[Service]:
    """A service from a ``{command, port?, config?}`` section; None without a command."""
    section = _mapping(section, key)
    command = section.get("command")
    if not command:
        return None
    if not isinstance(command, str):
        raise ValueError(f"{key}.command: got {type(command).__name__}; expected a shell command")
    try:
        argv = tuple(shell_words(command))
    except ValueError as exc:
        raise ValueError(f"{key}.command: {exc} (a shell command with balanced quotes)") from None
    own = _mapping(section.get("config"), f"{key}.config")
    return Service(argv=argv, port=_port(section.get("port"), f"{key}.port"),
                   config=config if config is not None else own)


def _single(record: Mapping[str, Any], docker: Mapping[str, Any]) -> View:
    if "argv" not in record:
        return {}, None, None
    return {"single": _launches([record["argv"]], record.get("env"), [docker.get("single")], "argv",
                                "docker.processes.single")}, None, None


def _multi(record: Mapping[str, Any], docker: Mapping[str, Any]) -> View:
    env = record.get("env")
    return {"head": _launches([record["headArgv"]], env, [docker.get("head")], "headArgv", "docker.processes.head"),
            "workers": _launches(_list(record.get("workerArgvs"), "workerArgvs"), env,
                                 _list(docker.get("workers"), "docker.processes.workers"), "workerArgvs",
                                 "docker.processes.workers")}, None, None


def _pd(record: Mapping[str, Any], docker: Mapping[str, Any]) -> View:
    engines = {}
    for role in PD_ROLES:
        part = _mapping(record.get(role), role)
        if "argv" in part:
            engines[role] = _launches([part["argv"]], part.get("env"), [docker.get(role)], f"{role}.argv",
                                      f"docker.processes.{role}")
    mooncake = None
    if record.get("mooncake"):
        section = _mapping(record["mooncake"], "mooncake")
        mooncake = MooncakeView(master=_service(section.get("master"), "mooncake.master"),
                                store=_service(section.get("store"), "mooncake.store"),
                                config=_mapping(section.get("config") or section.get("mooncakeConfig"),
                                                "mooncake.config"))
    return engines, _service(record.get("router"), "router", _mapping(record.get("routerConfig"), "routerConfig")), \
        mooncake


def _kv(record: Mapping[str, Any], docker: Mapping[str, Any]) -> View:
    vllm = _mapping(record.get("vllm"), "vllm")
    engines = {}
    if "argv" in vllm:
        engines["vllm"] = _launches([vllm["argv"]], vllm.get("env"), [docker.get("vllm")], "vllm.argv",
                                    "docker.processes.vllm")
        engines["vllm_workers"] = _launches(_list(vllm.get("workerArgvs"), "vllm.workerArgvs"), vllm.get("env"),
                                            _list(docker.get("vllm_workers"), "docker.processes.vllm_workers"),
                                            "vllm.workerArgvs", "docker.processes.vllm_workers")
    router = _mapping(record.get("router"), "router")
    # the router's own keys (its port) are its configuration, as the site prints them
    router_config = {k: v for k, v in router.items() if k not in ("command", "install")}
    mooncake = MooncakeView(master=_service(record.get("master"), "master"),
                            store=_service(record.get("store"), "store"),
                            config=_mapping(record.get("mooncakeConfig"), "mooncakeConfig"))
    return engines, _service(router, "router", router_config), mooncake


def _typed(record: Mapping[str, Any]) -> PlacementView:
    shape = record.get("shape")
    if not isinstance(shape, str) or shape not in _READERS:
        raise ValueError(f"shape: got {shape!r}; expected one of {', '.join(sorted(_READERS))}")
    image = _image(record.get("image"), "image")
    engines = {}
    for key, launches in _mapping(record.get("engines"), "engines").items():
        engines[str(key)] = tuple(_typed_launch(item, f"engines.{key}[{i}]")
                                  for i, item in enumerate(_list(launches, f"engines.{key}")))
    mooncake = None
    if record.get("mooncake") is not None:
        section = _mapping(record["mooncake"], "mooncake")
        mooncake = MooncakeView(master=_typed_service(section.get("master"), "mooncake.master"),
                                store=_typed_service(section.get("store"), "mooncake.store"),
                                config=_mapping(section.get("config"), "mooncake.config"))
    return PlacementView(shape=str(shape), deploy_type=str(record.get("deploy_type")), image=image,
                         docker_meta=_mapping(record.get("docker_meta"), "docker_meta"), engines=engines,
                         router=_typed_service(record.get("router"), "router"), mooncake=mooncake)


def _typed_launch(item: Any, key: str) -> Launch:
    if not isinstance(item, Mapping):
        raise ValueError(f"{key}: got {type(item).__name__}; expected a mapping with argv, env and docker_argv")
    docker = item.get("docker_argv")
    return Launch(argv=_argv(item.get("argv"), f"{key}.argv"), env=_mapping(item.get("env"), f"{key}.env"),
                  docker_argv=None if docker is None else _argv(docker, f"{key}.docker_argv"))


def _typed_service(section: Any, key: str) -> Optional[Service]:
    if section is None:
        return None
    section = _mapping(section, key)
    return Service(argv=_argv(section.get("argv"), f"{key}.argv"), port=_port(section.get("port"), f"{key}.port"),
                   config=_mapping(section.get("config"), f"{key}.config"))


_READERS = {"single_node": _single, "multi_node": _multi, "pd_cluster": _pd, "kv_store_lb": _kv}
