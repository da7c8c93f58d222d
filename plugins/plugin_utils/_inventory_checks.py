# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Hostile-input checks and secret redaction for inventory values.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

Every string of a ``vllm_deployment`` or a host variable that reaches a unit,
env file, path, argv or log goes through a check here first. Failures raise
:class:`InventoryError` naming the variable, the value (secrets as a
fingerprint: :func:`redact`) and the fix.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import SecretStr

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _unitfile as U
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._deployment_spec import DeploymentSpec
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._errors import SelectionError, key_path
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._secret import (
    VaultValue,
    fingerprint,
    is_blank,
    shown_secret,
    vault_paths,
)

__all__ = [
    "IMAGE_REF_RE",
    "SECRET_ENV_RE",
    "SECRET_FLAG_RE",
    "InventoryError",
    "check_address",
    "check_deployment_strings",
    "check_host_name",
    "check_image",
    "check_vaulted",
    "is_ip",
    "is_secret_env",
    "redact",
    "refuse_vaulted_host_vars",
    "shown_secret",
]

#: Env names that hold secrets: they go to the secret file, and messages show a fingerprint.
SECRET_ENV_RE = re.compile(r"^(HF_TOKEN|VLLM_API_KEY|[A-Za-z0-9_]*_(TOKEN|KEY|PASSWORD|SECRET))$",
                           re.IGNORECASE)
#: argv flags whose value is a secret (``--api-key``, ``--hf-token``, ``--db-password`` ...).
SECRET_FLAG_RE = re.compile(r"^--(?:[a-z0-9]+-)*(?:token|key|password|secret)$")
#: A secret given as a placeholder the plan fills from the vault (``--api-key $API_KEY``).
_SECRET_PLACEHOLDERS = ("$API_KEY", "${API_KEY}")

# docker's reference grammar (github.com/distribution/reference, regexp.go).
_ALNUM = r"[a-z0-9]+"
_PATH_COMPONENT = rf"{_ALNUM}(?:(?:[._]|__|-+){_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
IMAGE_REF_RE = re.compile(
    rf"^(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
    r"(?::[\w][\w.-]{0,127})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$")
#: Host directories that must never be a read-write cache mount (``-v DIR:/root/.cache/...``).
_SYSTEM_DIRS = frozenset(("/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/opt",
                          "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var",
                          "/var/lib", "/var/run", "/var/log", "/var/cache"))
_SYSTEM_TREES = ("/proc/", "/sys/", "/dev/", "/run/", "/var/run/", "/etc/", "/boot/", "/usr/",
                 "/var/lib/docker", "/var/lib/containerd", "/bin/", "/sbin/", "/lib/", "/lib64/")
_REVISION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,254}$")
#: The keys of ``vllm_deployment`` written only to the 0600 secret env file: a Vault value may go there.
_SECRET_PLACES = (("api_key",), ("weights", "token"))
_VAULT_ACCEPTED = ("api_key, weights.token or extra_env: the places written only to the 0600 secret env "
                   "file")
#: extra_env names placement itself reads into units, ports and plan.json: never secret.
PLACEMENT_ENV = ("VLLM_ENGINE_READY_TIMEOUT_S", "VLLM_NIXL_SIDE_CHANNEL_PORT", "VLLM_PORT", "CUDA_VISIBLE_DEVICES")


class InventoryError(SelectionError):
    """An inventory variable is missing, malformed or inconsistent.

    The message always carries the variable (``key``), the value found and a
    ``fix:`` telling the operator what to change.
    """

    def __init__(self, key: str, *, value: Any = None, expected: str = "",
                 fix: str = "", source: str = "", has_value: bool = True) -> None:
        self.fix = fix
        kwargs: dict[str, Any] = {"expected": expected, "source": source,
                                  "reason": f"fix: {fix}" if fix else ""}
        if has_value:
            kwargs["value"] = value
        super().__init__(key, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_inventory_error,
                (type(self), self.key, self.value, self.expected, self.fix, self.source,
                 getattr(self, "has_value", True)))


def _rebuild_inventory_error(cls: type[InventoryError], key: str, value: Any, expected: str, fix: str,
                             source: str, has_value: bool) -> InventoryError:
    return cls(key, value=value, expected=expected, fix=fix, source=source, has_value=has_value)


# --------------------------------------------------------------------------------------
# Hostile input: every string that reaches a unit, env file, path, argv or log
# --------------------------------------------------------------------------------------

def is_secret_env(name: str) -> bool:
    """``HF_TOKEN``, ``VLLM_API_KEY`` and ``*_TOKEN`` / ``*_KEY`` / ``*_PASSWORD`` / ``*_SECRET``."""
    return bool(SECRET_ENV_RE.match(name))


def redact(value: Any) -> Any:
    """``value`` with every secret replaced by its fingerprint (for messages and logs).

    Secrets are ``SecretStr`` values, Vault values (:class:`VaultValue`, whatever their key),
    values under secret env names and the values of secret flags in argv lists.
    """
    if isinstance(value, SecretStr):
        return U.fingerprint(value.get_secret_value())
    if isinstance(value, VaultValue):
        return shown_secret(value)
    if isinstance(value, Mapping):
        return {k: (U.fingerprint(str(v)) if isinstance(k, str) and is_secret_env(k) and v is not None
                    else redact(v)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        out: list[Any] = []
        hide_next = False
        for item in value:
            text = item if isinstance(item, str) else ""
            flag, _eq, inline = text.partition("=")
            if hide_next and text not in _SECRET_PLACEHOLDERS:
                out.append(U.fingerprint(text or str(item)))
            elif _eq and ((SECRET_FLAG_RE.match(flag) and inline not in _SECRET_PLACEHOLDERS) or is_secret_env(flag)):
                out.append(f"{flag}={U.fingerprint(inline)}")
            else:
                out.append(redact(item))
            hide_next = bool(SECRET_FLAG_RE.match(text))
        return out
    return value


def is_ip(value: str) -> bool:
    """Whether ``value`` is an IPv4 or IPv6 address (a zone suffix allowed)."""
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def check_image(key: str, value: str) -> str:
    """A docker image reference (``[registry/]path[:tag][@digest]``), never a flag."""
    U.check_text(key, value, max_bytes=512, what="an image reference")
    if value.startswith("-") or not IMAGE_REF_RE.match(value) or len(value.split("@")[0]) > 255 + 129:
        raise InventoryError(key, value=value,
                             expected="a docker image reference such as 'vllm/vllm-openai:v0.11.0' "
                                      "or 'registry:5000/org/image@sha256:<hex>' (lower-case path, "
                                      "no whitespace, no leading '-')",
                             fix=f"set {key} to an image reference")
    return value


def check_host_name(name: str) -> str:
    """An inventory host name, used as a path component of the render directory."""
    shown = repr(name) if len(name) <= 80 else repr(name[:77]) + "..."
    key = f"inventory host name {shown}"
    U.check_name(key, name, max_bytes=253, what="a host name",
                 fix="rename the host in the inventory (letters, digits, '-', '_', '.')")
    if (not name or any(c in name for c in "/\\$`'\"") or ".." in name
            or name.startswith(("-", ".")) or any(c.isspace() for c in name)):
        raise InventoryError(key, value=name,
                             expected="a host name without '/', '\\', '..', '$', quotes, blanks or a "
                                      "leading '-' or '.' (it names a folder of the rendered plan)",
                             fix="rename the host in the inventory (unicode letters are fine)")
    return name


def check_address(host: str, var: str, value: str) -> str:
    """A node address other nodes can reach: not unspecified, multicast or zone-scoped."""
    key = f"hostvars[{host!r}].{var}"
    address = ipaddress.ip_address(value)
    if "%" in value:
        raise InventoryError(key, value=value,
                             expected="an address without a zone (a link-local fe80::/10 address "
                                      "with '%iface' is not reachable from other nodes)",
                             fix=f"set vllm_fabric_address on {host} to a routable address")
    if address.is_unspecified or address.is_multicast:
        raise InventoryError(key, value=value,
                             expected="the node's own unicast address (0.0.0.0, :: and multicast "
                                      "addresses name no node)",
                             fix=f"set vllm_fabric_address on {host} to its cluster-network IP")
    return value


def _check_args(key: str, args: Sequence[str], *, docker: bool) -> None:
    hide_next = False
    for index, arg in enumerate(args):
        item = f"{key}[{index}]"
        U.check_text(item, arg, secret=hide_next)
        if arg.startswith("--served-model-name=") or (index and args[index - 1] == "--served-model-name"):
            U.check_name(item, arg, what="a served model name")  # shown in plan.json, PLAN.md, metrics
        flag, eq, inline = arg.partition("=")
        if (hide_next and arg not in _SECRET_PLACEHOLDERS) or (
                eq and SECRET_FLAG_RE.match(flag) and inline not in _SECRET_PLACEHOLDERS):
            shown = U.fingerprint(inline if eq else arg)
            raise InventoryError(key, value=f"{flag if eq else args[index - 1]} {shown}",
                                 expected="no secret on the command line (argv is visible in `ps`, "
                                          "unit files and `docker inspect`)",
                                 fix="remove it and set vllm_deployment.api_key or weights.token "
                                     "(Ansible Vault), or put it in extra_env under a *_TOKEN / "
                                     "*_KEY name: both go to the 0600 secret file")
        hide_next = bool(SECRET_FLAG_RE.match(arg)) and not docker
        if docker:  # docker's env flags: `-e NAME=value`, `--env NAME=value`, `--env=NAME=value`, `-eNAME=v`
            previous = args[index - 1] if index else ""
            named = (arg if previous in ("-e", "--env") else arg[len("--env="):] if arg.startswith("--env=")
                     else arg[2:] if arg.startswith("-e") and arg != "-e" else "")
            name = named.partition("=")[0]
            if name and is_secret_env(name):
                raise InventoryError(f"{key}[{index}]", value=f"{name}=...",
                                     expected="no secret on the docker command line",
                                     fix=f"move {name} to vllm_deployment.extra_env (secret names go "
                                         "to the 0600 secret file)")


def check_deployment_strings(spec: DeploymentSpec, where: str) -> None:
    """Refuse any string of a ``vllm_deployment`` that cannot reach a file, path or argv unchanged."""
    for attr in ("name", "group", "recipe", "variant", "hardware", "strategy", "frontend",
                 "kv_offload", "resolution_file"):
        value = getattr(spec, attr)
        if value is not None:  # 1024 bytes: a path or URL, and short enough to quote in messages
            U.check_name(f"{where}.{attr}", value, max_bytes=1024, what="a single-line name")
    for index, feature in enumerate(spec.features or ()):
        U.check_text(f"{where}.features[{index}]", feature)
    for name, mode in spec.feature_modes.items():
        U.check_text(f"{where}.feature_modes.{name}", mode)
    _check_args(f"{where}.advanced_args", spec.advanced_args, docker=False)
    _check_args(f"{where}.container_args", spec.container_args, docker=True)
    for attr, value in (("config_dir", spec.config_dir), ("unit_dir", spec.unit_dir),
                        ("docker_binary", spec.docker_binary),
                        ("router.venv", spec.router.venv), ("mooncake.venv", spec.mooncake.venv)):
        U.check_path(f"{where}.{attr}", value)
    # The two host directories mounted read-write into the engine containers.
    for attr, cache, example in (("weights.cache_dir", spec.weights.cache_dir, "/data/huggingface"),
                                 ("compile_cache_dir", spec.compile_cache_dir, "/var/cache/vllm-fleet/compile")):
        if cache is None:
            continue
        U.check_path(f"{where}.{attr}", cache)
        if cache in _SYSTEM_DIRS or cache.startswith(_SYSTEM_TREES):
            raise InventoryError(f"{where}.{attr}", value=cache,
                                 expected="a directory of its own: it is mounted read-write into the "
                                          "container (a system directory or the docker socket's would "
                                          "hand the container the host)",
                                 fix=f"use a dedicated directory such as {example}")
    for attr, image in (("image", spec.image), ("router.image", spec.router.image)):
        if image is not None:
            check_image(f"{where}.{attr}", image)
    revision = spec.weights.revision
    if revision is not None and (not _REVISION_RE.match(revision) or ".." in revision):
        raise InventoryError(f"{where}.weights.revision", value=revision,
                             expected="a branch, tag or commit of letters, digits and '._/-' "
                                      "without '..'", fix=f"correct {where}.weights.revision")
    source = spec.weights.source
    if spec.weights.mode == "import":
        if source is None:
            raise InventoryError(f"{where}.weights.source", value=None,
                                 expected="the absolute path, on the origin host, of the pre-staged "
                                          "model directory or tar archive (weights.mode: import)",
                                 fix=f"set {where}.weights.source, e.g. /srv/models/Qwen3-0.6B")
        U.check_path(f"{where}.weights.source", source)
    elif source is not None:
        raise InventoryError(f"{where}.weights.source", value=source,
                             expected="no source unless weights.mode is import "
                                      f"(mode is {spec.weights.mode})",
                             fix=f"set {where}.weights.mode: import, or remove weights.source")
    endpoint = spec.weights.endpoint
    if endpoint is not None:
        U.check_env_value(f"{where}.weights.endpoint", endpoint)
        if not re.match(r"^https?://[^\s/]+", endpoint):
            raise InventoryError(f"{where}.weights.endpoint", value=endpoint,
                                 expected="an http(s):// URL", fix=f"correct {where}.weights.endpoint")
    if not is_ip(spec.router.bind_address) or "%" in spec.router.bind_address:
        raise InventoryError(f"{where}.router.bind_address", value=spec.router.bind_address,
                             expected="an IP address to bind (0.0.0.0 or :: for every address)",
                             fix=f"correct {where}.router.bind_address")
    for attr, secret in (("api_key", spec.api_key), ("weights.token", spec.weights.token)):
        if secret is not None:
            _check_secret(f"{where}.{attr}", secret.get_secret_value())
    for name, value in spec.extra_env.items():
        if is_secret_env(name) or name in spec.vault_env:
            _check_secret(f"{where}.extra_env.{name}", value)
        else:
            U.check_env_value(f"{where}.extra_env.{name}", value, fix=f"simplify the value of {name}")
    for name, value in spec.placeholders.items():
        U.check_text(f"{where}.placeholders.{name}", value)


def _check_secret(key: str, value: str) -> None:
    """A secret: one line, and not empty (an empty Vault value or an unset lookup protects nothing)."""
    if is_blank(value):
        raise InventoryError(key, value=fingerprint(value),
                             expected="a non-empty secret (this one is empty or blank: an empty Vault value "
                                      "or a lookup of something unset)",
                             fix=f"give {key} its value (Ansible Vault), or remove the key")
    U.check_text(key, value, secret=True)


def check_vaulted(raw: Mapping[str, Any], where: str) -> frozenset[str]:
    """Route the Vault values of one ``vllm_deployment``: a Vault value is a secret whatever its key.

    Returns the ``extra_env`` names that hold one (they go to the 0600 secret env file, like
    ``*_TOKEN``). A Vault value anywhere else (argv, a name, a path, a placeholder, an image ...)
    would reach a unit, ``plan.json`` or ``PLAN.md``: it is refused by its key, shown as a fingerprint.
    """
    names: set[str] = set()
    for path, value in vault_paths(raw):
        key = f"{where}.{key_path(path)}"
        in_env = len(path) == 2 and path[0] == "extra_env" and path[1] not in PLACEMENT_ENV
        if path not in _SECRET_PLACES and not in_env:
            read = (f"placement reads {path[1]} into the unit and plan.json" if path[0] == "extra_env"
                    else f"{key_path(path)} reaches argv, units, paths or plan.json, which are not secret")
            fix = (f"write {key} in clear text: placement needs its value" if path[0] == "extra_env"
                   else f"write {key} in clear text; a secret belongs in api_key, weights.token or extra_env")
            raise InventoryError(key, value=shown_secret(value),
                                 expected=f"no Vault value here ({read}); a Vault value may go in {_VAULT_ACCEPTED}",
                                 fix=fix)
        _check_secret(key, value)
        if in_env:
            names.add(str(path[1]))
    return frozenset(names)


def refuse_vaulted_host_vars(host: str, hostvars: Mapping[str, Any], address_var: str) -> None:
    """Host variables hold addresses, interfaces, roles, indexes and placeholders: none is secret.

    ``ansible_host`` is refused only when it is the host's address (``address_var``) in the plan.
    """
    for var in sorted(hostvars):
        if var in ("vllm_deployment", "ansible_facts", "ansible_default_ipv4"):
            continue
        if var == "ansible_host" and address_var != "ansible_host":
            continue
        for path, value in vault_paths(hostvars[var], (var,)):
            raise InventoryError(f"hostvars[{host!r}].{key_path(path)}", value=shown_secret(value),
                                 expected="no Vault value in a host variable (it reaches argv, env files, "
                                          f"plan.json and PLAN.md); a Vault value may go in vllm_deployment's "
                                          f"{_VAULT_ACCEPTED}",
                                 fix=f"write {key_path(path)} on {host} in clear text")
