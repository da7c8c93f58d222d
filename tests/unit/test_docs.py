"""The docs agree with the code and with each other.

- How long `make test`, `make infra` and the CI run take is written in one place, docs/testing.md's
  "Measured timings"; any other page links there instead of repeating a figure.
- docs/install.md quotes the error a controller without pydantic prints, as the code words it, and
  names every shipped playbook by FQCN.
- docs/plan.md's output list covers every file the renderer writes for the example inventories.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _render
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._requirements import missing_requirement
from fleets import example_fleet

REPO = Path(__file__).resolve().parents[2]
TIMINGS_DOC = "docs/testing.md"
TIMINGS_SECTION = "## Measured timings"

# A unit of text about these is about how long make test / make infra take.
SUBJECT = re.compile(r"make (?:--keep-going )?(?:test|infra|integration|static)\b|\.ci/run|\bCI run", re.I)
DURATION = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)?(?:\s*[-–]\s*\d+(?:[.,]\d+)?)?\s*(?:min|minutes?|s|seconds?|h|hours?)\b")
# Durations that are settings, not how long something takes: (text around the figure, why).
SETTINGS = ((re.compile(r"started 20 s\s+apart"), "the lanes' start stagger (tests/infra/integration.sh)"),)
FENCE = re.compile(r"^```([\w-]*)[ \t]*\n.*?^```[ \t]*$", re.M | re.S)
# Fenced blocks that show program output (no language, text, console, json): example output, not claims.
OUTPUT_LANGS = ("", "text", "console", "json")


def _docs() -> list[str]:
    return ["README.md", *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").rglob("*.md"))]


def _units(text: str) -> list[str]:
    """A section whose heading names the subject is one unit; elsewhere each paragraph, list item and table row."""
    units = []
    text = FENCE.sub(lambda m: "" if m.group(1) in OUTPUT_LANGS else m.group(0), text)
    for section in re.split(r"(?m)^(?=#{1,6} )", text):
        heading = section.split("\n", 1)[0]
        if heading.startswith("#") and SUBJECT.search(heading):
            units.append(section)
            continue
        for paragraph in re.split(r"\n\s*\n", section):
            units += re.split(r"(?m)^(?=\s*(?:[-*] |\| |\d+\. ))", paragraph)
    return units


def stray_timings(text: str, where: str) -> list[str]:
    """Each duration in a unit of TEXT about make test / make infra / CI, as 'WHERE: ...context...'."""
    found = []
    for unit in _units(text):
        if not SUBJECT.search(unit):
            continue
        for match in DURATION.finditer(unit):
            context = unit[max(0, match.start() - 40):match.end() + 20]
            if any(pattern.search(unit[max(0, match.start() - 20):match.end() + 20]) for pattern, _why in SETTINGS):
                continue
            found.append(f"{where}: ...{' '.join(context.split())}...")
    return found


def _without_timings_section(text: str) -> str:
    start = text.index(TIMINGS_SECTION)
    end = text.find("\n## ", start + len(TIMINGS_SECTION))
    return text[:start] + (text[end:] if end >= 0 else "")


def test_timing_figures_live_in_one_place():
    stray = []
    for doc in _docs():
        text = (REPO / doc).read_text(encoding="utf-8")
        if doc == TIMINGS_DOC:
            text = _without_timings_section(text)
        stray += stray_timings(text, doc)
    assert not stray, (f"durations of make test / make infra outside {TIMINGS_DOC} '{TIMINGS_SECTION}' "
                       f"(link there instead): {stray}")
    source = (REPO / TIMINGS_DOC).read_text(encoding="utf-8")
    assert stray_timings(source, TIMINGS_DOC), "the source section holds no make test / make infra figure"


def test_timing_check_catches_a_repeated_figure():
    text = ("## Quick start\n\n```sh\nmake infra   # images (2-3 min cold, ~3 s warm)\n```\n\n"
            "`make test` takes about 60-70 min.\n\nAn engine starts in 50-150 s.\n\n"
            "### `make test`\n\n```\n==> still running: integration (600 s)\n```\n\nlanes started 20 s\napart\n")
    assert [s.split(": ", 1)[1] for s in stray_timings(text, "X.md")] == [
        "...```sh make infra # images (2-3 min cold, ~3 s warm) ``...",
        "...h make infra # images (2-3 min cold, ~3 s warm) ```...",
        "...`make test` takes about 60-70 min....",
    ]


def test_install_md_quotes_the_missing_pydantic_error():
    """What vllm_fleet.recipes.render's first task prints without pydantic, with <python> for the interpreter."""
    error = ModuleNotFoundError("No module named 'pydantic'", name="pydantic")
    message = missing_requirement("vllm_fleet.recipes.vllm_plan", error).replace(sys.executable, "<python>")
    install = " ".join((REPO / "docs" / "install.md").read_text(encoding="utf-8").split())
    assert f"`{message}`" in install, message


def test_install_md_names_every_playbook_by_fqcn():
    install = (REPO / "docs" / "install.md").read_text(encoding="utf-8")
    listed = re.search(r"Playbooks are addressed by\s+FQCN:(.*?)\.\s*$", install, re.M | re.S)
    assert listed, "docs/install.md lost its list of playbook FQCNs"
    names = {name.rsplit(".", 1)[-1] for name in re.findall(r"`([\w.]+)`", listed.group(1))}
    shipped = {p.stem for p in (REPO / "playbooks").glob("*.yml") if not p.stem.startswith("_")}
    assert names == shipped, f"missing {sorted(shipped - names)}, not shipped {sorted(names - shipped)}"


def _output_patterns() -> list[re.Pattern]:
    plan_md = (REPO / "docs" / "plan.md").read_text(encoding="utf-8")
    block = plan_md.split("## Output", 1)[1].split("```", 2)[1]
    patterns = []
    for line in block.strip().splitlines():
        path = line.split()[0]
        patterns.append(re.compile("".join("[^/]+" if part.startswith("<") else re.escape(part)
                                           for part in re.split(r"(<[^>]+>)", path)) + "$"))
    return patterns


@pytest.mark.parametrize("example", ["single_node_tp", "multi_node_tp_pp", "pd_cluster"])
def test_plan_md_lists_every_rendered_file(example):
    patterns = _output_patterns()
    assert any(p.pattern.endswith(r"\.service\.json$") for p in patterns)
    rendered = _render.render(example_fleet(example))
    unlisted = sorted(path for path in rendered if not any(p.match(path) for p in patterns))
    assert not unlisted, f"docs/plan.md's Output list lacks {unlisted}"
