# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Where each image reference of a host's units is pulled from.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

A unit runs a reference as the recipe names it (``vllm/vllm-openai:v0.11.0``).
The image role may fetch it from elsewhere: a registry mirror
(``vllm_image_registry_mirrors``, keyed by the registry the reference names,
``docker.io`` when it names none) and a digest pin (``vllm_image_digests``,
keyed by the reference). The pulled image is then tagged with the reference, so
the unit files never change when a mirror or pin does. References loaded from
an archive (``vllm_image_archives``) are not pulled at all.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Optional

__all__ = ["ImagePull", "image_pulls", "parse_reference"]

DEFAULT_REGISTRY = "docker.io"
_TAG = re.compile(r":[^:/]+$")


@dataclass(frozen=True)
class Reference:
    """A reference split the way docker reads it."""

    registry: str        # docker.io when the reference names none
    names_registry: bool  # the reference's first component is a registry host
    name: str            # repository without registry, tag or digest
    suffix: str          # what follows the repository: ":tag", "@sha256:...", ":tag@sha256:..." or ""

    @property
    def path(self) -> str:
        """Repository path on its registry (Docker Hub's official images live under library/)."""
        if self.registry == DEFAULT_REGISTRY and "/" not in self.name:
            return f"library/{self.name}"
        return self.name


@dataclass(frozen=True)
class ImagePull:
    """One reference a host pulls: from where, with which policy, and whether to tag it after."""

    reference: str  # what the units run
    source: str     # what is pulled
    pull: str       # community.docker.docker_image_pull's pull: always or not_present
    tag: bool       # the pulled image gets the reference as a tag (source differs)


def _is_registry_host(component: str) -> bool:
    return "." in component or ":" in component or component == "localhost"


def parse_reference(reference: str) -> Reference:
    """Split ``reference`` into registry, repository name and tag/digest suffix."""
    first, slash, rest = reference.partition("/")
    names_registry = bool(slash) and _is_registry_host(first)
    remainder = rest if names_registry else reference
    name = _TAG.sub("", remainder.split("@", 1)[0])
    return Reference(registry=first if names_registry else DEFAULT_REGISTRY, names_registry=names_registry,
                     name=name, suffix=remainder[len(name):])


def image_pull(reference: str, mirrors: Mapping[str, str], digests: Mapping[str, str],
               policy: str) -> ImagePull:
    """How one reference is pulled: mirror and digest pin applied; a pinned image is pulled once."""
    ref = parse_reference(reference)
    mirror = mirrors.get(ref.registry, "")
    digest = digests.get(reference, "")
    if mirror:
        repository = f"{mirror}/{ref.path}"
    elif ref.names_registry:
        repository = f"{ref.registry}/{ref.path}"
    else:
        repository = ref.name
    source = repository + (f"@{digest}" if digest else (ref.suffix or ":latest"))
    return ImagePull(reference=reference, source=source, pull="not_present" if digest else policy,
                     tag=source != reference)


def image_pulls(references: Sequence[str], mirrors: Mapping[str, str], digests: Mapping[str, str],
                archives: Mapping[str, str], policy: str,
                present: Optional[Mapping[str, bool]] = None) -> list[dict[str, object]]:
    """The pulls of ``references`` (archived ones left out), sorted and de-duplicated, as dicts.

    ``present``: references the host is known to have (the preflight's read of it). A pull that
    would change nothing there is left out: policy ``not_present``, pulled under its own name.
    """
    pulls = [image_pull(reference, mirrors, digests, policy)
             for reference in sorted(set(references)) if reference not in archives]
    known = present or {}
    return [asdict(pull) for pull in pulls
            if not (pull.pull == "not_present" and not pull.tag and known.get(pull.reference) is True)]
