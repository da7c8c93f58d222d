"""Rendering: units that systemd accepts, 0600 env files, deterministic output, the playbook.

``systemd-analyze verify`` runs for real: units are checked inside a root that
models a deploy target (docker and the router/Mooncake venvs installed, the
distribution's targets present), so a typo in a directive, a missing
executable or a bad quote fails the test.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
import yaml

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _container
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _placement as P
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _render as R
from fleet_corpus import drained
from fleets import EXAMPLES, REPO, SEED, example_fleet, inventory_vars, run_render, seed_fleet
from systemd_root import SYSTEMD_ANALYZE, verify_units

EXAMPLE_NAMES = ("single_node_tp", "multi_node_tp_pp", "pd_cluster")


# --------------------------------------------------------------------------------------
# inventories -> fleets
# --------------------------------------------------------------------------------------

VARIANT_FLEETS = {
    "kv-centralized": lambda: seed_fleet(
        dict(SEED, strategy="single_node_tp", kv_offload="kv_store_centralized_mooncake", kv_instances=2),
        ["i0", "i1", "svc", "store"],
        host_vars={"svc": {"vllm_pd_role": "router", "vllm_mooncake_role": "master"},
                   "store": {"vllm_mooncake_role": "store"}}),
    "upstream-profile-multi": lambda: seed_fleet(
        dict(SEED, strategy="multi_node_tp_pp", container_profile="upstream"), ["a", "b"]),
    "rdma-cdi-router-container": lambda: seed_fleet(
        dict(SEED, strategy="pd_cluster", rdma=True, gpu_runtime="cdi",
             router={"runtime": "container", "image": "vllm/vllm-router:0.1.17"}),
        ["p", "d", "r"], children={"fleet_prefill": ["p"], "fleet_decode": ["d"], "fleet_router": ["r"]},
        host_vars={"p": {"vllm_ib_hca": "mlx5_0", "vllm_rdma_devices": "mlx5_0:1"},
                   "d": {"vllm_ib_hca": "mlx5_1"}}),
    "ascend": lambda: seed_fleet(dict(recipe="zai-org/GLM-5.3-Flash", hardware="ascend_950pr_8x",
                                      strategy="single_node_tp"), ["npu"]),
    "secrets": lambda: seed_fleet(
        dict(SEED, strategy="single_node_tp", api_key="sk-UNIT-TEST-SECRET",
             advanced_args=["--api-key", "$API_KEY"],
             weights={"mode": "container", "token": "hf_UNIT_TEST_TOKEN"}), ["a"]),
}


@pytest.fixture(scope="module", params=list(EXAMPLE_NAMES) + list(VARIANT_FLEETS))
def fleet_files(request) -> tuple[str, P.FleetPlan, dict[str, str]]:
    name = request.param
    fleet = example_fleet(name) if name in EXAMPLE_NAMES else VARIANT_FLEETS[name]()
    return name, fleet, R.render(fleet)


# --------------------------------------------------------------------------------------
# systemd-analyze verify
# --------------------------------------------------------------------------------------

@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed (Debian: systemd)")
def test_units_pass_systemd_analyze_verify(fleet_files, target_root):
    _name, _fleet, files = fleet_files
    units = {Path(p).name: text for p, text in files.items() if p.endswith(".service")}
    assert units
    result = verify_units(target_root, units)
    assert result.returncode == 0 and result.stderr == "", result.stderr


@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed (Debian: systemd)")
@pytest.mark.parametrize("breakage, message", [
    (lambda t: t.replace("Restart=on-failure", "Restart=sometimes"), "restart specifier"),
    (lambda t: t.replace("/usr/bin/docker stop", "/usr/bin/dockr stop"), "not executable"),
    (lambda t: t.replace("Requires=docker.service", "Requires=dockerd-missing.service"), "not found"),
    (lambda t: t.replace('"run" \\', '"run"'), "Unknown key"),
])
def test_verify_catches_broken_units(target_root, breakage, message):
    """The check is real: the same root rejects a unit broken in each of these ways."""
    files = R.render(example_fleet("single_node_tp"))
    (text,) = [t for p, t in files.items() if p.endswith(".service") and not p.endswith("-watchdog.service")]
    result = verify_units(target_root, {"broken.service": breakage(text)})
    assert message in result.stderr


# --------------------------------------------------------------------------------------
# unit, env and docker files
# --------------------------------------------------------------------------------------

def parse_exec(text: str, key: str = "ExecStart") -> list[str]:
    """systemd's view of one Exec line: join continuations, unquote C-style, undo %% and $$."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(key + "="))
    joined = ""
    for line in lines[start:]:
        if line.endswith("\\"):
            joined += line[:-1] + " "
            continue
        joined += line
        break
    body = joined[len(key) + 1:]
    words, index = [], 0
    while index < len(body):
        if body[index] == " ":
            index += 1
            continue
        if body[index] == '"':
            index += 1
            word = ""
            while body[index] != '"':
                if body[index] == "\\":
                    nxt = body[index + 1]
                    word += {"n": "\n", "t": "\t"}.get(nxt, nxt)
                    index += 2
                    continue
                word += body[index]
                index += 1
            index += 1
        else:
            end = body.find(" ", index)
            end = len(body) if end < 0 else end
            word = body[index:end]
            index = end
        words.append(word.replace("%%", "%").replace("$$", "$"))
    return words


def test_exec_start_round_trips_to_the_planned_argv(fleet_files):
    _name, fleet, files = fleet_files
    for plan in fleet.deployments:
        for proc in plan.processes:
            unit = files[f"{plan.name}/{proc.host}/{proc.unit_file}"]
            assert parse_exec(unit) == proc.exec_argv


@pytest.mark.parametrize("arg, quoted", [
    ("plain", '"plain"'),
    ('{"a":"b c"}', '"{\\"a\\":\\"b c\\"}"'),
    ("100%", '"100%%"'),
    ("$HOME", '"$$HOME"'),
    ("back\\slash", '"back\\\\slash"'),
    (";", "\\;"),
])
def test_systemd_quote(arg, quoted):
    assert R.systemd_quote(arg) == quoted


def test_unit_shape_for_a_container_process(fleet_files):
    _name, fleet, files = fleet_files
    for plan in fleet.deployments:
        for proc in plan.processes:
            unit = files[f"{plan.name}/{proc.host}/{proc.unit_file}"]
            lines = unit.splitlines()
            assert lines[0].startswith("# Managed by vllm_fleet.recipes")
            assert f"EnvironmentFile={proc.env_file}" in lines
            assert "Restart=on-failure" in lines and "WantedBy=multi-user.target" in lines
            assert f"TimeoutStartSec={plan.start_timeout}" in lines
            assert "Wants=network-online.target" in lines
            if proc.runtime == "docker":
                assert "Requires=docker.service" in lines
                assert "After=docker.service network-online.target" in lines
                assert f"ExecStartPre=-/usr/bin/docker rm -f {proc.unit}" in lines
                assert f"ExecStop=/usr/bin/docker stop -t 120 {proc.unit}" in lines
                assert proc.exec_argv[1:5] == ["run", "--rm", "--name", proc.unit]
                assert "--restart" not in proc.exec_argv  # systemd restarts, not docker
                docker_json = json.loads(files[f"{plan.name}/{proc.host}/{proc.unit}.docker.json"])
                assert docker_json == proc.exec_argv
                if plan.spec.container_profile == "hardened":
                    assert "--privileged" not in proc.exec_argv
                    assert "-e" not in proc.exec_argv


def test_seed_recipe_timeout_reaches_the_unit():
    files = R.render(example_fleet("single_node_tp"))
    unit = files["glm-single/h200-a/vllm-glm-single.service"]
    assert "TimeoutStartSec=3600" in unit.splitlines()  # VLLM_ENGINE_READY_TIMEOUT_S of the seed


def test_env_files_hold_the_environment_and_are_0600(fleet_files):
    _name, fleet, files = fleet_files
    for plan in fleet.deployments:
        for proc in plan.processes:
            path = f"{plan.name}/{proc.host}/{proc.unit}.env"
            assert R.file_mode(path) == 0o600
            body = [line for line in files[path].splitlines() if not line.startswith("#")]
            keys = [line.split("=", 1)[0] for line in body]
            if plan.spec.container_profile == "hardened" or proc.kind != "engine":
                assert keys == list(proc.env)
            else:  # upstream keeps the recipe's -e flags; the file adds the per-node rest
                assert keys == [k for k in proc.env if k not in proc.recipe_env_keys]
            assert not set(keys) & set(proc.secret_env)  # secrets live in the .secret.env file
    assert all(R.file_mode(p) == 0o644 for p in files if not p.endswith(".env"))


def test_secrets_only_in_the_secret_file():
    """Secrets live only in the 0600 .secret.env file, sourced inside the container at start.

    Not in the unit, the docker argv, the plain env file (``--env-file`` values are part of
    the container config that ``docker inspect`` shows) nor plan.json.
    """
    files = R.render(VARIANT_FLEETS["secrets"]())
    secret_files = [p for p in files if p.endswith(".secret.env")]
    assert len(secret_files) == 1
    for path, text in files.items():
        if path in secret_files:
            assert R.file_mode(path) == 0o600
            assert "VLLM_API_KEY=sk-UNIT-TEST-SECRET" in text and "HF_TOKEN=hf_UNIT_TEST_TOKEN" in text
        else:
            assert "sk-UNIT-TEST-SECRET" not in text and "hf_UNIT_TEST_TOKEN" not in text, path
    unit = next(t for p, t in files.items() if p.endswith(".service") and not p.endswith("-watchdog.service"))
    assert "--api-key" not in unit  # the recipe's `--api-key $API_KEY` became VLLM_API_KEY
    argv = parse_exec(unit)
    image = argv.index("--entrypoint")
    assert argv[image:image + 2] == ["--entrypoint", "/bin/sh"]
    mount = argv[argv.index("--entrypoint") - 1]
    assert mount == "/etc/vllm-fleet/fleet/vllm-fleet.secret.env:/run/vllm-fleet/secret.env:ro"
    shim = argv[argv.index("-c") + 1]
    assert shim == _container.SECRET_SHIM and "/run/vllm-fleet/secret.env" in shim  # read, not sourced
    assert argv[argv.index("-c") + 2:argv.index("-c") + 5] == ["vllm-fleet-secrets", "vllm", "serve"]
    plan = json.loads(files["plan.json"])
    (proc,) = [p for p in plan["deployments"]["fleet"]["processes"] if p["kind"] == "engine"]
    assert proc["secret_env_keys"] == ["HF_TOKEN", "VLLM_API_KEY"]
    assert "HF_HUB_OFFLINE" not in proc["env"]  # weights mode "container": vLLM downloads


def test_hardened_vendor_flags():
    pd = VARIANT_FLEETS["rdma-cdi-router-container"]()
    procs = {p.unit: p for d in pd.deployments for p in d.processes}
    prefill = procs["vllm-fleet-prefill-0"].exec_argv
    assert prefill[5:8] == ["--device", "nvidia.com/gpu=all", "--ipc=host"]
    for flags in (["--device", "/dev/infiniband"], ["--cap-add", "IPC_LOCK"], ["--ulimit", "memlock=-1"]):
        assert any(prefill[i:i + 2] == flags for i in range(len(prefill)))
    assert procs["vllm-fleet-prefill-0"].env["UCX_NET_DEVICES"] == "mlx5_0:1"
    assert procs["vllm-fleet-prefill-0"].env["NCCL_IB_HCA"] == "mlx5_0"
    assert procs["vllm-fleet-decode-0"].env["NCCL_IB_HCA"] == "mlx5_1"
    router = procs["vllm-fleet-router"].exec_argv
    assert router[:9] == ["/usr/bin/docker", "run", "--rm", "--name", "vllm-fleet-router", "--network", "host",
                          "--env-file", "/etc/vllm-fleet/fleet/vllm-fleet-router.env"]
    assert router[9:12] == ["--entrypoint", "vllm-router", "vllm/vllm-router:0.1.17"]

    ascend = VARIANT_FLEETS["ascend"]()
    (proc,) = [p for p in ascend.deployments[0].processes if p.kind == "engine"]
    argv = proc.exec_argv
    assert "--gpus" not in argv and "--privileged" not in argv
    for dev in ["/dev/davinci0", "/dev/davinci7", "/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"]:
        assert ["--device", dev] in [argv[i:i + 2] for i in range(len(argv))]
    assert "/usr/local/bin/npu-smi:/usr/local/bin/npu-smi:ro" in argv
    assert proc.env["ASCEND_RT_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"
    image = proc.image
    assert argv[argv.index(image) + 1:argv.index(image) + 3] == ["vllm", "serve"]  # no entrypoint in vllm-ascend


def test_plan_md_lists_every_process(fleet_files):
    _name, fleet, files = fleet_files
    md = files["PLAN.md"]
    assert "| host | process | rank/role | ports | GPUs | image | command |" in md
    for plan in fleet.deployments:
        for proc in plan.processes:
            row = next(line for line in md.splitlines() if f"`{proc.unit_file}`" in line)
            assert row.startswith(f"| {proc.host} |")


def test_plan_json_is_stable_and_complete(fleet_files):
    _name, _fleet, files = fleet_files
    data = json.loads(files["plan.json"])
    assert files["plan.json"] == json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    assert data["schema"] == P.PLAN_SCHEMA
    listed = {f["src"] for host in data["hosts"].values() for f in host["files"]}
    # every file goes to a host but the plan itself, docker argv and the Prometheus files (monitoring role)
    assert listed == {p for p in files if p not in ("plan.json", "PLAN.md") and not p.endswith(".docker.json")
                      and not p.startswith("monitoring/")}
    for host in data["hosts"].values():
        for entry in host["files"]:
            assert entry["mode"] == ("0600" if entry["src"].endswith(".env") else "0644")


def test_render_is_deterministic(fleet_files):
    name, _fleet, files = fleet_files
    again = R.render(example_fleet(name) if name in EXAMPLE_NAMES else VARIANT_FLEETS[name]())
    assert again == files


def test_host_order_does_not_change_the_output():
    hostvars, groups = inventory_vars(EXAMPLES / "pd_cluster" / "inventory.yml")
    first = R.render(P.build_plan(hostvars, groups, P.engine_factory()))
    shuffled = dict(reversed(list(hostvars.items())))
    second = R.render(P.build_plan(shuffled, groups, P.engine_factory()))
    assert first == second


def test_unresolved_placeholder_is_never_a_file():
    fleet = seed_fleet(dict(SEED, strategy="single_node_tp"), ["a"])
    fleet.deployments[0].processes[0].exec_argv.append("$SOMETHING")
    with pytest.raises(R.RenderError, match="SOMETHING"):
        R.render(fleet)


# --------------------------------------------------------------------------------------
# the playbook, end to end
# --------------------------------------------------------------------------------------

def tree(root: Path) -> dict[str, tuple[bytes, int, int]]:
    return {str(p.relative_to(root)): (p.read_bytes(), stat.S_IMODE(p.stat().st_mode), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_render_playbook_end_to_end(tmp_path, name):
    out = tmp_path / "render"
    first = run_render(EXAMPLES / name / "inventory.yml", out)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "changed=1" in first.stdout
    written = tree(out)
    expected = R.render(example_fleet(name))
    assert {k for k in written if not k.startswith(".")} == set(expected)
    for rel, content in expected.items():
        data, mode, _mtime = written[rel]
        assert data == content.encode(), rel
        assert mode == R.file_mode(rel), rel
    second = run_render(EXAMPLES / name / "inventory.yml", out)
    assert second.returncode == 0 and "changed=0" in second.stdout, second.stdout
    assert tree(out) == written  # not one byte, mode or mtime changed


def test_render_playbook_check_mode_writes_nothing(tmp_path):
    out = tmp_path / "render"
    result = run_render(EXAMPLES / "single_node_tp" / "inventory.yml", out, "--check")
    assert result.returncode == 0, result.stdout
    assert not out.exists()


def test_render_playbook_prunes_files_of_a_removed_deployment(tmp_path):
    out = tmp_path / "render"
    inventory = tmp_path / "inv.yml"
    doc = yaml.safe_load((EXAMPLES / "multi_node_tp_pp" / "inventory.yml").read_text())
    inventory.write_text(yaml.safe_dump(doc))
    assert run_render(inventory, out).returncode == 0
    assert (out / "glm-tp-pp" / "h200-c").is_dir()
    doc["all"]["children"]["glm_tp_pp"]["vars"]["vllm_deployment"]["name"] = "renamed"
    inventory.write_text(yaml.safe_dump(doc))
    result = run_render(inventory, out)
    assert result.returncode == 0, result.stdout
    assert not (out / "glm-tp-pp").exists() and (out / "renamed" / "h200-c").is_dir()


@pytest.mark.parametrize("name, selection, names", [
    ("single_node_tp", {"strategy": "single_node_tp"}, {"vllm-glm-single": "serve"}),
    ("multi_node_tp_pp", {"strategy": "multi_node_tp_pp", "node_count": 2},
     {"vllm-glm-tp-pp-rank0": "head", "vllm-glm-tp-pp-rank1": "worker-1"}),
    ("pd_cluster", {"strategy": "pd_cluster", "pd_nodes": {"prefill": {"nodes": 1}, "decode": {"nodes": 1}}},
     {"vllm-glm-pd-prefill-0": "prefill-0", "vllm-glm-pd-decode-0": "decode-0", "vllm-glm-pd-router": "router"}),
])
def test_demo_plans_are_the_recipes_own_argv_with_placeholders_filled(name, selection, names):
    """Each demo process runs exactly the engine's argv for its rank, placeholders filled."""
    from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _catalog, _engine, _loader

    catalog = _catalog.load_catalog()
    recipe = _loader.load_recipe_from_tree(REPO / "recipes", "zai-org/GLM-5.3-Flash", catalog=catalog)
    resolution = _engine.resolve(recipe, dict(selection, hardware="h200"), catalog)
    engine = {p.name: p for p in resolution.processes}
    hostvars, _groups = inventory_vars(EXAMPLES / name / "inventory.yml")
    fleet = example_fleet(name)
    procs = {p.unit: p for d in fleet.deployments for p in d.processes if p.kind != "watchdog"}
    assert set(procs) == set(names)
    address = {h: v["ansible_host"] for h, v in hostvars.items()}
    ranks = {}
    for unit, proc_name in names.items():
        if proc_name in ("serve", "head", "prefill-0"):
            ranks["HEAD_IP"] = ranks["PREFILL_NODE_1"] = address[procs[unit].host]
        if proc_name == "decode-0":
            ranks["DECODE_NODE_1"] = address[procs[unit].host]
    mapping = {**ranks, "IFACE_NAME": "ens5", "ROUTER_HOST": "0.0.0.0", "ROUTER_PORT": "30000"}
    # our deviations from the site's argv: the router's reachable Prometheus port (docs/observability.md),
    # the engines' drain on a planned stop (docs/operations.md#drain)
    deviation = {"router": ["--prometheus-port", "29000", "--prometheus-host", "0.0.0.0"]}
    for unit, proc_name in names.items():
        want = P.fill_placeholders(list(engine[proc_name].argv), mapping) + deviation.get(proc_name, [])
        if procs[unit].kind == "engine":
            want = drained(want)
        assert procs[unit].argv == want, unit
