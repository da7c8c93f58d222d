#!/usr/bin/env python
"""Client load through the router while the fleet is upgraded (replicas scenario).

Sends a one-token completion every --every seconds until --stop-file appears, then writes
{"ok": n, "failed": n, "errors": [...], "versions": {version: n}} to --out. The stand-in
tags its tokens with its version ("v2-tok0"), so the counts show the roll's progress.
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
    result = {"ok": 0, "failed": 0, "errors": [], "versions": {}}
    body = json.dumps({"model": args.model, "prompt": "ping", "max_tokens": 1}).encode()
    deadline = time.time() + args.max_seconds
    while not os.path.exists(args.stop_file) and time.time() < deadline:
        request = urllib.request.Request(args.url, data=body, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                text = json.load(response)["choices"][0]["text"]
                version = text.split("-tok", 1)[0]
                result["versions"][version] = result["versions"].get(version, 0) + 1
                result["ok"] += 1
        except Exception as exc:  # pylint: disable=broad-except
            result["failed"] += 1
            result["errors"].append(f"{time.strftime('%H:%M:%S')} {exc}"[:200])
        time.sleep(args.every)
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump(result, handle)


if __name__ == "__main__":
    main()
