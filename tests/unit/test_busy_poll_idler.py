"""tests/infra/busy_poll_idler.py finds a thread that polls without sleeping, and only that one."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path

IDLER = Path(__file__).resolve().parents[1] / "infra" / "busy_poll_idler.py"
# A Python spinner waits for the GIL a few times while its main thread starts it (NIXL's C++
# thread never does): once, on a machine busy with torn-down containers, more than 5 times.
VOLUNTARY = 50

# A process named like an engine's: one thread spins (never sleeps), the main thread sleeps.
SPINNER = """
import threading, time
open('/proc/self/comm', 'w').write('VLLM::Worker')
def spin():
    while True:
        pass
threading.Thread(target=spin, daemon=True).start()
print('ready', flush=True)
time.sleep(60)
"""


def load_idler():
    spec = importlib.util.spec_from_file_location("busy_poll_idler", IDLER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_spinning_thread_is_found_and_the_sleeping_one_is_not():
    idler = load_idler()
    proc = subprocess.Popen([sys.executable, "-c", SPINNER], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        deadline = time.time() + 60
        found = []
        while time.time() < deadline and not found:
            time.sleep(0.5)
            found = [hit for hit in idler.busy_pollers(1.0, VOLUNTARY, set()) if Path(f"/proc/{proc.pid}/task/{hit[0]}").exists()]
        assert len(found) == 1, found
        tid, name, cpu_s = found[0]
        assert tid != proc.pid and name == "VLLM::Worker" and cpu_s >= 1.0
        assert all(hit[0] != tid for hit in idler.busy_pollers(1.0, VOLUNTARY, {tid}))  # a moved thread is not found again
        assert idler.thread_record(Path(f"/proc/{proc.pid}/task/{proc.pid}"))[2] > 0  # the main thread slept
    finally:
        proc.kill()
        proc.wait()
