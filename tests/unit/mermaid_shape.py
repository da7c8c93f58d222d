"""Test support (not a test module): a structural check of the Mermaid flowcharts PLAN.md holds.

It accepts exactly the statements ``_plan_diagram`` writes (a ``flowchart LR`` header, nodes
``id["label"]`` / ``id(["label"])``, ``subgraph id ["title"]`` ... ``end``, edges
``a -->|"label"| b`` / ``a -.->|"label"| b``) and checks what keeps a diagram whole whatever the
names in it: every label is one quoted string without a raw quote, backtick, ``<``, ``>``, ``%``
or ``|`` (``<br/>`` aside) and with ``#`` only in entity codes; ids are defined once and edges
join defined ids; subgraphs close. The real parser (mmdc) runs in test_plan_diagram_mmdc.py.
"""

from __future__ import annotations

import html
import re

_ID = r"[a-z]+[0-9]*"
_LABEL = r'"((?:[^"`<>%|#\n]|<br/>|#[a-z]+;|#[0-9]+;)*)"'
NODE = re.compile(rf"^ +({_ID})(?:\[{_LABEL}\]|\(\[{_LABEL}\]\))$")
SUBGRAPH = re.compile(rf"^ +subgraph ({_ID}) \[{_LABEL}\]$")
EDGE = re.compile(rf"^ +({_ID}) (?:-->|-\.->)\|{_LABEL}\| ({_ID})$")
FENCE = re.compile(r"^```mermaid\n(.*?)^```$", re.S | re.M)


def decode(label: str) -> str:
    """A label as Mermaid shows it: entities decoded, ``<br/>`` as a line break."""
    text = re.sub(r"#([a-z]+|[0-9]+);", lambda m: html.unescape(
        f"&#{m.group(1)};" if m.group(1).isdigit() else f"&{m.group(1)};"), label.replace("<br/>", "\n"))
    return text.replace("\xa0", " ")


def problems(text: str) -> tuple[list[str], list[str]]:
    """(what is wrong with the flowchart ``text``, its labels decoded)."""
    lines = text.rstrip("\n").split("\n")
    found: list[str] = [] if lines[:1] == ["flowchart LR"] else [f"header {lines[:1]!r}"]
    labels: list[str] = []
    defined: set[str] = set()
    edges: list[tuple[str, str]] = []
    depth = 0
    for number, line in enumerate(lines[1:], 2):
        node, subgraph, edge = NODE.match(line), SUBGRAPH.match(line), EDGE.match(line)
        if node or subgraph:
            match = node or subgraph
            ident = match.group(1)
            if ident in defined:
                found.append(f"line {number}: {ident} defined twice")
            defined.add(ident)
            labels.append(decode(next(g for g in match.groups()[1:] if g is not None)))
            depth += 1 if subgraph else 0
        elif edge:
            edges.append((edge.group(1), edge.group(3)))
            labels.append(decode(edge.group(2)))
        elif line.strip() == "end" and depth > 0:
            depth -= 1
        else:
            found.append(f"line {number}: not a statement of ours: {line!r}")
    found += [f"edge {a} -> {b}: undefined id" for a, b in edges if not {a, b} <= defined]
    found += ["unclosed subgraph"] * depth
    return found, labels


def diagrams(plan_md: str) -> list[str]:
    """The text of each ```` ```mermaid ```` block of a PLAN.md."""
    return FENCE.findall(plan_md)
