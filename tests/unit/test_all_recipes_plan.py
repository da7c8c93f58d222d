"""Every recipe we can reach plans for every strategy and hardware the recipes site offers it on.

The recipes are upstream's (``../shared/upstream/recipes/models``) and ours (``recipes/models``);
for each one, its default variant on each hardware profile of our catalog, and each rendering the
site's static API offers there (``published_renderings``: the recommended strategy and every
alternative), becomes an inventory of as many hosts as the rendering needs and goes through
``build_plan``. PD pools get the sizes the site's builder shows: the recipe's
``strategy_overrides.pd_cluster.<role>.nodes`` for that hardware (``recipe_pool_nodes``: a count,
or ``{default: 2, gb300: 1}``), else the static API's VRAM-based sizes. Mooncake compositions
(``kv_offload`` of a KV-store deployment) need store hosts and are left to the examples.

Each rendering must plan, or be refused for a reason the site has too (listed in ``SITE_REASONS``).
A second test does the same for a copy of an upstream PD recipe whose pool sizes are per-hardware
maps (the format upstream recipes have begun to use), and checks the pool sizes in the plan.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import pytest
import yaml

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _placement as P
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._catalog import load_catalog
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._errors import RecipeError
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._gates import recipe_pool_nodes
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._selection import (
    published_hardware,
    published_renderings,
)

pytestmark = [pytest.mark.slow, pytest.mark.shared]

REPO = Path(__file__).resolve().parents[2]
CATALOG = load_catalog()
ENGINE = P.engine_factory(catalog=CATALOG)
#: Refusals the recipes site also has (it shows no command, or a command that cannot run there).
SITE_REASONS = (
    "accelerators for g",  # the site's command needs more GPUs than the hardware's node has
)


def recipe_files(shared_dir: Path) -> list[Path]:
    return sorted((shared_dir / "upstream" / "recipes" / "models").glob("*/*.yaml")) + \
        sorted((REPO / "recipes" / "models").glob("*/*.yaml"))


def declares_pool_nodes(recipe: dict) -> bool:
    pd = ((recipe.get("strategy_overrides") or {}).get("pd_cluster") or {})
    return any(isinstance(pd.get(role), dict) and "nodes" in pd[role] for role in ("prefill", "decode"))


def inventory(path: Path, selection: Any, pools: Optional[dict]) -> tuple[dict, dict]:
    """hostvars and groups for one rendering: one host per node, PD pools and a router host."""
    decl = {"recipe": str(path), "variant": selection.variant, "hardware": selection.hardware,
            "strategy": selection.strategy, "features": list(selection.features or ())}
    roles: list[Optional[str]] = []
    if selection.strategy == "pd_cluster":
        roles = [None] if pools is None else ["prefill"] * pools["prefill"] + ["decode"] * pools["decode"]
        roles.append("router")
    elif CATALOG.strategies[selection.strategy].get("deploy_type") == "multi_node":
        roles = [None] * (selection.node_count or 1)
        decl["node_count"] = selection.node_count or 1
    else:  # a single-node strategy renders one node's command, whatever node count the site asked
        roles = [None]
    hostvars, hosts = {}, []
    for index, role in enumerate(roles):
        host = f"n{index}"
        hostvars[host] = {"ansible_host": f"10.50.{index // 200}.{index % 200 + 1}",
                          "vllm_fabric_interface": "ens5", "vllm_deployment": decl}
        if role is not None:
            hostvars[host]["vllm_pd_role"] = role
        hosts.append(host)
    return hostvars, {"all": hosts, "g": hosts}


#: What the operator sets when a refusal's fix asks for it (the recipes site leaves these to the
#: user too: an image where the recipe has none, the docker profile, the RDMA device name).
DOCUMENTED_FIXES = {
    "set container_profile: upstream": ({"container_profile": "upstream"}, {}),
    "set vllm_deployment.image": ({"image": "registry.example/vllm/vllm-openai:stand-in"}, {}),
    "set vllm_ib_hca on": ({}, {"vllm_ib_hca": "mlx5_0"}),
}


def plan_as_documented(hostvars: dict, groups: dict) -> Any:
    """build_plan, applying each fix a refusal asks the operator for (at most once each)."""
    applied: set[str] = set()
    while True:
        try:
            return P.build_plan(hostvars, groups, ENGINE)
        except RecipeError as exc:
            fix = next((f for f in DOCUMENTED_FIXES if f in str(exc) and f not in applied), None)
            if fix is None:
                raise
        applied.add(fix)
        decl_extra, host_extra = DOCUMENTED_FIXES[fix]
        decl = {**next(iter(hostvars.values()))["vllm_deployment"], **decl_extra}
        hostvars = {h: {**v, **host_extra, "vllm_deployment": decl} for h, v in hostvars.items()}


def pool_sizes(recipe: dict, selection: Any) -> Optional[dict]:
    if declares_pool_nodes(recipe):
        return {role: recipe_pool_nodes(recipe, role, selection.hardware) for role in ("prefill", "decode")}
    pd = selection.pd_nodes
    return None if pd is None else {role: int(pd[role]) for role in ("prefill", "decode")}


def plan_every_rendering(path: Path, recipe: dict) -> tuple[int, list[str]]:
    planned, failures = 0, []
    profiles = CATALOG.taxonomy["hardware_profiles"]
    for hardware in published_hardware(recipe, "default", profiles):
        for rendering in published_renderings(recipe, "default", hardware, CATALOG.strategies, CATALOG.taxonomy):
            selection = rendering.selection
            if selection.kv_offload:
                continue
            pools = pool_sizes(recipe, selection) if selection.strategy == "pd_cluster" else None
            hostvars, groups = inventory(path, selection, pools)
            try:
                fleet = plan_as_documented(hostvars, groups)
            except (RecipeError, ValueError) as exc:
                if not any(reason in str(exc) for reason in SITE_REASONS):
                    failures.append(f"{path.name} {hardware} {selection.strategy}: {exc}")
                continue
            planned += 1
            if pools is not None:
                (plan,) = fleet.deployments
                for role, size in pools.items():
                    got = {p.host for p in plan.processes if p.pool == role}
                    assert len(got) == size, (path.name, hardware, role, got, size)
    return planned, failures


def test_every_recipe_plans_for_every_strategy_and_hardware_the_site_offers(shared_dir):
    planned, failures = 0, []
    for path in recipe_files(shared_dir):
        recipe = yaml.safe_load(path.read_text(encoding="utf-8"))
        if "omni" in ((recipe.get("meta") or {}).get("tasks") or []):
            continue
        count, bad = plan_every_rendering(path, recipe)
        planned += count
        failures += bad
    assert not failures, f"{len(failures)} refused:\n" + "\n".join(failures[:20])
    assert planned > 1000


def test_per_hardware_pool_node_maps_plan_with_the_sites_pool_sizes(shared_dir, tmp_path):
    """Kimi-K2.6 with ``nodes: {default: 2, gb300: 1}`` (prefill) and ``{default: 1, gb200: 3}``."""
    source = shared_dir / "upstream" / "recipes" / "models" / "moonshotai" / "Kimi-K2.6.yaml"
    recipe = yaml.safe_load(source.read_text(encoding="utf-8"))
    pd = recipe["strategy_overrides"]["pd_cluster"]
    pd["prefill"]["nodes"] = {"default": 2, "gb300": 1}
    pd["decode"]["nodes"] = {"default": 1, "gb200": 3}
    path = tmp_path / "models" / "moonshotai" / "Kimi-K2.6.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump(recipe, sort_keys=False), encoding="utf-8")
    sizes = {}
    for hardware in CATALOG.hardware_ids():
        for rendering in published_renderings(recipe, "default", hardware, CATALOG.strategies, CATALOG.taxonomy):
            if rendering.selection.strategy == "pd_cluster" and not rendering.selection.kv_offload:
                sizes[hardware] = pool_sizes(recipe, rendering.selection)
    assert sizes["gb300"] == {"prefill": 1, "decode": 1}
    assert sizes["gb200"] == {"prefill": 2, "decode": 3}
    assert sizes["h200"] == {"prefill": 2, "decode": 1}
    planned, failures = plan_every_rendering(path, recipe)
    assert not failures, "\n".join(failures)
    assert planned >= len(sizes)
