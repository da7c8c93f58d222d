"""Selection defaults against the recipes site's published API.

The corpus's ``api_default`` cases are exactly the renderings upstream's static
API publishes: for every (model, variant, hardware) the recommended selection
and each alternative. Our ``published_renderings`` must produce the same set of
keys and the same selections, and ``pick_default_hardware`` the same default.
"""

from __future__ import annotations

import collections
import gzip
import json

import pytest

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._catalog import load_upstream_catalog
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._documents import read_document
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._selection import (
    pick_default_hardware,
    published_renderings,
)

pytestmark = pytest.mark.shared


@pytest.fixture(scope="module")
def published(shared_dir):
    groups: dict = collections.defaultdict(dict)
    defaults = {}
    with gzip.open(shared_dir / "upstream" / "conformance" / "cases.jsonl.gz", "rt") as stream:
        for line in stream:
            case = json.loads(line)
            if case["kind"] != "api_default":
                continue
            variant = case["info"]["requested_variant"]
            groups[(case["hf_id"], variant, case["hardware"])][case["info"]["api_key"]] = case
            defaults[(case["hf_id"], variant)] = case["info"]["default_hardware"]
    recipes_dir = shared_dir / "upstream" / "recipes"
    catalog = load_upstream_catalog(recipes_dir)
    recipes = {key[0]: read_document(recipes_dir / "models" / f"{key[0]}.yaml") for key in groups}
    return groups, defaults, recipes, catalog


def test_every_published_rendering_is_reproduced(published):
    groups, _defaults, recipes, catalog = published
    mismatches = []
    for (hf_id, variant, hardware), cases in groups.items():
        ours = {r.key: r for r in published_renderings(recipes[hf_id], variant, hardware,
                                                       catalog.strategies, catalog.taxonomy)}
        if set(ours) != set(cases):
            mismatches.append((hf_id, variant, hardware, sorted(set(ours) ^ set(cases))))
            continue
        for key, case in cases.items():
            sel = ours[key].selection
            got = dict(variant=sel.variant, strategy=sel.strategy, features=list(sel.features),
                       node_count=sel.node_count, pd_nodes=sel.pd_nodes, kv_offload=sel.kv_offload,
                       recommended=ours[key].recommended)
            want = {k: case[k] for k in got if k != "recommended"}
            want["recommended"] = bool(case["info"].get("api_recommended"))
            if got != want:
                mismatches.append((hf_id, variant, hardware, key, got, want))
    assert len(groups) > 1900
    assert mismatches == []


def test_default_hardware_matches(published):
    _groups, defaults, recipes, catalog = published
    profiles = catalog.taxonomy["hardware_profiles"]
    wrong = {key: (pick_default_hardware(profiles, recipes[key[0]]["variants"][key[1]], recipes[key[0]]), want)
             for key, want in defaults.items()
             if pick_default_hardware(profiles, recipes[key[0]]["variants"][key[1]], recipes[key[0]]) != want}
    assert len(defaults) > 100
    assert wrong == {}
