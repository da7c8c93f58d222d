#!/usr/bin/env python
"""Client load through the router while the fleet is upgraded (replicas scenario).

Sends a one-token completion every --every seconds until --stop-file appears, then writes
{"ok": n, "failed": n, "errors": [...], "tokens": n, "seconds": s} to --out: how many requests
the real engines answered through the router while the replicas were upgraded.
"""
import argparse
import json
import os
import time
import urllib.request


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--stop-file", required=True)
    parser.add_argument("--every", type=float, default=0.2)
    parser.add_argument("--max-seconds", type=float, default=900)
    args = parser.parse_args()
    result = {"ok": 0, "failed": 0, "errors": [], "tokens": 0, "seconds": 0}
    body = json.dumps({"model": args.model, "prompt": "ping", "max_tokens": 1}).encode()
    start = time.time()
    deadline = time.time() + args.max_seconds
    while not os.path.exists(args.stop_file) and time.time() < deadline:
        request = urllib.request.Request(args.url, data=body, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                result["tokens"] += json.load(response)["usage"]["completion_tokens"]
                result["ok"] += 1
        except Exception as exc:  # pylint: disable=broad-except
            result["failed"] += 1
            result["errors"].append(f"{time.strftime('%H:%M:%S')} {exc}"[:200])
        time.sleep(args.every)
    result["seconds"] = round(time.time() - start)
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump(result, handle)


if __name__ == "__main__":
    main()
