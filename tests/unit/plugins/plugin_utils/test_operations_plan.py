"""Plan pieces the operations playbooks consume: replicas behind a router, rollout batches,
group watchdogs of multi-node groups (docs/operations.md). Built with the real engine on the
seed recipe (zai-org/GLM-5.3-Flash)."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _deployment_spec as PM_SPEC
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _placement as P
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _plan_model as PM
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._inventory import InventoryError
from fleets import example_fleet

RECIPE = "zai-org/GLM-5.3-Flash"


def fleet_of(deployment: dict[str, Any], hosts: dict[str, dict[str, Any]], group: str = "g") -> P.FleetPlan:
    hostvars = {}
    for index, (host, extra) in enumerate(hosts.items()):
        hostvars[host] = {"ansible_host": f"10.9.0.{index + 1}", "vllm_fabric_interface": "ens5",
                          "vllm_deployment": deployment, **extra}
    groups = {"all": list(hosts), "ungrouped": [], group: list(hosts)}
    return P.build_plan(hostvars, groups, P.engine_factory())


def replicas_fleet(count: int = 2, **extra: Any) -> P.FleetPlan:
    deployment = {"recipe": RECIPE, "hardware": "h200", "strategy": "single_node_tp", "replicas": count,
                  "router": {"policy": "round_robin"}, **extra}
    hosts: dict[str, dict[str, Any]] = {f"e{i}": {} for i in range(count)}
    hosts["lb"] = {"vllm_pd_role": "router"}
    return fleet_of(deployment, hosts)


def test_replicas_are_independent_copies_behind_a_round_robin_router():
    (plan,) = replicas_fleet(3).deployments
    engines = [p for p in plan.processes if p.kind == "engine"]
    assert [(p.unit, p.host, p.role, p.instance) for p in engines] == [
        ("vllm-g-r0", "e0", "replica", 0), ("vllm-g-r1", "e1", "replica", 1), ("vllm-g-r2", "e2", "replica", 2)]
    # every copy runs the same (single-node) argv; each is its own restart group
    assert len({tuple(p.argv) for p in engines}) == 1
    assert len({p.restart_group for p in engines}) == 3
    (router,) = [p for p in plan.processes if p.kind == "router"]
    assert router.host == "lb"
    urls = [p.health_url.removesuffix("/health") for p in engines]
    assert router.argv == ["vllm-router", "--host", "0.0.0.0", "--port", "30000", "--policy", "round_robin",
                           "--worker-urls", *urls, "--prometheus-port", "29000", "--prometheus-host", "0.0.0.0"]
    assert plan.endpoint == "http://10.9.0.4:30000"


def test_replicas_roll_one_at_a_time_drained_from_the_router():
    data = P.plan_to_dict(replicas_fleet(2))
    batches = data["deployments"]["g"]["rollout"]
    assert [b["name"] for b in batches] == ["g/replica0", "g/replica1", "g/router"]
    first = batches[0]
    assert first["hosts"] == ["e0"] and first["groups"] == ["g/replica0"]
    # each replica restarts with its watchdog (stopped first, started after the engine's gate)
    assert [b["kinds"] for b in batches] == [["engine", "watchdog"], ["engine", "watchdog"], ["router"]]
    assert first["drain"] == {"router_host": "lb", "router_url": "http://10.9.0.3:30000",
                              "worker_url": "http://10.9.0.1:8000"}
    (probe,) = first["probes"]
    assert probe["completions_url"] == "http://10.9.0.1:8000/v1/completions"
    assert probe["model"] == "zai-org/GLM-5.3-Flash"
    assert batches[2]["drain"] is None and batches[2]["probes"] == []
    # what a failed batch's rollback restores: the replica's unit, env file and manifest on its host only
    assert first["files"] == {"e0": ["/etc/systemd/system/vllm-g-r0-watchdog.service",
                                     "/etc/systemd/system/vllm-g-r0.service",
                                     "/etc/vllm-fleet/g/vllm-g-r0-watchdog.env", "/etc/vllm-fleet/g/vllm-g-r0.env",
                                     "/var/lib/vllm-fleet/units/vllm-g-r0-watchdog.service.json",
                                     "/var/lib/vllm-fleet/units/vllm-g-r0.service.json"]}
    assert batches[2]["files"] == {"lb": ["/etc/systemd/system/vllm-g-router.service",
                                          "/etc/vllm-fleet/g/router.json", "/etc/vllm-fleet/g/vllm-g-router.env",
                                          "/var/lib/vllm-fleet/units/vllm-g-router.service.json"]}


def test_multi_node_group_rolls_as_one_batch_and_gets_a_watchdog_per_rank():
    deployment = {"recipe": RECIPE, "hardware": "h200", "strategy": "multi_node_tp_pp",
                  "unit": {"watchdog_interval": 2, "watchdog_grace": 7}}
    fleet = fleet_of(deployment, {"n0": {}, "n1": {}})
    (plan,) = fleet.deployments
    dogs = [p for p in plan.processes if p.kind == "watchdog"]
    ranks = [p for p in plan.processes if p.kind == "engine"]
    assert sorted(d.unit for d in dogs) == ["vllm-g-rank0-watchdog", "vllm-g-rank1-watchdog"]
    head = next(p for p in ranks if p.role == "head")
    for dog in dogs:
        rank = next(p for p in ranks if p.host == dog.host)
        # the head's own watchdog also probes a completion: a lost follower leaves /health green
        probe = ["--probe-url", head.health_url[:-len("/health")] + "/v1/completions", "--model", "zai-org/GLM-5.3-Flash",
                 "--probe-every", "30", "--probe-timeout", "60"] if rank is head else []
        assert dog.exec_argv == [PM.WATCHDOG_PYTHON, PM.WATCHDOG_BINARY, "--unit", rank.unit_file, "--head-url", head.health_url,
                                 "--interval", "2", "--grace", "7", "--rearm-after", str(plan.start_timeout),
                                 "--state-file", f"/run/vllm-fleet/{rank.unit}.watchdog.json",
                                 "--container", rank.unit] + probe
        assert dog.restart_group == rank.restart_group and dog.start_order > head.start_order
        assert dog.ports == [] and dog.gpus == []
    (batch,) = P.plan_to_dict(fleet)["deployments"]["g"]["rollout"]
    assert batch["hosts"] == ["n0", "n1"] and batch["groups"] == ["g"] and batch["drain"] is None
    assert batch["kinds"] == ["engine", "watchdog"]


def test_the_heads_probe_reads_the_api_key_from_the_secret_file_and_can_be_turned_off():
    deployment = {"recipe": RECIPE, "hardware": "h200", "strategy": "multi_node_tp_pp", "api_key": "sk-never-in-argv"}
    (plan,) = fleet_of(deployment, {"n0": {}, "n1": {}}).deployments
    head = next(p for p in plan.processes if p.kind == "engine" and p.role == "head")
    dog = next(p for p in plan.processes if p.kind == "watchdog" and p.host == head.host)
    assert dog.exec_argv[dog.exec_argv.index("--secret-env") + 1] == head.secret_file
    assert "sk-never-in-argv" not in " ".join(dog.exec_argv) + " ".join(dog.env.values())
    off = {**deployment, "unit": {"watchdog_probe_interval": 0}}
    dogs = [p for p in fleet_of(off, {"n0": {}, "n1": {}}).deployments[0].processes if p.kind == "watchdog"]
    assert len(dogs) == 2 and not any("--probe-url" in d.exec_argv for d in dogs)


def test_watchdogs_can_be_turned_off():
    deployment = {"recipe": RECIPE, "hardware": "h200", "strategy": "multi_node_tp_pp",
                  "unit": {"watchdog": False}}
    (plan,) = fleet_of(deployment, {"n0": {}, "n1": {}}).deployments
    assert not [p for p in plan.processes if p.kind == "watchdog"]


def test_single_copy_has_no_router_and_one_batch():
    deployment = {"recipe": RECIPE, "hardware": "h200", "strategy": "single_node_tp"}
    fleet = fleet_of(deployment, {"a": {}})
    (batch,) = P.plan_to_dict(fleet)["deployments"]["g"]["rollout"]
    assert batch["hosts"] == ["a"] and batch["drain"] is None and len(batch["probes"]) == 1


@pytest.mark.parametrize("deployment, hosts, key", [
    ({"replicas": 3}, {"a": {}, "b": {}}, "vllm_deployment[g].replicas"),
    ({}, {"a": {}, "b": {}}, "vllm_deployment[g].group"),
    ({"replicas": 2, "router": {"policy": "fastest"}}, {"a": {}, "b": {}}, "router.policy"),
])
def test_bad_replica_declarations_name_the_key(deployment, hosts, key):
    base = {"recipe": RECIPE, "hardware": "h200", "strategy": "single_node_tp"}
    with pytest.raises(InventoryError) as caught:
        fleet_of({**base, **deployment}, hosts)
    assert key in str(caught.value)


def test_secret_shim_exports_the_file_and_execs_the_program(tmp_path):
    """The container shim, run by a real /bin/sh: secrets (quoted as rendered) reach the program's
    environment, and the program is exec'd with its argv unchanged."""
    import subprocess

    from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _container, _render

    secret = "sk-with spaces'and$dollar"
    proc = P.Process(deployment="d", unit="u", kind="engine", role="single", host="h", address="10.0.0.1",
                     secret_env={"VLLM_API_KEY": secret})
    path = tmp_path / "secret.env"
    path.write_text(_render.render_secret_file(proc))
    shim = _container.SECRET_SHIM.replace(_container.SECRET_MOUNT, str(path))
    out = subprocess.run(["/bin/sh", "-c", shim, "vllm-fleet-secrets", "/bin/sh", "-c",
                          'printf "%s|%s" "$VLLM_API_KEY" "$1"', "prog", "first arg"],
                         capture_output=True, text=True, check=True, env={"PATH": "/usr/bin:/bin"})
    assert out.stdout == f"{secret}|first arg"


def test_pd_pools_and_their_router_roll_as_one_batch():
    fleet = example_fleet("pd_cluster")
    for name, dep in P.plan_to_dict(fleet)["deployments"].items():
        processes = dep["processes"]
        (batch,) = dep["rollout"]
        assert batch["name"] == name and batch["drain"] is None
        assert batch["groups"] == sorted({p["restart_group"] for p in processes})
        assert batch["hosts"] == sorted({p["host"] for p in processes})
        assert "router" in batch["kinds"] and "engine" in batch["kinds"]
        # every prefill and decode engine is probed with a one-token completion, the router is not
        engines = [p for p in processes if p["kind"] == "engine" and p["health_url"]]
        assert sorted(probe["unit"] for probe in batch["probes"]) == sorted(p["unit"] for p in engines)
        assert {p.get("pool") for p in engines} >= {"prefill", "decode"}


def _engine_argvs(fleet: P.FleetPlan) -> dict[str, list[str]]:
    return {p.unit: p.argv for d in fleet.deployments for p in d.processes if p.kind == "engine"}


@pytest.mark.parametrize(("unit", "image", "expected"), [
    ({}, None, ["--shutdown-timeout", "30"]),  # the recipe's image (nightly): the default drain
    ({}, "vllm/vllm-openai:v0.18.0", ["--shutdown-timeout", "30"]),
    ({}, "registry.local:5000/vllm/vllm-openai:v0.17.1@sha256:" + "a" * 64, []),  # before the flag existed
    ({"shutdown_timeout": 45}, "vllm/vllm-openai:v0.17.1", ["--shutdown-timeout", "45"]),  # the operator's word
    ({"shutdown_timeout": 0}, None, []),
])
def test_engines_that_serve_drain_on_a_planned_stop(unit, image, expected):
    extra: dict[str, Any] = {"unit": unit}
    if image:
        extra["image"] = image
    argvs = _engine_argvs(replicas_fleet(**extra))
    assert len(argvs) == 2
    for argv in argvs.values():
        assert ("--shutdown-timeout" in argv) == bool(expected)
        if expected:
            assert argv[-2:] == expected and argv.count("--shutdown-timeout") == 1


def test_headless_ranks_get_no_drain_and_the_stop_timeout_stays_above_it():
    fleet = example_fleet("multi_node_tp_pp")
    argvs = _engine_argvs(fleet)
    heads = [a for a in argvs.values() if "--headless" not in a]
    workers = [a for a in argvs.values() if "--headless" in a]
    assert heads and workers
    assert all(a[a.index("--shutdown-timeout") + 1] == "30" for a in heads)
    assert not any("--shutdown-timeout" in a for a in workers)


@pytest.mark.parametrize(("image", "version"), [
    ("vllm/vllm-openai:v0.17.1", (0, 17)), ("vllm/vllm-openai:0.23.0", (0, 23)),
    ("quay.io/ascend/vllm-ascend:v0.11.0rc1", (0, 11)), ("host:5000/vllm:v1.2", (1, 2)),
    ("vllm/vllm-openai:nightly", None), ("vllm/vllm-openai", None), ("host:5000/vllm", None),
    ("vllm/vllm-openai@sha256:" + "b" * 64, None), ("localhost:5000/vllm-cpu-test:v1", None),
])
def test_the_vllm_version_an_image_tag_names(image, version):
    assert PM_SPEC.image_vllm_version(image) == version


def test_a_drain_must_end_before_docker_kills_the_engine():
    with pytest.raises(ValueError, match=r"shutdown_timeout \(120\) must be below unit.stop_timeout \(120\)"):
        PM_SPEC.UnitSpec(shutdown_timeout=120)
    assert PM_SPEC.UnitSpec(shutdown_timeout=119, stop_timeout=120).shutdown_timeout == 119
