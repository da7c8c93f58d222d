"""The filter and action plugins, run through real ansible-playbook on localhost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.vllm_fleet.recipes.plugins.action.vllm_host_files import _crash_summary

SEED = "recipes/models/zai-org/GLM-5.3-Flash.yaml"


def run_playbook(repo_root: Path, tmp_path: Path, tasks: str) -> subprocess.CompletedProcess:
    playbook = tmp_path / "play.yml"
    playbook.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n" + tasks)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(repo_root / ".collections"),
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default", ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
    binary = Path(sys.executable).parent / "ansible-playbook"
    return subprocess.run([str(binary), str(playbook)], cwd=repo_root, env=env, capture_output=True, text=True,
                          check=False)


def test_action_resolves_and_filters_agree(repo_root, tmp_path):
    out = tmp_path / "result.json"
    proc = run_playbook(repo_root, tmp_path, f"""
    - name: resolve with the action
      vllm_fleet.recipes.vllm_resolve:
        recipe: "{repo_root / SEED}"
        selection: {{strategy: multi_node_tp_pp, node_count: 2}}
      register: via_action
    - name: write both results
      vars:
        seed: "{repo_root / SEED}"
        via_filter: "{{{{ seed | vllm_fleet.recipes.resolve({{'strategy': 'multi_node_tp_pp'}}) }}}}"
      ansible.builtin.copy:
        dest: "{out}"
        content: >-
          {{{{ {{'action': via_action.processes, 'filter': via_filter.processes,
          'default': seed | vllm_fleet.recipes.default_selection}} | to_json }}}}
""")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    assert [p["name"] for p in data["action"]] == ["head", "worker-1"]
    assert data["action"] == data["filter"]
    worker = data["action"][1]["argv"]
    assert worker[worker.index("--node-rank") + 1] == "1" and "--headless" in worker
    assert data["default"]["strategy"] == "single_node_tp" and data["default"]["hardware"] == "h200"


@pytest.mark.parametrize("selection, message", [
    ("{strategy: multi_node_tp_pp, node_count: 1}", "node_count: got 1 (int); expected at least 2"),
    ("{variant: int8}", "variant: got 'int8' (str); expected one of: bf16, default, nvfp4"),
])
def test_action_fails_with_named_key(repo_root, tmp_path, selection, message):
    proc = run_playbook(repo_root, tmp_path, f"""
    - vllm_fleet.recipes.vllm_resolve:
        recipe: "{repo_root / SEED}"
        selection: {selection}
""")
    assert proc.returncode != 0
    assert message in proc.stdout


def test_filter_takes_a_shipped_recipe_id(repo_root, tmp_path):
    out = tmp_path / "sel.json"
    proc = run_playbook(repo_root, tmp_path, f"""
    - ansible.builtin.copy:
        dest: "{out}"
        content: "{{{{ 'zai-org/GLM-5.3-Flash' | vllm_fleet.recipes.default_selection(hardware='mi355x') | to_json }}}}"
""")
    assert proc.returncode == 0, proc.stdout
    assert json.loads(out.read_text())["hardware"] == "mi355x"


#: Each plugin that needs pydantic and a task that uses it; every one must fail naming the package.
#: (vllm_host_files guards its import too, but its plugin_utils need only the standard library.)
GUARDED_USES = {
    "vllm_resolve": "vllm_fleet.recipes.vllm_resolve: {recipe: x}",
    "vllm_plan": "vllm_fleet.recipes.vllm_plan: {}",
    "vllm_preflight": "vllm_fleet.recipes.vllm_preflight: {checks: [engine]}",
    "resolve": "ansible.builtin.debug: {msg: \"{{ 'x' | vllm_fleet.recipes.resolve }}\"}",
    "default_selection": "ansible.builtin.debug: {msg: \"{{ 'x' | vllm_fleet.recipes.default_selection }}\"}",
    "prometheus_file_sd": "ansible.builtin.debug: {msg: \"{{ {} | vllm_fleet.recipes.prometheus_file_sd }}\"}",
    "fleet_figures": "ansible.builtin.debug: {msg: \"{{ [] | vllm_fleet.recipes.fleet_figures }}\"}",
}


def test_plugins_without_pydantic_name_the_package_and_the_install_command(repo_root, tmp_path, monkeypatch):
    """With pydantic unimportable, each plugin still loads, and using it says what to install, and where."""
    blocked = tmp_path / "blocked" / "pydantic"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'pydantic' (blocked by the test)\", name='pydantic')\n")
    monkeypatch.setenv("PYTHONPATH", str(blocked.parent))
    out = tmp_path / "results.json"
    tasks = "".join(f"""
    - name: use {name}
      {use}
      register: r_{name}
      ignore_errors: true
""" for name, use in GUARDED_USES.items())
    record = ", ".join(f"'{name}': r_{name}.msg | default('')" for name in GUARDED_USES)
    proc = run_playbook(repo_root, tmp_path, tasks + f"""
    - name: record the messages
      ansible.builtin.copy:
        content: "{{{{ {{{record}}} | to_json }}}}"
        dest: {out}
        mode: "0600"
""")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    messages = json.loads(out.read_text())
    for name in GUARDED_USES:
        assert "needs the Python package pydantic on the controller" in messages[name], (name, messages[name])
        assert f"{sys.executable} -m pip install -r" in messages[name], (name, messages[name])


def test_start_waves_filter_groups_plan_processes_and_names_a_bad_one(repo_root, tmp_path):
    out = tmp_path / "waves.json"
    procs = [{"unit": "r", "start_order": 30}, {"unit": "h", "start_order": 20}, {"unit": "w", "start_order": 10}]
    proc = run_playbook(repo_root, tmp_path, f"""
    - ansible.builtin.copy:
        dest: "{out}"
        content: "{{{{ procs | vllm_fleet.recipes.start_waves | to_json }}}}"
      vars:
        procs: {json.dumps(procs)}
    - ansible.builtin.debug:
        msg: "{{{{ [{{'unit': 'vllm-bad'}}] | vllm_fleet.recipes.start_waves }}}}"
""")
    assert json.loads(out.read_text()) == [{"order": 10, "processes": [procs[2]]},
                                           {"order": 20, "processes": [procs[1]]},
                                           {"order": 30, "processes": [procs[0]]}]
    assert proc.returncode != 0
    assert "start_waves: process 'vllm-bad': start_order is None" in proc.stdout


def test_rollback_filters_read_a_real_slurped_snapshot_and_name_a_missing_host(repo_root, tmp_path):
    manifest = tmp_path / "manifest.json"
    out = tmp_path / "steps.json"
    proc = run_playbook(repo_root, tmp_path, f"""
    - ansible.builtin.copy:
        dest: "{manifest}"
        content: "{{{{ {{'existed': ['/etc/a.service'], 'containers': inspect | vllm_fleet.recipes.snapshot_containers}}
                     | to_json }}}}"
      vars:
        inspect: [{{Name: /vllm-a, Image: "sha256:1", Config: {{Image: "reg/vllm:v1"}}}}]
    - ansible.builtin.slurp:
        src: "{manifest}"
      loop: [localhost]
      register: manifests
    - ansible.builtin.copy:
        dest: "{out}"
        content: "{{{{ manifests.results | vllm_fleet.recipes.rollback_steps(files, procs) | to_json }}}}"
      vars:
        files: {{localhost: [/etc/a.service, /etc/b.env]}}
        procs: [{{host: localhost, container: vllm-a}}, {{host: localhost, container: null}}]
    - ansible.builtin.debug:
        msg: "{{{{ manifests.results | vllm_fleet.recipes.rollback_steps({{'other': ['/x']}}, []) }}}}"
""")
    assert json.loads(out.read_text()) == {
        "files": [{"host": "localhost", "path": "/etc/a.service", "existed": True},
                  {"host": "localhost", "path": "/etc/b.env", "existed": False}],
        "images": [{"host": "localhost", "ref": "reg/vllm:v1", "id": "sha256:1"}]}
    assert proc.returncode != 0
    assert "rollback_steps: no rollback snapshot was read for host 'other'" in proc.stdout


def test_host_files_says_why_the_writer_crashed_on_the_host():
    """A crash of vllm_files_write on a host (an exception, no msg) is reported with its reason, not as
    a bare 'failed' (CI: a directory docker had made where the secret env file belongs)."""
    message = _crash_summary({"failed": True, "exception": "IsADirectoryError: [Errno 21] Is a directory: '/etc/x.env'"})
    assert "Is a directory: '/etc/x.env'" in message and "vllm_files_write failed on the host" in message
    assert _crash_summary({"failed": True}).endswith("without a message")


# Each action plugin with one bad call: (module, args as YAML, what its message must name).
BAD_ACTION_ARGS = [
    ("vllm_benchmark_report", "{run: {}, image_id: i, results: [], started: s, dir: /tmp, plot: maybe}", "plot"),
    ("vllm_files_write", "{specs: [{dest: /tmp/x, mode: '0644'}]}", "content"),
    ("vllm_host_files", "{plan: {}, kinds: [engine], colour: red}", "colour"),
    ("vllm_plan", "{prune: sometimes}", "prune"),
    ("vllm_preflight", "{checks: [], inputs: {}, verbose: true}", "verbose"),
    ("vllm_progress", "{path: /tmp/x, interval: soon}", "interval"),
    ("vllm_resolve", "{recipe: x, strict: perhaps}", "strict"),
]


def test_every_action_plugin_checks_its_arguments_on_the_controller(repo_root, tmp_path):
    """validate_argument_spec in each action: a wrong type or unknown option fails naming it, before any host."""
    out = tmp_path / "results.json"
    tasks = "".join(f"""
    - name: {module}
      vllm_fleet.recipes.{module}: {args}
      register: r_{index}
      ignore_errors: true
      vars:  # a host nothing listens on: a call that got past its checks would be unreachable
        ansible_connection: ssh
        ansible_host: 127.0.0.1
        ansible_port: 1
""" for index, (module, args, _key) in enumerate(BAD_ACTION_ARGS))
    keys = ", ".join(f"r_{index}" for index in range(len(BAD_ACTION_ARGS)))
    proc = run_playbook(repo_root, tmp_path, tasks + f"""
    - name: write every result
      ansible.builtin.copy:
        dest: "{out}"
        content: "{{{{ [{keys}] | to_json }}}}"
""")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads(out.read_text())
    for (module, _args, key), result in zip(BAD_ACTION_ARGS, results, strict=True):
        assert result.get("failed") and not result.get("unreachable"), (module, result)
        assert key in result["msg"], (module, result["msg"])
