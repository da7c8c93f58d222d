"""Observability (docs/observability.md): scrape targets in the plan, file_sd documents, the alert
rules (promtool check + promtool test) and reading engines' /metrics back for status.yml."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _monitoring as M
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _placement as P
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _render as R
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._inventory import InventoryError
from fleets import EXAMPLES, SEED, example_fleet, run_render, seed_fleet
from processes import ROUTER_CLI, stop

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "roles" / "monitoring" / "files" / "vllm-fleet.rules.yml"
RULE_TESTS = REPO / "tests" / "prometheus" / "vllm-fleet.rules.test.yml"
PROMTOOL = shutil.which("promtool")
NO_PROMTOOL = ("promtool NOT FOUND: the alert rules are NOT checked. Install Debian's `prometheus` "
               "package (`make test` installs it: tests/infra/bindep.txt) to run `promtool check rules` / `promtool test rules`")

FLEETS = {
    "single_node_tp": lambda: example_fleet("single_node_tp"),
    "multi_node_tp_pp": lambda: example_fleet("multi_node_tp_pp"),
    "pd_cluster": lambda: example_fleet("pd_cluster"),
    "replicas": lambda: seed_fleet(dict(SEED, strategy="single_node_tp", replicas=2), ["e0", "e1", "lb"],
                                   host_vars={"lb": {"vllm_pd_role": "router"}}),
}


def api_server(proc: P.Process) -> bool:
    """An engine process that serves HTTP: every engine except headless ranks (read off the argv)."""
    return proc.kind == "engine" and "--headless" not in proc.argv


def argv_port(argv: list[str], flag: str, default: int) -> int:
    return int(argv[argv.index(flag) + 1]) if flag in argv else default


# --------------------------------------------------------------------------------------
# targets in the plan
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(FLEETS))
def test_every_api_server_and_router_is_a_target(name):
    fleet = FLEETS[name]()
    plan = P.plan_to_dict(fleet)
    docs = M.file_sd(plan)
    assert set(docs) == {d.name for d in fleet.deployments}
    for dep in fleet.deployments:
        want = {}
        for proc in dep.processes:
            if api_server(proc):
                want[proc.unit_file] = f"{proc.address}:{argv_port(proc.argv, '--port', 8000)}"
            elif proc.kind == "router":
                want[proc.unit_file] = f"{proc.address}:{argv_port(proc.argv, '--prometheus-port', -1)}"
        got = {g["labels"]["vllm_unit"]: g["targets"] for g in docs[dep.name]}
        assert got == {unit: [target] for unit, target in want.items()}
        # plan.json carries the same endpoints, per process
        for proc in plan["deployments"][dep.name]["processes"]:
            expected = f"http://{want[proc['unit']]}/metrics" if proc["unit"] in want else None
            assert proc["metrics_url"] == expected, proc["unit"]


def test_headless_ranks_have_no_target_but_count_in_the_group():
    fleet = example_fleet("multi_node_tp_pp")
    (dep,) = fleet.deployments
    follower = next(p for p in dep.processes if p.role == "worker")
    assert "--headless" in follower.argv and follower.metrics_url is None
    (group,) = M.file_sd(P.plan_to_dict(fleet))[dep.name]
    assert group["labels"]["role"] == "head" and group["labels"]["rank"] == "0"
    assert group["labels"]["vllm_group_ranks"] == str(len([p for p in dep.processes if p.kind == "engine"]))


def test_target_labels():
    fleet = example_fleet("pd_cluster")
    (dep,) = fleet.deployments
    groups = M.file_sd(P.plan_to_dict(fleet))[dep.name]
    model = next(p for p in dep.processes if p.kind == "engine").engine_args.served_name
    assert model == "zai-org/GLM-5.3-Flash"
    for group in groups:
        labels = group["labels"]
        assert set(M.TARGET_LABELS) - {"rank"} <= set(labels)
        assert (labels["deployment"], labels["recipe"], labels["model"], labels["hardware"],
                labels["strategy"]) == (dep.name, dep.spec.recipe, model, "h200", "pd_cluster")
        proc = next(p for p in dep.processes if p.unit_file == labels["vllm_unit"])
        assert (labels["role"], labels["host"], labels["vllm_group"]) == (proc.role, proc.host, proc.restart_group)
        assert labels[M.COMPONENT_LABEL] == ("engine" if proc.kind == "engine" else "router")
        assert ("rank" in labels) == (proc.kind == "engine")
        assert all(isinstance(v, str) and v for v in labels.values())


def test_render_writes_one_file_sd_document_per_deployment_and_the_rules():
    fleet = seed_fleet(dict(SEED, strategy="single_node_tp"), ["a"])
    files = R.render(fleet, alerts={"waiting_requests": 7})
    doc = json.loads(files["monitoring/targets/fleet.json"])
    assert doc == M.file_sd(P.plan_to_dict(fleet))["fleet"]
    rules = yaml.safe_load(files["monitoring/vllm-fleet.rules.yml"])
    waiting = next(r for r in rules["groups"][0]["rules"] if r["alert"] == "VllmRequestsWaiting")
    assert waiting["expr"].endswith("> 7")
    assert R.file_mode("monitoring/targets/fleet.json") == 0o644


# --------------------------------------------------------------------------------------
# the router's Prometheus port: allocated and collision-checked
# --------------------------------------------------------------------------------------

def two_routers_on_one_host(**ports: Any) -> P.FleetPlan:
    hostvars: dict[str, dict[str, Any]] = {}
    deployments = []
    for index, name in enumerate(("one", "two")):
        engines = [f"{name}-e0", f"{name}-e1"]
        for offset, host in enumerate(engines):
            hostvars[host] = {"ansible_host": f"10.4.{index}.{offset + 1}", "vllm_fabric_interface": "eth1"}
        wanted = {"router": 30000 + index, **ports.get(name, {})}
        deployments.append(dict(SEED, name=name, group=name, strategy="single_node_tp", replicas=2,
                                ports=wanted))
    hostvars["lb"] = {"ansible_host": "10.4.9.1", "vllm_fabric_interface": "eth1", "vllm_pd_role": "router"}
    groups = {"all": list(hostvars), "one": ["one-e0", "one-e1", "lb"], "two": ["two-e0", "two-e1", "lb"]}
    return P.build_plan(hostvars, groups, P.engine_factory(), deployments_list=deployments)


def test_two_routers_on_one_host_collide_on_the_metrics_port():
    with pytest.raises(InventoryError) as info:
        two_routers_on_one_host()
    message = str(info.value)
    assert "port 29000" in message and "router-metrics" in message and "ports.router_metrics" in message


def test_ports_router_metrics_moves_the_router_metrics_port():
    fleet = two_routers_on_one_host(two={"router_metrics": 29001})
    routers = {p.deployment: p for d in fleet.deployments for p in d.processes if p.kind == "router"}
    assert argv_port(routers["one"].argv, "--prometheus-port", -1) == 29000
    assert argv_port(routers["two"].argv, "--prometheus-port", -1) == 29001
    assert P.Port(29001, "router-metrics") in routers["two"].ports
    # reachable from a remote Prometheus: bound where the router's API is (router.bind_address)
    assert routers["two"].argv[routers["two"].argv.index("--prometheus-host") + 1] == "0.0.0.0"
    assert routers["two"].metrics_url == "http://10.4.9.1:29001/metrics"


# --------------------------------------------------------------------------------------
# alert rules
# --------------------------------------------------------------------------------------

def test_shipped_rule_file_is_the_default_render():
    """The file in roles/monitoring/files is what an existing Prometheus copies: keep it in sync."""
    assert RULES.read_text() == M.alert_rules_text()


def test_rules_cover_every_alert_the_runbook_documents():
    names = [r["alert"] for r in yaml.safe_load(RULES.read_text())["groups"][0]["rules"]]
    assert names == list(M.ALERT_NAMES)
    runbook = (REPO / "docs" / "observability.md").read_text()
    for name in names:
        assert f"### {name}" in runbook, name


def run_promtool(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    if PROMTOOL is None:
        pytest.skip(NO_PROMTOOL)
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, cwd=str(cwd), timeout=120,
                          check=False)


def test_promtool_check_rules():
    result = run_promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(M.ALERT_NAMES)} rules found" in result.stdout


def test_promtool_test_rules():
    result = run_promtool("test", "rules", str(RULE_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_rule_tests_fail_when_a_threshold_moves(tmp_path):
    """The rule tests can fail: the same tests against rules rendered with other thresholds."""
    (tmp_path / "roles" / "monitoring" / "files").mkdir(parents=True)
    (tmp_path / "tests" / "prometheus").mkdir(parents=True)
    (tmp_path / "roles" / "monitoring" / "files" / RULES.name).write_text(
        M.alert_rules_text({"waiting_requests": 30, "kv_cache_usage": 0.97}))
    shutil.copy(RULE_TESTS, tmp_path / "tests" / "prometheus" / RULE_TESTS.name)
    result = run_promtool("test", "rules", str(tmp_path / "tests" / "prometheus" / RULE_TESTS.name))
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "VllmRequestsWaiting" in output and "VllmKvCacheHigh" in output and "VllmEngineDown" not in output


@pytest.mark.parametrize("given, alert, fragment", [
    ({"down_for": "15m"}, "VllmEngineDown", {"for": "15m"}),
    ({"restart_window": "1h", "restart_count": 5}, "VllmRestartLoop",
     {"expr": 'ceil(changes(up{vllm_component=~"engine|router"}[1h]) / 2) >= 5'}),
    ({"kv_cache_usage": 0.8, "kv_cache_for": "1m"}, "VllmKvCacheHigh", {"for": "1m"}),
    ({"preemptions": 0, "preemptions_window": "5m"}, "VllmPreemptions",
     {"expr": 'sum without (engine, model_name) (increase(vllm:num_preemptions_total{vllm_component="engine"}[5m]))'
              ' > 0'}),
])
def test_thresholds_reach_the_rules(given, alert, fragment):
    (rule,) = [r for r in M.alert_rules(given)["groups"][0]["rules"] if r["alert"] == alert]
    for key, value in fragment.items():
        assert rule[key] == value


@pytest.mark.parametrize("given, key, expected", [
    ({"down_for": "5"}, "down_for", "a Prometheus duration"),
    ({"down_for": 300}, "down_for", "a Prometheus duration"),
    ({"restart_count": -1}, "restart_count", "a whole number"),
    ({"waiting_requests": True}, "waiting_requests", "a whole number"),
    ({"kv_cache_usage": 90}, "kv_cache_usage", "a fraction"),
    ({"kv_cache_usage": 0}, "kv_cache_usage", "a fraction"),
    ({"waiting": 5}, "waiting", "one of"),
])
def test_bad_thresholds_name_the_variable(given, key, expected):
    with pytest.raises(InventoryError) as info:
        M.alert_thresholds(given)
    assert info.value.key == f"vllm_monitoring_alerts.{key}"
    assert expected in str(info.value)


# --------------------------------------------------------------------------------------
# reading /metrics back (status.yml)
# --------------------------------------------------------------------------------------

EXPOSITION = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="glm"} 3.0
vllm:num_requests_running{engine="1",model_name="glm"} 2.0
vllm:num_requests_waiting{engine="0",model_name="glm"} 7.0
vllm:num_requests_waiting{engine="1",model_name="glm"} 0.0
vllm:kv_cache_usage_perc{engine="0",model_name="glm"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="glm"} 0.5
vllm:generation_tokens_total{engine="0",model_name="a \\"quoted\\", {braced} name"} 12 1700000000000
process_cpu_seconds_total 1.5e+01
"""


@pytest.mark.parametrize("line, sample", [
    ('up 1', M.Sample("up", {}, 1.0)),
    ('x{} 2', M.Sample("x", {}, 2.0)),
    ('vllm:a{engine="0"} 3.5 1700000000', M.Sample("vllm:a", {"engine": "0"}, 3.5)),
    ('m{a="1",b="x y"} 4', M.Sample("m", {"a": "1", "b": "x y"}, 4.0)),
    ('m{a="q\\"uote",b="back\\\\slash",c="new\\nline",} +Inf', M.Sample("m", {"a": 'q"uote', "b": "back\\slash",
                                                                              "c": "new\nline"}, float("inf"))),
    ('m{a="unterminated} 1', None),
    ('# TYPE m gauge', None),
    ('m notanumber', None),
])
def test_parse_metrics_lines(line, sample):
    got = M.parse_metrics(line)
    assert got == ([] if sample is None else [sample])


def test_parse_metrics_exposition():
    samples = M.parse_metrics(EXPOSITION)
    assert len(samples) == 8
    assert samples[6].labels == {"engine": "0", "model_name": 'a "quoted", {braced} name'}
    assert samples[6].value == 12.0 and samples[7].value == 15.0


def test_fleet_figures_add_up_per_deployment():
    def scrape(dep: str, unit: str, status: int, content: Any) -> dict:
        return {"item": {"deployment": dep, "unit": unit, "kind": "engine"}, "status": status, "content": content}

    figures = M.fleet_figures([
        scrape("glm", "a.service", 200, EXPOSITION),
        scrape("glm", "b.service", 200, "vllm:num_requests_running 1\nvllm:kv_cache_usage_perc 0.75\n"),
        scrape("glm", "c.service", -1, None),
        scrape("idle", "d.service", 200, "up 1\n"),
        {"item": {"deployment": "glm", "unit": "r.service", "kind": "router"}, "status": 200, "content": "x 1"},
    ])
    assert figures == {
        "glm": {"api_servers": 3, "answering": 2, "running": 6.0, "waiting": 7.0, "kv_cache_usage_max": 0.75},
        "idle": {"api_servers": 1, "answering": 1, "running": None, "waiting": None, "kv_cache_usage_max": None},
    }


# --------------------------------------------------------------------------------------
# the Grafana dashboard
# --------------------------------------------------------------------------------------

DASHBOARD = REPO / "roles" / "monitoring" / "files" / "vllm-fleet-dashboard.json"
#: vLLM's /metrics names (vllm/v1/metrics/loggers.py of 0.1x-0.3x; counters carry _total, histograms
#: _bucket/_sum/_count) and vllm-router 0.1.17's. The molecule scenario compares the dashboard with a
#: live engine's /metrics; this list is what a unit test can check without one.
KNOWN_SERIES = {
    "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
    "vllm:num_preemptions_total", "vllm:prompt_tokens_total", "vllm:generation_tokens_total",
    "vllm:request_success_total", "vllm:time_to_first_token_seconds_bucket",
    "vllm:inter_token_latency_seconds_bucket", "vllm:e2e_request_latency_seconds_bucket",
    "vllm_router_worker_health",
}


@pytest.fixture(scope="module")
def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def all_panels(dashboard: dict) -> list[dict]:
    out = []
    for panel in dashboard["panels"]:
        out.append(panel)
        out.extend(panel.get("panels") or ())
    return out


def test_dashboard_structure(dashboard):
    panels = all_panels(dashboard)
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    assert dashboard["uid"] and dashboard["title"] and isinstance(dashboard["schemaVersion"], int)
    cells: set[tuple[int, int]] = set()
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        area = {(x, y) for x in range(grid["x"], grid["x"] + grid["w"])
                for y in range(grid["y"], grid["y"] + grid["h"])}
        assert not area & cells, f"panel {panel['title']!r} overlaps another"
        cells |= area
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"], panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]
        for target in panel["targets"]:
            assert target["expr"].strip() and target["datasource"] == panel["datasource"]


def test_dashboard_variables_filter_every_engine_query(dashboard):
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert {"datasource", "deployment", "host", "role"} <= set(variables)
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    for panel in all_panels(dashboard):
        for target in panel.get("targets") or ():
            expr = target["expr"]
            names = M.metric_names(expr)
            if any(n.startswith("vllm:") or n == "up" for n in names):
                for var in ("deployment", "host", "role"):
                    assert f'{var}=~"${var}"' in expr, (panel["title"], var)


def test_dashboard_covers_the_issue(dashboard):
    exprs = [t["expr"] for p in all_panels(dashboard) for t in p.get("targets") or ()]
    quantiles = {n for e in exprs if e.startswith("histogram_quantile(") for n in M.metric_names(e)}
    assert {"vllm:time_to_first_token_seconds_bucket", "vllm:inter_token_latency_seconds_bucket",
            "vllm:e2e_request_latency_seconds_bucket"} <= quantiles
    for expr in exprs:
        if expr.startswith("histogram_quantile("):
            assert "by (le," in expr, expr  # a quantile needs the buckets kept apart
    read = M.metric_names_in_dashboard(dashboard)
    assert {"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
            "vllm:generation_tokens_total"} <= read


def test_dashboard_queries_only_known_series(dashboard):
    assert M.metric_names_in_dashboard(dashboard) <= KNOWN_SERIES


def test_dashboard_queries_are_valid_promql(dashboard, tmp_path):
    """promtool parses every query (Grafana's $variables replaced) as a recording rule."""
    exprs = M.dashboard_queries(dashboard)
    assert len(exprs) > 10
    rules = [{"record": f"dashboard:query{i}",
              "expr": e.replace("$__rate_interval", "5m").replace("${datasource}", "x")
                       .replace("$deployment", ".*").replace("$host", ".*").replace("$role", ".*")}
             for i, e in enumerate(exprs)]
    path = tmp_path / "dashboard.rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = run_promtool("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("expr, names", [
    ('sum by (le, deployment) (rate(vllm:x_bucket{a="b(c)", d=~"$d"}[$__rate_interval]))', {"vllm:x_bucket"}),
    ("histogram_quantile(0.9, sum(rate(a_bucket[5m])) by (le))", {"a_bucket"}),
    ("up == 0 and on(job) foo offset 5m", {"up", "foo"}),
    ("a / ignoring(b) group_left(c) d", {"a", "d"}),
    ("count(x > bool 2) without (instance)", {"x"}),
    ('label_replace(m, "dst", "$1", "src", "(.*)")', {"m"}),
])
def test_metric_names(expr, names):
    assert M.metric_names(expr) == names


def test_metric_names_in_dashboard_reads_targets_rows_and_variables():
    dashboard = {
        "panels": [{"type": "row", "panels": [{"targets": [{"expr": "rate(a_total[5m])"}]}]},
                   {"targets": [{"expr": "b"}, {"expr": ""}]}],
        "templating": {"list": [{"type": "query", "query": {"query": 'label_values(c{x="y"}, host)'}},
                                {"type": "query", "query": "label_values(up, job)"},
                                {"type": "custom", "query": "not,promql"}]},
    }
    assert M.metric_names_in_dashboard(dashboard) == {"a_total", "b", "c"}


# --------------------------------------------------------------------------------------
# the monitoring role, on the controller itself (no package, no service: files only)
# --------------------------------------------------------------------------------------

MONITORING_PLAY = """\
- name: Point a Prometheus at the fleet
  hosts: localhost
  connection: local
  gather_facts: false
  roles:
    - role: vllm_fleet.recipes.monitoring
"""


def run_monitoring(tmp_path: Path, inventory: Path, *extra: str) -> subprocess.CompletedProcess:
    play = tmp_path / "monitoring.yml"
    play.write_text(MONITORING_PLAY)
    root = tmp_path / "etc"
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_RETRY_FILES_ENABLED="0")
    env.pop("ANSIBLE_CONFIG", None)
    args = ["-e", json.dumps({
        "vllm_monitoring_install": False, "vllm_monitoring_service": "", "vllm_monitoring_validate": bool(PROMTOOL),
        "vllm_monitoring_file_sd_dir": f"{root}/file_sd", "vllm_monitoring_rules_file": f"{root}/rules/r.yml",
        "vllm_monitoring_config_file": f"{root}/prometheus.yml"})]
    return subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory), str(play),
                           *args, *extra], capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=300,
                          check=False)


def test_monitoring_role_writes_targets_rules_and_config_idempotently(tmp_path):
    inventory = tmp_path / "inventory.yml"
    doc = yaml.safe_load((REPO / "playbooks" / "examples" / "pd_cluster" / "inventory.yml").read_text())
    inventory.write_text(yaml.safe_dump(doc))
    root = tmp_path / "etc"
    (root / "file_sd").mkdir(parents=True)
    (root / "file_sd" / "gone.json").write_text("[]")  # a deployment that left the plan
    (root / "file_sd" / "keep.txt").write_text("not ours")

    check = run_monitoring(tmp_path, inventory, "--check")
    assert check.returncode == 0, check.stdout + check.stderr
    assert not (root / "prometheus.yml").exists() and (root / "file_sd" / "gone.json").exists()

    first = run_monitoring(tmp_path, inventory)
    assert first.returncode == 0, first.stdout + first.stderr
    fleet = example_fleet("pd_cluster")
    assert sorted(p.name for p in (root / "file_sd").iterdir()) == ["glm-pd.json", "keep.txt"]
    assert json.loads((root / "file_sd" / "glm-pd.json").read_text()) == M.file_sd(P.plan_to_dict(fleet))["glm-pd"]
    assert (root / "rules" / "r.yml").read_text() == M.alert_rules_text()
    config = yaml.safe_load((root / "prometheus.yml").read_text())
    assert config["rule_files"] == [str(root / "rules" / "r.yml")]
    (job,) = [j for j in config["scrape_configs"] if j["job_name"] == "vllm-fleet"]
    assert job["file_sd_configs"] == [{"files": [f"{root}/file_sd/*.json"]}]
    if PROMTOOL:
        result = run_promtool("check", "config", str(root / "prometheus.yml"))
        assert result.returncode == 0, result.stdout + result.stderr

    again = run_monitoring(tmp_path, inventory)
    assert again.returncode == 0 and "changed=0" in again.stdout, again.stdout

    changed = run_monitoring(tmp_path, inventory, "-e", '{"vllm_monitoring_alerts": {"waiting_requests": 3}}')
    assert changed.returncode == 0 and "changed=1" in changed.stdout, changed.stdout
    assert "> 3\n" in (root / "rules" / "r.yml").read_text()


def test_monitoring_role_refuses_bad_thresholds(tmp_path):
    inventory = REPO / "playbooks" / "examples" / "single_node_tp" / "inventory.yml"
    result = run_monitoring(tmp_path, inventory, "-e", '{"vllm_monitoring_alerts": {"kv_cache_usage": 90}}')
    assert result.returncode != 0
    assert "vllm_monitoring_alerts.kv_cache_usage" in result.stdout
    assert not (tmp_path / "etc").exists()


# --------------------------------------------------------------------------------------
# status.yml reads the engines' /metrics
# --------------------------------------------------------------------------------------

def serve_fake_engine(address: str, port: int = 0):
    """An HTTP server answering /health and /metrics like a vLLM API server with two DP engines."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's naming)
            body = EXPOSITION.encode() if self.path == "/metrics" else b""
            self.send_response(200 if self.path in ("/metrics", "/health") else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer((address, port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture()
def fake_engine():
    server = serve_fake_engine("127.0.0.1")
    yield server.server_address[1]
    server.shutdown()


def test_status_playbook_prints_per_deployment_figures(tmp_path, fake_engine):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"glm": {
        "hosts": {"e0": {"ansible_host": "127.0.0.1", "ansible_connection": "local",
                         "ansible_python_interpreter": sys.executable}},
        "vars": {"vllm_fabric_interface": "lo",
                 "vllm_deployment": dict(SEED, strategy="single_node_tp", ports={"api": fake_engine})}}}}}))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"), ANSIBLE_NOCOLOR="1")
    env.pop("ANSIBLE_CONFIG", None)
    result = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory),
                             str(REPO / "playbooks" / "status.yml")], capture_output=True, text=True, env=env,
                            cwd=str(tmp_path), timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    # EXPOSITION: running 3 + 2, waiting 7 + 0, KV cache 0.25 and 0.5
    assert "metrics: 1/1 API servers, running 5, waiting 7, KV cache max 50.0 %" in result.stdout, result.stdout[-1500:]


# --------------------------------------------------------------------------------------
# the real vllm-router, run with the argv the plan gives it
# --------------------------------------------------------------------------------------

def free_port(address: str = "127.0.0.1") -> int:
    import socket

    with socket.socket() as sock:
        sock.bind((address, 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_real_router_serves_metrics_where_the_plan_scrapes_them():
    """The placed router argv (flags appended after --worker-urls) makes vllm-router 0.1.17 serve its
    metrics on the planned port, reachable on the router host's address; its backends show healthy."""
    import time
    import urllib.request

    if ROUTER_CLI is None:
        pytest.skip("vllm-router is not installed (requirements-integration.txt; `make venv`)")
    api = free_port("127.0.0.1")
    ports = {"api": api, "router": free_port("127.0.0.3"), "router_metrics": free_port("127.0.0.3")}
    fleet = seed_fleet(dict(SEED, strategy="single_node_tp", replicas=2, ports=ports), ["e0", "e1", "lb"],
                       host_vars={"e0": {"ansible_host": "127.0.0.1"}, "e1": {"ansible_host": "127.0.0.2"},
                                  "lb": {"ansible_host": "127.0.0.3", "vllm_pd_role": "router"}})
    (dep,) = fleet.deployments
    router = next(p for p in dep.processes if p.kind == "router")
    (target,) = [g for g in M.file_sd(P.plan_to_dict(fleet))["fleet"] if g["labels"]["role"] == "router"]
    assert target["targets"] == [f"127.0.0.3:{ports['router_metrics']}"]
    engines = [serve_fake_engine(address, api) for address in ("127.0.0.1", "127.0.0.2")]
    proc = subprocess.Popen([ROUTER_CLI, *router.argv[1:], "--worker-startup-timeout-secs", "30"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        health: dict[str, float] = {}
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and len(health) < 2:
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            try:
                with urllib.request.urlopen(router.metrics_url, timeout=2) as reply:
                    text = reply.read().decode()
                health = {s.labels["worker"]: s.value for s in M.parse_metrics(text)
                          if s.name == "vllm_router_worker_health"}
            except OSError:
                pass
            time.sleep(0.2)
        assert health == {"http://127.0.0.1:%d" % api: 1.0, "http://127.0.0.2:%d" % api: 1.0}
    finally:
        stop(proc)
        for server in engines:
            server.shutdown()


# --------------------------------------------------------------------------------------
# a real Prometheus (Debian's 2.42) reads our file_sd document and rules
# --------------------------------------------------------------------------------------

PROMETHEUS = shutil.which("prometheus")


def prometheus_query(port: int, path: str) -> Any:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:
        body = json.loads(reply.read())
    assert body["status"] == "success", body
    return body["data"]


def wait_for(check, timeout: float, what: str, proc: subprocess.Popen) -> Any:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"prometheus exited: {proc.stdout.read() if proc.stdout else ''}"
        try:
            found = check()
        except OSError:
            found = None
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@pytest.mark.slow
def test_real_prometheus_scrapes_the_targets_and_fires_engine_down(tmp_path):
    """Per-deployment series with our labels from the file_sd document; stopping the engine fires the alert."""
    from urllib.parse import quote

    if PROMETHEUS is None:
        pytest.skip("prometheus NOT FOUND: install Debian's `prometheus` package (`make test` installs it)")
    engine = serve_fake_engine("127.0.0.1")
    api = engine.server_address[1]
    fleet = seed_fleet(dict(SEED, strategy="single_node_tp", ports={"api": api}), ["e0"],
                       host_vars={"e0": {"ansible_host": "127.0.0.1"}})
    (tmp_path / "file_sd").mkdir()
    for name, text in M.file_sd_files(P.plan_to_dict(fleet)).items():
        (tmp_path / "file_sd" / Path(name).name).write_text(text)
    (tmp_path / "rules.yml").write_text(M.alert_rules_text({"down_for": "2s"}))
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(tmp_path / "rules.yml")],
        "scrape_configs": [{"job_name": "vllm-fleet",
                            "file_sd_configs": [{"files": [f"{tmp_path}/file_sd/*.json"]}]}]}))
    port = free_port()
    proc = subprocess.Popen([PROMETHEUS, f"--config.file={tmp_path}/prometheus.yml",
                             f"--storage.tsdb.path={tmp_path}/data", f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        query = "/api/v1/query?query=" + quote('up{deployment="fleet"} == 1')
        (up,) = wait_for(lambda: prometheus_query(port, query)["result"], 60, "the engine target up", proc)
        labels = up["metric"]
        assert labels["instance"] == f"127.0.0.1:{api}" and labels["job"] == "vllm-fleet"
        assert (labels["role"], labels["rank"], labels["host"], labels[M.COMPONENT_LABEL]) == (
            "single", "0", "e0", "engine")
        assert labels["model"] and labels["recipe"] == SEED["recipe"] and labels["strategy"] == "single_node_tp"
        running = "/api/v1/query?query=" + quote("sum by (deployment) (vllm:num_requests_running)")
        (series,) = wait_for(lambda: prometheus_query(port, running)["result"], 30, "engine series", proc)
        assert series["metric"] == {"deployment": "fleet"} and series["value"][1] == "5"

        engine.shutdown()
        engine.server_close()

        def firing():
            alerts = prometheus_query(port, "/api/v1/alerts")["alerts"]
            return [a for a in alerts if a["labels"]["alertname"] == "VllmEngineDown" and a["state"] == "firing"]

        (alert,) = wait_for(firing, 60, "VllmEngineDown firing", proc)
        assert alert["labels"]["deployment"] == "fleet" and alert["labels"]["severity"] == "critical"
        assert alert["annotations"]["summary"] == "vLLM API server down: fleet single rank 0 on e0"
    finally:
        stop(proc)
        engine.shutdown()


def test_render_playbook_takes_thresholds_from_the_inventory(tmp_path):
    inventory = EXAMPLES / "single_node_tp" / "inventory.yml"
    out = tmp_path / "render"
    result = run_render(inventory, out, "-e", json.dumps({"vllm_monitoring_alerts": {"waiting_requests": 3}}))
    assert result.returncode == 0, result.stdout + result.stderr
    assert (out / "monitoring" / "vllm-fleet.rules.yml").read_text() == M.alert_rules_text({"waiting_requests": 3})
    (name,) = [d.name for d in example_fleet("single_node_tp").deployments]
    assert json.loads((out / "monitoring" / "targets" / f"{name}.json").read_text())

    bad = run_render(inventory, tmp_path / "bad", "-e", json.dumps({"vllm_monitoring_alerts": {"down_for": "soon"}}))
    assert bad.returncode != 0 and "vllm_monitoring_alerts.down_for" in bad.stdout, bad.stdout
    assert not (tmp_path / "bad").exists()


def test_plan_action_hands_plain_values_to_the_rules_dumper():
    # ansible-core 2.19 templates role vars into tagged str/int subclasses; the rules' YAML dumper
    # refused them ("cannot represent an object: '10s'") when a role passed vllm_monitoring_alerts.
    from ansible._internal._datatag._tags import Origin

    from ansible_collections.vllm_fleet.recipes.plugins.action.vllm_plan import _plain

    tag = Origin(description="role vars").tag
    given = {tag("down_for"): tag("10s"), tag("waiting_requests"): tag(3), "x": [tag(0.5), True, None]}
    plain = _plain(given)
    assert plain == {"down_for": "10s", "waiting_requests": 3, "x": [0.5, True, None]}
    assert [type(v) for v in (*plain, plain["down_for"], plain["waiting_requests"], plain["x"][0])] == \
        [str, str, str, str, int, float]
    assert "for: 10s" in M.alert_rules_text({k: plain[k] for k in ("down_for", "waiting_requests")})
    # the filter plugin gets the tagged values directly (role vars): the core makes them plain
    assert "for: 10s" in M.alert_rules_text({"down_for": tag("10s"), "waiting_requests": tag(3),
                                             "kv_cache_usage": tag(0.8)})
