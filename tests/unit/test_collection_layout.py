"""The collection's skeleton: metadata, plugin documentation, private utils, sanity ignores.

The checks are plain functions over a plugin tree that return a list of
problems; the tests run them on this checkout (expecting none) and on small
broken trees under ``tmp_path`` (expecting the exact problem), so a check that
stopped detecting anything would fail here too.

Documentation rules (docs/development.md, "Plugin documentation"):

* modules: DOCUMENTATION / EXAMPLES / RETURN as module-level strings in
  ``plugins/modules/<name>.py`` (or a ``<name>.yml`` sidecar holding the three keys);
* action plugins: documented by the module of the same name
  (``plugins/modules/<name>.py``, as ansible-test's action-plugin-docs requires);
* lookups: the three strings in ``plugins/lookup/<name>.py`` (or a sidecar);
* filters: one ``plugins/filter/<filter_name>.yml`` sidecar per filter name that
  ``FilterModule.filters()`` returns, *or* the three strings in a file that defines
  exactly one filter named like the file. ansible-doc attributes module-level
  DOCUMENTATION to every filter in that file, so a file that has it must not
  define other filters.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version

REPO_ROOT = Path(__file__).resolve().parents[2]
FQCN_PREFIX = "vllm_fleet.recipes."
DOC_KEYS = ("DOCUMENTATION", "EXAMPLES", "RETURN")
# validate-modules checks these directories (filters and tests it skips).
VALIDATE_MODULES_DIRS = ("modules", "lookup")
# The only sanity ignore we accept: this collection is Apache-2.0, and
# validate-modules insists on a GPLv3 header in every module/lookup.
ALLOWED_SANITY_IGNORES = {"validate-modules:missing-gplv3-license"}


# ---------------------------------------------------------------------------
# Helpers: read documentation without importing the plugin
# ---------------------------------------------------------------------------
def module_level_strings(path: Path) -> dict[str, str]:
    """Module-level ``NAME = "..."`` string assignments of a Python file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: dict[str, str] = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Constant):
            continue
        if not isinstance(node.value.value, str):
            continue
        for target in node.targets:
            if isinstance(target, ast.Name):
                found[target.id] = node.value.value
    return found


def sidecar_docs(path: Path) -> dict[str, object]:
    """The three documentation keys of a YAML sidecar, EXAMPLES kept as text."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


def check_doc_set(docs: dict, name: str, where: str, kind: str) -> list[str]:
    """Problems with one plugin's DOCUMENTATION/EXAMPLES/RETURN (strings or parsed YAML)."""
    problems = [f"{where}: {key} is missing or empty" for key in DOC_KEYS if not docs.get(key)]
    if problems:
        return problems

    def parsed(key: str):
        value = docs[key]
        if isinstance(value, str):
            try:
                return yaml.safe_load(value)
            except yaml.YAMLError as exc:
                problems.append(f"{where}: {key} is not valid YAML: {exc}")
                return None
        return value

    doc = parsed("DOCUMENTATION")
    examples_text = docs["EXAMPLES"] if isinstance(docs["EXAMPLES"], str) else yaml.safe_dump(docs["EXAMPLES"])
    examples = parsed("EXAMPLES")
    returns = parsed("RETURN")
    if problems:
        return problems

    if not isinstance(doc, dict):
        return [f"{where}: DOCUMENTATION must be a YAML mapping, got {type(doc).__name__}"]
    name_key = "module" if kind == "modules" else "name"
    if doc.get(name_key) != name:
        problems.append(f"{where}: DOCUMENTATION.{name_key} is {doc.get(name_key)!r}, expected {name!r}")
    for key in ("short_description", "description", "author"):
        if not doc.get(key):
            problems.append(f"{where}: DOCUMENTATION.{key} is missing")
    if kind == "filter" and "_input" not in (doc.get("options") or {}):
        problems.append(f"{where}: DOCUMENTATION.options must document _input (the filtered value)")

    if not isinstance(examples, list) or not examples:
        problems.append(f"{where}: EXAMPLES must be a non-empty YAML list of tasks")
    if FQCN_PREFIX + name not in examples_text:
        problems.append(f"{where}: EXAMPLES never uses the FQCN {FQCN_PREFIX}{name}")

    if not isinstance(returns, dict) or not returns:
        problems.append(f"{where}: RETURN must be a non-empty YAML mapping")
    else:
        expected_key = {"filter": "_value", "lookup": "_raw"}.get(kind)
        if expected_key and expected_key not in returns:
            problems.append(f"{where}: RETURN must document {expected_key}")
    return problems


def _python_plugins(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.glob("*.py") if p.name != "__init__.py")


def _docs_for(py: Path) -> tuple[dict, str]:
    """Docs of a module/lookup: sidecar <stem>.yml wins (as in ansible-core), else module strings."""
    sidecar = py.with_suffix(".yml")
    if sidecar.is_file():
        return sidecar_docs(sidecar), sidecar.name
    return module_level_strings(py), py.name


def check_simple_plugins(root: Path, kind: str) -> list[str]:
    """Modules and lookups: one plugin per file, named like the file."""
    problems = []
    for py in _python_plugins(root / "plugins" / kind):
        docs, where = _docs_for(py)
        problems += check_doc_set(docs, py.stem, f"plugins/{kind}/{where}", kind)
    return problems


def check_action_plugins(root: Path) -> list[str]:
    """Each action plugin needs a same-named module that carries the docs."""
    problems = []
    for py in _python_plugins(root / "plugins" / "action"):
        modules = root / "plugins" / "modules"
        if not ((modules / f"{py.stem}.py").is_file() or (modules / f"{py.stem}.yml").is_file()):
            problems.append(
                f"plugins/action/{py.name}: no plugins/modules/{py.stem}.py to document it "
                "(a docs-only module holding DOCUMENTATION/EXAMPLES/RETURN is enough)"
            )
    return problems


def _import_plugin_file(py: Path, root: Path):
    """Import a plugin file the way Ansible names it, or by path outside this checkout."""
    if root == REPO_ROOT:
        dotted = ".".join(("ansible_collections", "vllm_fleet", "recipes") + py.relative_to(root).with_suffix("").parts)
        return importlib.import_module(dotted)
    spec = importlib.util.spec_from_file_location(f"_layout_probe_{abs(hash(py))}_{py.stem}", py)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def filter_names(py: Path, root: Path) -> list[str]:
    """Names returned by FilterModule().filters() in one filter plugin file."""
    module = _import_plugin_file(py, root)
    if not hasattr(module, "FilterModule"):
        raise AssertionError(f"plugins/filter/{py.name}: defines no FilterModule class")
    return sorted(module.FilterModule().filters())


def check_filter_plugins(root: Path) -> list[str]:
    """Filters: per-name sidecar, or module-level docs for a single same-named filter."""
    problems = []
    directory = root / "plugins" / "filter"
    seen: set[str] = set()
    for py in _python_plugins(directory):
        names = filter_names(py, root)
        if not names:
            problems.append(f"plugins/filter/{py.name}: FilterModule.filters() returns no filters")
        inline = module_level_strings(py)
        if "DOCUMENTATION" in inline and names != [py.stem]:
            problems.append(
                f"plugins/filter/{py.name}: has module-level DOCUMENTATION but defines {names}; "
                f"ansible-doc would show it for every one of them. Move each filter's docs to "
                f"plugins/filter/<filter_name>.yml, or keep one filter named {py.stem!r} per file"
            )
            continue
        for name in names:
            seen.add(name)
            sidecar = directory / f"{name}.yml"
            if sidecar.is_file():
                problems += check_doc_set(sidecar_docs(sidecar), name, f"plugins/filter/{sidecar.name}", "filter")
            elif name == py.stem and "DOCUMENTATION" in inline:
                problems += check_doc_set(inline, name, f"plugins/filter/{py.name}", "filter")
            else:
                problems.append(f"plugins/filter/{py.name}: filter {name!r} has no docs (add plugins/filter/{name}.yml)")
    for sidecar in sorted(directory.glob("*.yml")) if directory.is_dir() else []:
        if sidecar.stem not in seen:
            problems.append(f"plugins/filter/{sidecar.name}: documents no filter that any FilterModule defines")
    return problems


def check_private_utils(root: Path) -> list[str]:
    """plugin_utils/module_utils files are `_name.py` and say they are private."""
    problems = []
    for kind in ("plugin_utils", "module_utils"):
        for py in _python_plugins(root / "plugins" / kind):
            where = f"plugins/{kind}/{py.name}"
            if not py.name.startswith("_"):
                problems.append(f"{where}: shared code is private; name it _{py.name}")
            head = "\n".join(py.read_text(encoding="utf-8").splitlines()[:15])
            if "private" not in head.lower():
                problems.append(f"{where}: say in the first lines that it is private to the collection")
    return problems


def check_sanity_ignores(root: Path) -> list[str]:
    """tests/sanity/ignore-*.txt: only the licence entry, for files that exist, sorted and unique."""
    problems = []
    for ignore in sorted((root / "tests" / "sanity").glob("ignore-*.txt")):
        lines = [line for line in ignore.read_text(encoding="utf-8").splitlines() if line.strip()]
        where = f"tests/sanity/{ignore.name}"
        if lines != sorted(set(lines)):
            problems.append(f"{where}: lines must be sorted and unique")
        for line in lines:
            parts = line.split()
            if len(parts) != 2 or parts[1] not in ALLOWED_SANITY_IGNORES:
                problems.append(f"{where}: {line!r} is not an allowed ignore (fix the finding instead)")
                continue
            path = parts[0]
            if not (root / path).is_file():
                problems.append(f"{where}: {path} does not exist")
            elif not any(path.startswith(f"plugins/{d}/") for d in VALIDATE_MODULES_DIRS):
                problems.append(f"{where}: {path} is not checked by validate-modules")
    return problems


def all_doc_problems(root: Path) -> list[str]:
    return (
        check_simple_plugins(root, "modules")
        + check_simple_plugins(root, "lookup")
        + check_action_plugins(root)
        + check_filter_plugins(root)
    )


# ---------------------------------------------------------------------------
# The real checkout
# ---------------------------------------------------------------------------
def test_galaxy_metadata():
    galaxy = yaml.safe_load((REPO_ROOT / "galaxy.yml").read_text(encoding="utf-8"))
    assert galaxy["namespace"] == "vllm_fleet"
    assert galaxy["name"] == "recipes"
    Version(str(galaxy["version"]))  # raises on a non-PEP 440 version
    assert re.fullmatch(r"\d+\.\d+\.\d+", str(galaxy["version"])), "collection versions are semver X.Y.Z"
    assert (REPO_ROOT / galaxy["readme"]).is_file()
    assert galaxy.get("license") == ["Apache-2.0"] or galaxy.get("license_file")
    assert galaxy.get("authors") and galaxy.get("description")
    for dep in ("community.docker", "ansible.posix"):
        SpecifierSet(galaxy["dependencies"][dep])  # raises on a malformed range
    for path in (".venv", ".collections", "tests/output"):
        assert path in galaxy["build_ignore"], f"galaxy.yml build_ignore must exclude {path}"


def test_runtime_metadata_admits_installed_ansible_core():
    from ansible.release import __version__ as ansible_core_version

    runtime = yaml.safe_load((REPO_ROOT / "meta" / "runtime.yml").read_text(encoding="utf-8"))
    assert isinstance(runtime, dict)
    spec = SpecifierSet(runtime["requires_ansible"])
    assert Version("2.18.0") in spec  # the oldest minor tests/unit/test_install.py runs
    assert Version(ansible_core_version) in spec, f"requires_ansible {spec} rejects ansible-core {ansible_core_version}"


def test_collection_is_importable_through_ansible_collections():
    package = importlib.import_module("ansible_collections.vllm_fleet.recipes.plugins.plugin_utils")
    assert Path(package.__file__).resolve().parent == REPO_ROOT / "plugins" / "plugin_utils"


def test_plugins_are_documented():
    assert all_doc_problems(REPO_ROOT) == []


def test_private_utils_are_marked_private():
    assert check_private_utils(REPO_ROOT) == []


def test_sanity_ignores_are_only_the_licence_entry():
    assert check_sanity_ignores(REPO_ROOT) == []


_PLUGIN_FILES = sorted(
    p.relative_to(REPO_ROOT)
    for kind in ("action", "filter", "lookup", "modules", "module_utils", "plugin_utils")
    for p in _python_plugins(REPO_ROOT / "plugins" / kind)
)


@pytest.mark.parametrize("relpath", _PLUGIN_FILES, ids=str)
def test_plugin_imports_with_project_requirements(relpath):
    """Stands in for the import sanity test where it cannot run (plugin_utils need pydantic)."""
    _import_plugin_file(REPO_ROOT / relpath, REPO_ROOT)


def test_ansible_doc_attributes_each_filter_to_its_own_docs():
    """ansible-doc itself must find, for every filter, docs whose name is that filter."""
    names = [n for py in _python_plugins(REPO_ROOT / "plugins" / "filter") for n in filter_names(py, REPO_ROOT)]
    if not names:
        pytest.skip("no filter plugins yet")
    cmd = [sys.executable, "-m", "ansible.cli.doc", "-t", "filter", "--json", *(FQCN_PREFIX + n for n in names)]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr
    docs = json.loads(result.stdout)
    for name in names:
        entry = docs.get(FQCN_PREFIX + name)
        assert entry, f"ansible-doc found no docs for {FQCN_PREFIX}{name}: {result.stderr}"
        assert entry["doc"]["name"] == name, f"ansible-doc shows {entry['doc']['name']!r}'s docs for {name!r}"


#: Host modules that change nothing the fleet runs; their shared attributes come from one fragment.
READ_ONLY_MODULES = ("vllm_argv_check", "vllm_drift_info", "vllm_health_wait", "vllm_host_probe", "vllm_units_info")


def test_read_only_modules_share_the_fragment_and_keep_their_own_fields():
    """ansible-doc merges doc_fragments/read_only.py under each module's own attribute fields."""
    tree = ast.parse((REPO_ROOT / "plugins" / "doc_fragments" / "read_only.py").read_text(encoding="utf-8"))
    fragment_class = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModuleDocFragment")
    fragment = yaml.safe_load(next(n.value.value for n in fragment_class.body if isinstance(n, ast.Assign)
                                   and getattr(n.targets[0], "id", "") == "DOCUMENTATION"))
    cmd = [sys.executable, "-m", "ansible.cli.doc", "--json", *(FQCN_PREFIX + m for m in READ_ONLY_MODULES)]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr
    docs = json.loads(result.stdout)
    for name in READ_ONLY_MODULES:
        own = yaml.safe_load(module_level_strings(REPO_ROOT / "plugins" / "modules" / f"{name}.py")["DOCUMENTATION"])
        assert FQCN_PREFIX + "read_only" in own.get("extends_documentation_fragment", []), name
        merged = docs[FQCN_PREFIX + name]["doc"]
        for key, shared in fragment["attributes"].items():
            expected = {**shared, **(own.get("attributes") or {}).get(key, {})}
            assert merged["attributes"][key] == expected, f"{name}: attributes.{key}"
        assert merged["attributes"]["check_mode"]["support"] == "full", name
        assert fragment["notes"][0] in merged["notes"], name
    assert docs[FQCN_PREFIX + "vllm_drift_info"]["doc"]["attributes"]["diff_mode"]["support"] == "full"


# ---------------------------------------------------------------------------
# The checks catch what they claim to (small trees under tmp_path)
# ---------------------------------------------------------------------------
GOOD_FILTER_PY = '''
class FilterModule:
    def filters(self):
        return {"shout": str.upper}
'''

GOOD_FILTER_YML = '''
DOCUMENTATION:
  name: shout
  short_description: Upper-case a string
  description: [Upper-cases.]
  author: Someone (@someone)
  options:
    _input: {description: A string., type: str, required: true}
EXAMPLES: |
  - ansible.builtin.debug:
      msg: "{{ 'a' | vllm_fleet.recipes.shout }}"
RETURN:
  _value: {description: The string in upper case., type: str}
'''

GOOD_MODULE_PY = '''
DOCUMENTATION = """
module: probe
short_description: Probe
description: [Probes.]
author: Someone (@someone)
"""
EXAMPLES = """
- vllm_fleet.recipes.probe: {}
"""
RETURN = """
found: {description: What it found., returned: always, type: str}
"""
'''


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return tmp_path


def test_good_fixture_trees_pass(tmp_path):
    root = _tree(tmp_path, {
        "plugins/filter/strings.py": GOOD_FILTER_PY,
        "plugins/filter/shout.yml": GOOD_FILTER_YML,
        "plugins/modules/probe.py": GOOD_MODULE_PY,
        "plugins/action/probe.py": "",
    })
    assert all_doc_problems(root) == []


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        pytest.param(
            {"plugins/filter/strings.py": GOOD_FILTER_PY},
            "filter 'shout' has no docs",
            id="filter-without-sidecar",
        ),
        pytest.param(
            {"plugins/filter/strings.py": GOOD_FILTER_PY,
             "plugins/filter/shout.yml": GOOD_FILTER_YML.partition("RETURN:")[0]},
            "shout.yml: RETURN is missing or empty",
            id="filter-sidecar-without-return",
        ),
        pytest.param(
            {"plugins/filter/strings.py": GOOD_FILTER_PY,
             "plugins/filter/shout.yml": GOOD_FILTER_YML.replace("_input:", "value:")},
            "must document _input",
            id="filter-without-input-option",
        ),
        pytest.param(
            {"plugins/filter/strings.py": 'DOCUMENTATION = "name: strings"\n' + GOOD_FILTER_PY,
             "plugins/filter/shout.yml": GOOD_FILTER_YML},
            "ansible-doc would show it for every one of them",
            id="module-docs-shadow-sidecars",
        ),
        pytest.param(
            {"plugins/filter/strings.py": GOOD_FILTER_PY,
             "plugins/filter/shout.yml": GOOD_FILTER_YML,
             "plugins/filter/whisper.yml": GOOD_FILTER_YML.replace("shout", "whisper")},
            "whisper.yml: documents no filter",
            id="orphan-sidecar",
        ),
        pytest.param(
            {"plugins/modules/probe.py": GOOD_MODULE_PY.partition("RETURN")[0]},
            "probe.py: RETURN is missing or empty",
            id="module-without-return",
        ),
        pytest.param(
            {"plugins/modules/probe.py": GOOD_MODULE_PY.replace("module: probe", "module: other")},
            "DOCUMENTATION.module is 'other', expected 'probe'",
            id="module-name-mismatch",
        ),
        pytest.param(
            {"plugins/modules/probe.py": GOOD_MODULE_PY.replace("vllm_fleet.recipes.probe", "probe")},
            "EXAMPLES never uses the FQCN vllm_fleet.recipes.probe",
            id="examples-without-fqcn",
        ),
        pytest.param(
            {"plugins/lookup/probe.py": GOOD_MODULE_PY.replace("module: probe", "name: probe")},
            "RETURN must document _raw",
            id="lookup-without-raw",
        ),
        pytest.param(
            {"plugins/action/probe.py": ""},
            "no plugins/modules/probe.py to document it",
            id="action-without-module",
        ),
    ],
)
def test_doc_checks_report_problems(tmp_path, files, expected):
    problems = all_doc_problems(_tree(tmp_path, files))
    assert any(expected in p for p in problems), problems


def test_private_util_checks_report_problems(tmp_path):
    root = _tree(tmp_path, {
        "plugins/plugin_utils/public.py": '"""Private to the collection."""\n',
        "plugins/plugin_utils/_quiet.py": '"""Helpers."""\n',
    })
    assert check_private_utils(root) == [
        "plugins/plugin_utils/_quiet.py: say in the first lines that it is private to the collection",
        "plugins/plugin_utils/public.py: shared code is private; name it _public.py",
    ]


def test_sanity_ignore_checks_report_problems(tmp_path):
    root = _tree(tmp_path, {
        "plugins/modules/probe.py": GOOD_MODULE_PY,
        "tests/sanity/ignore-2.19.txt": (
            "plugins/modules/probe.py validate-modules:missing-gplv3-license\n"
            "plugins/modules/gone.py validate-modules:missing-gplv3-license\n"
            "plugins/modules/probe.py pylint:disallowed-name\n"
        ),
    })
    problems = check_sanity_ignores(root)
    assert "tests/sanity/ignore-2.19.txt: lines must be sorted and unique" in problems
    assert "tests/sanity/ignore-2.19.txt: plugins/modules/gone.py does not exist" in problems
    assert any("pylint:disallowed-name" in p and "not an allowed ignore" in p for p in problems)
