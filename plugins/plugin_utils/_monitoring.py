# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Observability: Prometheus scrape targets, alert rules and fleet figures.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

Everything here is pure and works on the plan as ``plan.json`` holds it
(:func:`_plan_view.plan_to_dict`), so the render, the deploy roles and the
status playbook share one implementation:

* :func:`file_sd` -- one Prometheus ``file_sd`` document per deployment: every
  engine API server's ``/metrics`` (headless ranks have none) and every router's
  Prometheus port, labelled deployment, recipe, model, hardware, strategy,
  role, rank, host (plus ``vllm_component``, ``vllm_group``, ``vllm_unit``).
* :func:`alert_rules` -- the Prometheus rule file, thresholds from
  ``vllm_monitoring_alerts`` (:data:`ALERT_DEFAULTS`).
* :func:`parse_metrics` / :func:`fleet_figures` -- Prometheus text exposition
  read back into per-deployment figures (running and waiting requests, KV
  cache usage) for ``playbooks/status.yml``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional, cast
from urllib.parse import urlsplit

import yaml

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._inventory import InventoryError
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._prometheus_text import Sample, parse_metrics

__all__ = [
    "ALERT_DEFAULTS",
    "ALERT_NAMES",
    "COMPONENT_LABEL",
    "TARGET_LABELS",
    "Sample",
    "alert_rules",
    "alert_rules_text",
    "alert_thresholds",
    "dashboard_queries",
    "file_sd",
    "file_sd_files",
    "fleet_figures",
    "metric_names",
    "metric_names_in_dashboard",
    "parse_metrics",
    "render_files",
]

#: The labels the issue asks for on every target, in this order.
TARGET_LABELS = ("deployment", "recipe", "model", "hardware", "strategy", "role", "rank", "host")
#: ``engine`` or ``router``: what the alert rules select on (job names are the site's choice).
COMPONENT_LABEL = "vllm_component"
#: Directory (relative to the render directory) of the per-deployment file_sd documents.
TARGETS_DIR = "monitoring/targets"
RULES_FILE = "monitoring/vllm-fleet.rules.yml"

_DURATION_RE = re.compile(r"^[1-9][0-9]*[smhd]$")

#: Alert thresholds (``vllm_monitoring_alerts``): key -> (default, kind, meaning).
ALERT_DEFAULTS: dict[str, tuple[Any, str, str]] = {
    "down_for": ("5m", "duration", "how long an engine or router target may fail its scrape"),
    "group_incomplete_for": ("5m", "duration", "how long a group may run with only some API servers up"),
    "restart_window": ("30m", "duration", "the window restarts are counted in"),
    "restart_count": (3, "count", "restarts within restart_window that make a loop"),
    "backend_unhealthy_for": ("2m", "duration", "how long a router may see a backend unhealthy"),
    "waiting_requests": (20, "count", "requests waiting in one API server"),
    "waiting_for": ("5m", "duration", "how long the waiting queue may stay above waiting_requests"),
    "kv_cache_usage": (0.9, "fraction", "KV cache usage (0-1) of one engine"),
    "kv_cache_for": ("10m", "duration", "how long KV cache usage may stay above kv_cache_usage"),
    "preemptions": (10, "count", "preemptions of one API server within preemptions_window"),
    "preemptions_window": ("15m", "duration", "the window preemptions are counted in"),
}

ALERT_NAMES = (
    "VllmEngineDown",
    "VllmRouterDown",
    "VllmGroupIncomplete",
    "VllmRestartLoop",
    "VllmRouterBackendUnhealthy",
    "VllmRequestsWaiting",
    "VllmKvCacheHigh",
    "VllmPreemptions",
)


# --------------------------------------------------------------------------------------
# Scrape targets
# --------------------------------------------------------------------------------------

def _deployment_model(dep: Mapping[str, Any]) -> str:
    for proc in dep.get("processes") or ():
        if proc.get("kind") == "engine":
            name = (proc.get("served") or {}).get("name")
            if name:
                return cast(str, name)
    return ""


def _target(name: str, dep: Mapping[str, Any], proc: Mapping[str, Any], model: str,
            group_size: int) -> dict[str, Any]:
    url = urlsplit(str(proc["metrics_url"]))
    selection = dep.get("selection") or {}
    labels = {
        "deployment": name,
        "recipe": str(dep.get("recipe") or ""),
        "model": model,
        "hardware": str(dep.get("hardware") or selection.get("hardware") or ""),
        "strategy": str(selection.get("strategy") or dep.get("deploy_type") or ""),
        "role": str(proc["role"]),
        "host": str(proc["host"]),
        COMPONENT_LABEL: "engine" if proc["kind"] == "engine" else str(proc["kind"]),
        "vllm_group": str(proc.get("restart_group") or name),
        "vllm_unit": str(proc["unit"]),
    }
    if proc["kind"] == "engine":
        labels["rank"] = str(proc.get("rank") or 0)
        labels["vllm_group_ranks"] = str(group_size)
    if url.path and url.path != "/metrics":
        labels["__metrics_path__"] = url.path
    return {"targets": [url.netloc], "labels": {k: v for k, v in labels.items() if v != ""}}


def file_sd(plan: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """deployment -> its Prometheus ``file_sd`` document (one target group per endpoint).

    ``vllm_group_ranks`` counts every engine process of the restart group, headless ranks
    included, so a dashboard or rule can tell a group of one API server from a larger one.
    """
    out: dict[str, list[dict[str, Any]]] = {}
    for name, dep in sorted((plan.get("deployments") or {}).items()):
        procs = list(dep.get("processes") or ())
        model = _deployment_model(dep)
        sizes: dict[str, int] = {}
        for proc in procs:
            if proc.get("kind") == "engine":
                group = str(proc.get("restart_group") or name)
                sizes[group] = sizes.get(group, 0) + 1
        groups = [_target(name, dep, proc, model, sizes.get(str(proc.get("restart_group") or name), 1))
                  for proc in procs if proc.get("metrics_url")]
        out[name] = sorted(groups, key=lambda g: (g["labels"][COMPONENT_LABEL], g["labels"]["vllm_unit"]))
    return out


def file_sd_files(plan: Mapping[str, Any]) -> dict[str, str]:
    """``monitoring/targets/<deployment>.json`` -> text (sorted keys, stable bytes)."""
    return {f"{TARGETS_DIR}/{name}.json": json.dumps(groups, indent=2, sort_keys=True) + "\n"
            for name, groups in file_sd(plan).items()}


# --------------------------------------------------------------------------------------
# Alert rules
# --------------------------------------------------------------------------------------

def alert_thresholds(given: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
    """``vllm_monitoring_alerts`` checked and completed with :data:`ALERT_DEFAULTS`."""
    given = dict(given or {})
    unknown = sorted(set(given) - set(ALERT_DEFAULTS))
    if unknown:
        raise InventoryError(f"vllm_monitoring_alerts.{unknown[0]}", value=given[unknown[0]],
                             expected="one of " + ", ".join(sorted(ALERT_DEFAULTS)),
                             fix=f"remove or rename {unknown[0]} (docs/observability.md lists the thresholds)")
    out: dict[str, Any] = {}
    for key, (default, kind, meaning) in ALERT_DEFAULTS.items():
        value = given.get(key, default)
        where = f"vllm_monitoring_alerts.{key}"
        if kind == "duration":
            if not isinstance(value, str) or not _DURATION_RE.match(value):
                raise InventoryError(where, value=value, expected=f"a Prometheus duration such as 5m ({meaning})",
                                     fix=f"set {key} to a whole number followed by s, m, h or d")
        elif kind == "count":
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InventoryError(where, value=value, expected=f"a whole number >= 0 ({meaning})",
                                     fix=f"set {key} to e.g. {default}")
        else:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1 \
                    or math.isnan(value):
                raise InventoryError(where, value=value, expected=f"a fraction in (0, 1] ({meaning})",
                                     fix=f"set {key} to e.g. {default} (0.9 = 90 %)")
        # exact types: Ansible hands templated values over as tagged subclasses, which the
        # rules' YAML dumper refuses
        out[key] = str(value) if kind == "duration" else int(value) if isinstance(value, int) else float(value)
    return out


_BY_TARGET = "without (engine, model_name)"


def alert_rules(given: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
    """The rule file as data: one group ``vllm-fleet`` with every alert of :data:`ALERT_NAMES`."""
    t = alert_thresholds(given)
    engine = f'{COMPONENT_LABEL}="engine"'
    router = f'{COMPONENT_LABEL}="router"'
    where = "{{ $labels.deployment }} {{ $labels.role }} rank {{ $labels.rank }} on {{ $labels.host }}"
    runbook = "docs/observability.md#{anchor}"

    def rule(name: str, expr: str, duration: Optional[str], severity: str, summary: str,
             description: str) -> dict[str, Any]:
        out: dict[str, Any] = {"alert": name, "expr": expr}
        if duration:
            out['for'] = duration
        out['labels'] = {"severity": severity}
        out['annotations'] = {"summary": summary, "description": description,
                              "runbook": runbook.format(anchor=name.lower())}
        return out

    rules = [
        rule("VllmEngineDown", f"up{{{engine}}} == 0", t['down_for'], "critical",
             f"vLLM API server down: {where}",
             "Prometheus cannot scrape {{ $labels.instance }} ({{ $labels.vllm_unit }}). For a multi-node "
             "head this also means the group is missing a rank: its API server only answers while every "
             "rank is connected."),
        rule("VllmRouterDown", f"up{{{router}}} == 0", t['down_for'], "critical",
             "vllm-router down: {{ $labels.deployment }} on {{ $labels.host }}",
             "Prometheus cannot scrape the router's metrics port {{ $labels.instance }} "
             "({{ $labels.vllm_unit }}); clients of the deployment's endpoint get no answer."),
        rule("VllmGroupIncomplete",
             f"count by (deployment, vllm_group) (up{{{engine}}} == 1)\n"
             f"  < on (deployment, vllm_group)\n"
             f"count by (deployment, vllm_group) (up{{{engine}}})",
             t['group_incomplete_for'], "critical",
             "vLLM group {{ $labels.vllm_group }} is missing a rank",
             "Only {{ $value }} API servers of group {{ $labels.vllm_group }} ({{ $labels.deployment }}) "
             "answer; the group cannot serve as planned."),
        rule("VllmRestartLoop",
             f"ceil(changes(up{{{COMPONENT_LABEL}=~\"engine|router\"}}[{t['restart_window']}]) / 2)"
             f" >= {t['restart_count']}",
             None, "warning",
             "{{ $labels.vllm_unit }} restarting in a loop on {{ $labels.host }}",
             f"{{{{ $labels.vllm_unit }}}} went down and up about {{{{ $value }}}} times in "
             f"{t['restart_window']}."),
        rule("VllmRouterBackendUnhealthy", f"vllm_router_worker_health{{{router}}} == 0",
             t['backend_unhealthy_for'], "warning",
             "Router of {{ $labels.deployment }} marks backend {{ $labels.worker }} unhealthy",
             "vllm-router on {{ $labels.host }} sends no traffic to {{ $labels.worker }}."),
        rule("VllmRequestsWaiting",
             f"sum {_BY_TARGET} (vllm:num_requests_waiting{{{engine}}}) > {t['waiting_requests']}",
             t['waiting_for'], "warning",
             f"Requests queue up: {where}",
             f"{{{{ $value }}}} requests waiting (threshold {t['waiting_requests']})."),
        rule("VllmKvCacheHigh",
             f"max {_BY_TARGET} (vllm:kv_cache_usage_perc{{{engine}}}) > {t['kv_cache_usage']}",
             t['kv_cache_for'], "warning",
             f"KV cache nearly full: {where}",
             f"KV cache usage is {{{{ $value | humanizePercentage }}}} (threshold {t['kv_cache_usage']})."),
        rule("VllmPreemptions",
             f"sum {_BY_TARGET} (increase(vllm:num_preemptions_total{{{engine}}}[{t['preemptions_window']}]))"
             f" > {t['preemptions']}",
             None, "warning",
             f"Requests preempted: {where}",
             f"{{{{ $value | humanize }}}} preemptions in {t['preemptions_window']} (threshold {t['preemptions']})."),
    ]
    return {"groups": [{"name": "vllm-fleet", "rules": rules}]}


class _RulesDumper(yaml.SafeDumper):
    """Block lists indented under their key, multi-line strings as literal blocks (yamllint-clean)."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if "\n" in data else None)


_RulesDumper.add_representer(str, _represent_str)


def alert_rules_text(given: Optional[Mapping[str, Any]] = None) -> str:
    """The rule file as YAML text (stable bytes)."""
    header = ("---\n# Managed by vllm_fleet.recipes: alert rules for vLLM fleets (docs/observability.md).\n"
              "# Thresholds: vllm_monitoring_alerts.\n")
    return header + yaml.dump(alert_rules(given), Dumper=_RulesDumper, sort_keys=False, width=140,
                              default_flow_style=False)


# --------------------------------------------------------------------------------------
# Reading /metrics (the exposition parser: _prometheus_text)
# --------------------------------------------------------------------------------------

def _engine_figures(samples: Iterable[Sample]) -> dict[str, Optional[float]]:
    def values(name: str) -> list[float]:
        return [s.value for s in samples if s.name == name and not math.isnan(s.value)]

    samples = list(samples)
    running, waiting, kv = (values("vllm:num_requests_running"), values("vllm:num_requests_waiting"),
                            values("vllm:kv_cache_usage_perc"))
    return {"running": sum(running) if running else None, "waiting": sum(waiting) if waiting else None,
            "kv_cache_usage": max(kv) if kv else None}


def fleet_figures(scrapes: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per deployment: API servers scraped/answering, running and waiting requests, KV usage.

    ``scrapes``: one entry per API server, each with ``item`` (its plan.json process:
    ``deployment``, ``unit``), ``status`` and ``content`` (the /metrics text), as
    ``ansible.builtin.uri`` registers them with ``return_content``. ``kv_cache_usage_max``
    is the fullest engine's usage (0-1); figures are None when no engine reported them.
    """
    out: dict[str, dict[str, Any]] = {}
    for scrape in scrapes:
        item = scrape.get("item") or {}
        if item.get("kind", "engine") != "engine":
            continue
        dep = out.setdefault(str(item.get("deployment")), {
            "api_servers": 0, "answering": 0, "running": None, "waiting": None, "kv_cache_usage_max": None})
        dep["api_servers"] += 1
        if scrape.get("status") != 200 or not isinstance(scrape.get("content"), str):
            continue
        dep["answering"] += 1
        figures = _engine_figures(parse_metrics(scrape["content"]))
        for key in ("running", "waiting"):
            figure = figures[key]
            if figure is not None:
                dep[key] = (dep[key] or 0) + figure
        if figures["kv_cache_usage"] is not None:
            dep["kv_cache_usage_max"] = max(dep["kv_cache_usage_max"] or 0.0, figures["kv_cache_usage"])
    return dict(sorted(out.items()))


def render_files(plan: Mapping[str, Any], alerts: Optional[Mapping[str, Any]] = None) -> dict[str, str]:
    """What a render writes for Prometheus: the file_sd documents and the rule file."""
    files = file_sd_files(plan)
    files[RULES_FILE] = alert_rules_text(alerts)
    return files


# --------------------------------------------------------------------------------------
# Dashboard queries
# --------------------------------------------------------------------------------------

#: Series Prometheus makes up itself: never in a target's /metrics.
SYNTHETIC_SERIES = frozenset({"up", "scrape_duration_seconds", "scrape_samples_scraped",
                              "scrape_samples_post_metric_relabeling", "scrape_series_added"})
_PROMQL_WORDS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or",
                           "unless", "bool", "offset", "inf", "nan"})
_STRING_RE = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHERS_RE = re.compile(r"\{[^{}]*\}")
_RANGE_RE = re.compile(r"\[[^\[\]]*\]")
_GROUPING_RE = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_IDENT_RE = re.compile(r"(?<![\w:$.])([A-Za-z_:][A-Za-z0-9_:]*)(?![\w:])(\s*\()?")


def metric_names(expr: str) -> set[str]:
    """Series names a PromQL expression reads (functions, keywords, labels and $variables left out)."""
    text = _STRING_RE.sub('""', expr)
    text = _MATCHERS_RE.sub(" ", text)
    text = _RANGE_RE.sub(" ", text)
    text = _GROUPING_RE.sub(" ", text)
    names = set()
    for match in _IDENT_RE.finditer(text):
        name, call = match.group(1), match.group(2)
        if call or name.lower() in _PROMQL_WORDS:
            continue
        names.add(name)
    return names


def dashboard_queries(dashboard: Mapping[str, Any]) -> list[str]:
    """Every PromQL expression of a Grafana dashboard: panel targets (rows' too) and variable queries."""
    exprs: list[str] = []

    def panels(items: Iterable[Mapping[str, Any]]) -> None:
        for panel in items:
            exprs.extend(str(t["expr"]) for t in panel.get("targets") or () if t.get("expr"))
            panels(panel.get("panels") or ())

    panels(dashboard.get("panels") or ())
    for var in (dashboard.get("templating") or {}).get("list") or ():
        if var.get("type") != "query":
            continue
        query = var.get("query")
        text = str(query.get("query") if isinstance(query, Mapping) else query or "")
        inner = re.fullmatch(r"\s*(?:label_values|query_result)\((.*)\)\s*", text, re.S)
        if inner:
            text = inner.group(1)
            # label_values(expr, label): drop the trailing label argument
            text = re.sub(r",\s*[A-Za-z_][A-Za-z0-9_]*\s*$", "", text)
        exprs.append(text)
    return exprs


def metric_names_in_dashboard(dashboard: Mapping[str, Any]) -> set[str]:
    """Series names the dashboard queries that a target must export.

    ``vllm:*`` names come from the engine's /metrics, ``vllm_router_*`` from the router's;
    Prometheus's own series (``up`` ...) are left out. Compare with :func:`parse_metrics` of a
    live ``/metrics`` to prove the dashboard queries what the engine exports.
    """
    names: set[str] = set()
    for expr in dashboard_queries(dashboard):
        names |= metric_names(expr)
    return names - SYNTHETIC_SERIES
