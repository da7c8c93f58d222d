"""The built collection installs and runs with only what it declares (docs/install.md).

``ansible-galaxy collection build`` makes the tarball; a fresh venv gets ansible-core
(the range of ``meta/runtime.yml``'s requires_ansible, narrowed to one minor) and the
tarball's own ``requirements.txt``, nothing else; ``ansible-galaxy collection install
--no-deps`` puts the tarball into an empty collections path, beside community.docker,
ansible.posix and community.library_inventory_filtering_v1 from the PyPI ``ansible``
bundle wheel that ``make collections`` caches in ``.cache/ansible-bundle`` (the deploy
roles name their modules, so syntax-checking deploy.yml needs them; rendering does not).
With ``ANSIBLE_COLLECTIONS_PATH`` set to that path only, outside the checkout (no
ansible.cfg), an example inventory is rendered through ``vllm_fleet.recipes.render`` and
every shipped playbook is syntax-checked by its FQCN. The documented examples run against one
install per minor (fixture ``installed``): plugin EXAMPLES and the task/play blocks of README.md and
docs/ as plays on localhost; their sh/bash/console/python blocks as a reader runs them, from a
directory outside the checkout (tests/unit/doc_examples.py says how a block opts out).

The fresh venvs are installed from a wheelhouse that ``pip download`` fills first (the
offline recipe of docs/install.md), and cached by a hash of what went into them under
``tests/output/install/`` (a re-run takes seconds); with ``CI`` set they are built anew.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from doc_examples import CommandBlock, Example, command_blocks, doc_examples, plugin_examples, saved_files, skip_reasons, syntax_check_groups

pytestmark = [pytest.mark.install, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / "tests" / "output" / "install"
BUNDLE_DIR = REPO / ".cache" / "ansible-bundle"
BUNDLED = ("community/docker", "ansible/posix", "community/library_inventory_filtering_v1")
# The ansible-core minors CI installs the tarball with (docs/install.md, "Supported versions").
TESTED_MINORS = ("2.18", "2.19")
# The unit tests that drive ansible-core itself (plugins through ansible-playbook, ansible-doc)
# run again on each tested minor other than the dev venv's; the engine's are pure Python.
ANSIBLE_FACING_TESTS = ("tests/unit/plugins/test_plugins.py", "tests/unit/test_collection_layout.py")

# Files an installed collection needs, and paths that must never ship (galaxy.yml build_ignore).
MUST_SHIP = ("requirements.txt", "bindep.txt", "meta/execution-environment.yml", "meta/runtime.yml",
             "playbooks/render.yml", "playbooks/deploy.yml", "recipes", "roles", "plugins/plugin_utils")
MUST_NOT_SHIP = (".venv", ".collections", ".cache", ".git", ".pytest_cache", "tests/output", "out",
                 "ansible.cfg", "requirements-dev.txt", "requirements-integration.txt", "Makefile", ".ci",
                 "tools", "changelogs/.plugin-cache.yaml", "pyproject.toml")
# `make build`: the tarball of git's tracked files (tools/build.sh).
BUILD = REPO / "tools" / "build.sh"
# Files a user leaves in a checkout, untracked: none may ship (docs/install.md, "From a tarball").
UNTRACKED = ("inventory.yml", "group_vars/all/vault.yml", "notes.txt", "playbooks/site.yml")


def _run(cmd: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None,
         timeout: int = 600) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, check=False, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc


def _requires_ansible() -> SpecifierSet:
    runtime = yaml.safe_load((REPO / "meta" / "runtime.yml").read_text(encoding="utf-8"))
    return SpecifierSet(runtime["requires_ansible"])


def build(checkout: Path, out: Path) -> Path:
    """`make build` in CHECKOUT: tools/build.sh with the dev venv's ansible-galaxy."""
    _run(["bash", str(checkout / "tools" / "build.sh"), str(out), str(Path(sys.executable).parent / "ansible-galaxy")],
         cwd=checkout)
    built = sorted(out.glob("vllm_fleet-recipes-*.tar.gz"))
    assert len(built) == 1, built
    return built[0]


@pytest.fixture(scope="module")
def tarball(tmp_path_factory) -> Path:
    return build(REPO, tmp_path_factory.mktemp("build"))


def _members(path: Path) -> list[str]:
    with tarfile.open(path) as tar:
        return [m.name.removeprefix("./").rstrip("/") for m in tar.getmembers()]


def _read_member(path: Path, name: str) -> str:
    with tarfile.open(path) as tar:
        member = tar.extractfile(name)
        assert member is not None, f"{name} is not a file in {path.name}"
        return member.read().decode("utf-8")


def test_tarball_ships_requirements_and_no_dev_state(tarball):
    members = _members(tarball)
    for path in MUST_SHIP:
        assert path in members, f"{tarball.name} lacks {path} (galaxy.yml build_ignore?)"
    leaked = sorted(m for m in members for bad in MUST_NOT_SHIP if m == bad or m.startswith(bad + "/"))
    assert not leaked, f"{tarball.name} ships development state: {leaked[:10]}"
    # The execution-environment metadata names files that ship beside it.
    ee_meta = yaml.safe_load(_read_member(tarball, "meta/execution-environment.yml"))
    assert ee_meta["version"] == 1
    for kind in ("python", "system"):
        assert ee_meta["dependencies"][kind] in members, ee_meta
    assert _read_member(tarball, "requirements.txt") == (REPO / "requirements.txt").read_text(encoding="utf-8")


def test_untracked_files_never_ship(tmp_path):
    """A clone with a user's untracked inventory, Vault file and notes: `make build` leaves them out
    (git's tracked files only), and so does a plain `ansible-galaxy collection build` (build_ignore)."""
    checkout = tmp_path / "checkout"
    _run(["git", "clone", "--quiet", "--shared", str(REPO), str(checkout)])
    for rel in UNTRACKED:
        (checkout / rel).parent.mkdir(parents=True, exist_ok=True)
        (checkout / rel).write_text("# the user's own, untracked\n", encoding="utf-8")
    members = _members(build(checkout, tmp_path / "made"))
    assert "playbooks/render.yml" in members and "tools/build.sh" not in members, members[:20]
    leaked = [rel for rel in UNTRACKED if rel in members]
    assert not leaked, f"`make build` ships untracked files: {leaked}"

    by_hand = tmp_path / "by-hand"
    _run([str(Path(sys.executable).parent / "ansible-galaxy"), "collection", "build", "--output-path", str(by_hand),
          str(checkout)], cwd=tmp_path)
    members = _members(next(by_hand.glob("*.tar.gz")))
    leaked = [rel for rel in ("inventory.yml", "group_vars/all/vault.yml", "tools/build.sh") if rel in members]
    assert not leaked, f"galaxy.yml's build_ignore lets these ship: {leaked}"


# Distribution of each third-party module the collection's controller code imports.
IMPORT_TO_DIST = {"pydantic": "pydantic", "pydantic_core": "pydantic", "yaml": "pyyaml"}
# Files that never run on the controller: the argv checker runs inside the engine image, with
# that image's vLLM and vllm-router (docs/validation.md).
NOT_CONTROLLER_CODE = {"plugins/module_utils/_argv_checker.py"}
# Optional controller imports: imported inside a function that says how to install them when missing,
# declared in requirements-dev.txt (the test venv), not in requirements.txt. Module -> the one file that may.
OPTIONAL_IMPORTS = {"matplotlib": "plugins/action/vllm_benchmark_report.py"}


def third_party_imports(root: Path) -> dict[str, list[str]]:
    """Top-level modules imported by plugins/**.py that are neither stdlib nor Ansible, with the importing files."""
    found: dict[str, list[str]] = {}
    for py in sorted((root / "plugins").rglob("*.py")):
        if str(py.relative_to(root)) in NOT_CONTROLLER_CODE:
            continue
        for node in ast.walk(ast.parse(py.read_text(encoding="utf-8"), filename=str(py))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top not in sys.stdlib_module_names and top not in ("ansible", "ansible_collections", "__future__"):
                    found.setdefault(top, []).append(str(py.relative_to(root)))
    return found


def _declared(path: Path) -> set[str]:
    return {re.split(r"[<>=!~;\[ ]", line.strip(), maxsplit=1)[0].lower()
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip() and not line.startswith("#")}


def test_requirements_declare_what_the_engine_imports():
    """requirements.txt declares every third-party import of plugins/ and no test tooling."""
    names = _declared(REPO / "requirements.txt")
    imports = third_party_imports(REPO)
    assert "pydantic" in imports, imports  # the scan sees the engine
    for module, allowed in OPTIONAL_IMPORTS.items():
        assert set(imports.pop(module, [allowed])) == {allowed}, f"only {allowed} may import the optional {module}"
        assert module in _declared(REPO / "requirements-dev.txt"), f"requirements-dev.txt does not declare {module}"
    unmapped = {m: files for m, files in imports.items() if m not in IMPORT_TO_DIST}
    assert not unmapped, f"new third-party imports (add them to requirements.txt and IMPORT_TO_DIST): {unmapped}"
    missing = {IMPORT_TO_DIST[m] for m in imports} - names
    assert not missing, f"requirements.txt does not declare {sorted(missing)} (imported by {imports})"
    assert not names & {"pytest", "ansible-lint", "molecule", "huggingface_hub", "ansible-core"}, names


def test_import_scan_catches_an_undeclared_module(tmp_path):
    (tmp_path / "plugins" / "filter").mkdir(parents=True)
    (tmp_path / "plugins" / "filter" / "x.py").write_text("import os\nimport requests\nfrom ansible.errors import AnsibleError\n")
    assert third_party_imports(tmp_path) == {"requests": ["plugins/filter/x.py"]}


def test_supported_minors_are_the_tested_ones():
    """requires_ansible admits exactly TESTED_MINORS; requirements-dev.txt pins the newest."""
    dev = [line for line in (REPO / "requirements-dev.txt").read_text(encoding="utf-8").splitlines()
           if line.startswith("ansible-core")]
    assert len(dev) == 1, dev
    dev_range = SpecifierSet(dev[0].removeprefix("ansible-core"))
    spec = _requires_ansible()
    assert Version(f"{TESTED_MINORS[-1]}.0") in dev_range, f"requirements-dev.txt {dev_range} is not the newest tested minor"
    # Every minor requires_ansible admits is one the install test runs (no untested claim).
    claimed = [f"2.{n}" for n in range(10, 40) if Version(f"2.{n}.0") in spec]
    assert claimed == list(TESTED_MINORS), f"requires_ansible {spec} admits {claimed}; tested: {TESTED_MINORS}"


def cached_venv(name: str, requirements: str, scratch: Path, packages: tuple[str, ...]) -> Path:
    """A venv of `packages` (and `requirements`, a requirements file's text), nothing else.

    Reused from tests/output/install/<name>-<hash> while its inputs are unchanged, unless CI is
    set (then built under `scratch`). Built in place (venv scripts carry their path); the
    ``.complete`` marker is written last.
    """
    ci = os.environ.get("CI", "").lower() not in ("", "0", "false")
    digest = hashlib.sha256(f"{sys.version}\n{requirements}\n{packages}".encode()).hexdigest()[:16]
    venv = scratch / name if ci else CACHE / f"{name}-{digest}"
    if (venv / ".complete").is_file():
        return venv
    for stale in CACHE.glob(f"{name}-*") if not ci else ():  # this venv for earlier inputs
        if re.fullmatch(r"[0-9a-f]{16}", stale.name[len(name) + 1:]):
            shutil.rmtree(stale, ignore_errors=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    _run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", str(venv)])
    reqs = venv / "collection-requirements.txt"
    reqs.write_text(requirements, encoding="utf-8")
    # As docs/install.md's offline recipe: a wheelhouse first, then an install from it alone.
    pip = [str(venv / "bin" / "python"), "-m", "pip"]
    wheels = venv / "wheelhouse"
    _run([*pip, "download", "--quiet", "--disable-pip-version-check", "-d", str(wheels), "-r", str(reqs), *packages],
         timeout=900)
    _run([*pip, "install", "--quiet", "--disable-pip-version-check", "--no-index", "--find-links", str(wheels),
          "-r", str(reqs), *packages], timeout=900)
    (venv / ".complete").write_text(f"{packages}\n", encoding="utf-8")
    return venv


def fresh_venv(minor: str, requirements: str, scratch: Path, extra: tuple[str, ...] = ()) -> Path:
    """ansible-core <minor>.* and the collection's requirements.txt (and `extra`), nothing else."""
    name = f"venv-{minor}{'-test' if extra else ''}"
    return cached_venv(name, requirements, scratch, (f"ansible-core=={minor}.*", *extra))


def install_collections(venv: Path, tarball: Path, dest: Path) -> None:
    """The tarball with --no-deps, and its dependencies from the ansible bundle wheel."""
    _run([str(venv / "bin" / "ansible-galaxy"), "collection", "install", "--no-deps", "--offline",
          "-p", str(dest), str(tarball)], env=_isolated_env(venv, dest), cwd=dest)
    wheels = sorted(BUNDLE_DIR.glob("ansible-*-py3-none-any.whl"))
    if not wheels:
        pytest.fail(f"no ansible bundle wheel in {BUNDLE_DIR}: run `make collections` first")
    with zipfile.ZipFile(wheels[-1]) as wheel:
        for coll in BUNDLED:
            members = [n for n in wheel.namelist() if n.startswith(f"ansible_collections/{coll}/")]
            assert members, f"{coll} is not in {wheels[-1].name}"
            wheel.extractall(dest, members)


def _isolated_env(venv: Path, collections: Path) -> dict[str, str]:
    """The fresh venv first on PATH, only `collections` for Ansible, nothing from the checkout."""
    dev_bin = str(Path(sys.executable).parent)
    path = [str(venv / "bin")] + [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != dev_bin]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ANSIBLE_", "PYTHON", "VIRTUAL_ENV", "PYTEST_", "MAKE"))}
    env.update(PATH=os.pathsep.join(path), VIRTUAL_ENV=str(venv), ANSIBLE_COLLECTIONS_PATH=str(collections),
               ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false", ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
    return env


@pytest.mark.parametrize("minor", TESTED_MINORS)
def test_tarball_installs_renders_and_syntax_checks(tarball, tmp_path, minor):
    requirements = _read_member(tarball, "requirements.txt")
    venv = fresh_venv(minor, requirements, tmp_path)
    collections = tmp_path / "collections"
    collections.mkdir()
    install_collections(venv, tarball, collections)
    env = _isolated_env(venv, collections)
    work = tmp_path / "work"  # outside the checkout: its ansible.cfg must play no part
    work.mkdir()

    version = _run([str(venv / "bin" / "ansible"), "--version"], env=env, cwd=work).stdout
    assert f"core {minor}." in version, version
    listed = _run([str(venv / "bin" / "ansible-galaxy"), "collection", "list", "--format", "json"],
                  env=env, cwd=work).stdout
    ours = str(collections / "ansible_collections")
    for path, found in json.loads(listed).items():
        # ansible-core >= 2.19 lists its own internal collections too; nothing else may show.
        assert path == ours or (path.startswith(str(venv)) and set(found) <= {"ansible._protomatter"}), (path, found)
    assert "vllm_fleet.recipes" in json.loads(listed)[ours]
    installed = collections / "ansible_collections" / "vllm_fleet" / "recipes"
    assert not installed.is_symlink() and (installed / "MANIFEST.json").is_file()

    plan = work / "plan"
    inventory = installed / "playbooks" / "examples" / "pd_cluster" / "inventory.yml"
    _run([str(venv / "bin" / "ansible-playbook"), "-i", str(inventory), "vllm_fleet.recipes.render",
          "-e", f"vllm_render_dir={plan}"], env=env, cwd=work)
    rendered = json.loads((plan / "plan.json").read_text(encoding="utf-8"))
    assert rendered, "plan.json is empty"
    assert (plan / "PLAN.md").is_file() and list(plan.rglob("*.service")), sorted(plan.rglob("*"))

    playbooks = sorted(p.stem for p in (installed / "playbooks").glob("*.yml"))
    assert {"render", "deploy", "status", "teardown", "upgrade", "drift"} <= set(playbooks), playbooks
    checked = _run([str(venv / "bin" / "ansible-playbook"), "--syntax-check", "-i", str(inventory),
                    *(f"vllm_fleet.recipes.{name}" for name in playbooks)], env=env, cwd=work)
    for name in playbooks:
        assert f"playbook: {installed / 'playbooks' / name}.yml" in checked.stdout, checked.stdout


def _docs() -> list[str]:
    return ["README.md", *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").rglob("*.md"))]


def _examples() -> list[Example]:
    return plugin_examples(REPO) + doc_examples(REPO, _docs())


def test_every_example_runs_or_says_why_not():
    examples = _examples()
    where = [e.where for e in examples]
    assert "plugins/modules/vllm_resolve.py" in where and "plugins/filter/resolve.yml" in where, where
    assert any(w.startswith("README.md:") for w in where), where
    assert [e.where for e in examples if e.skip_reason == ""] == [], "the skip marker needs a reason"
    runnable = [e.where for e in examples if e.skip_reason is None]
    for must in ("plugins/modules/vllm_resolve.py", "plugins/filter/resolve.yml", "plugins/modules/vllm_plan.py"):
        assert must in runnable, f"{must}: its example must run from an installed collection"


@dataclass(frozen=True)
class Installed:
    """The tarball installed into a fresh venv's user collections path, and a working directory outside the checkout."""
    minor: str
    venv: Path
    home: Path  # $HOME: the collection is in ~/.ansible/collections, where the docs say it lands
    collections: Path
    work: Path  # the reader's current directory, with README.md's inventory.yml saved in it

    @property
    def root(self) -> Path:
        return self.collections / "ansible_collections" / "vllm_fleet" / "recipes"

    def env(self) -> dict[str, str]:
        """As a reader's shell with the venv activated: the venv first on PATH, only these collections."""
        return dict(_isolated_env(self.venv, self.collections), HOME=str(self.home))


@pytest.fixture(scope="module", params=TESTED_MINORS)
def installed(request, tarball, tmp_path_factory) -> Installed:
    """One install of the tarball per tested minor, shared by the tests that run the docs' examples."""
    minor = request.param
    scratch = tmp_path_factory.mktemp(f"installed-{minor}")
    venv = fresh_venv(minor, _read_member(tarball, "requirements.txt"), scratch)
    home = scratch / "home"
    collections = home / ".ansible" / "collections"
    collections.mkdir(parents=True)
    install_collections(venv, tarball, collections)
    work = scratch / "work"  # outside the checkout
    work.mkdir()
    for rel, text in saved_files(REPO, "README.md").items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text, encoding="utf-8")
    return Installed(minor, venv, home, collections, work)


def test_documented_examples_run_from_the_installed_tarball(installed):
    """Every plugin EXAMPLES and every task/play block of README.md and docs/ without the skip marker,
    as tasks of a play on localhost, with the tarball installed in an empty collections path and the
    installed pd_cluster example as inventory (vllm_plan compiles its deployment)."""
    env = installed.env()
    work = installed.work
    inventory = installed.root / "playbooks" / "examples" / "pd_cluster" / "inventory.yml"
    failed = []
    for number, example in enumerate(e for e in _examples() if e.skip_reason is None):
        tasks = yaml.safe_load(example.text)
        plays = tasks if example.is_play else [{"name": example.where, "hosts": "localhost", "gather_facts": False,
                                                "tasks": tasks}]
        playbook = work / f"example-{number}.yml"
        playbook.write_text(yaml.safe_dump(plays, sort_keys=False), encoding="utf-8")
        proc = subprocess.run([str(installed.venv / "bin" / "ansible-playbook"), "-i", str(inventory), str(playbook)],
                              env=env, cwd=work, capture_output=True, text=True, check=False, timeout=600)
        shown = re.findall(r'"msg": ', proc.stdout)
        if proc.returncode != 0 or "ok: [localhost]" not in proc.stdout:
            failed.append(f"{example.where}: exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
        elif "ansible.builtin.debug" in example.text and not shown:
            failed.append(f"{example.where}: its debug task printed nothing\n{proc.stdout[-2000:]}")
    assert not failed, "\n\n".join(failed)


def _command_blocks() -> list[CommandBlock]:
    return command_blocks(REPO, _docs())


def test_every_command_block_runs_or_says_why_not():
    """Each sh/bash/console/python block of README.md and docs/ runs (the test below) or is marked with a reason."""
    blocks = _command_blocks()
    assert {b.lang for b in blocks} == {"sh", "bash", "console", "python"}, blocks
    unexplained = [f"{b.where}: {test}" for b in blocks for test, why in skip_reasons(b.text).items() if not why]
    assert not unexplained, f"a '# not run by <test>:' marker needs a reason: {unexplained}"
    empty = [b.where for b in blocks if not b.script.strip()]
    assert not empty, f"console blocks without a '$ ' command line: {empty}"
    runs = {b.where.split(":")[0] for b in blocks if b.skip_reason is None}
    for doc in ("docs/install.md", "docs/plan.md", "docs/engine.md"):
        assert doc in runs, f"{doc}: none of its command blocks runs from an installed collection"


def test_command_block_markers_and_console_prompts():
    block = CommandBlock("X.md:1", "console", "# not run by tests/unit/test_readme.py: a\n"
                         "# not run by tests/unit/test_install.py: needs hosts\n"
                         "$ ansible-playbook -i inventory.yml vllm_fleet.recipes.drift \\\n"
                         "    --check   # and a comment\noutput line\n$ echo done\n")
    assert skip_reasons(block.text) == {"tests/unit/test_readme.py": "a", "tests/unit/test_install.py": "needs hosts"}
    assert block.skip_reason == "needs hosts"
    assert block.ansible_playbook_commands() == [
        ["ansible-playbook", "-i", "inventory.yml", "vllm_fleet.recipes.drift", "--check"]]
    assert CommandBlock("X.md:1", "sh", "make demo\n# not run by tests/unit/test_install.py: late\n").skip_reason is None


def _run_block(installed: Installed, block: CommandBlock, number: int) -> str | None:
    """Run BLOCK as a reader would from the working directory: what went wrong, or None."""
    env = installed.env()
    if block.lang == "python":
        script = installed.work / f"snippet-{number}.py"
        script.write_text(block.text, encoding="utf-8")
        # docs/development.md: Python outside Ansible finds the collection on PYTHONPATH.
        env["PYTHONPATH"] = str(installed.collections)
        argv = [str(installed.venv / "bin" / "python"), str(script)]
    else:
        # Rendering an inventory that does not parse must fail, not render nothing.
        env["ANSIBLE_INVENTORY_UNPARSED_FAILED"] = "true"
        argv = ["bash", "-eu", "-o", "pipefail", "-c", block.script]
    proc = subprocess.run(argv, cwd=installed.work, env=env, capture_output=True, text=True, check=False, timeout=300)
    if proc.returncode == 0:
        return None
    return (f"{block.where}: exited {proc.returncode}\n{block.script}\n--- stdout (tail)\n{proc.stdout[-3000:]}"
            f"\n--- stderr (tail)\n{proc.stderr[-2000:]}")


def test_playbook_commands_are_grouped_by_their_options():
    block = CommandBlock("X.md:1", "sh", "ansible-playbook -i inventory.yml vllm_fleet.recipes.deploy --check --diff\n"
                         "ansible-playbook -i inventory.yml vllm_fleet.recipes.drift --check --diff\n"
                         "ansible-playbook -i inventory.yml vllm_fleet.recipes.verify -e vllm_acceptance=false\n")
    assert syntax_check_groups([block]) == {
        ("-i", "inventory.yml", "--check", "--diff"): (
            ["vllm_fleet.recipes.deploy", "vllm_fleet.recipes.drift"], ["X.md:1"]),
        ("-i", "inventory.yml", "-e", "vllm_acceptance=false"): (["vllm_fleet.recipes.verify"], ["X.md:1"]),
    }


def test_documented_commands_run_from_the_installed_tarball(installed):
    """Every sh/bash/console/python block of README.md and docs/ without the marker runs, in turn, in a
    directory outside the checkout holding README.md's inventory.yml, with the venv on PATH and the
    tarball installed in ~/.ansible/collections. The ansible-playbook commands of the marked blocks (they
    need hosts) are syntax-checked with the same arguments, one run per set of options: each names a
    playbook the installed collection has, and flags ansible-playbook takes."""
    blocks = _command_blocks()
    failed = [problem for number, block in enumerate(blocks) if block.skip_reason is None
              for problem in [_run_block(installed, block, number)] if problem]
    checks = syntax_check_groups([b for b in blocks if b.skip_reason is not None])
    assert len(checks) >= 3, checks
    for options, (playbooks, where) in checks.items():
        argv = [str(installed.venv / "bin" / "ansible-playbook"), *options, *playbooks, "--syntax-check"]
        proc = subprocess.run(argv, cwd=installed.work, env=installed.env(), capture_output=True, text=True,
                              check=False, timeout=300)
        if proc.returncode != 0:
            failed.append(f"{', '.join(where)}: `{shlex.join(argv[1:])}` exited {proc.returncode}\n"
                          f"{proc.stdout[-1000:]}\n{proc.stderr[-2000:]}")
    assert not failed, "\n\n".join(failed)


def _dev_pin(name: str) -> str:
    """The requirement line of `name` in requirements-dev.txt (the dev venv's tested range)."""
    for line in (REPO / "requirements-dev.txt").read_text(encoding="utf-8").splitlines():
        if line.split(">")[0].split("<")[0].split("=")[0].strip().lower() == name:
            return line.strip()
    raise AssertionError(f"requirements-dev.txt has no {name} line")


@pytest.mark.parametrize("minor", [m for m in TESTED_MINORS if m != TESTED_MINORS[-1]])
def test_ansible_facing_unit_tests_on_older_minor(tmp_path, minor):
    """The dev venv runs every unit test on the newest minor; the others rerun the ansible-facing ones."""
    venv = fresh_venv(minor, (REPO / "requirements.txt").read_text(encoding="utf-8"), tmp_path,
                      extra=(_dev_pin("pytest"), "packaging"))
    core = _run([str(venv / "bin" / "python"), "-c", "import ansible.release as r; print(r.__version__)"]).stdout
    assert core.startswith(f"{minor}."), core
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "VIRTUAL_ENV"))}
    env["PATH"] = os.pathsep.join([str(venv / "bin"), env.get("PATH", "")])
    proc = subprocess.run([str(venv / "bin" / "python"), "-m", "pytest", "-p", "no:cacheprovider", "-q",
                           *ANSIBLE_FACING_TESTS], cwd=REPO, env=env,
                          capture_output=True, text=True, check=False, timeout=900)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]


def test_execution_environment_example_matches_the_collection():
    """docs/examples/execution-environment: the tarball it names and the ansible-core range it installs."""
    example = REPO / "docs" / "examples" / "execution-environment"
    ee = yaml.safe_load((example / "execution-environment.yml").read_text(encoding="utf-8"))
    assert ee["version"] == 3
    deps = ee["dependencies"]
    galaxy_reqs = yaml.safe_load((example / deps["galaxy"]).read_text(encoding="utf-8"))
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text(encoding="utf-8"))
    names = [c["name"] for c in galaxy_reqs["collections"]]
    assert f"collections/vllm_fleet-recipes-{galaxy['version']}.tar.gz" in names, names
    assert [f["dest"] for f in ee["additional_build_files"]] == ["collections"]
    core = deps["ansible_core"]["package_pip"]
    # The whole supported range (meta/runtime.yml), not only the newest minor.
    assert SpecifierSet(core.removeprefix("ansible-core")) == _requires_ansible(), core


ANSIBLE_BUILDER = "ansible-builder>=3.1,<4"


def test_ansible_builder_reads_the_collection_and_the_example(tarball, tmp_path):
    """introspect finds requirements.txt and bindep.txt through meta/execution-environment.yml;
    create makes a build context of docs/examples/execution-environment with the tarball in it."""
    builder = cached_venv("ansible-builder", "", tmp_path, (ANSIBLE_BUILDER,))
    collections = tmp_path / "collections"
    # Only `collections` configured: galaxy would otherwise find the checkout in .collections and skip it.
    _run([str(Path(sys.executable).parent / "ansible-galaxy"), "collection", "install", "--no-deps", "--offline",
          "-p", str(collections), str(tarball)], cwd=tmp_path, env=dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections)))
    assert (collections / "ansible_collections" / "vllm_fleet" / "recipes" / "MANIFEST.json").is_file()
    found = yaml.safe_load(_run([str(builder / "bin" / "ansible-builder"), "introspect", str(collections)]).stdout)

    def declared(text: str) -> set[str]:
        return {line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")}

    # ansible-builder drops PyYAML (already in every EE image) from what collections declare.
    python = declared((REPO / "requirements.txt").read_text(encoding="utf-8"))
    assert {r.split("  #")[0] for r in found["python"]} == {r for r in python if not r.lower().startswith("pyyaml")}
    system = declared((REPO / "bindep.txt").read_text(encoding="utf-8"))
    assert {r.split("  #")[0] for r in found["system"]} == system, found

    # The example, at its place relative to out/ (where `make build` writes the tarball).
    tree = tmp_path / "tree"
    example = tree / "docs" / "examples" / "execution-environment"
    shutil.copytree(REPO / "docs" / "examples" / "execution-environment", example)
    (tree / "out").mkdir()
    shutil.copy2(tarball, tree / "out" / tarball.name)
    context = tmp_path / "context"
    _run([str(builder / "bin" / "ansible-builder"), "create", "-f", str(example / "execution-environment.yml"),
          "--context", str(context)], cwd=tree)
    assert (context / "_build" / "collections" / tarball.name).is_file()
    build_file = next(p for p in (context / "Containerfile", context / "Dockerfile") if p.is_file())
    assert "ansible-galaxy collection install" in build_file.read_text(encoding="utf-8")
