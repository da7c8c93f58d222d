#!/usr/bin/env python
"""`make demo`: the seed recipe, resolved for its default hardware and every strategy it offers.

Prints each deployment the recipes site would publish for GLM-5.3-Flash on its
default hardware, as the processes our engine resolves: which process, its
rank, port, image and argv (placeholders such as $HEAD_IP are filled later, by
placement onto an inventory).
"""

from __future__ import annotations

import shutil
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


def describe(selection) -> str:
    parts = [f"strategy={selection.strategy}", f"nodes={selection.node_count}"]
    if selection.pd_nodes:
        parts.append(f"pd_nodes={selection.pd_nodes}")
    if selection.kv_offload:
        parts.append(f"kv_offload={selection.kv_offload}")
    return " ".join(parts)


def main() -> int:
    width = min(shutil.get_terminal_size((110, 20)).columns, 110)
    catalog = load_catalog()
    recipe = load_recipe(SEED, catalog=catalog)
    default = default_selection(recipe.data, catalog.strategies, catalog.taxonomy)
    print(f"{recipe.hf_id}: default hardware {default.hardware}, variant {default.variant}, "
          f"features {', '.join(default.features)}")
    renderings = published_renderings(recipe.data, default.variant, default.hardware,
                                      catalog.strategies, catalog.taxonomy)
    for rendering in renderings:
        resolution = resolve(recipe, rendering.selection, catalog)
        marker = "  (recommended)" if rendering.recommended else ""
        print("\n" + "=" * width)
        print(f"{rendering.key}{marker}: {describe(resolution.selection)}  deploy_type={resolution.deploy_type}")
        print(f"image {resolution.image}")
        print("=" * width)
        for proc in resolution.processes:
            port = f":{proc.port}" if proc.port else ""
            print(f"- {proc.name} [{proc.role}, group {proc.group}, rank {proc.rank}{port}]")
            if proc.env:
                env = " ".join(f"{k}={v}" for k, v in proc.env.items())
                print(textwrap.indent(textwrap.fill(env, width - 6), "    env "))
            for line in proc.command.splitlines():
                print("    " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
