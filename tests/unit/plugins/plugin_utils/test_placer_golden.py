"""Golden files per placer: every file a small fleet of each deploy type renders.

One case per placer shape (``_placement.PLACERS``): single node, multi-node (TP+PP and
DEP), prefill/decode pools (TP and DEP pools) and the Mooncake KV-store placers
(centralized with a store host, distributed). Each case renders the fleet and compares
every file with ``tests/unit/plugins/plugin_utils/golden/<case>/``; a difference fails with a unified diff.

After a deliberate change, regenerate and review the diff in git:

    VLLM_FLEET_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/plugins/plugin_utils/test_placer_golden.py
"""

from __future__ import annotations

import difflib
import os
import shutil
from pathlib import Path

import pytest

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _placement as P
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _render as R
from fleets import SEED, seed_fleet

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("VLLM_FLEET_UPDATE_GOLDEN") == "1"
#: The alert rules are the same for every fleet (test_observability covers them).
NOT_PLACER_OUTPUT = frozenset({"monitoring/vllm-fleet.rules.yml"})

PD_HOSTS = ["p0", "d0", "r0"]
PD_CHILDREN = {"fleet_prefill": ["p0"], "fleet_decode": ["d0"], "fleet_router": ["r0"]}
DEP_POOLS = {"prefill": {"parallelism": "dep"}, "decode": {"parallelism": "dep"}}
KV_ROLES = {"svc": {"vllm_pd_role": "router", "vllm_mooncake_role": "master"},
            "store": {"vllm_mooncake_role": "store"}}

#: case -> (placer the deploy type dispatches to, fleet)
CASES = {
    "single_node_tp": ("single_node", lambda: seed_fleet(dict(SEED, strategy="single_node_tp"), ["a"])),
    "multi_node_tp_pp": ("multi_node", lambda: seed_fleet(dict(SEED, strategy="multi_node_tp_pp"), ["a", "b"])),
    "multi_node_dep": ("multi_node", lambda: seed_fleet(dict(SEED, strategy="multi_node_dep"), ["a", "b"])),
    "pd_cluster_tp": ("pd_cluster", lambda: seed_fleet(dict(SEED, strategy="pd_cluster"), PD_HOSTS, PD_CHILDREN)),
    "pd_cluster_dep": ("pd_cluster", lambda: seed_fleet(dict(SEED, strategy="pd_cluster", pd=DEP_POOLS),
                                                        PD_HOSTS, PD_CHILDREN)),
    "kv_centralized": ("kv_store_lb", lambda: seed_fleet(
        dict(SEED, strategy="single_node_tp", kv_offload="kv_store_centralized_mooncake", kv_instances=2),
        ["g0", "g1", "svc", "store"], host_vars=KV_ROLES)),
    "kv_distributed": ("kv_store_lb", lambda: seed_fleet(
        dict(SEED, strategy="single_node_tp", kv_offload="kv_store_distributed_mooncake", kv_instances=2),
        ["g0", "g1", "svc"], host_vars={"svc": KV_ROLES["svc"]})),
}


def rendered(case: str) -> dict[str, str]:
    return {path: text for path, text in R.render(CASES[case][1]()).items() if path not in NOT_PLACER_OUTPUT}


def golden(case: str) -> dict[str, str]:
    root = GOLDEN / case
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def write_golden(case: str, files: dict[str, str]) -> None:
    root = GOLDEN / case
    shutil.rmtree(root, ignore_errors=True)
    for path, text in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def differences(expected: dict[str, str], actual: dict[str, str]) -> list[str]:
    """Human-readable differences between two file sets (empty when equal)."""
    out = [f"missing: {path}" for path in sorted(expected.keys() - actual.keys())]
    out += [f"unexpected: {path}" for path in sorted(actual.keys() - expected.keys())]
    for path in sorted(expected.keys() & actual.keys()):
        if expected[path] != actual[path]:
            out.append("".join(difflib.unified_diff(expected[path].splitlines(True), actual[path].splitlines(True),
                                                    f"golden/{path}", f"rendered/{path}")))
    return out


def test_every_placer_has_a_golden_case():
    assert {placer for placer, _fleet in CASES.values()} == set(P.PLACERS)


@pytest.mark.parametrize("case", sorted(CASES))
def test_render_matches_the_golden_files(case):
    files = rendered(case)
    if UPDATE:
        write_golden(case, files)
    assert files, f"{case}: rendered nothing"
    found = differences(golden(case), files)
    assert not found, f"{case} differs from {GOLDEN / case} (VLLM_FLEET_UPDATE_GOLDEN=1 regenerates):\n" + \
        "\n".join(found)


def test_a_changed_file_is_reported_with_a_diff():
    expected = {"a.service": "ExecStart=/usr/bin/docker run x\n", "b.env": "K=1\n"}
    actual = {"a.service": "ExecStart=/usr/bin/docker run y\n", "c.env": "K=1\n"}
    found = differences(expected, actual)
    assert found[0] == "missing: b.env" and found[1] == "unexpected: c.env"
    assert "-ExecStart=/usr/bin/docker run x" in found[2] and "+ExecStart=/usr/bin/docker run y" in found[2]
    assert differences(expected, dict(expected)) == []
