# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Acceptance after a deploy: what to ask a deployed fleet, and what its answers prove.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

In: ``plan.json`` (the compiled plan's ``deployments``). Out, per deployment:

* :func:`acceptance_checks`: the requests to send and the facts to read: chat
  probes through the front door and to every engine (the first request to an
  engine pays for its compilation and warms it), the ranks of each multi-node
  group, the prefill/decode pairs whose KV transfer must be seen;
* :func:`acceptance_verdict`: from what the playbook observed (HTTP answers,
  ``ss`` and ``docker top`` output, decode ``/metrics`` before and after), the
  report: one row per check, passed or failed with the reason, and the
  first-request latencies.

Nothing here talks to a host; roles/acceptance sends the requests.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._argv_tools import flag_value
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._prometheus_text import metric_sum

#: The fixed question every probe asks.
PROMPT = "Reply with one word: is this vLLM deployment serving?"
#: The filler that makes the PD probe longer than one KV block (the transfer moves whole blocks).
_PD_FILLER = ("The prefill engine computes this prompt's KV cache and the decode engine must pull it "
              "over the KV connector instead of computing it again. ")
#: Words of the PD probe: enough for several KV blocks (16 tokens on GPUs, up to 128 on CPUs)
#: yet short of a small --max-model-len.
PD_PROMPT_WORDS = 96
#: The decode engine's counter of bytes pulled over NIXL (vLLM's NixlConnector metrics).
NIXL_BYTES = "vllm:nixl_bytes_transferred_sum"
_SS_PID = re.compile(r"pid=([0-9]+)")
_DIGITS = re.compile(r"[0-9]+")


def _api_base(proc: Mapping[str, Any]) -> Optional[str]:
    url = proc.get("health_url")
    return url[: -len("/health")] if isinstance(url, str) and url.endswith("/health") else None


def pd_prompt(max_model_len: Optional[int]) -> str:
    """The PD probe: :data:`PROMPT` after filler of :data:`PD_PROMPT_WORDS` words, fewer when
    ``--max-model-len`` is small (a word is one to four tokens, even with a small vocabulary)."""
    words = PD_PROMPT_WORDS if not max_model_len else max(8, min(PD_PROMPT_WORDS, max_model_len // 8))
    filler = (_PD_FILLER.split() * (words // len(_PD_FILLER.split()) + 1))[:words]
    return " ".join(filler) + " " + PROMPT


def _engine_probe(deployment: str, proc: Mapping[str, Any], model: str) -> dict[str, Any]:
    return {"deployment": deployment, "target": proc["unit"], "host": proc["host"], "role": proc.get("role"),
            "url": f"{_api_base(proc)}/v1/chat/completions", "model": model, "unit": proc["unit"]}


def _groups(engines: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Multi-node groups: per restart group with ranks above 0, its head (rank 0) and followers."""
    by_group: dict[str, list[Mapping[str, Any]]] = {}
    for proc in engines:
        by_group.setdefault(proc.get("restart_group") or proc["unit"], []).append(proc)
    groups = []
    for name, procs in sorted(by_group.items()):
        ranks = sorted(procs, key=lambda p: p.get("rank") or 0)
        if len(ranks) < 2 or not ranks[0].get("container"):
            continue
        head, followers = ranks[0], ranks[1:]
        groups.append({
            "group": name,
            "head": {"unit": head["unit"], "host": head["host"], "address": head.get("address"),
                     "container": head["container"], "rank": head.get("rank") or 0},
            "followers": [{"unit": f["unit"], "host": f["host"], "address": f.get("address"),
                           "container": f.get("container"), "rank": f.get("rank")} for f in followers],
        })
    return groups


def _connector(argv: Sequence[str]) -> Optional[str]:
    """The ``kv_connector`` of an engine's ``--kv-transfer-config`` (None without a readable one)."""
    try:
        config = json.loads(flag_value(argv, "--kv-transfer-config") or "null")
    except ValueError:
        return None
    connector = config.get("kv_connector") if isinstance(config, dict) else None
    return connector if isinstance(connector, str) else None


def _pd_pairs(engines: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    prefill = [p for p in engines if p.get("role") == "prefill" and _api_base(p)]
    decode = [p for p in engines if p.get("role") == "decode" and _api_base(p)]
    if not prefill or not decode:
        return []
    return [{"decode": d["unit"], "decode_host": d["host"], "metrics_url": d.get("metrics_url"),
             "prefill": [p["unit"] for p in prefill], "prefill_hosts": sorted({p["host"] for p in prefill}),
             "connector": _connector(d.get("argv") or []),
             "ucx_tls": (d.get("env") or {}).get("UCX_TLS")} for d in decode]


def _deployment_checks(name: str, dep: Mapping[str, Any], client: Optional[str]) -> Optional[dict[str, Any]]:
    procs = dep.get("processes", [])
    engines = [p for p in procs if p.get("kind") == "engine"]
    api = [p for p in engines if _api_base(p)]
    routers = [p for p in procs if p.get("kind") == "router"]
    if not api:
        return None
    served = api[0].get("served") or {}
    model = served.get("name") or served.get("model") or ""
    max_len = flag_value(api[0].get("argv") or [], "--max-model-len")
    pairs = _pd_pairs(engines)
    door = (routers or api)[0]
    return {
        "deployment": name,
        "deploy_type": dep.get("deploy_type"),
        "client": client or door["host"],
        "model": model,
        "prompt": pd_prompt(int(max_len) if max_len and _DIGITS.fullmatch(max_len) else None) if pairs else PROMPT,
        "front_door": {"deployment": name, "target": "front door", "host": door["host"], "unit": door["unit"],
                       "url": f"{dep.get('endpoint')}/v1/chat/completions", "model": model,
                       "role": "router" if routers else door.get("role")},
        "engines": [_engine_probe(name, p, model) for p in api],
        "groups": _groups(engines),
        "pd_pairs": pairs,
        # through the router, one PD probe per decode engine and at least one per prefill engine
        "front_probes": max(1, len(pairs), len({u for pair in pairs for u in pair["prefill"]})),
    }


def acceptance_checks(plan: Mapping[str, Any], *, client: Optional[str] = None) -> dict[str, Any]:
    """What acceptance asks and reads, per deployment (``deployments``) and as the flat lists the
    role loops over, each item carrying its ``deployment``, ``client`` (the inventory host it is
    sent from) and, for requests, ``prompt`` and ``key_unit`` (the engine whose API key applies):

    * ``warm``: every engine's probe, twice (``n`` 1 and 2);
    * ``front``: the front door's probe, ``n`` 1..front_probes;
    * ``metrics``: every PD pair's decode ``/metrics``;
    * ``ranks``: every rank of every multi-node group (``host``, ``container``).

    ``client``: one host for every request; default, per deployment, its router's host, else its
    first engine's (a host that reaches every engine of its deployment).
    """
    deployments = [c for name, dep in sorted(plan.get("deployments", {}).items())
                   if (c := _deployment_checks(name, dep, client)) is not None]
    warm: list[dict[str, Any]] = []
    front: list[dict[str, Any]] = []
    metrics: list[dict[str, Any]] = []
    ranks: list[dict[str, Any]] = []
    for check in deployments:
        common = {"deployment": check["deployment"], "client": check["client"]}
        key_unit = check["engines"][0]["unit"]
        for probe in check["engines"]:
            warm.extend({**probe, **common, "prompt": check["prompt"], "key_unit": probe["unit"], "n": n}
                        for n in (1, 2))
        front.extend({**check["front_door"], **common, "prompt": check["prompt"], "key_unit": key_unit, "n": n}
                     for n in range(1, check["front_probes"] + 1))
        metrics.extend({**common, "decode": pair["decode"], "metrics_url": pair["metrics_url"]}
                       for pair in check["pd_pairs"])
        ranks.extend({**common, **rank} for group in check["groups"]
                     for rank in [group["head"], *group["followers"]])
    return {"deployments": deployments, "warm": warm, "front": front, "metrics": metrics, "ranks": ranks}


def container_pids(docker_top: str) -> set[int]:
    """Pids from ``docker top CONTAINER -eo pid`` output (a header line, then one pid a line)."""
    return {int(word) for word in docker_top.split() if _DIGITS.fullmatch(word)}


def _ss_rows(ss_output: str) -> Iterable[tuple[str, str, str, set[int]]]:
    """(state, local, peer, pids) per line of ``ss -Htnp`` / ``ss -Htlnp`` output
    (state recv-q send-q local peer [process])."""
    for line in ss_output.splitlines():
        words = line.split()
        if len(words) >= 5:
            yield words[0], words[3], words[4], {int(pid) for pid in _SS_PID.findall(line)}


def _split_endpoint(endpoint: str) -> tuple[str, int]:
    address, _colon, port = endpoint.rpartition(":")
    address = address.strip("[]")
    address = address.split("%", 1)[0]
    if address.startswith("::ffff:"):
        address = address[len("::ffff:"):]
    return address, int(port) if _DIGITS.fullmatch(port) else -1


def listening_ports(ss_listen: str, pids: set[int]) -> set[int]:
    """Ports the given processes listen on, from ``ss -Htlnp``."""
    return {_split_endpoint(local)[1] for state, local, _peer, owners in _ss_rows(ss_listen)
            if state == "LISTEN" and owners & pids}


def peer_links(ss_tcp: str, pids: set[int], address: str, ports: set[int]) -> list[str]:
    """``peer`` endpoints of established connections (``ss -Htnp``) of ``pids`` to ``address`` on
    one of ``ports``."""
    links = []
    for state, _local, peer, owners in _ss_rows(ss_tcp):
        peer_address, peer_port = _split_endpoint(peer)
        if state == "ESTAB" and owners & pids and peer_address == address and peer_port in ports:
            links.append(peer)
    return links


def _row(deployment: str, check: str, target: str, ok: bool, detail: str) -> dict[str, Any]:
    return {"deployment": deployment, "check": check, "target": target, "result": "passed" if ok else "FAILED",
            "detail": detail}


def probe_row(deployment: str, check: str, probe: Mapping[str, Any], answer: Mapping[str, Any]) -> dict[str, Any]:
    """A chat probe's row: status 200, at least one completion token, the plan's model name."""
    body = answer.get("json") if isinstance(answer.get("json"), Mapping) else {}
    tokens = ((body.get("usage") or {}).get("completion_tokens") or 0) if body else 0
    status = answer.get("status")
    seconds = answer.get("elapsed")
    model = body.get("model") if body else None
    problems = []
    if status != 200:
        problems.append(f"HTTP {status}: {str(answer.get('msg') or '')[:300]}")
    elif tokens < 1:
        problems.append("no completion token")
    if status == 200 and model != probe.get("model"):
        problems.append(f"served model {model!r}, the plan serves {probe.get('model')!r}")
    detail = "; ".join(problems) or f"{tokens} token(s) from {model} in {seconds} s"
    row = _row(deployment, check, f"{probe.get('target')} ({probe.get('url')})", not problems, detail)
    row["seconds"] = seconds
    return row


def warmup_row(deployment: str, probe: Mapping[str, Any], first: Mapping[str, Any],
               second: Mapping[str, Any]) -> dict[str, Any]:
    """An engine's warm-up: its first request after the deploy (compiles, fills caches), then a
    second one; both must answer like :func:`probe_row`."""
    cold, warm = probe_row(deployment, "warm-up", probe, first), probe_row(deployment, "warm-up", probe, second)
    ok = cold["result"] == warm["result"] == "passed"
    detail = (f"first request {cold['seconds']} s, then {warm['seconds']} s" if ok
              else cold["detail"] if cold["result"] != "passed" else warm["detail"])
    row = _row(deployment, "warm-up", cold["target"], ok, detail)
    row.update(first_s=cold["seconds"], warm_s=warm["seconds"])
    return row


def group_rows(deployment: str, group: Mapping[str, Any], observed: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Rows proving each follower is alive and joined to the current head.

    ``observed``: ``{unit: {"top": docker top output, "ss_listen": ss -Htlnp, "ss_tcp": ss -Htnp}}``.
    A follower belongs to the serving group when its engine holds an established connection to
    a port that the head's current engine process listens on.
    """
    head = group["head"]
    seen_head = observed.get(head["unit"]) or {}
    head_pids = container_pids(seen_head.get("top") or "")
    head_ports = listening_ports(seen_head.get("ss_listen") or "", head_pids)
    rows = [_row(deployment, "rank alive", f"{head['unit']} on {head['host']} (rank {head['rank']})",
                 bool(head_pids), f"{len(head_pids)} process(es), listening on {sorted(head_ports)}"
                 if head_pids else f"container {head['container']} is not running")]
    for follower in group["followers"]:
        seen = observed.get(follower["unit"]) or {}
        pids = container_pids(seen.get("top") or "")
        target = f"{follower['unit']} on {follower['host']} (rank {follower['rank']})"
        if not pids:
            rows.append(_row(deployment, "rank alive", target, False,
                             f"container {follower.get('container')} is not running"))
            continue
        links = peer_links(seen.get("ss_tcp") or "", pids, str(head.get("address")), head_ports)
        rows.append(_row(deployment, "rank in group", target, bool(links),
                         f"{len(links)} connection(s) to the head's engine ({head['host']} {head.get('address')})"
                         if links else f"no connection to any port of the head's current engine "
                         f"({head['host']} {head.get('address')}, ports {sorted(head_ports)}): a stale "
                         "or lost rank"))
    return rows


def pd_rows(deployment: str, pairs: Sequence[Mapping[str, Any]],
            before: Mapping[str, str], after: Mapping[str, str]) -> list[dict[str, Any]]:
    """Rows proving KV moved: each decode's NIXL byte counter grew over the PD probes.

    ``before``/``after``: decode unit -> its ``/metrics`` text. A connector without a known counter
    is reported, not failed.
    """
    rows = []
    for pair in pairs:
        target = f"{' '.join(pair['prefill'])} -> {pair['decode']}"
        transport = f"{pair.get('connector') or 'no kv_connector'}" + \
            (f", UCX_TLS={pair['ucx_tls']}" if pair.get("ucx_tls") else "")
        if pair.get("connector") != "NixlConnector":
            rows.append(_row(deployment, "KV transfer", target, True,
                             f"not measured: {transport} has no transfer counter we read"))
            continue
        start = metric_sum(before.get(pair["decode"], ""), NIXL_BYTES)
        end = metric_sum(after.get(pair["decode"], ""), NIXL_BYTES)
        moved = (end or 0.0) - (start or 0.0)
        ok = end is not None and moved > 0
        detail = f"{int(moved)} bytes over {transport}" if ok else (
            f"decode {pair['decode']} pulled no KV cache from prefill ({', '.join(pair['prefill_hosts'])}) "
            f"over {transport}: {NIXL_BYTES} " + ("absent" if end is None else f"{start} -> {end}")
            + " during the probes (the transfer failed or stalled, or decode recomputed the prompt)")
        row = _row(deployment, "KV transfer", target, ok, detail)
        row["bytes"] = int(moved) if end is not None else None
        rows.append(row)
    return rows


def _results(registered: Any) -> list[Mapping[str, Any]]:
    """The per-item results of a registered loop (``{"results": [...]}``), or the list itself."""
    if isinstance(registered, Mapping):
        registered = registered.get("results", [])
    return [r for r in registered or [] if isinstance(r, Mapping)]


def acceptance_report(checks: Mapping[str, Any], *, warm: Any = (), front: Any = (), ranks: Any = (),
                      metrics_before: Any = (), metrics_after: Any = ()) -> dict[str, Any]:
    """The report from the registered loops of roles/acceptance over :func:`acceptance_checks`' lists:
    ``warm`` and ``front`` (uri results), ``ranks`` (shell results: ``docker top``, ``---``,
    ``ss -Htlnp``, ``---``, ``ss -Htnp``), ``metrics_before``/``metrics_after`` (uri results with
    content). Each result carries its loop ``item``.

    Returns ``{rows, table, failed, failures (one line per failed row), deployments: {name: {rows, failed}}}``.
    """
    warm_by = {(r["item"]["deployment"], r["item"]["unit"], r["item"]["n"]): r for r in _results(warm)}
    front_by: dict[str, list[Mapping[str, Any]]] = {}
    for result in _results(front):
        front_by.setdefault(result["item"]["deployment"], []).append(result)
    rank_by = {(r["item"]["deployment"], r["item"]["unit"]): r for r in _results(ranks)}
    before = {(r["item"]["deployment"], r["item"]["decode"]): r.get("content", "") for r in _results(metrics_before)}
    after = {(r["item"]["deployment"], r["item"]["decode"]): r.get("content", "") for r in _results(metrics_after)}
    rows: list[dict[str, Any]] = []
    per: dict[str, dict[str, Any]] = {}
    for check in checks.get("deployments", []):
        name = check["deployment"]
        mine = [warmup_row(name, probe, warm_by.get((name, probe["unit"], 1), {}),
                           warm_by.get((name, probe["unit"], 2), {})) for probe in check["engines"]]
        mine.extend(probe_row(name, "front door", check["front_door"], answer)
                    for answer in front_by.get(name) or [{"msg": "not asked"}])
        for group in check["groups"]:
            observed = {}
            for rank in [group["head"], *group["followers"]]:
                out = (rank_by.get((name, rank["unit"])) or {}).get("stdout", "")
                top, _sep, rest = out.partition("\n---\n")
                listen, _sep, tcp = rest.partition("\n---\n")
                observed[rank["unit"]] = {"top": top, "ss_listen": listen, "ss_tcp": tcp}
            mine.extend(group_rows(name, group, observed))
        if check["pd_pairs"]:
            decodes = [p["decode"] for p in check["pd_pairs"]]
            mine.extend(pd_rows(name, check["pd_pairs"], {d: before.get((name, d), "") for d in decodes},
                                {d: after.get((name, d), "") for d in decodes}))
        per[name] = {"rows": mine, "failed": [r for r in mine if r["result"] != "passed"]}
        rows.extend(mine)
    failed = [r for r in rows if r["result"] != "passed"]
    return {"rows": rows, "table": summary_table(rows), "failed": failed, "deployments": per,
            "failures": [" | ".join(str(r[k]) for k in ("deployment", "check", "target", "detail")) for r in failed]}


def summary_table(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The report as aligned text lines (the play prints them)."""
    head = ("deployment", "check", "target", "result", "detail")
    table = [head] + [tuple(str(row.get(k, "")) for k in head) for row in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(head) - 1)]
    return ["  ".join(cell.ljust(widths[i]) if i < len(widths) else cell for i, cell in enumerate(line)).rstrip()
            for line in table]


def nixl_grew(before: str, after: str) -> bool:
    """True when the decode's NIXL byte counter is higher in ``after`` than in ``before``."""
    end = metric_sum(after or "", NIXL_BYTES)
    return end is not None and end > (metric_sum(before or "", NIXL_BYTES) or 0.0)
