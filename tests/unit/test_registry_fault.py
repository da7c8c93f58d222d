"""The registry fault stand-in (tests/molecule/deploy_common/files/registry_fault.py) as a real
process in front of a real local HTTP server that serves blobs like a registry: it relays
faithfully, answers 503 on demand, and cuts a blob mid-body and then stops listening."""

from __future__ import annotations

import http.client
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

FAULT = Path(__file__).resolve().parents[1] / "molecule" / "deploy_common" / "files" / "registry_fault.py"
BIG = bytes(range(256)) * 8192  # 2 MiB
SMALL = b'{"architecture": "amd64"}'


class Registry(BaseHTTPRequestHandler):
    """/v2/ and two blobs, with the registry's digest header."""

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:  # noqa: N802  # http.server's name
        body = {"/v2/": b"{}", "/v2/x/blobs/sha256:big": BIG, "/v2/x/blobs/sha256:small": SMALL}.get(self.path)
        if body is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Docker-Content-Digest", "sha256:" + self.path.rsplit(":", 1)[-1])
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(name="upstream")
def fixture_upstream() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Registry)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start(upstream: str, mode: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(FAULT), "--listen", f"127.0.0.1:{port}", "--upstream", upstream,
                             "--mode", mode, "--cut-bytes", "65536"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError("registry_fault.py did not listen: " + proc.communicate()[0])


def get(port: int, path: str) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", path)
    reply = connection.getresponse()
    return reply.status, dict(reply.getheaders()), reply.read()


def test_pass_relays_the_registrys_answers(upstream):
    proc, port = start(upstream, "pass")
    try:
        status, headers, body = get(port, "/v2/x/blobs/sha256:big")
        assert status == 200 and body == BIG and headers["Docker-Content-Digest"] == "sha256:big"
        assert get(port, "/v2/x/blobs/sha256:none")[0] == 404
    finally:
        proc.terminate()
        output = proc.communicate(timeout=10)[0]
    assert "GET /v2/x/blobs/sha256:big -> 200 (2097152 bytes)" in output


def test_503_answers_every_request_in_the_registry_api_error_format(upstream):
    proc, port = start(upstream, "503")
    try:
        status, body = get(port, "/v2/")[0::2]
        assert status == 503 and b'"UNAVAILABLE"' in body
        assert get(port, "/v2/x/blobs/sha256:small")[0] == 503
    finally:
        proc.terminate()
        proc.communicate(timeout=10)


def test_vanish_cuts_the_first_large_blob_then_nothing_listens(upstream):
    proc, port = start(upstream, "vanish")
    try:
        assert get(port, "/v2/x/blobs/sha256:small")[2] == SMALL  # smaller than the cut: whole
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("GET", "/v2/x/blobs/sha256:big")
        reply = connection.getresponse()
        assert reply.status == 200 and reply.getheader("Content-Length") == str(len(BIG))
        with pytest.raises(http.client.IncompleteRead) as cut:
            reply.read()
        assert len(cut.value.partial) == 65536 and cut.value.partial == BIG[:65536]
        assert proc.wait(timeout=10) == 0
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
    finally:
        if proc.poll() is None:
            proc.kill()
        output = proc.communicate(timeout=10)[0]
    assert "cut after 65536 bytes, then gone" in output
