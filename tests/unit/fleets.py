"""Test support (not a test module): fleets from the example inventories and the seed recipe,
and the render playbook run end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.vars.manager import VariableManager

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _placement as P

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "playbooks" / "examples"
SEED = {"recipe": "zai-org/GLM-5.3-Flash", "hardware": "h200"}


def inventory_vars(path: Path) -> tuple[dict, dict]:
    """hostvars and groups exactly as Ansible computes them for an inventory file."""
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[str(path)])
    manager = VariableManager(loader=loader, inventory=inventory)
    hostvars = {}
    for host in inventory.get_hosts():
        values = manager.get_vars(host=host, include_hostvars=False)
        hostvars[host.name] = json.loads(json.dumps(
            {k: v for k, v in values.items() if k.startswith("vllm_") or k in ("ansible_host",)}))
    return hostvars, inventory.get_groups_dict()


def example_fleet(name: str) -> P.FleetPlan:
    """The plan of playbooks/examples/<name>/inventory.yml."""
    hostvars, groups = inventory_vars(EXAMPLES / name / "inventory.yml")
    return P.build_plan(hostvars, groups, P.engine_factory())


def seed_fleet(deployment: dict, hosts: list[str], children: dict | None = None,
               host_vars: dict | None = None, **kw: Any) -> P.FleetPlan:
    """The plan of one deployment on ``hosts`` (10.3.0.N, interface eth1)."""
    hostvars = {}
    for index, host in enumerate(hosts):
        hostvars[host] = {"ansible_host": f"10.3.0.{index + 1}", "vllm_fabric_interface": "eth1",
                          "vllm_deployment": deployment, **(host_vars or {}).get(host, {})}
    groups = {"all": hosts, "fleet": hosts, **(children or {})}
    return P.build_plan(hostvars, groups, P.engine_factory(), **kw)


def ansible_playbook() -> str:
    candidate = Path(sys.executable).parent / "ansible-playbook"
    return str(candidate) if candidate.exists() else "ansible-playbook"


def run_render(inventory: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    """ansible-playbook playbooks/render.yml into ``out`` (its parent is the working directory)."""
    env = dict(os.environ)
    env["ANSIBLE_COLLECTIONS_PATH"] = str(REPO / ".collections")
    env["ANSIBLE_NOCOLOR"] = "1"
    env["ANSIBLE_RETRY_FILES_ENABLED"] = "0"
    env.pop("ANSIBLE_CONFIG", None)
    return subprocess.run([ansible_playbook(), "-i", str(inventory), str(REPO / "playbooks" / "render.yml"),
                           "-e", f"vllm_render_dir={out}", *extra],
                          capture_output=True, text=True, env=env, cwd=str(out.parent), timeout=300, check=False)


def fleets_of_64_hosts() -> dict[str, P.FleetPlan]:
    """Two large plans for PLAN.md's diagram: 4 Mooncake instances of 16 multi-node ranks (64 engine
    hosts and a router/master host), and 63 replicas behind a router (64 hosts)."""
    hosts = [f"gpu-{index:02d}" for index in range(64)]
    return {
        "kv_4x16": seed_fleet(
            dict(SEED, strategy="multi_node_tp_pp", node_count=16, kv_offload="kv_store_distributed_mooncake",
                 kv_instances=4),
            hosts + ["svc"], host_vars={"svc": {"vllm_pd_role": "router", "vllm_mooncake_role": "master"}}),
        "replicas_63": seed_fleet(dict(SEED, strategy="single_node_tp", replicas=63), hosts,
                                  {"fleet_router": hosts[63:]}),
    }
