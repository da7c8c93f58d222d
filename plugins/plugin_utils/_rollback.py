# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Upgrade rollback: what a host's snapshot records, and what restoring a batch from it takes.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

``playbooks/upgrade.yml`` snapshots each host before it changes anything
(``roles/_common/tasks/snapshot.yml``): the managed files that existed, and the
image (reference and ID) each managed container runs. When a batch fails,
``rollback.yml`` restores every file of the batch (or removes one that did not
exist before) and points each image reference back at the image it had.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from typing import Any


def snapshot_containers(inspected: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """container name -> ``{ref, id}`` (the image reference it was started from, the image ID),
    from ``docker inspect`` output."""
    out: dict[str, dict[str, str]] = {}
    for index, container in enumerate(inspected):
        try:
            name, ref, image_id = container["Name"], container["Config"]["Image"], container["Image"]
        except (KeyError, TypeError):
            raise ValueError(f"docker inspect entry {index}: expected Name, Config.Image and Image") from None
        out[str(name).lstrip("/")] = {"ref": str(ref), "id": str(image_id)}
    return out


def read_manifests(slurped: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """host -> its snapshot manifest, from the results of slurping each host's ``manifest.json``
    (``item`` is the host, ``content`` the base64 file)."""
    manifests: dict[str, dict[str, Any]] = {}
    for result in slurped:
        host = result.get("item") if isinstance(result, Mapping) else None
        try:
            manifest = json.loads(base64.b64decode(result["content"], validate=True))
        except (KeyError, TypeError, binascii.Error, ValueError):
            raise ValueError(f"the rollback snapshot of host {host!r} cannot be read (no manifest.json content); "
                             "it is written by snapshot.yml before the upgrade changes anything") from None
        if not isinstance(manifest, Mapping):
            raise ValueError(f"the rollback snapshot of host {host!r} is not a JSON object")
        manifests[str(host)] = dict(manifest)
    return manifests


def rollback_steps(slurped: Sequence[Mapping[str, Any]], batch_files: Mapping[str, Sequence[str]],
                   processes: Sequence[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """What restoring a batch takes: ``files`` (``{host, path, existed}``: restore it from the
    snapshot, or remove it when the previous version had none) and ``images`` (``{host, ref, id}``:
    tag the image the previous version ran back to its reference), each in batch order, once."""
    manifests: dict[Any, dict[str, Any]] = read_manifests(slurped)
    files: list[dict[str, Any]] = []
    for host, paths in batch_files.items():
        manifest = manifests.get(host)
        if manifest is None:
            raise ValueError(f"no rollback snapshot was read for host {host!r} of the batch")
        existed = set(manifest.get("existed") or ())
        files.extend({"host": host, "path": path, "existed": path in existed} for path in paths)
    images: list[dict[str, Any]] = []
    for proc in processes:
        container = proc.get("container")
        if not container:
            continue
        snap = ((manifests.get(proc.get("host")) or {}).get("containers") or {}).get(container)
        if snap:
            step = {"host": proc["host"], "ref": snap["ref"], "id": snap["id"]}
            if step not in images:
                images.append(step)
    return {"files": files, "images": images}
