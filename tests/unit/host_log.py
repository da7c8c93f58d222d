"""Test support (not a test module): capture what modules would log on the host.

Ansible modules log their invocation to the host's journal (or syslog). ``capture_env`` returns
environment variables under which every module run by a local ansible-playbook appends what it
would log to a file instead: a sitecustomize on PYTHONPATH replaces syslog.syslog and makes the
systemd journal binding unimportable (so the syslog path is taken).
"""

from __future__ import annotations

from pathlib import Path

_SITECUSTOMIZE = """\
import os, sys, syslog
sys.modules['systemd'] = None
def _capture(*args):
    with open(os.environ['VLLM_TEST_HOST_LOG'], 'a', encoding='utf-8') as out:
        out.write(str(args[-1]) + '\\n')
syslog.syslog = _capture
"""


def capture_env(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """(environment additions, the log file) for an ansible-playbook run on localhost."""
    site = tmp_path / "host-log-site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(_SITECUSTOMIZE, encoding="utf-8")
    log = tmp_path / "host.log"
    return {"PYTHONPATH": str(site), "VLLM_TEST_HOST_LOG": str(log)}, log


def read(log: Path) -> str:
    """Everything captured so far ('' when nothing was logged)."""
    return log.read_text(encoding="utf-8") if log.exists() else ""
