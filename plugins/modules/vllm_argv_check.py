#!/usr/bin/python
# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Check every engine or router argv with the parser of the program that will run it."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_argv_check
short_description: Check vLLM engine and vllm-router argvs with the image's own parser before anything runs
description:
  - C(kind=engine) runs the image's own C(vllm serve) argument parsing on each argv, in a throwaway
    container of the exact image (by image ID), C(docker run --rm --network none), no devices, every
    capability dropped, nothing mounted but the checker script (read-only), entrypoint the image's
    Python. Besides what C(vllm serve) refuses at parse and validate time, it checks what vLLM would
    look up only after loading the model, without a model (tool-call parser, reasoning parser and
    tokenizer mode names against the image's registries; C(--speculative-config) keys).
  - C(kind=router) parses each C(vllm-router) argv with the argparse front end of the installed
    C(vllm_router) (C(router_python), or a container of O(image) when given).
  - Each distinct (image ID, argv) is checked once; the result is cached under O(cache_dir) by
    sha256 of the image ID, the checker version and the argv JSON, so a re-run starts no container
    (RV(cached)).
  - Enforces O(min_vllm_version) (and a process's own C(min_vllm_version)) against the image's vLLM.
  - Fails with the parser's own words, naming the deployment, the unit and, when the process gives
    C(origins), where the refused flag came from (recipe, strategy, feature, advanced_args).
  - Changes nothing the fleet runs; writing the cache does not count as a change.
version_added: 0.1.0
author:
  - vllm_fleet maintainers (@vllm-fleet)
options:
  kind:
    description: What the argvs start.
    type: str
    choices: [engine, router]
    default: engine
  image:
    description:
      - The image the units run (the plan's C(image)). Required for C(kind=engine). The check runs in
        the image ID this reference names on the host now.
      - For C(kind=router), the router image when the router runs in a container; leave it out for
        a router installed in a venv (O(router_python)).
    type: str
  processes:
    description:
      - The processes to check. Keys read are C(argv) (required), C(deployment), C(unit), C(host),
        C(min_vllm_version), C(origins) (a mapping flag -> where it came from) and C(env) (its
        C(VLLM_*) keys are set while the argv is checked, and are part of the cache key); other keys
        are ignored, so plan.json process entries can be passed as they are.
    type: list
    elements: dict
    required: true
  min_vllm_version:
    description:
      - Lowest vLLM version the argvs need (the recipe's C(min_vllm_version)). An image with an older
        vLLM fails the check. A process's own C(min_vllm_version) is enforced too.
    type: str
  min_vllm_versions:
    description:
      - Lowest vLLM version per deployment (deployment name -> version), for a play that checks the
        processes of several deployments at once (the plan's C(deployments.*.min_vllm_version)).
    type: dict
    default: {}
  plan_deployments:
    description:
      - The plan's C(deployments) mapping (plan.json), to tell where a refused flag came from when a
        process gives no C(origins) - V(advanced_args) when the deployment's selection lists it, else
        the recipe with its variant, strategy and features - and to read each deployment's
        C(min_vllm_version).
    type: dict
    default: {}
  missing_ok:
    description:
      - C(kind=router) only. When the router Python has no C(vllm_router), skip the check and say so in
        RV(skipped_reason) instead of failing.
    type: bool
    default: false
  python:
    description:
      - Interpreters tried inside the image, in order, as the container's entrypoint (the first that
        starts is used).
    type: list
    elements: str
    default: [python3, /opt/vllm/bin/python, /usr/bin/python3]
  router_python:
    description:
      - Python of the vllm-router installation (C(kind=router) without O(image)). Defaults to the
        Python running this module.
    type: path
  env:
    description:
      - Environment of the checker container. Parsing touches no device, so C(VLLM_TARGET_DEVICE=cpu)
        lets CUDA, ROCm, Ascend and CPU images build their parser on a host without the accelerator.
    type: dict
    default: {VLLM_TARGET_DEVICE: cpu}
  cache_dir:
    description: Where results are cached on the host.
    type: path
    default: /var/cache/vllm-fleet/argv-check
  skip:
    description:
      - Do not check (images without Python or with a custom entrypoint). O(skip_reason) is required
        and returned, so the summary can state it.
    type: bool
    default: false
  skip_reason:
    description: Why the check is skipped (required with O(skip=true)).
    type: str
  fail_on_error:
    description:
      - Fail when an argv is refused. With C(false) the module returns the refusals in RV(failures)
        and RV(message) so a play can gather every host's before failing once.
    type: bool
    default: true
  docker_binary:
    description: The docker CLI.
    type: path
    default: docker
  timeout:
    description: Seconds one checker run may take (importing vLLM takes 10-300 s on a loaded host).
    type: int
    default: 900
attributes:
  check_mode:
    support: full
    description:
      - Runs the same in check mode; it only reads the image and writes its own cache.
      - In check mode an image that is not on the host yet (the pull only said it would pull it) is
        not checked; RV(skipped_reason) says so.
  diff_mode:
    support: none
    description: Changes nothing, so there is nothing to diff.
  idempotent:
    support: full
    description: Changes nothing the fleet runs; RV(ignore:changed) is always false.
  platform:
    support: full
    platforms: posix
    description: Hosts with docker (engine) or the vllm-router installation (router).
"""

EXAMPLES = r"""
- name: Check the engine argvs with the image's vLLM
  vllm_fleet.recipes.vllm_argv_check:
    image: vllm/vllm-openai:v0.32.0
    min_vllm_version: "0.32.0"
    processes:
      - deployment: qwen
        unit: vllm-qwen
        argv: [vllm, serve, Qwen/Qwen3-0.6B, --max-model-len, "4096"]
        origins: {--max-model-len: advanced_args}

- name: Check the router argvs with the installed vllm-router
  vllm_fleet.recipes.vllm_argv_check:
    kind: router
    router_python: /opt/vllm-fleet/router-venv/bin/python
    processes:
      - deployment: qwen
        unit: vllm-qwen-router
        argv: [vllm-router, --worker-urls, "http://10.0.0.1:8000", --port, "8100"]

- name: Opt out for an image without Python
  vllm_fleet.recipes.vllm_argv_check:
    image: registry.example/custom-engine:1
    processes: []
    skip: true
    skip_reason: custom entrypoint, no Python in the image
"""

RETURN = r"""
results:
  description: One entry per process, in the order given.
  returned: always
  type: list
  elements: dict
  contains:
    deployment: {description: The process's deployment., type: str}
    unit: {description: The process's unit., type: str}
    ok: {description: Whether the parser accepted the argv., type: bool}
    cached: {description: Whether the result came from the cache., type: bool}
    stage:
      description: >-
        Where it was refused: program, parse, validate, tool-call-parser, reasoning-parser,
        tokenizer-mode, engine-args, speculative-config, min-version.
      type: str
    error: {description: The parser's own message., type: str}
    flag: {description: The flag the message names., type: str}
    origin: {description: Where that flag came from (from the process's C(origins))., type: str}
    notes: {description: What was not checked and why., type: list, elements: str}
image_id:
  description: The image ID the check ran in.
  returned: when an image was given and not skipped
  type: str
program_version:
  description: vLLM (engine) or vllm-router (router) version of the checked installation.
  returned: when not skipped
  type: str
  sample: 0.32.0
cached:
  description: True when every result came from the cache (no container was started).
  returned: always
  type: bool
checked:
  description: Distinct argvs checked by running the parser this time (0 when all were cached).
  returned: always
  type: int
setup_s:
  description: Seconds the checker took to build the parser (import) this time; 0 when cached.
  returned: always
  type: float
elapsed_s:
  description: Seconds the whole module took.
  returned: always
  type: float
failures:
  description: The refused entries of RV(results).
  returned: always
  type: list
  elements: dict
message:
  description: One line per refusal (deployment, unit, origin, the parser's words), or the skip reason.
  returned: always
  type: str
skipped_reason:
  description: O(skip_reason) when the check was skipped.
  returned: when skipped
  type: str
"""

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.vllm_fleet.recipes.plugins.module_utils import _argv_checker

CONTAINER_CHECKER = "/vllm-fleet-argv-check.py"
# `docker run` exit codes when the entrypoint cannot start (not found / not executable).
_NO_ENTRYPOINT = (126, 127)


class CheckError(Exception):
    """The check could not run (not: an argv was refused)."""


class ImageMissing(CheckError):
    """The image is not on the host (in check mode: the pull only said it would pull it)."""


class ProgramMissing(CheckError):
    """The interpreter has no such program (vllm_router not installed)."""


def version_tuple(text):
    """``0.33.0rc1.dev5+g1234`` -> (0, 33, 0); None when it does not start with a number."""
    match = re.match(r"v?(\d+(?:\.\d+)*)", str(text or "").strip())
    if not match:
        return None
    parts = [int(p) for p in match.group(1).split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def check_env(proc):
    """The process's ``VLLM_*`` environment (plan.json ``env``, never secrets): some checks read it."""
    env = proc.get("env") or {}
    return {str(k): str(v) for k, v in sorted(env.items()) if str(k).startswith("VLLM_")}


def cache_key(image_id, kind, argv, env=None):
    fields = [image_id, kind, _argv_checker.CHECKER_VERSION, list(argv)] + ([env] if env else [])
    payload = json.dumps(fields, separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def checker_source():
    """The checker script's text (the module_utils file shipped with this module)."""
    loader = getattr(_argv_checker, "__loader__", None)
    if loader is not None and hasattr(loader, "get_source"):
        source = loader.get_source(_argv_checker.__name__)
        if source:
            return source
    with open(_argv_checker.__file__, encoding="utf-8") as handle:
        return handle.read()


class ArgvCheck:
    """Check a set of processes' argvs; cache by (image ID, argv)."""

    def __init__(self, *, kind, processes, image=None, pythons=(), router_python=None, env=None,
                 cache_dir, docker_binary="docker", timeout=900, runner=None):
        self.kind = kind
        self.processes = [dict(p) for p in processes]
        self.image = image
        self.pythons = list(pythons)
        self.router_python = router_python or sys.executable
        self.env = dict(env or {})
        self.cache_dir = cache_dir
        self.docker = docker_binary
        self.timeout = timeout
        self.run = runner or subprocess.run
        self.image_id = None
        self.setup_s = 0.0
        self.checked = 0
        #: The checker's own time per freshly checked argv (ms), for benchmarks.
        self.check_ms = []

    # -- image and cache -------------------------------------------------------------
    def resolve_image(self):
        if not self.image:
            self.image_id = f"venv:{os.path.realpath(self.router_python)}"
            return
        proc = self.run([self.docker, "image", "inspect", "--format", "{{.Id}}", self.image],
                        capture_output=True, text=True, check=False)
        if proc.returncode != 0 or not proc.stdout.strip():
            raise ImageMissing(f"image {self.image} is not on this host (docker image inspect: "
                               f"{(proc.stderr or proc.stdout).strip()}); pull it first")
        self.image_id = proc.stdout.strip()

    def _path(self, key):
        return os.path.join(self.cache_dir, key[:2], key + ".json")

    def cache_get(self, key):
        try:
            with open(self._path(key), encoding="utf-8") as handle:
                return json.load(handle)
        except (OSError, ValueError):
            return None

    def cache_put(self, key, entry):
        path = self._path(key)
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(entry, handle)
        os.replace(tmp, path)

    # -- running the checker -----------------------------------------------------------
    def _checker_file(self):
        source = checker_source()
        digest = hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]
        path = os.path.join(self.cache_dir, f"checker-{digest}.py")
        if not os.path.exists(path):
            os.makedirs(self.cache_dir, mode=0o755, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.cache_dir, prefix=".tmp-")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(source)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        return path

    def _commands(self, checker):
        if not self.image:
            return [[self.router_python, checker, self.kind]]
        base = [self.docker, "run", "--rm", "-i", "--network", "none", "--cap-drop", "ALL",
                "--security-opt", "no-new-privileges", "--log-driver", "none",
                "-v", f"{checker}:{CONTAINER_CHECKER}:ro"]
        for key, value in sorted(self.env.items()):
            base += ["-e", f"{key}={value}"]
        return [base + ["--entrypoint", python, self.image_id, CONTAINER_CHECKER, self.kind]
                for python in self.pythons]

    def run_checker(self, argvs):
        checker = self._checker_file()
        tried = []
        for command in self._commands(checker):
            try:
                proc = self.run(command, input=json.dumps(argvs), capture_output=True, text=True,
                                check=False, timeout=self.timeout)
            except subprocess.TimeoutExpired as exc:
                raise CheckError(f"the checker ran past {self.timeout} s ({' '.join(command[-4:])})") from exc
            try:
                report = json.loads(proc.stdout)
            except ValueError:
                report = None
            if isinstance(report, dict):
                if report.get("setup_error"):
                    if "No module named" in report["setup_error"]:
                        raise ProgramMissing(f"{self.image or self.router_python} has no {self.kind} "
                                             f"program to check with: {report['setup_error']}")
                    raise CheckError(f"the checker could not build the {self.kind} parser in "
                                     f"{self.image or self.router_python}: {report['setup_error']}")
                if len(report.get("results") or []) == len(argvs):
                    return report
            tail = (proc.stderr or proc.stdout or "").strip()[-600:]
            tried.append(f"{command[-4] if self.image else command[0]} (exit {proc.returncode}): {tail}")
            if self.image and proc.returncode not in _NO_ENTRYPOINT and "executable file not found" not in tail \
                    and "no such file or directory" not in tail.lower():
                break
        raise CheckError("the checker did not run in " + (self.image or self.router_python) + ": "
                         + "; ".join(tried) + ". Set python to the image's interpreter, or skip the "
                         "check with a reason (vllm_argv_check: false)")

    # -- the check ---------------------------------------------------------------------
    def check(self):
        self.resolve_image()
        keys = []
        pending = {}
        for proc in self.processes:
            argv = [str(t) for t in proc.get("argv") or []]
            env = check_env(proc) if self.kind == "engine" else {}
            key = cache_key(self.image_id, self.kind, argv, env)
            keys.append((key, argv))
            if self.cache_get(key) is None:
                pending[key] = {"argv": argv, "env": env} if env else argv
        fresh = {}
        version = None
        if pending:
            report = self.run_checker(list(pending.values()))
            self.setup_s = float(report.get("setup_s") or 0.0)
            self.check_ms = [float(r.get("check_ms") or 0.0) for r in report["results"]]
            version = report.get("program_version")
            for key, result in zip(pending, report["results"]):
                entry = {"program_version": version, "image_id": self.image_id, "checked": pending[key],
                         "result": result}
                self.cache_put(key, entry)
                fresh[key] = entry
            self.checked = len(pending)
        results = []
        for proc, (key, argv) in zip(self.processes, keys):
            entry = fresh.get(key) or self.cache_get(key)
            version = version or entry.get("program_version")
            result = dict(entry["result"])
            result.pop("check_ms", None)
            out = {"deployment": proc.get("deployment"), "unit": proc.get("unit"), "host": proc.get("host"),
                   "ok": bool(result.get("ok")), "cached": key not in fresh,
                   "notes": result.get("notes") or []}
            if not out["ok"]:
                flag = result.get("flag")
                out.update(stage=result.get("stage"), error=result.get("error"), flag=flag,
                           origin=(proc.get("origins") or {}).get(flag) if flag else None)
            results.append(out)
        return results, version

    @staticmethod
    def enforce_min_version(results, processes, version, minimum, per_deployment=None):
        have = version_tuple(version)
        for out, proc in zip(results, processes):
            need = (proc.get("min_vllm_version") or (per_deployment or {}).get(proc.get("deployment"))
                    or minimum)
            if not need or not out["ok"]:
                continue
            want = version_tuple(need)
            if want is None:
                raise CheckError(f"min_vllm_version {need!r} of {proc.get('deployment')} is not a version")
            if have is None or have < want:
                out.update(ok=False, stage="min-version", flag=None,
                           origin=proc.get("min_vllm_version_origin") or "recipe min_vllm_version",
                           error=f"the image's vLLM is {version}; the recipe needs vLLM >= {need}")


def origin_from_plan(flag, deployment):
    """Where ``flag`` came from, from a plan.json deployment entry (its selection and recipe)."""
    if not deployment:
        return None
    selection = deployment.get("selection") or {}
    advanced = [str(a) for a in selection.get("advanced_args") or []]
    if flag and any(a == flag or a.startswith((flag + "=", flag + " ")) for a in advanced):
        return "advanced_args"
    parts = [f"{key} {selection[key]}" for key in ("variant", "strategy") if selection.get(key)]
    if selection.get("features"):
        parts.append("features " + ", ".join(str(f) for f in selection["features"]))
    recipe = deployment.get("recipe") or "?"
    return f"recipe {recipe}" + (f" ({', '.join(parts)})" if parts else "")


def add_plan_origins(results, processes, deployments):
    for out, proc in zip(results, processes):
        if out["ok"]:
            continue
        deployment = deployments.get(proc.get("deployment")) or {}
        if out.get("stage") == "min-version":
            if deployment.get("recipe") and not proc.get("min_vllm_version_origin"):
                out["origin"] = f"recipe {deployment['recipe']} min_vllm_version"
        elif not out.get("origin"):
            out["origin"] = origin_from_plan(out.get("flag"), deployment)


def describe(out, image, version, kind):
    who = f"deployment {out.get('deployment') or '?'}, process {out.get('unit') or '?'}"
    if out.get("host"):
        who += f" on {out['host']}"
    program = f"vLLM {version}" if kind == "engine" else f"vllm-router {version}"
    origin = f" (from {out['origin']})" if out.get("origin") else ""
    flag = f" {out['flag']}" if out.get("flag") else ""
    where = f" in {image}" if image else ""
    return f"{who}: {program}{where} refuses{flag}{origin}: {out.get('error')}"


def exit_skipped(module, started, reason):
    module.exit_json(changed=False, results=[], cached=False, checked=0, setup_s=0.0, failures=[],
                     elapsed_s=round(time.monotonic() - started, 3), skipped_reason=reason,
                     message=f"argv check skipped: {reason}")


def run_module(module):
    params = module.params
    started = time.monotonic()
    kind = params["kind"]
    if params["skip"]:
        if not params.get("skip_reason"):
            module.fail_json(msg="skip=true needs skip_reason (it is stated in the run's summary)")
        exit_skipped(module, started, params["skip_reason"])
    if kind == "engine" and not params.get("image"):
        module.fail_json(msg="kind=engine needs image (the image the units run)")
    for index, proc in enumerate(params["processes"]):
        argv = proc.get("argv") if isinstance(proc, dict) else None
        if not isinstance(argv, list) or not argv:
            module.fail_json(msg=f"processes[{index}]: argv must be a non-empty list, got {argv!r}")
    check = ArgvCheck(kind=kind, processes=params["processes"], image=params.get("image"),
                      pythons=params["python"], router_python=params.get("router_python"),
                      env=params["env"] if params.get("image") else {}, cache_dir=params["cache_dir"],
                      docker_binary=params["docker_binary"], timeout=params["timeout"])
    try:
        results, version = check.check()
        deployments = params["plan_deployments"] or {}
        if kind == "engine":
            minimums = {str(k): str(v.get("min_vllm_version")) for k, v in deployments.items()
                        if isinstance(v, dict) and v.get("min_vllm_version")}
            minimums.update({str(k): str(v) for k, v in params["min_vllm_versions"].items() if v})
            check.enforce_min_version(results, params["processes"], version, params.get("min_vllm_version"),
                                      minimums)
        add_plan_origins(results, params["processes"], deployments)
    except ImageMissing as exc:
        if not module.check_mode:
            module.fail_json(msg=str(exc), results=[], cached=False, checked=0, failures=[])
        exit_skipped(module, started, f"check mode: {exc}")
    except ProgramMissing as exc:
        if not params["missing_ok"]:
            module.fail_json(msg=str(exc), results=[], cached=False, checked=0, failures=[])
        exit_skipped(module, started, f"{exc}; install vllm-router there or point the check at a Python that has it")
    except CheckError as exc:
        module.fail_json(msg=str(exc), results=[], cached=False, checked=check.checked, failures=[])
    failures = [r for r in results if not r["ok"]]
    message = "\n".join(describe(r, params.get("image"), version, kind) for r in failures)
    outcome = dict(changed=False, results=results, image_id=check.image_id if params.get("image") else None,
                   program_version=version, cached=bool(results) and all(r["cached"] for r in results),
                   checked=check.checked, setup_s=check.setup_s, failures=failures,
                   elapsed_s=round(time.monotonic() - started, 3), message=message)
    if failures and params["fail_on_error"]:
        module.fail_json(msg=message, **outcome)
    module.exit_json(**outcome)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            kind=dict(type="str", choices=["engine", "router"], default="engine"),
            image=dict(type="str"),
            processes=dict(type="list", elements="dict", required=True),
            min_vllm_version=dict(type="str"),
            min_vllm_versions=dict(type="dict", default={}),
            plan_deployments=dict(type="dict", default={}),
            missing_ok=dict(type="bool", default=False),
            python=dict(type="list", elements="str", default=["python3", "/opt/vllm/bin/python", "/usr/bin/python3"]),
            router_python=dict(type="path"),
            env=dict(type="dict", default={"VLLM_TARGET_DEVICE": "cpu"}),
            cache_dir=dict(type="path", default="/var/cache/vllm-fleet/argv-check"),
            skip=dict(type="bool", default=False),
            skip_reason=dict(type="str"),
            fail_on_error=dict(type="bool", default=True),
            docker_binary=dict(type="path", default="docker"),
            timeout=dict(type="int", default=900),
        ),
        supports_check_mode=True,
    )
    run_module(module)


if __name__ == "__main__":
    main()
