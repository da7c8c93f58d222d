#!/usr/bin/env python
"""`make demo`: the seed recipe, resolved and then rendered for three example inventories.

1. Every deployment the recipes site publishes for GLM-5.3-Flash on its
   default hardware, as the processes our engine resolves, each with its
   command (placeholders such as $HEAD_IP are still open here).
2. The fleet plan for each inventory in playbooks/examples/ (one H200 node,
   two H200 nodes with TP+PP, a prefill/decode pair with a router host),
   rendered offline by playbooks/render.yml into out/demo/<example>/, and its
   PLAN.md printed.
3. Where the files are, and the next command to run.

`make demo` runs it in .venv-demo: requirements.txt and ansible-core only (tools/demo-requirements.txt).
`--engine-only` stops after part 1, `--plans-only` starts at part 2 (`make demo` runs both, installing
ansible-core between them); `--verbose` adds each process's environment.
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
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._schema import (  # noqa: E402
    KV_STORE_DEPLOY_TYPE,
    SERVING_DEPLOY_TYPES,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._selection import (  # noqa: E402
    default_selection,
    published_renderings,
)

SEED = ROOT / "recipes" / "models" / "zai-org" / "GLM-5.3-Flash.yaml"
EXAMPLES = ("single_node_tp", "multi_node_tp_pp", "pd_cluster")


NOTATION = f"""\
How to read part 1:
  -- KEY (recommended): STRATEGY  one deployment the recipes site publishes; (recommended) is its default
     nodes=N pd_nodes={{...}} kv_offload=K  the selection: hosts, hosts per prefill/decode pool, KV-cache store
     deploy_type=T  how it is laid out on hosts ({', '.join((*SERVING_DEPLOY_TYPES, KV_STORE_DEPLOY_TYPE))})
  NAME [ROLE, group G, rank R, port P]  one process: a restart group starts and stops together,
     rank is its place in that group, port its HTTP port when it has one
  $ command  what that process runs; $HEAD_IP, $IFACE_NAME ... are filled from the inventory in part 2"""


def describe(selection) -> str:
    parts = [f"nodes={selection.node_count}"]
    if selection.pd_nodes:
        parts.append(f"pd_nodes={selection.pd_nodes}")
    if selection.kv_offload:
        parts.append(f"kv_offload={selection.kv_offload}")
    return " ".join(parts)


def one_line(command: str) -> str:
    """The command as one line (the engine writes long ones with backslash continuations)."""
    return " ".join(part.strip().rstrip("\\").strip() for part in command.splitlines() if part.strip())


def show_engine(verbose: bool, width: int) -> None:
    catalog = load_catalog()
    recipe = load_recipe(SEED, catalog=catalog)
    default = default_selection(recipe.data, catalog.strategies, catalog.taxonomy)
    print(f"== 1. {recipe.hf_id}: every deployment the recipes site publishes on its default hardware "
          f"({default.hardware}, variant {default.variant}, features {', '.join(default.features)})\n")
    print(NOTATION, flush=True)
    renderings = published_renderings(recipe.data, default.variant, default.hardware,
                                      catalog.strategies, catalog.taxonomy)
    for rendering in renderings:
        resolution = resolve(recipe, rendering.selection, catalog)
        marker = " (recommended)" if rendering.recommended else ""
        print(f"\n-- {rendering.key}{marker}: {resolution.selection.strategy}  {describe(resolution.selection)}  "
              f"deploy_type={resolution.deploy_type}  image={resolution.image}")
        for proc in resolution.processes:
            port = f", port {proc.port}" if proc.port else ""
            print(f"   {proc.name} [{proc.role}, group {proc.group}, rank {proc.rank}{port}]")
            if verbose and proc.env:
                env = " ".join(f"{k}={v}" for k, v in proc.env.items())
                print(textwrap.indent(textwrap.fill(env, width - 11), "     env "))
            print(textwrap.fill(one_line(proc.command), width, initial_indent="     $ ", subsequent_indent="         ",
                                break_on_hyphens=False, break_long_words=False))


def show_plans(out_dir: Path) -> int:
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".collections"), ANSIBLE_NOCOLOR="1")
    playbook = Path(sys.executable).parent / "ansible-playbook"
    for number, example in enumerate(EXAMPLES, start=2):
        dest = out_dir / example
        inventory = ROOT / "playbooks" / "examples" / example / "inventory.yml"
        print(f"\n== 2.{number - 1}. {example}: ansible-playbook -i {inventory.relative_to(ROOT)} playbooks/render.yml "
              f"-e vllm_render_dir={_shown(dest)}", flush=True)
        proc = subprocess.run([str(playbook), "-i", str(inventory), str(ROOT / "playbooks" / "render.yml"),
                               "-e", f"vllm_render_dir={dest}"], cwd=ROOT, env=env, capture_output=True,
                              text=True, check=False)
        if proc.returncode != 0:
            print(proc.stdout[-4000:] + proc.stderr[-2000:])
            return proc.returncode
        print((dest / "PLAN.md").read_text())
    return 0


def _shown(path: Path) -> str:
    """PATH relative to the checkout when it is inside it."""
    return os.path.relpath(path, ROOT) if path.is_relative_to(ROOT) else str(path)


def show_next(out_dir: Path) -> None:
    venv = _shown(Path(sys.prefix))
    last = _shown(out_dir / EXAMPLES[-1])
    print(f"""== 3. Where the files are, and what to run next

Files: {_shown(out_dir)}/<example>/ for each of {', '.join(EXAMPLES)}:
  PLAN.md     the plan for review. It opens each deployment with a Mermaid topology diagram,
              which GitHub and GitLab render in review: commit it, or open
              {last}/PLAN.md in a Markdown viewer with Mermaid.
  plan.json   the same plan, machine-readable
  <deployment>/<host>/  each host's systemd units (and their .service.json), env files and configs
  monitoring/ Prometheus targets and alert rules (docs/plan.md lists every file)

Next: render a fleet of your own. Save an inventory as README.md's "Using it" shows, then
  . {venv}/bin/activate
  ansible-playbook -i inventory.yml playbooks/render.yml -e vllm_render_dir=out/plan
  cat out/plan/PLAN.md
Deploying it (playbooks/deploy.yml, --check --diff first) is docs/deploy.md.""")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parts = parser.add_mutually_exclusive_group()
    parts.add_argument("--engine-only", action="store_true", help="part 1 only (needs no ansible-core)")
    parts.add_argument("--plans-only", action="store_true", help="parts 2 and 3 only")
    parser.add_argument("--verbose", action="store_true", help="also print each process's environment")
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "demo", help="where the example plans go")
    args = parser.parse_args()
    width = min(shutil.get_terminal_size((110, 20)).columns, 110)
    if not args.plans_only:
        show_engine(args.verbose, width)
    if args.engine_only:
        return 0
    out = args.out.resolve()
    status = show_plans(out)
    if status == 0:
        show_next(out)
    return status


if __name__ == "__main__":
    sys.exit(main())
