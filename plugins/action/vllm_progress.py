# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Wait for a JSON status file on the host to reach a final state, printing progress lines.

Docs: plugins/modules/vllm_progress.py. The weights role's fetch script rewrites the status
file every few seconds; this action reads it with slurp and prints a line whenever it changed,
so a 40-minute download shows its bytes and rate while it runs.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any, Optional

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

display = Display()

FINAL_STATES = ("done", "failed")


def human_bytes(count: float) -> str:
    """1536 -> '1.5 KiB'."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return ("%d %s" % (value, unit)) if unit == "B" else ("%.1f %s" % (value, unit))
        value /= 1024
    return "%d B" % count  # pragma: no cover - the loop always returns


def progress_line(host: str, label: str, status: dict, previous: Optional[dict], total: int = 0) -> str:
    """One line of progress from two consecutive status records."""
    done = int(status.get("bytes") or 0)
    elapsed = int(status.get("elapsed_s") or 0)
    parts = ["[%s] %s: %s %s" % (host, label, status.get("state", "?"), human_bytes(done))]
    if total:
        parts.append("of %s (%d%%)" % (human_bytes(total), min(100, done * 100 // total)))
    if previous and int(status.get("elapsed_s") or 0) > int(previous.get("elapsed_s") or 0):
        rate = (done - int(previous.get("bytes") or 0)) / (elapsed - int(previous.get("elapsed_s") or 0))
        parts.append("at %s/s" % human_bytes(max(rate, 0)))
    parts.append("after %d s" % elapsed)
    return " ".join(parts)


class ActionModule(ActionBase):
    """Poll a status file on the target; print progress; return its final record."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("path", "label", "timeout", "interval", "total_bytes"))

    def _read(self, path: str, task_vars: dict) -> Optional[dict]:
        res = self._execute_module(module_name="ansible.legacy.slurp", module_args={"src": path},
                                   task_vars=task_vars)
        if res.get("failed") or "content" not in res:
            display.vvv("vllm_progress: cannot read %s yet: %s" % (path, res.get("msg")))
            return None
        try:
            return json.loads(base64.b64decode(res["content"]).decode("utf-8"))
        except ValueError:
            return None  # caught mid-rewrite: try again at the next poll

    def run(self, tmp: Any = None, task_vars: Optional[dict] = None) -> dict:
        result = super().run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        _spec, args = self.validate_argument_spec(argument_spec={
            "path": {"type": "str", "required": True},
            "label": {"type": "str", "default": ""},
            "timeout": {"type": "int", "default": 3600},
            "interval": {"type": "int", "default": 10},
            "total_bytes": {"type": "int", "default": 0},
        })
        if self._task.check_mode:
            result.update(changed=False, skipped=True, msg="check mode: nothing is running")
            return result
        host = task_vars.get("inventory_hostname", "?")
        label = args["label"] or args["path"]
        deadline = time.monotonic() + args["timeout"]
        previous: Optional[dict] = None
        shown = None
        polls = 0
        while True:
            status = self._read(args["path"], task_vars)
            polls += 1
            if status is not None:
                key = (status.get("state"), status.get("bytes"))
                if key != shown:
                    display.display(progress_line(host, label, status, previous, args["total_bytes"]))
                    shown = key
                previous = status
                if status.get("state") in FINAL_STATES:
                    result.update(changed=False, status=status, polls=polls,
                                  failed=status["state"] == "failed",
                                  msg=progress_line(host, label, status, None, args["total_bytes"]))
                    return result
            if time.monotonic() >= deadline:
                raise AnsibleActionFail("%s: %s did not reach %s within %d s (last: %s)" % (
                    host, args["path"], " or ".join(FINAL_STATES), args["timeout"], json.dumps(status)))
            time.sleep(max(1, args["interval"]))
