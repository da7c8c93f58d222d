# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Secrets in messages and inventory values: fingerprints and the Vault marker.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

* :func:`fingerprint`: what every message shows instead of a secret.
* :class:`VaultValue`: a string the operator encrypted with Ansible Vault. The
  inventory reader (the ``vllm_plan`` action's ``_plain``) hands Vault values over
  as this type, whatever their key; its ``repr`` is the fingerprint, so a message
  that quotes it (``{value!r}``, ``describe_value``) never shows the plaintext.
* :func:`vault_paths`: where in a raw mapping the Vault values are, so that the
  inventory checks route them to the 0600 secret files or refuse them by key.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["VaultValue", "fingerprint", "is_blank", "shown_secret", "vault_paths"]


def fingerprint(secret: str) -> str:
    """What a message shows instead of a secret: ``<secret sha256:0123abcd4567>``."""
    return f"<secret sha256:{hashlib.sha256(secret.encode('utf-8', 'surrogatepass')).hexdigest()[:12]}>"


class VaultValue(str):
    """A Vault-encrypted inventory value, decrypted: a secret whatever its key."""

    __slots__ = ()

    def __repr__(self) -> str:
        return fingerprint(str.__str__(self))


def shown_secret(value: Any) -> str:
    """The fingerprint of any value (a string's text, else its ``repr`` with Vault values hidden)."""
    return fingerprint(str.__str__(value) if isinstance(value, str) else repr(value))


def is_blank(value: Any) -> bool:
    """An empty or all-blank secret (an empty Vault value, an unset lookup)."""
    return isinstance(value, str) and not value.strip()


def vault_paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], VaultValue]]:
    """Every Vault value inside ``value``: (key path, value); list items are indexed by position."""
    if isinstance(value, VaultValue):
        yield path, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from vault_paths(item, path + (key,))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from vault_paths(item, path + (index,))
