"""PLAN.md's Mermaid diagrams, parsed and drawn by the real Mermaid parser.

mmdc (@mermaid-js/mermaid-cli, pinned in tests/infra/mermaid-cli/, installed by
tests/infra/mermaid.sh: `make unit` runs it, and this test runs it when mmdc is missing) renders
every diagram of the PLAN.md of the three example plans, two 64-host plans and a plan whose host
names are Mermaid, HTML and Markdown syntax, in one run (about 10 s). It drives Debian's chromium
(tests/infra/bindep.txt, profile static) instead of the browser puppeteer would download.
Without node and npm, or without chromium, the test is skipped and says why.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _render as R
from fleets import SEED, example_fleet, fleets_of_64_hosts, seed_fleet
from mermaid_shape import diagrams

REPO = Path(__file__).resolve().parents[2]
MERMAID_SH = REPO / "tests" / "infra" / "mermaid.sh"
EXAMPLES = ("single_node_tp", "multi_node_tp_pp", "pd_cluster")
#: Host names the inventory accepts that are syntax in Mermaid, HTML or Markdown.
HOSTILE = {"<b>p&amp;#35;<i>x": "prefill", "d%%{init:{}}%%;end": "decode", "r]-->n1|x|[y]:::z": "router"}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def mmdc(tmp_path_factory) -> list[str]:
    """mmdc's command line (with a puppeteer config for Debian's chromium), or a skip that says why."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node/npm not installed: PLAN.md's Mermaid diagrams were NOT parsed by mmdc "
                    "(install node and npm to run this test)")
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("chromium not installed: PLAN.md's Mermaid diagrams were NOT parsed by mmdc "
                    "(`make test-packages` installs it, tests/infra/bindep.txt)")
    found = subprocess.run([str(MERMAID_SH), "path"], capture_output=True, text=True, timeout=900, check=False)
    assert found.returncode == 0 and found.stdout.strip(), f"{MERMAID_SH} path failed:\n{found.stderr}"
    config = tmp_path_factory.mktemp("puppeteer") / "puppeteer.json"
    config.write_text(json.dumps({"executablePath": chromium,
                                  "args": ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]}))
    return [found.stdout.strip(), "--quiet", "--puppeteerConfigFile", str(config)]


def plans() -> dict[str, str]:
    """name -> PLAN.md of each plan this test draws."""
    fleets = {name: example_fleet(name) for name in EXAMPLES}
    fleets.update(fleets_of_64_hosts())
    fleets["hostile_names"] = seed_fleet(dict(SEED, strategy="pd_cluster"), list(HOSTILE),
                                         host_vars={h: {"vllm_pd_role": r} for h, r in HOSTILE.items()})
    return {name: R.render_plan_md(fleet) for name, fleet in fleets.items()}


def render(mmdc: list[str], markdown: str, out: Path) -> list[str]:
    """mmdc on one Markdown file: the SVG of each ```mermaid block, in order (failing on a parse error)."""
    out.mkdir()
    source = out / "plans.md"
    source.write_text(markdown, encoding="utf-8")
    done = subprocess.run([*mmdc, "--input", str(source), "--output", str(out / "drawn.md")],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, f"mmdc failed (exit {done.returncode}):\n{done.stdout}\n{done.stderr[-6000:]}"
    svgs = sorted(out.glob("drawn-*.svg"), key=lambda p: int(re.findall(r"[0-9]+", p.name)[-1]))
    return [svg.read_text(encoding="utf-8") for svg in svgs]


def test_every_diagram_of_the_example_and_large_plans_parses(mmdc, tmp_path):
    plan_mds = plans()
    blocks = {name: diagrams(text) for name, text in plan_mds.items()}
    assert all(len(found) == 1 for found in blocks.values()), blocks
    svgs = render(mmdc, "\n".join(plan_mds.values()), tmp_path / "all")
    assert len(svgs) == len(plan_mds)
    drawn = dict(zip(plan_mds, svgs, strict=True))
    assert "h200-p1 · 10.20.1.11" in drawn["pd_cluster"] and "KV cache via NIXL" in drawn["pd_cluster"]
    assert "60 hosts: gpu-01, gpu-02, …, gpu-63" in drawn["kv_4x16"]
    hostile = drawn["hostile_names"]
    shown = re.findall(r"<p>(.*?)</p>", hostile)  # the labels, as the SVG holds them
    assert "&lt;b&gt;p&amp;amp;#35;&lt;i&gt;x" in hostile and "<b>" not in hostile, shown
    assert "d%%{init:{}}%%;end" in hostile and "r]--&gt;n1|x|[y]:::z" in hostile, shown
    # front door, router, prefill, decode: no node made of a name
    assert len(re.findall(r'class="node default', hostile)) == 4


def test_mmdc_fails_on_a_broken_diagram(mmdc, tmp_path):
    broken = '```mermaid\nflowchart LR\n  n1["a"b"]\n```\n'
    with pytest.raises(AssertionError, match="mmdc failed"):
        render(mmdc, broken, tmp_path / "broken")
