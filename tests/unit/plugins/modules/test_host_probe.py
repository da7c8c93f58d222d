"""vllm_host_probe's probes (module_utils/_host_probe.py) against a temporary tree and recorded text."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.vllm_fleet.recipes.plugins.module_utils import _host_probe as H

CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
flags\t\t: fpu vme sse4_2 avx avx2 avx512f avx512_bf16 amx_tile amx_bf16 avx512_vnni
processor\t: 1
flags\t\t: fpu
"""
MEMINFO = "MemTotal:       263741512 kB\nMemFree:         1024 kB\n"
IP_ADDR = """1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever
1: lo    inet6 ::1/128 scope host \\       valid_lft forever preferred_lft forever
2: eth0    inet 10.0.0.5/24 brd 10.0.0.255 scope global eth0\\       valid_lft forever preferred_lft forever
2: eth0    inet6 fe80::1/64 scope link \\       valid_lft forever preferred_lft forever
3: ib0    inet 192.168.10.5 peer 192.168.10.6/32 scope global ib0
"""


def test_cpu_facts():
    assert H.cpu_facts(CPUINFO, MEMINFO) == {"flags": ["amx_bf16", "avx2", "avx512_bf16", "avx512f"],
                                             "mem_total": 263741512 * 1024}
    assert H.cpu_facts("flags : fpu sse\n", "") == {"flags": [], "mem_total": 0}


def test_ip_addr():
    assert H.parse_ip_addr(IP_ADDR) == {"ipv4": ["10.0.0.5", "192.168.10.5"], "ipv6": ["fe80::1"]}


def test_path_kinds(tmp_path):
    (tmp_path / "file").write_text("x")
    (tmp_path / "dir").mkdir()
    os.symlink(tmp_path / "dir", tmp_path / "link")
    assert H.path_kind(str(tmp_path / "file")) == {"exists": True, "isdir": False, "isreg": True}
    assert H.path_kind(str(tmp_path / "dir")) == {"exists": True, "isdir": True, "isreg": False}
    # like ansible.builtin.stat: the link itself, not what it points to
    assert H.path_kind(str(tmp_path / "link")) == {"exists": True, "isdir": False, "isreg": False}
    assert H.path_kind(str(tmp_path / "none")) == {"exists": False, "isdir": False, "isreg": False}


def test_cdi_specs(tmp_path):
    etc, run = tmp_path / "etc", tmp_path / "run"
    etc.mkdir()
    (etc / "README").write_text("")
    (etc / ".hidden.yaml").write_text("")
    (etc / "sub.yaml").mkdir()
    assert H.cdi_spec_count([str(etc), str(run)]) == 0
    run.mkdir()
    (run / "nvidia.yaml").write_text("")
    (etc / "amd.json").write_text("")
    assert H.cdi_spec_count([str(etc), str(run)]) == 2


def test_interfaces(tmp_path):
    for name in ("lo", "eth0"):
        (tmp_path / name).mkdir()
    (tmp_path / "bonding_masters").write_text("")
    assert H.interface_names(str(tmp_path)) == ["eth0", "lo"]
    assert H.interface_names(str(tmp_path / "none")) == []


def test_free_space_walks_up_to_an_existing_parent(tmp_path):
    found = H.free_space(str(tmp_path / "not" / "yet"))
    stat = os.statvfs(tmp_path)
    assert found["path"] == str(tmp_path / "not" / "yet")
    assert os.path.ismount(found["mount"]) and str(tmp_path).startswith(found["mount"])
    assert abs(found["avail"] - stat.f_bavail * stat.f_frsize) < 64 * 2**20


@pytest.mark.parametrize("tree, size", [
    ([{"type": "file", "size": 10}, {"type": "directory", "size": 0}, {"type": "file", "size": 5}], 15),
    ({"error": "Repository not found"}, 0),
    ([], 0),
])
def test_hub_tree_bytes(tree, size):
    assert H.hub_tree_bytes(tree) == size


def test_weights_are_probed_only_when_not_present(tmp_path):
    marker = tmp_path / "done.json"
    marker.write_text("{}")
    urls = []

    def fetch_json(url):
        urls.append(url)
        if "broken" in url:
            raise OSError("no route to host")
        return [{"type": "file", "size": 7}]

    found = H.probe_weights([
        {"name": "done", "marker": str(marker), "free_space_path": str(tmp_path), "tree_url": "https://hub/done"},
        {"name": "todo", "marker": str(tmp_path / "todo.json"), "free_space_path": str(tmp_path),
         "tree_url": "https://hub/todo", "source": str(tmp_path / "src")},
        {"name": "broken", "present": False, "tree_url": "https://hub/broken"},
    ], fetch_json)
    assert found["done"] == {"present": True}
    assert (found["todo"]["present"], found["todo"]["tree_bytes"], found["todo"]["source"]["exists"]) == (False, 7, False)
    assert found["todo"]["free_space"]["path"] == str(tmp_path)
    assert found["broken"] == {"present": False, "tree_bytes": 0}
    assert urls == ["https://hub/todo", "https://hub/broken"]


def test_docker_probe_runs_each_command_once(tmp_path):
    calls = []

    def run(argv):
        calls.append(list(argv))
        if argv[1] == "info":
            return 0, json.dumps({"Runtimes": {"runc": {}}, "DockerRootDir": str(tmp_path)}) + "\n", ""
        if argv[1] == "image":
            return (0, "sha256:1\n", "") if argv[-1] == "have:1" else (1, "", "No such image\n")
        return 0, "27.1.1\n", ""

    facts = H.probe({"docker": "/usr/bin/docker", "images": ["have:1", "want:1"], "docker_root_free": True,
                     "docker_version": "/usr/bin/docker"}, run, fetch_json=lambda url: None)
    assert facts["docker"]["info"]["Runtimes"] == {"runc": {}}
    assert facts["images"] == {"have:1": True, "want:1": False}
    assert facts["docker_root_free"]["path"] == str(tmp_path)
    assert facts["docker_version"] == {"rc": 0, "stdout": "27.1.1", "stderr": ""}
    assert [c[:2] for c in calls] == [["/usr/bin/docker", "info"], ["/usr/bin/docker", "image"],
                                      ["/usr/bin/docker", "image"], ["/usr/bin/docker", "version"]]


def test_docker_missing_asks_nothing_more():
    calls = []

    def run(argv):
        calls.append(argv)
        return 2, "", ""

    facts = H.probe({"docker": "/usr/bin/docker", "images": ["want:1"], "docker_root_free": True}, run, lambda url: None)
    assert facts == {"docker": {"rc": 2, "stdout": "", "stderr": "", "info": None}}
    assert len(calls) == 1


def test_probe_reads_proc_and_runs_the_count_under_bash():
    calls = []

    def run(argv):
        calls.append(list(argv))
        return 0, "4\n", ""

    files = {"/proc/cpuinfo": CPUINFO, "/proc/meminfo": MEMINFO}
    facts = H.probe({"cpu": True, "accelerator_count": "nvidia-smi -L | grep -c ."}, run, lambda url: None,
                    read_text=files.__getitem__)
    assert facts["cpu"]["flags"] == ["amx_bf16", "avx2", "avx512_bf16", "avx512f"]
    assert facts["accelerator_count"] == {"rc": 0, "stdout": "4", "stderr": ""}
    assert calls == [["/bin/bash", "-c", "set -o pipefail\nnvidia-smi -L | grep -c ."]]


def test_an_empty_request_reads_nothing():
    def run(argv):
        raise AssertionError(f"ran {argv}")

    assert H.probe({}, run, lambda url: None) == {}


def _dist_info(venv, name, version, python="python3.11"):
    site = venv / "lib" / python / "site-packages" / f"{name.replace('-', '_')}-{version}.dist-info"
    site.mkdir(parents=True)
    (site / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def test_installed_versions_come_from_the_venvs_metadata(tmp_path):
    """The router check reads each venv's vllm-router without starting the venv's Python."""
    _dist_info(tmp_path / "pinned", "vllm-router", "0.1.17")
    _dist_info(tmp_path / "old", "vllm_router", "0.1.9", python="python3.10")
    _dist_info(tmp_path / "other", "requests", "2.32.0")
    venvs = {str(tmp_path / name): "vllm-router" for name in ("pinned", "old", "other", "missing")}
    facts = H.probe({"packages": venvs}, run=None, fetch_json=None)
    assert facts == {"packages": {str(tmp_path / "pinned"): "0.1.17", str(tmp_path / "old"): "0.1.9",
                                  str(tmp_path / "other"): None, str(tmp_path / "missing"): None}}
