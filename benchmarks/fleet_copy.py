#!/usr/bin/env python
"""Benchmark: the weights role's fleet copy, star against fan-out, on rate-limited light hosts.

Starts N light test hosts (containers of local/debian-systemd:12, no engine, their dockerd
stopped) on a network of their own, limits every host's egress with ``tc`` (tbf) to the same
rate, and serves a synthetic model of two safetensors shards from a Hub stand-in of its own
(tests/infra/hub_standin.py). For each method (``star``, then ``fanout``) it empties every
host's cache, runs ``playbooks/deploy.yml --tags weights`` on the origin alone (the one
download from the Hub), then on every host (the copy), and reports:

- the copy run's wall time, against what the model predicts (plugins/plugin_utils/_fanout.py);
- every host's egress bytes in the copy run, and how many copies that is;
- the bytes the Hub stand-in served (once per file, whatever the host count).

``--kill`` adds a third run: fan-out again, and while the second round runs, the host that
sends in it is killed (``docker kill``). Its receiver must finish from another holder; the run
reports the extra time. It also prints the model's figures for 64 and 512 hosts.

    make infra   # the images (local/debian-systemd:12)
    .venv/bin/python benchmarks/fleet_copy.py [--hosts 8] [--rate-mbit 36] [--shard-mib 128] [--kill]

It needs docker, this checkout's .venv and .collections (``make venv collections``), and pip
on the hosts (the origin installs huggingface_hub, as on a real fleet). Nothing here runs in CI:
it takes 15-25 minutes. Exit status 1 when a "done when" bound of issue 35 does not hold.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / ".collections"))
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _fanout  # noqa: E402

IMAGE = "local/debian-systemd:12"
NETWORK, SUBNET, GATEWAY = "vllm-fleet-copybench", "172.30.98.0/24", "172.30.98.1"
HUB_PORT = 5090
REPO = "vllm-fleet-test/tiny-qwen3"  # the test recipe's model id: the stand-in serves synthetic bytes under it
CACHE = "/root/.cache/huggingface"
LABEL = "org.vllm-fleet.benchmark=fleet_copy"


def sh(*argv: str, check: bool = True, capture: bool = True) -> str:
    proc = subprocess.run(argv, check=False, text=True, capture_output=capture)
    if check and proc.returncode != 0:
        raise SystemExit(f"fleet_copy: {' '.join(argv)} failed ({proc.returncode}): {proc.stderr or proc.stdout}")
    return proc.stdout if capture else ""


def host_names(count: int) -> list[str]:
    return [f"vllm-copybench-{index}" for index in range(1, count + 1)]


def address(index: int) -> str:
    return f"172.30.98.{10 + index}"


def cleanup() -> None:
    ids = sh("docker", "ps", "-aq", "--filter", f"label={LABEL}").split()
    if ids:
        sh("docker", "rm", "-f", "-v", *ids)
    sh("docker", "network", "rm", NETWORK, check=False)


def start_hosts(names: list[str], rate_mbit: int) -> None:
    sh("docker", "network", "create", "--subnet", SUBNET, "--gateway", GATEWAY, "--label", LABEL, NETWORK)
    for index, name in enumerate(names, start=1):
        # The molecule test hosts' platform (tests/molecule/shared/vars/platform.yml): systemd as PID 1.
        sh("docker", "run", "-d", "--name", name, "--hostname", name, "--label", LABEL,
           "--network", NETWORK, "--ip", address(index),
           "--tmpfs", "/run", "--tmpfs", "/run/lock", "--tmpfs", "/tmp:rw,exec,nosuid,nodev,mode=1777",
           "-v", "/sys/fs/cgroup:/sys/fs/cgroup:ro", "-e", "container=docker", "--stop-signal", "SIGRTMIN+3",
           "--cap-add", "SYS_ADMIN", "--cap-add", "NET_ADMIN", "--security-opt", "seccomp=unconfined", IMAGE)
    for name in names:
        for _attempt in range(120):
            state = sh("docker", "exec", name, "systemctl", "is-active", "ssh.service", check=False).strip()
            if state == "active":
                break
            time.sleep(1)
        else:
            raise SystemExit(f"fleet_copy: sshd did not start on {name}")
        # Light hosts: no engine, so no dockerd. Every host sends at the same fixed rate.
        sh("docker", "exec", name, "systemctl", "disable", "--now", "docker.socket", "docker.service",
           "containerd.service", check=False)
        sh("docker", "exec", name, "tc", "qdisc", "replace", "dev", "eth0", "root", "tbf",
           "rate", f"{rate_mbit}mbit", "burst", "256kb", "latency", "400ms")


def start_hub(shard_mib: int, log: Path) -> subprocess.Popen[bytes]:
    kib = str(shard_mib * 1024)
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "infra" / "hub_standin.py"), "--host", GATEWAY,
                             "--port", str(HUB_PORT), "--repo", REPO, "--shard-kib", f"{kib},{kib}"],
                            stdout=log.open("wb"), stderr=subprocess.STDOUT)
    for _attempt in range(50):
        try:
            urllib.request.urlopen(f"http://{GATEWAY}:{HUB_PORT}/_standin/stats", timeout=2)
            return proc
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"fleet_copy: the Hub stand-in did not start (log {log})")


def hub(path: str, data: Optional[bytes] = None) -> Any:
    request = urllib.request.Request(f"http://{GATEWAY}:{HUB_PORT}{path}", data=data, method="POST" if data else "GET")
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read() or b"null")


def write_inventory(directory: Path, names: list[str]) -> Path:
    hosts = {name: {"vllm_fabric_address": address(index), "vllm_gpu_count": 1,
                    "ansible_connection": "community.docker.docker", "ansible_python_interpreter": "/usr/bin/python3"}
             for index, name in enumerate(names, start=1)}
    deployment = {"name": "bench", "recipe": REPO, "hardware": "xeon_numa1", "strategy": "single_node_tp",
                  "replicas": len(names), "weights": {"endpoint": f"http://{GATEWAY}:{HUB_PORT}", "revision": "main"}}
    inventory = {"all": {"vars": {"vllm_plan_recipe_dirs": [str(ROOT / "tests" / "recipes")]},
                         "children": {"bench": {"hosts": hosts, "vars": {"vllm_deployment": deployment}}}}}
    path = directory / "inventory.json"
    path.write_text(json.dumps(inventory, indent=1))
    return path


def tx_bytes(names: list[str]) -> dict[str, int]:
    out = {}
    for name in names:
        text = sh("docker", "exec", name, "cat", "/sys/class/net/eth0/statistics/tx_bytes", check=False).strip()
        out[name] = int(text) if text.isdigit() else -1
    return out


def run_weights(inventory: Path, method: str, limit: Optional[str], log: Path, forks: int) -> tuple[int, float]:
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".collections"), ANSIBLE_PIPELINING="True",
               ANSIBLE_FORKS=str(forks), ANSIBLE_NOCOLOR="1", ANSIBLE_HOST_KEY_CHECKING="False",
               ANSIBLE_CALLBACKS_ENABLED="ansible.builtin.profile_tasks")
    argv = [str(ROOT / ".venv" / "bin" / "ansible-playbook"), "-i", str(inventory), str(ROOT / "playbooks" / "deploy.yml"),
            "--tags", "weights", "-e", json.dumps({"vllm_weights_copy_method": method})]
    if limit:
        argv += ["--limit", f"localhost,{limit}"]
    started = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.run(argv, env=env, stdout=out, stderr=subprocess.STDOUT, check=False, cwd=ROOT)
    return proc.returncode, time.monotonic() - started


_ELAPSED = re.compile(r"^\w+ \d+ \w+ \d{4}\s+\d\d:\d\d:\d\d \S+ \(\S+\)\s+(\d+):(\d\d):(\d\d\.\d+)")


def copy_phase_seconds(log: Path) -> float:
    """From profile_tasks' lines: the start of "Show the fleet copy's rounds" to the end of the copy
    (the start of the first task after "Remove the senders' keys again")."""
    start = end = None
    task, removing = "", False
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("TASK ["):
            task = line
            continue
        match = _ELAPSED.match(line)
        if not match or not task:
            continue
        seconds = int(match[1]) * 3600 + int(match[2]) * 60 + float(match[3])
        if start is None and "Show the fleet copy's rounds" in task:
            start = seconds
        elif removing and "Remove the senders' keys again" not in task:
            end, removing = seconds, False
        if "Remove the senders' keys again" in task:
            removing = True
        task = ""
    if start is None or end is None:
        raise SystemExit(f"fleet_copy: no copy phase found in {log}")
    return end - start


def empty_caches(names: list[str]) -> None:
    for name in names:
        sh("docker", "exec", name, "rm", "-rf", CACHE, check=False)


def markers(names: list[str]) -> dict[str, bool]:
    return {name: sh("docker", "exec", name, "sh", "-c", f"ls {CACHE}/.vllm-fleet/*.json 2>/dev/null",
                     check=False).strip() != "" for name in names}


def kill_when_round_two_sends(names: list[str], plan: _fanout.CopySchedule, stop: threading.Event,
                              killed: list[str]) -> None:
    """Kill the first round-2 sender that is not the origin once its receiver got a tenth of a shard."""
    transfer = next(t for t in plan.transfers if t.round == 2 and t.sender != names[0])
    while not stop.is_set():
        size = sh("docker", "exec", transfer.receiver, "sh", "-c",
                  f"du -sk {CACHE} 2>/dev/null | cut -f1", check=False).strip()
        if size.isdigit() and int(size) > 4096:
            sh("docker", "kill", transfer.sender, check=False)
            killed.append(f"{transfer.sender} (sending to {transfer.receiver} in round 2)")
            return
        time.sleep(0.5)


def one_method(names: list[str], inventory: Path, method: str, workdir: Path, forks: int,
               kill: bool = False) -> dict[str, Any]:
    empty_caches([n for n in names if sh("docker", "inspect", "-f", "{{.State.Running}}", n, check=False).strip() == "true"])
    hub("/_standin/reset", b"{}")
    rc, seconds = run_weights(inventory, method, names[0], workdir / f"{method}-origin.log", forks)
    if rc != 0:
        raise SystemExit(f"fleet_copy: the origin's download failed ({method}); see {workdir / (method + '-origin.log')}")
    served = hub("/_standin/stats")
    before = tx_bytes(names)
    stop, killed = threading.Event(), []
    plan = _fanout.schedule(method, names[:1], names[1:])
    killer = threading.Thread(target=kill_when_round_two_sends, args=(names, plan, stop, killed), daemon=True)
    if kill:
        killer.start()
    label = method + ("-kill" if kill else "")
    rc, run_seconds = run_weights(inventory, method, None, workdir / f"{label}-copy.log", forks)
    stop.set()
    after = tx_bytes(names)
    seconds = copy_phase_seconds(workdir / f"{label}-copy.log")
    return {"method": label, "rc": rc, "seconds": seconds, "run_seconds": run_seconds, "hub": served, "killed": killed,
            "egress": {name: after[name] - before[name] for name in names},
            "markers": markers([n for n in names if not any(k.startswith(n + " ") for k in killed)])}


def report(result: dict[str, Any], model_bytes: int, copy_seconds: float, hosts: int) -> list[str]:
    lines = [f"== {result['method']}: copy {result['seconds']:.1f} s (the whole weights run {result['run_seconds']:.1f} s, "
             f"ansible-playbook rc {result['rc']})"]
    for name, sent in result["egress"].items():
        if any(k.startswith(name + " ") for k in result["killed"]):
            lines.append(f"   {name}: killed (its counter went with it)")
            continue
        lines.append(f"   {name}: sent {sent / 2**20:9.1f} MiB = {sent / model_bytes:4.2f} copies")
    files = result["hub"].get("files") or result["hub"].get("per_file") or {}
    total = result["hub"].get("bytes_total", result["hub"].get("total_bytes"))
    lines.append(f"   Hub stand-in (origin download): {total} bytes = {(total or 0) / model_bytes:.2f} copies; per file: "
                 + ", ".join(f"{k}={v}" for k, v in sorted(files.items())))
    if result["killed"]:
        lines.append(f"   killed: {', '.join(result['killed'])}; hosts with a finished copy: "
                     f"{sum(result['markers'].values())} of {len(result['markers'])} still running")
    method = "star" if result["method"].startswith("star") else "fanout"
    lines.append(f"   model: {_fanout.predicted_seconds(hosts, copy_seconds, method=method):.1f} s "
                 f"({result['seconds'] / copy_seconds:.2f} copy times measured)")
    return lines


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--rate-mbit", type=int, default=36, help="every host's egress limit (tc tbf)")
    parser.add_argument("--shard-mib", type=int, default=128, help="size of each of the model's two shards")
    parser.add_argument("--kill", action="store_true", help="also kill a round-2 sender mid-transfer")
    parser.add_argument("--keep", action="store_true", help="leave the hosts and logs for a look")
    args = parser.parse_args(argv)
    if shutil.which("docker") is None:
        raise SystemExit("fleet_copy: docker is not installed (make infra)")
    names = host_names(args.hosts)
    workdir = Path(tempfile.mkdtemp(prefix="fleet-copy-"))
    cleanup()
    hub_proc = None
    try:
        start_hosts(names, args.rate_mbit)
        hub_proc = start_hub(args.shard_mib, workdir / "hub.log")
        inventory = write_inventory(workdir, names)
        forks = args.hosts + 2
        results = [one_method(names, inventory, "star", workdir, forks),
                   one_method(names, inventory, "fanout", workdir, forks)]
        if args.kill:
            results.append(one_method(names, inventory, "fanout", workdir, forks, kill=True))
    finally:
        if hub_proc:
            hub_proc.terminate()
        if not args.keep:
            cleanup()
    model_bytes = 2 * args.shard_mib * 2**20
    copy_seconds = model_bytes * 8 / (args.rate_mbit * 1e6)
    rounds = math.ceil(math.log2(args.hosts))
    print(f"fleet_copy: {args.hosts} hosts, egress {args.rate_mbit} Mbit/s each, model {model_bytes / 2**20:.0f} MiB: "
          f"one copy {copy_seconds:.1f} s at line rate; logs {workdir}")
    for result in results:
        print("\n".join(report(result, model_bytes, copy_seconds, args.hosts)))
    star, fan = results[0], results[1]
    checks = {
        f"fan-out <= (ceil(log2 N) + 1) x one copy = {(rounds + 1) * copy_seconds:.1f} s": fan["seconds"] <= (rounds + 1) * copy_seconds,
        f"fan-out <= 0.5 x star = {0.5 * star['seconds']:.1f} s": fan["seconds"] <= 0.5 * star["seconds"],
        f"no host sends more than ceil(log2 N) = {rounds} copies":
            max(fan["egress"].values()) <= (rounds + 0.1) * model_bytes,
        "both runs succeeded and every host has a finished copy":
            star["rc"] == 0 and fan["rc"] == 0 and all(star["markers"].values()) and all(fan["markers"].values()),
    }
    if args.kill:
        kill = results[2]
        checks["with a sender killed, every other host has a finished copy"] = bool(kill["killed"]) and all(kill["markers"].values())
        print(f"   extra time with the kill: {kill['seconds'] - fan['seconds']:+.1f} s")
    for hosts in (64, 512):
        print(f"model for {hosts} hosts: star {_fanout.predicted_seconds(hosts, copy_seconds, method='star'):.0f} s, "
              f"fan-out {_fanout.predicted_seconds(hosts, copy_seconds, method='fanout'):.0f} s")
    for text, ok in checks.items():
        print(f"{'PASS' if ok else 'FAIL'}: {text}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
