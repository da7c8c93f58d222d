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
``STANDIN_GROUP=0``              no multi-node group emulation (see below).

With ``--headless`` (a multi-node follower) only ``/standin/*`` is served: the
real follower has no API server.

Multi-node groups (vLLM's ``mp`` backend: ``--nnodes N --node-rank k
--master-addr A --master-port P``, default port 29501). With N > 1 the stand-in
plays one node of the group. The rendezvous is a stand-in protocol (JSON lines
over TCP), not torch's TCPStore; only the behaviour seen from outside is copied:

* HEAD (``--node-rank 0``, no ``--headless``) listens on ``P`` on all addresses.
  Each follower connects and says hello with its node rank. Until all N-1
  followers are there, ``/health`` and ``/v1/*`` answer 503 (``waiting for
  followers k/N-1``); real vLLM keeps its API port closed instead. When a
  follower's connection closes, errors or goes 5 s without a heartbeat (before
  or after the group formed), the head logs one ``lost follower rank k`` line and
  exits with status 1, like vLLM's engine core when a rank dies.
* FOLLOWER (``--headless``, node rank k > 0) connects to ``A:P``, retrying every
  1 s for ever, and says hello. When the head goes away (EOF, reset, 5 s without
  a heartbeat) it logs ``lost the head ... hanging (vllm issue #32136)`` and keeps
  running: it neither exits nor reconnects. That is the real bug a watchdog has
  to handle: only restarting the follower brings it back into a (new) group.
* Head and followers exchange a heartbeat line every second (socket timeout 5 s,
  TCP keepalive), so a killed container or a blocked network shows within ~5 s.
* ``GET /standin/group`` (both roles) answers ``{"role": "head"|"follower"|"single",
  "nnodes", "node_rank", "state": "waiting"|"formed"|"lost"|"disabled",
  "followers": [ranks], "since": <epoch of the last state change>, ...}``.
* ``--node-rank`` out of range, or k > 0 without ``--headless``, exits 2.
* ``STANDIN_GROUP=0`` turns the emulation off (escape hatch): the head serves at
  once and a follower is a plain headless stand-in.
"""

from __future__ import annotations

import argparse
import errno
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


# --- multi-node group emulation (mp backend) ----------------------------------------
GROUP_HEARTBEAT_S = 1.0   # each side sends a heartbeat line this often
GROUP_TIMEOUT_S = 5.0     # ... and gives the peer up after this long without a line
GROUP_RETRY_S = 1.0       # a follower retries the head this often
GROUP_PROTOCOL = "vllm-standin-group/1"


def build_group_parser() -> argparse.ArgumentParser:
    """vLLM's multi-node flags (ParallelConfig). Parsed apart so ``unparsed_flags`` keeps them."""
    parser = argparse.ArgumentParser(prog="vllm serve", add_help=False, allow_abbrev=False)
    parser.add_argument("--nnodes", "-n", type=int, default=1)
    parser.add_argument("--node-rank", "-r", type=int, default=0)
    parser.add_argument("--master-addr", default="127.0.0.1")
    parser.add_argument("--master-port", type=int, default=29501)
    return parser


def parse_group_args(rest: list[str]) -> argparse.Namespace:
    """The group flags in ``rest``; like vLLM, ``--node_rank`` is read as ``--node-rank``."""
    normalized = []
    for arg in rest:
        if arg.startswith("--"):
            name, sep, value = arg.partition("=")
            arg = name.replace("_", "-") + sep + value
        normalized.append(arg)
    args, _unknown = build_group_parser().parse_known_args(normalized)
    return args


def tune_socket(sock: socket.socket) -> None:
    """Short timeouts and TCP keepalive, so a dead peer shows within seconds."""
    sock.settimeout(GROUP_TIMEOUT_S)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (("TCP_KEEPIDLE", 2), ("TCP_KEEPINTVL", 1), ("TCP_KEEPCNT", 3), ("TCP_NODELAY", 1)):
        if hasattr(socket, name):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)


def send_line(sock: socket.socket, lock: threading.Lock, payload: dict) -> None:
    with lock:
        sock.sendall(json.dumps(payload).encode() + b"\n")


def read_line(reader) -> dict:
    """One JSON line from the peer; EOFError when it closed the connection."""
    raw = reader.readline(4096)
    if not raw:
        raise EOFError("connection closed")
    try:
        message = json.loads(raw)
    except ValueError as exc:
        raise ValueError("not a group message: %r" % raw[:80]) from exc
    if not isinstance(message, dict):
        raise ValueError("not a group message: %r" % raw[:80])
    return message


def why_gone(exc: BaseException) -> str:
    """Why a peer is gone, in words."""
    if isinstance(exc, EOFError):
        return "connection closed"
    if isinstance(exc, socket.timeout):
        return "no heartbeat for %.0f s" % GROUP_TIMEOUT_S
    return "%s: %s" % (type(exc).__name__, exc)


class Group:
    """This process's place in a multi-node group: its role, state and peers."""

    def __init__(self, args: argparse.Namespace, headless: bool, emulated: bool):
        self.nnodes = args.nnodes
        self.node_rank = args.node_rank
        self.master_addr = args.master_addr
        self.master_port = args.master_port
        if self.nnodes <= 1:
            self.role = "single"
        else:
            self.role = "follower" if headless else "head"
        self.emulated = emulated and self.role != "single"
        self.lock = threading.Lock()
        self.exit_lock = threading.Lock()
        self.state = "formed" if self.role == "single" else ("waiting" if self.emulated else "disabled")
        self.since = time.time()
        self.followers: dict[int, tuple[socket.socket, threading.Lock]] = {}  # head: rank -> (socket, send lock)
        self.group_followers: list[int] = []  # follower: the ranks the head reported
        self.connected = False  # follower: joined the head

    def check(self) -> str | None:
        """An error message for an impossible rank layout, else None (not checked without emulation)."""
        if not self.emulated:
            return None
        if not 0 <= self.node_rank < self.nnodes:
            return "--node-rank %d is outside 0..%d (--nnodes %d)" % (self.node_rank, self.nnodes - 1, self.nnodes)
        if self.role == "head" and self.node_rank != 0:
            return ("--node-rank %d without --headless: the stand-in plays the API server only on node rank 0 "
                    "(followers run with --headless)" % self.node_rank)
        if self.role == "follower" and self.node_rank == 0:
            return "--headless with --node-rank 0: node rank 0 is the head (drop --headless there)"
        return None

    def describe(self) -> dict:
        """For the launch record."""
        return {"role": self.role, "nnodes": self.nnodes, "node_rank": self.node_rank, "master_addr": self.master_addr,
                "master_port": self.master_port, "emulated": self.emulated}

    def snapshot(self) -> dict:
        """``GET /standin/group``."""
        with self.lock:
            followers = sorted(self.followers) if self.role == "head" else list(self.group_followers)
            reply = {"role": self.role, "nnodes": self.nnodes, "node_rank": self.node_rank, "state": self.state,
                     "followers": followers, "since": self.since, "emulated": self.emulated,
                     "master": "%s:%d" % (self.master_addr, self.master_port), "note": BANNER}
            if self.role == "follower":
                reply["connected"] = self.connected
        return reply

    def not_ready(self) -> str | None:
        """Why the head cannot serve yet (followers missing), else None."""
        if self.role != "head" or not self.emulated:
            return None
        with self.lock:
            if self.state == "formed":
                return None
            return "waiting for followers %d/%d" % (len(self.followers), self.nnodes - 1)

    def set_state(self, state: str) -> None:
        """Change the state (the caller holds ``self.lock``)."""
        if state != self.state:
            self.state = state
            self.since = time.time()

    def start(self) -> None:
        """Head: bind the master port (OSError when it cannot). Follower: start looking for the head."""
        if not self.emulated:
            return
        if self.role == "head":
            listener = self.bind()
            log("group head: node rank 0 of %d, waiting for %d follower(s) on port %d (all addresses; "
                "/health answers 503 until they are all connected)" % (self.nnodes, self.nnodes - 1, self.master_port))
            threading.Thread(target=self.accept_loop, args=(listener,), name="group-accept", daemon=True).start()
            threading.Thread(target=self.head_heartbeats, name="group-heartbeat", daemon=True).start()
        else:
            threading.Thread(target=self.follower_loop, name="group-follower", daemon=True).start()

    # --- head -------------------------------------------------------------------------
    def bind(self) -> socket.socket:
        """Listen on the master port on every address (IPv6 dual stack where the host has it)."""
        if socket.has_dualstack_ipv6():
            try:
                return socket.create_server(("", self.master_port), family=socket.AF_INET6, dualstack_ipv6=True)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise
        return socket.create_server(("0.0.0.0", self.master_port))

    def exit_lost(self, rank: int, peer: str, reason: str) -> None:
        """A follower is gone: one log line, then exit 1 (vLLM's engine core dies with its rank)."""
        with self.exit_lock:  # only the first lost follower logs; the process is gone before a second one could
            with self.lock:
                self.set_state("lost")
            log("group head: lost follower rank %d (%s: %s); exiting with status 1 like vLLM's engine core "
                "when a rank dies" % (rank, peer, reason))
            os._exit(1)  # pylint: disable=protected-access

    def accept_loop(self, listener: socket.socket) -> None:
        while True:
            try:
                conn, addr = listener.accept()
            except OSError as exc:
                log("group head: accept failed: %s" % exc)
                time.sleep(GROUP_RETRY_S)
                continue
            threading.Thread(target=self.serve_follower, args=(conn, addr), name="group-conn", daemon=True).start()

    def register(self, hello: dict, conn: socket.socket, send_lock: threading.Lock) -> tuple[str | None, int, bool]:
        """Add a follower: (error message or None, followers now, whether this one completed the group)."""
        if hello.get("protocol") != GROUP_PROTOCOL:
            return "not a stand-in group hello (protocol %r)" % hello.get("protocol"), 0, False
        rank, nnodes = hello.get("node_rank"), hello.get("nnodes")
        if nnodes != self.nnodes:
            return "the follower says --nnodes %r, the head has --nnodes %d" % (nnodes, self.nnodes), 0, False
        if not isinstance(rank, int) or not 1 <= rank < self.nnodes:
            return "node rank %r is not a follower rank (1..%d)" % (rank, self.nnodes - 1), 0, False
        with self.lock:
            if self.state != "waiting":
                return "the group is already %s" % self.state, 0, False
            if rank in self.followers:
                return "node rank %d is already connected" % rank, 0, False
            self.followers[rank] = (conn, send_lock)
            complete = len(self.followers) == self.nnodes - 1
            if complete:
                self.set_state("formed")
            return None, len(self.followers), complete

    def serve_follower(self, conn: socket.socket, addr) -> None:
        """One follower's connection: hello, acknowledgement, then heartbeats until it goes."""
        host = addr[0][len("::ffff:"):] if addr[0].startswith("::ffff:") else addr[0]
        peer = "%s:%d" % (host, addr[1])
        send_lock = threading.Lock()
        try:
            tune_socket(conn)
            reader = conn.makefile("rb")
            hello = read_line(reader)
        except (OSError, ValueError, EOFError) as exc:
            # Not a follower yet (a port probe, say): nothing to lose.
            log("group head: ignored a connection from %s without a hello (%s)" % (peer, why_gone(exc)))
            conn.close()
            return
        error, count, complete = self.register(hello, conn, send_lock)
        if error:
            log("group head: rejected %s: %s" % (peer, error))
            try:
                send_line(conn, send_lock, {"ok": False, "error": error})
            except OSError:
                pass
            conn.close()
            return
        rank = hello["node_rank"]
        log("group head: follower rank %d joined from %s (host %s, %d/%d)"
            % (rank, peer, hello.get("hostname"), count, self.nnodes - 1))
        try:
            send_line(conn, send_lock, {"ok": True, "nnodes": self.nnodes})
        except OSError as exc:
            self.exit_lost(rank, peer, why_gone(exc))
        if complete:
            with self.lock:
                formed = sorted(self.followers)
                peers = [(r, c, lk) for r, (c, lk) in self.followers.items()]
            log("group head: group formed, followers %s; /health answers 200" % formed)
            for other_rank, other, other_lock in peers:
                try:
                    send_line(other, other_lock, {"event": "formed", "followers": formed})
                except OSError as exc:
                    self.exit_lost(other_rank, "its connection", why_gone(exc))
        while True:
            try:
                read_line(reader)
            except (OSError, ValueError, EOFError) as exc:
                self.exit_lost(rank, peer, why_gone(exc))

    def head_heartbeats(self) -> None:
        while True:
            time.sleep(GROUP_HEARTBEAT_S)
            with self.lock:
                peers = [(r, c, lk) for r, (c, lk) in self.followers.items()]
            for rank, conn, send_lock in peers:
                try:
                    send_line(conn, send_lock, {"hb": time.time()})
                except OSError as exc:
                    self.exit_lost(rank, "its connection", why_gone(exc))

    # --- follower -----------------------------------------------------------------------
    def join(self) -> tuple[socket.socket, object, threading.Lock]:
        """Retry the head every GROUP_RETRY_S until it accepts this follower; never gives up."""
        head = "%s:%d" % (self.master_addr, self.master_port)
        last_reason = None
        while True:
            conn = None
            try:
                conn = socket.create_connection((self.master_addr, self.master_port), timeout=GROUP_TIMEOUT_S)
                tune_socket(conn)
                send_lock = threading.Lock()
                send_line(conn, send_lock, {"protocol": GROUP_PROTOCOL, "node_rank": self.node_rank, "nnodes": self.nnodes,
                                            "hostname": socket.gethostname(), "pid": os.getpid()})
                reader = conn.makefile("rb")
                ack = read_line(reader)
                if ack.get("ok"):
                    return conn, reader, send_lock
                reason = "the head refused: %s" % ack.get("error")
            except (OSError, ValueError, EOFError) as exc:
                reason = why_gone(exc)
            if conn is not None:
                conn.close()
            if reason != last_reason:
                log("group follower: waiting for the head at %s (%s); retrying every %.0f s"
                    % (head, reason, GROUP_RETRY_S))
                last_reason = reason
            time.sleep(GROUP_RETRY_S)

    def follower_loop(self) -> None:
        head = "%s:%d" % (self.master_addr, self.master_port)
        log("group follower: node rank %d of %d, connecting to the head at %s" % (self.node_rank, self.nnodes, head))
        conn, reader, send_lock = self.join()
        with self.lock:
            self.connected = True
        log("group follower: joined the head at %s as node rank %d of %d" % (head, self.node_rank, self.nnodes))
        stop = threading.Event()

        def heartbeats():
            while not stop.wait(GROUP_HEARTBEAT_S):
                try:
                    send_line(conn, send_lock, {"hb": time.time(), "node_rank": self.node_rank})
                except OSError:
                    return  # the reader below notices the loss

        threading.Thread(target=heartbeats, name="group-heartbeat", daemon=True).start()
        reason = "?"
        while True:
            try:
                message = read_line(reader)
            except (OSError, ValueError, EOFError) as exc:
                reason = why_gone(exc)
                break
            if message.get("event") == "formed":
                with self.lock:
                    self.group_followers = list(message.get("followers") or [])
                    self.set_state("formed")
                log("group follower: group formed, followers %s" % self.group_followers)
        stop.set()
        with self.lock:
            self.connected = False
            self.set_state("lost")
        try:
            conn.close()
        except OSError:
            pass
        log("group follower: lost the head at %s (%s); hanging (vllm issue #32136): this follower neither exits "
            "nor reconnects, only a restart brings it back" % (head, reason))


class Engine:
    """State shared by the request handlers: launch record, counters, faults."""

    def __init__(self, argv: list[str], args: argparse.Namespace, unknown: list[str], environ: dict[str, str],
                 group: Group | None = None):
        self.args = args
        self.group = group or Group(parse_group_args([]), args.headless, emulated=False)
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
            "group": self.group.describe(),
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
        if path == "/standin/group":
            self.send_json(200, engine.group.snapshot())
            return
        if self.api_disabled() or not self.authorized():
            return
        engine.count(path, None)
        waiting = engine.group.not_ready()
        if path == "/health":
            if waiting:
                self.send_text(503, "%s (vllm-standin multi-node head)\n" % waiting)
            elif engine.fail_health:
                self.send_text(503, "stand-in health failure (STANDIN_FAIL_HEALTH)\n")
            else:
                self.send_text(200, "")
        elif waiting and path.startswith("/v1/"):
            self.error(503, "%s (vllm-standin multi-node head)" % waiting, "ServiceUnavailableError")
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
        waiting = engine.group.not_ready()
        if waiting and path.startswith("/v1/"):
            self.error(503, "%s (vllm-standin multi-node head)" % waiting, "ServiceUnavailableError")
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
    group = Group(parse_group_args(rest), args.headless, emulated=os.environ.get("STANDIN_GROUP", "") != "0")
    engine = Engine(argv, args, unknown, dict(os.environ), group)
    if not engine.model:
        log("error: no model given (vllm serve MODEL ...)")
        return 2
    group_error = group.check()
    if group_error:
        log("error: %s" % group_error)
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
    if group.role != "single" and not group.emulated:
        log("multi-node %s (node rank %d of %d) without group emulation (STANDIN_GROUP=0)" % (group.role, group.node_rank, group.nnodes))
    try:
        group.start()
    except OSError as exc:
        log("error: group head cannot listen on the master port %d: %s" % (group.master_port, exc))
        return 1
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
