"""Upgrade rollback (_rollback): what a snapshot records and what restoring a batch takes."""

from __future__ import annotations

import base64
import json

import pytest

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._rollback import (
    read_manifests,
    rollback_steps,
    snapshot_containers,
)


def slurped(host: str, manifest: object) -> dict:
    """One result of slurping a host's manifest.json in a loop over the batch's hosts."""
    return {"item": host, "content": base64.b64encode(json.dumps(manifest).encode()).decode(), "encoding": "base64"}


INSPECT = [{"Name": "/vllm-glm-rank0", "Image": "sha256:aaa", "Config": {"Image": "reg/vllm:v1"}},
           {"Name": "/vllm-glm-router", "Image": "sha256:bbb", "Config": {"Image": "reg/router:v1"}}]


def test_snapshot_names_each_container_without_the_slash_with_its_reference_and_image_id():
    assert snapshot_containers(INSPECT) == {"vllm-glm-rank0": {"ref": "reg/vllm:v1", "id": "sha256:aaa"},
                                            "vllm-glm-router": {"ref": "reg/router:v1", "id": "sha256:bbb"}}
    assert snapshot_containers([]) == {}


def test_a_docker_inspect_entry_without_its_image_is_named():
    with pytest.raises(ValueError, match=r"docker inspect entry 1: expected Name, Config\.Image and Image"):
        snapshot_containers([INSPECT[0], {"Name": "/x", "Config": None}])


def test_rollback_restores_what_existed_removes_what_did_not_and_tags_each_image_back_once():
    manifests = [
        slurped("a", {"existed": ["/etc/systemd/system/vllm-glm-rank0.service"],
                      "containers": snapshot_containers(INSPECT[:1])}),
        slurped("b", {"existed": [], "containers": {}}),
    ]
    files = {"a": ["/etc/systemd/system/vllm-glm-rank0.service", "/etc/vllm-fleet/glm/new.env"],
             "b": ["/etc/systemd/system/vllm-glm-rank1.service"]}
    procs = [{"host": "a", "unit": "vllm-glm-rank0", "container": "vllm-glm-rank0"},
             {"host": "a", "unit": "vllm-glm-rank0-again", "container": "vllm-glm-rank0"},
             {"host": "a", "unit": "vllm-glm-watchdog", "container": None},
             {"host": "b", "unit": "vllm-glm-rank1", "container": "vllm-glm-rank1"}]
    steps = rollback_steps(manifests, files, procs)
    assert steps["files"] == [
        {"host": "a", "path": "/etc/systemd/system/vllm-glm-rank0.service", "existed": True},
        {"host": "a", "path": "/etc/vllm-fleet/glm/new.env", "existed": False},
        {"host": "b", "path": "/etc/systemd/system/vllm-glm-rank1.service", "existed": False},
    ]
    # b's container was not running at snapshot time: nothing to tag back there
    assert steps["images"] == [{"host": "a", "ref": "reg/vllm:v1", "id": "sha256:aaa"}]


def test_a_batch_host_without_a_readable_snapshot_is_named():
    with pytest.raises(ValueError, match="no rollback snapshot was read for host 'b'"):
        rollback_steps([slurped("a", {"existed": []})], {"b": ["/x"]}, [])
    with pytest.raises(ValueError, match="snapshot of host 'a' cannot be read"):
        read_manifests([{"item": "a", "content": "not base64!"}])
    with pytest.raises(ValueError, match="snapshot of host 'a' is not a JSON object"):
        read_manifests([slurped("a", ["existed"])])
