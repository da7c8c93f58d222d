#!/usr/bin/env python
"""Benchmark: tasks per host and wall time of an idempotent playbooks/deploy.yml.

Runs the playbook N times against an inventory whose hosts are already deployed (a molecule
scenario after its converge) and reads each run's PLAY RECAP: per host, the tasks executed
(``ok`` + ``failed`` + ``unreachable``; Ansible's ``ok`` already counts the changed ones), the
changed ones (0 on an idempotent re-run: the run says so when not) and the skipped ones. Prints
a line per run and the median wall time.

    .venv/bin/python benchmarks/deploy_tasks.py -i INVENTORY [--repeat 3] [--log FILE] [-- ARGS...]

Against the molecule scenario pd_cluster (after ``make molecule SCENARIO=pd_cluster
MOLECULE_CMD=converge``), with molecule's ansible.cfg and inventory:

    E=$(ls -td ~/.ansible/tmp/molecule.*.pd_cluster | head -n 1)
    ANSIBLE_CONFIG=$E/ansible.cfg ANSIBLE_PIPELINING=True \\
        .venv/bin/python benchmarks/deploy_tasks.py -i $E/inventory --repeat 3 --log /tmp/deploy.log

ANSIBLE_COLLECTIONS_PATH (this checkout's .collections) and MOLECULE_PROJECT_DIRECTORY (this
checkout: the scenarios' recipe directory) are set unless the environment has them.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
PLAYBOOK = ROOT / "playbooks" / "deploy.yml"
_RECAP_LINE = re.compile(r"^(?P<host>\S+)\s+:\s+(?P<counts>(?:\w+=\d+\s*)+)$")
_COUNT = re.compile(r"(\w+)=(\d+)")


def parse_recap(output: str) -> dict[str, dict[str, int]]:
    """Host -> the counters of the last PLAY RECAP in ``output`` (ok, changed, failed, skipped ...)."""
    start = output.rfind("PLAY RECAP")
    if start < 0:
        raise ValueError("no PLAY RECAP in the playbook output (did it start at all?)")
    stats: dict[str, dict[str, int]] = {}
    for line in output[start:].splitlines()[1:]:
        match = _RECAP_LINE.match(line.strip())
        if match is None:
            if stats:
                break
            continue
        stats[match["host"]] = {name: int(value) for name, value in _COUNT.findall(match["counts"])}
    return stats


def task_counts(stats: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """Host -> executed (ok + failed + unreachable), changed, skipped, failed."""
    return {host: {"executed": c.get("ok", 0) + c.get("failed", 0) + c.get("unreachable", 0),
                   "changed": c.get("changed", 0), "skipped": c.get("skipped", 0),
                   "failed": c.get("failed", 0) + c.get("unreachable", 0)}
            for host, c in stats.items()}


def format_run(label: str, seconds: float, counts: dict[str, dict[str, int]]) -> str:
    hosts = ", ".join(f"{host} {c['executed']} (+{c['skipped']} skipped, {c['changed']} changed"
                      f"{', ' + str(c['failed']) + ' FAILED' if c['failed'] else ''})"
                      for host, c in sorted(counts.items()))
    return f"{label}: {seconds:.1f} s; tasks per host: {hosts}"


def run_playbook(argv: Sequence[str], env: dict[str, str], log: Optional[Path]) -> tuple[float, int, str]:
    """(wall seconds, exit code, output) of one ansible-playbook run; output appended to log."""
    start = time.monotonic()
    proc = subprocess.run(list(argv), capture_output=True, text=True, env=env, check=False, cwd=ROOT)
    seconds = time.monotonic() - start
    output = proc.stdout + proc.stderr
    if log is not None:
        with log.open("a", encoding="utf-8") as handle:
            handle.write(f"### {' '.join(argv)}  ({seconds:.1f} s, exit {proc.returncode})\n{output}\n")
    return seconds, proc.returncode, output


def main(args: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-i", "--inventory", required=True, help="inventory of already deployed hosts")
    parser.add_argument("--repeat", type=int, default=3, help="runs (default 3)")
    parser.add_argument("--log", type=Path, help="append every run's full output here")
    parser.add_argument("--playbook", type=Path, default=PLAYBOOK)
    parser.add_argument("extra", nargs="*", help="more ansible-playbook arguments (after --)")
    opts = parser.parse_args(args)
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    env.setdefault("ANSIBLE_COLLECTIONS_PATH", str(ROOT / ".collections"))
    env.setdefault("MOLECULE_PROJECT_DIRECTORY", str(ROOT))
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", opts.inventory, str(opts.playbook),
            *opts.extra]
    times = []
    for index in range(1, opts.repeat + 1):
        seconds, code, output = run_playbook(argv, env, opts.log)
        try:
            counts = task_counts(parse_recap(output))
        except ValueError as exc:
            print(f"run {index}: exit {code}: {exc}\n{output[-3000:]}", file=sys.stderr)
            return 1
        print(format_run(f"run {index}", seconds, counts), flush=True)
        if code != 0:
            print(f"run {index} FAILED (exit {code}); see {opts.log or 'the output above'}", file=sys.stderr)
            return code
        if any(c["changed"] for c in counts.values()):
            print(f"run {index}: not idempotent (changed > 0): the hosts were not deployed yet?", file=sys.stderr)
        times.append(seconds)
    print(f"median wall time over {len(times)} run(s): {statistics.median(times):.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
