#!/usr/bin/python
# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Verify a model revision in an HF cache against the Hub's manifest (sha256 / git blob id)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_weights_verify
short_description: Verify every file of a cached model revision by sha256 against the Hub's manifest
description:
  - Reads the weights role's marker for one deployment (the JSON file written when a revision
    finished downloading, importing or copying) and hashes every file of its snapshot.
  - The expected ids come from the Hub's tree listing, which the weights role records in the
    marker after the download (C(tree)), with the sha256 of every LFS file (the shards) and the git blob
    id of every other file, with their sizes. A marker written by C(vllm_weights_import) carries the
    manifest of the imported files (C(manifest)). A marker with neither falls back to the ids an HF
    cache stores each file under (C(blobs/<etag>)).
  - A mismatch names the file, what differs and both values. With O(remove_bad) the blob and link
    of each mismatched file are removed (only inside the repository directory), so fetching the
    revision again replaces only those files.
version_added: 0.1.0
author:
  - vllm_fleet maintainers (@vllm-fleet)
options:
  marker:
    description:
      - The weights role's marker file on the host (JSON with C(snapshot) and C(tree) or C(manifest)).
    type: path
    required: true
  remove_bad:
    description: Remove the blob and snapshot link of every mismatched file (not in check mode).
    type: bool
    default: false
  workers:
    description: Files hashed at once (threads; hashlib releases the GIL while it reads).
    type: int
    default: 4
  fail_on_mismatch:
    description: Fail when a file does not match (after removing it, with O(remove_bad)).
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Hashes in check mode too; never removes anything then.
  diff_mode:
    support: none
    description: Reports mismatches, not diffs.
  platform:
    platforms: posix
    support: full
    description: Any POSIX host with Python 3.8+.
"""

EXAMPLES = r"""
# not run by tests/unit/test_install.py: needs downloaded weights and their marker on a deploy host
- name: Verify the weights of deployment glm on this host
  vllm_fleet.recipes.vllm_weights_verify:
    marker: /root/.cache/huggingface/.vllm-fleet/zai-org--GLM-5.3-Flash@main.json
  register: verified

- name: Verify, and remove what does not match so that a re-fetch replaces only that
  vllm_fleet.recipes.vllm_weights_verify:
    marker: /data/huggingface/.vllm-fleet/Qwen--Qwen3-0.6B@c1899de2.json
    remove_bad: true
    workers: 8
"""

RETURN = r"""
ok:
  description: Whether every file matched.
  returned: always
  type: bool
checked:
  description: Files hashed.
  returned: always
  type: int
  sample: 12
bytes:
  description: Bytes of the files that matched.
  returned: always
  type: int
seconds:
  description: Time spent hashing.
  returned: always
  type: float
manifest_source:
  description: Where the expected ids came from.
  returned: always
  type: str
  choices: [hub, import, blob names]
snapshot:
  description: The snapshot directory that was checked.
  returned: always
  type: str
mismatches:
  description:
    - One entry per file that does not match, with C(file) (path in the repository), C(problem)
      (missing, size, sha256, git_sha1 or outside), C(expected) and C(actual).
  returned: always
  type: list
  elements: dict
  sample: [{file: model-00002-of-00004.safetensors, problem: sha256, expected: {sha256: "8f4e..."}, actual: {sha256: "d01a..."}}]
removed:
  description: Paths removed by O(remove_bad).
  returned: always
  type: list
  elements: str
"""

import json
import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.vllm_fleet.recipes.plugins.module_utils import _weights_files as W


def expected_manifest(marker: dict, snapshot: str) -> tuple:
    """(manifest, source) from a marker: the Hub's tree, an import's manifest, else blob names."""
    if marker.get("tree"):
        return W.manifest_from_tree(marker["tree"]), "hub"
    if marker.get("manifest"):
        return W.check_manifest(marker["manifest"]), "import"
    return W.blob_name_manifest(snapshot), "blob names"


def verify(marker_path: str, remove_bad: bool, workers: int) -> dict:
    """The module's result (pure apart from reading, hashing and, with remove_bad, unlinking)."""
    with open(marker_path, encoding="utf-8") as handle:
        marker = json.load(handle)
    snapshot = marker.get("snapshot")
    if not isinstance(snapshot, str) or not os.path.isabs(snapshot) or "/snapshots/" not in snapshot:
        raise W.WeightsError("%s: snapshot %r is not an absolute .../snapshots/COMMIT path" % (marker_path, snapshot))
    repo_dir = os.path.dirname(os.path.dirname(snapshot))
    manifest, source = expected_manifest(marker, snapshot)
    if not manifest:
        raise W.WeightsError("%s: no files to verify in %s" % (marker_path, snapshot))
    started = time.monotonic()
    report = W.verify_snapshot(snapshot, manifest, repo_dir=repo_dir, workers=workers)
    removed = W.remove_bad(repo_dir, report["mismatches"]) if remove_bad else []
    return {"ok": not report["mismatches"], "checked": report["checked"], "bytes": report["bytes"],
            "seconds": round(time.monotonic() - started, 3), "manifest_source": source, "snapshot": snapshot,
            "mismatches": [{key: item[key] for key in ("file", "problem", "expected", "actual")}
                           for item in report["mismatches"]],
            "removed": removed, "changed": bool(removed)}


def describe(mismatch: dict) -> str:
    """One line for a mismatch: file, what differs, expected and actual."""
    problem = mismatch["problem"]
    expected = mismatch.get("expected") or {}
    actual = mismatch.get("actual") or {}
    if problem in ("sha256", "git_sha1", "size"):
        return "%s: %s is %s, expected %s" % (mismatch["file"], problem, actual.get(problem), expected.get(problem))
    return "%s: %s" % (mismatch["file"], problem)


def main():
    module = AnsibleModule(
        argument_spec={"marker": {"type": "path", "required": True},
                       "remove_bad": {"type": "bool", "default": False},
                       "workers": {"type": "int", "default": 4},
                       "fail_on_mismatch": {"type": "bool", "default": False}},
        supports_check_mode=True,
    )
    params = module.params
    try:
        result = verify(params["marker"], params["remove_bad"] and not module.check_mode, params["workers"])
    except (OSError, ValueError) as exc:  # W.WeightsError and json errors are ValueErrors
        module.fail_json(msg="weights verification of %s: %s" % (params["marker"], exc))
    if params["fail_on_mismatch"] and not result["ok"]:
        module.fail_json(msg="%d of %d files do not match the %s manifest: %s"
                             % (len(result["mismatches"]), result["checked"], result["manifest_source"],
                                "; ".join(describe(item) for item in result["mismatches"])), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
