"""The Ansible examples the collection documents: plugin EXAMPLES and task or play blocks of the docs.

tests/unit/test_install.py runs each against the built tarball installed in a temporary collections
path, outside any checkout. An example that cannot run there (it needs a deploy host, root, or the
result of an earlier task) starts with the line ``# not run by tests/unit/test_install.py: <why>``;
the reason is required.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

EXAMPLE_MARKER = "# not run by tests/unit/test_install.py:"
FENCE = re.compile(r"^```([\w-]*)[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)


@dataclass(frozen=True)
class Example:
    where: str  # file:line, or the plugin file
    text: str  # YAML: a list of tasks, or of plays

    @property
    def skip_reason(self) -> str | None:
        """The reason after the marker, '' when the marker has none, None when the example runs."""
        first = self.text.strip().split("\n", 1)[0].strip()
        return first[len(EXAMPLE_MARKER):].strip() if first.startswith(EXAMPLE_MARKER) else None

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
