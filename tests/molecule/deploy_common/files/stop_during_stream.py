#!/usr/bin/env python
"""Stop a unit while its engine streams an answer, and report what the client got (drain test).

Opens a streamed chat completion of --max-tokens tokens on --url, reads until the first content
chunk arrives (the request is in flight), then runs ``systemctl stop --unit`` in a thread while it
keeps reading the stream to its end. Prints one JSON object: the chunks read before and after the
stop began, the finish reason, whether ``data: [DONE]`` came, the error if the stream broke, and
how long the stop took. An engine that drains (``--shutdown-timeout``) finishes the answer; one
that aborts cuts it.
"""
import argparse
import json
import subprocess
import threading
import time
import urllib.request


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the engine's /v1/chat/completions")
    parser.add_argument("--model", required=True)
    parser.add_argument("--unit", required=True)
    parser.add_argument("--max-tokens", type=int, default=400)
    args = parser.parse_args()
    body = {"model": args.model, "messages": [{"role": "user", "content": "count"}], "max_tokens": args.max_tokens,
            "ignore_eos": True, "stream": True}
    result = {"before_stop": 0, "after_stop": 0, "finish_reason": None, "done": False, "error": None, "stop_s": None}
    stopper = None

    def stop():
        started = time.time()
        subprocess.run(["systemctl", "stop", args.unit], check=False)
        result["stop_s"] = round(time.time() - started, 2)

    request = urllib.request.Request(args.url, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            for raw in response:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:"):
                    continue
                data = line[len("data:"):].strip()
                if data == "[DONE]":
                    result["done"] = True
                    break
                chunk = json.loads(data)
                for choice in chunk.get("choices") or []:
                    if (choice.get("delta") or {}).get("content"):
                        result["after_stop" if stopper else "before_stop"] += 1
                    result["finish_reason"] = choice.get("finish_reason") or result["finish_reason"]
                if stopper is None and result["before_stop"]:
                    stopper = threading.Thread(target=stop)
                    stopper.start()
    except Exception as exc:  # pylint: disable=broad-except  # a cut stream is the outcome to report
        result["error"] = "%s: %s" % (type(exc).__name__, exc)
    if stopper is not None:
        stopper.join(300)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
