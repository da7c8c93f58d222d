"""Deploy layer: the plan the roles consume, vllm_units_info, the hf fetch script, role conventions.

The roles themselves run on real systemd hosts in the molecule scenarios
(tests/molecule/single_node, multi_node, pd_cluster); these tests cover what can
be checked without hosts: the vllm_plan additions the roles rely on, the module
that reads installed units back, the download script against the Hub stand-in,
and the house conventions of every role (variable tiers, argument specs,
generated READMEs, playbook structure).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible.module_utils.urls import open_url

import host_log
from ansible_collections.vllm_fleet.recipes.plugins.action import vllm_progress as PROGRESS
from ansible_collections.vllm_fleet.recipes.plugins.module_utils import _units_scan as U
from ansible_collections.vllm_fleet.recipes.plugins.module_utils._systemd_show import parse_show
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _placement as P
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _render as R
from fleets import example_fleet

REPO = Path(__file__).resolve().parents[3]
ROLES = REPO / "roles"
DEPLOY_ROLES = ("preflight", "image", "weights", "fabric", "engine", "router")
#: Roles that follow the role conventions below: the deploy roles and the optional monitoring role.
CONVENTION_ROLES = DEPLOY_ROLES + ("monitoring",)
EXAMPLES = REPO / "playbooks" / "examples"
BIN = Path(sys.executable).parent
FETCH = ROLES / "weights" / "files" / "vllm-fleet-hf-fetch.sh"
PLAN_INPUTS = {"vllm_fleet_plan", "vllm_plan_recipe_dirs"}


# --------------------------------------------------------------------------------------
# vllm_plan: what the roles read
# --------------------------------------------------------------------------------------

def _playbook_command(tmp_path, inventory, tasks):
    """argv and environment of ansible-playbook running ``tasks`` on localhost."""
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "localhost", "connection": "local", "gather_facts": False,
                                         "tasks": tasks}]))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"), ANSIBLE_NOCOLOR="1")
    return [str(BIN / "ansible-playbook"), "-i", str(inventory), str(playbook),
            "-e", "ansible_python_interpreter=" + sys.executable], env


def _run_playbook(tmp_path, inventory, tasks):
    argv, env = _playbook_command(tmp_path, inventory, tasks)
    return subprocess.run(argv, capture_output=True, text=True, env=env, check=False, cwd=tmp_path)


def test_vllm_plan_returns_contents_and_per_host_files(tmp_path):
    out = tmp_path / "result.json"
    result = _run_playbook(tmp_path, EXAMPLES / "pd_cluster" / "inventory.yml", [
        {"vllm_fleet.recipes.vllm_plan": {"return_content": True}, "register": "r", "no_log": True},
        {"ansible.builtin.copy": {"content": "{{ r | to_json }}", "dest": str(out), "mode": "0600"}, "no_log": True},
    ])
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(out.read_text())
    assert sorted(data["contents"]) == data["files"]
    fleet = example_fleet("pd_cluster")
    assert data["contents"] == R.render(fleet)
    manifest = R.install_manifest(fleet)
    for host, entry in data["plan"]["hosts"].items():
        assert entry["files"] == manifest[host]
        for item in entry["files"]:
            assert item["src"] in data["contents"]
    for name, dep in data["plan"]["deployments"].items():
        assert {p["deployment"] for p in dep["processes"]} == {name}


def test_vllm_plan_without_return_content_has_no_file_text(tmp_path):
    out = tmp_path / "result.json"
    result = _run_playbook(tmp_path, EXAMPLES / "single_node_tp" / "inventory.yml", [
        {"vllm_fleet.recipes.vllm_plan": {}, "register": "r"},
        {"ansible.builtin.copy": {"content": "{{ r | to_json }}", "dest": str(out), "mode": "0600"}},
    ])
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(out.read_text())
    assert "contents" not in data and "probe_headers" not in data
    assert data["plan"]["hosts"]["h200-a"]["files"]


def test_vllm_plan_returns_the_probe_headers_of_the_api_key(tmp_path):
    key, out, inventory = "sk-probe-0123456789", tmp_path / "result.json", tmp_path / "inventory.yml"
    host = {"ansible_host": "10.40.0.1", "vllm_fabric_interface": "ens5", "vllm_deployment": {
        "recipe": "zai-org/GLM-5.3-Flash", "hardware": "h200", "strategy": "single_node_tp", "api_key": key}}
    inventory.write_text(yaml.safe_dump({"all": {"children": {"g": {"hosts": {"a": host}}}}}))
    result = _run_playbook(tmp_path, inventory, [
        {"vllm_fleet.recipes.vllm_plan": {"return_content": True}, "register": "r", "no_log": True},
        {"ansible.builtin.copy": {"content": "{{ r | to_json }}", "dest": str(out), "mode": "0600"}, "no_log": True}])
    assert result.returncode == 0 and key not in result.stdout + result.stderr, result.stdout + result.stderr
    assert json.loads(out.read_text())["probe_headers"] == {"vllm-g.service": {"Authorization": f"Bearer {key}"}}


def test_vllm_host_files_writes_the_secret_file_and_logs_no_secret_on_the_host(tmp_path):
    """The writer's invocation stays out of the host's journal (CI of 2026-12-05 found the API key
    there: Ansible's masking misses a multi-line no_log content inside a list)."""
    key, out, inventory = "sk-journal-0123456789", tmp_path / "files.json", tmp_path / "inventory.yml"
    host = {"ansible_host": "10.40.0.1", "vllm_fabric_interface": "ens5", "vllm_deployment": {
        "recipe": "zai-org/GLM-5.3-Flash", "hardware": "h200", "strategy": "single_node_tp", "api_key": key}}
    inventory.write_text(yaml.safe_dump({"all": {"children": {"g": {"hosts": {"a": host}}}}}))
    log_env, log = host_log.capture_env(tmp_path)
    argv, env = _playbook_command(tmp_path, inventory, [
        {"vllm_fleet.recipes.vllm_plan": {"return_content": True}, "register": "r", "no_log": True},
        {"vllm_fleet.recipes.vllm_host_files": {"plan": "{{ r }}", "host": "a", "kinds": ["engine"], "validate": ""},
         "check_mode": True, "register": "h"},
        {"ansible.builtin.copy": {"content": "{{ h.files | to_json }}", "dest": str(out), "mode": "0600"}},
        {"ansible.builtin.command": {"argv": ["true", "log-capture-marker"]}, "changed_when": False}])
    result = subprocess.run(argv, capture_output=True, text=True, env=dict(env, **log_env), check=False, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "/etc/vllm-fleet/g/vllm-g.secret.env" in json.loads(out.read_text())
    logged = host_log.read(log)
    assert "log-capture-marker" in logged and key not in logged


def test_plan_json_processes_name_their_deployment():
    fleet = example_fleet("multi_node_tp_pp")
    plan = P.plan_to_dict(fleet)
    for name, dep in plan["deployments"].items():
        assert [p["deployment"] for p in dep["processes"]] == [name] * len(dep["processes"])


# --------------------------------------------------------------------------------------
# vllm_units_info: reading rendered units back
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("example", ["single_node_tp", "multi_node_tp_pp", "pd_cluster"])
def test_units_info_reads_every_rendered_unit(example):
    fleet = example_fleet(example)
    files = R.render(fleet)
    plan = P.plan_to_dict(fleet)
    for dep in plan["deployments"].values():
        for proc in dep["processes"]:
            text = files[f"{dep['processes'][0]['deployment']}/{proc['host']}/{proc['unit']}"]
            info = U.parse_unit(f"/etc/systemd/system/{proc['unit']}", text)
            assert info["unit"] == proc["unit"]
            assert info["deployment"] == proc["deployment"]
            assert info["host"] == proc["host"]
            assert info["env_file"] == proc["env_file"]
            assert info["container"] == proc["container"]
            assert info["kind"] == ("router" if proc["kind"] == "router" else
                                    "watchdog" if proc["kind"] == "watchdog" else
                                    "mooncake" if proc["kind"].startswith("mooncake") else "engine")


def test_units_info_ignores_unmanaged_units():
    assert U.parse_unit("/etc/systemd/system/ssh.service", "[Unit]\nDescription=OpenSSH\n") is None


def test_units_info_collects_a_unit_dir(tmp_path):
    fleet = example_fleet("pd_cluster")
    files = R.render(fleet)
    env = tmp_path / "x.env"
    env.write_text("A=1\n")
    env.chmod(0o640)
    for rel, text in files.items():
        if rel.endswith(".service"):
            (tmp_path / Path(rel).name).write_text(text.replace("/etc/vllm-fleet/glm-pd/vllm-glm-pd-router.env", str(env)))
    (tmp_path / "other.service").write_text("[Service]\nExecStart=/bin/true\n")
    units = U.collect([str(tmp_path)], set(), str(tmp_path / "no-manifests"))
    assert [u["unit"] for u in units] == sorted(Path(r).name for r in files if r.endswith(".service"))
    router = [u for u in units if u["kind"] == "router"][0]
    assert router["env_file_mode"] == "0640"
    assert [u["manifest"] for u in units] == [None] * len(units)
    assert [u["unit"] for u in U.collect([str(tmp_path)], {"elsewhere"}, str(tmp_path))] == []


@pytest.mark.parametrize("example", ["single_node_tp", "multi_node_tp_pp", "pd_cluster"])
def test_units_info_reads_the_manifests_as_the_headers_say(example, tmp_path):
    """Every rendered unit has a manifest in the plan's files; read back, it says what the
    unit's header says (the fallback for units rendered before manifests)."""
    files = R.render(example_fleet(example))
    plan = json.loads(files["plan.json"])
    units_dir, manifest_dir = tmp_path / "units", tmp_path / "manifests"
    units_dir.mkdir()
    manifest_dir.mkdir()
    for host in plan["hosts"].values():
        for entry in host["files"]:
            if entry["dest"].endswith(".service.json"):
                (manifest_dir / Path(entry["dest"]).name).write_text(files[entry["src"]])
            elif entry["dest"].endswith(".service"):
                (units_dir / Path(entry["dest"]).name).write_text(files[entry["src"]])
    from_manifests = U.collect([str(units_dir)], set(), str(manifest_dir))
    from_headers = U.collect([str(units_dir)], set(), str(tmp_path / "none"))
    assert len(from_manifests) == sum(len(d["processes"]) for d in plan["deployments"].values())
    for read, parsed in zip(from_manifests, from_headers, strict=False):
        assert read["manifest"] == str(manifest_dir / (read["unit"] + ".json"))
        assert {k: v for k, v in read.items() if k != "manifest"} == {k: v for k, v in parsed.items() if k != "manifest"}


@pytest.mark.parametrize("manifest", [
    "not json", "[]", '{"schema": "vllm_fleet.unit/v1", "unit": "other.service", "deployment": "x"}',
    '{"schema": "vllm_fleet.unit/v0", "unit": "vllm-glm-pd-router.service", "deployment": "x"}',
])
def test_units_info_falls_back_to_the_header_for_a_manifest_not_of_this_unit(manifest, tmp_path):
    files = R.render(example_fleet("pd_cluster"))
    rel = next(r for r in files if r.endswith("vllm-glm-pd-router.service"))
    (tmp_path / "vllm-glm-pd-router.service").write_text(files[rel])
    (tmp_path / "vllm-glm-pd-router.service.json").write_text(manifest)
    [info] = U.collect([str(tmp_path)], set(), str(tmp_path))
    assert info["manifest"] is None
    assert info["deployment"] == "glm-pd"
    assert info["kind"] == "router"


def test_units_info_parses_systemctl_show():
    text = ("Id=a.service\nActiveState=active\nSubState=running\nUnitFileState=enabled\nNRestarts=2\n\n"
            "Id=b.service\nActiveState=failed\nSubState=failed\nUnitFileState=disabled\nNRestarts=0\n")
    states = parse_show(text)
    assert states["a.service"]["ActiveState"] == "active"
    assert states["b.service"]["UnitFileState"] == "disabled"


# --------------------------------------------------------------------------------------
# The weights role's fetch script, against the Hub stand-in
# --------------------------------------------------------------------------------------

def _hub_call(url, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    with open_url(url + path, data=data, method="POST" if body is not None else "GET",
                  headers={"Content-Type": "application/json"}, timeout=10) as resp:
        return json.loads(resp.read())


def _fetch(tmp_path, hub, token="hf_FAKEtokenForTheFetchTest"):
    env = tmp_path / "hf-download.env"
    env.write_text(f"HF_ENDPOINT={hub}\nHF_TOKEN={token}\n")
    env.chmod(0o600)
    cache = tmp_path / "cache"
    marker = cache / ".vllm-fleet" / "org--model@main.json"
    status = cache / ".vllm-fleet" / "org--model@main.status"
    result = subprocess.run(["bash", str(FETCH), str(env), str(BIN / "hf"), "org/model", "main", str(cache),
                             str(marker), str(status), "4"], capture_output=True, text=True, check=False, timeout=120)
    return result, marker, status


@pytest.mark.skipif(not (BIN / "hf").exists() or not shutil.which("du"), reason="needs the hf CLI in the venv")
def test_fetch_script_downloads_once_and_writes_a_marker(tmp_path, hub):
    result, marker, status = _fetch(tmp_path, hub)
    assert result.returncode == 0, result.stderr
    record = json.loads(marker.read_text())
    assert record["repo"] == "org/model" and record["revision"] == "main" and record["files"] == 7
    assert json.loads(status.read_text())["state"] == "done"
    stats = _hub_call(hub, "/_standin/stats")
    assert stats["auth"]["with_header"] > 0
    served = stats["total_bytes"]
    assert served == record["bytes"]
    # A second run finds every file complete and fetches nothing.
    result, marker, status = _fetch(tmp_path, hub)
    assert result.returncode == 0, result.stderr
    assert _hub_call(hub, "/_standin/stats")["total_bytes"] == served
    # The token went to the Hub, never to the script's output.
    assert "hf_FAKE" not in result.stdout + result.stderr + status.read_text() + marker.read_text()


@pytest.mark.skipif(not (BIN / "hf").exists(), reason="needs the hf CLI in the venv")
def test_fetch_script_rerun_after_an_interruption_skips_finished_files(tmp_path, hub):
    """A cut that outlasts hf's own retries fails the run (no marker); the next run fetches only
    what was not finished. (huggingface_hub >= 1.0 names partial files per process, so a
    partial file itself starts again from zero: docs/deploy.md, "Weights".)"""
    shard = "model-00001-of-00002.safetensors"
    _hub_call(hub, "/_standin/fault", {"drop_after_bytes": 1048576, "path": shard, "times": 50})
    first, marker, status = _fetch(tmp_path, hub)
    assert first.returncode != 0
    assert not marker.exists()
    assert json.loads(status.read_text())["state"] == "failed"
    _hub_call(hub, "/_standin/fault", {})
    before = _hub_call(hub, "/_standin/stats")["gets"]
    second, marker, _status = _fetch(tmp_path, hub)
    assert second.returncode == 0, second.stderr
    after = _hub_call(hub, "/_standin/stats")["gets"]
    refetched = sorted(k.split("/", 2)[2] for k in after if after[k] != before.get(k, 0))
    assert refetched == [shard]
    assert json.loads(marker.read_text())["files"] == 7


# --------------------------------------------------------------------------------------
# vllm_progress: progress lines while a long job runs
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("count, text", [(0, "0 B"), (1023, "1023 B"), (1536, "1.5 KiB"), (14681853, "14.0 MiB"),
                                         (3 * 1024 ** 3, "3.0 GiB")])
def test_progress_human_bytes(count, text):
    assert PROGRESS.human_bytes(count) == text


def test_progress_line_shows_bytes_rate_and_share():
    before = {"state": "running", "bytes": 1048576, "elapsed_s": 2}
    now = {"state": "running", "bytes": 3145728, "elapsed_s": 4}
    line = PROGRESS.progress_line("node-1", "org/model@main", now, before, total=6291456)
    assert line == "[node-1] org/model@main: running 3.0 MiB of 6.0 MiB (50%) at 1.0 MiB/s after 4 s"


def test_progress_action_prints_while_the_job_runs(tmp_path):
    status = tmp_path / "job.status"
    steps = [{"state": "running", "bytes": 0, "elapsed_s": 0}, {"state": "running", "bytes": 1048576, "elapsed_s": 2},
             {"state": "done", "bytes": 2097152, "elapsed_s": 3}]
    status.write_text(json.dumps(steps[0]))
    argv, env = _playbook_command(tmp_path, "localhost,", [
        {"vllm_fleet.recipes.vllm_progress": {"path": str(status), "label": "job", "interval": 1, "timeout": 60},
         "register": "r"},
        {"ansible.builtin.assert": {"that": ["r.status.state == 'done'", "r.polls >= 2"]}},
    ])
    # The job moves to its next step once the action has shown the current one, not on a
    # clock: ansible-playbook may take seconds to start on a busy machine (pytest-xdist,
    # `make test` beside the molecule scenarios), and the job must not be done by then.
    shown_before_next_step = ["[localhost] job: running 0 B", "[localhost] job: running 1.0 MiB"]
    output = []
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                          cwd=tmp_path) as proc:
        for line in proc.stdout:
            output.append(line)
            if shown_before_next_step and line.startswith(shown_before_next_step[0]):
                shown_before_next_step.pop(0)
                steps.pop(0)
                status.write_text(json.dumps(steps[0]))
    result = subprocess.CompletedProcess(argv, proc.returncode, "".join(output), "")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[localhost] job: running 1.0 MiB" in result.stdout
    assert "[localhost] job: done 2.0 MiB" in result.stdout


def test_progress_action_times_out_with_the_last_status(tmp_path):
    status = tmp_path / "job.status"
    status.write_text('{"state": "running", "bytes": 5, "elapsed_s": 1}')
    result = _run_playbook(tmp_path, "localhost,", [
        {"vllm_fleet.recipes.vllm_progress": {"path": str(status), "interval": 1, "timeout": 2}},
    ])
    assert result.returncode != 0
    assert "did not reach done or failed within 2 s" in result.stdout


# --------------------------------------------------------------------------------------
# Role conventions
# --------------------------------------------------------------------------------------

def _yaml(path):
    return yaml.safe_load(path.read_text()) or {}


def _tasks(role):
    for path in sorted((ROLES / role).glob("*/*.yml")):
        if path.parent.name in ("tasks", "handlers"):
            yield path, _yaml(path) or []


def _walk(tasks):
    for task in tasks or []:
        yield task
        for key in ("block", "rescue", "always"):
            yield from _walk(task.get(key))


@pytest.mark.parametrize("role", CONVENTION_ROLES)
def test_role_skeleton(role):
    base = ROLES / role
    for rel in ("defaults/main.yml", "vars/main.yml", "meta/main.yml", "meta/argument_specs.yml",
                "tasks/main.yml", "README.md"):
        assert (base / rel).is_file(), f"{role}: {rel} missing"


@pytest.mark.parametrize("role", CONVENTION_ROLES)
def test_variable_tiers(role):
    """Public vllm_<role>_*, internal _<role>_*, registered __<role>_* (docs/deploy.md)."""
    defaults = _yaml(ROLES / role / "defaults" / "main.yml")
    assert defaults, role
    assert [k for k in defaults if not k.startswith(f"vllm_{role}_")] == []
    internals = _yaml(ROLES / role / "vars" / "main.yml")
    assert [k for k in internals if not k.startswith(f"_{role}_")] == []
    outputs = {"vllm_fleet_plan", "vllm_fleet_host", "vllm_fleet_weights", "vllm_image_changed", "vllm_weights_changed"}
    for path, tasks in _tasks(role):
        for task in _walk(tasks):
            if "register" in task:
                assert task["register"].startswith(f"__{role}_"), f"{path}: register {task['register']}"
            for name in (task.get("ansible.builtin.set_fact") or {}):
                assert name.startswith(f"__{role}_") or name in outputs, f"{path}: set_fact {name}"
            loop_var = (task.get("loop_control") or {}).get("loop_var")
            if loop_var:
                assert loop_var.startswith(f"__{role}_"), f"{path}: loop_var {loop_var}"


@pytest.mark.parametrize("role", CONVENTION_ROLES + ("_common",))
def test_internal_variables_used_are_defined(role):
    """Every _<role>_* a role's tasks, vars or templates use is a key of its vars/main.yml.

    An internal variable that is used but not defined fails only when a play reaches it
    (a weights preflight task once did, on every scenario); this finds it at once.
    """
    prefix = "_common_" if role == "_common" else f"_{role}_"
    defined = set(_yaml(ROLES / role / "vars" / "main.yml") or {})
    for _path, tasks in _tasks(role):  # task-level vars (and include_tasks/include_role vars)
        for task in _walk(tasks):
            defined.update(task.get("vars") or {})
    spec_file = ROLES / role / ("argument_specs.yml" if role == "_common" else "meta/argument_specs.yml")
    specs = (_yaml(spec_file) or {}).get("argument_specs") or {}
    for entry in specs.values():  # role parameters (_common's entry points take them)
        defined.update(entry.get("options") or {})
    used: dict[str, str] = {}
    for path in sorted((ROLES / role).rglob("*")):
        if path.suffix not in (".yml", ".yaml", ".j2") or not path.is_file():
            continue
        for name in re.findall(r"(?<![A-Za-z0-9_])" + re.escape(prefix) + r"[a-z0-9_]+", path.read_text()):
            used.setdefault(name, str(path.relative_to(ROLES)))
    missing = {name: where for name, where in used.items() if name not in defined}
    assert missing == {}, missing


def test_common_role_tiers():
    internals = _yaml(ROLES / "_common" / "vars" / "main.yml")
    assert [k for k in internals if not k.startswith("_common_")] == []
    for path, tasks in _tasks("_common"):
        for task in _walk(tasks):
            if "register" in task:
                assert task["register"].startswith("__common_"), f"{path}: {task['register']}"


def test_common_role_refuses_to_run_alone():
    tasks = _yaml(ROLES / "_common" / "tasks" / "main.yml")
    assert list(tasks[0]) == ["name", "ansible.builtin.fail"]


def test_common_role_is_not_listed_but_checks_its_inputs():
    """ansible-doc -t role -l lists every collection role with meta/argument_specs.yml or meta/main.yml
    (ansible/cli/doc.py, ROLE_ARGSPEC_FILES): _common has neither, and its entry points with options
    check them against roles/_common/argument_specs.yml themselves."""
    assert not (ROLES / "_common" / "meta").exists()
    specs = _yaml(ROLES / "_common" / "argument_specs.yml")["argument_specs"]
    for entry, spec in specs.items():
        if not spec.get("options"):
            continue
        first = _yaml(ROLES / "_common" / "tasks" / f"{entry}.yml")[0]
        check = first["ansible.builtin.validate_argument_spec"]["argument_spec"]
        assert f"argument_specs.{entry}.options" in check and "/argument_specs.yml" in check, (entry, check)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"))
    listed = subprocess.run([str(BIN / "ansible-doc"), "-t", "role", "-l", "--json", "vllm_fleet.recipes"],
                            capture_output=True, text=True, env=env, check=True).stdout
    roles = set(json.loads(listed))
    assert "vllm_fleet.recipes.engine" in roles and "vllm_fleet.recipes._common" not in roles, roles


@pytest.mark.parametrize("role", CONVENTION_ROLES)
def test_argument_specs_cover_the_defaults(role):
    specs = _yaml(ROLES / role / "meta" / "argument_specs.yml")["argument_specs"]
    options = specs["main"]["options"]
    defaults = _yaml(ROLES / role / "defaults" / "main.yml")
    assert set(options) - PLAN_INPUTS == set(defaults)
    for name, value in defaults.items():
        spec = options[name]
        assert spec["description"], name
        if "{{" not in str(value):
            assert spec.get("default") == value, f"{role}: {name} default {value!r} vs spec {spec.get('default')!r}"
    if role != "preflight":
        assert specs["preflight"]["options"] == options
        assert (ROLES / role / "tasks" / "preflight.yml").is_file()


def test_role_readmes_are_generated_from_argument_specs():
    result = subprocess.run([sys.executable, str(REPO / "tools" / "role_readme.py"), "--check"],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def _imported(play):
    return play.get("ansible.builtin.import_playbook")


def test_shared_plan_playbook_compiles_once():
    facts, plan = _yaml(REPO / "playbooks" / "_plan.yml")
    assert facts["tags"] == ["always"] and "vllm_gather_network_facts" in facts["tasks"][0]["when"]
    assert plan["hosts"] == "localhost" and plan["tags"] == ["always"] and plan["any_errors_fatal"]
    compiles = [t for t in plan["tasks"] if "vllm_fleet.recipes.vllm_plan" in t]
    assert len(compiles) == 1 and compiles[0]["no_log"] and compiles[0]["register"] == "vllm_fleet_plan"
    assert compiles[0]["vllm_fleet.recipes.vllm_plan"]["return_content"]
    # no_log hides a compile error: the next task shows the compiler's message
    assert "vllm_fleet_plan.msg" in plan["tasks"][1]["ansible.builtin.fail"]["msg"]


@pytest.mark.parametrize("playbook", ["deploy.yml", "upgrade.yml", "validate.yml", "status.yml", "teardown.yml",
                                      "drift.yml", "verify.yml"])
def test_playbooks_share_the_plan_plays(playbook):
    plays = _yaml(REPO / "playbooks" / playbook)
    assert _imported(plays[0]) == "_plan.yml"
    assert not [t for p in plays for t in p.get("tasks", []) if "vllm_fleet.recipes.vllm_plan" in t]
    assert ("_preflight.yml" in [_imported(p) for p in plays]) == (playbook in ("deploy.yml", "upgrade.yml"))


def test_deploy_playbook_shape():
    plays = _yaml(REPO / "playbooks" / "deploy.yml")
    assert [_imported(p) for p in plays[:2]] == ["_plan.yml", "_preflight.yml"]
    plays = plays[2:]
    acceptance = plays.pop()  # the last play: proof that the fleet serves (docs/verify.md)
    assert acceptance["roles"] == [{"role": "vllm_fleet.recipes.acceptance", "tags": ["acceptance"]}]
    # Every play stops the run on a failed host, but the weights play: there the fleet copy retries a lost
    # sender's receivers from other holders, and the engine play after it refuses a plan with a host gone.
    assert [p["name"] for p in plays if not p["any_errors_fatal"]] == [
        "Fetch the model weights (once per deployment, then copied between nodes)"]
    engine = next(p for p in plays if p["name"] == "Install the engine units and start the groups in order")
    assert "Every host of the plan is still reachable" in engine["pre_tasks"][0]["name"]
    monitoring = plays.pop()  # the optional play before it: Prometheus on the group vllm_monitoring
    assert monitoring["hosts"] == "vllm_monitoring"
    assert monitoring["roles"] == [{"role": "vllm_fleet.recipes.monitoring", "tags": ["monitoring"]}]

    def play_role(play):
        if "roles" in play:
            return play["roles"][0]["role"].rsplit(".", 1)[1]
        task = play["tasks"][0]
        if "ansible.builtin.import_role" in task:
            # the role plays: the preflight play checked the identical 'preflight' spec (always tagged)
            assert task["ansible.builtin.import_role"]["rolespec_validate"] is False
            return task["ansible.builtin.import_role"]["name"].rsplit(".", 1)[1]
        include = task["ansible.builtin.include_role"]
        return include["name"].rsplit(".", 1)[1] + ":" + include["tasks_from"].removesuffix(".yml")

    preflight_play, = _yaml(REPO / "playbooks" / "_preflight.yml")
    order = [play_role(p) for p in [preflight_play] + plays]
    # The argv check (docs/validation.md) runs after the pull, before anything else changes.
    expected = list(DEPLOY_ROLES)
    expected.insert(expected.index("image") + 1, "image:argv_check")
    # The fabric check (docs/verify.md) runs after the fabric env files are written, before any engine.
    expected.insert(expected.index("fabric") + 1, "fabric:collective")
    assert order == expected
    imports = [t for t in preflight_play["tasks"] if "ansible.builtin.import_role" in t]
    preflight = [t["ansible.builtin.import_role"]["name"].rsplit(".", 1)[1] for t in imports]
    assert preflight == list(DEPLOY_ROLES[1:])
    assert preflight_play["tasks"][-1]["ansible.builtin.set_fact"] == {"vllm_fleet_preflight_done": True}
    for play in [preflight_play] + plays:
        assert play["hosts"] == "vllm_fleet_hosts"
    # each role's preflight runs once: the role plays skip theirs after the preflight play
    for role in DEPLOY_ROLES[1:]:
        first = _yaml(ROLES / role / "tasks" / "main.yml")[0]
        assert first["ansible.builtin.include_tasks"]["file"] == "standalone.yml"
        assert "vllm_fleet_preflight_done" in first["when"]
        standalone = _yaml(ROLES / role / "tasks" / "standalone.yml")
        assert "argument_specs.main.options" in standalone[0]["ansible.builtin.validate_argument_spec"]["argument_spec"]
        assert standalone[-1]["ansible.builtin.import_tasks"] == "preflight.yml"


@pytest.mark.parametrize("playbook", ["deploy.yml", "status.yml", "teardown.yml", "validate.yml", "upgrade.yml",
                                      "drift.yml", "verify.yml"])
def test_playbooks_pass_syntax_check(playbook):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"))
    result = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(EXAMPLES / "pd_cluster" / "inventory.yml"),
                             str(REPO / "playbooks" / playbook), "--syntax-check"],
                            capture_output=True, text=True, env=env, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_units_are_verified_before_install():
    units = _yaml(ROLES / "_common" / "tasks" / "units.yml")
    install = [t for t in units if "vllm_fleet.recipes.vllm_host_files" in t][0]
    assert install["vllm_fleet.recipes.vllm_host_files"]["validate"] == "{{ _common_units_validate }}"
    assert not [t for t in units if "ansible.builtin.copy" in t]  # one task installs every kind of file
    for role in ("engine", "router"):
        assert "systemd-analyze verify %s:%n" in (ROLES / role / "vars" / "main.yml").read_text()


def test_fetch_script_keeps_the_token_off_the_command_line():
    assert "--token" not in FETCH.read_text()


def test_download_env_files_hold_the_token_only_in_a_0600_file_and_show_no_diff(tmp_path):
    """The weights role's task that writes the download env files (one per origin here), run with the
    role's vars: the token reaches only the 0600 files, never the play's output or a diff."""
    token = "hf_downloadENVtoken0123456789abcdef"
    origins = [{"name": "a", "origin": "localhost", "endpoint": "http://hub.test:5080",
                "env_file": str(tmp_path / "env" / "a.env")},
               {"name": "b", "origin": "localhost", "endpoint": "", "env_file": str(tmp_path / "env" / "b.env")},
               {"name": "c", "origin": "elsewhere", "endpoint": "", "env_file": str(tmp_path / "env" / "c.env")}]
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"localhost": {
        "vllm_fleet_weights": origins, "vllm_weights_hf_token": token,
        "vllm_weights_download_env": {"HF_HUB_ENABLE_HF_TRANSFER": "0"},
        **yaml.safe_load((ROLES / "weights" / "vars" / "main.yml").read_text())}}}}))
    task = next(task for task in yaml.safe_load((ROLES / "weights" / "tasks" / "install.yml").read_text())
                if task["name"].startswith("Write the download env files"))
    (tmp_path / "env").mkdir()
    argv, env = _playbook_command(tmp_path, inventory, [task])
    run = subprocess.run([*argv, "--diff", "-v"], capture_output=True, text=True, env=env, check=False, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert token not in run.stdout + run.stderr
    first, second = (tmp_path / "env" / "a.env"), (tmp_path / "env" / "b.env")
    assert not (tmp_path / "env" / "c.env").exists()  # another host's origin
    for path in (first, second):
        assert path.stat().st_mode & 0o777 == 0o600
        lines = path.read_text().splitlines()
        assert f"HF_TOKEN={token}" in lines and "HF_HUB_ENABLE_HF_TRANSFER=0" in lines
        assert lines[0].startswith("# Managed by vllm_fleet.recipes (weights role)")
    assert "HF_ENDPOINT=http://hub.test:5080" in first.read_text().splitlines()
    assert "HF_ENDPOINT" not in second.read_text()


def test_fetch_script_reads_its_env_file_without_evaluating_it(tmp_path):
    """The download env file is read line by line (docker --env-file rules), never sourced."""
    import subprocess  # pylint: disable=import-outside-toplevel

    from ansible_collections.vllm_fleet.recipes.plugins.filter.files import env_file_filter

    text = FETCH.read_text()
    assert '. "$env_file"' not in text and "set -a" not in text
    start = text.index("while IFS= read -r line")
    reader = text[start:text.index('done <"$env_file"') + len('done <"$env_file"')]
    pwned = tmp_path / "pwned"
    token = f"hf_$(touch {pwned})`touch {pwned}`'\"x\\ y"
    env = tmp_path / "hf-download.env"
    env.write_text(env_file_filter({"HF_ENDPOINT": "https://hf.example", "HF_TOKEN": token},
                                   ["Managed"], secret=True))
    out = subprocess.run(["bash", "-c", f'set -Eeuo pipefail; env_file=$1; {reader}; printf "%s|%s" "$HF_TOKEN" "$HF_ENDPOINT"',
                          "fetch", str(env)], capture_output=True, text=True, check=True)
    assert out.stdout == f"{token}|https://hf.example"
    assert not pwned.exists()


_BAD_VALUE = {"int": "not-a-number", "bool": "maybe", "list": 123, "dict": 123}


def _preflight_imports() -> list[dict]:
    play = yaml.safe_load((REPO / "playbooks" / "_preflight.yml").read_text())[0]
    return [task for task in play["tasks"] if "ansible.builtin.import_role" in task]


@pytest.mark.parametrize("task", _preflight_imports(), ids=lambda t: t["ansible.builtin.import_role"]["name"])
def test_the_preflight_play_checks_each_roles_inputs_before_its_tasks(tmp_path, task):
    """The preflight play's import of a role's checks, run as written there with one input of the
    wrong type: the role's argument spec refuses it, naming it, before the role's first task (the
    play runs before any host changes; a .yml suffix in tasks_from silently skipped the check)."""
    role = task["ansible.builtin.import_role"]["name"].rsplit(".", 1)[1]
    specs = yaml.safe_load((ROLES / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    entry = task["ansible.builtin.import_role"]["tasks_from"]
    assert entry in specs, f"{role}: tasks_from {entry!r} is not an entry point of its argument spec"
    name, option = next((name, option) for name, option in specs[entry]["options"].items()
                        if option.get("type") in _BAD_VALUE)
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"localhost": {name: _BAD_VALUE[option["type"]]}}}}))
    argv, env = _playbook_command(tmp_path, inventory, [task])
    run = subprocess.run(argv, capture_output=True, text=True, env=env, check=False, cwd=tmp_path)
    assert run.returncode != 0
    assert f"Validating arguments against arg spec '{entry}'" in run.stdout, run.stdout[-3000:]
    assert re.search(rf"argument '?{name}'?", run.stdout + run.stderr), run.stdout[-3000:]
    assert "Load the fleet plan" not in run.stdout


def _deploy_with_a_bad_variable(tmp_path, name: str, *args: str) -> subprocess.CompletedProcess:
    """deploy.yml on the pd_cluster example with the role variable ``name`` of the wrong type (an int).

    Nothing may reach the example's hosts (they do not exist): the run must stop on the controller.
    """
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_RETRY_FILES_ENABLED="0")
    env.pop("ANSIBLE_CONFIG", None)
    return subprocess.run([str(BIN / "ansible-playbook"), "-i", str(EXAMPLES / "pd_cluster" / "inventory.yml"),
                           str(REPO / "playbooks" / "deploy.yml"), "-e", f"{name}=not-a-number", *args],
                          capture_output=True, text=True, env=env, check=False, cwd=tmp_path, timeout=300)


@pytest.mark.parametrize("tags", [[], ["--tags", "engine"], ["--tags", "image"]], ids=["all", "engine", "image"])
def test_deploy_refuses_a_role_variable_in_the_preflight_play_whatever_the_tags(tmp_path, tags):
    """The role plays skip Ansible's own spec check; the preflight play's (tagged always) refuses the
    variable before any role play, also when --tags selects only some roles."""
    run = _deploy_with_a_bad_variable(tmp_path, "vllm_engine_health_interval_s", *tags)
    assert run.returncode != 0
    assert "Validating arguments against arg spec 'preflight' - Only the checks of engine" in run.stdout
    assert re.search(r"argument '?vllm_engine_health_interval_s'?", run.stdout), run.stdout[-3000:]
    assert "PLAY [Pull the container images]" not in run.stdout, run.stdout[-3000:]


def test_deploy_without_its_preflight_play_checks_the_role_variables_in_the_role(tmp_path):
    """--skip-tags preflight: each role checks its 'main' spec itself (tasks/standalone.yml) before its
    first task; nothing is pulled."""
    run = _deploy_with_a_bad_variable(tmp_path, "vllm_image_pull_retries", "--skip-tags", "preflight")
    assert run.returncode != 0
    assert "PLAY [Preflight every host" in run.stdout and "Only the checks of image" not in run.stdout
    assert "TASK [vllm_fleet.recipes.image : Check the image role's variables against its argument spec]" in run.stdout
    assert re.search(r"argument '?vllm_image_pull_retries'?", run.stdout), run.stdout[-3000:]
    assert "Pull the images the units run" not in run.stdout, run.stdout[-3000:]


@pytest.mark.parametrize("package, versions, expected", [
    ("vllm-router==0.1.17", {"/opt/a": "0.1.17", "/opt/b": "0.1.9"}, ["/opt/b", "/opt/c"]),
    ("vllm-router==0.1.17", {"/opt/a": "0.1.17", "/opt/b": "0.1.17", "/opt/c": "0.1.17"}, []),
    ("vllm-router>=0.1", {"/opt/a": "0.1.17", "/opt/b": "0.1.17", "/opt/c": "0.1.17"}, ["/opt/a", "/opt/b", "/opt/c"]),
])
def test_the_router_role_installs_where_the_preflight_read_another_version(tmp_path, package, versions, expected):
    """vllm_fleet_router_versions (the router check's read of each venv) decides where pip runs:
    only venvs without the pinned version; every venv when the package is not pinned (pip decides)."""
    router_vars = yaml.safe_load((ROLES / "router" / "vars" / "main.yml").read_text())
    procs = [{"kind": "router", "runtime": "venv", "exec_start": [f"/opt/{name}/bin/vllm-router"]} for name in "abc"]
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"localhost": {
        "vllm_fleet_host": {"processes": procs}, "vllm_router_package": package,
        "vllm_fleet_router_versions": versions, **router_vars}}}}))
    out = tmp_path / "venvs.json"
    run = _run_playbook(tmp_path, inventory, [
        {"ansible.builtin.copy": {"content": "{{ _router_venvs_to_install | to_json }}", "dest": str(out), "mode": "0600"}}])
    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads(out.read_text()) == expected
