"""Command synthesis: golden tables for the recipes site's rules, plus the upstream corpus."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import pytest

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._cmdline import dedupe_flags, format_command, shell_quote
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._docker import docker_argv, docker_command, docker_meta
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._synthesis import resolve_command

TAXONOMY = {
    "hardware_profiles": {
        "h200": {"brand": "NVIDIA", "generation": "hopper", "gpu_count": 8, "vram_gb": 1128},
        "gb200": {"brand": "NVIDIA", "generation": "blackwell", "gpu_count": 4, "vram_gb": 768},
        "mi355x": {"brand": "AMD", "generation": "amd", "gpu_count": 8, "vram_gb": 2304},
    },
    "kv_offload": {},
}
STRATEGIES = {
    "single_node_tp": {"name": "single_node_tp", "deploy_type": "single_node", "parallel_flag": "--tensor-parallel-size"},
    "multi_node_dep": {"name": "multi_node_dep", "deploy_type": "multi_node", "parallel_flag": "--data-parallel-size",
                       "vllm_args": ["--enable-expert-parallel"]},
    "multi_node_tp_pp": {"name": "multi_node_tp_pp", "deploy_type": "multi_node", "parallelism": "tp_pp",
                         "env": {"GLOO_SOCKET_IFNAME": "$IFACE_NAME"}},
    "pd_cluster": {
        "name": "pd_cluster", "deploy_type": "pd_cluster", "router": {"policy": "round_robin"},
        "prefill": {"vllm_args": ["--port", "8001"],
                    "env": {"NCCL_MNNVL_ENABLE": "1", "VLLM_NIXL_SIDE_CHANNEL_HOST": "$PREFILL_NODE_1"}},
        "decode": {"vllm_args": ["--port", "8002"], "env": {"VLLM_NIXL_SIDE_CHANNEL_HOST": "$DECODE_NODE_1"}},
    },
}


def recipe(**extra):
    base = {
        "model": {"model_id": "org/model", "base_args": ["--trust-remote-code"], "base_env": {"A": "1"}},
        "variants": {"default": {"precision": "fp8", "vram_minimum_gb": 100}},
        "compatible_strategies": ["single_node_tp", "multi_node_dep", "multi_node_tp_pp", "pd_cluster",
                                  "multi_node_tep"],
        "features": {"tool_calling": {"args": ["--tool-call-parser", "x", "--enable-auto-tool-choice"]}},
    }
    base.update(extra)
    return base


def synth(rec, strategy="single_node_tp", hardware="h200", features=(), **kw):
    return resolve_command(rec, "default", strategy, hardware, list(features), STRATEGIES, TAXONOMY, **kw)


@pytest.mark.parametrize("args, expected", [
    (["--a", "1", "--b", "--a", "2"], ["--b", "--a", "2"]),
    (["pos", "--x", "--x", "v"], ["pos", "--x", "v"]),
    (["--flag", "-1", "--flag", "val"], ["-1", "--flag", "val"]),
    (["--k", "v", "--k"], ["--k"]),
])
def test_dedupe_keeps_last_flag(args, expected):
    assert dedupe_flags(args) == expected


@pytest.mark.parametrize("word, quoted", [
    ("plain-word_1.0", "plain-word_1.0"),
    ("$HEAD_IP", "$HEAD_IP"),
    ('{"a":1}', "'{\"a\":1}'"),
    ("it's", "'it'\\''s'"),
    ("$lower", "'$lower'"),
])
def test_shell_quote(word, quoted):
    assert shell_quote(word) == quoted


def test_single_node_layout_and_autofit_tp():
    out = synth(recipe(), features=["tool_calling"])
    assert out["argv"] == ["vllm", "serve", "org/model", "--trust-remote-code", "--tensor-parallel-size", "1",
                           "--tool-call-parser", "x", "--enable-auto-tool-choice"]
    assert out["command"] == ("vllm serve org/model \\\n  --trust-remote-code \\\n  --tensor-parallel-size 1 \\\n"
                              "  --tool-call-parser x \\\n  --enable-auto-tool-choice")
    assert out["env"] == {"A": "1"}


def test_vram_that_needs_the_whole_node_fans_out():
    rec = recipe(variants={"default": {"vram_minimum_gb": 500}})
    assert synth(rec)["argv"][-1] == "8"


def test_strategy_generation_override_replaces_recipe_and_variant_layers():
    rec = recipe(
        hardware_overrides={"hopper": {"extra_args": ["--recipe-hopper"]}},
        strategy_overrides={"single_node_tp": {"hardware_overrides": {"nvidia": {"extra_args": ["--strategy-nv"]},
                                                                      "h200": {"extra_args": ["--exact"]}}}},
    )
    argv = synth(rec)["argv"]
    assert "--recipe-hopper" not in argv
    assert argv[-2:] == ["--strategy-nv", "--exact"]


def test_multi_node_dep_ranks_offset_by_recipe_local_size():
    rec = recipe(strategy_overrides={"multi_node_dep": {"extra_args": ["--data-parallel-size-local", "4"]}})
    out = synth(rec, "multi_node_dep", node_count=3)
    assert out["headArgv"].count("--data-parallel-start-rank") == 0
    starts = [a[a.index("--data-parallel-start-rank") + 1] for a in out["workerArgvs"]]
    assert starts == ["4", "8"]
    # the recipe's later --data-parallel-size-local wins the dedupe
    assert out["headArgv"][out["headArgv"].index("--data-parallel-size-local") + 1] == "4"


def test_tp_pp_followers_are_headless_with_their_own_rank():
    out = synth(recipe(), "multi_node_tp_pp", node_count=3)
    assert [a[a.index("--node-rank") + 1] for a in out["workerArgvs"]] == ["1", "2"]
    assert all("--headless" in a for a in out["workerArgvs"]) and "--headless" not in out["headArgv"]
    assert out["env"] == {"A": "1", "GLOO_SOCKET_IFNAME": "$IFACE_NAME"}


def test_pd_cluster_drops_nvl4_env_off_gb200_and_rewrites_dep_rank_hosts():
    pools = {"prefill": {"nodes": 2, "rank": 1, "parallelism": "dep"}, "decode": 1}
    out = synth(recipe(), "pd_cluster", pd_nodes=pools)
    assert "NCCL_MNNVL_ENABLE" not in out["prefill"]["env"]
    assert out["prefill"]["env"]["VLLM_NIXL_SIDE_CHANNEL_HOST"] == "$PREFILL_NODE_2"
    assert out["prefill"]["argv"][out["prefill"]["argv"].index("--data-parallel-start-rank") + 1] == "8"
    assert "--prefill http://$PREFILL_NODE_2:8001" in out["router"]["command"]
    on_gb200 = synth(recipe(), "pd_cluster", hardware="gb200", pd_nodes=pools)
    assert on_gb200["prefill"]["env"]["NCCL_MNNVL_ENABLE"] == "1"


def test_frontend_default_and_explicit_choice():
    rec = recipe(model={"model_id": "org/model", "default_frontend": "rust"})
    assert synth(rec)["env"] == {"VLLM_USE_RUST_FRONTEND": "1"}
    assert synth(rec, frontend="python")["env"] == {"VLLM_USE_RUST_FRONTEND": "0"}
    assert "VLLM_USE_RUST_FRONTEND" not in synth(recipe())["env"]


def test_non_string_argv_token_is_an_error():
    with pytest.raises(TypeError):
        synth(recipe(), advanced_args=["--max-model-len", 4096])


def test_docker_wrap_image_precedence_and_amd_flags():
    rec = recipe(model={"model_id": "org/model", "docker_image": {"nvidia": "img:nv", "amd": "img:rocm"}},
                 variants={"default": {"hardware_overrides": {"mi355x": {"docker_image": "img:exact"}}}})
    assert docker_meta(rec, rec["variants"]["default"], TAXONOMY["hardware_profiles"]["h200"], "h200")["image"] == "img:nv"
    meta = docker_meta(rec, rec["variants"]["default"], TAXONOMY["hardware_profiles"]["mi355x"], "mi355x")
    assert meta["image"] == "img:exact"
    argv = docker_argv(["vllm", "serve", "org/model", "--x"], {"K": 0}, meta, 8001)
    assert argv == ["docker", "run", "--device=/dev/kfd", "--device=/dev/dri", "--security-opt", "seccomp=unconfined",
                    "--group-add", "video", "--privileged", "--ipc=host", "-p", "8001:8001",
                    "-v", "~/.cache/huggingface:/root/.cache/huggingface", "-e", "K=0", "img:exact", "org/model", "--x"]
    command = docker_command(format_command("org/model", ["--x"]), {"K": 0}, meta, 8001)
    assert command.endswith("-e K=0 \\\n  img:exact org/model \\\n  --x")


@pytest.mark.shared
def test_upstream_corpus_replays_exactly(shared_dir, repo_root):
    """The whole conformance corpus through tools/conformance.py (the CLI CI also runs)."""
    proc = subprocess.run(
        [sys.executable, str(repo_root / "tools" / "conformance.py"),
         "--recipes", str(shared_dir / "upstream" / "recipes"),
         "--cases", str(shared_dir / "upstream" / "conformance" / "cases.jsonl.gz")],
        capture_output=True, text=True, check=False)
    with gzip.open(shared_dir / "upstream" / "conformance" / "cases.jsonl.gz", "rt") as stream:
        total = sum(1 for line in stream if line.strip())
    assert proc.stdout.strip().splitlines()[-1] == f"{total} passed, 0 failed", proc.stdout[-3000:]
    assert proc.returncode == 0


@pytest.mark.shared
def test_published_seed_matches_its_recommended_command(shared_dir, repo_root):
    proc = subprocess.run(
        [sys.executable, str(repo_root / "tools" / "conformance.py"),
         "--published", str(shared_dir / "seed" / "GLM-5.3-Flash.json")],
        capture_output=True, text=True, check=False)
    last = proc.stdout.strip().splitlines()[-1]
    assert last.endswith(" passed, 0 failed") and not last.startswith("0 passed"), proc.stdout
    assert proc.returncode == 0


@pytest.mark.shared
def test_conformance_tool_reports_a_broken_case(shared_dir, repo_root, tmp_path):
    """The replay must be able to fail: a corrupted expectation is counted as failed."""
    source = shared_dir / "upstream" / "conformance" / "cases.jsonl.gz"
    with gzip.open(source, "rt") as stream:
        cases = [json.loads(line) for line, _index in zip(stream, range(3), strict=False)]
    cases[1]["output"]["deployType"] = "tampered"
    broken = tmp_path / "cases.jsonl"
    broken.write_text("".join(json.dumps(c) + "\n" for c in cases))
    proc = subprocess.run(
        [sys.executable, str(repo_root / "tools" / "conformance.py"),
         "--recipes", str(shared_dir / "upstream" / "recipes"), "--cases", str(broken)],
        capture_output=True, text=True, check=False)
    assert proc.stdout.strip().splitlines()[-1] == "2 passed, 1 failed"
    assert proc.returncode == 1
