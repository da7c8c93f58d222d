"""The examples the collection documents: plugin EXAMPLES, task or play blocks of the docs, and the
docs' command blocks (``sh``, ``bash``, ``console``, ``python``).

tests/unit/test_install.py runs each against the built tarball installed in a temporary collections
path, outside any checkout. An example that cannot run there (it needs a deploy host, root, the
network, a checkout, or the result of an earlier task) starts with the line
``# not run by tests/unit/test_install.py: <why>``; the reason is required. A block may start with
several such lines, one per test that does not run it (tests/unit/test_readme.py runs README.md's
``sh`` blocks in a copy of the checkout and has its own).
"""

from __future__ import annotations

import ast
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import yaml

INSTALL_TEST = "tests/unit/test_install.py"
EXAMPLE_MARKER = f"# not run by {INSTALL_TEST}:"
MARKER = re.compile(r"#[ \t]*not run by (tests/unit/\w+\.py):(.*)")
FENCE = re.compile(r"^```([\w-]*)[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
# Fenced blocks of commands: shell (a console block's commands are its `$ ` lines) and Python.
COMMAND_LANGS = ("sh", "bash", "console", "python")


def skip_reasons(text: str) -> dict[str, str]:
    """The tests the leading ``# not run by tests/unit/<test>.py: <why>`` lines of TEXT name, with each reason."""
    reasons = {}
    for line in text.strip().splitlines():
        match = MARKER.fullmatch(line.strip())
        if not match:
            break
        reasons[match.group(1)] = match.group(2).strip()
    return reasons


@dataclass(frozen=True)
class Example:
    where: str  # file:line, or the plugin file
    text: str  # YAML: a list of tasks, or of plays

    @property
    def skip_reason(self) -> str | None:
        """The reason after the marker, '' when the marker has none, None when the example runs."""
        return skip_reasons(self.text).get(INSTALL_TEST)

    @property
    def is_play(self) -> bool:
        return "hosts" in (yaml.safe_load(self.text) or [{}])[0]


def plugin_examples(root: Path) -> list[Example]:
    """EXAMPLES of every module (docs of the action plugins too) and filter sidecar."""
    found = []
    for path in sorted((root / "plugins" / "modules").glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "EXAMPLES" for t in node.targets):
                found.append(Example(str(path.relative_to(root)), ast.literal_eval(node.value)))
    for path in sorted((root / "plugins" / "filter").glob("*.yml")):
        found.append(Example(str(path.relative_to(root)), yaml.safe_load(path.read_text(encoding="utf-8"))["EXAMPLES"]))
    return found


def _is_ansible(data: object) -> bool:
    """A list of tasks or plays: mappings that name a module (a dotted key) or hosts."""
    return (isinstance(data, list) and bool(data) and all(isinstance(item, dict) for item in data)
            and any("hosts" in item or any("." in str(key) for key in item) for item in data))


def doc_examples(root: Path, docs: list[str]) -> list[Example]:
    """The yaml blocks of DOCS that are Ansible tasks or plays (not inventories or variables)."""
    found = []
    for doc in docs:
        text = (root / doc).read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            if match.group(1) in ("yaml", "yml") and _is_ansible(yaml.safe_load(match.group(2))):
                found.append(Example(f"{doc}:{text.count(chr(10), 0, match.start()) + 1}", match.group(2)))
    return found


@dataclass(frozen=True)
class CommandBlock:
    where: str  # file:line
    lang: str  # one of COMMAND_LANGS
    text: str

    @property
    def skip_reason(self) -> str | None:
        """The reason of this block's tests/unit/test_install.py marker, '' without one, None when it runs."""
        return skip_reasons(self.text).get(INSTALL_TEST)

    @property
    def script(self) -> str:
        """What a reader types: the block, or a console block's ``$ `` lines without the prompt."""
        if self.lang != "console":
            return self.text
        lines, continued = [], False
        for line in self.text.splitlines():
            if line.startswith("$ ") or continued:
                lines.append(line.removeprefix("$ ") + "\n")
                continued = line.endswith("\\")
        return "".join(lines)

    def ansible_playbook_commands(self) -> list[list[str]]:
        """Each ``ansible-playbook`` command of a shell block, as argv (continuations joined, comments dropped)."""
        if self.lang == "python":
            return []
        commands = []
        for line in self.script.replace("\\\n", " ").splitlines():
            argv = shlex.split(line, comments=True)
            if argv[:1] == ["ansible-playbook"]:
                commands.append(argv)
        return commands


def command_blocks(root: Path, docs: list[str]) -> list[CommandBlock]:
    """The sh, bash, console and python blocks of DOCS."""
    found = []
    for doc in docs:
        text = (root / doc).read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            if match.group(1) in COMMAND_LANGS:
                line = text.count("\n", 0, match.start()) + 1
                found.append(CommandBlock(f"{doc}:{line}", match.group(1), match.group(2)))
    return found


def saved_files(root: Path, doc: str) -> dict[str, str]:
    """The yaml blocks of DOC that start with ``# <relative path>``: the doc tells the reader to save them there."""
    saved = {}
    for match in FENCE.finditer((root / doc).read_text(encoding="utf-8")):
        first = match.group(2).split("\n", 1)[0].strip()
        named = re.fullmatch(r"#\s*([\w./-]+\.ya?ml)", first)
        if match.group(1) in ("yaml", "yml") and named:
            saved[named.group(1)] = match.group(2)
    return saved


# ansible-playbook options that take a value (the word after one is not a playbook).
VALUE_OPTIONS = {"-i", "--inventory", "-e", "--extra-vars", "-l", "--limit", "-t", "--tags", "--skip-tags", "-u",
                 "--user", "-f", "--forks", "-c", "--connection", "--vault-id", "--vault-password-file"}


def split_playbooks(argv: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """An ansible-playbook command as (its options, its playbooks)."""
    options, playbooks = [], []
    for index, word in enumerate(argv[1:], start=1):
        if word.startswith("-") or argv[index - 1] in VALUE_OPTIONS:
            options.append(word)
        else:
            playbooks.append(word)
    return tuple(options), tuple(playbooks)


def syntax_check_groups(blocks: list[CommandBlock]) -> dict[tuple[str, ...], tuple[list[str], list[str]]]:
    """The ansible-playbook commands of BLOCKS grouped by their options: options -> (playbooks, where)."""
    groups: dict[tuple[str, ...], tuple[list[str], list[str]]] = {}
    for block in blocks:
        for argv in block.ansible_playbook_commands():
            options, playbooks = split_playbooks(argv)
            found, where = groups.setdefault(options, ([], []))
            found += [p for p in playbooks if p not in found]
            where += [block.where] if block.where not in where else []
    return groups
