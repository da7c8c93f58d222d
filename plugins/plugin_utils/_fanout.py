# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Fleet copy schedules: which host sends a deployment's weights to which, in which round.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

In: the hosts that already hold a verified copy (the origin first) and the hosts
that lack it, in plan order. Out: a ``CopySchedule``, a list of transfers by round.

- **fan-out** (the default): in every round each holder sends to at most
  ``sends_per_round`` hosts that lack the copy, and a receiver that verified its copy
  holds it from the next round on. With one send per round the holders double, so
  N hosts are done after ceil(log2 N) rounds and no host sends more than that many
  copies; every byte still leaves the Hub once (on the origin).
- **star** (what the role did before): the origin sends to every other host,
  ``parallel`` at a time; all N-1 copies leave the origin's NIC.

Each transfer names its fallbacks: the other hosts that hold a verified copy when
its round starts, fewest sends first. A copy that fails is retried from them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

FANOUT = "fanout"
STAR = "star"
METHODS = (FANOUT, STAR)


@dataclass(frozen=True)
class Transfer:
    """One copy: ``sender`` sends to ``receiver`` in ``round`` (1-based)."""

    round: int
    sender: str
    receiver: str
    fallbacks: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"round": self.round, "sender": self.sender, "receiver": self.receiver,
                "fallbacks": list(self.fallbacks)}


@dataclass(frozen=True)
class CopySchedule:
    """Every transfer of one copy, by round; ``holders`` hold a verified copy before round 1."""

    method: str
    holders: tuple[str, ...]
    transfers: tuple[Transfer, ...]

    @property
    def rounds(self) -> int:
        return max((t.round for t in self.transfers), default=0)

    def sends(self) -> dict[str, int]:
        """Planned sends per host (every holder and receiver; 0 for those that send nothing)."""
        counts = {host: 0 for host in (*self.holders, *(t.receiver for t in self.transfers))}
        for transfer in self.transfers:
            counts[transfer.sender] += 1
        return counts

    def for_receiver(self, host: str) -> Transfer | None:
        return next((t for t in self.transfers if t.receiver == host), None)

    def as_dict(self) -> dict[str, Any]:
        return {"method": self.method, "rounds": self.rounds, "holders": list(self.holders),
                "transfers": [t.as_dict() for t in self.transfers], "sends": self.sends(),
                "max_sources": max((1 + len(t.fallbacks) for t in self.transfers), default=0)}


def _checked_hosts(holders: Sequence[str], receivers: Sequence[str]) -> None:
    for role, hosts in (("holder", holders), ("receiver", receivers)):
        for host in hosts:
            if not isinstance(host, str) or not host:
                raise ValueError(f"copy schedule: {role} {host!r} is not a host name; expected a non-empty string")
    seen: set[str] = set()
    for host in (*holders, *receivers):
        if host in seen:
            raise ValueError(f"copy schedule: host {host!r} is named twice; each host either holds the copy "
                             "or receives it, once")
        seen.add(host)
    if receivers and not holders:
        raise ValueError(f"copy schedule: no host holds a verified copy to send to {', '.join(receivers)}")


def _positive(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"copy schedule: {name} is {value!r}; expected a whole number of at least 1")
    return value


def _fallbacks(holding: Iterable[str], sender: str, sends: dict[str, int]) -> tuple[str, ...]:
    order = [host for host in holding if host != sender]
    return tuple(sorted(order, key=lambda host: (sends[host], order.index(host))))


def fanout_schedule(holders: Sequence[str], receivers: Sequence[str], *, sends_per_round: int = 1) -> CopySchedule:
    """Doubling fan-out: each holder sends to ``sends_per_round`` new hosts a round, in the order given."""
    _checked_hosts(holders, receivers)
    per_round = _positive("sends_per_round", sends_per_round)
    holding = list(holders)
    sends = {host: 0 for host in (*holders, *receivers)}
    waiting = list(receivers)
    transfers: list[Transfer] = []
    round_no = 0
    while waiting:
        round_no += 1
        senders = [host for host in holding for _slot in range(per_round)]
        received = []
        # fewer waiting than sending slots in the last round, or more waiting than slots: zip stops at the shorter
        for sender, receiver in zip(senders, waiting, strict=False):
            transfers.append(Transfer(round_no, sender, receiver, _fallbacks(holding, sender, sends)))
            received.append(receiver)
        for transfer in transfers[-len(received):]:
            sends[transfer.sender] += 1
        waiting = waiting[len(received):]
        holding.extend(received)
    return CopySchedule(FANOUT, tuple(holders), tuple(transfers))


def star_schedule(origin: str, receivers: Sequence[str], *, parallel: int = 4) -> CopySchedule:
    """The origin sends to every receiver, ``parallel`` at a time (one round per batch)."""
    _checked_hosts([origin], receivers)
    batch = _positive("parallel", parallel)
    transfers = tuple(Transfer(index // batch + 1, origin, receiver, ())
                      for index, receiver in enumerate(receivers))
    return CopySchedule(STAR, (origin,), transfers)


def schedule(method: str, holders: Sequence[str], receivers: Sequence[str], *,
             sends_per_round: int = 1, parallel: int = 4) -> CopySchedule:
    """The schedule of ``method`` (``fanout`` or ``star``; star sends from the first holder only)."""
    if method == FANOUT:
        return fanout_schedule(holders, receivers, sends_per_round=sends_per_round)
    if method == STAR:
        if not holders:
            _checked_hosts(holders, receivers)
            return CopySchedule(STAR, (), ())
        return star_schedule(holders[0], receivers, parallel=parallel)
    raise ValueError(f"copy schedule: method is {method!r}; expected one of {', '.join(METHODS)}")


def predicted_seconds(hosts: int, copy_seconds: float, *, method: str, sends_per_round: int = 1) -> float:
    """Wall time the model predicts for copying to ``hosts`` hosts (origin included) when one copy
    through one NIC takes ``copy_seconds`` and every NIC sends at the same fixed rate.

    Star: all N-1 copies share the origin's NIC. Fan-out with k sends a round: the holders grow
    k+1-fold a round, and a round's k concurrent sends share each sender's NIC.
    """
    count = _positive("hosts", hosts)
    if count == 1:
        return 0.0
    if method == STAR:
        return (count - 1) * copy_seconds
    if method == FANOUT:
        per_round = _positive("sends_per_round", sends_per_round)
        rounds = math.ceil(math.log(count) / math.log(per_round + 1) - 1e-9)
        return rounds * per_round * copy_seconds
    raise ValueError(f"copy schedule: method is {method!r}; expected one of {', '.join(METHODS)}")


def weights_copy_schedules(hosts_weights: Mapping[str, Sequence[Mapping[str, Any]]], *, method: str = FANOUT,
                           sends_per_round: int = 1, parallel: int = 4,
                           modes: Sequence[str] = ("download", "import")) -> dict[str, dict[str, Any]]:
    """Deployment name -> its copy schedule (``CopySchedule.as_dict``), from each host's weights view.

    ``hosts_weights`` maps each host, in plan order, to its ``vllm_fleet_weights`` entries
    (``name``, ``origin``, ``mode``, ``present``). The origin holds the copy, and so does any
    other host whose finished revision is already present; the rest receive it.
    """
    holders: dict[str, list[str]] = {}
    receivers: dict[str, list[str]] = {}
    for host, entries in hosts_weights.items():
        for entry in entries:
            if entry.get("mode") not in modes:
                continue
            name, origin = str(entry["name"]), str(entry["origin"])
            holders.setdefault(name, [origin])
            receivers.setdefault(name, [])
            if host == origin:
                continue
            (holders[name] if entry.get("present") else receivers[name]).append(host)
    return {name: schedule(method, holders[name], receivers[name], sends_per_round=sends_per_round,
                           parallel=parallel).as_dict()
            for name in holders}


def host_transfers(schedules: Mapping[str, Mapping[str, Any]], entries: Sequence[Mapping[str, Any]],
                   host: str) -> list[dict[str, Any]]:
    """What ``host`` receives: ``{entry, transfer, sources}`` per weights entry it gets a copy of,
    by round; ``sources`` is the sender, then the fallbacks."""
    out = []
    for entry in entries:
        for transfer in (schedules.get(str(entry.get("name"))) or {}).get("transfers") or []:
            if transfer["receiver"] == host:
                out.append({"entry": dict(entry), "transfer": dict(transfer),
                            "sources": [transfer["sender"], *transfer["fallbacks"]]})
    return sorted(out, key=lambda item: int(item["transfer"]["round"]))


def attempt_items(transfers: Sequence[Mapping[str, Any]], attempt: int, done: Sequence[str],
                  ready: Callable[[str, str], bool]) -> list[dict[str, Any]]:
    """The copies of one attempt: ``{entry, source}`` for each transfer (``{entry, sources}``) whose
    deployment is not ``done`` and whose source number ``attempt`` exists and is ``ready(source, name)``.

    A plain weights entry instead of a transfer is copied from its origin (a repair)."""
    out = []
    for item in transfers:
        entry: Mapping[str, Any] = item.get("entry", item)
        sources = [str(host) for host in item["sources"]] if "entry" in item else [str(item["origin"])]
        name = str(entry["name"])
        if name in done or attempt >= len(sources) or not ready(sources[attempt], name):
            continue
        out.append({"entry": dict(entry), "source": sources[attempt]})
    return out
