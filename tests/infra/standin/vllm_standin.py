"""TEST STAND-IN for the vLLM OpenAI-compatible server. It is NOT vLLM.

The integration tests cannot run vLLM (no GPUs, no Docker Hub), so the image
``vllm-standin`` puts this stdlib-only server behind the same entrypoint as the
real image (``vllm serve``): ``docker run IMAGE <model> <flags...>`` behaves like
the real image from the outside. It

* parses the few flags it needs (``--host``, ``--port`` (8000), ``--model``,
  ``--served-model-name``, ``--api-key``, ``--headless``) and accepts every other
  flag unchanged;
* records the argv and environment it was started with (secret-looking variables
  redacted to a hash) to ``$STANDIN_RECORD_DIR/<hostname>-<port>.json``
  (default ``/var/lib/vllm-standin``), prints the same record on one log line
  starting ``STANDIN-LAUNCH``, and serves it at ``GET /standin/launch``;
* answers ``GET /health``, ``GET /v1/models``, ``POST /v1/completions``,
  ``POST /v1/chat/completions`` (OpenAI-shaped, honours ``max_tokens``, streams
  when asked, echoes ``kv_transfer_params`` for prefill/decode routing),
  ``GET /metrics`` (Prometheus text, vLLM metric names);
* counts requests (``GET /standin/stats``) and takes faults at run time
  (``POST /standin/fault``).

Environment knobs (faults):

``STANDIN_FAIL_HEALTH=1``        ``/health`` answers 503.
``STANDIN_STARTUP_DELAY_S=N``    sleep N seconds before binding the port (model load).
``STANDIN_CRASH_AFTER_S=N``      exit 1 N seconds after start (a dying rank).
``STANDIN_REQUIRE_WEIGHTS=1``    exit 1 at start when the model is not in the HF cache.
``STANDIN_VERSION``              version it reports (the image sets it per tag).

With ``--headless`` (a multi-node follower) only ``/standin/*`` is served: the
real follower has no API server. Multi-node groups are not emulated: the
integration scenarios form real ones with the real vLLM engine
(docs/testing.md, "The real engine"). What the stand-in is still for: fast unit
tests of vllm-router in front of engines (tests/unit/test_standins.py) and faults
the real engine cannot show on demand (``STANDIN_FAIL_HEALTH``,
``STANDIN_CRASH_AFTER_S``), plus the ``smoke`` scenario.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import signal
import socket
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

BANNER = "TEST STAND-IN for the vLLM OpenAI server (vllm-standin), not vLLM"
DEFAULT_RECORD_DIR = "/var/lib/vllm-standin"
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|APIKEY|CREDENTIAL|PRIVATE", re.IGNORECASE)
MAX_MODEL_LEN_DEFAULT = 4096


def log(message: str) -> None:
    """One line on stdout, flushed (the systemd journal reads it through `docker run`)."""
    print(f"vllm-standin: {message}", flush=True)


def redact_env(environ: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """Copy of ``environ`` with secret-looking values replaced by a short hash.

    The hash lets a test check that the right secret arrived without the stand-in
    writing the secret anywhere.
    """
    out = {}
    redacted = []
    for name in sorted(environ):
        value = environ[name]
        if SECRET_NAME.search(name) and value:
            out[name] = "<redacted sha256:%s>" % hashlib.sha256(value.encode()).hexdigest()[:16]
            redacted.append(name)
        else:
            out[name] = value
    return out, redacted


def build_parser() -> argparse.ArgumentParser:
    """The subset of `vllm serve` flags the stand-in acts on; the rest are kept verbatim."""
    parser = argparse.ArgumentParser(prog="vllm serve", add_help=False)
    parser.add_argument("model_tag", nargs="?")
    parser.add_argument("--model")
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--served-model-name", nargs="+")
    parser.add_argument("--api-key")
    parser.add_argument("--max-model-len", type=int, default=MAX_MODEL_LEN_DEFAULT)
    parser.add_argument("--headless", action="store_true")
    return parser


def hf_cache_dir(environ: dict[str, str]) -> Path:
    """Where huggingface_hub would look for cached repos with this environment."""
    if environ.get("HF_HUB_CACHE"):
        return Path(environ["HF_HUB_CACHE"])
    if environ.get("HF_HOME"):
        return Path(environ["HF_HOME"]) / "hub"
    return Path(environ.get("HOME", "/root")) / ".cache" / "huggingface" / "hub"


def find_weights(model: str, environ: dict[str, str]) -> dict:
    """Report what vLLM would find for ``model``: a local directory or an HF cache snapshot."""
    candidates = []
    if model and os.path.isdir(model):
        candidates.append(Path(model))
    else:
        repo_dir = hf_cache_dir(environ) / ("models--" + (model or "").replace("/", "--"))
        snapshots = repo_dir / "snapshots"
        if snapshots.is_dir():
            candidates.extend(sorted(p for p in snapshots.iterdir() if p.is_dir()))
    for path in candidates:
        files = {}
        for entry in sorted(path.rglob("*")):
            if entry.is_file():
                files[str(entry.relative_to(path))] = entry.stat().st_size
        if files:
            return {"found": True, "path": str(path), "files": files}
    return {"found": False, "searched": str(hf_cache_dir(environ)) if not (model and os.path.isdir(model)) else model}


class Engine:
    """State shared by the request handlers: launch record, counters, faults."""

    def __init__(self, argv: list[str], args: argparse.Namespace, unknown: list[str], environ: dict[str, str]):
        self.args = args
        self.model = args.model or args.model_tag or ""
        self.served_names = args.served_model_name or [self.model]
        self.api_key = args.api_key or environ.get("VLLM_API_KEY")
        self.version = environ.get("STANDIN_VERSION", "dev")
        self.fail_health = environ.get("STANDIN_FAIL_HEALTH", "") not in ("", "0")
        self.engine_id = "standin-%s-%d" % (socket.gethostname(), args.port)
        self.lock = threading.Lock()
        self.stats = {"requests": {}, "kv_transfer_requests": 0, "last_kv_transfer_params": None,
                      "prompt_tokens": 0, "generation_tokens": 0, "last_request": None}
        env, redacted = redact_env(environ)
        self.record = {
            "standin": True,
            "note": BANNER,
            "version": self.version,
            "argv": argv,
            "serve_args": argv[2:] if argv[1:2] == ["serve"] else argv[1:],
            "model": self.model,
            "served_model_names": self.served_names,
            "host": args.host,
            "port": args.port,
            "headless": args.headless,
            "unparsed_flags": unknown,
            "env": env,
            "redacted_env": redacted,
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
            "started_at": time.time(),
            "weights": find_weights(self.model, environ),
        }
        record_dir = Path(environ.get("STANDIN_RECORD_DIR") or DEFAULT_RECORD_DIR)
        self.record["record_path"] = str(record_dir / ("%s-%d.json" % (socket.gethostname(), args.port)))

    def write_record(self) -> None:
        """Write the launch record file and its log line."""
        path = Path(self.record["record_path"])
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(self.record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        except OSError as exc:
            log("could not write the launch record %s: %s" % (path, exc))
        log("STANDIN-LAUNCH " + json.dumps(self.record, sort_keys=True))

    def count(self, path: str, body: dict | None) -> None:
        """Count one request; remember PD routing parameters and token usage."""
        with self.lock:
            self.stats["requests"][path] = self.stats["requests"].get(path, 0) + 1
            if body is not None:
                self.stats["last_request"] = {"path": path, "body": body}
                if "kv_transfer_params" in body:
                    self.stats["kv_transfer_requests"] += 1
                    self.stats["last_kv_transfer_params"] = body.get("kv_transfer_params")

    def add_tokens(self, prompt: int, generated: int) -> None:
        with self.lock:
            self.stats["prompt_tokens"] += prompt
            self.stats["generation_tokens"] += generated

    def metrics(self) -> str:
        """Prometheus text with the vLLM metric names routers and dashboards read."""
        with self.lock:
            served = sum(n for p, n in self.stats["requests"].items() if p.startswith("/v1/"))
            lines = [
                "# HELP vllm:num_requests_running Number of requests in model execution batches (stand-in: always 0).",
                "# TYPE vllm:num_requests_running gauge",
                'vllm:num_requests_running{model_name="%s"} 0' % self.served_names[0],
                "# HELP vllm:num_requests_waiting Number of requests waiting to be processed (stand-in: always 0).",
                "# TYPE vllm:num_requests_waiting gauge",
                'vllm:num_requests_waiting{model_name="%s"} 0' % self.served_names[0],
                "# HELP vllm:prompt_tokens_total Number of prefill tokens processed.",
                "# TYPE vllm:prompt_tokens_total counter",
                'vllm:prompt_tokens_total{model_name="%s"} %d' % (self.served_names[0], self.stats["prompt_tokens"]),
                "# HELP vllm:generation_tokens_total Number of generation tokens processed.",
                "# TYPE vllm:generation_tokens_total counter",
                'vllm:generation_tokens_total{model_name="%s"} %d' % (self.served_names[0], self.stats["generation_tokens"]),
                "# HELP vllm:request_success_total Count of successfully processed requests.",
                "# TYPE vllm:request_success_total counter",
                'vllm:request_success_total{model_name="%s"} %d' % (self.served_names[0], served),
                "# HELP standin_info The stand-in engine (not vLLM) and its version.",
                "# TYPE standin_info gauge",
                'standin_info{version="%s"} 1' % self.version,
            ]
        return "\n".join(lines) + "\n"


def count_tokens(text: str) -> int:
    return max(1, len(text.split()))


def generated_text(max_tokens: int, engine: Engine) -> list[str]:
    """Deterministic "tokens": ``tok0 tok1 ...`` tagged with the version."""
    return ["%s-tok%d" % (engine.version, i) for i in range(max_tokens)]


class Handler(BaseHTTPRequestHandler):
    """HTTP front end of the stand-in."""

    server_version = "vllm-standin"
    protocol_version = "HTTP/1.1"
    engine: Engine  # set by make_server()

    def log_message(self, format, *args):  # pylint: disable=redefined-builtin
        log("%s %s" % (self.address_string(), format % args))

    # --- plumbing -------------------------------------------------------
    def send_json(self, status: int, payload, headers: dict | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def send_text(self, status: int, text: str, content_type: str = "text/plain; charset=utf-8") -> None:
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def error(self, status: int, message: str, kind: str = "BadRequestError") -> None:
        self.send_json(status, {"error": {"message": message, "type": kind, "code": status}, "object": "error"})

    def read_json(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return {}
        return json.loads(raw)

    def authorized(self) -> bool:
        """vLLM's --api-key guards /v1/*; the other endpoints stay open."""
        if not self.engine.api_key or not self.path.startswith("/v1/"):
            return True
        if self.headers.get("Authorization", "") == "Bearer " + self.engine.api_key:
            return True
        self.send_json(401, {"error": "Unauthorized"})
        return False

    def api_disabled(self) -> bool:
        """Headless followers serve nothing but /standin/*."""
        if self.engine.args.headless and not self.path.startswith("/standin/"):
            self.error(404, "headless follower: no API server (vllm-standin)", "NotFoundError")
            return True
        return False

    # --- endpoints ------------------------------------------------------
    def do_GET(self):  # pylint: disable=invalid-name
        path = self.path.split("?", 1)[0]
        engine = self.engine
        if path == "/standin/launch":
            self.send_json(200, engine.record)
            return
        if path == "/standin/stats":
            with engine.lock:
                snapshot = json.loads(json.dumps(dict(engine.stats, version=engine.version)))
            self.send_json(200, snapshot)
            return
        if self.api_disabled() or not self.authorized():
            return
        engine.count(path, None)
        if path == "/health":
            if engine.fail_health:
                self.send_text(503, "stand-in health failure (STANDIN_FAIL_HEALTH)\n")
            else:
                self.send_text(200, "")
        elif path == "/v1/models":
            created = int(engine.record["started_at"])
            data = [{
                "id": name, "object": "model", "created": created, "owned_by": "vllm-standin",
                "root": engine.model, "parent": None, "max_model_len": engine.args.max_model_len,
                "permission": [],
                "standin": {"version": engine.version, "note": BANNER},
            } for name in engine.served_names]
            self.send_json(200, {"object": "list", "data": data})
        elif path == "/metrics":
            self.send_text(200, engine.metrics(), "text/plain; version=0.0.4; charset=utf-8")
        elif path == "/version":
            self.send_json(200, {"version": engine.version, "standin": True})
        else:
            self.error(404, "no route %s (vllm-standin)" % path, "NotFoundError")

    def do_POST(self):  # pylint: disable=invalid-name
        path = self.path.split("?", 1)[0]
        engine = self.engine
        try:
            body = self.read_json()
        except ValueError as exc:
            self.error(400, "invalid JSON body: %s" % exc)
            return
        if path == "/standin/fault":
            if "fail_health" in body:
                engine.fail_health = bool(body["fail_health"])
            self.send_json(200, {"fail_health": engine.fail_health})
            return
        if self.api_disabled() or not self.authorized():
            return
        if path not in ("/v1/completions", "/v1/chat/completions"):
            self.error(404, "no route %s (vllm-standin)" % path, "NotFoundError")
            return
        if not isinstance(body, dict):
            self.error(400, "the request body must be a JSON object")
            return
        engine.count(path, body)
        model = body.get("model") or engine.served_names[0]
        if model not in engine.served_names:
            self.error(404, "The model `%s` does not exist." % model, "NotFoundError")
            return
        try:
            max_tokens = next((body[k] for k in ("max_tokens", "max_completion_tokens") if body.get(k) is not None), 16)
            max_tokens = int(max_tokens)
        except (TypeError, ValueError):
            self.error(400, "max_tokens must be an integer, got %r" % body.get("max_tokens"))
            return
        if max_tokens < 1:
            self.error(400, "max_tokens must be at least 1, got %d" % max_tokens)
            return
        chat = path.endswith("/chat/completions")
        if chat:
            messages = body.get("messages") or []
            prompt = " ".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
        else:
            prompt = body.get("prompt") or ""
            prompt = " ".join(prompt) if isinstance(prompt, list) else str(prompt)
        tokens = generated_text(max_tokens, engine)
        prompt_tokens = count_tokens(prompt)
        engine.add_tokens(prompt_tokens, len(tokens))
        reply = {
            "id": ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex,
            "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()),
            "model": model,
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(tokens),
                      "total_tokens": prompt_tokens + len(tokens)},
            "system_fingerprint": "vllm-standin-%s" % engine.version,
        }
        if "kv_transfer_params" in body:
            # Prefill answers with what the decode side needs to pull the KV cache.
            reply["kv_transfer_params"] = {
                "do_remote_prefill": True, "do_remote_decode": False,
                "remote_engine_id": engine.engine_id, "remote_block_ids": [0],
                "remote_host": engine.record["hostname"], "remote_port": engine.args.port, "tp_size": 1,
            }
        text = " ".join(tokens)
        if body.get("stream"):
            self.stream(reply, tokens, chat)
            return
        if chat:
            reply["choices"] = [{"index": 0, "message": {"role": "assistant", "content": text},
                                 "finish_reason": "length", "logprobs": None}]
        else:
            reply["choices"] = [{"index": 0, "text": text, "finish_reason": "length", "logprobs": None}]
        self.send_json(200, reply)

    def stream(self, reply: dict, tokens: list[str], chat: bool) -> None:
        """Server-sent events, one chunk per token, then ``[DONE]`` (chunked transfer)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def chunk(payload: str) -> None:
            data = ("data: %s\n\n" % payload).encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

        base = {k: reply[k] for k in ("id", "created", "model")}
        base["object"] = "chat.completion.chunk" if chat else "text_completion"
        for index, token in enumerate(tokens):
            last = index == len(tokens) - 1
            piece = token if index == 0 else " " + token
            if chat:
                choice = {"index": 0, "delta": {"content": piece}, "finish_reason": "length" if last else None}
            else:
                choice = {"index": 0, "text": piece, "finish_reason": "length" if last else None}
            chunk(json.dumps(dict(base, choices=[choice])))
        chunk(json.dumps(dict(base, choices=[], usage=reply["usage"])))
        chunk("[DONE]")
        self.wfile.write(b"0\r\n\r\n")


def make_server(engine: Engine) -> ThreadingHTTPServer:
    """Bind the HTTP server (IPv6 when --host is an IPv6 address)."""
    handler = type("BoundHandler", (Handler,), {"engine": engine})
    server_cls = ThreadingHTTPServer
    if ":" in engine.args.host:
        server_cls = type("V6Server", (ThreadingHTTPServer,), {"address_family": socket.AF_INET6})
    server_cls.allow_reuse_address = True
    server_cls.daemon_threads = True
    return server_cls((engine.args.host, engine.args.port), handler)


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``vllm serve MODEL [flags]`` (also ``vllm_standin.py serve MODEL ...``)."""
    argv = list(sys.argv if argv is None else argv)
    argv[0] = "vllm"
    log(BANNER)
    rest = argv[1:]
    if rest[:1] == ["serve"]:
        rest = rest[1:]
    elif rest[:1] in (["--version"], ["version"]):
        print(os.environ.get("STANDIN_VERSION", "dev") + "+standin")
        return 0
    args, unknown = build_parser().parse_known_args(rest)
    engine = Engine(argv, args, unknown, dict(os.environ))
    if not engine.model:
        log("error: no model given (vllm serve MODEL ...)")
        return 2
    if os.environ.get("STANDIN_REQUIRE_WEIGHTS", "") not in ("", "0") and not engine.record["weights"]["found"]:
        engine.write_record()
        log("error: model %s not found (%s) and STANDIN_REQUIRE_WEIGHTS is set" % (engine.model, engine.record["weights"]))
        return 1

    def on_signal(signum, _frame):
        log("received signal %d, shutting down" % signum)
        sys.exit(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    delay = float(os.environ.get("STANDIN_STARTUP_DELAY_S") or 0)
    if delay > 0:
        log("simulating model load: %.1f s before the port opens (STANDIN_STARTUP_DELAY_S)" % delay)
        time.sleep(delay)
    crash_after = float(os.environ.get("STANDIN_CRASH_AFTER_S") or 0)
    if crash_after > 0:
        def crash():
            log("crashing on purpose after %.1f s (STANDIN_CRASH_AFTER_S)" % crash_after)
            os._exit(1)  # pylint: disable=protected-access
        threading.Timer(crash_after, crash).start()
    server = make_server(engine)
    engine.write_record()
    mode = " (headless: /standin/* only)" if args.headless else ""
    log("version %s serving %s on http://%s:%d%s" % (engine.version, ",".join(engine.served_names), args.host, args.port, mode))
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
