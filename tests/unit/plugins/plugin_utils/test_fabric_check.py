"""The fabric check before a group or pool starts (plugins/plugin_utils/_fabric_check.py): which
groups, hosts, ports and backends each plan shape gets, the bandwidth arithmetic, and messages that
name the host, interface and address. tests/molecule/multi_node and pd_cluster run it for real."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _fabric_check as F
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _render as R
from fleets import SEED, seed_fleet

GOLDEN = Path(__file__).resolve().parent / "golden"
SCRIPT = "/usr/local/libexec/vllm-fleet/collective_check.py"


def golden(case: str) -> dict:
    return json.loads((GOLDEN / case / "plan.json").read_text())


def ok_line(rank: int, busbw: float = 1.2, latency: float = 0.0004, world: int = 2) -> str:
    return json.dumps({"probe": "collective", "ok": True, "rank": rank, "world_size": world, "bytes": 16 << 20,
                       "busbw_gbps": busbw, "latency_s": latency})


def rank_result(rank: dict, rc: int = 0, stdout: str = "", stderr: str = "") -> dict:
    # what async_status registers per loop item: the poll-0 job result (with the rank) as its item
    return {"item": {"ansible_job_id": "j1", "item": rank}, "rc": rc, "stdout": stdout, "stderr": stderr}


def test_multi_node_group_runs_one_nccl_rank_per_host_on_a_port_beside_the_master_port():
    checks = F.fabric_checks(golden("multi_node_tp_pp"), SCRIPT)
    (group,) = checks["groups"]
    assert (group["group"], group["backend"], group["world_size"]) == ("fleet", "nccl", 2)
    assert (group["master_addr"], group["master_port"]) == ("10.3.0.1", 29501 + 100)
    assert [(r["host"], r["rank"], r["interface"], r["address"]) for r in checks["ranks"]] == [
        ("a", 0, "eth1", "10.3.0.1"), ("b", 1, "eth1", "10.3.0.2")]
    assert checks["hosts"] == ["a", "b"] and checks["pairs"] == checks["ucx"] == []
    argv = checks["ranks"][1]["argv"]
    # the engine's image, device flags and fabric env file; the engine's name, caches and -e never
    # 60 s for the rendezvous and all-reduce, 10 s of grace, 120 s to start and import torch
    assert argv[:6] == ["timeout", "--kill-after=10", "190", "docker", "run", "--rm"]
    assert checks["deadline_s"] == 190
    assert "vllm/vllm-openai:nightly" in argv and "--gpus" in argv and "--ipc=host" in argv
    assert argv[argv.index("--env-file") + 1] == "/etc/vllm-fleet/fleet/vllm-fleet-rank1.fabric.env"
    assert argv[argv.index("--name") + 1] == "vllm-fleet-rank1-fabric-check"
    assert not any(":/root/.cache" in word for word in argv) and "-e" not in argv
    assert f"{SCRIPT}:{F.SCRIPT_IN_CONTAINER}:ro" in argv
    tail = argv[argv.index(F.SCRIPT_IN_CONTAINER, argv.index("--entrypoint")):]
    assert tail == [F.SCRIPT_IN_CONTAINER, "collective", "--backend", "nccl", "--rank", "1", "--world-size", "2",
                    "--master-addr", "10.3.0.1", "--master-port", "29601", "--timeout", "60", "--size-mb", "16"]


def test_data_parallel_group_offsets_its_rpc_port():
    (group,) = F.fabric_checks(golden("multi_node_dep"), SCRIPT, port_offset=7)["groups"]
    assert group["master_port"] == 29550 + 7


def test_the_probe_port_moves_past_every_port_of_the_deployment():
    plan = golden("multi_node_tp_pp")
    head = next(p for p in plan["deployments"]["fleet"]["processes"] if p["unit"] == "vllm-fleet-rank0.service")
    head["ports"] += [{"port": 29601, "purpose": "api"}, {"port": 29602, "purpose": "other"}]
    assert F.fabric_checks(plan, SCRIPT)["groups"][0]["master_port"] == 29603


@pytest.mark.parametrize("vendor,backend", [("nvidia", "nccl"), ("amd", "nccl"), ("ascend", "hccl"),
                                            ("cpu", "gloo"), ("intel", "gloo")])
def test_backend_follows_the_vendor(vendor, backend):
    plan = golden("multi_node_tp_pp")
    plan["deployments"]["fleet"]["vendor"] = vendor
    (group,) = F.fabric_checks(plan, SCRIPT)["groups"]
    assert group["backend"] == backend
    # the interface the backend reads first
    assert all(rank["interface"] == "eth1" for rank in group["ranks"])


@pytest.mark.parametrize("case", ["single_node_tp", "kv_distributed", "kv_centralized"])
def test_single_node_deployments_check_nothing(case):
    checks = F.fabric_checks(golden(case), SCRIPT)
    assert checks["groups"] == checks["pairs"] == checks["ucx"] == checks["hosts"] == []


def test_pd_pool_connects_each_decode_host_to_each_prefill_side_channel():
    checks = F.fabric_checks(golden("pd_cluster_tp"), SCRIPT, timeout_s=15)
    assert checks["groups"] == []
    (pair,) = checks["pairs"]
    assert (pair["decode_host"], pair["prefill_host"], pair["address"], pair["port"]) == ("d0", "p0", "10.3.0.1", 5557)
    (listener,) = checks["listeners"]
    assert listener["listen_argv"][-8:] == ["--address", "10.3.0.1", "--port", "5557", "--accept", "1", "--timeout", "15"]
    assert sorted(p["host"] for p in checks["ucx"]) == ["d0", "p0"] and checks["hosts"] == ["d0", "p0"]


def test_every_decode_meets_every_prefill():
    plan = golden("pd_cluster_tp")
    procs = plan["deployments"]["fleet"]["processes"]
    pre = next(p for p in procs if p.get("role") == "prefill")
    dec = next(p for p in procs if p.get("role") == "decode")
    for n in (1, 2):
        extra = copy.deepcopy(pre)
        extra.update(unit=f"vllm-fleet-prefill-{n}.service", host=f"p{n}")
        extra["env"]["VLLM_NIXL_SIDE_CHANNEL_HOST"] = f"10.3.1.{n}"
        procs.append(extra)
    extra = copy.deepcopy(dec)
    extra.update(unit="vllm-fleet-decode-1.service", host="d1")
    procs.append(extra)
    checks = F.fabric_checks(plan, SCRIPT)
    assert len(checks["pairs"]) == 6 and len(checks["listeners"]) == 3
    assert {(p["decode_host"], p["address"]) for p in checks["pairs"]} == {
        (d, a) for d in ("d0", "d1") for a in ("10.3.0.1", "10.3.1.1", "10.3.1.2")}
    assert all(lst["listen_argv"][lst["listen_argv"].index("--accept") + 1] == "2" for lst in checks["listeners"])


def test_report_line_gives_the_slowest_bandwidth_and_worst_latency():
    checks = F.fabric_checks(golden("multi_node_tp_pp"), SCRIPT)
    r0, r1 = checks["ranks"]
    report = F.fabric_report(checks, [rank_result(r0, stdout="noise\n" + ok_line(0, 1.5, 0.0004)),
                                      rank_result(r1, stdout=ok_line(1, 1.2, 0.0009))])
    assert report["passed"] and report["failures"] == []
    assert report["lines"] == ["fleet: nccl all-reduce over eth1 2 ranks: busbw 1.20 GB/s (16 MiB), latency 0.90 ms"]


def test_slow_links_read_in_megabytes():
    checks = F.fabric_checks(golden("multi_node_tp_pp"), SCRIPT)
    r0, r1 = checks["ranks"]
    report = F.fabric_report(checks, [rank_result(r0, stdout=ok_line(0, 0.0665)), rank_result(r1, stdout=ok_line(1, 0.07))])
    assert "busbw 66.5 MB/s" in report["lines"][0]


def test_a_failed_rank_names_host_interface_address_master_and_the_error():
    checks = F.fabric_checks(golden("multi_node_tp_pp"), SCRIPT)
    r0, r1 = checks["ranks"]
    error = json.dumps({"probe": "collective", "ok": False, "error": "RuntimeError: no device nosuch0",
                        "env": {"GLOO_SOCKET_IFNAME": "nosuch0"}})
    report = F.fabric_report(checks, [rank_result(r0, stdout=ok_line(0)),
                                      rank_result(r1, rc=1, stdout=error, stderr="Traceback\n  line\n  ^^^^\nboom: gloo\n")])
    assert not report["passed"]
    (message,) = report["failures"]
    # the interface the probe container saw (its fabric env file), not only the plan's
    for part in ("b:", "rank 1 of 2", "interface nosuch0", "address 10.3.0.2", "master 10.3.0.1:29601",
                 "RuntimeError: no device nosuch0", "stderr: Traceback | line | boom: gloo"):
        assert part in message
    assert report["lines"][0].endswith("FAILED (1 of 2 ranks)")


def test_the_outer_timeout_and_a_missing_result_are_failures_too():
    checks = F.fabric_checks(golden("multi_node_tp_pp"), SCRIPT, timeout_s=5)
    r0, _r1 = checks["ranks"]
    report = F.fabric_report(checks, [rank_result(r0, rc=124)])
    first, second = report["failures"]
    assert first.startswith("a:") and "no answer within 5 s" in first
    assert second.startswith("b:") and "did not run on this host" in second


def test_a_rank_that_printed_ok_but_exited_nonzero_failed():
    checks = F.fabric_checks(golden("multi_node_tp_pp"), SCRIPT)
    r0, r1 = checks["ranks"]
    report = F.fabric_report(checks, [rank_result(r0, stdout=ok_line(0)), rank_result(r1, rc=1, stdout=ok_line(1))])
    assert not report["passed"]


def test_unreachable_side_channel_names_the_pair_and_the_decode_interface():
    checks = F.fabric_checks(golden("pd_cluster_tp"), SCRIPT)
    (pair,) = checks["pairs"]
    ok = F.fabric_report(checks, pairs=[{"item": pair, "elapsed": 0}])
    assert ok["passed"] and "d0 -> p0 KV side channel 10.3.0.1:5557: reachable" in ok["lines"]
    bad = F.fabric_report(checks, pairs=[{"item": pair, "failed": True, "msg": "Timeout when waiting for 10.3.0.1:5557"}])
    (message,) = bad["failures"]
    assert message.startswith("d0: cannot reach vllm-fleet-prefill-0.service on p0 at 10.3.0.1:5557")
    assert "address 10.3.0.2" in message and "Timeout when waiting" in message


def test_ucx_without_ucx_info_is_reported_not_failed():
    checks = F.fabric_checks(golden("pd_cluster_tp"), SCRIPT)
    pair = checks["pairs"][0]
    ucx = [{"item": probe, "rc": 0, "stdout": json.dumps({"probe": "ucx", "ok": True, "ucx_info": None})}
           for probe in checks["ucx"]]
    report = F.fabric_report(checks, pairs=[{"item": pair}], ucx=ucx)
    assert report["passed"]
    assert "d0 vllm-fleet-decode-0.service UCX: ucx_info not in image" in report["lines"]


@pytest.mark.parametrize("setting,fails", [("fail", True), ("warn", False)])
def test_rdma_declared_but_only_tcp_fails_or_warns(setting, fails):
    probe = {"host": "d0", "unit": "u.service", "rdma": F.rdma_declared({"UCX_NET_DEVICES": "mlx5_0:1,eth1"})}
    assert probe["rdma"] == ["mlx5_0:1"]
    tcp_only = {"stdout": json.dumps({"ucx_info": "/usr/bin/ucx_info", "transports": ["self", "sysv", "tcp"]})}
    line, failed, warned = F.ucx_line(probe, tcp_only, setting)
    assert line.endswith("RDMA FALLBACK") and bool(failed) is fails and bool(warned) is not fails
    assert "mlx5_0:1" in (failed + warned)[0] and "fall back to TCP" in (failed + warned)[0]
    rdma = {"stdout": json.dumps({"ucx_info": "/usr/bin/ucx_info", "transports": ["rc_mlx5", "tcp"]})}
    assert F.ucx_line(probe, rdma, setting)[1:] == ([], [])


def test_rdma_names():
    assert F.rdma_declared({"NCCL_IB_HCA": "=mlx5_0,mlx5_1", "UCX_NET_DEVICES": "all"}) == ["=mlx5_0", "mlx5_1"]
    assert F.rdma_declared({"UCX_NET_DEVICES": "eth0,enp1s0"}) == []


def test_device_options_keep_devices_and_drop_identity_env_ports_and_caches():
    exec_start = ["/usr/bin/docker", "run", "--rm", "--name", "x", "--device", "/dev/kfd", "--device=/dev/dri",
                  "--group-add", "video", "--network", "host", "-p", "8000:8000", "-e", "A=1", "--env-file", "/e",
                  "-v", "/root/.cache/huggingface:/root/.cache/huggingface", "-v", "/usr/local/dcmi:/usr/local/dcmi:ro",
                  "--privileged", "--shm-size", "16g", "img:1", "model", "--port", "8000"]
    assert F.device_options(exec_start, "img:1") == [
        "--device", "/dev/kfd", "--device=/dev/dri", "--group-add", "video", "-v",
        "/usr/local/dcmi:/usr/local/dcmi:ro", "--privileged", "--shm-size", "16g"]
    assert F.device_options(["/usr/bin/python3", "x"], "img:1") == []


def test_device_options_never_mount_the_engines_own_files():
    """The probe runs before the engine play writes the secret env file: docker would create the
    missing source as a directory, and the engine play then failed on it (CI, multi_node)."""
    exec_start = ["/usr/bin/docker", "run", "--rm", "-v", "/etc/vllm-fleet/d/u.secret.env:/run/vllm-fleet/secret.env:ro",
                  "-v", "/etc/vllm-fleet/d/extra.json:/cfg/extra.json:ro", "-v", "/var/cache/c:/root/.cache/vllm",
                  "-v", "/usr/local/Ascend/driver:/usr/local/Ascend/driver:ro", "--entrypoint", "/bin/sh", "img:1"]
    assert F.device_options(exec_start, "img:1", "/etc/vllm-fleet/d") == [
        "-v", "/usr/local/Ascend/driver:/usr/local/Ascend/driver:ro"]


def _plan_with_api_key() -> dict:
    fleet = seed_fleet(dict(SEED, strategy="multi_node_tp_pp", api_key="sk-fabricCHECKtest0123456789"), ["a", "b"])
    return json.loads(R.render(fleet)["plan.json"])


def test_probe_containers_of_a_plan_with_an_api_key_mount_no_file_the_deploy_writes():
    plan = _plan_with_api_key()
    written = {f["dest"] for host in plan["hosts"].values() for f in host.get("files") or []}
    assert any(d.endswith(".secret.env") for d in written), "the plan writes a secret env file"
    checks = F.fabric_checks(plan, SCRIPT)
    assert checks["ranks"], "the plan has a multi-node group"
    for rank in checks["ranks"]:
        sources = {a.split(":")[0] for a in rank["argv"][1:] if a.startswith("/") and ":" in a}
        assert not sources & written, (rank["unit"], sources & written)


@settings(max_examples=60, derandomize=True, deadline=None)
@given(n=st.integers(min_value=2, max_value=64), nbytes=st.integers(min_value=1, max_value=1 << 30),
       seconds=st.floats(min_value=1e-6, max_value=100.0))
def test_busbw_is_algbw_times_two_n_minus_one_over_n(n, nbytes, seconds):
    # the bus bandwidth the script reports (nccl-tests' definition) is never above 2x algbw,
    # and equals algbw exactly for two ranks
    busbw = nbytes * 2 * (n - 1) / n / seconds
    algbw = nbytes / seconds
    assert algbw <= busbw < 2 * algbw or n == 1
    if n == 2:
        assert busbw == pytest.approx(algbw)
