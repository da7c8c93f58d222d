"""vllm_argv_check: argvs checked by the parser of the program that will run them.

The engine tests run the real vLLM of the test infrastructure's CPU engine image
(``VLLM_ARGV_CHECK_IMAGE``, default ``localhost:5000/vllm-cpu-test:v1``, vLLM 0.32.0) in a
throwaway container: one cold run checks every distinct argv of the table at once (importing
vLLM costs 10-300 s on a loaded host), the second run must be served from the cache without
starting a container. They skip, saying why, where docker or the image is absent. The router
tests use the vllm-router installed in this venv.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest

from ansible_collections.vllm_fleet.recipes.plugins.module_utils import _argv_check as M
from ansible_collections.vllm_fleet.recipes.plugins.module_utils import _argv_checker as C

REPO = Path(__file__).resolve().parents[4]
BIN = Path(sys.executable).parent
IMAGE = os.environ.get("VLLM_ARGV_CHECK_IMAGE", "localhost:5000/vllm-cpu-test:v1")
MODEL = "Qwen/Qwen3-0.6B"


def _image_missing() -> str:
    if not shutil.which("docker"):
        return "docker CLI not found: the engine argv check runs the image's vLLM in a container"
    probe = subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        return f"{IMAGE} is not on this host (set VLLM_ARGV_CHECK_IMAGE to a vLLM engine image)"
    return ""


def serve(*flags: str) -> list[str]:
    return ["vllm", "serve", MODEL, *flags]


# name -> (process, expected ok, expected stage, words the refusal must quote, expected origin)
ENGINE_CASES = {
    "correct": (dict(argv=serve("--max-model-len", "512", "--dtype", "bfloat16", "--enforce-eager",
                                "--reasoning-parser", "qwen3")), True, None, None, None),
    "misspelled-advanced-arg": (dict(argv=serve("--max-modle-len", "512"),
                                     origins={"--max-modle-len": "advanced_args"}),
                                False, "parse", "unrecognized arguments: --max-modle-len", "advanced_args"),
    "wrong-tool-call-parser": (dict(argv=serve("--enable-auto-tool-choice", "--tool-call-parser", "hermes2"),
                                    origins={"--tool-call-parser": "recipe"}),
                               False, "tool-call-parser", "invalid tool call parser: hermes2", "recipe"),
    # --disable-flashinfer-autotune exists only from vLLM 0.33.0 (test-infra-facts.md).
    "flag-from-newer-vllm": (dict(argv=serve("--disable-flashinfer-autotune"),
                                  origins={"--disable-flashinfer-autotune": "strategy single_node_tp"}),
                             False, "parse", "unrecognized arguments: --disable-flashinfer-autotune",
                             "strategy single_node_tp"),
    "tokenizer-mode-from-nightly": (dict(argv=serve("--tokenizer-mode", "glm5_next")), False, "tokenizer-mode",
                                    "No tokenizer registered for tokenizer_mode='glm5_next'", None),
    "one-element-max-model-len": (dict(argv=serve("--max-model-len auto")), False, "parse",
                                  "unrecognized arguments: --max-model-len auto", None),
    "old-compilation-config": (dict(argv=serve("--compilation-config", '{"use_inductor": false}')), False, "parse",
                               "use_inductor", None),
    # vLLM reads VLLM_USE_RUST_FRONTEND while validating --grpc-port: the process's env is set for its check.
    "grpc-port-without-its-env": (dict(argv=serve("--grpc-port", "50051")), False, "validate",
                                  "--grpc-port requires VLLM_USE_RUST_FRONTEND=1", None),
    "grpc-port-with-its-env": (dict(argv=serve("--grpc-port", "50051"),
                                    env={"VLLM_USE_RUST_FRONTEND": "1", "HF_HUB_OFFLINE": "1"}),
                               True, None, None, None),
    # vLLM's parser takes any --attention-backend; its engine config refuses a name its registry lacks.
    "known-attention-backend": (dict(argv=serve("--attention-backend", "CPU_ATTN")), True, None, None, None),
    "attention-backend-the-image-lacks": (dict(argv=serve("--attention-backend", "NOT_A_BACKEND"),
                                               origins={"--attention-backend": "advanced_args"}),
                                          False, "attention-backend",
                                          "Unknown attention backend: 'NOT_A_BACKEND'. Valid options are: FLASH_ATTN",
                                          "advanced_args"),
    # ROCM_FLASHMLA_SPARSE_DSV41 is registered from vLLM 0.33.0 on (a name the 0.32.0 image lacks).
    "attention-backend-from-newer-vllm": (dict(argv=serve("--attention-backend", "ROCM_FLASHMLA_SPARSE_DSV41")),
                                          False, "attention-backend",
                                          "Unknown attention backend: 'ROCM_FLASHMLA_SPARSE_DSV41'", None),
    "speculative-ngram": (dict(argv=serve("--speculative-config",
                                          '{"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 3}')),
                          True, None, None, None),
    "speculative-method-the-image-lacks": (dict(argv=serve("--speculative-config",
                                                           '{"method": "eagle4", "num_speculative_tokens": 2}')),
                                           False, "speculative-config",
                                           "1 validation error for SpeculativeConfig: method: Input should be 'ngram'",
                                           None),
    "min-version-above-image": (dict(argv=serve("--max-model-len", "512", "--dtype", "bfloat16", "--enforce-eager",
                                                "--reasoning-parser", "qwen3"), min_vllm_version="0.33.0"),
                                False, "min-version", "the image's vLLM is 0.32.0; the recipe needs vLLM >= 0.33.0",
                                "recipe min_vllm_version"),
}


class CountingRunner:
    """subprocess.run that counts the containers it starts."""

    def __init__(self) -> None:
        self.containers = 0

    def __call__(self, command, **kwargs):
        if command[1:3] == ["run", "--rm"]:
            self.containers += 1
        kwargs.setdefault("check", False)
        return subprocess.run(command, **kwargs)  # pylint: disable=subprocess-run-check


def _engine_check(cache_dir: Path, runner: CountingRunner):
    processes = [dict(case[0], deployment="d", unit=f"vllm-d-{name}") for name, case in ENGINE_CASES.items()]
    check = M.ArgvCheck(kind="engine", processes=processes, image=IMAGE,
                        pythons=["python3", "/opt/vllm/bin/python"], env={"VLLM_TARGET_DEVICE": "cpu"},
                        cache_dir=str(cache_dir), runner=runner)
    started = time.monotonic()
    results, version = check.check()
    check.enforce_min_version(results, processes, version, None)
    return check, dict(zip(ENGINE_CASES, results, strict=False)), version, time.monotonic() - started


@pytest.fixture(scope="module")
def engine_runs(tmp_path_factory):
    reason = _image_missing()
    if reason:
        pytest.skip(reason)
    cache = tmp_path_factory.mktemp("argv-cache")
    cold_runner, warm_runner = CountingRunner(), CountingRunner()
    cold = _engine_check(cache, cold_runner)
    warm = _engine_check(cache, warm_runner)
    distinct = cold[0].checked
    print(f"\nvllm_argv_check engine cost: cold {cold[3]:.1f} s for {distinct} distinct argvs "
          f"({cold[3] / distinct:.2f} s each, import {cold[0].setup_s:.1f} s); "
          f"cached {warm[3] * 1000:.1f} ms for {len(ENGINE_CASES)} ({warm[3] * 1000 / len(ENGINE_CASES):.2f} ms each)")
    return {"cold": cold, "warm": warm, "cold_runner": cold_runner, "warm_runner": warm_runner}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ENGINE_CASES))
def test_engine_argv_checked_by_the_images_vllm(engine_runs, name):
    _proc, ok, stage, words, origin = ENGINE_CASES[name]
    _check, results, version, _elapsed = engine_runs["cold"]
    result = results[name]
    assert version == "0.32.0"
    assert result["ok"] is ok, result
    if not ok:
        assert result["stage"] == stage, result
        assert words in result["error"], result
        assert result.get("origin") == origin, result
        line = M.describe(result, IMAGE, version, "engine")
        assert f"deployment d, process vllm-d-{name}" in line and words in line
        if origin:
            assert f"(from {origin})" in line


@pytest.mark.slow
def test_engine_second_run_is_served_from_the_cache(engine_runs):
    cold_check, cold_results, _v, _e = engine_runs["cold"]
    warm_check, warm_results, version, _e = engine_runs["warm"]
    assert engine_runs["cold_runner"].containers == 1  # every distinct argv in one container
    assert cold_check.checked == len(ENGINE_CASES) - 1  # two cases share one argv (and env)
    assert engine_runs["warm_runner"].containers == 0 and warm_check.checked == 0
    assert all(r["cached"] for r in warm_results.values())
    assert version == "0.32.0"

    def strip(result):
        return {k: v for k, v in result.items() if k != "cached"}

    assert {n: strip(r) for n, r in warm_results.items()} == {n: strip(r) for n, r in cold_results.items()}


# --------------------------------------------------------------------------------------
# vllm-router (the venv's)
# --------------------------------------------------------------------------------------
ROUTER_CASES = [
    (["vllm-router", "--worker-urls", "http://10.0.0.1:8000", "--port", "8100"], True, None),
    (["vllm-router", "--vllm-pd-disaggregation", "--prefill", "http://10.0.0.1:8000",
      "--decode", "http://10.0.0.2:8000", "--port", "8100"], True, None),
    # The Mooncake kv_store_lb recipe's router command: vllm-router 0.1.17 has --worker-urls.
    (["vllm-router", "--backend-url", "http://10.0.0.1:8000"], False,
     "vllm-router: error: unrecognized arguments: --backend-url http://10.0.0.1:8000"),
    (["vllm-router", "--worker-urls", "http://10.0.0.1:8000", "--port", "eighty"], False,
     "argument --port: invalid int value: 'eighty'"),
    (["vllm-router", "--vllm-pd-disaggregation", "--decode", "http://10.0.0.2:8000"], False,
     "PD disaggregation mode requires --prefill"),
]


@pytest.mark.parametrize("argv,ok,words", ROUTER_CASES, ids=[str(i) for i in range(len(ROUTER_CASES))])
def test_router_argv_checked_by_the_installed_router(tmp_path, argv, ok, words):
    pytest.importorskip("vllm_router.router_args", reason="vllm-router is not installed in this venv")
    check = M.ArgvCheck(kind="router", processes=[dict(argv=argv, deployment="d", unit="vllm-d-router",
                                                       origins={"--backend-url": "recipe router command"})],
                        router_python=sys.executable, cache_dir=str(tmp_path))
    results, version = check.check()
    assert version and version != "unknown"
    assert results[0]["ok"] is ok, results[0]
    if not ok:
        assert words in results[0]["error"]
    again, _v = M.ArgvCheck(kind="router", processes=[dict(argv=argv)], router_python=sys.executable,
                            cache_dir=str(tmp_path)).check()
    assert again[0]["cached"] and again[0]["ok"] is ok


@pytest.mark.slow
def test_module_runs_through_ansible(tmp_path):
    """The module as Ansible ships it (AnsiballZ): the checker source travels with it."""
    pytest.importorskip("vllm_router.router_args", reason="vllm-router is not installed in this venv")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"), ANSIBLE_NOCOLOR="1")
    args = json.dumps({"kind": "router", "router_python": sys.executable, "cache_dir": str(tmp_path),
                       "processes": [{"argv": ["vllm-router", "--backend-url", "http://a:8000"],
                                      "deployment": "kv", "unit": "vllm-kv-router",
                                      "origins": {"--backend-url": "recipe router command"}}]})
    result = subprocess.run([str(BIN / "ansible"), "localhost", "-m", "vllm_fleet.recipes.vllm_argv_check",
                             "-a", args, "-e", f"ansible_python_interpreter={sys.executable}"],
                            capture_output=True, text=True, env=env, check=False, timeout=300)
    assert result.returncode != 0, result.stdout
    assert ("deployment kv, process vllm-kv-router: vllm-router" in result.stdout
            and "refuses --backend-url (from recipe router command): vllm-router: error: unrecognized "
                "arguments: --backend-url" in result.stdout), result.stdout + result.stderr


# --------------------------------------------------------------------------------------
# Pure pieces
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,expected", [
    ("0.32.0", (0, 32, 0)), ("0.33.0rc1.dev5+g1234", (0, 33, 0)), ("v0.11", (0, 11, 0)),
    ("dev", None), ("", None), ("1.2.3.4", (1, 2, 3, 4)),
])
def test_version_tuple(text, expected):
    assert M.version_tuple(text) == expected


@pytest.mark.parametrize("message,flag", [
    ("vllm: error: unrecognized arguments: --max-modle-len 512", "--max-modle-len"),
    ("vllm serve: error: argument --compilation-config/-cc: 1 validation error", "--compilation-config"),
    ("The supplied chat template string (/x.jinja) appears path-like, but doesn't exist! (parameter=chat_template)",
     "--chat-template"),
    ("PD disaggregation mode requires --prefill", "--prefill"),
    ("something else", None),
])
def test_flag_named_by_a_message(message, flag):
    assert C._first_flag(message) == flag


def test_cache_key_depends_on_image_kind_and_argv():
    base = M.cache_key("sha256:a", "engine", ["vllm", "serve", "m"])
    assert base == M.cache_key("sha256:a", "engine", ["vllm", "serve", "m"])
    assert len({base, M.cache_key("sha256:b", "engine", ["vllm", "serve", "m"]),
                M.cache_key("sha256:a", "router", ["vllm", "serve", "m"]),
                M.cache_key("sha256:a", "engine", ["vllm", "serve", "m", "--x"])}) == 4


def test_an_image_without_python_says_how_to_opt_out(tmp_path):
    """docker answers 127 for every interpreter: the error names them and the opt-out."""
    def runner(command, **kwargs):
        if command[1:3] == ["image", "inspect"]:
            return subprocess.CompletedProcess(command, 0, "sha256:feed\n", "")
        return subprocess.CompletedProcess(command, 127, "", "exec: \"x\": executable file not found in $PATH")
    check = M.ArgvCheck(kind="engine", processes=[dict(argv=serve())], image="custom:1",
                        pythons=["python3", "/opt/vllm/bin/python"], cache_dir=str(tmp_path), runner=runner)
    with pytest.raises(M.CheckError, match=r"python3 \(exit 127\).*/opt/vllm/bin/python \(exit 127\).*vllm_argv_check: false"):
        check.check()


def test_plan_carries_the_recipes_min_vllm_version():
    """plan.json names the recipe's min_vllm_version per deployment; the check enforces it."""
    from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _placement as P

    deployment = {"name": "glm", "recipe": "zai-org/GLM-5.3-Flash", "hardware": "h200", "strategy": "single_node_tp",
                  "gpu_runtime": "none", "image": "vllm/vllm-openai:nightly"}
    hostvars = {"node-a": {"ansible_host": "127.0.0.1", "vllm_fabric_interface": "lo", "vllm_deployment": deployment}}
    plan = P.plan_to_dict(P.build_plan(hostvars, {"all": ["node-a"], "glm": ["node-a"]}, P.engine_factory()))
    assert plan["deployments"]["glm"]["min_vllm_version"] == "0.29.0"


# --------------------------------------------------------------------------------------
# playbooks/validate.yml on the real engine image
# --------------------------------------------------------------------------------------
def _validate(tmp_path, *extra):
    deployment = {"name": "glm-cpu", "recipe": "zai-org/GLM-5.3-Flash", "hardware": "h200",
                  "strategy": "single_node_tp", "gpu_runtime": "none", "image": IMAGE,
                  "config_dir": str(tmp_path / "etc" / "vllm-fleet"), "unit_dir": str(tmp_path / "etc" / "systemd")}
    host = {"ansible_host": "127.0.0.1", "ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(json.dumps({"all": {"children": {"glm_cpu": {
        "hosts": {"node-a": host}, "vars": {"vllm_fabric_interface": "lo", "vllm_deployment": deployment,
                                            "vllm_image_argv_check_cache_dir": str(tmp_path / "cache")}}}}}))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_FORCE_COLOR="0")
    started = time.monotonic()
    result = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(inventory), str(REPO / "playbooks" / "validate.yml"),
                             *extra], capture_output=True, text=True, env=env, check=False, cwd=tmp_path, timeout=1200)
    return result, time.monotonic() - started


@pytest.mark.slow
def test_validate_playbook_refuses_the_seed_recipe_on_vllm_0_32(tmp_path):
    """The seed recipe needs a newer vLLM: refused with vLLM's words, nothing changed; then cached; opt-out stated."""
    reason = _image_missing()
    if reason:
        pytest.skip(reason)
    cold, cold_s = _validate(tmp_path)
    out = cold.stdout
    assert cold.returncode != 0, out
    assert ("deployment glm-cpu, process vllm-glm-cpu.service on node-a: vLLM 0.32.0 in "
            f"{IMAGE} refuses --disable-flashinfer-autotune (from recipe zai-org/GLM-5.3-Flash (variant default, "
            "strategy single_node_tp, features tool_calling, reasoning)): vllm: error: unrecognized arguments: "
            "--disable-flashinfer-autotune") in out, out
    assert "unrecognized arguments: --disable-flashinfer-autotune" in out
    assert "nothing on any host was changed" in out
    assert "changed=0" in out and "changed=1" not in out
    warm, warm_s = _validate(tmp_path)
    assert warm.returncode != 0 and "0 distinct argv(s) run through the parser now" in warm.stdout, warm.stdout
    assert "changed=0" in warm.stdout and "changed=1" not in warm.stdout
    skipped, _s = _validate(tmp_path, "-e", "vllm_argv_check=false",
                            "-e", "vllm_image_argv_check_skip_reason='custom entrypoint'")
    assert skipped.returncode == 0, skipped.stdout
    assert "skipped: custom entrypoint" in skipped.stdout
    print(f"\nvalidate.yml on the real image: cold {cold_s:.1f} s, cached {warm_s:.1f} s (whole playbook)")


# --------------------------------------------------------------------------------------
# Deviation from the site: a flag joined with its value in one argv element is split
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv,expected", [
    (["vllm", "serve", "m", "--max-model-len auto"], ["vllm", "serve", "m", "--max-model-len", "auto"]),
    (["--chat-template '/a b/t.jinja'"], ["--chat-template", "/a b/t.jinja"]),
    (["--compilation-config", '{"mode": 3, "x": [1, 2]}'], ["--compilation-config", '{"mode": 3, "x": [1, 2]}']),
    (["--served-model-name", "my model"], ["--served-model-name", "my model"]),
    (["--bad 'unclosed"], ["--bad 'unclosed"]),
])
def test_split_joined_flags(argv, expected):
    from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _argv_tools as A

    assert A.split_joined_flags(argv) == expected


def test_plan_splits_a_joined_flag_from_advanced_args():
    from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _placement as P

    deployment = {"name": "glm", "recipe": "zai-org/GLM-5.3-Flash", "hardware": "h200", "strategy": "single_node_tp",
                  "gpu_runtime": "none", "advanced_args": ["--max-model-len 4096"]}
    hostvars = {"node-a": {"ansible_host": "127.0.0.1", "vllm_fabric_interface": "lo", "vllm_deployment": deployment}}
    plan = P.plan_to_dict(P.build_plan(hostvars, {"all": ["node-a"], "glm": ["node-a"]}, P.engine_factory()))
    argv = plan["deployments"]["glm"]["processes"][0]["argv"]
    assert "--max-model-len 4096" not in argv
    assert argv[argv.index("--max-model-len") + 1] == "4096"


@pytest.mark.parametrize("flag,expected", [
    ("--max-modle-len", "advanced_args"),
    ("--max-model-len", "advanced_args"),  # "--max-model-len 4096" in one element (split by placement)
    ("--disable-flashinfer-autotune", "recipe zai-org/GLM-5.3-Flash (variant default, strategy single_node_tp, "
                                      "features tool_calling)"),
])
def test_origin_from_the_plan(flag, expected):
    deployment = {"recipe": "zai-org/GLM-5.3-Flash",
                  "selection": {"variant": "default", "strategy": "single_node_tp", "features": ["tool_calling"],
                                "advanced_args": ["--max-modle-len", "4096", "--max-model-len 4096"]}}
    assert M.origin_from_plan(flag, deployment) == expected


def test_plan_origins_fill_what_processes_do_not_say():
    results = [{"ok": False, "stage": "parse", "flag": "--x", "origin": None},
               {"ok": False, "stage": "parse", "flag": "--y", "origin": "feature z"},
               {"ok": False, "stage": "min-version", "flag": None, "origin": "recipe min_vllm_version"},
               {"ok": True}]
    processes = [{"deployment": "d"}] * 4
    M.add_plan_origins(results, processes, {"d": {"recipe": "r", "selection": {"advanced_args": ["--x"]}}})
    assert [r.get("origin") for r in results] == ["advanced_args", "feature z", "recipe r min_vllm_version", None]


@pytest.mark.parametrize("args,stage,words", [
    (dict(tool_call_parser="hermes2"), "tool-call-parser", "invalid tool call parser: hermes2 (chose from { hermes,glm47 })"),
    (dict(tool_call_parser="hermes2", tool_parser_plugin="/p.py"), None, None),
    (dict(reasoning_parser="qwen4"), "reasoning-parser", "invalid reasoning parser: qwen4 (chose from { qwen3 })"),
    (dict(tokenizer_mode="GLM5_NEXT"), "tokenizer-mode", "No tokenizer registered for tokenizer_mode='glm5_next'"),
    (dict(tool_call_parser="glm47", reasoning_parser="qwen3", tokenizer_mode="HF"), None, None),
])
def test_names_against_the_images_registries(args, stage, words):
    """The registry checks alone (the image's lists stubbed): what vLLM would refuse after loading the model."""
    import argparse

    checker = C.VllmServeChecker.__new__(C.VllmServeChecker)
    checker.tool_parsers, checker.reasoning_parsers, checker.tokenizer_modes = ["hermes", "glm47"], ["qwen3"], ["auto", "hf"]
    notes: list[str] = []
    failure = checker._names(argparse.Namespace(**args), notes)
    if stage is None:
        assert failure is None
        assert bool(notes) == ("tool_parser_plugin" in args)
    else:
        assert failure["stage"] == stage and words in failure["error"]


@pytest.mark.parametrize("argv,expected", [
    (["vllm-router", "--policy", "cache_aware", "--backend-url", "http://a:8000", "--backend-url", "http://b:8000",
      "--port", "30080"],
     ["vllm-router", "--policy", "cache_aware", "--worker-urls", "http://a:8000", "http://b:8000", "--port", "30080"]),
    (["vllm-router", "--backend-url=http://a:8000"], ["vllm-router", "--worker-urls", "http://a:8000"]),
    (["vllm-router", "--vllm-pd-disaggregation", "--prefill", "http://p:8000", "--decode", "http://d:8000"],
     ["vllm-router", "--vllm-pd-disaggregation", "--prefill", "http://p:8000", "--decode", "http://d:8000"]),
])
def test_router_argv_for_the_pinned_router(argv, expected):
    from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _argv_tools as A

    assert A.router_argv_for_pinned(argv) == expected
    if "vllm_router" in sys.modules or shutil.which("vllm-router"):
        check = M.ArgvCheck(kind="router", processes=[dict(argv=expected)], router_python=sys.executable,
                            cache_dir=tempfile.mkdtemp())
        assert check.check()[0][0]["ok"]


def test_check_mode_skips_an_image_not_pulled_yet(tmp_path, monkeypatch):
    """deploy.yml --check on a fresh host: the pull only said it would pull, so there is nothing to run."""
    def runner(command, **kwargs):
        return subprocess.CompletedProcess(command, 1, "", "Error: No such image: new:1")
    monkeypatch.setattr(M.subprocess, "run", runner)
    outcome = {}

    class Module:
        check_mode = True
        params: ClassVar[dict[str, Any]] = {"kind": "engine", "image": "new:1", "processes": [{"argv": serve()}], "skip": False,
                                            "python": ["python3"], "router_python": None, "env": {}, "cache_dir": str(tmp_path),
                                            "docker_binary": "docker", "timeout": 10, "min_vllm_version": None, "min_vllm_versions": {},
                                            "plan_deployments": {}, "missing_ok": False, "fail_on_error": True, "skip_reason": None}

        def exit_json(self, **kwargs):
            outcome.update(kwargs, failed=False)
            raise SystemExit(0)

        def fail_json(self, **kwargs):
            outcome.update(kwargs, failed=True)
            raise SystemExit(1)

    with pytest.raises(SystemExit):
        M.run_module(Module())
    assert not outcome["failed"] and outcome["skipped_reason"].startswith("check mode: image new:1 is not on this host")
    Module.check_mode = False
    with pytest.raises(SystemExit):
        M.run_module(Module())
    assert outcome["failed"] and "pull it first" in outcome["msg"]


@pytest.mark.parametrize("need, ok", [("nightly", True), ("0.40.0", False), ("0.10.1", True)])
def test_min_version_nightly_is_noted_not_refused(need, ok):
    """A recipe's ``min_vllm_version: nightly`` cannot be compared with a version: noted, never refused."""
    results = [{"ok": True, "notes": []}]
    M.ArgvCheck.enforce_min_version(results, [{"deployment": "d", "min_vllm_version": need}], "0.33.0", None)
    assert results[0]["ok"] is ok
    assert any("nightly" in note for note in results[0]["notes"]) is (need == "nightly")
