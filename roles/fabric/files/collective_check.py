#!/usr/bin/env python
# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""The fabric check's probes, run by roles/fabric/tasks/collective.yml (docs/verify.md).

    collective_check.py collective --backend gloo --rank R --world-size N --master-addr A --master-port P
    collective_check.py listen --address A --port P --accept K --timeout T
    collective_check.py ucx

``collective`` runs in a throwaway container of the engine image (torch and, for hccl,
torch_npu come from the image): a torch.distributed all-reduce over the group, a small one
for latency and a large one for bus bandwidth. ``listen`` holds a prefill engine's KV side
channel port open for the decode hosts' connects (when the engine does not already listen).
``ucx`` lists the UCX transports of the image's ``ucx_info``. Each prints ONE JSON line on
stdout; errors go to stderr and the exit status is 1. Nothing here hangs past ``--timeout``.
"""

import argparse
import errno
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import traceback
from datetime import timedelta

FABRIC_VARS = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME", "VLLM_HOST_IP", "HCCL_IF_IP")


def _emit(record, status=0):
    print(json.dumps(record, sort_keys=True), flush=True)
    return status


def _sync(backend):
    import torch  # pylint: disable=import-outside-toplevel
    if backend == "nccl":
        torch.cuda.synchronize()
    elif backend == "hccl":
        torch.npu.synchronize()  # pylint: disable=no-member


def _timed(dist, tensor, backend, iterations):
    dist.all_reduce(tensor)  # warm-up: the first call sets up the communicator
    _sync(backend)
    start = time.perf_counter()
    for _round in range(iterations):
        dist.all_reduce(tensor)
    _sync(backend)
    return (time.perf_counter() - start) / iterations


STAGE = {"now": "starting"}


def collective(args):
    """All ranks in a thread, so the process answers at ``--timeout`` + 10 s even while torch's
    rendezvous keeps retrying a master that does not answer (its own timeout restarts per try).
    The clock starts after torch is imported: on a loaded host the import alone took most of a
    minute, and the ranks' imports end at different times (CI, multi_node)."""
    outcome = {}
    STAGE["now"] = "importing torch"
    import torch  # noqa: F401 pylint: disable=import-outside-toplevel,unused-import
    import torch.distributed  # noqa: F401 pylint: disable=import-outside-toplevel,unused-import

    def run():
        try:
            outcome["status"] = _collective(args)
        except Exception as exc:  # pylint: disable=broad-except
            traceback.print_exc(file=sys.stderr)
            outcome["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(args.timeout + 10)
    if worker.is_alive():
        _emit({"probe": "collective", "ok": False, "error": f"timed out after {args.timeout + 10} s during "
               f"{STAGE['now']}", "env": {key: os.environ[key] for key in FABRIC_VARS if key in os.environ}})
        sys.stderr.flush()
        os._exit(1)  # the torch threads would keep the process alive
    if "error" in outcome:
        exc = outcome["error"]
        return _emit({"probe": "collective", "ok": False, "error": f"{type(exc).__name__} during {STAGE['now']}: "
                      f"{exc}"[-2000:], "env": {key: os.environ[key] for key in FABRIC_VARS if key in os.environ}}, 1)
    return outcome["status"]


def _collective(args):
    import torch  # pylint: disable=import-outside-toplevel
    import torch.distributed as dist  # pylint: disable=import-outside-toplevel
    device = "cpu"
    if args.backend == "nccl":
        torch.cuda.set_device(0)
        device = "cuda"
    elif args.backend == "hccl":
        import torch_npu  # noqa: F401 pylint: disable=import-outside-toplevel,import-error,unused-import
        torch.npu.set_device(0)  # pylint: disable=no-member
        device = "npu"
    started = time.perf_counter()
    STAGE["now"] = f"the rendezvous with master {args.master_addr}:{args.master_port} (init_process_group)"
    dist.init_process_group(args.backend, init_method=f"tcp://{args.master_addr}:{args.master_port}",
                            rank=args.rank, world_size=args.world_size, timeout=timedelta(seconds=args.timeout))
    init_s = time.perf_counter() - started
    STAGE["now"] = f"the {args.backend} all-reduce of {args.world_size} ranks"
    small = torch.ones(1, dtype=torch.float32, device=device)
    latency_s = _timed(dist, small, args.backend, 20)
    large = torch.ones(max(1, args.size_mb * 1024 * 1024 // 4), dtype=torch.float32, device=device)
    large_s = _timed(dist, large, args.backend, args.iterations)
    check = torch.ones(1, dtype=torch.float32, device=device)
    dist.all_reduce(check)
    total = float(check.item())
    dist.destroy_process_group()
    nbytes = large.numel() * 4
    n = args.world_size
    return _emit({"probe": "collective", "ok": total == n, "backend": args.backend, "rank": args.rank,
                  "world_size": n, "sum": total, "bytes": nbytes, "seconds": large_s, "latency_s": latency_s,
                  "init_s": init_s, "busbw_gbps": nbytes * 2 * (n - 1) / n / large_s / 1e9,
                  "env": {key: os.environ[key] for key in FABRIC_VARS if key in os.environ}},
                 0 if total == n else 1)


def listen(args):
    server = socket.socket(socket.AF_INET6 if ":" in args.address else socket.AF_INET, socket.SOCK_STREAM)
    try:
        server.bind((args.address, args.port))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            return _emit({"probe": "listen", "ok": True, "in_use": True, "address": args.address, "port": args.port})
        raise
    server.listen(16)
    deadline = time.monotonic() + args.timeout
    accepted = 0
    while accepted < args.accept and time.monotonic() < deadline:
        server.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            conn, _peer = server.accept()
        except socket.timeout:
            break
        conn.close()
        accepted += 1
    server.close()
    return _emit({"probe": "listen", "ok": True, "in_use": False, "address": args.address, "port": args.port,
                  "accepted": accepted})


def ucx(args):
    tool = shutil.which("ucx_info")
    if tool is None:
        return _emit({"probe": "ucx", "ok": True, "ucx_info": None, "transports": None})
    out = subprocess.run([tool, "-d"], capture_output=True, text=True, timeout=args.timeout, check=False)
    transports = sorted(set(re.findall(r"^#\s*Transport:\s*(\S+)", out.stdout, re.M)))
    return _emit({"probe": "ucx", "ok": out.returncode == 0, "ucx_info": tool, "transports": transports})


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="probe", required=True)
    one = sub.add_parser("collective")
    one.add_argument("--backend", choices=("gloo", "nccl", "hccl"), default="gloo")
    one.add_argument("--rank", type=int, required=True)
    one.add_argument("--world-size", type=int, required=True)
    one.add_argument("--master-addr", required=True)
    one.add_argument("--master-port", type=int, required=True)
    one.add_argument("--size-mb", type=int, default=16)
    one.add_argument("--iterations", type=int, default=5)
    one.add_argument("--timeout", type=int, default=60)
    two = sub.add_parser("listen")
    two.add_argument("--address", required=True)
    two.add_argument("--port", type=int, required=True)
    two.add_argument("--accept", type=int, default=1)
    two.add_argument("--timeout", type=int, default=60)
    three = sub.add_parser("ucx")
    three.add_argument("--timeout", type=int, default=30)
    args = parser.parse_args(argv)
    try:
        return {"collective": collective, "listen": listen, "ucx": ucx}[args.probe](args)
    except Exception as exc:  # pylint: disable=broad-except
        traceback.print_exc(file=sys.stderr)
        return _emit({"probe": args.probe, "ok": False, "error": f"{type(exc).__name__}: {exc}"[-2000:],
                      "env": {key: os.environ[key] for key in FABRIC_VARS if key in os.environ}}, 1)


if __name__ == "__main__":
    sys.exit(main())
