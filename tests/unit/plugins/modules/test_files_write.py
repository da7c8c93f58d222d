"""vllm_files_write: the host-side writer of vllm_host_files, on a temporary directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import pytest
import yaml
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

import host_log
from ansible_collections.vllm_fleet.recipes.plugins.module_utils._file_diffs import with_after, without_journal_entry
from ansible_collections.vllm_fleet.recipes.plugins.modules import vllm_files_write as W


class _Module(SimpleNamespace):
    def fail_json(self, **kwargs):
        raise AssertionError(kwargs["msg"])


@pytest.mark.skipif(os.geteuid() != 0, reason="writes root-owned files")
def test_writer_writes_what_differs_and_hides_secret_diffs(tmp_path):
    conf = tmp_path / "conf"
    specs = [{"dest": str(conf / "a.env"), "content": "A=1\n", "mode": "0600", "diff": True, "validate": ""},
             {"dest": str(conf / "b.secret.env"), "content": "KEY=s3cret\n", "mode": "0600", "diff": False,
              "validate": ""}]
    conf_dirs = W.dir_specs([str(conf)], "0755")
    checked, dirs, _diffs = W.apply_files(_Module(check_mode=True), specs, conf_dirs)
    assert dirs == [str(conf)] and len(checked) == 2 and not conf.exists()
    changed, dirs, diffs = W.apply_files(_Module(check_mode=False), specs, conf_dirs)
    assert changed == [s["dest"] for s in specs] and dirs == [str(conf)]
    assert [d["after_header"] for d in diffs] == [str(conf / "a.env")]
    assert "s3cret" not in repr(diffs)
    assert oct((conf / "b.secret.env").stat().st_mode & 0o777) == "0o600"
    assert W.apply_files(_Module(check_mode=False), specs, conf_dirs) == ([], [], [])
    (conf / "a.env").chmod(0o644)
    assert W.apply_files(_Module(check_mode=False), specs, conf_dirs)[0] == [str(conf / "a.env")]


@pytest.mark.skipif(os.geteuid() != 0, reason="writes root-owned files")
def test_writer_replaces_nothing_when_validation_refuses(tmp_path):
    unit = tmp_path / "x.service"
    unit.write_text("old\n")
    spec = {"dest": str(unit), "content": "new\n", "mode": "0644", "diff": True, "validate": "false %s"}
    with pytest.raises(AssertionError, match="refused the new unit"):
        W.apply_files(_Module(check_mode=False), [spec], [])
    assert unit.read_text() == "old\n"
    spec["validate"] = "grep -q new %s"
    assert W.apply_files(_Module(check_mode=False), [spec], [])[0] == [str(unit)]


@pytest.mark.skipif(os.geteuid() != 0, reason="writes root-owned files")
def test_a_refused_unit_stops_every_write_of_the_call(tmp_path):
    env, unit = tmp_path / "conf" / "a.env", tmp_path / "x.service"
    unit.write_text("old\n")
    specs = [{"dest": str(env), "content": "A=1\n", "mode": "0600", "diff": True, "validate": ""},
             {"dest": str(unit), "content": "new\n", "mode": "0644", "diff": True, "validate": "false %s"}]
    with pytest.raises(AssertionError, match="nothing was written"):
        W.apply_files(_Module(check_mode=False), specs, W.dir_specs([str(env.parent)], "0755"))
    assert not env.parent.exists() and unit.read_text() == "old\n"


def _mode_of(path):
    return oct(path.stat().st_mode & 0o7777)


@pytest.mark.skipif(os.geteuid() != 0, reason="writes root-owned files")
def test_dirs_take_their_own_mode_or_dir_mode_and_parents_get_it_too(tmp_path):
    cache, libexec = tmp_path / "cache" / "a" / "b", tmp_path / "libexec"
    dirs = W.dir_specs([str(cache), {"path": str(libexec), "mode": "0755"}], "0700")
    assert dirs == [(str(cache), 0o700), (str(libexec), 0o755)]
    assert W.apply_files(_Module(check_mode=True), [], dirs)[1] == [str(cache), str(libexec)]
    assert not cache.exists()
    assert W.apply_files(_Module(check_mode=False), [], dirs)[1] == [str(cache), str(libexec)]
    assert [_mode_of(p) for p in (cache, cache.parent, cache.parent.parent, libexec)] == ["0o700"] * 3 + ["0o755"]
    assert W.apply_files(_Module(check_mode=False), [], dirs) == ([], [], [])
    libexec.chmod(0o775)
    assert W.apply_files(_Module(check_mode=True), [], dirs)[1] == [str(libexec)] and _mode_of(libexec) == "0o775"
    assert W.apply_files(_Module(check_mode=False), [], dirs)[1] == [str(libexec)] and _mode_of(libexec) == "0o755"


@pytest.mark.skipif(os.geteuid() != 0, reason="writes root-owned files")
def test_a_spec_without_diff_or_validate_is_diffed_and_not_validated(tmp_path):
    script = tmp_path / "watchdog"
    changed, _dirs, diffs = W.apply_files(_Module(check_mode=False),
                                          [{"dest": str(script), "content": "#!/bin/sh\n", "mode": "0755"}], [])
    assert changed == [str(script)] and [d["after"] for d in diffs] == ["#!/bin/sh\n"]
    assert _mode_of(script) == "0o755"


@pytest.mark.parametrize("item", ["relative/dir", {"path": "/x", "mode": "rwx"}, {"path": "/x", "owner": "root"},
                                  {"mode": "0700"}, 7])
def test_malformed_dirs_are_refused(item):
    with pytest.raises(ValueError, match="dirs"):
        W.dir_specs([item], "0755")


def test_the_action_puts_the_new_text_back_into_the_diffs_the_module_masked():
    specs = [{"dest": "/a.env", "content": "A=1\n", "mode": "0600"},
             {"dest": "/b.secret.env", "content": "KEY=s3cret\n", "mode": "0600", "diff": False}]
    masked = [{"before_header": "/a.env", "after_header": "/a.env", "before": "A=0\n",
               "after": "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"}]
    assert with_after(masked, specs) == [dict(masked[0], after="A=1\n")]
    # a diff of a secret file never gets its text, even if the module returned one
    assert with_after([dict(masked[0], before_header="/b.secret.env", after_header="/b.secret.env")], specs) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="writes root-owned files")
def test_a_task_returns_the_changed_paths_and_readable_diffs_but_no_secret(tmp_path):
    """Through ansible-playbook: only the contents are no_log (a masked path broke the restart logic)."""
    repo = Path(__file__).resolve().parents[4]
    result_file = tmp_path / "result.json"
    specs = [{"dest": str(tmp_path / "conf" / "a.env"), "content": "A=1\n", "mode": "0644"},
             {"dest": str(tmp_path / "conf" / "s.env"), "content": "KEY=s3cret\n", "mode": "0600", "diff": False}]
    play = [{"hosts": "localhost", "connection": "local", "gather_facts": False, "tasks": [
        {"vllm_fleet.recipes.vllm_files_write": {"dirs": [str(tmp_path / "conf")], "specs": specs}, "register": "r"},
        {"ansible.builtin.copy": {"content": "{{ r | to_json }}", "dest": str(result_file), "mode": "0600"}}]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(repo / ".collections"), ANSIBLE_NOCOLOR="1")
    run = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "--diff", "-v",
                          str(tmp_path / "play.yml"), "-e", "ansible_python_interpreter=" + sys.executable],
                         capture_output=True, text=True, env=env, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    result = json.loads(result_file.read_text())
    assert result["files"] == [s["dest"] for s in specs] and result["dirs"] == [str(tmp_path / "conf")]
    assert [(d["after_header"], d["after"]) for d in result["diff"]] == [(specs[0]["dest"], "A=1\n")]
    assert "+A=1" in run.stdout and "s3cret" not in run.stdout + run.stderr + result_file.read_text()


def _module_journal(module_args: dict) -> str:
    """What vllm_files_write run in-process (check mode) sends to the host's log."""
    logged: list[str] = []
    with patch_module_args(dict(module_args, _ansible_check_mode=True)), \
            mock.patch.object(basic, "has_journal", False), \
            mock.patch.object(basic.syslog, "syslog", lambda *args: logged.append(str(args[-1]))), \
            pytest.raises(SystemExit):
        W.main()
    return "\n".join(logged)


def test_ansibles_own_masking_misses_a_multi_line_secret_content_and_the_journal_flag_stops_it(tmp_path):
    specs = [{"dest": str(tmp_path / "s.secret.env"), "content": "A=1\nVLLM_API_KEY='sk-s3cret'\n", "mode": "0600",
              "diff": False}]
    # The invocation logged without the flag: the list's text escapes the line breaks, so the
    # no_log content is not found verbatim and the key is logged (the CI finding of 2026-12-05).
    unmasked = _module_journal({"specs": specs, "_ansible_no_log": False})
    assert "Invoked with" in unmasked and "sk-s3cret" in unmasked
    assert _module_journal(without_journal_entry({"specs": specs, "_ansible_no_log": False})) == ""


@pytest.mark.skipif(os.geteuid() != 0, reason="writes root-owned files")
def test_through_ansible_playbook_the_writer_logs_no_secret_on_the_host(tmp_path):
    """The module's own action runs it with its journal entry off (vllm_host_files, its other caller:
    tests/unit/roles/test_deploy.py); a command task in the same play shows the capture works."""
    repo = Path(__file__).resolve().parents[4]
    log_env, log = host_log.capture_env(tmp_path)
    secret = "KEY=s3cret-in-the-journal\nB=2\n"
    spec = {"dest": str(tmp_path / "conf" / "s.secret.env"), "content": secret, "mode": "0600", "diff": False}
    play = [{"hosts": "localhost", "connection": "local", "gather_facts": False, "tasks": [
        {"vllm_fleet.recipes.vllm_files_write": {"dirs": [str(tmp_path / "conf")], "specs": [spec]}},
        {"ansible.builtin.command": {"argv": ["true", "log-capture-marker"]}, "changed_when": False}]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(repo / ".collections"), ANSIBLE_NOCOLOR="1",
               **log_env)
    run = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,",
                          str(tmp_path / "play.yml"), "-e", "ansible_python_interpreter=" + sys.executable],
                         capture_output=True, text=True, env=env, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    logged = host_log.read(log)
    assert "log-capture-marker" in logged
    assert "s3cret" not in logged and (tmp_path / "conf" / "s.secret.env").read_text() == secret


@pytest.mark.skipif(os.geteuid() != 0, reason="writes root-owned files")
def test_units_are_read_back_after_the_write_with_their_systemd_state(tmp_path, capsys):
    """``units`` set: the managed units of the deployments, the one written now included, come back."""
    unit_dir = tmp_path / "system"
    unit_dir.mkdir()
    header = "# Managed by vllm_fleet.recipes\n# deployment={} recipe=r deploy_type=pd_cluster\n# process={} host=a\n"
    (unit_dir / "vllm-pd-decode-1.service").write_text(header.format("pd", "decode rank 1") + "[Service]\n")
    (unit_dir / "vllm-other.service").write_text(header.format("other", "decode rank 0") + "[Service]\n")
    (unit_dir / "sshd.service").write_text("[Service]\n")
    new_unit = {"dest": str(unit_dir / "vllm-pd-router.service"), "mode": "0644",
                "content": header.format("pd", "router") + "[Service]\n"}
    show = ("Id=vllm-pd-decode-1.service\nActiveState=failed\nSubState=failed\nUnitFileState=enabled\nNRestarts=3\n\n"
            "Id=vllm-pd-router.service\nActiveState=inactive\nSubState=dead\nUnitFileState=\nNRestarts=\n")
    calls = []

    def run_command(_self, cmd, **_kwargs):
        calls.append(cmd)
        return 0, show, ""

    args = {"specs": [new_unit], "units": {"unit_dirs": [str(unit_dir)], "deployments": ["pd"],
                                           "manifest_dir": str(tmp_path / "manifests")}}
    with patch_module_args(args), mock.patch.object(basic.AnsibleModule, "run_command", run_command), \
            mock.patch.object(basic.AnsibleModule, "get_bin_path", lambda *_a, **_k: "/bin/systemctl"), \
            pytest.raises(SystemExit):
        W.main()
    result = json.loads(capsys.readouterr().out)
    assert result["files"] == [new_unit["dest"]]
    assert [(u["unit"], u["kind"], u["active_state"], u["n_restarts"]) for u in result["units"]] == [
        ("vllm-pd-decode-1.service", "engine", "failed", 3), ("vllm-pd-router.service", "router", "inactive", None)]
    assert calls == [["/bin/systemctl", "show", "--property=Id,ActiveState,SubState,UnitFileState,NRestarts",
                      "vllm-pd-decode-1.service", "vllm-pd-router.service"]]
    # Without ``units`` nothing is read.
    calls.clear()
    with patch_module_args({"specs": [new_unit]}), mock.patch.object(basic.AnsibleModule, "run_command", run_command), \
            pytest.raises(SystemExit):
        W.main()
    assert "units" not in json.loads(capsys.readouterr().out) and calls == []
