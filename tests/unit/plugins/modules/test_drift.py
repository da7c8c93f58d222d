"""Drift detection: vllm_drift_info's comparisons and playbooks/drift.yml.

The container fixtures are real ``docker container inspect`` / ``docker image inspect``
output (trimmed to the fields docker always returns and the module reads), recorded from
stand-in containers started with the exact ``exec_start`` the plan rendered: one with the
secret shim (``--entrypoint /bin/sh`` + mounted ``*.secret.env``), one without. The
playbook test runs drift.yml end to end against a fake docker CLI that answers with them.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ansible_collections.vllm_fleet.recipes.plugins.module_utils import _drift as D
from ansible_collections.vllm_fleet.recipes.plugins.module_utils._drift_host import read_file
from ansible_collections.vllm_fleet.recipes.plugins.module_utils._systemd_show import parse_show
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _placement as P
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _render as R
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._container import SECRET_SHIM

REPO = Path(__file__).resolve().parents[4]
BIN = Path(sys.executable).parent
EXAMPLES = REPO / "playbooks" / "examples"

IMAGE_V1_ID = "sha256:b82ef0d958415afe1e133dbbb5d1c384f7c725029caab134866e3c22c0876fcb"
IMAGE_V2_ID = "sha256:77255d37062e9f977b147ff2556fdc5d126a8e820232655a9d35bf484e1398b6"
SHIM = SECRET_SHIM
SERVE_ARGS = ["zai-org/GLM-5.3-Flash", "--tokenizer-mode", "glm5_next", "--tensor-parallel-size", "8",
              "--disable-flashinfer-autotune", "--tool-call-parser", "glm47", "--enable-auto-tool-choice",
              "--reasoning-parser", "glm47"]
PLAN_ENV = {"VLLM_ENGINE_READY_TIMEOUT_S": "3600", "VLLM_USE_RUST_FRONTEND": "1", "HF_HUB_OFFLINE": "1",
            "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7", "TORCHINDUCTOR_CACHE_DIR": "/root/.cache/vllm/torchinductor",
            "TRITON_CACHE_DIR": "/root/.cache/vllm/triton"}
IMAGE_ENV = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "STANDIN_VERSION=v1",
             "STANDIN_RECORD_DIR=/var/lib/vllm-standin", "PYTHONUNBUFFERED=1"]
STATE_RUNNING = {"Status": "running", "Running": True, "Paused": False, "Restarting": False, "OOMKilled": False,
                 "Dead": False, "Pid": 6851, "ExitCode": 0, "Error": "", "StartedAt": "2026-12-02T13:26:01.912632321Z",
                 "FinishedAt": "0001-01-01T00:00:00Z"}

#: docker container inspect vllm-drift-demo (started with the secret shim).
CONTAINER_SHIM = {
    "Id": "ecca7512d9ed139de3ded0099ce814fcef09e82693a158a3780ec470aa2d85d5",
    "Created": "2026-12-02T13:26:01.316867049Z",
    "Path": "/bin/sh",
    "Args": ["-c", SHIM, "vllm-fleet-secrets", "vllm", "serve"] + SERVE_ARGS + ["--port", "18431"],
    "State": STATE_RUNNING,
    "Image": IMAGE_V1_ID,
    "Name": "/vllm-drift-demo",
    "RestartCount": 0,
    "Config": {
        "Hostname": "ecca7512d9ed",
        "Env": [f"{k}={v}" for k, v in PLAN_ENV.items()] + IMAGE_ENV,
        "Cmd": ["-c", SHIM, "vllm-fleet-secrets", "vllm", "serve"] + SERVE_ARGS + ["--port", "18431"],
        "Image": "vllm-drift-demo:latest",
        "Entrypoint": ["/bin/sh"],
        "WorkingDir": "",
    },
}
#: docker container inspect vllm-drift-plain (no secrets: the image's entrypoint).
CONTAINER_PLAIN = {
    "Id": "68a8b9c9e30ab134b68029e6a26c953d24796c674c2165c53adf6119c7e851bc",
    "Created": "2026-12-02T13:27:26.271790482Z",
    "Path": "vllm",
    "Args": ["serve"] + SERVE_ARGS + ["--port", "18432"],
    "State": dict(STATE_RUNNING, Pid=11653, StartedAt="2026-12-02T13:27:26.696363211Z"),
    "Image": IMAGE_V1_ID,
    "Name": "/vllm-drift-plain",
    "RestartCount": 0,
    "Config": {
        "Hostname": "68a8b9c9e30a",
        "Env": [f"{k}={v}" for k, v in PLAN_ENV.items()] + IMAGE_ENV,
        "Cmd": SERVE_ARGS + ["--port", "18432"],
        "Image": "vllm-drift-plain:latest",
        "Entrypoint": ["vllm", "serve"],
        "WorkingDir": "",
    },
}
#: docker image inspect vllm-drift-demo:latest (the stand-in image, v1).
IMAGE_V1 = {
    "Id": IMAGE_V1_ID,
    "RepoTags": ["vllm-drift-demo:latest", "localhost:5000/vllm-standin:v1"],
    "RepoDigests": ["localhost:5000/vllm-standin@sha256:5b0d9236771214012cb7bc3c1a49eac19e29b42a7c7659c20052975ee2898b44"],
    "Created": "2026-12-02T13:22:31.974873851Z",
    "Config": {"Env": IMAGE_ENV, "Entrypoint": ["vllm", "serve"], "Cmd": None, "WorkingDir": ""},
}
NO_SUCH_CONTAINER = "Error response from daemon: No such container: vllm-drift-demo"

CONFIG = "/etc/vllm-fleet/drift-demo"
#: The plan's process entries the two containers were started from (plan.json, trimmed).
PROC_SHIM = {
    "unit": "vllm-drift-demo.service", "container": "vllm-drift-demo", "kind": "engine", "runtime": "docker",
    "image": "vllm-drift-demo:latest", "env": dict(PLAN_ENV), "secret_env_keys": ["VLLM_API_KEY"],
    "exec_start": ["/usr/bin/docker", "run", "--rm", "--name", "vllm-drift-demo", "--ipc=host", "-p", "18431:18431",
                   "-v", "/root/.cache/huggingface:/root/.cache/huggingface", "--env-file", f"{CONFIG}/vllm-drift-demo.env",
                   "-v", f"{CONFIG}/vllm-drift-demo.secret.env:/run/vllm-fleet/secret.env:ro", "--entrypoint", "/bin/sh",
                   "vllm-drift-demo:latest", "-c", SHIM, "vllm-fleet-secrets", "vllm", "serve"] + SERVE_ARGS + ["--port", "18431"],
}
PROC_PLAIN = {
    "unit": "vllm-drift-plain.service", "container": "vllm-drift-plain", "kind": "engine", "runtime": "docker",
    "image": "vllm-drift-plain:latest", "env": dict(PLAN_ENV), "secret_env_keys": [],
    "exec_start": ["/usr/bin/docker", "run", "--rm", "--name", "vllm-drift-plain", "--ipc=host", "-p", "18432:18432",
                   "-v", "/root/.cache/huggingface:/root/.cache/huggingface", "--env-file", f"{CONFIG}/vllm-drift-plain.env",
                   "vllm-drift-plain:latest"] + SERVE_ARGS + ["--port", "18432"],
}


def drift_of(proc, container=None, image=None, local_id=IMAGE_V1_ID, **kw):
    """container_drift with the recorded fixtures unless told otherwise."""
    container = copy.deepcopy(CONTAINER_SHIM if proc["container"] == "vllm-drift-demo" else CONTAINER_PLAIN) \
        if container is None else container
    return D.container_drift(proc, container, IMAGE_V1 if image is None else image, local_id, **kw)


def kinds(entries):
    return [e["kind"] for e in entries]


def all_text(entries, diffs):
    return json.dumps(entries) + json.dumps(diffs)


# --------------------------------------------------------------------------------------
# containers
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("proc", [PROC_SHIM, PROC_PLAIN], ids=["secret-shim", "plain"])
def test_recorded_containers_are_in_sync_with_their_plan(proc):
    assert drift_of(proc) == ([], [])
    # The brief's minimal rule holds too: [Path] + Args ends with what follows the image.
    container = CONTAINER_SHIM if proc is PROC_SHIM else CONTAINER_PLAIN
    tail = proc["exec_start"][proc["exec_start"].index(proc["image"]) + 1:]
    assert D.running_command(container)[-len(tail):] == tail


def test_a_changed_recipe_argument_is_argv_drift():
    proc = copy.deepcopy(PROC_PLAIN)
    proc["exec_start"] += ["--max-model-len", "8192"]
    entries, diffs = drift_of(proc)
    assert kinds(entries) == ["argv"]
    assert entries[0]["unit"] == "vllm-drift-plain.service"
    assert "lacks '--max-model-len 8192'" in entries[0]["detail"]
    assert diffs[0]["after"].endswith("--port\n18432\n--max-model-len\n8192\n")
    assert diffs[0]["before"].splitlines() == ["vllm", "serve"] + SERVE_ARGS + ["--port", "18432"]


def test_a_replaced_value_names_both_sides():
    proc = copy.deepcopy(PROC_SHIM)
    proc["exec_start"][proc["exec_start"].index("18431", -3)] = "18500"
    entries, _diffs = drift_of(proc)
    assert [e["detail"] for e in entries] == ["command differs: runs '18431' where the plan has '18500'"]


def test_dropping_the_secret_shim_is_argv_drift_even_though_the_tail_still_matches():
    # The plan no longer has secrets: no --entrypoint, the image's `vllm serve` runs the model.
    proc = copy.deepcopy(PROC_PLAIN)
    proc.update(container="vllm-drift-demo", image="vllm-drift-demo:latest", secret_env_keys=[])
    proc["exec_start"] = [t.replace("plain", "demo").replace("18432", "18431") for t in proc["exec_start"]]
    running = D.running_command(CONTAINER_SHIM)
    tail, exact = D.planned_command(proc["exec_start"], proc["image"], None)
    assert not exact and running[-len(tail):] == tail  # the tail-only rule would miss it
    entries, _diffs = drift_of(proc, container=copy.deepcopy(CONTAINER_SHIM))
    assert kinds(entries) == ["argv"]
    assert entries[0]["detail"].startswith(f"command differs: runs extra '/bin/sh -c {SHIM[:20]}")


def test_adding_the_secret_shim_is_argv_drift():
    proc = copy.deepcopy(PROC_SHIM)
    container = copy.deepcopy(CONTAINER_SHIM)
    container.update(Path="vllm", Args=["serve"] + SERVE_ARGS + ["--port", "18431"])
    container["Config"].update(Entrypoint=["vllm", "serve"], Cmd=SERVE_ARGS + ["--port", "18431"])
    assert kinds(drift_of(proc, container=container)[0]) == ["argv"]


def test_without_the_image_config_the_tail_rule_applies():
    proc = copy.deepcopy(PROC_PLAIN)
    assert D.container_drift(proc, copy.deepcopy(CONTAINER_PLAIN), None, IMAGE_V1_ID) == ([], [])
    proc["exec_start"] += ["--enforce-eager"]
    entries, _diffs = D.container_drift(proc, copy.deepcopy(CONTAINER_PLAIN), None, IMAGE_V1_ID)
    assert kinds(entries) == ["argv"] and "lacks '--enforce-eager'" in entries[0]["detail"]


def test_env_missing_different_and_unplanned_keys():
    proc = copy.deepcopy(PROC_PLAIN)
    proc["env"]["VLLM_USE_RUST_FRONTEND"] = "0"
    proc["env"]["VLLM_LOGGING_LEVEL"] = "DEBUG"
    del proc["env"]["HF_HUB_OFFLINE"]
    entries, diffs = drift_of(proc)
    assert kinds(entries) == ["env", "env", "env"]
    assert sorted(e["detail"] for e in entries) == [
        "HF_HUB_OFFLINE is set ('1'); the plan does not set it",
        "VLLM_LOGGING_LEVEL is not set; the plan sets it",
        "VLLM_USE_RUST_FRONTEND is '1'; the plan has '0'",
    ]
    assert diffs == [{"before_header": "vllm-drift-plain.service: running env (keys that differ)",
                      "after_header": "vllm-drift-plain.service: planned env",
                      "before": "HF_HUB_OFFLINE=1\nVLLM_USE_RUST_FRONTEND=1\n",
                      "after": "VLLM_LOGGING_LEVEL=DEBUG\nVLLM_USE_RUST_FRONTEND=0\n"}]


def test_image_env_is_not_unplanned_but_an_overridden_image_value_is():
    container = copy.deepcopy(CONTAINER_PLAIN)
    assert drift_of(PROC_PLAIN, container=container) == ([], [])
    container["Config"]["Env"] = [e if not e.startswith("STANDIN_VERSION=") else "STANDIN_VERSION=v0" for e in container["Config"]["Env"]]
    entries, _diffs = drift_of(PROC_PLAIN, container=container)
    assert [e["detail"] for e in entries] == ["STANDIN_VERSION is set ('v0'); the plan does not set it"]


def test_secret_values_never_appear_in_details_or_diffs():
    proc = copy.deepcopy(PROC_PLAIN)
    proc["env"].update(WANDB_API_KEY="plan-wandb-value", S3_SECRET="plan-s3-value", NEW_TOKEN="plan-new-token")
    proc["exec_start"] += ["--api-key", "plan-flag-value"]
    proc["secret_env_keys"] = ["VLLM_API_KEY"]
    container = copy.deepcopy(CONTAINER_PLAIN)
    container["Config"]["Env"] += ["WANDB_API_KEY=running-wandb-value", "S3_SECRET=plan-s3-value",
                                   "HF_TOKEN=running-hf-token", "VLLM_API_KEY=running-vllm-key", "DB_PASSWORD=running-pw"]
    container["Args"] += ["--api-key", "running-flag-value"]
    entries, diffs = drift_of(proc, container=container)
    details = {e["detail"] for e in entries}
    assert details == {
        "WANDB_API_KEY differs from the plan (secret-looking key: values hidden)",
        "NEW_TOKEN is not set; the plan sets it",
        "HF_TOKEN is set (<hidden>); the plan does not set it",
        "DB_PASSWORD is set (<hidden>); the plan does not set it",
        "command differs: the value of a secret-looking argument differs (hidden)",
    }
    text = all_text(entries, diffs)
    for value in ("plan-wandb-value", "running-wandb-value", "plan-s3-value", "plan-new-token", "running-hf-token",
                  "running-vllm-key", "running-pw", "plan-flag-value", "running-flag-value"):
        assert value not in text
    assert "VLLM_API_KEY" not in text  # a secret the plan declares (mounted file) is not "unplanned"


def test_the_image_reference_changed():
    proc = copy.deepcopy(PROC_SHIM)
    proc["exec_start"] = [("vllm-drift-demo:v2" if t == proc["image"] else t) for t in proc["exec_start"]]
    proc["image"] = "vllm-drift-demo:v2"
    entries, _diffs = drift_of(proc, local_id=IMAGE_V2_ID)
    assert kinds(entries) == ["image"]
    assert entries[0]["detail"] == "runs vllm-drift-demo:latest; the plan has vllm-drift-demo:v2"


def test_the_image_was_pulled_but_the_container_runs_the_old_one():
    entries, _diffs = drift_of(PROC_SHIM, local_id=IMAGE_V2_ID)
    assert entries == [{"unit": "vllm-drift-demo.service", "kind": "image",
                        "detail": "vllm-drift-demo:latest is sha256:77255d37062e on the host now; "
                                  "the container still runs sha256:b82ef0d95841 (pulled, not restarted)"}]


def test_the_image_is_gone_from_the_host():
    entries, _diffs = drift_of(PROC_SHIM, local_id=None, local_error="Error: No such image: vllm-drift-demo:latest")
    assert kinds(entries) == ["image"]
    assert entries[0]["detail"].startswith("vllm-drift-demo:latest is not on the host (Error: No such image")


def test_not_running():
    entries, diffs = D.container_drift(PROC_SHIM, None, None, None, inspect_error=NO_SUCH_CONTAINER)
    assert (entries, diffs) == ([{"unit": "vllm-drift-demo.service", "kind": "not_running",
                                  "detail": "container vllm-drift-demo does not exist"}], [])
    exited = copy.deepcopy(CONTAINER_SHIM)
    exited["State"].update(Status="exited", Running=False, ExitCode=1)
    assert drift_of(PROC_SHIM, container=exited)[0][0]["detail"] == "container vllm-drift-demo is exited (exit code 1)"
    restarting = copy.deepcopy(CONTAINER_SHIM)
    restarting["State"].update(Status="restarting", Restarting=True)
    assert kinds(drift_of(PROC_SHIM, container=restarting)[0]) == ["not_running"]
    down = D.container_drift(PROC_SHIM, None, None, None, inspect_error="Cannot connect to the Docker daemon at unix:///var/run/docker.sock")
    assert down[0][0]["detail"].startswith("container vllm-drift-demo cannot be inspected: Cannot connect")


def test_several_drifts_of_one_container_are_all_reported_in_order():
    proc = copy.deepcopy(PROC_SHIM)
    proc["exec_start"] += ["--enforce-eager"]
    proc["env"]["VLLM_LOGGING_LEVEL"] = "DEBUG"
    entries, diffs = drift_of(proc, local_id=IMAGE_V2_ID)
    assert kinds(D.sort_drift(entries)) == ["image", "argv", "env"]
    assert len(diffs) == 2


# --------------------------------------------------------------------------------------
# plans of today's shapes: every container process, run the way docker runs it, is in sync
# --------------------------------------------------------------------------------------

def as_docker_runs_it(proc, image_config):
    """What ``docker container inspect`` shows for a container started with ``proc['exec_start']``."""
    args = proc["exec_start"]
    cut = args.index(proc["image"])
    flags, tail = args[:cut], args[cut + 1:]
    entrypoint = [flags[flags.index("--entrypoint") + 1]] if "--entrypoint" in flags else None
    cmd = tail if (tail or entrypoint is not None) else list(image_config["Cmd"] or [])
    command = (entrypoint if entrypoint is not None else list(image_config["Entrypoint"] or [])) + cmd
    env = dict(item.split("=", 1) for item in image_config["Env"])
    env.update(proc["env"])
    return {"Path": command[0], "Args": command[1:], "State": dict(STATE_RUNNING), "Image": IMAGE_V1_ID,
            "Name": "/" + proc["container"],
            "Config": {"Env": [f"{k}={v}" for k, v in env.items()], "Cmd": cmd, "Image": proc["image"],
                       "Entrypoint": entrypoint or image_config["Entrypoint"]}}


def fleet(deployment, hosts, host_vars=None, children=None):
    hostvars = {h: {"ansible_host": f"10.7.0.{i + 1}", "vllm_fabric_interface": "eth1", "vllm_deployment": deployment,
                    **(host_vars or {}).get(h, {})} for i, h in enumerate(hosts)}
    return P.plan_to_dict(P.build_plan(hostvars, {"all": hosts, "fleet": hosts, **(children or {})}, P.engine_factory()))


SEED = {"recipe": "zai-org/GLM-5.3-Flash", "hardware": "h200"}
FLEETS = {
    "multi-node-with-secrets": lambda: fleet(dict(SEED, strategy="multi_node_tp_pp", api_key="sk-drift-test",
                                                  weights={"token": "hf_drift_test"}), ["a", "b"]),
    "pd-router-container": lambda: fleet(
        dict(SEED, strategy="pd_cluster", router={"runtime": "container", "image": "vllm/vllm-router:0.1.17"}),
        ["p", "d", "r"], children={"fleet_prefill": ["p"], "fleet_decode": ["d"], "fleet_router": ["r"]}),
    "upstream-profile": lambda: fleet(dict(SEED, strategy="single_node_tp", container_profile="upstream"), ["a"]),
}


@pytest.mark.parametrize("name", sorted(FLEETS))
def test_plan_processes_run_as_planned_are_in_sync_and_a_recipe_change_is_not(name):
    plan = FLEETS[name]()
    procs = [p for d in plan["deployments"].values() for p in d["processes"] if p["container"]]
    assert procs
    for proc in procs:
        container = as_docker_runs_it(proc, IMAGE_V1["Config"])
        assert D.container_drift(proc, container, IMAGE_V1, IMAGE_V1_ID) == ([], []), proc["unit"]
        changed = copy.deepcopy(proc)
        changed["exec_start"].append("--enforce-eager")
        changed["env"]["VLLM_LOGGING_LEVEL"] = "DEBUG"
        assert kinds(D.container_drift(changed, container, IMAGE_V1, IMAGE_V1_ID)[0]) == ["argv", "env"], proc["unit"]


# --------------------------------------------------------------------------------------
# files
# --------------------------------------------------------------------------------------

def planned(path, text, with_content=True, mode="0600"):
    spec = {"dest": str(path), "sha256": hashlib.sha256(text.encode()).hexdigest(), "mode": mode}
    if with_content:
        spec["content"] = text
    return spec


def test_files_in_sync_differing_missing_and_mode(tmp_path):
    env = tmp_path / "vllm-x.env"
    env.write_text("# header\nA=1\nB=2\n")
    env.chmod(0o600)
    assert D.file_drift(planned(env, "# header\nA=1\nB=2\n"), read_file(str(env), True)) == ([], None)

    entries, diff = D.file_drift(planned(env, "# header\nA=1\nB=3\nC=4\n"), read_file(str(env), True), "vllm-x.service")
    assert entries == [{"unit": "vllm-x.service", "kind": "file", "detail": f"{env} differs from the plan (+2 -1 lines)"}]
    assert diff == {"before_header": f"{env} (on the host)", "after_header": f"{env} (plan)",
                    "before": "# header\nA=1\nB=2\n", "after": "# header\nA=1\nB=3\nC=4\n"}

    env.chmod(0o644)
    entries, diff = D.file_drift(planned(env, "# header\nA=1\nB=2\n"), read_file(str(env), True))
    assert [e["detail"] for e in entries] == [f"{env} has mode 0644, the plan 0600"] and diff is None

    gone = tmp_path / "gone.service"
    entries, diff = D.file_drift(planned(gone, "[Unit]\n"), read_file(str(gone), True))
    assert [e["detail"] for e in entries] == [f"{gone} is missing"]
    assert diff["before"] == "" and diff["after"] == "[Unit]\n"


def test_secret_files_are_compared_by_hash_only(tmp_path):
    secret = tmp_path / "vllm-x.secret.env"
    secret.write_text("VLLM_API_KEY='sk-old-value'\n")
    secret.chmod(0o600)
    current = read_file(str(secret), False)
    assert "text" not in current
    assert D.file_drift(planned(secret, "VLLM_API_KEY='sk-old-value'\n", with_content=False), current) == ([], None)
    entries, diff = D.file_drift(planned(secret, "VLLM_API_KEY='sk-new-value'\n", with_content=False), current)
    assert diff is None
    assert entries[0]["detail"] == f"{secret} differs from the plan (secret: compared by sha256 only)"
    assert "sk-" not in json.dumps(entries)


def test_diffs_mask_secret_looking_lines(tmp_path):
    env = tmp_path / "vllm-x.env"
    env.write_text("A=1\nWANDB_API_KEY=old-wandb\n")
    _entries, diff = D.file_drift(planned(env, "A=2\nWANDB_API_KEY=new-wandb\n"), read_file(str(env), True))
    assert diff["before"] == "A=1\nWANDB_API_KEY=<hidden>\n" and diff["after"] == "A=2\nWANDB_API_KEY=<hidden>\n"


def test_files_map_to_their_units():
    units = ["vllm-g-rank0.service", "vllm-g-rank0-watchdog.service"]
    assert D.unit_for_file("/etc/systemd/system/vllm-g-rank0.service", units) == "vllm-g-rank0.service"
    assert D.unit_for_file("/etc/vllm-fleet/g/vllm-g-rank0.secret.env", units) == "vllm-g-rank0.service"
    assert D.unit_for_file("/etc/vllm-fleet/g/vllm-g-rank0-watchdog.env", units) == "vllm-g-rank0-watchdog.service"
    assert D.unit_for_file("/etc/vllm-fleet/g/router.json", units) == "-"


# --------------------------------------------------------------------------------------
# host processes (watchdog, venv router, Mooncake)
# --------------------------------------------------------------------------------------

WATCHDOG = {"unit": "vllm-g-rank0-watchdog.service", "container": None, "image": None, "env": {},
            "exec_start": ["/usr/local/libexec/vllm-fleet/vllm-group-watchdog", "--unit", "vllm-g-rank0.service",
                           "--head-url", "http://10.0.0.1:8000/health", "--interval", "5", "--grace", "30"]}


def test_host_processes():
    show = ("Id=vllm-g-rank0-watchdog.service\nActiveState=active\nSubState=running\nMainPID=812\n\n"
            "Id=vllm-g-router.service\nActiveState=failed\nSubState=failed\nMainPID=0\n")
    states = parse_show(show)
    assert states["vllm-g-rank0-watchdog.service"]["MainPID"] == "812"
    # a script: the kernel puts its interpreter first
    cmdline = ["/usr/bin/python3"] + WATCHDOG["exec_start"]
    assert D.host_process_drift(WATCHDOG, states["vllm-g-rank0-watchdog.service"], cmdline, {"PATH": "/usr/bin"}) == ([], [])
    old = cmdline[:-1] + ["60"]
    entries, diffs = D.host_process_drift(WATCHDOG, states["vllm-g-rank0-watchdog.service"], old, {})
    assert [e["detail"] for e in entries] == ["command differs: runs '60' where the plan has '30'"] and len(diffs) == 1
    router = dict(WATCHDOG, unit="vllm-g-router.service", env={"RUST_LOG": "info"})
    entries, _diffs = D.host_process_drift(router, states["vllm-g-router.service"])
    assert entries == [{"unit": "vllm-g-router.service", "kind": "not_running", "detail": "unit is failed (failed)"}]
    entries, _diffs = D.host_process_drift(router, states["vllm-g-rank0-watchdog.service"], WATCHDOG["exec_start"], {"RUST_LOG": "debug"})
    assert [e["detail"] for e in entries] == ["RUST_LOG is 'debug'; the plan has 'info'"]
    assert not D.host_argv_matches(WATCHDOG["exec_start"], ["/usr/bin/python3", "/other/script"] + WATCHDOG["exec_start"][1:])


# --------------------------------------------------------------------------------------
# playbooks/drift.yml
# --------------------------------------------------------------------------------------

def test_drift_playbook_passes_syntax_check():
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"))
    result = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(EXAMPLES / "pd_cluster" / "inventory.yml"),
                             str(REPO / "playbooks" / "drift.yml"), "--syntax-check"],
                            capture_output=True, text=True, env=env, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


FAKE_DOCKER = '''#!{python}
"""Fake docker CLI for test_drift: `container|image inspect -- REF` from JSON files in {data}."""
import json, os, sys
what, ref = sys.argv[1], sys.argv[-1]
path = os.path.join({data!r}, what + "-" + ref.replace("/", "_").replace(":", "_") + ".json")
if sys.argv[2] != "inspect" or not os.path.exists(path):
    print("[]")
    sys.stderr.write("Error response from daemon: No such %s: %s\\n" % (what, ref))
    sys.exit(1)
with open(path) as handle:
    print(json.dumps([json.load(handle)]))
'''


def _drift_inventory(tmp_path, **changes):
    deployment = {"name": "drift-demo", "recipe": "zai-org/GLM-5.3-Flash", "hardware": "h200", "strategy": "single_node_tp",
                  "gpu_runtime": "none", "image": "vllm-drift-demo:latest", "api_key": "sk-PLAYBOOK-SECRET",
                  "ports": {"api": 18431}, "config_dir": str(tmp_path / "etc" / "vllm-fleet"),
                  "unit_dir": str(tmp_path / "etc" / "systemd"), "docker_binary": str(tmp_path / "docker"),
                  **changes}
    host = {"ansible_host": "127.0.0.1", "ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"drift_demo": {
        "hosts": {"node-a": host}, "vars": {"vllm_fabric_interface": "lo", "vllm_deployment": deployment}}}}}))
    return inventory, deployment


def _install(tmp_path, deployment):
    """What deploy.yml would leave on the host: the rendered files at their destinations."""
    hostvars = {"node-a": {"ansible_host": "127.0.0.1", "vllm_fabric_interface": "lo", "vllm_deployment": deployment}}
    plan = P.build_plan(hostvars, {"all": ["node-a"], "drift_demo": ["node-a"]}, P.engine_factory())
    files = R.render(plan)
    for entry in R.install_manifest(plan)["node-a"]:
        dest = Path(entry["dest"])
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(files[entry["src"]])
        dest.chmod(int(entry["mode"], 8))
    return P.plan_to_dict(plan)


def _play(tmp_path, inventory, *extra):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    return subprocess.run([str(BIN / "ansible-playbook"), "-i", str(inventory), str(REPO / "playbooks" / "drift.yml"), *extra],
                          capture_output=True, text=True, env=env, check=False, cwd=tmp_path, timeout=300)


def _table(output):
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if '"HOST             UNIT' in line)
    end = next(i for i in range(start, len(lines)) if lines[i].strip() == "]")
    return [json.loads(line.strip().rstrip(",")) for line in lines[start:end]]


@pytest.mark.slow
def test_drift_playbook_end_to_end(tmp_path):
    data = tmp_path / "docker-data"
    data.mkdir()
    fake = tmp_path / "docker"
    fake.write_text(FAKE_DOCKER.format(python=sys.executable, data=str(data)))
    fake.chmod(0o755)
    inventory, deployment = _drift_inventory(tmp_path)
    plan = _install(tmp_path, deployment)
    (proc,) = [p for p in plan["deployments"]["drift-demo"]["processes"] if p["kind"] == "engine"]
    assert proc["exec_start"][0] == str(fake)
    running = copy.deepcopy(CONTAINER_SHIM)  # the engine as deployed: it drains on a planned stop
    running["Args"] += ["--shutdown-timeout", "30"]
    running["Config"]["Cmd"] += ["--shutdown-timeout", "30"]
    (data / "container-vllm-drift-demo.json").write_text(json.dumps(running))
    (data / ("image-" + IMAGE_V1_ID.replace(":", "_") + ".json")).write_text(json.dumps(IMAGE_V1))
    (data / "image-vllm-drift-demo_latest.json").write_text(json.dumps(IMAGE_V1))

    result = _play(tmp_path, inventory)
    assert result.returncode == 0, result.stdout + result.stderr
    assert _table(result.stdout)[1:] == ["node-a           -                                    ok           matches the plan",
                                         "in sync: 1 host"]

    # The recipe's arguments change, the image is pulled again, the secret rotates: deploy has not run.
    inventory, _deployment = _drift_inventory(tmp_path, advanced_args=["--max-model-len", "8192"], api_key="sk-ROTATED-SECRET")
    (data / "image-vllm-drift-demo_latest.json").write_text(json.dumps(dict(IMAGE_V1, Id=IMAGE_V2_ID)))
    runs = [_play(tmp_path, inventory), _play(tmp_path, inventory, "--check", "--diff")]
    tables = [_table(r.stdout) for r in runs]
    assert tables[0] == tables[1]
    rows = [line.split(None, 3) for line in tables[0][1:-1]]
    unit = "vllm-drift-demo.service"
    assert [(r[0], r[1], r[2]) for r in rows] == [
        ("node-a", unit, "image"), ("node-a", unit, "argv"), ("node-a", unit, "file"), ("node-a", unit, "file")]
    assert "lacks '--max-model-len 8192'" in rows[1][3]
    assert rows[3][3].endswith("vllm-drift-demo.secret.env differs from the plan (secret: compared by sha256 only)")
    assert tables[0][-1] == "DRIFT on hosts: node-a"
    assert all(r.returncode == 0 for r in runs), runs[0].stdout
    # --diff prints the unit file and command diffs; no run prints a secret.
    assert '+    "--max-model-len" \\' in runs[1].stdout and "+--max-model-len" in runs[1].stdout
    assert "--max-model-len" not in runs[0].stdout.split("PLAY [Show the drift]")[0]
    for run in runs:
        assert "sk-PLAYBOOK-SECRET" not in run.stdout + run.stderr and "sk-ROTATED-SECRET" not in run.stdout + run.stderr

    failing = _play(tmp_path, inventory, "-e", "vllm_drift_fail=true")
    assert failing.returncode != 0 and "DRIFT on hosts: node-a (see the table above)" in failing.stdout


def test_a_rewritten_process_title_falls_back_to_systemds_exec_start():
    """vllm-router sets its title to 'vllm::router': /proc/PID/cmdline is then one padded string,
    and the drift check compares what systemd started instead (no false argv drift)."""
    assert D.retitled(["vllm::router" + " " * 40])
    assert D.retitled(["vllm::router", "", ""])  # the title may leave empty argv slots behind
    assert not D.retitled(["/opt/vllm-router/bin/vllm-router", "--port", "30000"])
    exec_start = ("{ path=/opt/vllm-router/bin/vllm-router ; argv[]=/opt/vllm-router/bin/vllm-router --host 0.0.0.0 "
                  "--port 30000 ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; "
                  "status=0/0 }")
    argv = D.exec_start_argv(exec_start)
    assert argv == ["/opt/vllm-router/bin/vllm-router", "--host", "0.0.0.0", "--port", "30000"]
    assert D.host_argv_matches(argv, argv)
    assert not D.host_argv_matches(["/opt/vllm-router/bin/vllm-router", "--port", "30001"], argv)
