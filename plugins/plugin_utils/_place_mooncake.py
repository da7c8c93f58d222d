# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Mooncake for the placers that use it (``pd_cluster``, ``kv_store_lb``): master, stores, configs.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._argv_tools import (
    fill_placeholders,
    find_placeholders,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._launch import MooncakeView, Service
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._placer_base import PlacerBase
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._placer_process import REPIN
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._plan_model import (
    ORDER_MOONCAKE_MASTER,
    ORDER_MOONCAKE_STORE,
    ConfigFile,
    PlacementError,
)


def place_mooncake(placer: PlacerBase, roles: Mapping[str, list[str]], mooncake: Optional[MooncakeView],
                   engine_hosts: Sequence[str]) -> list[tuple[str, str, str]]:
    """Place master/store, write configs; return the engine-side config mount."""
    master_hosts = roles["master"]
    if len(master_hosts) > 1:
        raise placer.error("mooncake", master_hosts, "one Mooncake master host",
                           "keep vllm_mooncake_role: master on one host")
    if master_hosts:
        master = master_hosts[0]
    elif roles["router"]:
        master = roles["router"][0]
    else:
        master = [h for h in placer.decl.hosts if h not in roles["store"]][0]
    placer.common["MOONCAKE_MASTER_IP"] = placer.address(master)
    base = f"{placer.spec.config_dir}/{placer.decl.name}"
    config_path = f"{base}/mooncake.json"
    store_path = f"{base}/mooncake-store.json"
    placer.common["MOONCAKE_CONFIG_PATH"] = config_path
    placer.common["MOONCAKE_STORE_CONFIG_PATH"] = store_path
    if mooncake is not None and mooncake.master is not None:
        _master(placer, master, mooncake.master)
    _stores(placer, roles, mooncake.store if mooncake is not None else None, store_path)
    if mooncake is not None and mooncake.config:
        _engine_configs(placer, roles, mooncake.config, engine_hosts, config_path)
    return [(config_path, config_path, "ro")]


def _master(placer: PlacerBase, host: str, master: Service) -> None:
    argv = list(master.argv)
    port = None
    for index, token in enumerate(argv):
        if token.startswith("-rpc_port="):
            value = token.split("=", 1)[1]
            if not value.isdigit() or not 0 < int(value) < 65536:
                key = master.origin.word(index) if master.origin is not None else f"{placer.where}.recipe"
                raise PlacementError(key, value=token, expected="-rpc_port=<a port number (1-65535)>",
                                     fix=REPIN if master.origin is not None else "fix the recipe's Mooncake master",
                                     source=placer.decl.source)
            port = int(value)
    placer.service_process(host=host, unit=placer.unit_name("mooncake-master"),
                           kind="mooncake_master", argv=argv, venv=placer.spec.mooncake.venv,
                           start_order=ORDER_MOONCAKE_MASTER, port=port,
                           port_purpose="mooncake-master-rpc", origin=master.origin)


def _stores(placer: PlacerBase, roles: Mapping[str, list[str]], store: Optional[Service], store_path: str) -> None:
    """A store per store host (centralized topology); none for the distributed one."""
    if store is not None:
        if not roles["store"]:
            raise placer.error("mooncake", None,
                               "at least one Mooncake store host (centralized topology)",
                               "set vllm_mooncake_role: store on a host with spare RAM, or add it "
                               f"to group {placer.decl.group}_mooncake_store")
        for host in roles["store"]:
            proc = placer.service_process(host=host, unit=placer.unit_name("mooncake-store"),
                                          kind="mooncake_store", argv=list(store.argv), venv=placer.spec.mooncake.venv,
                                          start_order=ORDER_MOONCAKE_STORE, origin=store.origin)
            cfg = fill_placeholders(dict(store.config), {
                **placer.mapping(host),
                "MOONCAKE_STORE_DEVICE_NAME": placer.hosts[host].mooncake_device})
            placer.check_filled(proc, cfg, "mooncake-store.json")
            placer.config_files.append(ConfigFile(host=host, deployment=placer.decl.name,
                                                  dest=store_path, name="mooncake-store.json",
                                                  content=cfg))
    elif roles["store"]:
        raise placer.error("mooncake", roles["store"],
                           "no store hosts for the distributed (embedded) topology",
                           "remove vllm_mooncake_role: store, or use kv_store_centralized_mooncake")


def _engine_configs(placer: PlacerBase, roles: Mapping[str, list[str]], config: Mapping[str, Any],
                    engine_hosts: Sequence[str], config_path: str) -> None:
    """The engine-side mooncake.json on every engine host (not on router/master-only/store hosts)."""
    for host in engine_hosts:
        if host in roles["router"] or (host in roles["master"] and host not in roles["prefill"]
                                       and host not in roles["decode"]) \
                or host in roles["store"]:
            continue
        cfg = fill_placeholders(dict(config), placer.mapping(host))
        left = find_placeholders(cfg)
        if left:
            raise placer.error("mooncake.config", "$" + left[0],
                               f"every placeholder filled on {host}",
                               f"set vllm_placeholders.{left[0]} on {host}")
        placer.config_files.append(ConfigFile(host=host, deployment=placer.decl.name,
                                              dest=config_path, name="mooncake.json",
                                              content=cfg))
