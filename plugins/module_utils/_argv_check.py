# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""The ``vllm_argv_check`` module's side of the argv check: run ``_argv_checker``, cache, report.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

``ArgvCheck`` runs the checker script (``_argv_checker``, shipped with the module) in a
throwaway container of the image, or with the router's Python, once per distinct
(image ID, argv), and caches each result on the host. The functions below it enforce
minimum vLLM versions, tell where a refused flag came from and word the refusals.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Mapping, NoReturn, Optional, Sequence, Tuple, cast

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


def version_tuple(text: Any) -> Optional[Tuple[int, ...]]:
    """``0.33.0rc1.dev5+g1234`` -> (0, 33, 0); None when it does not start with a number."""
    match = re.match(r"v?(\d+(?:\.\d+)*)", str(text or "").strip())
    if not match:
        return None
    parts = [int(p) for p in match.group(1).split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def check_env(proc: Mapping[str, Any]) -> Dict[str, str]:
    """The process's ``VLLM_*`` environment (plan.json ``env``, never secrets): some checks read it."""
    env = proc.get("env") or {}
    return {str(k): str(v) for k, v in sorted(env.items()) if str(k).startswith("VLLM_")}


def cache_key(image_id: Optional[str], kind: str, argv: Sequence[str], env: Optional[Mapping[str, str]] = None) -> str:
    """The cache file name of one result: sha256 of the image ID, kind, checker version, argv and env."""
    fields = [image_id, kind, _argv_checker.CHECKER_VERSION, list(argv)] + ([env] if env else [])
    payload = json.dumps(fields, separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def checker_source() -> str:
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

    def __init__(self, *, kind: str, processes: Sequence[Mapping[str, Any]], image: Optional[str] = None,
                 pythons: Sequence[str] = (), router_python: Optional[str] = None,
                 env: Optional[Mapping[str, str]] = None, cache_dir: str, docker_binary: str = "docker",
                 timeout: int = 900, runner: Optional[Callable[..., subprocess.CompletedProcess]] = None) -> None:
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
        self.image_id: Optional[str] = None
        self.setup_s = 0.0
        self.checked = 0
        #: The checker's own time per freshly checked argv (ms), for benchmarks.
        self.check_ms: List[float] = []

    # -- image and cache -------------------------------------------------------------
    def resolve_image(self) -> None:
        if not self.image:
            self.image_id = f"venv:{os.path.realpath(self.router_python)}"
            return
        proc = self.run([self.docker, "image", "inspect", "--format", "{{.Id}}", self.image],
                        capture_output=True, text=True, check=False)
        if proc.returncode != 0 or not proc.stdout.strip():
            raise ImageMissing(f"image {self.image} is not on this host (docker image inspect: "
                               f"{(proc.stderr or proc.stdout).strip()}); pull it first")
        self.image_id = proc.stdout.strip()

    def _path(self, key: str) -> str:
        return os.path.join(self.cache_dir, key[:2], key + ".json")

    def cache_get(self, key: str) -> Optional[Dict[str, Any]]:
        try:
            with open(self._path(key), encoding="utf-8") as handle:
                return json.load(handle)
        except (OSError, ValueError):
            return None

    def cache_put(self, key: str, entry: Mapping[str, Any]) -> None:
        path = self._path(key)
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(entry, handle)
        os.replace(tmp, path)

    # -- running the checker -----------------------------------------------------------
    def _checker_file(self) -> str:
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

    def _commands(self, checker: str) -> List[List[str]]:
        if not self.image:
            return [[self.router_python, checker, self.kind]]
        image_id = cast(str, self.image_id)  # check() resolves the image before it runs the checker
        base = [self.docker, "run", "--rm", "-i", "--network", "none", "--cap-drop", "ALL",
                "--security-opt", "no-new-privileges", "--log-driver", "none",
                "-v", f"{checker}:{CONTAINER_CHECKER}:ro"]
        for key, value in sorted(self.env.items()):
            base += ["-e", f"{key}={value}"]
        return [base + ["--entrypoint", python, image_id, CONTAINER_CHECKER, self.kind]
                for python in self.pythons]

    def run_checker(self, argvs: List[Any]) -> Dict[str, Any]:
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
    def check(self) -> Tuple[List[Dict[str, Any]], Optional[str]]:
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
        for proc, (key, _argv) in zip(self.processes, keys):
            entry = cast(Dict[str, Any], fresh.get(key) or self.cache_get(key))  # checked now, or a cache hit
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
    def enforce_min_version(results: Sequence[Dict[str, Any]], processes: Sequence[Mapping[str, Any]],
                            version: Optional[str], minimum: Optional[str],
                            per_deployment: Optional[Mapping[Any, str]] = None) -> None:
        """Refuse (stage ``min-version``) accepted argvs whose process needs a newer vLLM than ``version``."""
        have = version_tuple(version)
        for out, proc in zip(results, processes):
            need = (proc.get("min_vllm_version") or (per_deployment or {}).get(proc.get("deployment"))
                    or minimum)
            if not need or not out["ok"]:
                continue
            if str(need).strip().lower() == "nightly":
                # a nightly build at the time the recipe was written; any later release may carry it
                # too, so the version alone cannot refuse it (no false refusals): noted instead
                out.setdefault("notes", []).append(
                    f"min_vllm_version nightly not checked: the image's vLLM is {version}")
                continue
            want = version_tuple(need)
            if want is None:
                raise CheckError(f"min_vllm_version {need!r} of {proc.get('deployment')} is not a version")
            if have is None or have < want:
                out.update(ok=False, stage="min-version", flag=None,
                           origin=proc.get("min_vllm_version_origin") or "recipe min_vllm_version",
                           error=f"the image's vLLM is {version}; the recipe needs vLLM >= {need}")


def origin_from_plan(flag: Optional[str], deployment: Optional[Mapping[str, Any]]) -> Optional[str]:
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


def add_plan_origins(results: Sequence[Dict[str, Any]], processes: Sequence[Mapping[str, Any]],
                     deployments: Mapping[Any, Any]) -> None:
    """Fill in where each refused flag (or failed minimum version) came from, from the plan."""
    for out, proc in zip(results, processes):
        if out["ok"]:
            continue
        deployment = deployments.get(proc.get("deployment")) or {}
        if out.get("stage") == "min-version":
            if deployment.get("recipe") and not proc.get("min_vllm_version_origin"):
                out["origin"] = f"recipe {deployment['recipe']} min_vllm_version"
        elif not out.get("origin"):
            out["origin"] = origin_from_plan(out.get("flag"), deployment)


def describe(out: Mapping[str, Any], image: Optional[str], version: Optional[str], kind: str) -> str:
    """One line for a refusal: deployment, unit, host, program, flag, origin and the parser's words."""
    who = f"deployment {out.get('deployment') or '?'}, process {out.get('unit') or '?'}"
    if out.get("host"):
        who += f" on {out['host']}"
    program = f"vLLM {version}" if kind == "engine" else f"vllm-router {version}"
    origin = f" (from {out['origin']})" if out.get("origin") else ""
    flag = f" {out['flag']}" if out.get("flag") else ""
    where = f" in {image}" if image else ""
    return f"{who}: {program}{where} refuses{flag}{origin}: {out.get('error')}"


def exit_skipped(module: Any, started: float, reason: str) -> NoReturn:  # type: ignore[misc]  # exit_json exits; AnsibleModule is untyped
    """Exit the module with no results, stating why the check was skipped."""
    module.exit_json(changed=False, results=[], cached=False, checked=0, setup_s=0.0, failures=[],
                     elapsed_s=round(time.monotonic() - started, 3), skipped_reason=reason,
                     message=f"argv check skipped: {reason}")


def run_module(module: Any) -> None:
    """Validate ``module.params``, run the check and exit (or fail) the module with its outcome."""
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
