"""vllm_health_wait: the health gate's HTTP probe and the error lines it quotes from a journal.

The probe runs against a real local HTTP server. The journal text is what the real vLLM 0.32
CPU engine image printed when it refused a flag; systemd and journald themselves are exercised
by the molecule scenarios (replicas, multi_node).
"""

from __future__ import annotations

import http.server
import importlib.util
import threading
from pathlib import Path

import pytest

MODULE = Path(__file__).resolve().parents[4] / "plugins" / "modules" / "vllm_health_wait.py"
spec = importlib.util.spec_from_file_location("vllm_health_wait", MODULE)
health_wait = importlib.util.module_from_spec(spec)
spec.loader.exec_module(health_wait)

REFUSED_FLAG_JOURNAL = """\
W1203 08:07:39.036000 1 torch/_library/triton.py:53] Triton not available, find_triton_kernels = []
(APIServer pid=1) INFO 12-03 08:35:46 [api_utils.py:286] non-default args: {'model_tag': 'm', 'enforce_eager': True}
(APIServer pid=1) INFO 12-03 08:29:32 [launcher.py:195] Route: /v1/chat/completions/derender, Methods: POST
usage: vllm [-h] [-v]
            {chat,complete,serve,launch,bench,collect-env,download-kernels,preload,run-batch,snapshot}
            ...
vllm: error: unrecognized arguments: --no-such-flag
vllm-tiny-rep-r0.service: Main process exited, code=exited, status=2/INVALIDARGUMENT
"""


class Journal:
    """Stands in for AnsibleModule.run_command: answers journalctl with a fixed text."""

    def __init__(self, text: str, rc: int = 0):
        self.text, self.rc, self.calls = text, rc, []

    def run_command(self, argv):
        self.calls.append(argv)
        return self.rc, self.text, ""


@pytest.fixture(scope="module")
def server():
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # pylint: disable=invalid-name
            self.send_response(200 if self.path == "/health" else 503)
            self.end_headers()

        def log_message(self, *args):  # pylint: disable=arguments-differ
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield "http://127.0.0.1:%d" % srv.server_address[1]
    srv.shutdown()


def test_probe_tells_healthy_loading_and_down_apart(server):
    assert health_wait.health_status(server + "/health", {}) == 200
    assert health_wait.health_status(server + "/loading", {}) == 503
    assert health_wait.health_status("http://127.0.0.1:1/health", {}, timeout=1) == 0


def test_the_quoted_lines_are_vllms_refusal_not_its_start_up_noise():
    journal = Journal(REFUSED_FLAG_JOURNAL)
    lines = health_wait.error_lines(journal, "vllm-x.service", "2026-12-03 08:00:00", 6)
    assert "vllm: error: unrecognized arguments: --no-such-flag" in lines
    assert any(line.startswith("usage: vllm") for line in lines)
    assert not any("non-default args" in line or "Route:" in line for line in lines)
    assert journal.calls[0][:3] == ["journalctl", "-u", "vllm-x.service"]


def test_without_error_lines_the_last_lines_are_quoted_and_a_failed_journalctl_gives_none():
    quiet = Journal("starting\nloading weights\nstill loading\n")
    assert health_wait.error_lines(quiet, "u", "s", 2) == ["loading weights", "still loading"]
    assert health_wait.error_lines(Journal("", rc=1), "u", "s", 2) == []
