# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""PLAN.md's topology picture: one Mermaid flowchart per deployment.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

Front door -> router -> pools / instances / replicas (subgraphs) -> ranks -> hosts, with the
ports each process listens on, and the Mooncake services. It reads the placed processes (the
rows of PLAN.md's table), the router's argv (where it sends requests) and the endpoint; it
decides nothing about placement. Like ranks are one box with a rank range and a summarized host
list once there are more than ``MAX_SINGLE`` of them, so a 64-host deployment stays a handful
of boxes. Supervision units (group watchdogs) listen on nothing and are left to the table.

Safety: node ids are generated here (``n1``, ``g1``, ``fd``); every label is a quoted string in
which each character that Mermaid, HTML or Markdown could read as syntax is a Mermaid entity
(``#quot;``, ``#lt;``, ``#96;`` ...), so an inventory name cannot break out of its label, add
nodes, inject HTML or end the Markdown code fence.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Optional
from urllib.parse import urlsplit

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._plan_model import DeploymentPlan, Process

__all__ = ["MAX_SINGLE", "deployment_diagram", "escape", "number_ranges", "shown_name"]

#: More like ranks than this become one box with a rank range and a summarized host list.
MAX_SINGLE = 3
#: Host names a summarized box lists (the first ones and the last one).
MAX_HOSTS_SHOWN = 3
#: Longer names are cut (the table below the diagram has them whole).
MAX_NAME_CHARS = 40
BR = "<br/>"
NBSP = "#160;"
POOLS = ("prefill", "decode")
PORT_NAMES = {"nixl-side-channel": "NIXL", "mp-master": "master", "router": "HTTP",
              "router-metrics": "metrics", "mooncake-master-rpc": "rpc"}
SERVICE_TITLES = {"router": "router", "mooncake_master": "Mooncake master", "mooncake_store": "Mooncake store"}
#: Characters that are syntax somewhere (Mermaid strings and entities, HTML labels, Markdown
#: fences and strings, edge labels) -> Mermaid entity codes.
_ESCAPES = {'"': "#quot;", "#": "#35;", "&": "#amp;", "<": "#lt;", ">": "#gt;", "`": "#96;",
            "%": "#37;", "|": "#124;", "\\": "#92;", "*": "#42;", "_": "#95;", "~": "#126;"}
_WORKER_LINKS = ("mp-master", "dp-rpc")


def escape(text: str) -> str:
    """``text`` for a quoted Mermaid label: syntax characters as entities, unprintables as ``?``."""
    return "".join(_ESCAPES.get(c, c) if c.isprintable() else "?" for c in text)


def shown_name(name: str) -> str:
    """A name as its box shows it (cut after ``MAX_NAME_CHARS``), before escaping."""
    return name if len(name) <= MAX_NAME_CHARS else name[:MAX_NAME_CHARS - 1] + "…"


def number_ranges(values: Iterable[int]) -> str:
    """``0-3,5``: sorted values, consecutive runs folded; ``-`` for none."""
    runs: list[list[int]] = []
    for item in sorted(set(values)):
        if runs and item == runs[-1][1] + 1:
            runs[-1][1] = item
        else:
            runs.append([item, item])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs) or "-"


@dataclass(frozen=True)
class _Box:
    """One node: a process, or several like processes."""

    ident: str
    procs: tuple[Process, ...]
    #: Id of the subgraph it sits in ("" at the top level): the subgraph's title names the instance.
    cluster: str


def _family(proc: Process) -> str:
    """What like processes share: an engine's pool without its number, else the kind."""
    if proc.kind != "engine":
        return proc.kind
    return re.sub(r"[0-9]+$", "", proc.pool or "") or "group"


def _purposes(proc: Process) -> tuple[str, ...]:
    return tuple(sorted({port.purpose for port in proc.ports}))


def _ports(procs: Sequence[Process], purposes: Optional[Sequence[str]] = None) -> list[str]:
    """``["api :8001", "NIXL :5557-5564"]``: the ports of ``procs`` (of ``purposes``), by purpose."""
    by_purpose: dict[str, set[int]] = {}
    for proc in procs:
        for port in proc.ports:
            if purposes is None or port.purpose in purposes:
                by_purpose.setdefault(port.purpose, set()).add(port.number)
    return [f"{PORT_NAMES.get(p, p)} :{number_ranges(n)}" for p, n in by_purpose.items()]


def _hosts(procs: Sequence[Process]) -> str:
    names = list(dict.fromkeys(p.host for p in procs))
    if len(names) == 1:
        return f"{shown_name(names[0])} · {procs[0].address}"
    if len(names) > MAX_HOSTS_SHOWN + 1:
        names = names[:MAX_HOSTS_SHOWN - 1] + ["…", names[-1]]
    count = len({p.host for p in procs})
    return f"{count} hosts: " + ", ".join(n if n == "…" else shown_name(n) for n in names)


def _gpus(procs: Sequence[Process]) -> str:
    sets = {number_ranges(p.gpus) for p in procs if p.gpus}
    if len(sets) != 1:
        return ""
    return f"GPUs {sets.pop()}" + (" each" if len(procs) > 1 else "")


def _plural(word: str, values: Sequence[int]) -> str:
    return f"{word}{'s' if len(values) > 1 else ''} {number_ranges(values)}"


def _title(box: _Box) -> str:
    first = box.procs[0]
    if first.kind != "engine":
        title = SERVICE_TITLES.get(first.kind, first.kind)
        return title + (f" ×{len(box.procs)}" if len(box.procs) > 1 else "")
    ranks = sorted({p.rank for p in box.procs if p.rank is not None})
    instances = sorted({p.instance for p in box.procs if p.instance is not None})
    if first.role in ("replica", "instance") and instances:
        title = _plural(first.role, instances)
    else:
        title = {"single": "engine"}.get(first.role, first.role)
        if instances and not box.cluster:
            title = f"{_plural('instance', instances)} · {title}"
    if ranks and not (ranks == [0] and first.role in ("single", "replica", "instance")):
        title += " · " + _plural("rank", ranks)
    return title


def _label(box: _Box) -> str:
    """Title, hosts, GPUs, then one port a line (a no-break space keeps ``api :8001`` whole)."""
    lines = [escape(line) for line in (_title(box), _hosts(box.procs), _gpus(box.procs)) if line]
    lines += [escape(line).replace(" :", NBSP + ":") for line in _ports(box.procs)]
    return BR.join(lines)


def _boxes(plan: DeploymentPlan) -> tuple[list[_Box], dict[str, str]]:
    """The boxes of a deployment (in drawing order) and the subgraphs (id -> title)."""
    order = {"router": 0, "prefill": 1, "decode": 2, "mooncake_master": 8, "mooncake_store": 9}
    procs = sorted((p for p in plan.processes if p.kind != "watchdog"),
                   key=lambda p: (order.get(_family(p), 5), _family(p), p.instance or 0, p.rank or 0, p.host))
    families: dict[str, list[Process]] = {}
    for proc in procs:
        families.setdefault(_family(proc), []).append(proc)
    boxes: list[_Box] = []
    clusters: dict[str, str] = {}
    for family, members in families.items():
        instances = sorted({p.instance for p in members if p.instance is not None})
        merged = len(instances) > MAX_SINGLE
        buckets: dict[Optional[int], list[Process]] = {}
        for proc in members:
            buckets.setdefault(None if merged else proc.instance, []).append(proc)
        for bucket, bucket_procs in buckets.items():
            like: dict[tuple[object, ...], list[Process]] = {}
            for proc in bucket_procs:
                like.setdefault((proc.role, proc.rank in (None, 0), _purposes(proc)), []).append(proc)
            parts = [part for group in like.values()
                     for part in ([group] if len(group) > MAX_SINGLE else [[proc] for proc in group])]
            cluster = ""
            if bucket_procs[0].kind == "engine" and (family in POOLS or len(parts) > 1):
                cluster = f"g{len(clusters) + 1}"
                clusters[cluster] = _cluster_title(family, bucket, instances if merged else [], len(bucket_procs))
            boxes += [_Box(f"n{len(boxes) + index + 1}", tuple(part), cluster) for index, part in enumerate(parts)]
    return boxes, clusters


def _cluster_title(family: str, bucket: Optional[int], merged: Sequence[int], size: int) -> str:
    if family in POOLS:
        return f"{family} pool"
    if merged:
        return f"{_plural(family if family != 'group' else 'instance', merged)} · {size // len(merged)} ranks each"
    if bucket is not None:
        return f"{family} {bucket}"
    return "multi-node group"


def _owner(boxes: Sequence[_Box], host: str, port: int) -> Optional[_Box]:
    """The box of the process listening on ``host:port`` (an address), router first."""
    for box in sorted(boxes, key=lambda b: b.procs[0].kind != "router"):
        for proc in box.procs:
            if proc.address.lower() == host.lower() and any(p.number == port for p in proc.ports):
                return box
    return None


def _url(text: str) -> Optional[tuple[str, int]]:
    if not text.startswith(("http://", "https://")):
        return None
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return None
    return (parts.hostname, port) if parts.hostname and port else None


def _edges(plan: DeploymentPlan, boxes: Sequence[_Box], clusters: dict[str, str]) -> list[str]:
    edges: list[str] = []

    def add(src: str, arrow: str, label: str, dst: str) -> None:
        line = f'{src} {arrow}|"{escape(label)}"| {dst}'
        if line not in edges:
            edges.append(line)

    front = _url(plan.endpoint or "")
    target = _owner(boxes, *front) if front else None
    if front and target:
        add("fd", "-->", f"HTTP :{front[1]}", target.ident)
    for router in (b for b in boxes if b.procs[0].kind == "router"):
        sent: dict[str, set[int]] = {}
        for url in filter(None, (_url(arg) for p in router.procs for arg in p.argv)):
            owner = _owner(boxes, *url)
            if owner is not None and owner is not router:
                sent.setdefault(owner.ident, set()).add(url[1])
        for ident, ports in sent.items():
            add(router.ident, "-->", f"HTTP :{number_ranges(ports)}", ident)
    for cluster in clusters:
        inside = [b for b in boxes if b.cluster == cluster]
        heads = [b for b in inside if all(p.rank == 0 for p in b.procs)]
        for box in inside:
            if any((p.rank or 0) > 0 for p in box.procs):
                for head in heads:
                    add(box.ident, "-->", " · ".join(_ports(head.procs, _WORKER_LINKS)) or "rank 0", head.ident)
    pools = {clusters[c].split()[0]: c for c in clusters if clusters[c] in ("prefill pool", "decode pool")}
    if len(pools) == 2:
        nixl = any(p.purpose == "nixl-side-channel" for b in boxes for q in b.procs for p in q.ports)
        add(pools["prefill"], "-.->", "KV cache" + (" via NIXL" if nixl else ""), pools["decode"])
    for master in (b for b in boxes if b.procs[0].kind == "mooncake_master"):
        for user in (b for b in boxes if b.procs[0].kind in ("engine", "mooncake_store")):
            add(user.ident, "-.->", "Mooncake " + " · ".join(_ports(master.procs)), master.ident)
    return edges


def deployment_diagram(plan: DeploymentPlan) -> str:
    """The Mermaid flowchart of one deployment (the text inside a ```` ```mermaid ```` fence)."""
    boxes, clusters = _boxes(plan)
    lines = ["flowchart LR"]
    if plan.endpoint:
        lines.append(f'  fd(["{escape("clients")}{BR}{escape(plan.endpoint)}"])')
    for box in (b for b in boxes if not b.cluster):
        lines.append(f'  {box.ident}["{_label(box)}"]')
    for cluster, title in clusters.items():
        lines.append(f'  subgraph {cluster} ["{escape(title)}"]')
        lines += [f'    {box.ident}["{_label(box)}"]' for box in boxes if box.cluster == cluster]
        lines.append("  end")
    lines += ["  " + edge for edge in _edges(plan, boxes, clusters)]
    return "\n".join(lines) + "\n"
