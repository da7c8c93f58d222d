"""benchmarks/resolve.py: the floor it prints and the node harness that times upstream's JavaScript.

Upstream's ``command-synthesis.js`` is not shipped, so the harness is driven here by a stand-in
module with the same four exports; it refuses any call that is not shaped like the corpus
generator's (13 positional ``resolveCommand`` arguments, one ``{argv, env, meta, port}`` object
per docker argv), so the error count shows whether the harness replays cases as recorded.
"""

from __future__ import annotations

import gzip
import importlib.util
import itertools
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))
_SPEC = importlib.util.spec_from_file_location("resolve_benchmark", REPO / "benchmarks" / "resolve.py")
B = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(B)

STAND_IN = """\
export function resolveCommand(...args) {
  if (args.length !== 13 || typeof args[0] !== "object" || !args[5] || !args[6].hardware_profiles) {
    throw new Error(`unexpected call with ${args.length} arguments`);
  }
  return { command: "vllm serve m", argv: ["vllm", "serve", "m"], env: { A: "1" } };
}
export function computeDockerMeta(recipe, variant, profile, hardware) {
  if (typeof hardware !== "string") throw new Error("no hardware id");
  return { image: "img", gpuFlags: "--gpus all" };
}
export function buildDockerArgv({ argv, env, meta, port }) {
  if (!Array.isArray(argv) || !env || !meta || port !== 8000) throw new Error("bad docker argv call");
  return ["docker", "run", meta.image, ...argv];
}
export function buildDockerRun({ command, image, port }) {
  return `docker run -p ${port}:${port} ${image} ${command}`;
}
"""


def test_floor_rebuilds_every_expected_output_as_new_containers():
    cases = [{"output": {"argv": ["a"], "env": {"K": "v"}}, "docker": {"processes": {"single": {"argv": []}}}},
             {"output": None, "expect": "error"}]
    assert B._rebuilt(cases[0]["output"]) == cases[0]["output"]
    assert B._rebuilt(cases[0]["output"])["argv"] is not cases[0]["output"]["argv"]
    assert B.floor(cases, 2) >= 0.0


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_reference_replays_corpus_cases_through_the_four_upstream_functions(shared_dir, tmp_path, capsys):
    corpus = shared_dir / "upstream" / "conformance" / "cases.jsonl.gz"
    few = tmp_path / "cases.jsonl.gz"
    with gzip.open(corpus, "rt", encoding="utf-8") as src:
        single = [line for line in itertools.islice(src, 400) if '"deployType":"single_node"' in line]
    assert len(single) > 5
    with gzip.open(few, "wt", encoding="utf-8") as dst:
        dst.writelines(single)
    module = tmp_path / "command-synthesis.js"
    module.write_text(STAND_IN, encoding="utf-8")
    replay = B.CorpusReplay(shared_dir / "upstream" / "recipes")
    best = B.reference(module, replay, few, 2)
    line = capsys.readouterr().out.strip()
    assert line.startswith("reference:") and line.endswith("; 0 errors)"), line
    assert "(best of 2: " in line and best is not None and f"reference:  {best:.2f} s wall" in line


def test_reference_is_skipped_with_a_reason_without_the_upstream_file(shared_dir, tmp_path, capsys):
    replay = B.CorpusReplay(shared_dir / "upstream" / "recipes")
    assert B.reference(tmp_path / "missing.js", replay, tmp_path / "cases.jsonl.gz", 1) is None
    assert "skipped" in capsys.readouterr().out


def test_ratios_state_the_target_against_the_javascript():
    line = B.ratios(warm=1.6, cold=2.0, least=0.64, upstream=0.8)
    assert line == "ratio:      2.00x the JavaScript warm, 2.50x cold (the floor alone is 0.80x)"
