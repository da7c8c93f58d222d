"""Valid but unusual input still renders (issue 12): the hostile-input checks refuse nothing legitimate.

Unicode host names, IPv6 fabrics (URLs bracketed, plain addresses not), 16-node groups, a
64-host inventory, mixed vendors on one inventory and shell metacharacters inside
``advanced_args``. Every unit's ExecStart reads back (readers.py) as the planned argv, every
env file reads the same with systemd's and docker's rules, and the real
``systemd-analyze verify`` accepts the units.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import readers
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _placement as P
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _render as R
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._gates import recipe_pool_nodes
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._schema import validate_recipe
from systemd_root import SYSTEMD_ANALYZE, verify_units

REPO = Path(__file__).resolve().parents[2]
SEED = {"recipe": "zai-org/GLM-5.3-Flash"}
ENGINE = P.engine_factory()
#: Shell metacharacters (``$UPPER`` / ``${UPPER}`` stay recipe placeholders: they must be filled).
SHELL_TOKEN = "a;b|c&&d $(e) `f` 'g' \"h\" %i ${j} $home \\k #l * ~m"


def _benchmark():
    spec = importlib.util.spec_from_file_location("render_benchmark", REPO / "benchmarks" / "render.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


BENCH = _benchmark()


def fleet_of(groups_spec: dict[str, tuple[int, dict, str]]) -> tuple[dict, dict]:
    """hostvars/groups: ``{group: (hosts, vllm_deployment, name prefix)}``, IPv4 10.x addresses."""
    hostvars: dict = {}
    groups: dict = {"all": []}
    for family, (group, (count, decl, prefix)) in enumerate(groups_spec.items(), start=60):
        groups[group] = []
        for index in range(count):
            host = f"{prefix}-{index}"
            hostvars[host] = {"ansible_host": f"10.{family}.{index // 200}.{index % 200 + 1}",
                              "vllm_fabric_interface": "ens5", "vllm_deployment": dict(decl)}
            groups[group].append(host)
            groups["all"].append(host)
    return hostvars, groups


def to_ipv6_and_unicode(hostvars: dict, groups: dict) -> tuple[dict, dict]:
    """The same fleet with IPv6 addresses (fd00::/8) and host names in other scripts."""
    names = {host: f"ノード-{host}" if index % 2 else f"nœud-{host}" for index, host in enumerate(hostvars)}
    out = {}
    for host, values in hostvars.items():
        octets = values["ansible_host"].split(".")
        out[names[host]] = dict(values, ansible_host=f"fd00:{octets[1]}:{octets[2]}::{int(octets[3]):x}")
    return out, {g: [names[h] for h in hs] for g, hs in groups.items()}


def check_files(fleet: P.FleetPlan, files: dict[str, str]) -> None:
    """Units read back as the planned argv; env files read the same with systemd and docker."""
    for plan in fleet.deployments:
        for proc in plan.processes:
            base = f"{plan.name}/{proc.host}"
            assert readers.exec_argv(files[f"{base}/{proc.unit_file}"]) == proc.exec_argv
            env = files[f"{base}/{proc.unit}.env"]
            assert readers.systemd_env_file(env) == readers.docker_env_file(env)
    for path in files:
        assert ".." not in path.split("/") and not path.startswith("/")


def urls_in(files: dict[str, str]) -> list[str]:
    return re.findall(r"https?://[^\s\"',]+", "\n".join(files.values()))


def test_64_host_inventory_renders_and_reads_back(target_root):
    doc = BENCH.fleet_64()
    hostvars, groups = BENCH.flatten(doc)
    assert len(hostvars) == 64
    fleet = P.build_plan(hostvars, groups, ENGINE)
    files = R.render(fleet)
    check_files(fleet, files)
    if SYSTEMD_ANALYZE:
        units = {Path(p).name: t for p, t in files.items() if p.endswith(".service")}
        result = verify_units(target_root, units)
        assert result.returncode == 0 and result.stderr == "", result.stderr


def test_ipv6_fabric_with_unicode_host_names():
    """Every URL we build brackets an IPv6 literal; addresses used as such stay plain."""
    hostvars, groups = to_ipv6_and_unicode(*BENCH.flatten(BENCH.fleet_64()))
    fleet = P.build_plan(hostvars, groups, ENGINE)
    files = R.render(fleet)
    check_files(fleet, files)
    assert any(p.startswith("tppp/ノード-") for p in files) and any("/nœud-" in p for p in files)
    urls = urls_in(files)
    assert any("[fd00:" in url for url in urls)
    for url in urls:
        host = url.split("://", 1)[1].split("/", 1)[0]
        if host.startswith("["):
            ipaddress.IPv6Address(host[1:host.index("]")])
        else:
            assert host.count(":") <= 1, url  # host:port, never a bare IPv6 literal
    plan = json.loads(files["plan.json"])
    head = next(p for p in plan["deployments"]["tppp"]["processes"] if p["rank"] == 0)
    assert head["env"]["VLLM_HOST_IP"] == head["address"] and ":" in head["address"]


@pytest.mark.parametrize("strategy", ["multi_node_tp_pp", "multi_node_tp", "multi_node_dep", "multi_node_tep"])
def test_16_node_group(strategy):
    fleet = P.build_plan(*fleet_of({"big": (16, dict(SEED, hardware="h200", strategy=strategy), "gpu")}), ENGINE)
    (plan,) = fleet.deployments
    assert len({p.host for p in plan.processes if p.kind == "engine"}) == 16
    check_files(fleet, R.render(fleet))


def test_mixed_vendors_in_one_inventory(target_root):
    fleet = P.build_plan(*fleet_of({
        "nv": (1, dict(SEED, hardware="h200", strategy="single_node_tp"), "nv"),
        "amd": (1, dict(SEED, hardware="mi355x", strategy="single_node_tp"), "amd"),
        "npu": (1, dict(SEED, hardware="ascend_950pr_8x", strategy="single_node_tp"), "npu"),
        "xpu": (1, dict(SEED, hardware="arc_pro_b60", strategy="single_node_tp",
                        container_profile="upstream"), "xpu"),
    }), ENGINE)
    assert sorted(p.vendor for p in fleet.deployments) == ["amd", "ascend", "intel", "nvidia"]
    files = R.render(fleet)
    check_files(fleet, files)


def test_shell_metacharacters_in_advanced_args(target_root):
    decl = dict(SEED, hardware="h200", strategy="single_node_tp",
                advanced_args=["--served-model-name", SHELL_TOKEN, "--override-generation-config",
                               '{"temperature": 0.5, "stop": ["%n", "$$", "\\n"]}'])
    fleet = P.build_plan(*fleet_of({"g": (1, decl, "名前")}), ENGINE)
    files = R.render(fleet)
    check_files(fleet, files)
    (proc,) = [p for p in fleet.deployments[0].processes if p.kind == "engine"]
    argv = readers.exec_argv(files[f"g/{proc.host}/{proc.unit_file}"])
    assert argv[argv.index("--served-model-name") + 1] == SHELL_TOKEN
    if SYSTEMD_ANALYZE:
        result = verify_units(target_root, {proc.unit_file: files[f"g/{proc.host}/{proc.unit_file}"]})
        assert result.returncode == 0 and result.stderr == "", result.stderr


def test_secret_named_extra_env_is_moved_to_the_secret_file():
    decl = dict(SEED, hardware="h200", strategy="single_node_tp",
                extra_env={"WANDB_API_KEY": "wb-$(id)'x'", "NCCL_DEBUG": "INFO"})
    fleet = P.build_plan(*fleet_of({"g": (1, decl, "a")}), ENGINE)
    files = R.render(fleet)
    (secret_path,) = [p for p in files if p.endswith(".secret.env")]
    assert readers.shim_env_file(files[secret_path])["WANDB_API_KEY"] == "wb-$(id)'x'"
    assert not any("wb-$(id)" in t for p, t in files.items() if p != secret_path)
    plan = json.loads(files["plan.json"])
    (proc,) = [p for p in plan["deployments"]["g"]["processes"] if p["kind"] == "engine"]
    assert "WANDB_API_KEY" in proc["secret_env_keys"] and "WANDB_API_KEY" not in proc["env"]


# --------------------------------------------------------------------------------------
# issue 33: pretty-printed JSON, letters of every script, per-hardware PD pool sizes
# --------------------------------------------------------------------------------------

PROPS = settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
# no "$": a "$NAME" in an argv is a recipe placeholder, which must be filled (refused otherwise)
JSON_TEXT = st.text(st.characters(blacklist_categories=["Cc", "Cs", "Zl", "Zp", "Cf"], blacklist_characters="$"),
                    max_size=8)
JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | JSON_TEXT,
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(JSON_TEXT, inner, max_size=3),
                           max_leaves=8)


def _single(advanced_args: list, host: str = "a") -> dict[str, str]:
    decl = {**SEED, "hardware": "h200", "strategy": "single_node_tp", "advanced_args": advanced_args}
    hostvars = {host: {"ansible_host": "10.40.0.1", "vllm_fabric_interface": "ens5", "vllm_deployment": decl}}
    return R.render(P.build_plan(hostvars, {"all": [host], "g": [host]}, ENGINE))


@PROPS
@given(st.dictionaries(JSON_TEXT, JSON_VALUES, min_size=1, max_size=4), st.sampled_from([1, 2, 4]))
@example({"method": "mtp", "num_speculative_tokens": 1}, 2)
def test_pretty_printed_json_in_advanced_args_is_written_compactly(value, indent):
    pretty = json.dumps(value, indent=indent, ensure_ascii=False) + "\n"  # a YAML block scalar ends with one
    files = _single(["--speculative-config", pretty])
    argv = readers.exec_argv(next(t for p, t in files.items()
                                  if p.endswith(".service") and not p.endswith("-watchdog.service")))
    written = argv[argv.index("--speculative-config") + 1]
    assert written == json.dumps(value, separators=(",", ":"), ensure_ascii=False)  # key order kept
    assert json.loads(written) == value


@PROPS
@given(st.text(st.characters(categories=["L", "M", "Nd"]), min_size=1, max_size=12)
       .filter(lambda n: not n.startswith(("-", "."))))
@example("名前-ノード")
@example("שרת")
@example("خادم")
def test_host_names_in_any_script_render(name):
    files = _single([], host=name)
    assert f"g/{name}/vllm-g.service" in files


@PROPS
@given(st.dictionaries(st.sampled_from(["default", "gb200", "gb300", "h200", "b200", "hopper"]),
                       st.integers(1, 16), max_size=4),
       st.sampled_from(["gb200", "gb300", "h200", "b200", "mi355x"]))
@example({"default": 2, "gb300": 1}, "gb300")
@example({"default": 2, "gb300": 1}, "gb200")
def test_per_hardware_pool_sizes_follow_the_site(nodes, hardware):
    recipe = {"model": {"model_id": "o/m"}, "variants": {"default": {}},
              "strategy_overrides": {"pd_cluster": {"prefill": {"nodes": nodes}, "decode": {"nodes": 3}}}}
    assert validate_recipe(recipe, "models/o/m.yaml") is recipe
    # the recipes site's builder: the exact hardware id, else default, else 1 (never the generation)
    assert recipe_pool_nodes(recipe, "prefill", hardware) == nodes.get(hardware, nodes.get("default", 1))
    assert recipe_pool_nodes(recipe, "decode", hardware) == 3
