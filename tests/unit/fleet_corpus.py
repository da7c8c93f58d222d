"""Test helper: serve REAL upstream resolutions (the conformance corpus) to placement.

``CorpusEngine`` answers placement's ``resolve(overrides)`` calls with records
from ``../shared/upstream/conformance/cases.jsonl.gz``: the recipes site's own
output for one model/variant/strategy/hardware/features selection, picked by
node count, PD pool view (nodes, rank, parallelism) or Mooncake instance. A PD
view for rank ``r`` is composed from the records that carry that role at that
rank, exactly as the engine composes one resolution per rank.
"""

from __future__ import annotations

import functools
import gzip
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Optional

import yaml

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._deployment_spec import DRAIN_DEFAULT_S
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._plan_model import BoundEngine


def drained(argv: list[str], seconds: int = DRAIN_DEFAULT_S) -> list[str]:
    """The site's argv as we run it: an engine that serves the API drains on a planned stop
    (``--shutdown-timeout``, docs/operations.md#drain); a headless rank has no API to drain."""
    if "--headless" in argv or "--shutdown-timeout" in argv or not seconds:
        return list(argv)
    return list(argv) + ["--shutdown-timeout", str(seconds)]


def corpus_path(shared: Path) -> Path:
    return shared / "upstream" / "conformance" / "cases.jsonl.gz"


@functools.lru_cache(maxsize=4)
def _load(path: str, hf_ids: tuple[str, ...]) -> tuple[dict, ...]:
    wanted = set(hf_ids)
    out = []
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            if hf_ids and not any(h in line for h in wanted):
                continue
            case = json.loads(line)
            if case["expect"] == "ok" and (not hf_ids or case["hf_id"] in wanted):
                out.append(case)
    return tuple(out)


def load_cases(shared: Path, hf_ids: Iterable[str] = ()) -> tuple[dict, ...]:
    return _load(str(corpus_path(shared)), tuple(sorted(hf_ids)))


@functools.lru_cache(maxsize=2)
def _profiles(path: str) -> dict:
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)["hardware_profiles"]


def hardware_profiles(shared: Path) -> dict:
    return _profiles(str(shared / "upstream" / "recipes" / "taxonomy.yaml"))


def base_key(case: Mapping[str, Any]) -> tuple:
    return (case["hf_id"], case["variant"], case["strategy"], case["hardware"],
            json.dumps(case["features"]), json.dumps(case["feature_modes"], sort_keys=True),
            case["kv_offload"], json.dumps(case["advanced_args"]))


def _role_request(pd_nodes: Any, role: str) -> Optional[dict]:
    if pd_nodes is None:
        return None
    entry = pd_nodes.get(role)
    if entry is None:
        return {"nodes": None, "rank": 0, "parallelism": None}
    if isinstance(entry, int):
        return {"nodes": entry, "rank": 0, "parallelism": None}
    return {"nodes": entry.get("nodes"), "rank": entry.get("rank", 0), "parallelism": entry.get("parallelism")}


def with_docker(case: Mapping[str, Any]) -> dict:
    out = dict(case["output"])
    out["docker"] = case["docker"]
    return out


class CorpusEngine:
    """All corpus records of one selection, answering placement's per-rank views."""

    def __init__(self, cases: Iterable[Mapping[str, Any]], profiles: Mapping[str, Any]) -> None:
        self.cases = list(cases)
        if not self.cases:
            raise LookupError("no corpus cases for this selection")
        first = self.cases[0]
        self.hardware = first["hardware"]
        self.profile = profiles.get(self.hardware)
        self.calls: list[dict] = []

    @classmethod
    def for_selection(cls, all_cases: Iterable[Mapping[str, Any]], profiles: Mapping[str, Any],
                      **match: Any) -> CorpusEngine:
        picked = [c for c in all_cases if all(c.get(k) == v for k, v in match.items())]
        keys = {base_key(c) for c in picked}
        if len(keys) > 1:
            raise LookupError(f"selection {match} matches {len(keys)} corpus selections: narrow it")
        return cls(picked, profiles)

    def bind(self, _decl: Any = None) -> BoundEngine:
        return BoundEngine(resolve=self.resolve, hardware_profile=self.profile, hardware_id=self.hardware,
                           selection={"strategy": self.cases[0]["strategy"], "hardware": self.hardware,
                                      "variant": self.cases[0]["variant"]})

    def _one(self, predicate: Any, what: str) -> Mapping[str, Any]:
        for case in self.cases:
            if predicate(case):
                return case
        raise LookupError(f"no corpus record for {what}")

    def resolve(self, overrides: Mapping[str, Any]) -> Mapping[str, Any]:
        self.calls.append(dict(overrides))
        if "pd_nodes" in overrides:
            return self._pd(overrides["pd_nodes"])
        if "kv_instances" in overrides:
            kv = overrides["kv_instances"]
            nodes = overrides.get("node_count", 1)
            case = self._one(lambda c: c["deploy_type"] == "kv_store_lb"
                             and c["output"]["nodeCount"] == nodes
                             and c["output"]["instances"] == kv["count"]
                             and c["output"]["currentInstance"] == kv["current"], f"kv {overrides}")
            return with_docker(case)
        if "node_count" in overrides:
            count = overrides["node_count"]
            case = self._one(lambda c: c["node_count"] == count and c["pd_nodes"] is None
                             and c["kv_instances"] is None
                             and c["output"].get("nodeCount", 1) == count, f"node_count {count}")
            return with_docker(case)
        case = self._one(lambda c: c["node_count"] == 1 and c["pd_nodes"] is None
                         and c["kv_instances"] is None, "the default view")
        return with_docker(case)

    @staticmethod
    def _sane(case: Mapping[str, Any]) -> bool:
        """Skip edge records whose requested rank lies outside the pool (upstream clamps them)."""
        for role in ("prefill", "decode"):
            req = _role_request(case["pd_nodes"], role)
            if req and req["nodes"] is not None and req["rank"] >= max(1, req["nodes"]):
                return False
        return case["kv_instances"] is None

    def _effective(self, role: str, want: dict) -> tuple:
        """(nodes, rank, parallelism) as the output states it; a request without
        parallelism means the recipe's default, read from records that set none."""
        parallelism = want["parallelism"]
        if parallelism is None:
            for case in self.cases:
                req = _role_request(case["pd_nodes"], role)
                if req and req["parallelism"] is None and case["output"].get(role, {}).get("nodes") == want["nodes"]:
                    parallelism = case["output"][role]["parallelism"]
                    break
        return (want["nodes"], want["rank"], parallelism)

    @staticmethod
    def _view(case: Mapping[str, Any], role: str) -> tuple:
        out = case["output"].get(role) or {}
        return (out.get("nodes"), out.get("currentNode"), out.get("parallelism"))

    def _pd(self, pd_nodes: Any) -> Mapping[str, Any]:
        if pd_nodes is None:
            return with_docker(self._one(lambda c: c["pd_nodes"] is None and c["kv_instances"] is None,
                                         "co-located PD"))
        pool = [c for c in self.cases if c["deploy_type"] == "pd_cluster" and c["pd_nodes"] and self._sane(c)]
        want = {role: self._effective(role, _role_request(pd_nodes, role)) for role in ("prefill", "decode")}
        parts = {}
        for role in ("prefill", "decode"):
            found = [c for c in pool if self._view(c, role) == want[role]]
            if not found:
                raise LookupError(f"no corpus record for {role} {want[role]}")
            parts[role] = found[0]
        shapes = [c for c in pool
                  if all(self._view(c, r)[::2] == want[r][::2] for r in ("prefill", "decode"))]
        if not shapes:
            raise LookupError(f"no corpus record with the router for {want}")
        shape = shapes[0]
        out = dict(shape["output"])
        docker = dict(shape["docker"])
        processes = dict(docker["processes"])
        for role, case in parts.items():
            out[role] = case["output"][role]
            processes[role] = case["docker"]["processes"][role]
        docker["processes"] = processes
        out["docker"] = docker
        return out
