"""The group watchdog (roles/engine/files/vllm-group-watchdog) as a real process.

It polls a real local HTTP endpoint standing in for the group head's /health; ``systemctl`` is
a recording script first on PATH. The watchdog must restart its rank only after the head was
healthy and then failed for longer than the grace period, once per outage.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

WATCHDOG = Path(__file__).resolve().parents[3] / "roles" / "engine" / "files" / "vllm-group-watchdog"


class Head:
    """A /health endpoint whose answer the test flips; /v1/completions answers one token, or
    hangs (``completes`` false: a lost follower); /metrics shows ``tokens`` generated."""

    def __init__(self) -> None:
        self.healthy = False
        self.completes = True
        self.tokens = 0.0
        self.answered = 0
        self.auth: list[str] = []
        head = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # pylint: disable=arguments-differ
                pass

            def do_GET(self):  # pylint: disable=invalid-name
                if self.path == "/metrics":
                    body = f'vllm:generation_tokens_total{{model_name="m"}} {head.tokens}\n'.encode()
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                self.send_response(200 if head.healthy else 503)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self):  # pylint: disable=invalid-name
                self.rfile.read(int(self.headers["Content-Length"]))
                head.auth.append(self.headers.get("Authorization", ""))
                if not head.completes:
                    time.sleep(3)  # past the probe's timeout: the request never completes
                    return
                body = json.dumps({"usage": {"completion_tokens": 1}}).encode()
                head.answered += 1
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/health"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def head():
    server = Head()
    yield server
    server.server.shutdown()


def fake_systemctl(tmp_path: Path) -> Path:
    """A recording systemctl; ``show -p NAME`` prints tmp_path/prop-NAME, else the content of
    tmp_path/invocation, else 'active'."""
    calls = tmp_path / "calls"
    script = tmp_path / "bin" / "systemctl"
    script.parent.mkdir()
    invocation = tmp_path / "invocation"
    script.write_text(f'#!/bin/sh\necho "$*" >> {calls}\n'
                      f'[ "$1" = show ] && {{ cat {tmp_path}/prop-$3 2>/dev/null || cat {invocation} 2>/dev/null '
                      f'|| echo active; }}\nexit 0\n')
    script.chmod(0o755)
    docker = script.parent / "docker"
    docker.write_text(f'#!/bin/sh\necho "docker $*" >> {calls}\nexit 0\n')
    docker.chmod(0o755)
    return calls


def restarts(calls: Path) -> list[str]:
    if not calls.exists():
        return []
    return [line for line in calls.read_text().splitlines() if line.startswith("restart")]


def start_watchdog(tmp_path: Path, head: Head, unit: str, *flags: str,
                   invocation: str = "") -> tuple[subprocess.Popen, Path, Path]:
    """The real watchdog of ``unit`` watching ``head``, the recording systemctl and docker first on
    PATH (``invocation``: what systemctl shows as the unit's InvocationID). Its log is its stdout."""
    calls = fake_systemctl(tmp_path)
    if invocation:
        (tmp_path / "invocation").write_text(invocation + "\n")
    state = tmp_path / "state.json"
    env = dict(os.environ, PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    proc = subprocess.Popen([sys.executable, str(WATCHDOG), "--unit", unit, "--head-url", head.url,
                             "--state-file", str(state), *flags],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc, calls, state


def wait_for(predicate, timeout: float = 10.0) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_restarts_the_rank_once_per_head_outage_and_never_during_a_load(tmp_path, head):
    proc, calls, state = start_watchdog(tmp_path, head, "vllm-x-rank1.service", "--interval", "0.1", "--grace", "0.5")
    try:
        # a long model load: the head was never healthy, so nothing happens (the state file
        # appears with the first poll; a loaded machine may take seconds to start Python)
        assert wait_for(state.exists, timeout=60)
        time.sleep(1.5)
        assert restarts(calls) == []
        assert json.loads(state.read_text())["armed"] is False
        # healthy: armed
        head.healthy = True
        assert wait_for(lambda: json.loads(state.read_text())["armed"] is True)
        # the head dies: one restart after the grace period, then disarmed while it is down
        head.healthy = False
        assert wait_for(lambda: len(restarts(calls)) == 1)
        assert restarts(calls) == ["restart --no-block vllm-x-rank1.service"]
        time.sleep(1.5)
        assert len(restarts(calls)) == 1
        record = json.loads(state.read_text())
        assert record["armed"] is False and record["restarts"] == 1 and "unhealthy" in record["reason"]
        # back, then down again: a second restart
        head.healthy = True
        assert wait_for(lambda: json.loads(state.read_text())["armed"] is True)
        head.healthy = False
        assert wait_for(lambda: len(restarts(calls)) == 2)
    finally:
        proc.terminate()
        output = proc.communicate(timeout=10)[0]
    assert "restarting vllm-x-rank1.service so the group forms again" in output


def test_a_short_blip_inside_the_grace_period_restarts_nothing(tmp_path, head):
    head.healthy = True
    proc, calls, state = start_watchdog(tmp_path, head, "u.service", "--interval", "0.1", "--grace", "5")
    try:
        assert wait_for(lambda: state.exists() and json.loads(state.read_text())["armed"] is True, timeout=60)
        head.healthy = False
        time.sleep(0.8)
        head.healthy = True
        time.sleep(1.0)
        assert restarts(calls) == []
    finally:
        proc.terminate()
        proc.communicate(timeout=10)


def test_a_rank_systemd_already_restarted_is_left_alone(tmp_path, head):
    """The head died and systemd restarted it: its watchdog must not restart it a second time."""
    head.healthy = True
    proc, calls, state = start_watchdog(tmp_path, head, "head.service", "--interval", "0.1", "--grace", "0.5",
                                        "--rearm-after", "4", invocation="first")
    try:
        assert wait_for(lambda: state.exists() and json.loads(state.read_text())["invocation"] == "first")
        head.healthy = False
        (tmp_path / "invocation").write_text("second\n")  # systemd restarted the unit
        assert wait_for(lambda: "already restarted" in (json.loads(state.read_text())["reason"] or ""))
        assert restarts(calls) == []
        # the group never forms: after --rearm-after the rank is restarted after all (4 s: room
        # for a loaded machine to check the state before then)
        assert wait_for(lambda: len(restarts(calls)) == 1, timeout=15)
    finally:
        proc.terminate()
        output = proc.communicate(timeout=10)[0]
    assert "already restarted since (by systemd)" in output and "has not formed" in output


def test_a_single_engine_stopped_on_purpose_is_left_alone_and_a_hung_one_restarted(tmp_path, head):
    """A single-node engine is its own head (--single). systemctl stop is not a fault; a hang is."""
    head.healthy = True
    proc, calls, state = start_watchdog(tmp_path, head, "vllm-x-r1.service", "--interval", "0.1", "--grace", "0.5",
                                        "--rearm-after", "1", "--container", "vllm-x-r1", "--single")
    try:
        assert wait_for(lambda: state.exists() and json.loads(state.read_text())["armed"] is True, timeout=60)
        (tmp_path / "prop-ActiveState").write_text("inactive\n")  # systemctl stop vllm-x-r1
        head.healthy = False
        assert wait_for(lambda: "stopped on purpose" in (json.loads(state.read_text())["reason"] or ""))
        time.sleep(2.0)  # past --rearm-after: still not started by the watchdog
        assert restarts(calls) == []
        # started again by hand, then it hangs (/health fails, the unit active): killed and restarted
        (tmp_path / "prop-ActiveState").write_text("active\n")
        head.healthy = True
        assert wait_for(lambda: json.loads(state.read_text())["armed"] is True)
        head.healthy = False
        assert wait_for(lambda: len(restarts(calls)) == 1)
        assert "docker kill vllm-x-r1" in calls.read_text()
    finally:
        proc.terminate()
        output = proc.communicate(timeout=10)[0]
    assert "is inactive (stopped on purpose): leaving it" in output
    assert "restarting vllm-x-r1.service so the engine serves again" in output


def progress_watchdog(tmp_path: Path, head: Head, grace: float = 1.5) -> tuple[subprocess.Popen, Path, Path]:
    secret = tmp_path / "rank0.secret.env"
    secret.write_text("HF_TOKEN=hf-x\nVLLM_API_KEY=sk-probe\n")
    head.healthy = True
    proc, calls, state = start_watchdog(tmp_path, head, "head.service", "--interval", "0.1", "--grace", str(grace),
                                        "--probe-url", head.url[:-len("/health")] + "/v1/completions", "--model", "m",
                                        "--secret-env", str(secret), "--probe-every", "0.3", "--probe-timeout", "0.5",
                                        "--container", "vllm-x-rank0")
    assert wait_for(lambda: state.exists() and json.loads(state.read_text())["armed"] is True, timeout=60)
    return proc, calls, state


def test_a_head_that_answers_health_but_completes_nothing_is_restarted(tmp_path, head):
    """A lost follower: the head's /health stays 200, no request completes, no token is made."""
    proc, calls, state = progress_watchdog(tmp_path, head)
    try:
        assert wait_for(lambda: head.answered >= 2)
        assert restarts(calls) == []
        head.completes = False
        assert wait_for(lambda: len(restarts(calls)) == 1, timeout=15)
        assert restarts(calls) == ["restart --no-block head.service"]
        assert "completed no request" in json.loads(state.read_text())["reason"]
        # the wedged container is killed first: a restart must not wait out docker stop's timeout
        lines = calls.read_text().splitlines()
        assert lines.index("docker kill vllm-x-rank0") < lines.index("restart --no-block head.service")
    finally:
        proc.terminate()
        output = proc.communicate(timeout=10)[0]
    assert set(head.auth) == {"Bearer sk-probe"}  # read from the 0600 file, never from argv
    assert "a one-token completion failed" in output and "sk-probe" not in output


def test_a_busy_head_whose_probe_is_slow_but_generates_tokens_is_left_alone(tmp_path, head):
    # grace 3 s: this process makes the tokens, and a loaded machine may pause it for a second or two
    proc, calls, _state = progress_watchdog(tmp_path, head, grace=3.0)
    try:
        head.completes = False
        deadline = time.time() + 6.0
        while time.time() < deadline:
            head.tokens += 5  # other requests progress
            time.sleep(0.1)
        assert restarts(calls) == []
        # then nothing moves any more: restarted
        assert wait_for(lambda: len(restarts(calls)) == 1, timeout=15)
    finally:
        proc.terminate()
        proc.communicate(timeout=10)


def test_a_new_head_whose_first_request_compiles_for_long_is_left_alone(tmp_path, head):
    """Progress is watched only once a probe completed: a first request may compile for minutes."""
    head.completes = False
    proc, calls, _state = progress_watchdog(tmp_path, head)
    try:
        time.sleep(4.0)  # grace 1.5 s, probe timeout 0.5 s: several failed probes
        assert restarts(calls) == []
        head.completes = True
        assert wait_for(lambda: head.answered >= 1, timeout=5)
        head.completes = False  # warm now: a stall counts
        assert wait_for(lambda: len(restarts(calls)) == 1, timeout=15)
    finally:
        proc.terminate()
        output = proc.communicate(timeout=10)[0]
    assert "the head completed a probe: watching its progress" in output
