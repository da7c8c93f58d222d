"""Give the engines' busy-polling threads only the CPU nothing else wants, while the lanes run.

NIXL 1.5.1 (vLLM's PD KV connector) runs a UCX progress thread that polls without a pause:
its Python API sets ``pthrDelay = 0``. Every prefill and decode worker therefore burns most of a
core while idle, so on the 2-core CI machine the two PD engines took about one core from the
scenarios and the static checks for the whole run (measured in a clean-clone .ci/run on 296c06f: each thread
at 45-58 % of a core, 0 voluntary context switches, with no request in flight).

Every few seconds this looks for such threads among the engines' processes (name ``VLLM::...``,
at least --min-cpu-s of CPU, at most --max-voluntary voluntary context switches: it never
sleeps) and moves each one alone into a cgroup of the cpu controller with the least weight. The
thread keeps running and polling; it only yields to every other runnable task. Nothing else of
the engine moves, and no test sees a different argv, image or unit. cgroup v1 only (the CI
machine's layout); elsewhere it prints why and exits 0.

  python3 tests/infra/busy_poll_idler.py [--until-pid PID] [--interval S]

It logs one line per moved thread and stops when PID is gone (tests/infra/integration.sh runs it
beside the lanes).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

CPU_HIERARCHY = Path("/sys/fs/cgroup/cpu")
IDLE_GROUP = CPU_HIERARCHY / "vllm-fleet-busy-poll"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def log(message: str) -> None:
    print(f"busy-poll-idler: {message}", flush=True)


def thread_record(task: Path) -> tuple[str, float, int] | None:
    """(name, CPU seconds, voluntary context switches) of one thread, None once it is gone."""
    try:
        name = (task / "comm").read_text().strip()
        fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        voluntary = next(int(line.split()[1]) for line in (task / "status").read_text().splitlines()
                         if line.startswith("voluntary_ctxt_switches:"))
    except (OSError, StopIteration, IndexError, ValueError):
        return None
    # after the ")" of comm: state is field 0, utime field 11, stime field 12
    return name, (int(fields[11]) + int(fields[12])) / CLOCK_TICKS, voluntary


def busy_pollers(min_cpu_s: float, max_voluntary: int, moved: set[int]) -> list[tuple[int, str, float]]:
    found = []
    for task in Path("/proc").glob("[0-9]*/task/[0-9]*"):
        tid = int(task.name)
        if tid in moved:
            continue
        record = thread_record(task)
        if record and record[0].startswith("VLLM::") and record[1] >= min_cpu_s and record[2] <= max_voluntary:
            found.append((tid, record[0], record[1]))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--until-pid", type=int, default=0, help="stop when this process is gone")
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument("--min-cpu-s", type=float, default=5.0)
    parser.add_argument("--max-voluntary", type=int, default=5)
    parser.add_argument("--shares", type=int, default=16, help="the idle group's cpu.shares (1024: a normal group)")
    args = parser.parse_args()
    if not (CPU_HIERARCHY / "cpu.shares").exists():
        log(f"no cgroup v1 cpu controller at {CPU_HIERARCHY}: nothing to do")
        return 0
    try:
        IDLE_GROUP.mkdir(exist_ok=True)
        (IDLE_GROUP / "cpu.shares").write_text(str(args.shares))
    except OSError as err:
        log(f"cannot make {IDLE_GROUP} ({err}): nothing to do")
        return 0
    log(f"watching for threads that poll without sleeping; they go to {IDLE_GROUP} (cpu.shares {args.shares})")
    moved: set[int] = set()
    while not args.until_pid or Path(f"/proc/{args.until_pid}").exists():
        for tid, name, cpu_s in busy_pollers(args.min_cpu_s, args.max_voluntary, moved):
            try:
                (IDLE_GROUP / "tasks").write_text(str(tid))
            except OSError as err:
                log(f"could not move thread {tid} ({name}): {err}")
            else:
                log(f"thread {tid} ({name}, {cpu_s:.0f} s of CPU, never slept) moved to the least weight")
            moved.add(tid)
        time.sleep(args.interval)
    log(f"done: {len(moved)} thread(s) moved")
    with contextlib.suppress(OSError):
        IDLE_GROUP.rmdir()  # only once its threads are gone
    return 0


if __name__ == "__main__":
    sys.exit(main())
