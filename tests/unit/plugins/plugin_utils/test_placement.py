"""Placement: bind REAL upstream resolutions (and the engine's) to inventory hosts.

Every argv placed on a host must equal the recipes site's own argv for that
rank with the placeholders filled from the inventory; nothing may be left
unresolved, and every per-node variable must name that node.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _argv_tools as A
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _placement as P
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _plan_view as V
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._inventory import InventoryError
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._render import render_env_file
from fleet_corpus import CorpusEngine, drained, hardware_profiles, load_cases

HF_IDS = (
    "Qwen/Qwen3.8-2.4T-A95B",
    "microsoft/Phi-4-multimodal-instruct",
    "Google/gemma-4-26B-A4B-it",
    "MiniMaxAI/MiniMax-M2",
    "LiquidAI/LFM2.5-1.2B-Base",
)


# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def corpus(shared_dir):
    return load_cases(shared_dir, HF_IDS), hardware_profiles(shared_dir)


def engine_for(corpus, **match) -> CorpusEngine:
    cases, profiles = corpus
    match.setdefault("variant", "default")
    match.setdefault("advanced_args", [])
    match.setdefault("feature_modes", {})
    return CorpusEngine.for_selection(cases, profiles, **match)


def addr(index: int) -> str:
    return f"10.1.0.{10 + index}"


def inventory(deployment: dict, hosts: list[str], *, group: str = "dep",
              children: dict[str, list[str]] | None = None, host_vars: dict | None = None,
              common: dict | None = None) -> tuple[dict, dict]:
    hostvars = {}
    for index, host in enumerate(hosts):
        values = {"ansible_host": addr(index), "vllm_fabric_interface": "ens5",
                  "vllm_deployment": deployment}
        values.update(common or {})
        values.update((host_vars or {}).get(host, {}))
        hostvars[host] = values
    groups = {"all": list(hosts), "ungrouped": [], group: list(hosts)}
    for name, members in (children or {}).items():
        groups[name] = list(members)
    return hostvars, groups


def place(engine: CorpusEngine, deployment: dict, hosts: list[str], **kw: Any) -> P.FleetPlan:
    hostvars, groups = inventory(deployment, hosts, **kw)
    return P.build_plan(hostvars, groups, engine.bind)


def by_unit(fleet: P.FleetPlan) -> dict[str, P.Process]:
    """Every process except the group watchdogs (tested on their own)."""
    return {p.unit: p for d in fleet.deployments for p in d.processes if p.kind != "watchdog"}


def filled(value: Any, mapping: dict[str, str]) -> Any:
    return P.fill_placeholders(value, mapping)


def assert_no_placeholders(fleet: P.FleetPlan) -> None:
    data = P.plan_to_dict(fleet)
    for dep in data["deployments"].values():
        dep = {k: v for k, v in dep.items() if k != "resolutions"}
        assert P.find_placeholders(dep) == [], dep


# --------------------------------------------------------------------------------------
# pure helpers
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv, need", [
    (["vllm", "serve", "m"], 1),
    (["vllm", "serve", "m", "--tensor-parallel-size", "8"], 8),
    (["vllm", "serve", "m", "-tp", "4"], 4),
    (["vllm", "serve", "m", "--tensor-parallel-size=2", "--pipeline-parallel-size", "2"], 4),
    (["vllm", "serve", "m", "--tensor-parallel-size", "16", "--nnodes", "2"], 8),
    (["vllm", "serve", "m", "--tensor-parallel-size", "8", "--pipeline-parallel-size", "3", "--nnodes", "3"], 8),
    (["vllm", "serve", "m", "--data-parallel-size", "24", "--data-parallel-size-local", "8"], 8),
    (["vllm", "serve", "m", "--tensor-parallel-size", "8", "--data-parallel-size", "3",
      "--data-parallel-size-local", "1"], 8),
    (["vllm", "serve", "m", "--data-parallel-size", "4", "--tensor-parallel-size", "2"], 8),
])
def test_gpus_per_node(argv, need):
    assert A.engine_args(argv).gpus_per_node == need


@pytest.mark.parametrize("value, mapping, expected", [
    ("$HEAD_IP", {"HEAD_IP": "10.0.0.1"}, "10.0.0.1"),
    ("http://$PREFILL_NODE_1:8001", {"PREFILL_NODE_1": "a"}, "http://a:8001"),
    ("$PREFILL_NODE_10", {"PREFILL_NODE_1": "a", "PREFILL_NODE_10": "b"}, "b"),
    ("${ROUTER_PORT}", {"ROUTER_PORT": "30000"}, "30000"),
    ("$UNKNOWN", {}, "$UNKNOWN"),
    (["-e", "X=$IFACE_NAME"], {"IFACE_NAME": "ens5"}, ["-e", "X=ens5"]),
    ({"device_name": "$MOONCAKE_DEVICE_NAME", "n": 0}, {"MOONCAKE_DEVICE_NAME": ""},
     {"device_name": "", "n": 0}),
])
def test_fill_placeholders(value, mapping, expected):
    assert P.fill_placeholders(value, mapping) == expected


def test_find_placeholders_walks_keys_lists_and_values():
    assert P.find_placeholders({"a": ["x $B", {"c": "${D}"}], "$E": 1}) == ["B", "D", "E"]


@pytest.mark.parametrize("command, argv", [
    ("vllm-router --policy round_robin \\\n    --prefill http://$P:8001 \\\n    --port 1",
     ["vllm-router", "--policy", "round_robin", "--prefill", "http://$P:8001", "--port", "1"]),
    ("# comment\n# another\nmooncake_master \\\n  -rpc_port=50051 \\\n  -logtostderr",
     ["mooncake_master", "-rpc_port=50051", "-logtostderr"]),
    ("# a note ending in a backslash \\\nmooncake_master -v=1  # trailing note\n",
     ["mooncake_master", "-v=1"]),
    ("vllm-router --policy 'a # b' \\\n  --port 1", ["vllm-router", "--policy", "a # b", "--port", "1"]),
])
def test_shell_words(command, argv):
    assert A.shell_words(command) == argv


def test_shell_words_refuses_an_unbalanced_quote():
    with pytest.raises(ValueError):
        A.shell_words("mooncake_master '-rpc_port=1")


def test_recorded_resolver_replays_and_names_missing_overrides():
    resolver = P.RecordedResolver([{"overrides": {"node_count": 2}, "resolution": {"deployType": "x"}}])
    assert resolver({"node_count": 2}) == {"deployType": "x"}
    with pytest.raises(P.PlacementError, match="recorded resolution"):
        resolver({"node_count": 3})


# --------------------------------------------------------------------------------------
# single node (corpus)
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("hf_id, hardware, features, vendor, device_flags", [
    ("Qwen/Qwen3.8-2.4T-A95B", "h200", ["tool_calling", "reasoning"], "nvidia",
     ["--gpus", "all", "--ipc=host"]),
    ("Qwen/Qwen3.8-2.4T-A95B", "mi300x", ["tool_calling", "reasoning"], "amd",
     ["--device", "/dev/kfd", "--device", "/dev/dri", "--group-add", "video", "--ipc=host"]),
    ("microsoft/Phi-4-multimodal-instruct", "mi355x", [], "amd",
     ["--device", "/dev/kfd", "--device", "/dev/dri", "--group-add", "video", "--ipc=host"]),
])
def test_single_node_matches_upstream_argv(corpus, hf_id, hardware, features, vendor, device_flags):
    engine = engine_for(corpus, hf_id=hf_id, strategy="single_node_tp", hardware=hardware,
                        features=features, kv_offload=None)
    case = engine.resolve({})
    fleet = place(engine, {"recipe": hf_id, "strategy": "single_node_tp", "hardware": hardware}, ["node-a"])
    (proc,) = by_unit(fleet).values()
    assert proc.unit == "vllm-dep" and proc.host == "node-a" and proc.role == "single"
    assert proc.argv == drained(case["argv"])
    assert fleet.deployments[0].vendor == vendor
    # hardened: vendor flags, no --privileged, published port, env only through the file
    exec_argv = proc.exec_argv
    assert exec_argv[:5] == ["/usr/bin/docker", "run", "--rm", "--name", "vllm-dep"]
    assert exec_argv[5:5 + len(device_flags)] == device_flags
    assert "--privileged" not in exec_argv and "-e" not in exec_argv
    assert exec_argv[exec_argv.index("-p"):exec_argv.index("-p") + 2] == ["-p", "8000:8000"]
    assert exec_argv[exec_argv.index("--env-file") + 1] == "/etc/vllm-fleet/dep/vllm-dep.env"
    image = case["docker"]["image"]
    assert exec_argv[exec_argv.index(image) + 1:] == drained(case["argv"])[2:]
    visible = "CUDA_VISIBLE_DEVICES" if vendor == "nvidia" else "ROCR_VISIBLE_DEVICES"
    assert proc.env[visible] == ",".join(str(i) for i in range(A.engine_args(case["argv"]).gpus_per_node))
    assert "VLLM_HOST_IP" not in proc.env  # bridge network: the host IP is not in the container
    assert proc.ports == [P.Port(8000, "api")]
    assert proc.health_url == f"http://{addr(0)}:8000/health"
    assert_no_placeholders(fleet)


def test_single_node_upstream_profile_is_the_recipes_site_argv(corpus):
    engine = engine_for(corpus, hf_id="Qwen/Qwen3.8-2.4T-A95B", strategy="single_node_tp", hardware="h200",
                        features=["tool_calling", "reasoning"], kv_offload=None)
    upstream = engine.resolve({})["docker"]["processes"]["single"]["argv"]
    fleet = place(engine, {"recipe": "x/y", "strategy": "single_node_tp", "hardware": "h200",
                           "container_profile": "upstream"}, ["node-a"])
    (proc,) = by_unit(fleet).values()
    # Only the systemd wrapping differs: --rm --name --env-file after `run`, `~` expanded; the drain.
    wrapped = ["/usr/bin/docker", "run", "--rm", "--name", "vllm-dep", "--env-file",
               "/etc/vllm-fleet/dep/vllm-dep.env"]
    expected = wrapped + drained([t.replace("~/.cache/huggingface", "/root/.cache/huggingface") for t in upstream[2:]])
    assert proc.exec_argv == expected
    assert "--privileged" in proc.exec_argv  # upstream's own flags are kept verbatim


# --------------------------------------------------------------------------------------
# multi node (corpus): every rank's argv, head first, workers headless
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("hf_id, strategy, hardware, features, nodes", [
    ("microsoft/Phi-4-multimodal-instruct", "multi_node_tp", "h200", [], 2),
    ("microsoft/Phi-4-multimodal-instruct", "multi_node_tp", "mi300x", [], 3),
    ("MiniMaxAI/MiniMax-M2", "multi_node_tp_pp", "h200", ["tool_calling", "reasoning"], 3),
    ("Google/gemma-4-26B-A4B-it", "multi_node_dep", "h200", ["tool_calling", "reasoning"], 3),
    ("Google/gemma-4-26B-A4B-it", "multi_node_tep", "mi355x", ["tool_calling", "reasoning"], 4),
    ("Qwen/Qwen3.8-2.4T-A95B", "multi_node_tp_dp", "h200", ["tool_calling", "reasoning"], 3),
])
def test_multi_node_every_rank_matches_upstream(corpus, hf_id, strategy, hardware, features, nodes):
    engine = engine_for(corpus, hf_id=hf_id, strategy=strategy, hardware=hardware, features=features,
                        kv_offload=None)
    case = engine.resolve({"node_count": nodes})
    hosts = [f"n{i}" for i in range(nodes)]
    # reverse the inventory order, then pin ranks explicitly: rank follows vllm_node_rank
    hosts_rev = list(reversed(hosts))
    rank_vars = {h: {"vllm_node_rank": int(h[1:])} for h in hosts}
    hostvars, groups = inventory({"recipe": hf_id, "strategy": strategy, "hardware": hardware}, hosts_rev,
                                 host_vars=rank_vars)
    fleet = P.build_plan(hostvars, groups, engine.bind)
    procs = by_unit(fleet)
    head_addr = hostvars["n0"]["ansible_host"]
    mapping = {"HEAD_IP": head_addr, "IFACE_NAME": "ens5"}
    head = procs["vllm-dep-rank0"]
    assert head.host == "n0" and head.role == "head"
    assert head.argv == drained(filled(case["headArgv"], mapping))
    for rank in range(1, nodes):
        worker = procs[f"vllm-dep-rank{rank}"]
        assert worker.host == f"n{rank}" and worker.rank == rank
        assert worker.argv == drained(filled(case["workerArgvs"][rank - 1], mapping))
        assert worker.start_order < head.start_order  # followers first, head last
        assert worker.restart_group == head.restart_group
    for proc in procs.values():
        assert proc.env["NCCL_SOCKET_IFNAME"] == proc.env["GLOO_SOCKET_IFNAME"] == "ens5"
        assert proc.env["VLLM_HOST_IP"] == hostvars[proc.host]["ansible_host"]
        assert proc.exec_argv[proc.exec_argv.index("--network"):][:2] == ["--network", "host"]
        assert "-p" not in proc.exec_argv
        for key, _value in case["env"].items():
            assert key in proc.env
    assert_no_placeholders(fleet)
    assert fleet.deployments[0].endpoint == f"http://{head_addr}:8000"


def test_multi_node_head_opens_rendezvous_ports(corpus):
    engine = engine_for(corpus, hf_id="microsoft/Phi-4-multimodal-instruct", strategy="multi_node_tp",
                        hardware="h200", features=[], kv_offload=None)
    fleet = place(engine, {"recipe": "m", "strategy": "multi_node_tp", "hardware": "h200",
                           "ports": {"master": 29600}}, ["a", "b"])
    procs = by_unit(fleet)
    assert procs["vllm-dep-rank0"].argv[-4:] == ["--master-port", "29600", "--shutdown-timeout", "30"]
    assert P.Port(29600, "mp-master") in procs["vllm-dep-rank0"].ports
    assert procs["vllm-dep-rank1"].ports == []  # headless worker: no API server


# --------------------------------------------------------------------------------------
# PD (corpus): co-located, 1+1, 2+1 with a multi-node prefill pool
# --------------------------------------------------------------------------------------

PD = dict(hf_id="Qwen/Qwen3.8-2.4T-A95B", strategy="pd_cluster", hardware="h200",
          features=["tool_calling", "reasoning"], kv_offload=None)


def test_pd_colocated_pair_splits_one_node(corpus):
    engine = engine_for(corpus, **PD)
    case = engine.resolve({"pd_nodes": None})
    fleet = place(engine, {"recipe": "q", "strategy": "pd_cluster", "hardware": "h200"}, ["gpu", "rtr"],
                  host_vars={"rtr": {"vllm_pd_role": "router"}})
    procs = by_unit(fleet)
    pre, dec, router = procs["vllm-dep-prefill-0"], procs["vllm-dep-decode-0"], procs["vllm-dep-router"]
    assert pre.host == dec.host == "gpu" and router.host == "rtr"
    mapping = {"PREFILL_NODE_1": addr(0), "DECODE_NODE_1": addr(0)}
    assert pre.argv == drained(filled(case["prefill"]["argv"], mapping))
    assert dec.argv == drained(filled(case["decode"]["argv"], mapping))
    # the recipe pins halves of the node; placement keeps them (no overlap, no collision)
    assert pre.env["CUDA_VISIBLE_DEVICES"] == case["prefill"]["env"]["CUDA_VISIBLE_DEVICES"]
    assert dec.env["CUDA_VISIBLE_DEVICES"] == case["decode"]["env"]["CUDA_VISIBLE_DEVICES"]
    assert not set(pre.gpus) & set(dec.gpus)
    # two vLLMs on one host network: distinct internal port bases (EADDRINUSE otherwise)
    assert pre.env["VLLM_PORT"] != dec.env["VLLM_PORT"]
    assert {p.number for p in pre.ports} == {8001, 5557}
    assert {p.number for p in dec.ports} == {8002, 5558}
    assert pre.env["VLLM_NIXL_SIDE_CHANNEL_HOST"] == addr(0)
    # the site's router command, plus our one deviation: a reachable Prometheus port (docs/observability.md)
    assert router.argv == filled(A.shell_words(case["router"]["command"]),
                                 {**mapping, "ROUTER_HOST": "0.0.0.0", "ROUTER_PORT": "30000"}) + [
        "--prometheus-port", "29000", "--prometheus-host", "0.0.0.0"]
    assert router.exec_argv[0] == "/opt/vllm-router/bin/vllm-router"
    assert fleet.deployments[0].endpoint == f"http://{addr(1)}:30000"
    assert_no_placeholders(fleet)


@pytest.mark.parametrize("prefill, decode", [(1, 1), (2, 1)])
def test_pd_pools_from_child_groups(corpus, prefill, decode):
    engine = engine_for(corpus, **PD)
    pre_hosts = [f"p{i}" for i in range(prefill)]
    dec_hosts = [f"d{i}" for i in range(decode)]
    hosts = pre_hosts + dec_hosts + ["r"]
    fleet = place(engine, {"recipe": "q", "strategy": "pd_cluster", "hardware": "h200"}, hosts,
                  children={"dep_prefill": pre_hosts, "dep_decode": dec_hosts, "dep_router": ["r"]})
    procs = by_unit(fleet)
    mapping = {f"PREFILL_NODE_{i + 1}": addr(i) for i in range(prefill)}
    mapping.update({f"DECODE_NODE_{i + 1}": addr(prefill + i) for i in range(decode)})
    mapping.update(IFACE_NAME="ens5", ROUTER_HOST="0.0.0.0", ROUTER_PORT="30000",
                   PREFILL_DP_RPC_PORT="29550", DECODE_DP_RPC_PORT="29551")
    for role, pool in (("prefill", pre_hosts), ("decode", dec_hosts)):
        for rank, host in enumerate(pool):
            view = engine.resolve({"pd_nodes": {
                "prefill": {"nodes": prefill, "rank": min(rank, prefill - 1)},
                "decode": {"nodes": decode, "rank": min(rank, decode - 1)}}})
            proc = procs[f"vllm-dep-{role}-{rank}"]
            assert proc.host == host
            assert proc.argv == drained(filled(view[role]["argv"], mapping))
            # NIXL binds on this node's own routable IP, whatever rank-0 view the recipe shows
            assert proc.env["VLLM_NIXL_SIDE_CHANNEL_HOST"] == addr(hosts.index(host))
            assert proc.env["VLLM_HOST_IP"] == addr(hosts.index(host))
    router = procs["vllm-dep-router"]
    assert router.host == "r"
    assert sum(1 for t in router.argv if t.startswith("http://")) >= 2
    if prefill > 1:
        worker = procs["vllm-dep-prefill-1"]
        assert "--headless" in worker.argv and worker.api_port is None
        assert worker.env["NCCL_SOCKET_IFNAME"] == "ens5"
        assert worker.start_order < procs["vllm-dep-prefill-0"].start_order
    assert_no_placeholders(fleet)


def test_pd_roles_from_host_variable(corpus):
    engine = engine_for(corpus, **PD)
    fleet = place(engine, {"recipe": "q", "strategy": "pd_cluster", "hardware": "h200"}, ["a", "b", "c"],
                  host_vars={"a": {"vllm_pd_role": "decode"}, "b": {"vllm_pd_role": "prefill"},
                             "c": {"vllm_pd_role": ["router"]}})
    procs = by_unit(fleet)
    assert procs["vllm-dep-prefill-0"].host == "b"
    assert procs["vllm-dep-decode-0"].host == "a"
    assert procs["vllm-dep-router"].host == "c"


# --------------------------------------------------------------------------------------
# Mooncake kv_store_lb (corpus)
# --------------------------------------------------------------------------------------

def test_kv_store_two_single_node_instances_with_router_master_and_store(corpus):
    engine = engine_for(corpus, hf_id="microsoft/Phi-4-multimodal-instruct", strategy="single_node_tp",
                        hardware="h200", features=[], kv_offload="kv_store_centralized_mooncake")
    fleet = place(engine, {"recipe": "phi", "strategy": "single_node_tp", "hardware": "h200",
                           "kv_offload": "kv_store_centralized_mooncake", "kv_instances": 2},
                  ["i0", "i1", "svc", "store"],
                  host_vars={"svc": {"vllm_pd_role": "router", "vllm_mooncake_role": "master"},
                             "store": {"vllm_mooncake_role": "store", "vllm_mooncake_device": "mlx5_0"}})
    procs = by_unit(fleet)
    plan = fleet.deployments[0]
    assert plan.deploy_type == "kv_store_lb"
    assert procs["vllm-dep-i0"].host == "i0" and procs["vllm-dep-i1"].host == "i1"
    assert procs["vllm-dep-mooncake-master"].host == "svc"
    assert procs["vllm-dep-mooncake-master"].exec_argv[0] == "/opt/mooncake/bin/mooncake_master"
    assert procs["vllm-dep-mooncake-store"].host == "store"
    assert procs["vllm-dep-mooncake-store"].argv[-1] == "/etc/vllm-fleet/dep/mooncake-store.json"
    router = procs["vllm-dep-router"]
    # The recipe's --backend-url is not a flag of the pinned vllm-router 0.1.17: --worker-urls is.
    assert "--backend-url" not in router.argv
    workers = router.argv.index("--worker-urls")
    assert router.argv[workers + 1:workers + 3] == [f"http://{addr(0)}:8000", f"http://{addr(1)}:8000"]
    # the recipe's router port, and vllm-router's metrics port (collision-checked like any other)
    assert router.ports == [P.Port(30080, "router"), P.Port(29000, "router-metrics")]
    for inst in ("vllm-dep-i0", "vllm-dep-i1"):
        proc = procs[inst]
        assert proc.env["MOONCAKE_CONFIG_PATH"] == "/etc/vllm-fleet/dep/mooncake.json"
        assert ("/etc/vllm-fleet/dep/mooncake.json", "/etc/vllm-fleet/dep/mooncake.json", "ro") in proc.mounts
        assert proc.exec_argv[proc.exec_argv.index("--network"):][:2] == ["--network", "host"]
    configs = {(c.host, c.name): c.content for c in plan.config_files}
    assert configs[("i0", "mooncake.json")]["master_server_address"] == f"{addr(2)}:50051"
    assert configs[("i0", "mooncake.json")]["device_name"] == ""
    assert configs[("store", "mooncake-store.json")]["device_name"] == "mlx5_0"
    assert ("svc", "mooncake.json") not in configs
    assert plan.start_timeout >= 1
    orders = {p.unit: p.start_order for p in plan.processes}
    assert orders["vllm-dep-mooncake-master"] < orders["vllm-dep-mooncake-store"] < orders["vllm-dep-i0"] \
        < orders["vllm-dep-router"]
    assert_no_placeholders(fleet)


def test_kv_store_multi_node_instance(corpus):
    engine = engine_for(corpus, hf_id="microsoft/Phi-4-multimodal-instruct", strategy="multi_node_tp",
                        hardware="h200", features=[], kv_offload="kv_store_centralized_mooncake")
    view = engine.resolve({"node_count": 2, "kv_instances": {"count": 1, "current": 0}})
    fleet = place(engine, {"recipe": "phi", "strategy": "multi_node_tp", "hardware": "h200",
                           "kv_offload": "kv_store_centralized_mooncake", "node_count": 2},
                  ["h", "w", "st"], host_vars={"st": {"vllm_mooncake_role": ["store", "master"]}})
    procs = by_unit(fleet)
    mapping = {"VLLM_INSTANCE_1": addr(0), "HEAD_IP": addr(0), "IFACE_NAME": "ens5"}
    assert procs["vllm-dep-i0-rank0"].argv == drained(filled(view["vllm"]["argv"], mapping))
    assert procs["vllm-dep-i0-rank1"].argv == drained(filled(view["vllm"]["workerArgvs"][0], mapping))
    assert procs["vllm-dep-i0-rank1"].host == "w"
    assert "vllm-dep-router" not in procs  # one instance: served directly
    assert procs["vllm-dep-mooncake-master"].host == "st"
    assert_no_placeholders(fleet)


# --------------------------------------------------------------------------------------
# several deployments per host: GPU split and port checks
# --------------------------------------------------------------------------------------

def two_on_one_host(corpus, second_ports: dict | None, gpu_vars: dict, profile: bool = True) -> P.FleetPlan:
    engine = engine_for(corpus, hf_id="LiquidAI/LFM2.5-1.2B-Base", strategy="single_node_tp",
                        hardware="h200", features=[], kv_offload=None)
    if not profile:
        engine.profile = None  # hardware without a known accelerator count
    base = {"recipe": "lfm", "strategy": "single_node_tp", "hardware": "h200"}
    second = dict(base, name="b", group="shared", **({"ports": second_ports} if second_ports else {}))
    hostvars = {"box": {"ansible_host": "10.9.0.1", **gpu_vars}}
    groups = {"all": ["box"], "shared": ["box"]}
    return P.build_plan(hostvars, groups, engine.bind,
                        deployments_list=[dict(base, name="a", group="shared"), second])


def test_two_deployments_share_a_host_with_distinct_gpus_and_ports(corpus):
    fleet = two_on_one_host(corpus, {"api": 8100}, {"vllm_gpu_count": 2})
    procs = by_unit(fleet)
    a, b = procs["vllm-a"], procs["vllm-b"]
    assert a.gpus == [0] and b.gpus == [1]
    assert a.env["CUDA_VISIBLE_DEVICES"] == "0" and b.env["CUDA_VISIBLE_DEVICES"] == "1"
    assert b.argv[-4:] == ["--port", "8100", "--shutdown-timeout", "30"] and b.exec_argv[b.exec_argv.index("-p"):b.exec_argv.index("-p") + 2] == \
        ["-p", "8100:8100"]
    assert fleet.gpu_assignment == {"box": {"a": [0], "b": [1]}}
    assert "VLLM_PORT" not in a.env  # bridge networking isolates internal ports


def test_compile_cache_is_one_mount_per_engine_and_the_operator_env_wins(corpus):
    engine = engine_for(corpus, hf_id="LiquidAI/LFM2.5-1.2B-Base", strategy="single_node_tp",
                        hardware="h200", features=[], kv_offload=None)
    base = {"recipe": "lfm", "strategy": "single_node_tp", "hardware": "h200"}
    (proc,) = by_unit(place(engine, base, ["a"])).values()
    argv = proc.exec_argv
    mounts = [argv[i + 1] for i, token in enumerate(argv) if token == "-v"]
    assert mounts == ["/root/.cache/huggingface:/root/.cache/huggingface",
                      "/var/cache/vllm-fleet/compile/vllm-dep:/root/.cache/vllm"]
    assert proc.compile_cache == "/var/cache/vllm-fleet/compile/vllm-dep"
    assert proc.env["TORCHINDUCTOR_CACHE_DIR"] == "/root/.cache/vllm/torchinductor"
    assert proc.env["TRITON_CACHE_DIR"] == "/root/.cache/vllm/triton"
    assert "-e" not in argv  # env only through the file
    assert V.process_to_dict(proc)["compile_cache"] == proc.compile_cache

    (own,) = by_unit(place(engine, dict(base, compile_cache_dir="/data/kernels/",
                                        extra_env={"TRITON_CACHE_DIR": "/scratch/triton"}), ["a"])).values()
    assert "/data/kernels/vllm-dep:/root/.cache/vllm" in own.exec_argv
    assert own.env["TRITON_CACHE_DIR"] == "/scratch/triton"

    for off in ({"compile_cache_dir": None}, {"container_profile": "upstream"}):
        (plain,) = by_unit(place(engine, dict(base, **off), ["a"])).values()
        assert plain.compile_cache == "" and "TORCHINDUCTOR_CACHE_DIR" not in plain.env
        assert not any(token.endswith(":/root/.cache/vllm") for token in plain.exec_argv)


@pytest.mark.parametrize("value, expected", [
    ("/etc/vllm-cache", "a directory of its own"),
    ("/var/cache", "a directory of its own"),
    ("/var/lib/docker/x", "a directory of its own"),
    ("kernels", "expected an absolute path"),
    ("/data/../etc", "without '.' or '..' components"),
])
def test_compile_cache_dir_refuses_system_and_relative_paths(corpus, value, expected):
    engine = engine_for(corpus, hf_id="LiquidAI/LFM2.5-1.2B-Base", strategy="single_node_tp",
                        hardware="h200", features=[], kv_offload=None)
    with pytest.raises(Exception, match="compile_cache_dir") as raised:
        place(engine, {"recipe": "lfm", "strategy": "single_node_tp", "hardware": "h200",
                       "compile_cache_dir": value}, ["a"])
    assert expected in str(raised.value)


def test_gpu_runtime_none_drops_device_flags(corpus):
    engine = engine_for(corpus, hf_id="LiquidAI/LFM2.5-1.2B-Base", strategy="single_node_tp",
                        hardware="h200", features=[], kv_offload=None)
    fleet = place(engine, {"recipe": "lfm", "strategy": "single_node_tp", "hardware": "h200",
                           "gpu_runtime": "none", "image": "registry.test:5000/vllm-standin:1"}, ["a"])
    (proc,) = by_unit(fleet).values()
    assert "--gpus" not in proc.exec_argv and "--device" not in proc.exec_argv
    assert "registry.test:5000/vllm-standin:1" in proc.exec_argv


def test_explicit_per_deployment_gpus(corpus):
    fleet = two_on_one_host(corpus, {"api": 8100},
                            {"vllm_gpus": [4, 5, 6, 7], "vllm_deployment_gpus": {"a": [6], "b": "7"}})
    procs = by_unit(fleet)
    assert procs["vllm-a"].gpus == [6] and procs["vllm-b"].gpus == [7]


def test_hardware_profile_gives_the_host_capacity(corpus):
    fleet = two_on_one_host(corpus, {"api": 8100}, {})  # h200: 8 accelerators per node
    assert fleet.gpu_assignment == {"box": {"a": [0], "b": [1]}}


@pytest.mark.parametrize("ports, gpu_vars, profile, message", [
    (None, {"vllm_gpu_count": 2}, True, "port 8000"),
    ({"api": 8100}, {"vllm_gpu_count": 1}, True, "at least 2 accelerators"),
    ({"api": 8100}, {}, False, "carries 2 deployments"),
    ({"api": 8100}, {"vllm_gpu_count": 4, "vllm_deployment_gpus": {"a": [0], "b": [0]}}, True, "assigned twice"),
    ({"api": 8100}, {"vllm_gpu_count": 4, "vllm_deployment_gpus": {"a": [5]}}, True, "among box's accelerators"),
])
def test_collisions_between_deployments_are_errors(corpus, ports, gpu_vars, profile, message):
    with pytest.raises(P.PlacementError, match=message):
        two_on_one_host(corpus, ports, gpu_vars, profile)


# --------------------------------------------------------------------------------------
# the seed recipe through the real engine (the three demo shapes and more)
# --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def seed(shared_dir):
    data = json.loads((shared_dir / "seed" / "GLM-5.3-Flash.json").read_text())
    return data["recommended_command"]


SEED = {"recipe": "zai-org/GLM-5.3-Flash", "hardware": "h200"}


def engine_plan(deployment: dict, hosts: list[str], **kw: Any) -> P.FleetPlan:
    hostvars, groups = inventory(deployment, hosts, **kw)
    return P.build_plan(hostvars, groups, P.engine_factory())


def test_seed_single_node_is_the_published_command(seed):
    fleet = engine_plan(dict(SEED, strategy="single_node_tp"), ["h200-a"])
    (proc,) = by_unit(fleet).values()
    assert proc.argv == drained(seed["argv"])
    assert proc.image == seed["docker_image"]
    assert fleet.deployments[0].start_timeout == int(seed["env"]["VLLM_ENGINE_READY_TIMEOUT_S"])
    for key, value in seed["env"].items():
        assert proc.env[key] == value


def test_seed_single_node_upstream_profile_matches_published_docker_argv(seed):
    fleet = engine_plan(dict(SEED, strategy="single_node_tp", container_profile="upstream"), ["h200-a"])
    (proc,) = by_unit(fleet).values()
    published = [t.replace("~/.cache/huggingface", "/root/.cache/huggingface") for t in seed["docker_argv"]]
    assert proc.exec_argv == ["/usr/bin/docker", "run", "--rm", "--name", proc.unit, "--env-file",
                              proc.env_file] + drained(published[2:])


def test_seed_multi_node_tp_pp():
    fleet = engine_plan(dict(SEED, strategy="multi_node_tp_pp"), ["b", "c"])
    procs = by_unit(fleet)
    head, worker = procs["vllm-dep-rank0"], procs["vllm-dep-rank1"]
    assert head.argv[head.argv.index("--master-addr") + 1] == addr(0)
    assert worker.argv[worker.argv.index("--master-addr") + 1] == addr(0)
    assert worker.argv[worker.argv.index("--node-rank") + 1] == "1" and "--headless" in worker.argv
    assert head.gpus == worker.gpus == list(range(8))
    assert_no_placeholders(fleet)


def test_seed_pd_two_prefill_dep_ranks_and_one_decode():
    deployment = dict(SEED, strategy="pd_cluster", pd={"prefill": {"parallelism": "dep"}})
    fleet = engine_plan(deployment, ["p0", "p1", "d0", "r"],
                        children={"dep_prefill": ["p0", "p1"], "dep_decode": ["d0"], "dep_router": ["r"]})
    procs = by_unit(fleet)
    p0, p1 = procs["vllm-dep-prefill-0"], procs["vllm-dep-prefill-1"]
    assert A.flag_value(p0.argv, "--data-parallel-start-rank") in (None, "0")
    assert A.flag_value(p1.argv, "--data-parallel-start-rank") == "8"
    assert A.flag_value(p1.argv, "--data-parallel-address") == addr(0)
    assert A.flag_value(p0.argv, "--data-parallel-rpc-port") == "29550"
    assert p1.env["VLLM_NIXL_SIDE_CHANNEL_HOST"] == addr(1)
    # each DP rank of the second node binds its own side-channel port
    assert {p.number for p in p1.ports if p.purpose == "nixl-side-channel"} == set(range(5557 + 8, 5557 + 16))
    router = procs["vllm-dep-router"]
    assert f"http://{addr(0)}:8001" in router.argv and f"http://{addr(1)}:8001" in router.argv
    assert_no_placeholders(fleet)


def test_seed_unknown_feature_surfaces_the_engine_error():
    from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._errors import SelectionError
    with pytest.raises(SelectionError, match="no_such_feature"):
        engine_plan(dict(SEED, strategy="single_node_tp", features=["no_such_feature"]), ["a"])


PINNED = {
    "multi_node_tp_pp": ({"strategy": "multi_node_tp_pp"}, ["b", "c"], {}),
    "pd_cluster_dep": ({"strategy": "pd_cluster", "pd": {"prefill": {"parallelism": "dep"}}}, ["p0", "p1", "d0", "r"],
                       {"children": {"dep_prefill": ["p0", "p1"], "dep_decode": ["d0"], "dep_router": ["r"]}}),
    "mooncake": ({"strategy": "single_node_tp", "kv_offload": "kv_store_centralized_mooncake", "kv_instances": 2},
                 ["a", "b", "r", "s"], {"children": {"dep_router": ["r"], "dep_mooncake_store": ["s"]}}),
}


@pytest.mark.parametrize("case", sorted(PINNED))
def test_resolution_file_pins_a_rendered_plan(tmp_path, case):
    selection, hosts, kw = PINNED[case]
    fleet = engine_plan(dict(SEED, **selection), hosts, **kw)
    pinned = P.plan_to_dict(fleet)["deployments"]["dep"]
    assert all("engines" in record["resolution"] for record in pinned["resolutions"])  # typed records
    pins = tmp_path / "pins.json"
    pins.write_text(json.dumps(pinned))
    again = engine_plan(dict(SEED, **selection, resolution_file=str(pins)), hosts, **kw)
    assert [(p.unit, p.exec_argv, p.env) for p in again.deployments[0].processes] == \
        [(p.unit, p.exec_argv, p.env) for p in fleet.deployments[0].processes]
    assert [(c.host, c.dest, c.content) for c in again.deployments[0].config_files] == \
        [(c.host, c.dest, c.content) for c in fleet.deployments[0].config_files]


def test_missing_fabric_interface_names_the_host_and_variable(corpus):
    engine = engine_for(corpus, hf_id="microsoft/Phi-4-multimodal-instruct", strategy="multi_node_tp",
                        hardware="h200", features=[], kv_offload=None)
    hostvars, groups = inventory({"recipe": "m", "strategy": "multi_node_tp", "hardware": "h200"}, ["a", "b"])
    del hostvars["b"]["vllm_fabric_interface"]
    with pytest.raises(InventoryError, match=r"hostvars\['b'\]\.vllm_fabric_interface.*fix: set vllm_fabric_interface"):
        P.build_plan(hostvars, groups, engine.bind)


def test_facts_supply_address_and_interface(corpus):
    engine = engine_for(corpus, hf_id="microsoft/Phi-4-multimodal-instruct", strategy="multi_node_tp",
                        hardware="h200", features=[], kv_offload=None)
    hostvars, groups = inventory({"recipe": "m", "strategy": "multi_node_tp", "hardware": "h200"}, ["a", "b"])
    for host in ("a", "b"):
        del hostvars[host]["vllm_fabric_interface"]
        hostvars[host]["ansible_host"] = f"{host}.example.net"
        hostvars[host]["ansible_default_ipv4"] = {"address": f"192.168.7.{ord(host)}", "interface": "bond0"}
    hostvars["b"]["vllm_fabric_address"] = "172.16.0.2"
    procs = by_unit(P.build_plan(hostvars, groups, engine.bind))
    assert procs["vllm-dep-rank0"].env["VLLM_HOST_IP"] == "192.168.7.97"
    assert procs["vllm-dep-rank1"].env["VLLM_HOST_IP"] == "172.16.0.2"
    assert procs["vllm-dep-rank1"].env["GLOO_SOCKET_IFNAME"] == "bond0"


def test_pd_engines_sharing_a_host_get_disjoint_side_channel_ranges():
    # two local DP ranks bind base and base + 1: the recipe's 5557 (prefill) and 5558 (decode) overlap
    deployment = dict(SEED, strategy="pd_cluster", advanced_args=["--data-parallel-size", "2"])
    fleet = engine_plan(deployment, ["g", "r"], host_vars={"r": {"vllm_pd_role": "router"}})
    procs = by_unit(fleet)
    pre, dec = procs["vllm-dep-prefill-0"], procs["vllm-dep-decode-0"]
    assert pre.host == dec.host == "g"
    side = {p.unit: sorted(x.number for x in p.ports if x.purpose == "nixl-side-channel") for p in (pre, dec)}
    assert side[pre.unit] == [5557, 5558]  # the lower base keeps the recipe's value
    assert side[dec.unit] == [5559, 5560]
    assert pre.env["VLLM_NIXL_SIDE_CHANNEL_PORT"] == "5557" and dec.env["VLLM_NIXL_SIDE_CHANNEL_PORT"] == "5559"
    # what the container gets is the moved value
    assert "VLLM_NIXL_SIDE_CHANNEL_PORT=5559" in render_env_file(fleet.deployments[0], dec).splitlines()


def test_pd_side_channel_port_from_extra_env_is_kept_and_a_clash_named():
    deployment = dict(SEED, strategy="pd_cluster", extra_env={"VLLM_NIXL_SIDE_CHANNEL_PORT": "6000"})
    with pytest.raises(P.PlacementError, match=r"port 6000.*remove VLLM_NIXL_SIDE_CHANNEL_PORT from extra_env"):
        engine_plan(deployment, ["g", "r"], host_vars={"r": {"vllm_pd_role": "router"}})
    fleet = engine_plan(deployment, ["p", "d", "r"], host_vars={"p": {"vllm_pd_role": "prefill"},
                                                                "d": {"vllm_pd_role": "decode"},
                                                                "r": {"vllm_pd_role": "router"}})
    assert {p.env["VLLM_NIXL_SIDE_CHANNEL_PORT"] for p in fleet.deployments[0].processes if p.kind == "engine"} == {"6000"}


def test_a_router_command_that_does_not_split_names_the_recipe_before_anything_is_placed():
    from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._plan_model import BoundEngine
    record = {"deployType": "kv_store_lb", "vllm": {"argv": ["vllm", "serve", "m"], "env": {}},
              "router": {"command": "vllm-router --policy 'cache_aware", "port": 30080}}
    hostvars, groups = inventory({"recipe": "org/m", "strategy": "single_node_tp", "hardware": "h200",
                                  "kv_offload": "kv_store_centralized_mooncake"}, ["a", "b"])
    with pytest.raises(P.PlacementError, match=r"vllm_deployment\[dep\]\.recipe.*router\.command: No closing quotation"):
        P.build_plan(hostvars, groups, lambda decl: BoundEngine(resolve=lambda overrides: record))
