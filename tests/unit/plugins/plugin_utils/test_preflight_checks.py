"""The preflight checks (plugin_utils/_preflight_checks.py): good inputs pass, each bad one is named.

Each bad input's message must name the key and the value (the wording of the roles' former
assert tasks, which users and docs quote).
"""

from __future__ import annotations

import pytest
from jinja2 import Environment
from jinja2.filters import do_truncate

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _preflight_checks as C

HOST = "gpu-1"
DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize("digests, bad", [
    ({"vllm/vllm-openai:v1": DIGEST}, []),
    ({"vllm/vllm-openai:v1": "sha256:abc"}, ["vllm/vllm-openai:v1"]),
    ({"a:1": DIGEST.upper(), "b:1": 42, "c:1": DIGEST}, ["a:1", "b:1"]),
])
def test_digest_pins(digests, bad):
    errors = C.digest_errors(digests)
    assert len(errors) == len(bad)
    for key, message in zip(bad, errors, strict=True):
        assert message.startswith(f"vllm_image_digests['{key}']: got {digests[key]}; expected 'sha256:'")


@pytest.mark.parametrize("path, ok", [
    ("/srv/images/vllm.tar", True),
    ("srv/images/vllm.tar", False),
    ("/srv/../etc/vllm.tar", False),
    ("/srv/images/..", False),
    ("/srv/im\x01ages.tar", False),
    (None, False),
])
def test_archive_paths(path, ok):
    errors = C.archive_path_errors({"vllm/vllm-openai:v1": path})
    assert errors == ([] if ok else [
        f"vllm_image_archives['vllm/vllm-openai:v1']: got {path}; expected the absolute path of a docker save "
        "archive on each host that runs vllm/vllm-openai:v1"])


@pytest.mark.parametrize("text, length", [
    ("short", 80), ("x" * 85, 80), ("x" * 86, 80), ("word " * 40, 80), ("a" * 300, 200), ("one two", 3),
    ("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running? " * 3, 200),
])
def test_truncate_is_jinjas(text, length):
    assert C.truncate(text, length) == do_truncate(Environment(), text, length)


def test_long_values_are_truncated_like_jinja():
    errors = C.digest_errors({"x": "word " * 40})
    assert errors[0].startswith("vllm_image_digests['x']: got " + "word " * 14 + "word...; expected")


def test_registry_credentials_are_named_by_index_only():
    good = {"registry": "r.example:5000", "username": "fleet", "password": "s3cret-token"}
    creds = [good, {"registry": "r.example", "username": "fleet"}, "fleet:s3cret-token", dict(good, registry=5000)]
    errors = C.credential_errors(creds)
    assert [e.split(":")[0] for e in errors] == [f"vllm_image_registry_credentials[{i}]" for i in (1, 2, 3)]
    assert not any("s3cret" in e for e in errors)


def test_archive_on_host():
    kinds = {"/srv/a.tar": {"exists": True, "isdir": False, "isreg": True},
             "/srv/b.tar": {"exists": True, "isdir": True, "isreg": False}}
    archives = {"a:1": "/srv/a.tar", "b:1": "/srv/b.tar"}
    assert C.archive_on_host_errors(HOST, ["a:1", "b:1"], archives, kinds) == [
        f"vllm_image_archives['b:1']: /srv/b.tar is not a file on {HOST}; expected the docker save archive of b:1 "
        "there (the host loads it instead of pulling)"]


@pytest.mark.parametrize("package, ok", [
    ("vllm-router==0.1.17", True),
    ("vllm_router[extra] >= 0.1", True),
    ("vllm-router @ https://example.org/v.whl", True),
    ("vllm-router", False),
    ("vllm-router>0.1", False),
])
def test_router_package(package, ok):
    errors = C.router_package_errors(package)
    assert errors == ([] if ok else [f"vllm_router_package: got '{package}'; expected a pinned pip requirement such "
                                     "as 'vllm-router==0.1.17' (a version resolved at run time makes fleets drift)"])


GOOD_ENTRY = {"name": "glm", "repo": "zai-org/GLM-5", "origin": "a", "hosts": ["a", "b"], "revision": "main",
              "argv_has_revision": False, "pinned": True, "source": None}


@pytest.mark.parametrize("change, expected", [
    ({}, []),
    ({"repo": "/models/glm"}, ["deployment glm on gpu-1: the engine serves '/models/glm', which is not a Hub repository "
                               "id (org/name); set vllm_weights_repos['glm'], or weights.mode: container"]),
    ({"origin": "c"}, ["vllm_weights_origin['glm']: got 'c'; expected one of its engine hosts: a, b"]),
    ({"revision": "v2"}, ["deployment glm: weights.revision is 'v2' but the engine argv has no --revision; serving runs "
                          "with HF_HUB_OFFLINE=1 and would look up refs/main. Fix: add ['--revision', 'v2'] to "
                          "vllm_deployment.advanced_args"]),
    ({"revision": "v2", "argv_has_revision": True}, []),
])
def test_weights_entries(change, expected):
    assert C.weights_errors(HOST, [dict(GOOD_ENTRY, **change)]) == expected


def test_unpinned_revision_is_a_warning():
    assert C.unpinned_warnings([GOOD_ENTRY]) == []
    assert C.unpinned_warnings([dict(GOOD_ENTRY, pinned=False)]) == [
        "deployment glm: weights.revision is not set, so 'main' is fetched once and then kept (a finished revision "
        "is never fetched again). Pin weights.revision for reproducible fleets."]


def test_pre_staged_source():
    entry = dict(GOOD_ENTRY, source="/srv/glm")
    missing = {"exists": False, "isdir": False, "isreg": False}
    assert C.source_errors(HOST, [entry], {"glm": {"exists": True, "isdir": True, "isreg": False}}) == []
    assert C.source_errors(HOST, [entry], {}) == []  # not looked up: the revision is already here
    message, = C.source_errors(HOST, [entry], {"glm": missing})
    assert message.startswith("vllm_deployment[glm].weights.source: '/srv/glm' is not a directory or file on gpu-1")
    assert "set vllm_weights_origin['glm'] to the host that has it." in message


@pytest.mark.parametrize("result, expected", [
    ({"rc": 0, "stdout": "{}", "stderr": ""}, []),
    ({"rc": 2, "stdout": "", "stderr": ""},
     ["host gpu-1: docker: found no /usr/bin/docker; needed: the docker engine (docker.service) for u1, u2"]),
    ({"rc": 1, "stdout": "", "stderr": "Cannot connect to the Docker daemon\n"},
     ["host gpu-1: docker: found a daemon that does not answer (Cannot connect to the Docker daemon); needed: the "
      "docker engine (docker.service) for u1, u2"]),
])
def test_docker_answers(result, expected):
    assert C.docker_errors(HOST, "/usr/bin/docker", ["u1", "u2"], result) == expected


def test_nvidia_runtime():
    assert C.runtime_errors(HOST, {"Runtimes": {"runc": {}, "nvidia": {}}}) == []
    message, = C.runtime_errors(HOST, {"Runtimes": {"runc": {}, "io.containerd.runc.v2": {}}})
    assert message.startswith("host gpu-1: docker runtimes: found runc, io.containerd.runc.v2; needed: nvidia")
    assert C.runtime_errors(HOST, {"Runtimes": None})[0].startswith("host gpu-1: docker runtimes: found ; needed")


def test_missing_device_and_mount_sources():
    kinds = {"/dev/kfd": {"exists": True}, "/dev/dri": {"exists": False}, "/opt/m": {"exists": False}}
    assert C.missing_paths_errors(HOST, ["/dev/kfd"], kinds) == []
    assert C.missing_paths_errors(HOST, ["/dev/kfd", "/dev/dri", "/opt/m"], kinds) == [
        "host gpu-1: found no /dev/dri, /opt/m; needed by the units' docker --device/-v flags (accelerator driver "
        "installed? RDMA devices present?)"]


def test_cdi_spec():
    assert C.cdi_errors(HOST, [], 0) == []
    assert C.cdi_errors(HOST, ["nvidia.com/gpu=0"], 1) == []
    assert C.cdi_errors(HOST, ["nvidia.com/gpu=0", "nvidia.com/gpu=1"], 0) == [
        "host gpu-1: found no CDI spec in /etc/cdi or /var/run/cdi; needed for --device nvidia.com/gpu=0, "
        "nvidia.com/gpu=1. Run `nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml`"]


@pytest.mark.parametrize("declared, result, found", [
    ("8", None, "8"),
    ("", {"rc": 0, "stdout": "4\n", "stderr": ""}, "4"),
    ("", {"rc": 127, "stdout": "", "stderr": "nvidia-smi: command not found"}, "nvidia-smi: command not found"),
    ("", {"rc": 1, "stdout": "", "stderr": ""}, "no output"),
])
def test_accelerators_found(declared, result, found):
    assert C.accelerators_found(declared, result) == found


def test_accelerator_count():
    args = ([0, 1, 2, 3], ["glm", "qwen"], ["nvidia"])
    assert C.accelerator_errors(HOST, 4, "8", "nvidia-smi", *args) == []
    assert C.accelerator_errors(HOST, 4, "2", "nvidia-smi", *args) == [
        "host gpu-1: accelerators: found 2 (nvidia-smi); needed 4 (devices 0,1,2,3 of glm, qwen, vendor nvidia)"]
    assert C.accelerator_errors(HOST, 4, "no output", "vllm_preflight_accelerator_count", *args) == [
        "host gpu-1: accelerators: found none countable (no output) (vllm_preflight_accelerator_count); needed 4 "
        "(devices 0,1,2,3 of glm, qwen, vendor nvidia)"]


def test_cpu_backend():
    assert C.cpu_errors(HOST, ["avx2", "avx512f"], 100 * 2**30, ["40", "40"], 4) == []
    assert C.cpu_errors(HOST, ["avx2"], 80 * 2**30, ["40", "40"], 4) == [
        "host gpu-1: CPU flags: found avx2 (needed: avx2; avx512f and amx_bf16 are faster); memory: found 80.0 GiB, "
        "needed 88.0 GiB (2 engine(s): cpu.kvcache_space_gb each + 4 GiB). Lower vllm_deployment.cpu.kvcache_space_gb "
        "or place fewer engines on this host"]
    message, = C.cpu_errors(HOST, [], 100 * 2**30, ["x"], 4)
    assert "CPU flags: found none of avx2, avx512f (needed: avx2;" in message
    assert "needed 4.0 GiB (1 engine(s)" in message


def test_disk_per_filesystem():
    needs = [{"what": "zai-org/GLM-5@main", "bytes": 10 * 2**30, "mount": "/data", "avail": 12 * 2**30},
             {"what": "org/other@v1", "bytes": 2 * 2**30, "mount": "/data", "avail": 12 * 2**30},
             {"what": "image vllm/vllm-openai:v1", "bytes": 30 * 2**30, "mount": "/", "avail": 100 * 2**30}]
    assert C.disk_errors(HOST, needs[2:], 2**30) == []
    assert C.disk_errors(HOST, needs, 2**30) == [
        "host gpu-1: filesystem /data: found 12.00 GB free; needed 13.00 GB for zai-org/GLM-5@main, org/other@v1 "
        "(+1.00 GB margin)"]


def test_unknown_weights_size_is_a_warning():
    needs = [{"what": "zai-org/GLM-5@main", "bytes": 0}, {"what": "org/other@v1", "bytes": 5}]
    assert C.unknown_size_warnings(HOST, needs) == [
        "host gpu-1: the size of zai-org/GLM-5@main is unknown (the Hub API did not answer); set "
        "vllm_preflight_weights_bytes to check the disk for it"]


def test_fabric_interface_of_the_plan():
    assert C.interface_errors(HOST, "eth1", {"exists": True}) == []
    assert C.interface_errors(HOST, "eth1", {"exists": False}) == [
        "host gpu-1: fabric interface: found no 'eth1' in /sys/class/net; needed: the NIC on the cluster network "
        "(vllm_fabric_interface) for NCCL/Gloo/NIXL/HCCL"]


def test_fabric_env_against_the_host():
    env = [("NCCL_SOCKET_IFNAME", "eth1"), ("GLOO_SOCKET_IFNAME", "eth1"), ("VLLM_HOST_IP", "10.0.0.9")]
    assert C.fabric_interface_errors(HOST, ["eth1"], env, ["lo", "eth1"]) == []
    assert C.fabric_interface_errors(HOST, ["eth1"], env, ["lo", "eth0"]) == [
        "host gpu-1: interface: found no 'eth1' (interfaces: eth0, lo); needed by NCCL_SOCKET_IFNAME, "
        "GLOO_SOCKET_IFNAME. Fix: set vllm_fabric_interface to the cluster NIC"]
    assert C.fabric_address_errors(HOST, ["10.0.0.9"], env, ["10.0.0.9"], []) == []
    assert C.fabric_address_errors(HOST, ["fd00::9"], [("VLLM_HOST_IP", "fd00::9")], ["10.0.0.9"], ["fd00::9"]) == []
    assert C.fabric_address_errors(HOST, ["10.0.0.9"], env, ["10.0.0.5", "172.17.0.1"], []) == [
        "host gpu-1: address: found 10.0.0.5, 172.17.0.1; needed 10.0.0.9 (set in VLLM_HOST_IP). Fix: set "
        "vllm_fabric_address to this host's cluster-network address"]


def test_rdma_devices():
    kinds = {"/sys/class/infiniband/mlx5_0": {"exists": True}, "/sys/class/infiniband/mlx5_1": {"exists": False}}
    assert C.rdma_errors(HOST, ["mlx5_0"], kinds) == []
    assert C.rdma_errors(HOST, ["mlx5_0", "mlx5_1"], kinds) == [
        "host gpu-1: RDMA devices: found no mlx5_1 in /sys/class/infiniband; needed by UCX_NET_DEVICES / NCCL_IB_HCA "
        "(vllm_rdma_devices, vllm_ib_hca)"]


def test_engine_docker():
    assert C.engine_docker_errors(HOST, "/usr/bin/docker", ["e1"], {"rc": 0, "stdout": "27.1", "stderr": ""}) == []
    assert C.engine_docker_errors(HOST, "/usr/bin/docker", ["e1"], {"rc": 2, "stdout": "", "stderr": ""}) == [
        "host gpu-1: found no answering docker engine (/usr/bin/docker version: ); needed: docker with docker.service "
        "for e1. Fix: install docker (playbooks/deploy.yml's preflight play checks this too)."]


@pytest.mark.parametrize("values, ok", [
    (("/etc/p/sd", "/etc/p/rules.yml", "/etc/p/p.yml", "15s", "1m"), True),
    (("/etc/p/sd", "/etc/p/rules.yaml", "/etc/p/p.yml", "500ms", "2h"), True),
    (("etc/p/sd", "/etc/p/rules.yml", "/etc/p/p.yml", "15s", "1m"), False),
    (("/etc/p/sd", "/etc/p/rules.json", "/etc/p/p.yml", "15s", "1m"), False),
    (("/etc/p/sd", "/etc/p/rules.yml", "/etc/p/p.yml", "0s", "1m"), False),
    (("/etc/p/sd", "/etc/p/rules.yml", "/etc/p/p.yml", "15s", 15), False),
])
def test_monitoring_paths_and_intervals(values, ok):
    errors = C.monitoring_path_errors(*values)
    assert errors == [] if ok else errors[0].endswith("Got " + ", ".join(str(v) for v in values) + ".")


def test_monitoring_needs_apt():
    assert C.monitoring_os_errors("prom", True, "Debian", "Ubuntu") == []
    assert C.monitoring_os_errors("prom", False, "RedHat", "Rocky") == []
    assert C.monitoring_os_errors("prom", True, "RedHat", "Rocky") == [
        "vllm_monitoring_install: prom runs Rocky; the role installs Prometheus with apt (Debian, Ubuntu). Install "
        "Prometheus yourself and set vllm_monitoring_install: false."]
    assert "prom runs ?;" in C.monitoring_os_errors("prom", True, None, None)[0]
