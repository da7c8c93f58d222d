#!/usr/bin/env python
"""`make demo`: the seed recipe, resolved and then rendered for three example inventories.

1. Every deployment the recipes site publishes for GLM-5.3-Flash on its
   default hardware, as the processes our engine resolves (placeholders such
   as $HEAD_IP are still open here).
2. The fleet plan for each inventory in playbooks/examples/ (one H200 node,
   two H200 nodes with TP+PP, a prefill/decode pair with a router host),
   rendered offline by playbooks/render.yml into out/demo/<example>/, and its
   PLAN.md printed.

`--engine-only` stops after part 1; `--verbose` prints every command in full.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

# conformance puts the collection on sys.path when imported.
import conformance  # noqa: E402,F401  pylint: disable=unused-import

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._catalog import load_catalog  # noqa: E402
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._engine import resolve  # noqa: E402
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._loader import load_recipe  # noqa: E402
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._selection import (  # noqa: E402
    default_selection,
    published_renderings,
)

SEED = ROOT / "recipes" / "models" / "zai-org" / "GLM-5.3-Flash.yaml"
EXAMPLES = ("single_node_tp", "multi_node_tp_pp", "pd_cluster")


def describe(selection) -> str:
    parts = [f"strategy={selection.strategy}", f"nodes={selection.node_count}"]
    if selection.pd_nodes:
        parts.append(f"pd_nodes={selection.pd_nodes}")
    if selection.kv_offload:
        parts.append(f"kv_offload={selection.kv_offload}")
    return " ".join(parts)


def show_engine(verbose: bool, width: int) -> None:
    catalog = load_catalog()
    recipe = load_recipe(SEED, catalog=catalog)
    default = default_selection(recipe.data, catalog.strategies, catalog.taxonomy)
    print(f"== 1. {recipe.hf_id}: default hardware {default.hardware}, variant {default.variant}, "
          f"features {', '.join(default.features)}")
    renderings = published_renderings(recipe.data, default.variant, default.hardware,
                                      catalog.strategies, catalog.taxonomy)
    for rendering in renderings:
        resolution = resolve(recipe, rendering.selection, catalog)
        marker = "  (recommended)" if rendering.recommended else ""
        print(f"\n-- {rendering.key}{marker}: {describe(resolution.selection)}  "
              f"deploy_type={resolution.deploy_type}  image={resolution.image}")
        for proc in resolution.processes:
            port = f":{proc.port}" if proc.port else ""
            print(f"   {proc.name} [{proc.role}, group {proc.group}, rank {proc.rank}{port}]")
            if not verbose:
                continue
            if proc.env:
                env = " ".join(f"{k}={v}" for k, v in proc.env.items())
                print(textwrap.indent(textwrap.fill(env, width - 8), "      env "))
            for line in proc.command.splitlines():
                print("      " + line)


def show_plans(out_dir: Path) -> int:
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".collections"), ANSIBLE_NOCOLOR="1")
    playbook = Path(sys.executable).parent / "ansible-playbook"
    for number, example in enumerate(EXAMPLES, start=2):
        dest = out_dir / example
        inventory = ROOT / "playbooks" / "examples" / example / "inventory.yml"
        print(f"\n== {number}. {example}: ansible-playbook -i {inventory.relative_to(ROOT)} playbooks/render.yml "
              f"-e vllm_render_dir={os.path.relpath(dest, ROOT)}")
        proc = subprocess.run([str(playbook), "-i", str(inventory), str(ROOT / "playbooks" / "render.yml"),
                               "-e", f"vllm_render_dir={dest}"], cwd=ROOT, env=env, capture_output=True,
                              text=True, check=False)
        if proc.returncode != 0:
            print(proc.stdout[-4000:] + proc.stderr[-2000:])
            return proc.returncode
        print((dest / "PLAN.md").read_text())
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine-only", action="store_true", help="print the engine part only")
    parser.add_argument("--verbose", action="store_true", help="print every resolved command in full")
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "demo", help="where the example plans go")
    args = parser.parse_args()
    width = min(shutil.get_terminal_size((110, 20)).columns, 110)
    show_engine(args.verbose, width)
    if args.engine_only:
        return 0
    return show_plans(args.out.resolve())


if __name__ == "__main__":
    sys.exit(main())
