#!/usr/bin/env python
"""Generate each deploy role's README.md from its meta/argument_specs.yml.

    .venv/bin/python tools/role_readme.py          # rewrite roles/*/README.md
    .venv/bin/python tools/role_readme.py --check  # fail when a README is stale (tests/unit/roles/test_deploy.py)

The text before the generated marker (the role's overview, written by hand) is kept;
everything after it is the options table, rebuilt from the argument specs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
ROLES = ("preflight", "image", "weights", "fabric", "engine", "router", "monitoring", "acceptance", "benchmark")
MARKER = "<!-- Generated from meta/argument_specs.yml by tools/role_readme.py: edit the specs, not this table. -->"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _default(spec: dict) -> str:
    if "default" not in spec:
        return "required" if spec.get("required") else "-"
    return "`%s`" % json.dumps(spec["default"])


def options_table(specs: dict) -> str:
    lines = []
    for entry, spec in specs["argument_specs"].items():
        lines += ["", "### Entry point `%s`" % entry, "", _cell(spec.get("short_description", "")), ""]
        if entry != "main" and spec.get("options") == specs["argument_specs"].get("main", {}).get("options"):
            lines.append("Same options as `main`.")
            continue
        lines += ["| variable | type | default | description |", "| --- | --- | --- | --- |"]
        for name, opt in (spec.get("options") or {}).items():
            kind = opt.get("type", "str")
            if kind == "list" and opt.get("elements"):
                kind = "list of %s" % opt["elements"]
            if opt.get("choices"):
                kind += " (%s)" % ", ".join(str(c) for c in opt["choices"])
            desc = opt.get("description", "")
            desc = " ".join(desc) if isinstance(desc, list) else desc
            if opt.get("no_log"):
                desc += " (secret: never logged)"
            lines.append("| `%s` | %s | %s | %s |" % (name, kind, _default(opt), _cell(desc)))
    return "\n".join(lines) + "\n"


def render(role: str) -> str:
    base = REPO / "roles" / role
    specs = yaml.safe_load((base / "meta" / "argument_specs.yml").read_text())
    readme = base / "README.md"
    head = readme.read_text().split(MARKER)[0].rstrip() if readme.exists() else "# vllm_fleet.recipes.%s" % role
    return head + "\n\n" + MARKER + "\n\n## Variables\n" + options_table(specs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="fail when a README differs from what would be generated")
    args = parser.parse_args(argv)
    stale = []
    for role in ROLES:
        text = render(role)
        path = REPO / "roles" / role / "README.md"
        if path.exists() and path.read_text() == text:
            continue
        if args.check:
            stale.append(str(path.relative_to(REPO)))
        else:
            path.write_text(text)
            print("wrote %s" % path.relative_to(REPO))
    if stale:
        print("stale (run tools/role_readme.py): %s" % ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
