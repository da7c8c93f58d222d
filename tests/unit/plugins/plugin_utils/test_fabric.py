"""The fabric role's env files (_fabric): the plan's cluster-network env of each engine, beside its env file."""

from __future__ import annotations

import pytest

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._fabric import fabric_env, fabric_env_files
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._unitfile import UnsafeValueError
from readers import docker_env_file, systemd_env_file


def engine(unit: str, env: dict) -> dict:
    return {"kind": "engine", "unit": unit, "env": env, "env_file": f"/etc/vllm-fleet/d/{unit}.env"}


def test_fabric_env_keeps_the_cluster_network_entries_sorted():
    env = {"VLLM_HOST_IP": "10.0.0.1", "HF_HUB_OFFLINE": "1", "NCCL_SOCKET_IFNAME": "ens5", "MC_TE_METRIC": 1,
           "GLOO_SOCKET_IFNAME": "ens5", "TP_SOCKET_IFNAME_X": "no"}
    assert list(fabric_env(env).items()) == [("GLOO_SOCKET_IFNAME", "ens5"), ("MC_TE_METRIC", "1"),
                                             ("NCCL_SOCKET_IFNAME", "ens5"), ("VLLM_HOST_IP", "10.0.0.1")]


def test_one_0600_file_per_engine_with_fabric_settings_beside_its_env_file():
    procs = [engine("vllm-d-rank0", {"NCCL_SOCKET_IFNAME": "ens5", "VLLM_HOST_IP": "10.0.0.1", "HF_HUB_OFFLINE": "1"}),
             engine("vllm-d-plain", {"HF_HUB_OFFLINE": "1"}),
             {"kind": "router", "unit": "vllm-d-router", "env": {"VLLM_HOST_IP": "10.0.0.1"},
              "env_file": "/etc/vllm-fleet/d/vllm-d-router.env"}]
    (spec,) = fabric_env_files(procs, "gpu-1")
    assert spec["dest"] == "/etc/vllm-fleet/d/vllm-d-rank0.fabric.env" and spec["mode"] == "0600"
    expected = {"NCCL_SOCKET_IFNAME": "ens5", "VLLM_HOST_IP": "10.0.0.1"}
    assert systemd_env_file(spec["content"]) == docker_env_file(spec["content"]) == expected
    assert "settings of vllm-d-rank0" in spec["content"] and "on gpu-1," in spec["content"]


def test_an_unsafe_fabric_value_names_the_unit_and_variable():
    with pytest.raises(UnsafeValueError, match=r"fabric env of vllm-d-rank0\.NCCL_SOCKET_IFNAME"):
        fabric_env_files([engine("vllm-d-rank0", {"NCCL_SOCKET_IFNAME": "ens5\nX=1"})], "gpu-1")
