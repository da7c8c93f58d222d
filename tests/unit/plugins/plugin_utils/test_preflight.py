"""This host's weights view (_host_view.py) and what the preflight asks of a host (_preflight.py).

The host below runs one docker engine of a download deployment (4 NVIDIA GPUs, a CDI device,
an RDMA device, bind mounts) and one engine of an import deployment it is the origin of.
"""

from __future__ import annotations

import copy

import pytest

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _preflight as P
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._host_view import weights_view, with_presence

HOST = "a"
GLM_EXEC = ["/usr/bin/docker", "run", "--gpus", "all", "--device", "/dev/infiniband/uverbs0",
            "--device", "nvidia.com/gpu=0", "-v", "/data/hf:/root/.cache/huggingface",
            "-v", "/etc/vllm-fleet/glm/x.json:/x.json", "-v", "/var/cache/vllm/glm:/cc", "-v", "/opt/tools:/tools:ro",
            "vllm/vllm-openai:v1", "--model", "zai-org/GLM-5"]


def _served(model, revision_in_argv=False):
    return {"model": model, "name": model, "revision_in_argv": revision_in_argv}


def _engine(deployment, host, **extra):
    proc = {"kind": "engine", "deployment": deployment, "host": host, "runtime": "docker", "unit": f"{deployment}-{host}.service",
            "image": "vllm/vllm-openai:v1", "gpus": [], "compile_cache": None, "env": {},
            "env_file": f"/etc/vllm-fleet/{deployment}/{deployment}-{host}.env",
            "argv": ["vllm", "serve", "--model", "zai-org/GLM-5"], "exec_start": ["/usr/bin/docker", "run"],
            "served": _served("zai-org/GLM-5")}
    proc.update(extra)
    return proc


GLM_A = _engine("glm", "a", gpus=[0, 1, 2, 3], compile_cache="/var/cache/vllm/glm", exec_start=GLM_EXEC,
                env={"NCCL_SOCKET_IFNAME": "eth1", "VLLM_HOST_IP": "10.0.0.1", "NCCL_IB_HCA": "mlx5_0:1",
                     "HF_HUB_OFFLINE": "1"})
GLM_B = _engine("glm", "b", gpus=[0, 1, 2, 3])
QWEN_A = _engine("qwen", "a", runtime="venv", image=None, argv=["vllm", "serve", "Qwen/Qwen3-8B", "--revision", "v2"],
                 served=_served("Qwen/Qwen3-8B", revision_in_argv=True), exec_start=["/opt/vllm/bin/vllm", "serve"])
ROUTER_A = _engine("glm", "a", kind="router", image="lmsys/router:1", unit="router.service")
DEPLOYMENTS = {
    "glm": {"vendor": "nvidia", "processes": [GLM_A, GLM_B],
            "weights": {"mode": "download", "revision": None, "source": None, "endpoint": None, "cache_dir": "/data/hf"}},
    "qwen": {"vendor": "nvidia", "processes": [QWEN_A],
             "weights": {"mode": "import", "revision": "v2", "source": "/srv/qwen", "endpoint": "https://hub.example/",
                         "cache_dir": "/data/hf"}},
    "tiny": {"vendor": "cpu", "processes": [], "weights": {"mode": "container"}},
}
HOST_SHARE = {"name": HOST, "interface": "eth1", "gpus": {"glm": [0, 1, 2, 3]}, "processes": [GLM_A, QWEN_A, ROUTER_A]}

GLM_ENTRY = {
    "name": "glm", "repo": "zai-org/GLM-5", "revision": "main", "pinned": False, "mode": "download", "source": None,
    "endpoint": None, "hosts": ["a", "b"], "origin": "a", "cache": "/data/hf",
    "repo_dir": "/data/hf/hub/models--zai-org--GLM-5",
    "marker": "/data/hf/.vllm-fleet/zai-org--GLM-5@main.json", "status": "/data/hf/.vllm-fleet/zai-org--GLM-5@main.status",
    "env_file": "/etc/vllm-fleet/glm/hf-download.env", "argv_has_revision": False}
QWEN_ENTRY = {
    "name": "qwen", "repo": "Qwen/Qwen3-8B", "revision": "v2", "pinned": True, "mode": "import", "source": "/srv/qwen",
    "endpoint": "https://hub.example/", "hosts": ["a"], "origin": "a", "cache": "/data/hf",
    "repo_dir": "/data/hf/hub/models--Qwen--Qwen3-8B",
    "marker": "/data/hf/.vllm-fleet/Qwen--Qwen3-8B@v2.json", "status": "/data/hf/.vllm-fleet/Qwen--Qwen3-8B@v2.status",
    "env_file": "/etc/vllm-fleet/qwen/hf-download.env", "argv_has_revision": True}


def inputs(**extra):
    return P.Inputs(vllm_fleet_host=HOST_SHARE, vllm_fleet_deployments=DEPLOYMENTS, **extra)


def test_weights_view():
    assert weights_view(HOST_SHARE["processes"], DEPLOYMENTS) == [GLM_ENTRY, QWEN_ENTRY]


def test_weights_view_overrides_and_fallbacks():
    deployments = copy.deepcopy(DEPLOYMENTS)
    deployments["glm"]["processes"][0]["served"] = _served("zai-org/GLM-5-FP8")
    view = weights_view(HOST_SHARE["processes"], deployments, repos={"qwen": "org/q"}, origins={"glm": "b"})
    assert [(e["repo"], e["origin"], e["marker"]) for e in view] == [
        ("zai-org/GLM-5-FP8", "b", "/data/hf/.vllm-fleet/zai-org--GLM-5-FP8@main.json"),
        ("org/q", "a", "/data/hf/.vllm-fleet/org--q@v2.json")]
    assert [e["present"] for e in with_presence(view, {"qwen": True})] == [False, True]


def test_host_derived_values():
    given = inputs()
    assert P.device_paths(given) == ["/dev/infiniband/uverbs0"]
    assert P.cdi_devices(given) == ["nvidia.com/gpu=0"]
    assert P.mount_sources(given, [GLM_ENTRY]) == ["/opt/tools"]
    assert P.needs_nvidia_runtime(given)
    assert (given.vendors, given.gpu_indexes, given.docker) == (["nvidia"], [0, 1, 2, 3], "/usr/bin/docker")
    env = P.fabric_env(given)
    assert (P.fabric_interfaces(env), P.fabric_addresses(env), P.rdma_devices(env)) == (["eth1"], ["10.0.0.1"], ["mlx5_0"])


def test_probe_request_for_every_group():
    view = weights_view(HOST_SHARE["processes"], DEPLOYMENTS)
    request = P.probe_request(inputs(vllm_image_archives={"vllm/vllm-openai:v1": "/srv/v1.tar"}),
                              list(P.CHECK_GROUPS), view, HOST)
    assert request == {
        "weights": [
            {"name": "glm", "marker": GLM_ENTRY["marker"], "free_space_path": "/data/hf",
             "tree_url": "https://huggingface.co/api/models/zai-org/GLM-5/tree/main?recursive=true"},
            {"name": "qwen", "marker": QWEN_ENTRY["marker"], "free_space_path": "/data/hf",
             "tree_url": "https://hub.example/api/models/Qwen/Qwen3-8B/tree/v2?recursive=true", "source": "/srv/qwen"}],
        "docker": "/usr/bin/docker", "images": ["lmsys/router:1", "vllm/vllm-openai:v1"], "docker_root_free": True,
        "cdi_dirs": ["/etc/cdi", "/var/run/cdi"],
        "accelerator_count": "nvidia-smi --query-gpu=index --format=csv,noheader | grep -c .",
        "network": True, "docker_version": "/usr/bin/docker",
        "paths": ["/dev/infiniband/uverbs0", "/opt/tools", "/sys/class/net/eth1", "/srv/v1.tar",
                  "/sys/class/infiniband/mlx5_0"],
    }


@pytest.mark.parametrize("checks, extra, keys", [
    ([], {}, {"weights"}),
    (["router"], {}, set()),
    (["monitoring"], {}, set()),
    (["engine"], {}, {"docker_version"}),
    (["fabric"], {"vllm_fabric_check": "no"}, set()),
    (["host"], {"vllm_preflight_accelerator_count": 8}, {"weights", "docker", "images", "docker_root_free", "cdi_dirs",
                                                         "paths"}),
])
def test_probe_request_reads_only_what_the_checks_use(checks, extra, keys):
    view = weights_view(HOST_SHARE["processes"], DEPLOYMENTS)
    assert set(P.probe_request(inputs(**extra), checks, view, HOST)) == keys


def test_a_known_view_is_not_probed_for_markers():
    view = with_presence(weights_view(HOST_SHARE["processes"], DEPLOYMENTS), {"glm": True})
    request = P.probe_request(inputs(vllm_fleet_weights=view, vllm_preflight_query_hub=False,
                                     vllm_preflight_weights_bytes={"qwen": 5}), ["weights"], view, HOST)
    assert request == {"weights": [{"name": "glm", "present": True},
                                   {"name": "qwen", "present": False, "source": "/srv/qwen"}]}


def _facts(**change):
    facts = {
        "docker": {"rc": 0, "stdout": "", "stderr": "", "info": {"Runtimes": {"nvidia": {}}, "DockerRootDir": "/var/lib/docker"}},
        "images": {"vllm/vllm-openai:v1": True, "lmsys/router:1": False},
        "docker_root_free": {"path": "/var/lib/docker", "mount": "/", "avail": 100 * 2**30},
        "accelerator_count": {"rc": 0, "stdout": "8", "stderr": ""},
        "cdi_specs": 1,
        "paths": {p: {"exists": True, "isdir": False, "isreg": True}
                  for p in ("/dev/infiniband/uverbs0", "/opt/tools", "/sys/class/net/eth1")},
        "weights": {"glm": {"present": False, "free_space": {"path": "/data/hf", "mount": "/data", "avail": 50 * 2**30},
                            "tree_bytes": 40 * 2**30},
                    "qwen": {"present": True}},
    }
    facts.update(change)
    return facts


def _evaluate(facts, checks=("host",), **extra):
    view = with_presence(weights_view(HOST_SHARE["processes"], DEPLOYMENTS),
                         {name: entry["present"] for name, entry in facts["weights"].items()})
    return P.evaluate(inputs(**extra), list(checks), view, facts, HOST)


def test_a_ready_host_passes():
    found = _evaluate(_facts())
    assert (found.errors, found.warnings) == ([], [])


def test_every_failure_is_reported_at_once():
    facts = _facts(accelerator_count={"rc": 0, "stdout": "2", "stderr": ""}, cdi_specs=0)
    facts["weights"]["glm"]["tree_bytes"] = 0
    facts["paths"]["/opt/tools"] = {"exists": False, "isdir": False, "isreg": False}
    found = _evaluate(facts, vllm_preflight_weights_bytes={"glm": 60 * 2**30})
    prefixes = ["host a: found no /opt/tools; needed by the units' docker --device/-v flags",
                "host a: found no CDI spec in /etc/cdi or /var/run/cdi; needed for --device nvidia.com/gpu=0.",
                "host a: accelerators: found 2 (nvidia-smi); needed 4 (devices 0,1,2,3 of glm, vendor nvidia)",
                "host a: filesystem /data: found 50.00 GB free; needed 61.00 GB for zai-org/GLM-5@main (+1.00 GB margin)"]
    assert len(found.errors) == len(prefixes)
    for error, prefix in zip(found.errors, prefixes, strict=True):
        assert error.startswith(prefix), error
    assert found.warnings == []


def test_unknown_weights_size_warns_and_does_not_fail():
    facts = _facts()
    facts["weights"]["glm"]["tree_bytes"] = 0
    found = _evaluate(facts)
    assert found.errors == []
    assert found.warnings == ["host a: the size of zai-org/GLM-5@main is unknown (the Hub API did not answer); set "
                              "vllm_preflight_weights_bytes to check the disk for it"]


def test_docker_down_skips_what_needs_its_answer():
    found = _evaluate(_facts(docker={"rc": 1, "stdout": "", "stderr": "refused", "info": None}, images={}))
    assert found.errors == ["host a: docker: found a daemon that does not answer (refused); needed: the docker engine "
                            "(docker.service) for glm-a.service, router.service"]


def test_an_unsupported_vendor_is_named():
    deployments = dict(DEPLOYMENTS, glm=dict(DEPLOYMENTS["glm"], vendor="tpu"))
    view = with_presence(weights_view(HOST_SHARE["processes"], deployments), {"glm": False, "qwen": True})
    found = P.evaluate(P.Inputs(vllm_fleet_host=HOST_SHARE, vllm_fleet_deployments=deployments), ["host"], view,
                       _facts(accelerator_count=None), HOST)
    assert ("host a: accelerators: found none countable (unsupported vendor tpu) (npu-smi); needed 4 "
            "(devices 0,1,2,3 of glm, vendor tpu)") in found.errors


def test_monitoring_thresholds_are_checked_with_the_rules():
    assert P.monitoring_threshold_errors({}) == []
    assert P.monitoring_threshold_errors(["x"]) == [
        "vllm_monitoring_alerts: got ['x'] (list); expected a mapping of threshold names to values"]
    message, = P.monitoring_threshold_errors({"no_such_threshold": 1})
    assert "vllm_monitoring_alerts.no_such_threshold" in message


# --- queued checks: the preflight play's one host read for every role ---------------------

def test_a_queue_entry_keeps_only_its_roles_inputs():
    shared = {"vllm_fleet_host": HOST_SHARE, "vllm_fleet_deployments": DEPLOYMENTS, "vllm_fleet_weights": None}
    entry = P.queue_entry(["fabric"], dict(shared, vllm_fabric_check=False))
    assert entry == {"checks": ["fabric"], "inputs": {"vllm_fabric_check": False}}


def test_the_queue_joins_checks_in_group_order_and_inputs_into_one_run():
    given = {"vllm_fleet_host": HOST_SHARE, "vllm_fleet_deployments": DEPLOYMENTS}
    queued = [P.queue_entry(["host"], {"vllm_weights_origin": {"glm": "b"}, "vllm_preflight_query_hub": False}),
              P.queue_entry(["router"], {"vllm_router_package": "vllm-router==0.1.17"}),
              P.queue_entry(["weights"], {"vllm_weights_origin": {"glm": "b"}}),
              P.queue_entry(["fabric"], {"vllm_fabric_check": "no"})]
    checks, merged = P.merge_queued([], given, queued)
    assert checks == ["host", "weights", "fabric", "router"]
    assert merged == dict(given, vllm_weights_origin={"glm": "b"}, vllm_preflight_query_hub=False,
                          vllm_router_package="vllm-router==0.1.17", vllm_fabric_check="no")
    # the run reads the host once for all of them: the union of what each check alone asks for
    view = weights_view(HOST_SHARE["processes"], DEPLOYMENTS)
    alone = {key for entry in queued for key in P.probe_request(P.Inputs(**dict(given, **entry["inputs"])),
                                                                entry["checks"], view, HOST)}
    assert set(P.probe_request(P.Inputs(**merged), checks, view, HOST)) == alone
    assert P.merge_queued(["engine"], given, []) == (["engine"], given)


@pytest.mark.parametrize("queued, message", [
    ([{"checks": "fabric", "inputs": {}}], "queued[0]: got "),
    ([{"checks": ["fabric"]}], "queued[0]: got "),
    ([{"checks": ["host"], "inputs": {}}, {"checks": ["disk"], "inputs": {}}], "queued[1].checks: got ['disk'] (list); expected any of host"),
    ([{"checks": ["router"], "inputs": {"vllm_router_pkg": "x"}}], "queued[0].inputs: got ['vllm_router_pkg'] (list); expected keys among"),
    ([{"checks": ["host"], "inputs": {"vllm_weights_origin": {"glm": "a"}}},
      {"checks": ["weights"], "inputs": {"vllm_weights_origin": {"glm": "b"}}}],
     "queued[1].inputs.vllm_weights_origin: differs from the value another check of the run passed"),
])
def test_a_malformed_or_contradictory_queue_is_refused(queued, message):
    with pytest.raises(P.RecipeError) as refused:
        P.merge_queued([], {"vllm_fleet_host": HOST_SHARE, "vllm_fleet_deployments": DEPLOYMENTS}, queued)
    assert str(refused.value).startswith(message)


def test_the_router_check_reads_the_venv_routers_installed_version():
    venv_router = _engine("glm", "a", kind="router", runtime="venv", image=None, unit="router-venv.service",
                          exec_start=["/opt/vllm-router/bin/vllm-router", "--port", "8000"])
    given = P.Inputs(vllm_fleet_host=dict(HOST_SHARE, processes=[GLM_A, ROUTER_A, venv_router]),
                     vllm_fleet_deployments=DEPLOYMENTS)
    assert P.probe_request(given, ["router"], [], HOST) == {"packages": {"/opt/vllm-router": "vllm-router"}}
    assert P.probe_request(given, ["engine"], [], HOST).get("packages") is None


def test_a_check_queued_again_replaces_its_earlier_entry():
    """A role deferring twice (or an entry left by a run that stopped before the queue ran) is queued once, as last passed."""
    queue = P.queued_with(None, ["router"], {"vllm_router_package": "vllm-router==0.1.9"})
    queue = P.queued_with(queue, ["fabric"], {"vllm_fabric_check": True})
    queue = P.queued_with(queue, ["router"], {"vllm_router_package": "vllm-router==0.1.17"})
    assert queue == [{"checks": ["fabric"], "inputs": {"vllm_fabric_check": True}},
                     {"checks": ["router"], "inputs": {"vllm_router_package": "vllm-router==0.1.17"}}]
    assert P.merge_queued([], {}, queue)[1] == {"vllm_fabric_check": True, "vllm_router_package": "vllm-router==0.1.17"}
