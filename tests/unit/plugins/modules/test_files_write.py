"""vllm_files_write: the host-side writer of vllm_host_files, on a temporary directory."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

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
    checked, dirs, _diffs = W.apply_files(_Module(check_mode=True), specs, [str(conf)])
    assert dirs == [str(conf)] and len(checked) == 2 and not conf.exists()
    changed, dirs, diffs = W.apply_files(_Module(check_mode=False), specs, [str(conf)])
    assert changed == [s["dest"] for s in specs] and dirs == [str(conf)]
    assert [d["after_header"] for d in diffs] == [str(conf / "a.env")]
    assert "s3cret" not in repr(diffs)
    assert oct((conf / "b.secret.env").stat().st_mode & 0o777) == "0o600"
    assert W.apply_files(_Module(check_mode=False), specs, [str(conf)]) == ([], [], [])
    (conf / "a.env").chmod(0o644)
    assert W.apply_files(_Module(check_mode=False), specs, [str(conf)])[0] == [str(conf / "a.env")]


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
        W.apply_files(_Module(check_mode=False), specs, [str(env.parent)])
    assert not env.parent.exists() and unit.read_text() == "old\n"
