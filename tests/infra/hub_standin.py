"""TEST STAND-IN for the Hugging Face Hub (huggingface.co is unreachable here).

A stdlib HTTP server with exactly the endpoints ``hf download`` (huggingface_hub
2.x) uses when ``HF_ENDPOINT`` points at it (docs/testing.md, "Hub stand-in"):

* ``GET  /api/models/{repo}/revision/{rev}``   -> ``{"id", "sha", "siblings"}`` (404: revision not found)
* ``GET  /api/models/{repo}/tree/{sha}``       -> ``[{"type": "file", "path", "size", "oid"}, ...]``
* ``HEAD /{repo}/resolve/{rev}/{file}``         -> ``X-Repo-Commit``, ``ETag``, ``Content-Length``
* ``GET  /{repo}/resolve/{rev}/{file}``         -> the bytes (``Range: bytes=N-`` answered with 206)

Every repository it serves is a small generated fake model (config.json,
tokenizer files and two few-MiB ``*.safetensors`` shards of deterministic
bytes; the shards are valid safetensors files). The content depends only on the
repo id and the revision name, so every run and every host sees the same bytes.
Repositories named with ``--local-repo ID=DIR`` serve the files of DIR instead:
the tiny real model that the real vLLM engine loads (tests/infra/tiny_model.py).

Test controls (JSON over HTTP):

* ``GET  /_standin/stats``  bytes served per file and in total, request log, auth counts
* ``POST /_standin/reset``  zero the counters, clear faults and the token set below
* ``POST /_standin/config`` ``{"required_token": "..."}``: act as a gated repo (``null`` ends it)
* ``POST /_standin/fault``  ``{"drop_after_bytes": N, "path": "model-00002-of-00002.safetensors", "times": 1}``:
  the next ``times`` GETs of a file whose path ends with ``path`` are cut (connection
  closed) once the file offset N is reached; ``{}`` clears the fault.

It logs whether each request carried an ``Authorization`` header, never its
value. With a required token (``$HUB_STANDIN_REQUIRED_TOKEN`` at start, or
``/_standin/config``), repository endpoints answer 401 unless
``Authorization: Bearer <that token>`` is sent (a gated repo).

Run: ``python3 tests/infra/hub_standin.py --host 127.0.0.1 --port 0`` prints
``hub-standin: listening on http://HOST:PORT`` as its first line.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import hmac
import json
import os
import random
import re
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

NOTE = "TEST STAND-IN model served by tests/infra/hub_standin.py (vllm_fleet.recipes); not a real model"
SHARD_NAMES = ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")
DEFAULT_SHARD_KIB = (12288, 2048)  # shard 1 > huggingface_hub's 10 MiB download chunk: a cut in it can resume
SHA_RE = re.compile(r"^[0-9a-f]{40}$")
REPO = r"(?P<repo>[A-Za-z0-9][\w.-]*(?:/[\w.-]+)?)"
ROUTES = {
    "revision": re.compile(r"^/api/models/%s/revision/(?P<rev>[^/]+)$" % REPO),
    "tree": re.compile(r"^/api/models/%s/tree/(?P<rev>[^/]+)(?:/(?P<sub>.*))?$" % REPO),
    "info": re.compile(r"^/api/models/%s$" % REPO),
    "resolve": re.compile(r"^/%s/resolve/(?P<rev>[^/]+)/(?P<file>.+)$" % REPO),
}
REQUEST_LOG_LIMIT = 1000


def safetensors_bytes(name: str, size: int, seed: str) -> bytes:
    """A valid safetensors file of exactly ``size`` bytes: one U8 tensor of deterministic bytes."""
    header_len = 0
    header = b""
    for _attempt in range(3):  # the header's own length feeds back into the tensor length
        payload = size - 8 - header_len
        meta = {"__metadata__": {"format": "pt", "standin": NOTE},
                name.split(".")[0]: {"dtype": "U8", "shape": [payload], "data_offsets": [0, payload]}}
        header = json.dumps(meta, separators=(",", ":")).encode()
        header += b" " * (-len(header) % 8)
        if len(header) == header_len:
            break
        header_len = len(header)
    payload = size - 8 - len(header)
    if payload < 0:
        raise ValueError("shard size %d is too small for a safetensors header" % size)
    return struct.pack("<Q", len(header)) + header + random.Random(seed).randbytes(payload)


class FakeRepo:
    """One repository at one revision: file name -> bytes, with the Hub's ids for them."""

    def __init__(self, repo_id: str, revision: str, shard_kib: tuple[int, ...]):
        self.repo_id = repo_id
        self.revision = revision
        self.sha = hashlib.sha1(("hub-standin:%s@%s" % (repo_id, revision)).encode()).hexdigest()
        shards = {}
        for name, kib in zip(SHARD_NAMES, shard_kib, strict=False):
            shards[name] = safetensors_bytes(name, kib * 1024, "%s/%s" % (self.sha, name))
        config = {"architectures": ["StandinForCausalLM"], "model_type": "standin", "hidden_size": 64,
                  "num_hidden_layers": 2, "vocab_size": 32, "torch_dtype": "uint8",
                  "_standin": NOTE, "_repo": repo_id, "_revision": revision}
        vocab = {"<unk>": 0, **{"standin%d" % i: i for i in range(1, 32)}}
        text_files = {
            "config.json": config,
            "generation_config.json": {"max_new_tokens": 16, "_standin": NOTE},
            "tokenizer.json": {"version": "1.0", "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"},
                               "_standin": NOTE},
            "tokenizer_config.json": {"tokenizer_class": "PreTrainedTokenizerFast", "_standin": NOTE},
            "model.safetensors.index.json": {
                "metadata": {"total_size": sum(len(b) for b in shards.values())},
                "weight_map": {name.split(".")[0]: name for name in shards},
            },
        }
        self.files = {name: (json.dumps(body, indent=2, sort_keys=True) + "\n").encode()
                      for name, body in text_files.items()}
        self.files.update(shards)
        self.lfs = set(shards)

    def oid(self, name: str) -> str:
        """Git blob sha1 (what the Hub's tree lists as ``oid``)."""
        data = self.files[name]
        return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()

    def etag(self, name: str) -> str:
        """The Hub's ETag: the sha256 for LFS files, the git blob sha1 otherwise."""
        if name in self.lfs:
            return hashlib.sha256(self.files[name]).hexdigest()
        return self.oid(name)

    def tree(self) -> list[dict]:
        entries = []
        for name in sorted(self.files):
            entry = {"type": "file", "path": name, "size": len(self.files[name]), "oid": self.oid(name)}
            if name in self.lfs:
                entry["lfs"] = {"oid": self.etag(name), "size": len(self.files[name]), "pointerSize": 134}
            entries.append(entry)
        return entries

    @property
    def total_size(self) -> int:
        return sum(len(b) for b in self.files.values())


class LocalRepo(FakeRepo):
    """A repository whose files are those of a local directory (a real model); safetensors are LFS files."""

    def __init__(self, repo_id: str, revision: str, directory: str):  # pylint: disable=super-init-not-called
        self.repo_id = repo_id
        self.revision = revision
        self.sha = hashlib.sha1(("hub-standin:%s@%s" % (repo_id, revision)).encode()).hexdigest()
        names = sorted(n for n in os.listdir(directory) if not n.startswith(".")
                       and os.path.isfile(os.path.join(directory, n)))
        if not names:
            raise FileNotFoundError("--local-repo %s: no files in %s" % (repo_id, directory))
        self.files = {}
        for name in names:
            with open(os.path.join(directory, name), "rb") as handle:
                self.files[name] = handle.read()
        self.lfs = {n for n in names if n.endswith(".safetensors")}


class Hub:
    """Repositories, counters and faults shared by the request handlers."""

    def __init__(self, repos: list[str], revisions: list[str], shard_kib: tuple[int, ...], required_token: str | None,
                 local_repos: dict[str, str] | None = None):
        self.local_repos = dict(local_repos or {})
        self.allowed = set(repos) | set(self.local_repos) if repos else set()
        self.revisions = revisions
        self.shard_kib = shard_kib
        self.startup_token = self.required_token = required_token
        self.lock = threading.Lock()
        self.cache: dict[tuple[str, str], FakeRepo] = {}
        self.fault: dict | None = None
        self.generation = 0  # bumped by reset(): a request that began before it is not counted
        self.reset()

    def reset(self) -> None:
        with self.lock:
            self.generation += 1
            self.fault = None
            self.required_token = self.startup_token
            self.stats = {"total_bytes": 0, "files": {}, "gets": {}, "requests": [], "request_count": 0,
                          "auth": {"with_header": 0, "without_header": 0, "rejected": 0}, "faults_triggered": 0}

    def repo(self, repo_id: str, rev: str) -> FakeRepo | None:
        """The repo at ``rev`` (a revision name or the 40-hex sha of one), or None."""
        if self.allowed and repo_id not in self.allowed:
            return None
        for name in self.revisions:
            key = (repo_id, name)
            if key not in self.cache:
                if repo_id in self.local_repos:  # read when first asked for: the directory may come later
                    try:
                        self.cache[key] = LocalRepo(repo_id, name, self.local_repos[repo_id])
                    except OSError:
                        return None
                else:
                    self.cache[key] = FakeRepo(repo_id, name, self.shard_kib)
            candidate = self.cache[key]
            if rev in (name, candidate.sha):
                return candidate
        return None

    def record(self, entry: dict, file_key: str | None, sent: int, generation: int) -> None:
        with self.lock:
            if generation != self.generation:
                return  # answered before a reset, recorded after it: not this round's traffic
            self.stats["request_count"] += 1
            self.stats["auth"]["with_header" if entry["auth"] else "without_header"] += 1
            if file_key is not None and entry["method"] == "GET":
                self.stats["files"][file_key] = self.stats["files"].get(file_key, 0) + sent
                self.stats["gets"][file_key] = self.stats["gets"].get(file_key, 0) + 1
                self.stats["total_bytes"] += sent
            self.stats["requests"].append(entry)
            del self.stats["requests"][:-REQUEST_LOG_LIMIT]

    def take_fault(self, path: str) -> int | None:
        """The offset at which to cut this GET, consuming one use of the fault."""
        with self.lock:
            fault = self.fault
            if not fault or not path.endswith(fault["path"]):
                return None
            fault["times"] -= 1
            if fault["times"] <= 0:
                self.fault = None
            self.stats["faults_triggered"] += 1
            return fault["drop_after_bytes"]


class Handler(BaseHTTPRequestHandler):
    """Hub API and file endpoints, plus /_standin/* controls."""

    server_version = "hub-standin"
    protocol_version = "HTTP/1.1"
    hub: Hub  # set by make_server()

    def parse_request(self) -> bool:
        self.generation = self.hub.generation  # the counters this request belongs to
        return super().parse_request()

    def log_message(self, format, *args):  # pylint: disable=redefined-builtin
        pass  # one line per request is written by finish_request_log()

    def finish_request_log(self, status: int, sent: int, file_key: str | None = None, byte_range: str | None = None) -> None:
        if self.path.startswith("/_standin/"):
            return  # test controls are neither counted nor logged
        auth = "Authorization" in self.headers
        entry = {"method": self.command, "path": urlsplit(self.path).path, "status": status, "bytes": sent,
                 "range": byte_range, "auth": auth, "client": self.client_address[0], "time": time.time()}
        self.hub.record(entry, file_key, sent, self.generation)
        print("hub-standin: %s %s %s %d bytes=%d range=%s auth=%s" % (
            entry["client"], self.command, entry["path"], status, sent, byte_range or "-", "yes" if auth else "no"),
            file=sys.stderr, flush=True)

    def send_json(self, status: int, payload, headers: dict | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        self.finish_request_log(status, 0)

    def not_found(self, message: str, code: str) -> None:
        self.send_json(404, {"error": message}, {"X-Error-Code": code, "X-Error-Message": message})

    def token_ok(self) -> bool:
        required = self.hub.required_token
        if not required:
            return True
        given = self.headers.get("Authorization", "")
        if hmac.compare_digest(given.encode(), ("Bearer " + required).encode()):
            return True
        with self.hub.lock:
            self.hub.stats["auth"]["rejected"] += 1
        message = "Access to this repository is restricted (hub-standin requires a token)."
        self.send_json(401, {"error": message}, {"X-Error-Code": "GatedRepo", "X-Error-Message": message})
        return False

    # --- controls -------------------------------------------------------
    def do_POST(self):  # pylint: disable=invalid-name
        path = urlsplit(self.path).path
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}") if length else {}
        except ValueError as exc:
            self.send_json(400, {"error": "invalid JSON: %s" % exc})
            return
        if path == "/_standin/reset":
            self.hub.reset()
            self.send_json(200, {"reset": True})
        elif path == "/_standin/fault":
            if not body:
                with self.hub.lock:
                    self.hub.fault = None
                self.send_json(200, {"fault": None})
                return
            try:
                fault = {"drop_after_bytes": int(body["drop_after_bytes"]), "path": str(body["path"]),
                         "times": int(body.get("times", 1))}
            except (KeyError, TypeError, ValueError) as exc:
                self.send_json(400, {"error": "fault needs drop_after_bytes (int) and path (str): %r" % exc})
                return
            with self.hub.lock:
                self.hub.fault = fault
            self.send_json(200, {"fault": fault})
        elif path == "/_standin/config" and set(body) == {"required_token"}:
            with self.hub.lock:
                self.hub.required_token = body["required_token"] or None
            self.send_json(200, {"required_token_set": bool(body["required_token"])})
        else:
            self.send_json(404, {"error": "no route POST %s with keys %s (hub-standin)" % (path, sorted(body))})

    # --- Hub API ----------------------------------------------------------
    def do_HEAD(self):  # pylint: disable=invalid-name
        self.do_GET()

    def do_GET(self):  # pylint: disable=invalid-name
        path = unquote(urlsplit(self.path).path)
        if path == "/_standin/stats":
            with self.hub.lock:
                snapshot = json.loads(json.dumps(self.hub.stats))
            self.send_json(200, snapshot)
            return
        for kind, pattern in ROUTES.items():  # noqa: B007 - kind names the route that matched, below
            match = pattern.match(path)
            if match:
                break
        else:
            self.send_json(404, {"error": "no route %s %s (hub-standin)" % (self.command, path)})
            return
        if not self.token_ok():
            return
        params = match.groupdict()
        repo = self.hub.repo(params["repo"], params.get("rev") or "main")
        if repo is None:
            if self.hub.allowed and params["repo"] not in self.hub.allowed:
                self.not_found("Repository Not Found for url: %s." % path, "RepoNotFound")
            else:
                self.not_found("Invalid rev id: %s" % params.get("rev"), "RevisionNotFound")
            return
        if kind in ("revision", "info"):
            self.send_json(200, {"id": repo.repo_id, "modelId": repo.repo_id, "sha": repo.sha, "private": False,
                                 "gated": bool(self.hub.required_token), "disabled": False, "tags": ["standin"],
                                 "siblings": [{"rfilename": name} for name in sorted(repo.files)],
                                 "usedStorage": repo.total_size, "cardData": {"standin": NOTE}})
        elif kind == "tree":
            self.send_json(200, repo.tree() if not params.get("sub") else [])
        else:
            self.serve_file(repo, params["file"], path)

    def serve_file(self, repo: FakeRepo, name: str, path: str) -> None:
        data = repo.files.get(name)
        if data is None:
            self.not_found("Entry Not Found for url: %s." % path, "EntryNotFound")
            return
        start, end = 0, len(data) - 1
        byte_range = self.headers.get("Range")
        status = 200
        if byte_range:
            match = re.match(r"^bytes=(\d+)-(\d*)$", byte_range.strip())
            if not match or int(match.group(1)) >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % len(data))
                self.send_header("Content-Length", "0")
                self.end_headers()
                self.finish_request_log(416, 0, byte_range=byte_range)
                return
            start = int(match.group(1))
            end = min(int(match.group(2)), end) if match.group(2) else end
            status = 206
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", '"%s"' % repo.etag(name))
        self.send_header("X-Repo-Commit", repo.sha)
        if status == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, len(data)))
        self.end_headers()
        file_key = "%s/%s" % (repo.repo_id, name)
        if self.command == "HEAD":
            self.finish_request_log(status, 0, file_key, byte_range)
            return
        cut = self.hub.take_fault(path)
        stop = end + 1 if cut is None else max(start, min(cut, end + 1))
        sent = 0
        try:
            for offset in range(start, stop, 256 * 1024):
                chunk = data[offset:min(offset + 256 * 1024, stop)]
                self.wfile.write(chunk)
                sent += len(chunk)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        if cut is not None:
            # The fault: drop the connection with the body incomplete.
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            print("hub-standin: FAULT dropped %s at offset %d" % (path, stop), file=sys.stderr, flush=True)
        self.finish_request_log(status, sent, file_key, byte_range)


def make_server(hub: Hub, host: str, port: int) -> ThreadingHTTPServer:
    handler = type("BoundHandler", (Handler,), {"hub": hub})
    server_cls = type("HubServer", (ThreadingHTTPServer,), {"allow_reuse_address": True, "daemon_threads": True})
    return server_cls((host, port), handler)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=5080, help="port (0: any free port; default 5080)")
    parser.add_argument("--repo", action="append", default=[],
                        help="serve only these repo ids (repeatable; default: any repo id)")
    parser.add_argument("--revision", action="append", default=[],
                        help="revision names each repo has (repeatable; default: main)")
    parser.add_argument("--shard-kib", default=",".join(str(k) for k in DEFAULT_SHARD_KIB),
                        help="sizes of the two safetensors shards in KiB (default %(default)s)")
    parser.add_argument("--local-repo", action="append", default=[], metavar="ID=DIR",
                        help="serve repo ID from the files of DIR (repeatable), e.g. the tiny real model")
    args = parser.parse_args(argv)
    local_repos = dict(item.split("=", 1) for item in args.local_repo)
    shard_kib = tuple(int(k) for k in args.shard_kib.split(","))
    if len(shard_kib) != len(SHARD_NAMES):
        parser.error("--shard-kib needs %d comma-separated sizes, got %r" % (len(SHARD_NAMES), args.shard_kib))
    hub = Hub(args.repo, args.revision or ["main"], shard_kib, os.environ.get("HUB_STANDIN_REQUIRED_TOKEN") or None,
              local_repos)
    server = make_server(hub, args.host, args.port)
    host, port = server.server_address[:2]
    print("hub-standin: listening on http://%s:%d (%s)" % (host, port, NOTE), flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
