"""The integration-test stand-ins, run as local processes (no Docker needed).

* ``tests/infra/standin/vllm_standin.py``: the inference-engine stand-in behind
  the ``vllm-standin`` image (argv/env record, OpenAI endpoints, faults). The
  scenarios run the real engine; the stand-in stays for fast router tests and
  faults on demand (docs/testing.md).
* ``tests/infra/hub_standin.py``: the Hugging Face Hub stand-in, driven by the
  real ``hf download`` (huggingface_hub from requirements-dev.txt).
* The real ``vllm-router`` (requirements-integration.txt) in front of two
  stand-in engines, round-robin and prefill/decode.

docs/testing.md describes the stand-ins; these tests pin what the deploy-role
tests rely on.
"""

from __future__ import annotations

import hashlib
import http.client
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from processes import ROUTER_CLI, stop

REPO_ROOT = Path(__file__).resolve().parents[2]
ENGINE = REPO_ROOT / "tests" / "infra" / "standin" / "vllm_standin.py"
HUB = REPO_ROOT / "tests" / "infra" / "hub_standin.py"
VENV_BIN = Path(sys.executable).parent
HF_CLI = shutil.which("hf", path=str(VENV_BIN)) or shutil.which("hf")
MIB = 1024 * 1024


# --- helpers -------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def request(port: int, method: str, path: str, body=None, headers: dict | None = None, timeout: float = 10):
    """(status, headers, raw body) of one HTTP request to 127.0.0.1:port."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = json.dumps(body).encode() if body is not None else None
        all_headers = {"Content-Type": "application/json"} if data is not None else {}
        all_headers.update(headers or {})
        conn.request(method, path, body=data, headers=all_headers)
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


def get_json(port: int, path: str, **kwargs):
    status, _headers, raw = request(port, "GET", path, **kwargs)
    assert status == 200, (path, status, raw[:300])
    return json.loads(raw)


def post_json(port: int, path: str, body, **kwargs):
    status, _headers, raw = request(port, "POST", path, body, **kwargs)
    return status, json.loads(raw) if raw else None


def wait_until(check, timeout: float, what: str, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError("%s: process exited with %s before %s" % (proc.args, proc.returncode, what))
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError("timed out after %ss waiting for %s" % (timeout, what))


class Engine:
    """A running stand-in engine."""

    def __init__(self, proc: subprocess.Popen, port: int, record_dir: Path):
        self.proc = proc
        self.port = port
        self.record_dir = record_dir
        self.output = ""

    def stop(self) -> str:
        self.output = stop(self.proc)
        return self.output


@pytest.fixture
def start_engine(tmp_path):
    """start_engine(*serve_args, env={...}, wait=True): run ``vllm serve``-style on a free port."""
    started = []

    def _start(*serve_args: str, env: dict | None = None, wait: bool = True, port: int | None = None) -> Engine:
        port = port or free_port()
        record_dir = tmp_path / ("records-%d" % port)
        full_env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "STANDIN_RECORD_DIR": str(record_dir),
                    "STANDIN_VERSION": "v1"}
        full_env.update(env or {})
        argv = [sys.executable, str(ENGINE), "serve", *serve_args]
        if "--port" not in serve_args:
            argv += ["--port", str(port), "--host", "127.0.0.1"]
        proc = subprocess.Popen(argv, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        engine = Engine(proc, port, record_dir)
        started.append(engine)
        if wait:
            wait_until(lambda: request(port, "GET", "/standin/launch")[0] == 200, 15, "the stand-in on :%d" % port, proc)
        return engine

    yield _start
    for engine in started:
        engine.stop()


# --- the engine stand-in ---------------------------------------------------------
def test_engine_records_argv_env_and_redacts_secrets(start_engine):
    port = free_port()
    args = ("org/model", "--tensor-parallel-size", "2", "--host", "127.0.0.1", "--port", str(port))
    engine = start_engine(*args, env={"HF_TOKEN": "hf_secret_value", "NCCL_SOCKET_IFNAME": "eth0"}, port=port)
    launch = get_json(port, "/standin/launch")
    assert launch["standin"] is True
    assert launch["argv"] == ["vllm", "serve", *args]
    assert launch["serve_args"] == list(args)
    assert launch["model"] == "org/model"
    assert launch["unparsed_flags"] == ["--tensor-parallel-size", "2"]
    assert launch["env"]["NCCL_SOCKET_IFNAME"] == "eth0"
    digest = hashlib.sha256(b"hf_secret_value").hexdigest()[:16]
    assert launch["env"]["HF_TOKEN"] == "<redacted sha256:%s>" % digest
    assert launch["redacted_env"] == ["HF_TOKEN"]
    record_file = engine.record_dir / ("%s-%d.json" % (socket.gethostname(), port))
    assert json.loads(record_file.read_text(encoding="utf-8")) == launch
    assert launch["record_path"] == str(record_file)
    output = engine.stop()
    assert "TEST STAND-IN" in output
    assert "STANDIN-LAUNCH " in output
    assert "hf_secret_value" not in output + record_file.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "expect"),
    [
        ("GET", "/health", None, 200, b""),
        ("GET", "/v1/models", None, 200, b'"id": "org/model"'),
        ("GET", "/v1/models", None, 200, b"TEST STAND-IN"),
        ("GET", "/metrics", None, 200, b"vllm:num_requests_running"),
        ("GET", "/metrics", None, 200, b'standin_info{version="v1"} 1'),
        ("GET", "/version", None, 200, b'"version": "v1"'),
        ("GET", "/nope", None, 404, b"no route"),
        ("POST", "/v1/completions", {"prompt": "hi", "max_tokens": 0}, 400, b"max_tokens must be at least 1"),
        ("POST", "/v1/completions", {"model": "other", "prompt": "hi"}, 404, b"does not exist"),
        ("POST", "/v1/embeddings", {"input": "hi"}, 404, b"no route"),
    ],
)
def test_engine_endpoints(start_engine, method, path, body, status, expect):
    engine = start_engine("org/model")
    got_status, _headers, raw = request(engine.port, method, path, body)
    assert got_status == status, raw
    assert expect in raw


@pytest.mark.parametrize(("path", "body", "field"), [
    ("/v1/completions", {"prompt": "one two three", "max_tokens": 5}, "text"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "one two three"}], "max_tokens": 5}, "message"),
])
def test_engine_completions_honour_max_tokens(start_engine, path, body, field):
    engine = start_engine("org/model", "--served-model-name", "served-a", "served-b")
    status, reply = post_json(engine.port, path, dict(body, model="served-b"))
    assert status == 200, reply
    assert reply["model"] == "served-b"
    assert reply["usage"] == {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}
    choice = reply["choices"][0]
    text = choice["text"] if field == "text" else choice["message"]["content"]
    assert text.split() == ["v1-tok%d" % i for i in range(5)]
    assert "kv_transfer_params" not in reply
    models = [m["id"] for m in get_json(engine.port, "/v1/models")["data"]]
    assert models == ["served-a", "served-b"]


def test_engine_stream_and_kv_transfer_params(start_engine):
    engine = start_engine("org/model")
    status, reply = post_json(engine.port, "/v1/completions",
                              {"prompt": "x", "max_tokens": 1, "kv_transfer_params": {"do_remote_decode": True}})
    assert status == 200
    assert reply["kv_transfer_params"]["remote_engine_id"] == "standin-%s-%d" % (socket.gethostname(), engine.port)
    stats = get_json(engine.port, "/standin/stats")
    assert stats["kv_transfer_requests"] == 1
    assert stats["last_kv_transfer_params"] == {"do_remote_decode": True}
    status, _headers, raw = request(engine.port, "POST", "/v1/chat/completions",
                                    {"messages": [{"role": "user", "content": "x"}], "max_tokens": 3, "stream": True})
    assert status == 200
    events = [line[len("data: "):] for line in raw.decode().splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    pieces = [json.loads(e)["choices"][0]["delta"]["content"] for e in events[:-1] if json.loads(e)["choices"]]
    assert "".join(pieces) == "v1-tok0 v1-tok1 v1-tok2"


def test_engine_api_key_guards_v1_only(start_engine):
    engine = start_engine("org/model", env={"VLLM_API_KEY": "k-123"})
    assert request(engine.port, "GET", "/v1/models")[0] == 401
    assert request(engine.port, "GET", "/v1/models", headers={"Authorization": "Bearer k-123"})[0] == 200
    assert request(engine.port, "GET", "/health")[0] == 200
    assert get_json(engine.port, "/standin/launch")["env"]["VLLM_API_KEY"].startswith("<redacted sha256:")


def test_engine_health_faults(start_engine):
    engine = start_engine("org/model", env={"STANDIN_FAIL_HEALTH": "1"})
    assert request(engine.port, "GET", "/health")[0] == 503
    assert post_json(engine.port, "/standin/fault", {"fail_health": False}) == (200, {"fail_health": False})
    assert request(engine.port, "GET", "/health")[0] == 200
    post_json(engine.port, "/standin/fault", {"fail_health": True})
    assert request(engine.port, "GET", "/health")[0] == 503


def test_engine_startup_delay_keeps_port_closed(start_engine):
    start = time.monotonic()
    engine = start_engine("org/model", env={"STANDIN_STARTUP_DELAY_S": "1.5"}, wait=False)
    with pytest.raises(OSError):
        request(engine.port, "GET", "/health", timeout=1)
    wait_until(lambda: request(engine.port, "GET", "/health")[0] == 200, 15, "health after the delay", engine.proc)
    assert time.monotonic() - start >= 1.5


def test_engine_crash_after(start_engine):
    engine = start_engine("org/model", env={"STANDIN_CRASH_AFTER_S": "0.5"})
    assert engine.proc.wait(timeout=10) == 1
    assert "crashing on purpose" in engine.stop()


def test_engine_headless_serves_only_standin_routes(start_engine):
    engine = start_engine("org/model", "--headless")
    assert request(engine.port, "GET", "/health")[0] == 404
    assert request(engine.port, "GET", "/v1/models")[0] == 404
    assert get_json(engine.port, "/standin/launch")["headless"] is True


def test_engine_weights_from_hf_cache(start_engine, tmp_path):
    cache = tmp_path / "hub"
    env = {"HF_HUB_CACHE": str(cache), "STANDIN_REQUIRE_WEIGHTS": "1"}
    missing = start_engine("org/model", env=env, wait=False)
    assert missing.proc.wait(timeout=10) == 1
    assert "not found" in missing.stop()
    snapshot = cache / "models--org--model" / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}", encoding="utf-8")
    engine = start_engine("org/model", env=env)
    weights = get_json(engine.port, "/standin/launch")["weights"]
    assert weights == {"found": True, "path": str(snapshot), "files": {"config.json": 2}}


def test_engine_without_model_exits_2(start_engine):
    engine = start_engine(wait=False)
    assert engine.proc.wait(timeout=10) == 2


# --- the Hub stand-in --------------------------------------------------------------
class HubServer:
    def __init__(self, proc: subprocess.Popen, port: int):
        self.proc = proc
        self.port = port
        self.endpoint = "http://127.0.0.1:%d" % port

    def stats(self) -> dict:
        return get_json(self.port, "/_standin/stats")

    def reset(self) -> None:
        assert post_json(self.port, "/_standin/reset", {})[0] == 200

    def fault(self, **fault) -> None:
        status, reply = post_json(self.port, "/_standin/fault", fault)
        assert status == 200, reply


@pytest.fixture
def start_hub():
    started = []

    def _start(*args: str, env: dict | None = None) -> HubServer:
        proc = subprocess.Popen([sys.executable, str(HUB), "--host", "127.0.0.1", "--port", "0", *args],
                                env=dict(os.environ, **(env or {})), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        line = proc.stdout.readline()
        assert line.startswith("hub-standin: listening on http://127.0.0.1:"), line
        hub = HubServer(proc, int(line.split("127.0.0.1:")[1].split()[0]))
        started.append(hub)
        return hub

    yield _start
    for hub in started:
        if hub.proc.poll() is None:
            hub.proc.terminate()
            hub.proc.wait(timeout=10)


@pytest.fixture
def hub(start_hub):
    return start_hub()


def hf_download(hub: HubServer, cache: Path, repo: str = "org/tiny", *extra: str, token: str | None = None):
    """Run the real `hf download` against the stand-in; return the CompletedProcess."""
    if HF_CLI is None:
        pytest.skip("the `hf` CLI (huggingface_hub, requirements-dev.txt) is not installed")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update({"HF_ENDPOINT": hub.endpoint, "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HOME": str(cache.parent / "hf-home")})
    if token:
        env["HF_TOKEN"] = token
    return subprocess.run([HF_CLI, "download", repo, "--cache-dir", str(cache), *extra],
                          env=env, capture_output=True, text=True, timeout=120, check=False)


def repo_files(hub: HubServer, repo: str = "org/tiny") -> dict[str, int]:
    sha = get_json(hub.port, "/api/models/%s/revision/main" % repo)["sha"]
    return {e["path"]: e["size"] for e in get_json(hub.port, "/api/models/%s/tree/%s" % (repo, sha))}


def snapshot_dir(cache: Path, repo: str = "org/tiny") -> Path:
    snapshots = list((cache / ("models--" + repo.replace("/", "--")) / "snapshots").iterdir())
    assert len(snapshots) == 1, snapshots
    return snapshots[0]


def shard_sha256(hub: HubServer, name: str, repo: str = "org/tiny") -> str:
    sha = get_json(hub.port, "/api/models/%s/revision/main" % repo)["sha"]
    status, _headers, raw = request(hub.port, "GET", "/%s/resolve/%s/%s" % (repo, sha, name))
    assert status == 200
    return hashlib.sha256(raw).hexdigest()


def test_hub_api_shapes(hub):
    info = get_json(hub.port, "/api/models/org/tiny/revision/main")
    assert info["id"] == "org/tiny" and len(info["sha"]) == 40
    tree = get_json(hub.port, "/api/models/org/tiny/tree/%s?recursive=true&expand=false" % info["sha"])
    assert {e["path"] for e in tree} == {
        "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
        "model.safetensors.index.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}
    assert all({"type", "path", "size", "oid"} <= set(e) for e in tree)
    status, headers, raw = request(hub.port, "HEAD", "/org/tiny/resolve/%s/config.json" % info["sha"])
    assert status == 200 and raw == b""
    assert headers["X-Repo-Commit"] == info["sha"] and headers["ETag"].startswith('"')
    status, headers, raw = request(hub.port, "GET", "/org/tiny/resolve/main/model-00002-of-00002.safetensors",
                                   headers={"Range": "bytes=100-"})
    assert status == 206 and len(raw) == 2 * MIB - 100
    assert headers["Content-Range"] == "bytes 100-%d/%d" % (2 * MIB - 1, 2 * MIB)
    assert request(hub.port, "GET", "/api/models/org/tiny/revision/nope")[1]["X-Error-Code"] == "RevisionNotFound"
    # Content is a function of repo and revision only.
    assert shard_sha256(hub, "model-00002-of-00002.safetensors") == shard_sha256(hub, "model-00002-of-00002.safetensors")
    assert get_json(hub.port, "/api/models/other/repo/revision/main")["sha"] != info["sha"]


def test_hub_reset_drops_requests_that_began_before_it():
    """A request answered just before a reset is recorded after it: it must not count."""
    spec = importlib.util.spec_from_file_location("hub_standin_module", HUB)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    hub = module.Hub(["org/tiny"], ["main"], (64,), None)
    entry = {"method": "GET", "path": "/api/models/org/tiny/tree/x", "auth": False}
    before = hub.generation
    hub.reset()
    hub.record(dict(entry), None, 0, before)
    assert hub.stats["request_count"] == 0 and hub.stats["auth"]["without_header"] == 0
    hub.record(dict(entry), None, 0, hub.generation)
    assert hub.stats["request_count"] == 1 and hub.stats["auth"]["without_header"] == 1


def test_hub_shards_are_valid_safetensors(hub):
    status, _headers, raw = request(hub.port, "GET", "/org/tiny/resolve/main/model-00002-of-00002.safetensors")
    assert status == 200
    header_len = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + header_len])
    start, end = header["model-00002-of-00002"]["data_offsets"]
    assert 8 + header_len + end == len(raw) == 2 * MIB and start == 0


@pytest.mark.slow
def test_hf_download_then_rerun_fetches_nothing(hub, tmp_path):
    cache = tmp_path / "cache"
    files = repo_files(hub)
    hub.reset()
    result = hf_download(hub, cache, token="hf_test_token_value")
    assert result.returncode == 0, result.stderr
    stats = hub.stats()
    assert stats["files"] == {"org/tiny/" + name: size for name, size in files.items()}
    assert stats["total_bytes"] == sum(files.values())
    assert set(stats["gets"].values()) == {1}
    # Every request carries the token, except huggingface_hub's best-effort agent-registry probe,
    # sent at most once.
    unauthenticated = [r["path"] for r in stats["requests"] if not r["auth"]]
    assert unauthenticated in ([], ["/api/agent-harnesses"]), unauthenticated
    assert stats["auth"]["without_header"] <= 1 and stats["auth"]["with_header"] > 0
    snap = snapshot_dir(cache)
    assert {p.name: p.stat().st_size for p in snap.iterdir()} == files

    hub.reset()
    result = hf_download(hub, cache, token="hf_test_token_value")
    assert result.returncode == 0, result.stderr
    assert hub.stats()["total_bytes"] == 0
    hub.proc.terminate()
    _out, log = hub.proc.communicate(timeout=10)
    assert "auth=yes" in log
    assert "hf_test_token_value" not in log


@pytest.mark.slow
def test_hf_download_resumes_a_dropped_connection_in_the_same_run(hub, tmp_path):
    """A cut mid-file is resumed with a Range request (whole 10 MiB chunks are kept)."""
    name = "model-00001-of-00002.safetensors"
    size = repo_files(hub)[name]
    assert size > 10 * MIB, "the shard must exceed huggingface_hub's 10 MiB download chunk"
    hub.fault(drop_after_bytes=11 * MIB, path=name, times=1)
    result = hf_download(hub, tmp_path / "cache")
    assert result.returncode == 0, result.stderr
    stats = hub.stats()
    assert stats["faults_triggered"] == 1
    ranges = [r["range"] for r in stats["requests"] if r["path"].endswith(name) and r["method"] == "GET"]
    assert ranges == [None, "bytes=%d-" % (10 * MIB)]
    assert stats["files"]["org/tiny/" + name] == 11 * MIB + (size - 10 * MIB)
    got = hashlib.sha256((snapshot_dir(tmp_path / "cache") / name).read_bytes()).hexdigest()
    assert got == shard_sha256(hub, name)


@pytest.mark.slow
def test_hf_download_rerun_after_failure_skips_complete_files(hub, tmp_path):
    """The connection keeps dropping, hf gives up; the re-run fetches only the broken file.

    huggingface_hub 2.4 keeps partial files per process and deletes them when the
    download fails (huggingface_hub PR #4228), so across runs the granularity is
    the file: complete files are never fetched again, a broken one starts over.
    """
    cache = tmp_path / "cache"
    files = repo_files(hub)
    broken = "model-00001-of-00002.safetensors"
    hub.fault(drop_after_bytes=3 * MIB, path=broken, times=100)
    result = hf_download(hub, cache)
    assert result.returncode != 0
    assert "peer closed connection" in result.stderr or "RemoteProtocolError" in result.stderr, result.stderr[-2000:]
    first = hub.stats()
    for name, size in files.items():
        if name != broken:
            assert first["files"]["org/tiny/" + name] == size

    hub.reset()  # also clears the fault
    result = hf_download(hub, cache)
    assert result.returncode == 0, result.stderr
    second = hub.stats()
    assert second["files"] == {"org/tiny/" + broken: files[broken]}
    assert second["total_bytes"] == files[broken]
    assert sorted(p.name for p in snapshot_dir(cache).iterdir()) == sorted(files)


@pytest.mark.slow
def test_hf_download_gated_repo_needs_the_token(start_hub, tmp_path):
    hub = start_hub("--repo", "org/gated", env={"HUB_STANDIN_REQUIRED_TOKEN": "hf_right"})
    result = hf_download(hub, tmp_path / "c1", "org/gated")
    assert result.returncode != 0
    assert hub.stats()["auth"]["rejected"] >= 1
    result = hf_download(hub, tmp_path / "c2", "org/gated", token="hf_right")
    assert result.returncode == 0, result.stderr
    result = hf_download(hub, tmp_path / "c3", "org/other", token="hf_right")
    assert result.returncode != 0 and "not found" in result.stderr.lower()


def test_hub_required_token_at_run_time(hub):
    path = "/api/models/org/tiny/revision/main"
    assert request(hub.port, "GET", path)[0] == 200
    assert post_json(hub.port, "/_standin/config", {"required_token": "hf_x"}) == (200, {"required_token_set": True})
    assert request(hub.port, "GET", path)[0] == 401
    assert request(hub.port, "GET", path, headers={"Authorization": "Bearer hf_x"})[0] == 200
    hub.reset()
    assert request(hub.port, "GET", path)[0] == 200
    assert post_json(hub.port, "/_standin/config", {"bogus": 1})[0] == 404


# --- the real vllm-router in front of stand-ins ------------------------------------------
@pytest.fixture
def start_router():
    if ROUTER_CLI is None:
        pytest.skip("vllm-router is not installed (requirements-integration.txt; `make venv`)")
    started = []

    def _start(*args: str) -> int:
        port = free_port()
        proc = subprocess.Popen([ROUTER_CLI, "--host", "127.0.0.1", "--port", str(port),
                                 "--prometheus-host", "127.0.0.1", "--prometheus-port", str(free_port()),
                                 "--worker-startup-timeout-secs", "30", *args],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        started.append(proc)
        wait_until(lambda: request(port, "GET", "/health")[0] == 200, 40, "vllm-router on :%d" % port, proc)
        return port

    yield _start
    for proc in started:
        stop(proc)


@pytest.mark.slow
def test_router_round_robin_over_two_standins(start_engine, start_router):
    engines = [start_engine("org/model"), start_engine("org/model")]
    port = start_router("--policy", "round_robin", "--worker-urls",
                        *("http://127.0.0.1:%d" % e.port for e in engines))
    for _index in range(4):
        status, reply = post_json(port, "/v1/completions", {"model": "org/model", "prompt": "hi", "max_tokens": 2})
        assert status == 200, reply
        assert reply["choices"][0]["text"] == "v1-tok0 v1-tok1"
    counts = [get_json(e.port, "/standin/stats")["requests"].get("/v1/completions", 0) for e in engines]
    assert counts == [2, 2]


@pytest.mark.slow
def test_router_prefill_decode_over_two_standins(start_engine, start_router):
    prefill, decode = start_engine("org/model"), start_engine("org/model")
    port = start_router("--vllm-pd-disaggregation", "--prefill", "http://127.0.0.1:%d" % prefill.port,
                        "--decode", "http://127.0.0.1:%d" % decode.port)
    status, reply = post_json(port, "/v1/chat/completions",
                              {"model": "org/model", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4})
    assert status == 200, reply
    assert reply["choices"][0]["message"]["content"] == "v1-tok0 v1-tok1 v1-tok2 v1-tok3"
    p_stats = get_json(prefill.port, "/standin/stats")
    d_stats = get_json(decode.port, "/standin/stats")
    assert p_stats["last_request"]["body"]["max_tokens"] == 1
    assert p_stats["last_kv_transfer_params"]["do_remote_decode"] is True
    # Decode received what prefill answered: the prefill engine's id.
    assert d_stats["last_kv_transfer_params"]["remote_engine_id"] == "standin-%s-%d" % (socket.gethostname(), prefill.port)
    assert d_stats["last_request"]["body"]["max_tokens"] == 4
