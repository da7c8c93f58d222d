# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Reading a Prometheus text exposition (an engine's or router's ``/metrics``).

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

Standard library only: ``status.yml``'s figures (``_monitoring``) and the acceptance's KV-transfer
counters (``_acceptance``) read ``/metrics`` through it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional

__all__ = ["Sample", "metric_sum", "parse_metrics"]


@dataclass(frozen=True)
class Sample:
    name: str
    labels: Mapping[str, str]
    value: float


_NAME_RE = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_LABEL_RE = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(,|\})')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


def parse_metrics(text: str) -> list[Sample]:
    """Samples of a Prometheus text exposition (format 0.0.4); comments and bad lines skipped."""
    samples: list[Sample] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _NAME_RE.match(line)
        if not match:
            continue
        name, rest = match.group(0), line[match.end():]
        labels: dict[str, str] = {}
        if rest.startswith("{"):
            rest = rest[1:]
            if rest.lstrip().startswith("}"):
                rest = rest.lstrip()[1:]
            else:
                while True:
                    label = _LABEL_RE.match(rest)
                    if not label:
                        rest = ""
                        break
                    labels[label.group(1)] = re.sub(r'\\[\\"n]', lambda m: _UNESCAPE[m.group(0)], label.group(2))
                    rest = rest[label.end():]
                    if label.group(3) == "}":
                        break
                    if rest.lstrip().startswith("}"):
                        rest = rest.lstrip()[1:]
                        break
        parts = rest.split()
        if not parts:
            continue
        try:
            value = float(parts[0])
        except ValueError:
            continue
        samples.append(Sample(name, labels, value))
    return samples


def metric_sum(text: str, name: str) -> Optional[float]:
    """The sum of every sample of ``name`` (over its labels); None when there is none."""
    values = [sample.value for sample in parse_metrics(text) if sample.name == name]
    return sum(values) if values else None
