#!/usr/bin/env python
"""Check our recipe engine against the recipes site's own command synthesis.

Two modes:

  conformance.py --recipes DIR --cases FILE.jsonl.gz
      Replay a conformance corpus (inputs plus the exact expected output of
      upstream's synthesis) against the recipes and catalog under DIR.

  conformance.py --published FILE.json [--published FILE2.json ...]
      Resolve a published recipe's default selection with our catalog and
      compare it with the document's own ``recommended_command``. Argv, env
      and docker argv compare exactly; command strings compare with runs of
      blanks collapsed (published documents may be stored that way).

Prints counts per kind, then ``N passed, N failed``; exits 1 on any failure.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
COLLECTIONS = ROOT / ".collections"


def _import_path() -> None:
    link = COLLECTIONS / "ansible_collections" / "vllm_fleet" / "recipes"
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(Path("../../.."))
    sys.path.insert(0, str(COLLECTIONS))


_import_path()

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._catalog import (  # noqa: E402
    load_catalog,
    load_upstream_catalog,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._docker import (  # noqa: E402
    docker_meta,
    docker_processes,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._documents import read_document  # noqa: E402
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._engine import resolve  # noqa: E402
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._loader import load_recipe  # noqa: E402
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._selection import (  # noqa: E402
    published_hardware,
    published_renderings,
)
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._synthesis import resolve_command  # noqa: E402

REPLAY_INPUTS = ("variant", "strategy", "hardware", "features", "advanced_args", "node_count", "pd_nodes",
                 "feature_modes", "kv_offload", "kv_instances")


def iter_cases(path: Path) -> Iterator[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as stream:
        for line in stream:
            if line.strip():
                yield json.loads(line)


def first_difference(got: Any, want: Any, where: str = "output") -> str:
    """Where two JSON values first differ, for a readable failure line."""
    if isinstance(got, dict) and isinstance(want, dict):
        for key in list(want) + [k for k in got if k not in want]:
            if key not in got or key not in want:
                return f"{where}.{key}: {'missing' if key not in got else 'unexpected'}"
            if got[key] != want[key]:
                return first_difference(got[key], want[key], f"{where}.{key}")
    if isinstance(got, list) and isinstance(want, list) and len(got) == len(want):
        for index, (a, b) in enumerate(zip(got, want, strict=True)):
            if a != b:
                return first_difference(a, b, f"{where}[{index}]")
    return f"{where}: got {json.dumps(got)[:200]}, want {json.dumps(want)[:200]}"


class CorpusReplay:
    """Replays cases against one recipes tree, loading each recipe once."""

    def __init__(self, recipes_dir: Path) -> None:
        self.root = recipes_dir
        catalog = load_upstream_catalog(recipes_dir)
        self.strategies = catalog.strategies
        self.taxonomy = catalog.taxonomy
        self.profiles = self.taxonomy.get("hardware_profiles") or {}
        self._recipes: dict[str, dict] = {}

    def recipe(self, hf_id: str) -> dict:
        if hf_id not in self._recipes:
            self._recipes[hf_id] = read_document(self.root / "models" / f"{hf_id}.yaml")
        return self._recipes[hf_id]

    def check(self, case: dict) -> str | None:
        """None when the case passes, else what differs."""
        recipe = self.recipe(case["hf_id"])
        try:
            output = resolve_command(recipe, *(case[k] for k in ("variant", "strategy", "hardware", "features")),
                                     self.strategies, self.taxonomy,
                                     *(case[k] for k in ("advanced_args", "node_count", "pd_nodes",
                                                         "feature_modes", "kv_offload", "kv_instances")))
        except Exception as exc:  # the corpus expects upstream's exceptions, whatever their type
            return None if case["expect"] == "error" else f"raised {type(exc).__name__}: {exc}"
        if case["expect"] == "error":
            return "expected an error, got a result"
        if output != case["output"]:
            return first_difference(output, case["output"])
        docker = case.get("docker")
        if docker:
            variants = recipe.get("variants") or {}
            variant = variants.get(case["variant"]) or variants.get("default") or {}
            meta = docker_meta(recipe, variant, self.profiles.get(case["hardware"]) or {}, case["hardware"])
            if meta["image"] != docker["image"]:
                return f"docker.image: got {meta['image']}, want {docker['image']}"
            processes = docker_processes(output, meta)
            if processes != docker["processes"]:
                return first_difference(processes, docker["processes"], "docker.processes")
        return None


def replay_corpus(recipes_dir: Path, cases_path: Path, verbose: int) -> tuple[int, int]:
    replay = CorpusReplay(recipes_dir)
    counts: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    shown = 0
    for case in iter_cases(cases_path):
        problem = replay.check(case)
        counts[case["kind"]][0 if problem is None else 1] += 1
        if problem is not None and shown < max(verbose * 20, 10):
            shown += 1
            print(f"FAIL {case['id']} {case['kind']} {case['hf_id']} "
                  f"{case['strategy']}@{case['hardware']}: {problem}")
    return _report(counts)


def _collapse(text: Any) -> Any:
    return re.sub(r"[ \t]+", " ", text) if isinstance(text, str) else text


def check_published(path: Path) -> list[tuple[str, str | None]]:
    """(field, problem) for every field of the document's recommended_command we compare."""
    loaded = load_recipe(path)
    rec = (loaded.published or {}).get("recommended_command")
    if not rec:
        return [("recommended_command", "the document has no recommended_command")]
    catalog = load_catalog()
    resolution = resolve(loaded, {"variant": rec.get("variant", "default"), "hardware": rec["hardware"]}, catalog)
    sel = resolution.selection
    output = resolution.output
    results: list[tuple[str, str | None]] = []

    def compare(field: str, got: Any, want: Any, collapse: bool = False) -> None:
        a, b = (_collapse(got), _collapse(want)) if collapse else (got, want)
        results.append((field, None if a == b else first_difference(a, b, field)))

    compare("strategy", sel.strategy, rec.get("strategy"))
    compare("node_count", sel.node_count, rec.get("node_count"))
    compare("deploy_type", resolution.deploy_type, rec.get("deploy_type"))
    compare("docker_image", resolution.image, rec.get("docker_image"))
    processes = docker_processes(output, resolution.docker["meta"])
    if resolution.deploy_type == "multi_node":
        pairs = {"head_argv": output["headArgv"], "worker_argvs": output["workerArgvs"],
                 "env": output["env"], "head_docker_argv": processes["head"]["argv"]}
        strings = {"head_command": output["headCommand"], "head_docker_command": processes["head"]["command"]}
    elif resolution.deploy_type == "pd_cluster":
        pairs = {"prefill.argv": output["prefill"]["argv"], "decode.argv": output["decode"]["argv"]}
        strings = {"router.command": output["router"]["command"]}
    else:
        pairs = {"argv": output["argv"], "env": output["env"], "docker_argv": processes["single"]["argv"]}
        strings = {"command": output["command"], "docker_command": processes["single"]["command"]}
    for field, got in pairs.items():
        compare(field, got, _dig(rec, field))
    for field, got in strings.items():
        compare(field, got, _dig(rec, field), collapse=True)
    renderings = published_renderings(loaded.data, sel.variant, sel.hardware, catalog.strategies, catalog.taxonomy)
    if "alternatives" in rec:
        compare("alternatives", sorted(r.key for r in renderings if not r.recommended), sorted(rec["alternatives"]))
    if "by_hardware" in rec:
        profiles = catalog.taxonomy["hardware_profiles"]
        rendered = [hw for hw in published_hardware(loaded.data, sel.variant, profiles)
                    if published_renderings(loaded.data, sel.variant, hw, catalog.strategies, catalog.taxonomy)]
        compare("by_hardware", sorted(rendered), sorted(rec["by_hardware"]))
    profile = rec.get("hardware_profile") or {}
    ours = catalog.taxonomy["hardware_profiles"].get(rec["hardware"], {})
    for key in ("brand", "generation", "gpu_count", "vram_gb"):
        if key in profile:
            compare(f"hardware_profile.{key}", ours.get(key), profile[key])
    return results


def _dig(doc: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        doc = doc.get(part) if isinstance(doc, dict) else None
    return doc


def _report(counts: dict[str, list[int]]) -> tuple[int, int]:
    width = max((len(k) for k in counts), default=4)
    for kind in sorted(counts):
        passed, failed = counts[kind]
        print(f"  {kind:<{width}}  {passed:>6} passed  {failed:>4} failed")
    passed = sum(c[0] for c in counts.values())
    failed = sum(c[1] for c in counts.values())
    print(f"{passed} passed, {failed} failed")
    return passed, failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recipes", type=Path, help="upstream-like recipes tree (taxonomy.yaml, strategies/, ...)")
    parser.add_argument("--cases", type=Path, help="conformance corpus (.jsonl or .jsonl.gz)")
    parser.add_argument("--published", type=Path, action="append", default=[],
                        help="published-JSON recipe to check against its recommended_command")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="show more failures")
    args = parser.parse_args(argv)
    if bool(args.recipes) != bool(args.cases) or not (args.cases or args.published):
        parser.error("give --recipes DIR --cases FILE, and/or --published FILE")
    failed = 0
    if args.cases:
        print(f"corpus {args.cases} against {args.recipes}")
        failed += replay_corpus(args.recipes, args.cases, args.verbose)[1]
    if args.published:
        counts: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
        for path in args.published:
            print(f"published {path}")
            for field, problem in check_published(path):
                counts[f"published:{field}"][0 if problem is None else 1] += 1
                if problem:
                    print(f"FAIL {path.name}: {problem}")
        failed += _report(counts)[1]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
