#!/usr/bin/env python
"""Concurrent client load through a front door while the fleet changes under it (fault tests).

Starts one request every 1/--rate seconds, whatever the answers do (open loop), with at most
--concurrency in flight; a start that finds them all busy waits and counts as ``late``. The
requests cycle through --kinds: ``completion`` (POST /v1/completions), ``chat``
(POST /v1/chat/completions) and ``chat-stream`` (the same with ``stream: true``, which must
end with ``data: [DONE]``). It stops by itself at --stop-file or after --max-seconds, waits for
the requests in flight, then writes to --out:

  {"ok", "failed", "late", "tokens", "seconds", "errors": [first 20],
   "by_kind": {kind: {"ok", "failed"}}, "latency_s": {"p50", "p99", "max"}, "ttft_s": {...}}

and, with --events, one JSON line per request (start, kind, ok, status, latency, ttft, error).

Standard library only, on purpose: it runs on a bare systemd test host with the distribution's
python3 and nothing else. vLLM's own ``vllm bench serve`` (the benchmark playbook uses it) sends a
fixed number of prompts and needs the vLLM package; a fault test needs a client that runs until
the fault and its recovery are over and records every request's outcome.
"""
import argparse
import itertools
import json
import os
import threading
import time
import urllib.error
import urllib.request

PATHS = {"completion": "/v1/completions", "chat": "/v1/chat/completions", "chat-stream": "/v1/chat/completions"}


def body_for(kind, model, max_tokens):
    if kind == "completion":
        return {"model": model, "prompt": "ping", "max_tokens": max_tokens}
    body = {"model": model, "messages": [{"role": "user", "content": "ping"}], "max_tokens": max_tokens}
    if kind == "chat-stream":
        body.update(stream=True, stream_options={"include_usage": True})
    return body


def read_stream(response, started):
    """Tokens and time to first token of an SSE answer; raises unless it ends with [DONE]."""
    ttft, tokens, done = None, 0, False
    for raw in response:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data:"):
            continue
        data = line[len("data:"):].strip()
        if data == "[DONE]":
            done = True
            break
        chunk = json.loads(data)
        if "error" in chunk:
            raise ValueError("error event in the stream: %s" % json.dumps(chunk["error"])[:150])
        if ttft is None and any((c.get("delta") or {}).get("content") for c in chunk.get("choices") or []):
            ttft = time.time() - started
        if chunk.get("usage"):
            tokens = chunk["usage"].get("completion_tokens") or tokens
    if not done:
        raise ValueError("the stream ended without data: [DONE]")
    return tokens, ttft


def one_request(base_url, kind, model, max_tokens, timeout, api_key):
    started = time.time()
    event = {"start": round(started, 3), "kind": kind, "ok": False, "status": None, "ttft": None, "error": None,
             "tokens": 0}
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = "Bearer " + api_key
    request = urllib.request.Request(base_url + PATHS[kind], headers=headers,
                                     data=json.dumps(body_for(kind, model, max_tokens)).encode())
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            event["status"] = response.status
            if kind == "chat-stream":
                event["tokens"], event["ttft"] = read_stream(response, started)
            else:
                event["tokens"] = json.load(response)["usage"]["completion_tokens"]
                event["ttft"] = round(time.time() - started, 3)
        event["ok"] = event["tokens"] > 0
        if not event["ok"]:
            event["error"] = "no token in the answer"
    except urllib.error.HTTPError as exc:
        event["status"] = exc.code
        event["error"] = "HTTP %s: %s" % (exc.code, exc.read()[:150].decode("utf-8", "replace"))
    except Exception as exc:  # pylint: disable=broad-except  # every failure is a counted outcome
        event["error"] = "%s: %s" % (type(exc).__name__, exc)
    event["latency"] = round(time.time() - started, 3)
    if event["ttft"] is not None:
        event["ttft"] = round(event["ttft"], 3)
    return event


def percentiles(values):
    if not values:
        return {"p50": None, "p99": None, "max": None}
    ordered = sorted(values)
    return {"p50": ordered[min(len(ordered) - 1, len(ordered) // 2)],
            "p99": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], "max": ordered[-1]}


def summary(events, seconds, late):
    by_kind = {}
    for event in events:
        counts = by_kind.setdefault(event["kind"], {"ok": 0, "failed": 0})
        counts["ok" if event["ok"] else "failed"] += 1
    failed = [e for e in events if not e["ok"]]
    return {"ok": len(events) - len(failed), "failed": len(failed), "late": late,
            "tokens": sum(e["tokens"] for e in events), "seconds": round(seconds),
            "errors": ["%s %s %s" % (time.strftime("%H:%M:%S", time.localtime(e["start"])), e["kind"], e["error"])[:240]
                       for e in failed[:20]],
            "by_kind": by_kind,
            "latency_s": percentiles([e["latency"] for e in events if e["ok"]]),
            "ttft_s": percentiles([e["ttft"] for e in events if e["ok"] and e["ttft"] is not None])}


def run(args):
    events, lock = [], threading.Lock()
    slots = threading.BoundedSemaphore(args.concurrency)
    kinds = itertools.cycle(args.kinds.split(","))
    threads, late = [], 0
    start = time.time()
    deadline = start + args.max_seconds

    def worker(kind):
        try:
            event = one_request(args.url.rstrip("/"), kind, args.model, args.max_tokens, args.timeout,
                                os.environ.get("LOAD_API_KEY", ""))
            with lock:
                events.append(event)
        finally:
            slots.release()

    for index in itertools.count():
        due = start + index / args.rate
        now = time.time()
        if due > now:
            time.sleep(due - now)
        if os.path.exists(args.stop_file) or time.time() >= deadline:
            break
        if not slots.acquire(blocking=False):
            late += 1
            slots.acquire()
        thread = threading.Thread(target=worker, args=(next(kinds),), daemon=True)
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join(args.timeout + 5)
    events.sort(key=lambda e: e["start"])
    return events, summary(events, time.time() - start, late)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the front door's base URL (http://host:port)")
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--stop-file", required=True)
    parser.add_argument("--events", default="", help="one JSON line per request")
    parser.add_argument("--rate", type=float, default=2.0, help="requests started per second")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight at most")
    parser.add_argument("--kinds", default="completion,chat,chat-stream")
    parser.add_argument("--max-tokens", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds one request may take")
    parser.add_argument("--max-seconds", type=float, default=900.0)
    args = parser.parse_args()
    unknown = set(args.kinds.split(",")) - set(PATHS)
    if unknown:
        parser.error("unknown --kinds %s (known: %s)" % (sorted(unknown), ", ".join(PATHS)))
    events, result = run(args)
    if args.events:
        with open(args.events, "w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(e) + "\n" for e in events)
    with open(args.out + ".tmp", "w", encoding="utf-8") as handle:
        json.dump(result, handle)
    os.replace(args.out + ".tmp", args.out)


if __name__ == "__main__":
    main()
