"""Test support (not a test module): the vllm-router CLI of this venv and stopping a child process."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROUTER_CLI = shutil.which("vllm-router", path=str(Path(sys.executable).parent)) or shutil.which("vllm-router")


def stop(proc: subprocess.Popen) -> str:
    """Terminate ``proc``; return everything it wrote."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    out = proc.stdout.read() if proc.stdout else ""
    return out
