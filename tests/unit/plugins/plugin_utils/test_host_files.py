"""vllm_host_files' pure core (_host_files): which plan files a deploy step installs and what a change restarts."""

from __future__ import annotations

import pytest

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _host_files as H

ETC = "/etc/vllm-fleet/pd"
PREFILL = {"unit": "vllm-pd-prefill-0.service", "kind": "engine", "restart_group": "pd", "image": "img:v1",
           "env_file": f"{ETC}/prefill-0.env", "secret_file": f"{ETC}/prefill-0.secret.env", "host": "a"}
ROUTER = {"unit": "vllm-pd-router.service", "kind": "router", "restart_group": "pd-router", "image": None,
          "env_file": f"{ETC}/router.env", "secret_file": None, "host": "a"}
FILES = [
    {"src": "a/prefill.service", "dest": "/etc/systemd/system/vllm-pd-prefill-0.service", "mode": "0644"},
    {"src": "a/prefill.env", "dest": f"{ETC}/prefill-0.env", "mode": "0600"},
    {"src": "a/prefill.secret.env", "dest": f"{ETC}/prefill-0.secret.env", "mode": "0600"},
    {"src": "a/router.service", "dest": "/etc/systemd/system/vllm-pd-router.service", "mode": "0644"},
    {"src": "a/router.env", "dest": f"{ETC}/router.env", "mode": "0600"},
    {"src": "a/mooncake.json", "dest": f"{ETC}/mooncake.json", "mode": "0644"},
]
CONTENTS = {f["src"]: f"content of {f['src']}\n" for f in FILES}


def test_file_kind():
    assert [H.file_kind(f["dest"]) for f in FILES] == ["unit", "env", "env", "unit", "env", "config"]


def test_select_processes_by_kind_and_batch():
    assert H.select_processes([PREFILL, ROUTER], ["engine"]) == [PREFILL]
    assert H.select_processes([PREFILL, ROUTER], ["engine", "router"], ["pd-router"]) == [ROUTER]
    assert H.select_processes([PREFILL, ROUTER], ["engine", "router"], []) == [PREFILL, ROUTER]


def test_select_files_takes_the_processes_own_files_and_configs():
    engine = H.select_files(FILES, [PREFILL], ["mooncake.json"])
    assert [f["dest"] for f in engine] == [f["dest"] for f in FILES[:3]] + [f"{ETC}/mooncake.json"]
    assert [f["dest"] for f in H.select_files(FILES, [ROUTER], [])] == [f["dest"] for f in FILES[3:5]]
    assert H.select_files(FILES, [], ["mooncake.json"]) == []  # no process here: no config either


def test_file_specs_modes_secret_diff_and_validate():
    specs = H.file_specs(H.select_files(FILES, [PREFILL], ["mooncake.json"]), CONTENTS, [PREFILL],
                         "systemd-analyze verify %s:%n")
    by_dest = {s["dest"]: s for s in specs}
    unit = by_dest["/etc/systemd/system/vllm-pd-prefill-0.service"]
    assert unit["mode"] == "0644" and unit["validate"] == "systemd-analyze verify %s:vllm-pd-prefill-0.service"
    assert by_dest[f"{ETC}/prefill-0.env"]["mode"] == "0600" and by_dest[f"{ETC}/prefill-0.env"]["diff"]
    assert not by_dest[f"{ETC}/prefill-0.secret.env"]["diff"]
    assert by_dest[f"{ETC}/mooncake.json"]["validate"] == "" and by_dest[f"{ETC}/mooncake.json"]["mode"] == "0644"
    with pytest.raises(ValueError, match="return_content"):
        H.file_specs(FILES[:1], {}, [PREFILL])


def test_directories_are_those_of_env_and_config_files_then_the_compile_caches():
    assert H.directories(FILES) == [ETC]
    cached = {**PREFILL, "compile_cache": "/var/cache/vllm-fleet/compile/vllm-pd-prefill-0"}
    assert H.directories(FILES, [cached, ROUTER, cached]) == [
        ETC, {"path": "/var/cache/vllm-fleet/compile/vllm-pd-prefill-0", "mode": "0700"}]


def test_changed_units_from_changed_files():
    assert H.changed_units([PREFILL, ROUTER], []) == []
    assert H.changed_units([PREFILL, ROUTER], [f"{ETC}/prefill-0.secret.env"]) == ["vllm-pd-prefill-0.service"]
    assert H.changed_units([PREFILL, ROUTER], ["/etc/systemd/system/vllm-pd-router.service"]) == ["vllm-pd-router.service"]
    # a config file is shared: every unit of the step restarts
    both = ["vllm-pd-prefill-0.service", "vllm-pd-router.service"]
    assert H.changed_units([PREFILL, ROUTER], [f"{ETC}/mooncake.json"]) == both


def test_changed_groups_from_units_inactive_images_and_forced():
    procs = [PREFILL, ROUTER]
    assert H.changed_groups(procs, []) == []
    assert H.changed_groups(procs, ["vllm-pd-router.service"]) == ["pd-router"]
    info = [{"unit": "vllm-pd-prefill-0.service", "active_state": "failed"},
            {"unit": "vllm-pd-router.service", "active_state": "active"},
            {"unit": "vllm-other.service", "active_state": "failed"}]
    assert H.inactive_units(procs, info) == ["vllm-pd-prefill-0.service"]
    assert H.changed_groups(procs, [], H.inactive_units(procs, info)) == ["pd"]
    assert H.changed_groups(procs, [], changed_images=["img:v1"]) == ["pd"]
    assert H.changed_groups(procs, [], force_groups=["pd-router"]) == ["pd-router"]


def test_a_unit_manifest_goes_with_its_unit_and_restarts_nothing():
    manifest = "/var/lib/vllm-fleet/units/vllm-pd-prefill-0.service.json"
    prefill = {**PREFILL, "manifest": manifest}
    files = FILES + [{"src": "a/prefill.service.json", "dest": manifest, "mode": "0644"}]
    assert H.file_kind(manifest) == "manifest"
    assert manifest in [f["dest"] for f in H.select_files(files, [prefill], [])]
    assert manifest not in [f["dest"] for f in H.select_files(files, [ROUTER], [])]
    assert "/var/lib/vllm-fleet/units" in H.directories(files)
    assert H.changed_units([prefill, ROUTER], [manifest]) == []


def test_unit_dirs_are_systemds_then_each_plan_unit_directory_once():
    files = FILES + [{"src": "a/x.service", "dest": "/usr/lib/systemd/system/vllm-pd-x.service", "mode": "0644"},
                     {"src": "a/y.service", "dest": "/usr/lib/systemd/system/vllm-pd-y.service", "mode": "0644"}]
    assert H.unit_dirs(files) == ["/etc/systemd/system", "/usr/lib/systemd/system"]
    assert H.unit_dirs([]) == ["/etc/systemd/system"]


def _scanned(unit, kind, deployment="pd"):
    return {"unit": unit, "kind": kind, "path": f"/etc/systemd/system/{unit}", "env_file": f"{ETC}/{unit}.env",
            "manifest": None, "deployment": deployment, "active_state": "active"}


def test_stale_units_are_the_steps_kinds_that_the_plan_no_longer_places_here():
    scanned = [_scanned("vllm-pd-prefill-0.service", "engine"), _scanned("vllm-pd-prefill-1.service", "engine"),
               _scanned("vllm-pd-router.service", "router"), _scanned("vllm-pd-mooncake-master.service", "mooncake"),
               _scanned("vllm-pd-watchdog.service", "watchdog")]
    planned = ["vllm-pd-prefill-0.service"]
    engine_step = H.stale_units(scanned, ["engine", "mooncake_master", "mooncake_store", "watchdog"], planned)
    assert [u["unit"] for u in engine_step] == [
        "vllm-pd-prefill-1.service", "vllm-pd-mooncake-master.service", "vllm-pd-watchdog.service"]
    assert engine_step[0] == {"unit": "vllm-pd-prefill-1.service", "path": "/etc/systemd/system/vllm-pd-prefill-1.service",
                              "env_file": f"{ETC}/vllm-pd-prefill-1.service.env", "manifest": None, "deployment": "pd"}
    # The router step prunes routers only; a planned router stays.
    assert [u["unit"] for u in H.stale_units(scanned, ["router"], planned)] == ["vllm-pd-router.service"]
    assert H.stale_units(scanned, ["router"], planned + ["vllm-pd-router.service"]) == []


def test_units_to_enable_are_the_steps_units_not_enabled_yet():
    present = [dict(_scanned("vllm-pd-prefill-0.service", "engine"), unit_file_state="enabled"),
               dict(_scanned("vllm-pd-router.service", "router"), unit_file_state="disabled")]
    decode = dict(PREFILL, unit="vllm-pd-decode-0.service")  # written now: not on the host before
    assert H.units_to_enable([PREFILL, ROUTER, decode], present, check_mode=False) == [
        "vllm-pd-router.service", "vllm-pd-decode-0.service"]
    # Check mode wrote nothing: a new unit is not there to enable.
    assert H.units_to_enable([PREFILL, ROUTER, decode], present, check_mode=True) == ["vllm-pd-router.service"]
    static = [dict(u, unit_file_state=state) for u, state in zip(present, ("static", "enabled-runtime"), strict=False)]
    assert H.units_to_enable([PREFILL, ROUTER], static, check_mode=False) == []
