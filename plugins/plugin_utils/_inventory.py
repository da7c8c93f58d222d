# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Deployment declarations and per-host settings read from an Ansible inventory.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

Two inputs are modelled here, both plain data (no Ansible objects):

* ``vllm_deployment``: a mapping set on an inventory group (or an item of the
  ``vllm_deployments`` list, which lets one host carry several deployments).
  It says which recipe to run and how (:class:`DeploymentSpec`).
* per-host variables (``vllm_fabric_address``, ``vllm_pd_role``,
  ``vllm_node_rank``, ``vllm_gpu_count`` ...), normalised into
  :class:`HostSpec` by :func:`host_spec`.

:func:`collect_deployments` turns ``hostvars`` + ``groups`` into the list of
declared deployments with their member hosts. Every failure raises
:class:`InventoryError` naming the variable, the value and the fix.

The models of ``vllm_deployment`` live in ``_deployment_spec``, the hostile-input
checks and secret redaction in ``_inventory_checks``. ``DeploymentSpec``,
``InventoryError`` and ``is_secret_env`` are listed here too, for ``_placement``.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from pydantic import ValidationError

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _unitfile as U
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._deployment_spec import (
    NAME_RE,
    NOT_A_BOOLEAN,
    PLACEHOLDER_NAME_RE,
    DeploymentSpec,
    read_integer,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._inventory_checks import (
    InventoryError,
    check_address,
    check_deployment_strings,
    check_host_name,
    check_vaulted,
    is_ip,
    is_secret_env,
    redact,
    refuse_vaulted_host_vars,
    shown_secret,
)

__all__ = [
    "NAME_RE",
    "DeclaredDeployment",
    "DeploymentSpec",
    "HostSpec",
    "InventoryError",
    "collect_deployments",
    "host_spec",
    "is_secret_env",
    "parse_deployment",
]

_IFACE_RE = re.compile(r"\A[A-Za-z0-9_.:@-]{1,15}\Z")
PD_ROLES = ("prefill", "decode", "router")
MOONCAKE_ROLES = ("master", "store")


# --------------------------------------------------------------------------------------
# Hosts
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class HostSpec:
    """Per-host settings that placement needs, normalised from hostvars."""

    name: str
    #: Routable address for cluster traffic (``None`` when nothing provides one).
    address: Optional[str]
    #: Where ``address`` came from, for messages (``vllm_fabric_address``, ``ansible_host`` ...).
    address_source: str
    interface: Optional[str]
    pd_roles: tuple[str, ...] = ()
    mooncake_roles: tuple[str, ...] = ()
    node_rank: Optional[int] = None
    gpus: Optional[tuple[int, ...]] = None
    deployment_gpus: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    rdma_devices: Optional[str] = None
    ib_hca: Optional[str] = None
    mooncake_device: str = ""
    placeholders: Mapping[str, str] = field(default_factory=dict)


def _as_roles(host: str, var: str, value: Any, allowed: Sequence[str]) -> tuple[str, ...]:
    if value is None or value == "" or value == []:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(i, str) for i in items):
        raise InventoryError(f"hostvars[{host!r}].{var}", value=value,
                             expected=f"one of {', '.join(allowed)} (or a list of them)",
                             fix=f"set {var} on {host} to one of: {', '.join(allowed)}")
    for item in items:
        if item not in allowed:
            raise InventoryError(f"hostvars[{host!r}].{var}", value=item,
                                 expected=f"one of {', '.join(allowed)}",
                                 fix=f"set {var} on {host} to one of: {', '.join(allowed)}")
    return tuple(dict.fromkeys(items))


def _host_integer(host: str, var: str, value: Any, *, expected: str, fix: str,
                  most: Optional[int] = None) -> int:
    """A host variable holding a count or index (the shared number reader: never a boolean)."""
    number = None if isinstance(value, float) else read_integer(value)
    if number is None or number < 0 or (most is not None and number > most):
        raise InventoryError(f"hostvars[{host!r}].{var}", value=value,
                             expected=expected + (f" ({NOT_A_BOOLEAN})" if isinstance(value, bool) else ""),
                             fix=fix)
    return number


def _as_gpu_list(host: str, var: str, value: Any) -> tuple[int, ...]:
    items: Any = value
    for item in [value] if isinstance(value, str) else value if isinstance(value, (list, tuple)) else ():
        if isinstance(item, str):  # refused before blanks are trimmed: "1\n" is not silently 1
            U.check_text(f"hostvars[{host!r}].{var}", item)
    if isinstance(value, str):
        items = [p.strip() for p in value.split(",") if p.strip()]
    if not isinstance(items, (list, tuple)) or not items:
        raise InventoryError(f"hostvars[{host!r}].{var}", value=value,
                             expected="a non-empty list of device indexes, e.g. [0, 1, 2, 3]",
                             fix=f"list the accelerator indexes of {host}, e.g. {var}: [0, 1, 2, 3]")
    out = []
    for item in items:
        number = read_integer(item.strip() if isinstance(item, str) else item)
        if number is None or number < 0 or isinstance(item, float):
            raise InventoryError(f"hostvars[{host!r}].{var}", value=value,
                                 expected="device indexes (integers >= 0)",
                                 fix=f"use plain indexes such as [0, 1] in {var} on {host}")
        out.append(number)
    if len(set(out)) != len(out):
        raise InventoryError(f"hostvars[{host!r}].{var}", value=value,
                             expected="each device index once",
                             fix=f"remove the duplicate indexes from {var} on {host}")
    return tuple(out)


def _opt_str(host: str, var: str, value: Any) -> Optional[str]:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InventoryError(f"hostvars[{host!r}].{var}", value=value, expected="a string",
                             fix=f"quote the value of {var} on {host}")
    # control characters are refused before blanks are trimmed: "x\n" is not silently "x"
    U.check_text(f"hostvars[{host!r}].{var}", value)
    return value.strip()


def host_spec(name: str, hostvars: Mapping[str, Any]) -> HostSpec:
    """Normalise one host's variables (no facts needed; facts are used when cached)."""
    check_host_name(name)
    refuse_vaulted_host_vars(name, hostvars, "vllm_fabric_address" if hostvars.get("vllm_fabric_address")
                             else "ansible_host")
    facts = hostvars.get("ansible_facts") if isinstance(hostvars.get("ansible_facts"), Mapping) else {}
    default_v4 = hostvars.get("ansible_default_ipv4") or (facts or {}).get("default_ipv4") or {}
    if not isinstance(default_v4, Mapping):
        default_v4 = {}

    address: Optional[str] = None
    source = ""
    explicit = _opt_str(name, "vllm_fabric_address", hostvars.get("vllm_fabric_address"))
    if explicit is not None:
        if not is_ip(explicit):
            raise InventoryError(f"hostvars[{name!r}].vllm_fabric_address", value=explicit,
                                 expected="an IPv4 or IPv6 address",
                                 fix=f"set vllm_fabric_address on {name} to the node's cluster-network IP")
        address, source = check_address(name, "vllm_fabric_address", explicit), "vllm_fabric_address"
    else:
        ansible_host = hostvars.get("ansible_host")
        if isinstance(ansible_host, str):  # refused, not trimmed: "10.0.0.1\n" is not silently 10.0.0.1
            U.check_text(f"hostvars[{name!r}].ansible_host", ansible_host, max_bytes=1024,
                         what="an address or host name")
        if isinstance(ansible_host, str) and is_ip(ansible_host.strip()):
            address, source = check_address(name, "ansible_host", ansible_host.strip()), "ansible_host"
        elif isinstance(default_v4.get("address"), str) and is_ip(default_v4["address"]):
            address = check_address(name, "ansible_default_ipv4.address", default_v4["address"])
            source = "ansible_default_ipv4.address"
        elif isinstance(ansible_host, str) and ansible_host.strip():
            source = f"ansible_host={ansible_host.strip()!r} (a name, not an IP)"

    iface = _opt_str(name, "vllm_fabric_interface", hostvars.get("vllm_fabric_interface"))
    if iface is None:
        fact_iface = default_v4.get("interface")
        iface = fact_iface if isinstance(fact_iface, str) and fact_iface else None
    if iface is not None and (not _IFACE_RE.match(iface) or iface.startswith("^") or "," in iface):
        raise InventoryError(f"hostvars[{name!r}].vllm_fabric_interface", value=iface,
                             expected="one concrete interface name such as 'ens5' "
                                      "(Gloo rejects NCCL's '^lo,docker' exclusion lists)",
                             fix=f"set vllm_fabric_interface on {name} to a single NIC name")

    node_rank = hostvars.get("vllm_node_rank")
    if node_rank is not None:
        node_rank = _host_integer(name, "vllm_node_rank", node_rank, expected="an integer >= 0 (0 is the head)",
                                  fix=f"set vllm_node_rank on {name} to 0, 1, 2 ...")

    gpus: Optional[tuple[int, ...]] = None
    if hostvars.get("vllm_gpus") not in (None, "", []):
        gpus = _as_gpu_list(name, "vllm_gpus", hostvars["vllm_gpus"])
    count = hostvars.get("vllm_gpu_count")
    if count is not None:
        count = _host_integer(name, "vllm_gpu_count", count, expected="an integer between 0 and 1024",
                              fix=f"set vllm_gpu_count on {name} to its accelerator count", most=1024)
        if gpus is not None and len(gpus) != count:
            raise InventoryError(f"hostvars[{name!r}].vllm_gpu_count", value=count,
                                 expected=f"{len(gpus)} (the length of vllm_gpus {list(gpus)})",
                                 fix=f"set only one of vllm_gpus / vllm_gpu_count on {name}")
        if gpus is None:
            gpus = tuple(range(count))

    dep_gpus_raw = hostvars.get("vllm_deployment_gpus") or {}
    if not isinstance(dep_gpus_raw, Mapping):
        raise InventoryError(f"hostvars[{name!r}].vllm_deployment_gpus", value=dep_gpus_raw,
                             expected="a mapping of deployment name to device indexes",
                             fix=f"write vllm_deployment_gpus on {name} as {{deployment: [0, 1]}}")
    dep_gpus = {str(k): _as_gpu_list(name, f"vllm_deployment_gpus.{k}", v)
                for k, v in dep_gpus_raw.items()}

    placeholders_raw = hostvars.get("vllm_placeholders") or {}
    if not isinstance(placeholders_raw, Mapping) or not all(
            isinstance(k, str) and PLACEHOLDER_NAME_RE.match(k) for k in placeholders_raw):
        raise InventoryError(f"hostvars[{name!r}].vllm_placeholders", value=placeholders_raw,
                             expected="a mapping of upper-case placeholder names (no '$') to values",
                             fix=f"write vllm_placeholders on {name} as {{IB_IF: mlx5_0}}")

    texts = {var: _opt_str(name, var, hostvars.get(var))
             for var in ("vllm_rdma_devices", "vllm_ib_hca", "vllm_mooncake_device")}
    for var, text in texts.items():
        if text is not None:
            U.check_env_value(f"hostvars[{name!r}].{var}", text)
    for key, value in placeholders_raw.items():
        U.check_text(f"hostvars[{name!r}].vllm_placeholders.{key}", str(value))
    for dep in dep_gpus:
        U.check_text(f"hostvars[{name!r}].vllm_deployment_gpus", dep)

    return HostSpec(
        name=name,
        address=address,
        address_source=source,
        interface=iface,
        pd_roles=_as_roles(name, "vllm_pd_role", hostvars.get("vllm_pd_role"), PD_ROLES),
        mooncake_roles=_as_roles(name, "vllm_mooncake_role", hostvars.get("vllm_mooncake_role"),
                                 MOONCAKE_ROLES),
        node_rank=node_rank,
        gpus=gpus,
        deployment_gpus=dep_gpus,
        rdma_devices=texts["vllm_rdma_devices"],
        ib_hca=texts["vllm_ib_hca"],
        mooncake_device=texts["vllm_mooncake_device"] or "",
        placeholders={str(k): str(v) for k, v in placeholders_raw.items()},
    )


# --------------------------------------------------------------------------------------
# Deployments from hostvars + groups
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class DeclaredDeployment:
    """A validated deployment declaration bound to its inventory group."""

    name: str
    group: str
    spec: DeploymentSpec
    #: Member hosts in inventory order.
    hosts: tuple[str, ...]
    #: Where it was declared, for messages.
    source: str


def _did_you_mean(loc: Sequence[Any]) -> str:
    """`` (did you mean 'strategy'?)`` for a mistyped key of ``vllm_deployment``, else ``''``."""
    model: Any = DeploymentSpec
    for part in loc[:-1]:
        field_info = getattr(model, "model_fields", {}).get(part)
        model = getattr(field_info, "annotation", None)
    known = list(getattr(model, "model_fields", {}))
    close = difflib.get_close_matches(str(loc[-1]), known, n=1) if loc and known else []
    return f" (did you mean {close[0]!r}?)" if close else ""


def _pydantic_error(exc: ValidationError, prefix: str, source: str) -> InventoryError:
    """The first problem pydantic found, at the key the user wrote; values shown through :func:`redact`."""
    err = exc.errors(include_url=False)[0]
    loc = ".".join(str(part) for part in err.get("loc", ()) if part != "__root__")
    key = f"{prefix}.{loc}" if loc else prefix
    value = redact(err.get("input"))
    if loc.endswith(("api_key", "token")) or is_secret_env(loc.rsplit(".", 1)[-1]):
        value = shown_secret(err.get("input"))
    msg = str(err.get("msg", "invalid value"))
    if err.get("type") == "extra_forbidden":  # a mistyped key's value may be a secret: a fingerprint only
        return InventoryError(key, value=shown_secret(err.get("input")), expected="a known vllm_deployment key",
                              fix=f"remove or rename {loc!r}{_did_you_mean(err.get('loc', ()))} "
                                  "(see docs/plan.md for the keys)",
                              source=source)
    if err.get("type") == "missing":
        return InventoryError(key, expected="a value", has_value=False,
                              fix=f"add {loc!r} to {prefix}", source=source)
    msg = msg.removeprefix("Value error, ")
    for prefix, replacement in (("must be ", ""), ("must match ", "a value matching ")):
        if msg.startswith(prefix):
            msg = replacement + msg[len(prefix):]
    return InventoryError(key, value=value, expected=msg, fix=f"correct {key}", source=source)


def parse_deployment(raw: Any, where: str, source: str = "") -> DeploymentSpec:
    """Validate one ``vllm_deployment`` mapping."""
    if not isinstance(raw, Mapping):
        raise InventoryError(where, value=raw, expected="a mapping with at least 'recipe'",
                             fix="define vllm_deployment as a YAML mapping", source=source)
    try:
        spec = DeploymentSpec.model_validate(dict(raw))
    except ValidationError as exc:
        raise _pydantic_error(exc, where, source) from None
    spec._vault_env = check_vaulted(raw, where)  # pylint: disable=protected-access  # set once, here
    check_deployment_strings(spec, where)
    return spec


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return repr(value) if not isinstance(value, (str, int, float, bool, type(None))) else value


def _group_hosts(groups: Mapping[str, Sequence[str]], name: str) -> tuple[str, ...]:
    return tuple(groups.get(name) or ())


def collect_deployments(hostvars: Mapping[str, Mapping[str, Any]],
                        groups: Mapping[str, Sequence[str]],
                        deployments_list: Optional[Sequence[Any]] = None,
                        group_declarations: Optional[Mapping[str, Any]] = None) -> list[DeclaredDeployment]:
    """Find every declared deployment.

    * ``vllm_deployment`` on a group: every member host sees the same mapping.
      The deployment's group is ``vllm_deployment.group`` when given, else the
      one inventory group whose members are exactly the hosts that share that
      mapping. Its name defaults to the group name.
    * ``vllm_deployments``: a list of mappings, each with ``group`` (and
      optionally ``name``), typically in ``group_vars/all``; use it when one
      host carries several deployments.

    ``group_declarations`` (group -> the ``vllm_deployment`` set in that group's own vars,
    templated), when the caller can see group vars: a declaration that no host ends up
    carrying (each of its hosts is in another group whose ``vllm_deployment`` wins) is
    refused instead of silently dropped.
    """
    found: dict[str, DeclaredDeployment] = {}
    ignore = {"all", "ungrouped"}

    def add(spec: DeploymentSpec, group: str, where: str) -> None:
        if group not in groups:
            raise InventoryError(f"{where}.group", value=group, expected="an inventory group",
                                 fix=f"create group {group!r} or point 'group' at an existing one")
        hosts = _group_hosts(groups, group)
        if not hosts:
            raise InventoryError(f"{where}.group", value=group,
                                 expected="a group with at least one host",
                                 fix=f"add hosts to group {group!r}")
        name = spec.name or group
        if not NAME_RE.match(name):
            raise InventoryError(f"{where}.name", value=name,
                                 expected=f"a name matching {NAME_RE.pattern}",
                                 fix="set vllm_deployment.name to letters, digits, '-', '_' or '.'")
        previous = found.get(name)
        if previous is not None:
            if previous.group == group and previous.spec == spec:
                return
            raise InventoryError(f"{where}.name", value=name,
                                 expected="a deployment name used once in the fleet",
                                 fix=f"rename one of the deployments declared on groups "
                                     f"{previous.group!r} and {group!r}")
        found[name] = DeclaredDeployment(name=name, group=group, spec=spec, hosts=hosts, source=where)

    # 1. explicit list
    if deployments_list is not None:
        if not isinstance(deployments_list, (list, tuple)):
            raise InventoryError("vllm_deployments", value=deployments_list,
                                 expected="a list of deployment mappings",
                                 fix="write vllm_deployments as a YAML list")
        for index, item in enumerate(deployments_list):
            where = f"vllm_deployments[{index}]"
            spec = parse_deployment(item, where)
            if not spec.group:
                raise InventoryError(f"{where}.group", expected="the inventory group to deploy on",
                                     has_value=False, fix=f"add 'group: <name>' to {where}")
            add(spec, spec.group, where)

    # 2. per-group vllm_deployment, seen through hostvars
    by_decl: dict[Any, list[str]] = {}
    raw_of: dict[Any, Any] = {}
    for host in sorted(hostvars):
        raw = hostvars[host].get("vllm_deployment")
        if raw is None:
            continue
        key = _freeze(raw)
        by_decl.setdefault(key, []).append(host)
        raw_of.setdefault(key, (raw, host))
    for key in sorted(by_decl, key=lambda k: sorted(by_decl[k])):
        raw, first_host = raw_of[key]
        members = set(by_decl[key])
        where = f"hostvars[{first_host!r}].vllm_deployment"
        spec = parse_deployment(raw, where)
        group = spec.group
        if group is not None:
            where = f"group {group!r} vllm_deployment"
        if group is None:
            candidates = sorted(g for g, hs in groups.items()
                                if g not in ignore and set(hs) == members)
            if len(candidates) != 1:
                raise InventoryError(
                    where, value=sorted(members),
                    expected="vllm_deployment defined on exactly one inventory group",
                    fix=("set vllm_deployment.group (and name) explicitly; "
                         + ("no group has exactly these hosts" if not candidates
                            else f"groups {candidates} all match")),
                )
            group = candidates[0]
            where = f"group {group!r} vllm_deployment"
        add(spec, group, where)

    for group, raw in sorted((group_declarations or {}).items()):
        if group in ignore or raw is None or _freeze(raw) in by_decl:
            continue
        hosts = _group_hosts(groups, group)
        others = sorted({g for h in hosts for g, hs in groups.items()
                         if g not in ignore and g != group and h in hs})
        raise InventoryError(f"group {group!r} vllm_deployment", value=list(hosts),
                             expected="a deployment whose hosts carry it (a host variable holds one "
                                      f"vllm_deployment; these hosts also belong to {others}, whose "
                                      "vllm_deployment wins)",
                             fix="declare both with the vllm_deployments list (each item with name and "
                                 "group), or keep each host in one deployment group")

    return [found[name] for name in sorted(found)]
