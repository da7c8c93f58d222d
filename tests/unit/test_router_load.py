"""The fault tests' load generator (tests/molecule/deploy_common/files/router_load.py) against a real
local HTTP server that answers like vLLM's OpenAI API, and fails on demand: every outcome counted,
the rate kept while answers are slow, a stream without ``[DONE]`` a failure."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

LOAD = Path(__file__).resolve().parents[1] / "molecule" / "deploy_common" / "files" / "router_load.py"


class FakeEngine(BaseHTTPRequestHandler):
    """Answers /v1/completions and /v1/chat/completions; ``mode`` on the server picks a fault."""

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:  # noqa: N802  # http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        mode = self.server.mode  # type: ignore[attr-defined]
        self.server.seen.append((self.path, body.get("stream", False), self.headers.get("Authorization")))  # type: ignore[attr-defined]
        time.sleep(self.server.delay)  # type: ignore[attr-defined]
        if mode == "500":
            self.send_response(500)
            self.end_headers()
            self.wfile.write(b'{"error": "engine dead"}')
            return
        usage = {"completion_tokens": 3}
        if body.get("stream"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for text in ("a", "b", "c"):
                self.wfile.write(b"data: " + json.dumps({"choices": [{"delta": {"content": text}}]}).encode() + b"\n\n")
            self.wfile.write(b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\n")
            if mode != "cut-stream":
                self.wfile.write(b"data: [DONE]\n\n")
            return
        payload = json.dumps({"choices": [{"text": "abc"}], "usage": usage}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def engine() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeEngine)
    server.mode, server.delay, server.seen = "ok", 0.0, []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()


def run_load(server: ThreadingHTTPServer, tmp_path: Path, *extra: str, seconds: float = 2.0,
             env: dict[str, str] | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    out, events = tmp_path / "load.json", tmp_path / "events.jsonl"
    subprocess.run([sys.executable, str(LOAD), "--url", f"http://127.0.0.1:{server.server_address[1]}",
                    "--model", "m", "--out", str(out), "--events", str(events), "--stop-file", str(tmp_path / "stop"),
                    "--max-seconds", str(seconds), "--timeout", "5", *extra],
                   check=True, timeout=60, env=env)
    return json.loads(out.read_text()), [json.loads(line) for line in events.read_text().splitlines()]


def test_every_kind_at_the_fixed_rate_all_counted(engine, tmp_path):
    # 16 slots for at most 13 requests: none may find them all busy, however slow a loaded machine
    # makes the answers (with 4, two starts were late in a CI run)
    result, events = run_load(engine, tmp_path, "--rate", "6", "--concurrency", "16",
                              env={"LOAD_API_KEY": "sk-load", "PATH": "/usr/bin:/bin"})
    assert result["failed"] == 0 and result["ok"] == len(events)
    assert 10 <= result["ok"] <= 13  # 6 per second for 2 s, open loop
    assert set(result["by_kind"]) == {"completion", "chat", "chat-stream"}
    assert result["tokens"] == 3 * result["ok"]
    assert {(seen[0], seen[1]) for seen in engine.seen} == {
        ("/v1/completions", False), ("/v1/chat/completions", False), ("/v1/chat/completions", True)}
    assert {seen[2] for seen in engine.seen} == {"Bearer sk-load"}
    assert all(e["ttft"] is not None and e["ttft"] <= e["latency"] for e in events)
    assert result["latency_s"]["p50"] is not None and result["late"] == 0


def test_slow_answers_do_not_slow_the_rate_until_concurrency_is_full(engine, tmp_path):
    engine.delay = 1.0
    result, events = run_load(engine, tmp_path, "--rate", "4", "--concurrency", "2", "--kinds", "completion")
    starts = [e["start"] for e in events]
    assert result["failed"] == 0 and result["late"] > 0  # 4/s of 1 s answers need 4 in flight, not 2
    assert max(b - a for a, b in itertools.pairwise(starts)) < 1.5


def test_errors_are_failures_with_their_words(engine, tmp_path):
    engine.mode = "500"
    result, _events = run_load(engine, tmp_path, "--rate", "4", seconds=1.0)
    assert result["ok"] == 0 and result["failed"] >= 3
    assert all("HTTP 500" in error and "engine dead" in error for error in result["errors"])


def test_a_stream_cut_before_done_is_a_failure(engine, tmp_path):
    engine.mode = "cut-stream"
    result, _events = run_load(engine, tmp_path, "--rate", "6", seconds=1.0)
    assert result["by_kind"]["chat-stream"]["failed"] >= 1 and result["by_kind"]["chat-stream"]["ok"] == 0
    assert result["by_kind"]["completion"]["failed"] == 0
    assert any("without data: [DONE]" in error for error in result["errors"])


def test_it_stops_at_the_stop_file(engine, tmp_path):
    (tmp_path / "stop").touch()
    started = time.time()
    result, events = run_load(engine, tmp_path, seconds=30.0)
    assert time.time() - started < 10 and result["ok"] == 0 and events == []
