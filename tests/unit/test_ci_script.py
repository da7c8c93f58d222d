"""`.ci/run` tests the README's path: `make test` installs what it needs, `.ci/run` installs nothing.

The Debian packages of the test stages live in one list, tests/infra/bindep.txt. `make test`
installs them (tests/infra/packages.sh) before its stages start; the README names each of them;
the infrastructure scripts that can also run alone install nothing outside that list.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CI_SCRIPT = REPO / ".ci" / "run"
BINDEP = REPO / "tests" / "infra" / "bindep.txt"

# Commands that install software. A line of .ci/run that runs one of these is a package install.
INSTALLERS = re.compile(
    r"""(?x)
    \b(?:apt-get|apt|aptitude|dpkg)\b[^\n#]*\b(?:install|-i)\b   # Debian packages
    | \bpip3?\b[^\n#]*\binstall\b | -m\s+pip\b[^\n#]*\binstall\b   # Python packages
    | \b(?:npm|npx|yarn|pnpm)\b[^\n#]*\b(?:install|add|ci)\b      # Node packages
    | \b(?:curl|wget)\b                                            # downloads
    | \bmake\s+(?:venv|collections|infra|test-packages)(?![-\w])   # make test's own set-up steps
    """)


def code_lines(text: str) -> list[tuple[int, str]]:
    """(line number, code) for every line that is not a comment."""
    lines = []
    for number, line in enumerate(text.splitlines(), 1):
        code = line.split("#", 1)[0] if line.lstrip().startswith("#") else line
        if code.strip():
            lines.append((number, code))
    return lines


def installing_lines(text: str) -> list[str]:
    return ["%d: %s" % (n, code.strip()) for n, code in code_lines(text) if INSTALLERS.search(code)]


def bindep_packages() -> set[str]:
    names = set()
    for line in BINDEP.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.add(line.split()[0])
    return names


def test_ci_script_installs_nothing():
    found = installing_lines(CI_SCRIPT.read_text())
    assert not found, ".ci/run installs software; `make test` must do it itself (tests/infra/bindep.txt):\n" + \
        "\n".join(found)


@pytest.mark.parametrize("line", [
    "apt-get -q install -y shellcheck",
    '"${apt[@]}" install -y prometheus && dpkg -i x.deb',
    "python3 -m pip install bindep",
    ".venv/bin/pip install -r requirements.txt",
    "npm install -g @mermaid-js/mermaid-cli",
    "curl -fsSL https://example.invalid/x | sh",
    "make venv SHARED=../shared",
])
def test_the_check_sees_an_install(line):
    assert installing_lines("#!/bin/bash\n" + line + "\n"), line


def test_the_check_ignores_comments_and_the_test_command():
    text = ("# apt-get install shellcheck: make test does this\nmake --keep-going test SHARED=x\n"
            'log "stopping what it started (make infra-down)"\n')
    assert installing_lines(text) == []


def test_make_test_installs_the_packages_before_its_stages():
    """`make -n test` (what make would run) installs bindep.txt's packages before either stage."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    for parallel in ("1", "0"):
        out = subprocess.run(["make", "-n", "test", "TEST_PARALLEL=" + parallel], cwd=REPO, capture_output=True,
                             text=True, check=True, timeout=60).stdout
        install = out.find("tests/infra/packages.sh install static integration")
        assert install >= 0, out
        stages = [out.find(word) for word in ("parallel.sh", "in_turn.sh", "integration.sh") if word in out]
        assert stages and min(stages) > install, out


def test_readme_names_every_package_make_test_installs():
    readme = REPO.joinpath("README.md").read_text()
    section = readme.split("### `make test` changes the machine", 1)[1].split("\n## ", 1)[0]
    missing = sorted(p for p in bindep_packages() if "`%s`" % p not in section)
    assert not missing, "README's `make test` section does not name: %s" % missing


def test_infra_scripts_install_only_listed_packages():
    """dockerd.sh, registry.sh, images.sh install their own tool when run alone: from the same list."""
    listed = bindep_packages()
    for script in sorted((REPO / "tests" / "infra").glob("*.sh")):
        for _number, code in code_lines(script.read_text()):
            if not code.strip().startswith("apt_ensure "):
                continue
            words = shlex.split(code, comments=True)
            if words[:1] == ["apt_ensure"]:
                assert set(words[2:]) <= listed, (script.name, words)


def test_bindep_profiles_select_the_stages():
    beside = Path(sys.executable).parent / "bindep"
    bindep = shutil.which("bindep") or (str(beside) if beside.exists() else None)
    if bindep is None:
        pytest.skip("bindep is not installed (requirements-dev.txt)")

    def listed(*profiles: str) -> set[str]:
        out = subprocess.run([bindep, "-l", "newline", "-f", str(BINDEP), *profiles], capture_output=True,
                             text=True, check=False, timeout=60).stdout
        return set(out.split())

    static, integration = listed("static"), listed("integration")
    assert {"shellcheck", "prometheus"} <= static
    assert {"docker.io", "debootstrap", "docker-registry", "prometheus"} <= integration
    assert static | integration == bindep_packages()
