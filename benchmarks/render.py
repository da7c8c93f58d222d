#!/usr/bin/env python
"""Benchmark: render generated 1-, 64- and 1,024-host fleets; print their wall times.

    .venv/bin/python benchmarks/render.py [--repeat 3] [--keep DIR] [--sizes 1,64,1024]

The 64-host inventory carries 8 deployments of the seed recipe with mixed
strategies (multi-node TP+PP / DEP / TEP / TP, two PD clusters with DEP and TP
pools, centralized and distributed Mooncake with routers). The 1,024-host one
repeats that layout 16 times (128 deployments) under distinct group and host
names and addresses. Each inventory is rendered twice:

* ``playbook``: ``ansible-playbook playbooks/render.yml`` end to end (what a user runs);
* ``core``: ``build_plan`` + ``render`` in this process (the pure-Python part).

Targets (issue 3): under 10 s for 64 hosts, 64 hosts within 3x the 1-host time,
and under 10 s for 1,024 hosts.
It is a benchmark: it prints figures and never fails on them.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
COLLECTIONS = ROOT / ".collections"
LINK = COLLECTIONS / "ansible_collections" / "vllm_fleet" / "recipes"
if not LINK.exists():
    LINK.parent.mkdir(parents=True, exist_ok=True)
    LINK.symlink_to(Path("..", "..", ".."), target_is_directory=True)
sys.path.insert(0, str(COLLECTIONS))

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _placement, _render  # noqa: E402

SEED = {"recipe": "zai-org/GLM-5.3-Flash", "hardware": "h200"}


def _host(index: int, **extra) -> dict:
    """Host ``index``'s vars: a unique, valid 10.x.y.z address up to index 51,499."""
    return {"ansible_host": f"10.{50 + index // 250}.{index % 250 // 10}.{index % 10 + 1}",
            "vllm_fabric_interface": "ens5", **extra}


def fleet_copies(copies: int) -> dict:
    """``copies`` x (8 deployments, 64 hosts); copies after a single one get a 2-digit group suffix."""
    counter = iter(range(64 * copies))
    children: dict = {}

    def hosts(prefix: str, count: int, **extra) -> dict:
        return {f"{prefix}-{i}": _host(next(counter), **extra) for i in range(count)}

    def declare(name: str, deployment: dict) -> dict:
        """Copies declare identical deployments: name each one's group so they stay apart."""
        return {"vllm_deployment": dict(deployment, group=name) if copies > 1 else deployment}

    def plain(name: str, count: int, deployment: dict) -> None:
        children[name] = {"hosts": hosts(name, count), "vars": declare(name, deployment)}

    def pd(name: str, prefill: int, decode: int, deployment: dict) -> None:
        children[name] = {
            "children": {
                f"{name}_prefill": {"hosts": hosts(f"{name}-p", prefill)},
                f"{name}_decode": {"hosts": hosts(f"{name}-d", decode)},
                f"{name}_router": {"hosts": hosts(f"{name}-r", 1)},
            },
            "vars": declare(name, deployment),
        }

    def kv(name: str, engines: int, deployment: dict, store: bool) -> None:
        extra = hosts(f"{name}-svc", 1, vllm_pd_role="router", vllm_mooncake_role="master")
        if store:
            extra.update(hosts(f"{name}-store", 1, vllm_mooncake_role="store"))
        children[name] = {"hosts": {**hosts(f"{name}-gpu", engines), **extra},
                          "vars": declare(name, deployment)}

    dep_pools = {"prefill": {"parallelism": "dep"}, "decode": {"parallelism": "dep"}}
    for copy in range(copies):
        tag = f"{copy:02d}" if copies > 1 else ""
        plain(f"tppp{tag}", 8, dict(SEED, strategy="multi_node_tp_pp"))
        plain(f"dep{tag}", 8, dict(SEED, strategy="multi_node_dep"))
        plain(f"tep{tag}", 8, dict(SEED, strategy="multi_node_tep"))
        plain(f"tp{tag}", 8, dict(SEED, strategy="multi_node_tp"))
        pd(f"pddep{tag}", 4, 3, dict(SEED, strategy="pd_cluster", pd=dep_pools))
        pd(f"pdtp{tag}", 3, 4, dict(SEED, strategy="pd_cluster"))
        kv(f"kvc{tag}", 6, dict(SEED, strategy="single_node_tp", kv_offload="kv_store_centralized_mooncake",
                                kv_instances=6), store=True)
        kv(f"kvd{tag}", 7, dict(SEED, strategy="single_node_tp", kv_offload="kv_store_distributed_mooncake",
                                kv_instances=7), store=False)
    return {"all": {"children": children}}


def fleet_64() -> dict:
    """8 deployments, 64 hosts."""
    return fleet_copies(1)


def fleet_1024() -> dict:
    """128 deployments, 1,024 hosts: the 64-host layout 16 times."""
    return fleet_copies(16)


def fleet_1() -> dict:
    return {"all": {"children": {"one": {"hosts": {"one-0": _host(0)},
                                         "vars": {"vllm_deployment": dict(SEED, strategy="single_node_tp")}}}}}


def count_hosts(doc: dict) -> int:
    def walk(group: dict) -> set:
        found = set((group.get("hosts") or {}).keys())
        for child in (group.get("children") or {}).values():
            found |= walk(child)
        return found
    return len(walk(doc["all"]))


def flatten(doc: dict) -> tuple[dict, dict]:
    """hostvars/groups of a YAML inventory (group vars inherited parent -> child)."""
    hostvars: dict = {}
    groups: dict = {"all": [], "ungrouped": []}

    def walk(name: str, group: dict, inherited: dict) -> list:
        values = {**inherited, **(group.get("vars") or {})}
        members = []
        for host, hvars in (group.get("hosts") or {}).items():
            hostvars.setdefault(host, {}).update({**values, **(hvars or {})})
            members.append(host)
        for child, sub in (group.get("children") or {}).items():
            members += walk(child, sub, values)
        groups[name] = members
        return members

    groups["all"] = walk("all", doc["all"], {})
    return hostvars, groups


def time_core(doc: dict, repeat: int) -> tuple[float, int]:
    hostvars, groups = flatten(doc)
    times, files = [], 0
    for _run in range(repeat):
        start = time.perf_counter()
        fleet = _placement.build_plan(hostvars, groups, _placement.engine_factory())
        files = len(_render.render(fleet))
        times.append(time.perf_counter() - start)
    return statistics.median(times), files


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_playbook(inventory: Path, out: Path, repeat: int) -> tuple[float, float]:
    """Median wall and CPU (user + system, forks included) seconds of ``render.yml``."""
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS), ANSIBLE_NOCOLOR="1")
    binary = Path(sys.executable).parent / "ansible-playbook"
    times, cpus = [], []
    for _run in range(repeat):
        start, cpu = time.perf_counter(), _children_cpu()
        subprocess.run([str(binary), "-i", str(inventory), str(ROOT / "playbooks" / "render.yml"),
                        "-e", f"vllm_render_dir={out}"], check=True, env=env, capture_output=True)
        times.append(time.perf_counter() - start)
        cpus.append(_children_cpu() - cpu)
    return statistics.median(times), statistics.median(cpus)


#: inventory size -> (row label, generator)
FLEETS = {
    1: ("1 host", fleet_1),
    64: ("64 hosts", fleet_64),
    1024: ("1024 hosts", fleet_1024),
}


def _sizes(text: str) -> list[int]:
    sizes = [int(part) for part in text.split(",") if part.strip()]
    unknown = sorted(set(sizes) - set(FLEETS))
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown size(s) {unknown}; choose from {sorted(FLEETS)}")
    return sizes


def report(rows: dict[int, tuple]) -> None:
    """The table, then each target line whose inventories were measured."""
    print(f"{'inventory':<10} {'hosts':>5} {'files':>6} {'core (s)':>9} {'playbook (s)':>13} {'playbook CPU (s)':>17}")
    for label, hosts, files, core, playbook, cpu in rows.values():
        print(f"{label:<10} {hosts:>5} {files:>6} {core:>9.3f} {playbook:>13.3f} {cpu:>17.3f}")
    if 64 in rows:
        many = rows[64]
        line = f"64-host playbook: {many[4]:.2f} s (target < 10 s)"
        if 1 in rows:
            line += f"; ratio to 1 host: {many[4] / rows[1][4]:.2f}x (target <= 3x)"
        print(line)
        if 1 in rows:
            print(f"core only: {many[3]:.3f} s vs {rows[1][3]:.3f} s ({many[3] / rows[1][3]:.1f}x)")
    if 1024 in rows:
        print(f"1,024-host playbook: {rows[1024][4]:.2f} s (target < 10 s), {rows[1024][5]:.2f} s CPU; "
              f"core only: {rows[1024][3]:.3f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (median is printed)")
    parser.add_argument("--keep", type=Path, help="write inventories and renders here instead of a temp dir")
    parser.add_argument("--sizes", type=_sizes, default=sorted(FLEETS),
                        help=f"comma-separated inventory sizes to measure (default: all of {sorted(FLEETS)})")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="vllm-render-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = {}
    for size in args.sizes:
        label, generate = FLEETS[size]
        doc = generate()
        slug = label.replace(" ", "-")
        inventory = work / f"{slug}.yml"
        inventory.write_text(yaml.safe_dump(doc, sort_keys=False))
        core, files = time_core(doc, args.repeat)
        playbook, cpu = time_playbook(inventory, work / f"render-{slug}", args.repeat)
        rows[size] = (label, count_hosts(doc), files, core, playbook, cpu)
    report(rows)
    print(f"inventories and renders: {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
