"""README.md works as written: its commands run from a copy of this checkout, its layout table is true.

The fenced ``sh`` blocks run in order, each in its own ``bash -eu -o pipefail``, from the root
of a copy of the working tree (git's tracked files and untracked ones it does not ignore), as a
reader in a new shell would: no ``ANSIBLE_*`` or ``VIRTUAL_ENV`` in the environment and the
checkout's ``.venv/bin`` not on ``PATH``. ``.venv``, ``.venv-demo`` (when made) and ``.cache`` are
linked from the checkout, so ``make`` finds the venvs up to date and the ``ansible`` bundle wheel
downloaded, as in a clone where they were made before. A ``yaml`` block whose first line is ``# <relative path>`` is
saved at that path first: the README tells the reader to save it.

A block that cannot run here (it needs root, real hosts or the network) starts with the line
``# not run by tests/unit/test_readme.py: <why>``; the reason is required. tests/unit/test_install.py
runs the blocks of README.md and docs/ from an installed collection and has its own marker line
(tests/unit/doc_examples.py); a block may start with both.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from doc_examples import skip_reasons

REPO = Path(__file__).resolve().parents[2]
THIS_TEST = "tests/unit/test_readme.py"
SKIP_MARKER = f"# not run by {THIS_TEST}:"
FENCE = re.compile(r"^```([\w-]*)[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
SAVED_FILE = re.compile(r"#\s*([\w./-]+\.ya?ml)\s*$")
# Documents whose marked blocks are checked for a reason (README.md's others also run).
MARKED_DOCS = ("README.md",)


@dataclass(frozen=True)
class Block:
    lang: str
    body: str
    line: int

    @property
    def first_line(self) -> str:
        return self.body.split("\n", 1)[0].strip()

    @property
    def skip_reason(self) -> str | None:
        """The reason after the skip marker, '' when the marker has none, None when unmarked."""
        return skip_reasons(self.body).get(THIS_TEST)

    @property
    def saved_as(self) -> str | None:
        match = SAVED_FILE.fullmatch(self.first_line) if self.lang in ("yaml", "yml") else None
        return match.group(1) if match else None


def fenced_blocks(text: str) -> list[Block]:
    return [Block(m.group(1), m.group(2), text.count("\n", 0, m.start()) + 1) for m in FENCE.finditer(text)]


def marker_problems(text: str, where: str) -> list[str]:
    return [f"{where}:{b.line}: the skip marker needs a reason" for b in fenced_blocks(text)
            if b.skip_reason == ""]


def layout_paths(readme: str) -> list[str]:
    """The backticked paths of the first column of the README's "Layout" table."""
    section = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    paths = []
    for row in section.splitlines():
        cells = row.split("|")
        if len(cells) > 2 and not set(cells[1].strip()) <= set("-"):
            paths += re.findall(r"`([^`]+)`", cells[1])
    return paths


def test_fenced_blocks_and_markers():
    text = (
        "intro\n```sh\nmake demo\n```\n"
        f"```sh\n{SKIP_MARKER} needs root\nmake test\n```\n"
        f"```sh\n{SKIP_MARKER}\nmake test\n```\n"
        "```yaml\n# inventory.yml\nall: {}\n```\n"
        "```yaml\n- ansible.builtin.debug: {}\n```\n"
    )
    blocks = fenced_blocks(text)
    assert [(b.lang, b.line) for b in blocks] == [("sh", 2), ("sh", 5), ("sh", 9), ("yaml", 13), ("yaml", 17)]
    assert [b.skip_reason for b in blocks[:3]] == [None, "needs root", ""]
    assert [b.saved_as for b in blocks] == [None, None, None, "inventory.yml", None]
    assert marker_problems(text, "X.md") == ["X.md:9: the skip marker needs a reason"]


@pytest.mark.parametrize("doc", MARKED_DOCS)
def test_skip_markers_give_a_reason(doc):
    assert marker_problems((REPO / doc).read_text(encoding="utf-8"), doc) == []


def test_readme_layout_names_only_paths_that_exist():
    paths = layout_paths((REPO / "README.md").read_text(encoding="utf-8"))
    assert "plugins/plugin_utils/" in paths and "galaxy.yml" in paths, paths
    missing = [p for p in paths if not (REPO / p).exists()]
    assert not missing, f"README.md's Layout table names paths that do not exist: {missing}"


def test_layout_check_catches_a_missing_path():
    readme = "## Layout\n\n| Path | Contents |\n| --- | --- |\n| `plugins/lookup/`, `roles/` | x |\n\n## Next\n"
    assert layout_paths(readme) == ["plugins/lookup/", "roles/"]
    assert not (REPO / "plugins" / "lookup").exists()


def _copy_working_tree(dest: Path) -> None:
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout
    for rel in filter(None, listed.split("\0")):
        source = REPO / rel
        if not source.is_file() or source.is_symlink():
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    for made in (".venv", ".venv-demo", ".cache"):
        if (REPO / made).exists():
            (dest / made).symlink_to(REPO / made, target_is_directory=True)


def _reader_env() -> dict[str, str]:
    venv_bins = {str(REPO / ".venv" / "bin"), str((REPO / ".venv" / "bin").resolve())}
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ANSIBLE_", "VIRTUAL_ENV", "PYTHON", "PYTEST_", "MAKE", "MFLAGS"))}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and p not in venv_bins)
    return env


@pytest.mark.slow
def test_readme_commands_run_as_written(tmp_path):
    if not (REPO / ".git").exists() or shutil.which("git") is None:
        pytest.skip("needs a git checkout (the copy is made from git's file list)")
    if not (REPO / ".venv" / "bin" / "python").exists():
        pytest.fail("no .venv in the checkout: run `make venv` first")
    checkout = tmp_path / "checkout"
    _copy_working_tree(checkout)
    env = _reader_env()
    ran = []
    for block in fenced_blocks((REPO / "README.md").read_text(encoding="utf-8")):
        if block.saved_as:
            (checkout / block.saved_as).write_text(block.body, encoding="utf-8")
        if block.lang != "sh" or block.skip_reason is not None:
            continue
        proc = subprocess.run(["bash", "-eu", "-o", "pipefail", "-c", block.body], cwd=checkout, env=env,
                              capture_output=True, text=True, check=False, timeout=600)
        assert proc.returncode == 0, (
            f"README.md:{block.line}: exited {proc.returncode}\n{block.body}\n"
            f"--- stdout (tail)\n{proc.stdout[-4000:]}\n--- stderr (tail)\n{proc.stderr[-4000:]}"
        )
        ran.append(block.line)
    assert len(ran) >= 2, f"only the blocks at lines {ran} ran: README.md should show runnable commands"
    # The "Using it" block rendered the inventory the README saved, and printed its plan.
    plan = (checkout / "out" / "plan" / "PLAN.md").read_text(encoding="utf-8")
    assert "## Deployment `glm_tp_pp` (group `glm_tp_pp`)" in plan, plan[:2000]
