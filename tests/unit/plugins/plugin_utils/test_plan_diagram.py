"""PLAN.md's Mermaid topology diagram (_plan_diagram), checked in Python.

What each example plan draws (front door, router, pools, ranks, ports), that 64 hosts stay a
handful of boxes, and the property: any host name the inventory accepts yields a diagram that is
still well formed (mermaid_shape.problems) and shows the name as given. The real Mermaid parser
(mmdc) renders the example plans in tests/unit/test_plan_diagram_mmdc.py.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _plan_diagram as D
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _render as R
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._deployment_spec import NAME_RE
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._inventory import InventoryError
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._inventory_checks import check_host_name
from fleets import SEED, example_fleet, fleets_of_64_hosts, seed_fleet
from mermaid_shape import diagrams, problems

EXAMPLES = ("single_node_tp", "multi_node_tp_pp", "pd_cluster")
LARGE = fleets_of_64_hosts()


def drawn(fleet) -> tuple[str, list[str]]:
    (plan,) = fleet.deployments
    text = D.deployment_diagram(plan)
    found, labels = problems(text)
    assert not found, "\n".join(found) + "\n" + text
    return text, labels


@pytest.mark.parametrize("example, expected", [
    ("single_node_tp", ["clients\nhttp://10.20.0.11:8000", "engine\nh200-a · 10.20.0.11\nGPUs 0-7\napi :8000",
                        "HTTP :8000"]),
    ("multi_node_tp_pp", ["multi-node group", "head · rank 0\nh200-b · 10.20.0.21\nGPUs 0-7\napi :8000\nmaster :29501",
                          "worker · rank 1\nh200-c · 10.20.0.22\nGPUs 0-7", "master :29501"]),
    ("pd_cluster", ["router\nrouter-1 · 10.20.1.5\nHTTP :30000\nmetrics :29000", "prefill pool", "decode pool",
                    "prefill · rank 0\nh200-p1 · 10.20.1.11\nGPUs 0-7\napi :8001\nNIXL :5557",
                    "HTTP :8001", "HTTP :8002", "KV cache via NIXL"]),
])
def test_each_example_plan_draws_its_topology(example, expected):
    _text, labels = drawn(example_fleet(example))
    assert [label for label in expected if label not in labels] == [], labels


def test_the_edges_follow_the_router_and_the_groups():
    text, _labels = drawn(example_fleet("pd_cluster"))
    assert re.findall(r"^  (\w+) -->", text, re.M) == ["fd", "n1", "n1"]  # front door, then the router
    assert 'g1 -.->|"KV cache via NIXL"| g2' in text                     # prefill pool -> decode pool
    text, _labels = drawn(example_fleet("multi_node_tp_pp"))
    assert 'n2 -->|"master :29501"| n1' in text                          # the worker joins the head


@pytest.mark.parametrize("name", sorted(LARGE))
def test_64_hosts_stay_a_handful_of_boxes(name):
    text, labels = drawn(LARGE[name])
    boxes = re.findall(r'^ +n[0-9]+\[', text, re.M)
    assert len(boxes) <= 5 and len(text.splitlines()) <= 16, text
    counts = [int(n) for label in labels for n in re.findall(r"^([0-9]+) hosts: ", label, re.M)]
    engines = {p.host for p in LARGE[name].deployments[0].processes if p.kind == "engine"}
    assert sum(counts) == len(engines) == (64 if name == "kv_4x16" else 63), labels


def test_a_group_of_ranks_names_its_ranks_and_summarizes_its_hosts():
    _text, labels = drawn(LARGE["kv_4x16"])
    assert "instances 0-3 · 16 ranks each" in labels
    assert "worker · ranks 1-15\n60 hosts: gpu-01, gpu-02, …, gpu-63\nGPUs 0-7 each" in labels, labels
    _text, labels = drawn(LARGE["replicas_63"])
    assert "replicas 0-62\n63 hosts: gpu-00, gpu-01, …, gpu-62\nGPUs 0-7 each\napi :8000" in labels, labels


def test_plan_md_opens_each_deployment_with_its_diagram():
    fleet = example_fleet("pd_cluster")
    md = R.render_plan_md(fleet)
    assert diagrams(md) == [D.deployment_diagram(plan) for plan in fleet.deployments]
    heading = md.index("## Deployment `glm-pd`")
    assert md.index("```mermaid", heading) < md.index("- recipe:", heading)


@pytest.mark.parametrize("text, shown", [
    ('a"b', "a#quot;b"), ("x<script>", "x#lt;script#gt;"), ("`x`", "#96;x#96;"), ("a#b;", "a#35;b;"),
    ("100%%", "100#37;#37;"), ("a|b", "a#124;b"), ("é名", "é名"), ("a\u202eb\x00", "a?b?"), ("a&b", "a#amp;b"),
])
def test_escape(text, shown):
    assert D.escape(text) == shown


@pytest.mark.parametrize("values, text", [([], "-"), ([3], "3"), ([0, 1, 2, 5, 7, 8], "0-2,5,7-8"), ([2, 1, 2], "1-2")])
def test_number_ranges(values, text):
    assert D.number_ranges(values) == text


@pytest.mark.parametrize("broken, problem", [
    ('flowchart LR\n  n1["a"b"]\n', "not a statement"),
    ('flowchart LR\n  n1["<img src=x>"]\n', "not a statement"),
    ('flowchart LR\n  n1["a#b"]\n', "not a statement"),
    ('flowchart LR\n  n1["```"]\n', "not a statement"),
    ('flowchart LR\n  n1["a"]\n  n1 -->|"x"| n2\n', "undefined id"),
    ('flowchart LR\n  n1["a"]\n  n1["b"]\n', "defined twice"),
    ('flowchart LR\n  subgraph g1 ["a"]\n    n1["a"]\n', "unclosed subgraph"),
    ('graph TD\n  n1["a"]\n', "header"),
])
def test_the_shape_check_can_fail(broken, problem):
    found, _labels = problems(broken)
    assert any(problem in item for item in found), found


# Names built from what is syntax in Mermaid, HTML and Markdown, and any other character.
SYNTAX = st.sampled_from(["<", ">", "&", "#", "%", "%%", "|", ";", "[", "]", "{", "}", "(", ")", "-->", "-.->",
                          "*", "_", "~", ":", "=", "@", "^", "+", ",", ".", "?", "#quot;", "<br>", "&amp;",
                          "end", "subgraph", "\u202e", "\u00ad", "é", "名", "…"])
OTHER = st.characters(blacklist_categories=("Cs", "Cc", "Zs", "Zl", "Zp"), blacklist_characters="/\\$`'\"")
NAMES = st.lists(SYNTAX | OTHER, min_size=1, max_size=14).map("".join)


def accepted(name: str) -> bool:
    try:
        check_host_name(name)
    except (InventoryError, ValueError):
        return False
    return True


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(hosts=st.lists(NAMES, min_size=3, max_size=3, unique=True), deployment=st.from_regex(NAME_RE, fullmatch=True))
def test_any_accepted_host_name_keeps_the_diagram_whole(hosts, deployment):
    assume(all(accepted(h) for h in hosts))
    roles = dict(zip(hosts, ("prefill", "decode", "router"), strict=False))
    fleet = seed_fleet(dict(SEED, strategy="pd_cluster", name=deployment), hosts,
                       host_vars={h: {"vllm_pd_role": role} for h, role in roles.items()})
    _text, labels = drawn(fleet)
    for host in hosts:
        shown = "".join(c if c.isprintable() else "?" for c in D.shown_name(host))
        assert any(line.startswith(f"{shown} · 10.3.0.") for label in labels for line in label.split("\n")), \
            (host, labels)
    md = R.render_plan_md(fleet)
    assert len(diagrams(md)) == 1 and md.count("```") == 2
