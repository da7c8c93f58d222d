# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""What every deploy-type placer shares: resolutions, host roles, ranks, addresses, placeholders.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._argv_tools import find_placeholders
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._errors import RecipeError
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._inventory import (
    DeclaredDeployment,
    HostSpec,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._launch import PlacementView
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._placement_view import (
    RecordError,
    placement_view,
    view_record,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._plan_model import (
    BoundEngine,
    ConfigFile,
    PlacementError,
    Process,
    deployment_error,
    engine_error,
    overrides_key,
)


class Resolutions:
    """The engine's resolutions of one deployment, asked once per distinct overrides and recorded."""

    def __init__(self, decl: DeclaredDeployment, engine: BoundEngine) -> None:
        self.decl = decl
        self.engine = engine
        self._cache: dict[str, PlacementView] = {}
        #: ``{"overrides", "resolution"}`` in the order they were first asked for (plan.json pins).
        self.records: list[dict[str, Any]] = []

    def resolve(self, overrides: Mapping[str, Any]) -> PlacementView:
        key = overrides_key(overrides)
        if key not in self._cache:
            try:
                result = self.engine.resolve(dict(overrides))
            except PlacementError:
                raise
            except RecipeError as exc:
                raise engine_error(self.decl, exc) from None
            self._cache[key] = self._view(result, overrides)
            self.records.append({"overrides": json.loads(key), "resolution": view_record(self._cache[key])})
        return self._cache[key]

    def _view(self, result: Any, overrides: Mapping[str, Any]) -> PlacementView:
        """The engine's view, or one read from a record (pinned, or in the recipes site's shape)."""
        if isinstance(result, PlacementView):
            return result
        if not isinstance(result, Mapping) or not ("deployType" in result or "engines" in result):
            raise deployment_error(self.decl, "recipe", self.decl.spec.recipe,
                                   "the engine to return a resolution with deployType",
                                   "check the recipe and selection")
        origin = self.engine.origin(dict(overrides)) if self.engine.origin is not None else ""
        try:
            return placement_view(result, origin)
        except RecordError as exc:
            if origin:  # a pinned record (resolution_file): named by its key in the file
                expected = f"{exc.expected} (got {exc.found})" if exc.found else exc.expected
                raise PlacementError(f"{origin}.{exc.key}", expected=expected, has_value=False,
                                     fix="re-render and pin the new plan.json", source=self.decl.source) from None
            raise deployment_error(self.decl, "recipe", self.decl.spec.recipe,
                                   f"a resolution placement can read ({exc})",
                                   "fix the recipe or strategy that produced it") from None


def _child_group(decl: DeclaredDeployment, groups: Mapping[str, Sequence[str]],
                 explicit: Optional[str], suffix: str) -> set[str]:
    name = explicit or f"{decl.group}_{suffix}"
    if explicit and explicit not in groups:
        raise deployment_error(decl, f"pd.{suffix}_group", explicit, "an existing inventory group",
                               f"create group {explicit!r} or remove pd.{suffix}_group")
    return set(groups.get(name) or ())


def host_roles(decl: DeclaredDeployment, hosts: Mapping[str, HostSpec],
               groups: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """Role -> hosts (inventory order) for PD/router/Mooncake roles."""
    order = list(decl.hosts)
    pd = decl.spec.pd
    sets = {
        "prefill": _child_group(decl, groups, pd.prefill_group, "prefill"),
        "decode": _child_group(decl, groups, pd.decode_group, "decode"),
        "router": _child_group(decl, groups, pd.router_group, "router"),
        "master": _child_group(decl, groups, None, "mooncake_master"),
        "store": _child_group(decl, groups, None, "mooncake_store"),
    }
    for host in order:
        spec = hosts[host]
        for role in spec.pd_roles:
            sets[role].add(host)
        for role in spec.mooncake_roles:
            sets[role].add(host)
    for role, members in sets.items():
        outside = sorted(members - set(order))
        if outside:
            raise deployment_error(decl, "group", decl.group, f"{role} hosts inside the deployment group",
                                   f"add {outside} to group {decl.group!r} or drop their {role} role")
    return {role: [h for h in order if h in members] for role, members in sets.items()}


def engine_hosts(decl: DeclaredDeployment, roles: Mapping[str, list[str]]) -> list[str]:
    """The hosts that run engines: all but router/Mooncake-only hosts (a prefill/decode host stays)."""
    role_only = set(roles["router"]) | set(roles["master"]) | set(roles["store"])
    return [h for h in decl.hosts if h not in role_only or h in roles["prefill"] or h in roles["decode"]]


def _sanitize(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "-", name)


class PlacerContext:
    """One deployment's inventory view and the processes and files placed so far."""

    def __init__(self, decl: DeclaredDeployment, engine: BoundEngine, hosts: Mapping[str, HostSpec],
                 groups: Mapping[str, Sequence[str]], resolutions: Resolutions) -> None:
        self.decl = decl
        self.spec = decl.spec
        self.engine = engine
        self.hosts = hosts
        self.groups = groups
        self.where = f"vllm_deployment[{decl.name}]"
        self.resolutions = resolutions
        self.processes: list[Process] = []
        self.config_files: list[ConfigFile] = []
        self.common: dict[str, str] = {}
        self.deploy_type = ""
        self.vendor = "nvidia"
        self.image: Optional[str] = None
        self.start_timeout = self.spec.unit.start_timeout
        self.endpoint: Optional[str] = None

    # -- errors and resolutions ---------------------------------------------------------
    def error(self, key: str, value: Any, expected: str, fix: str) -> PlacementError:
        return deployment_error(self.decl, key, value, expected, fix)

    def resolve(self, overrides: Mapping[str, Any]) -> PlacementView:
        return self.resolutions.resolve(overrides)

    # -- ranks ----------------------------------------------------------------------------
    def ranked(self, hosts: Sequence[str], what: str) -> list[str]:
        """Order hosts by ``vllm_node_rank`` where given, inventory order otherwise."""
        count = len(hosts)
        slots: list[Optional[str]] = [None] * count
        rest = []
        for host in hosts:
            rank = self.hosts[host].node_rank
            if rank is None:
                rest.append(host)
                continue
            if rank >= count:
                raise PlacementError(f"hostvars[{host!r}].vllm_node_rank", value=rank,
                                     expected=f"a rank below {count} ({what} has {count} hosts)",
                                     fix=f"use ranks 0..{count - 1} in {what}")
            if slots[rank] is not None:
                raise PlacementError(f"hostvars[{host!r}].vllm_node_rank", value=rank,
                                     expected=f"a rank used once in {what}",
                                     fix=f"{slots[rank]} and {host} both claim rank {rank}; renumber one")
            slots[rank] = host
        it = iter(rest)
        ordered = [slot if slot is not None else next(it) for slot in slots]
        self.distinct_addresses(ordered, what)
        return ordered

    def distinct_addresses(self, hosts: Sequence[str], what: str) -> None:
        """Ranks on different hosts must have different addresses (each rank binds its own)."""
        seen: dict[str, str] = {}
        for host in hosts:
            address = self.address(host)
            if address in seen and seen[address] != host:
                raise PlacementError(f"hostvars[{host!r}].{self.hosts[host].address_source or 'vllm_fabric_address'}",
                                     value=address,
                                     expected=f"an address of its own ({seen[address]} in {what} has it too)",
                                     fix=f"give {host} and {seen[address]} their own cluster-network "
                                         "addresses (vllm_fabric_address)")
            seen.setdefault(address, host)

    # -- placeholders ----------------------------------------------------------------
    def address(self, host: str) -> str:
        spec = self.hosts[host]
        if spec.address is None:
            src = f" ({spec.address_source})" if spec.address_source else ""
            raise PlacementError(f"hostvars[{host!r}].vllm_fabric_address", has_value=False,
                                 expected=f"a routable IP address for {host}{src}",
                                 fix=f"set vllm_fabric_address (or ansible_host) on {host} to its "
                                     "cluster-network IP, or render with cached facts")
        return spec.address

    def interface(self, host: str, why: str) -> str:
        iface = self.hosts[host].interface
        if iface is None:
            raise PlacementError(f"hostvars[{host!r}].vllm_fabric_interface", has_value=False,
                                 expected=f"one concrete interface name ({why})",
                                 fix=f"set vllm_fabric_interface on {host}, e.g. ens5")
        return iface

    def mapping(self, host: str) -> dict[str, str]:
        spec = self.hosts[host]
        out: dict[str, str] = {}
        out.update(self.spec.placeholders)
        out.update(spec.placeholders)
        out.update(self.common)
        if spec.interface is not None:
            out["IFACE_NAME"] = spec.interface
        if spec.ib_hca is not None:
            out["IB_IF"] = spec.ib_hca
        out["MOONCAKE_DEVICE_NAME"] = spec.mooncake_device
        return out

    def check_placeholders_used(self) -> None:
        """Refuse a ``placeholders`` entry the plan never reads: a typo (``HEAD_IPP``), or a name
        the plan fills itself (``HEAD_IP``), would otherwise be dropped silently."""
        given = self.spec.placeholders
        if not given:
            return
        used = set(find_placeholders([record["resolution"] for record in self.resolutions.records]))
        used.update(find_placeholders([self.spec.advanced_args, self.spec.container_args, dict(self.spec.extra_env),
                                       dict(given), [dict(h.placeholders) for h in self.hosts.values()]]))
        for name in given:
            if name in self.common:
                raise self.error(f"placeholders.{name}", None,
                                 f"a placeholder the plan does not fill itself (${name} is set from the "
                                 "inventory's hosts and ports)", f"remove placeholders.{name}")
            if name not in used:
                listed = ", ".join("$" + n for n in sorted(used)) or "none"
                raise self.error(f"placeholders.{name}", None,
                                 f"a placeholder the plan uses (it uses: {listed})",
                                 f"correct or remove placeholders.{name}")

    def check_filled(self, proc: Process, value: Any, what: str, written: str = "") -> None:
        """No ``$NAME`` left in ``value`` (the ``what`` of ``proc``); ``written``: the key of a pinned
        record (``resolution_file``) the value was read from, named with the placeholder to set."""
        left = find_placeholders(value)
        if not left:
            return
        name = left[0]
        fixes = {
            "IFACE_NAME": f"set vllm_fabric_interface on {proc.host} (one NIC name, e.g. ens5)",
            "IB_IF": f"set vllm_ib_hca on {proc.host} (e.g. mlx5_0) or "
                     "vllm_deployment.placeholders.IB_IF",
        }
        # the key named is the one to set, not the internal place the placeholder sits in
        keys = {"IFACE_NAME": f"hostvars[{proc.host!r}].vllm_fabric_interface",
                "IB_IF": f"hostvars[{proc.host!r}].vllm_ib_hca"}
        raise PlacementError(
            keys.get(name, f"{self.where}.placeholders.{name}"), value=f"${name}",
            expected=f"every placeholder filled on host {proc.host} (unresolved in the {what} of "
                     f"{proc.unit}" + (f", written at {written}" if written else "") + ": "
                     + ", ".join("$" + n for n in left) + ")",
            fix=fixes.get(name, f"set vllm_deployment.placeholders.{name} or host var "
                                f"vllm_placeholders.{name} on {proc.host}"),
            source=self.decl.source)

    def unit_name(self, suffix: str) -> str:
        base = f"vllm-{_sanitize(self.decl.name)}"
        return f"{base}-{suffix}" if suffix else base
