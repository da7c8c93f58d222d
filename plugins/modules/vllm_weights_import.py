#!/usr/bin/python
# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Import pre-staged model files (a directory or tar archive) into an HF cache, offline."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_weights_import
short_description: Lay out pre-staged model files as a Hugging Face cache snapshot, offline
description:
  - For sites without access to the Hub, where the model's files were put on the host beforehand (a
    directory, or a C(.tar), C(.tar.gz), C(.tgz) or C(.tar.xz) archive). The module writes them
    where C(hf download) would, C(<cache>/hub/models--ORG--NAME/blobs/<id>) with
    C(snapshots/<commit>/<path>) links, so that vLLM finds the model with C(HF_HUB_OFFLINE=1).
  - Each file is hashed while it is copied (sha256 and git blob id). Weights-like files
    (C(*.safetensors), C(*.bin), ... or 10 MiB and more) are named by their sha256, others by their
    git blob id, as the Hub names them.
  - O(revision) a 40-hex commit names the snapshot itself (pin it with C(--revision) in the engine
    argv). A branch name (C(main)) gets a commit derived from the files (sha1 of the manifest) and a
    C(refs/<revision>) file pointing at it.
  - Writes the weights role's marker with the manifest, so the fan-out copy and
    M(vllm_fleet.recipes.vllm_weights_verify) check every host against it.
  - Archive members must be regular files or directories with relative names; links, devices and
    names with C(..) are refused before anything is written.
version_added: 0.1.0
author:
  - vllm_fleet maintainers (@vllm-fleet)
options:
  source:
    description: The pre-staged directory or tar archive on the host.
    type: path
    required: true
  cache_dir:
    description: The HF cache root (the directory that holds C(hub/)).
    type: path
    required: true
  repo:
    description: Repository id (C(org/name)) the files are the model of.
    type: str
    required: true
  revision:
    description: The revision the engine asks for (C(main), or a 40-hex commit).
    type: str
    default: main
  marker:
    description: The weights role's marker file to write when the import finished.
    type: path
    required: true
  only:
    description: Re-import just these files into the existing snapshot (a repair); the marker is kept.
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    support: full
    description: Reports what it would import; writes nothing.
  diff_mode:
    support: none
    description: No diff.
  platform:
    platforms: posix
    support: full
    description: Any POSIX host with Python 3.8+.
"""

EXAMPLES = r"""
# not run by tests/unit/test_install.py: needs model files pre-staged on a deploy host
- name: Import a model copied to the host beforehand
  vllm_fleet.recipes.vllm_weights_import:
    source: /srv/models/Qwen3-0.6B
    cache_dir: /root/.cache/huggingface
    repo: Qwen/Qwen3-0.6B
    revision: c1899de289a04d12100db370d81485cdf75e47ca
    marker: /root/.cache/huggingface/.vllm-fleet/Qwen--Qwen3-0.6B@c1899de289a04d12100db370d81485cdf75e47ca.json

- name: Import from an archive on the host
  vllm_fleet.recipes.vllm_weights_import:
    source: /srv/models/glm-5.3-flash.tar
    cache_dir: /data/huggingface
    repo: zai-org/GLM-5.3-Flash
    marker: /data/huggingface/.vllm-fleet/zai-org--GLM-5.3-Flash@main.json
"""

RETURN = r"""
commit:
  description: The snapshot's commit (the revision itself when it is a commit, else derived from the files).
  returned: always
  type: str
snapshot:
  description: The snapshot directory.
  returned: always
  type: str
files:
  description: Files imported.
  returned: always
  type: int
bytes:
  description: Bytes imported.
  returned: always
  type: int
seconds:
  description: Time the import took.
  returned: always
  type: float
"""

import json
import os
import re
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.vllm_fleet.recipes.plugins.module_utils import _weights_files as W

_REPO = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_REVISION = re.compile(r"^[A-Za-z0-9][\w.-]*$")


def write_marker(path: str, content: dict) -> None:
    """Write the marker atomically (a reader sees the old one or the whole new one)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(content, handle, sort_keys=True)
        handle.write("\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def run_import(params: dict) -> dict:
    """Import, write refs and the marker; the module's result."""
    repo, revision = params["repo"], params["revision"]
    if not _REPO.match(repo) or ".." in repo:
        raise W.WeightsError("repo %r: expected a Hub repository id org/name" % repo)
    if not _REVISION.match(revision) or ".." in revision:
        raise W.WeightsError("revision %r: expected a branch name or a 40-hex commit" % revision)
    repo_dir = os.path.join(params["cache_dir"], "hub", "models--" + repo.replace("/", "--"))
    started = time.monotonic()
    if params["only"]:
        with open(params["marker"], encoding="utf-8") as handle:
            commit = json.load(handle)["commit"]
        commit, manifest = W.import_files(params["source"], repo_dir, commit, only=params["only"])
    else:
        pinned = revision if _COMMIT.match(revision) else None
        commit, manifest = W.import_files(params["source"], repo_dir, pinned)
        if not pinned:
            refs = os.path.join(repo_dir, "refs")
            os.makedirs(refs, exist_ok=True)
            with open(os.path.join(refs, revision), "w", encoding="utf-8") as handle:
                handle.write(commit)
        snapshot = os.path.join(repo_dir, "snapshots", commit)
        write_marker(params["marker"], {
            "repo": repo, "revision": revision, "commit": commit, "snapshot": snapshot,
            "files": len(manifest), "bytes": sum(entry["size"] for entry in manifest.values()),
            "finished_at": int(time.time()), "source": params["source"], "manifest": manifest})
    return {"changed": True, "commit": commit, "snapshot": os.path.join(repo_dir, "snapshots", commit),
            "files": len(manifest), "bytes": sum(entry["size"] for entry in manifest.values()),
            "seconds": round(time.monotonic() - started, 3)}


def main():
    module = AnsibleModule(
        argument_spec={"source": {"type": "path", "required": True},
                       "cache_dir": {"type": "path", "required": True},
                       "repo": {"type": "str", "required": True},
                       "revision": {"type": "str", "default": "main"},
                       "marker": {"type": "path", "required": True},
                       "only": {"type": "list", "elements": "str", "default": []}},
        supports_check_mode=True,
    )
    if not os.path.exists(module.params["source"]):
        module.fail_json(msg="weights import: source %s does not exist on this host (weights.source: the "
                             "pre-staged model directory or tar archive)" % module.params["source"])
    if module.check_mode:
        module.exit_json(changed=True, commit="", snapshot="", files=0, bytes=0, seconds=0.0)
    try:
        result = run_import(module.params)
    except (OSError, ValueError, KeyError) as exc:  # W.WeightsError is a ValueError
        module.fail_json(msg="weights import of %s from %s: %s" % (module.params["repo"], module.params["source"], exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
