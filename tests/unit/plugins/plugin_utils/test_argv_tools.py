"""_argv_tools: what an engine's final argv serves (read once, at placement)."""

from __future__ import annotations

import pytest

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._argv_tools import engine_args


@pytest.mark.parametrize("argv, expected", [
    (["vllm", "serve", "org/m", "--port", "8000"], ("org/m", "org/m", False)),
    (["vllm", "serve", "org/m", "--served-model-name", "chat"], ("org/m", "chat", False)),
    (["vllm", "serve", "--model", "org/m", "--revision", "v2"], ("org/m", "org/m", True)),
    (["vllm", "serve", "org/a", "--model=org/b", "--revision=v2"], ("org/b", "org/b", True)),
    (["vllm", "serve", "/models/local", "--served-model-name=x"], ("/models/local", "x", False)),
    (["python", "-m", "vllm.entrypoints.openai.api_server"], (None, None, False)),
    (["vllm", "serve"], (None, None, False)),
])
def test_served_model_of_an_argv(argv, expected):
    args = engine_args(argv)
    assert (args.model, args.served_name, args.pins_revision) == expected


def test_engine_args_read_the_layout_and_ports_once_with_aliases_and_last_value_winning():
    args = engine_args(["vllm", "serve", "m", "-dp", "16", "-dpl", "8", "--data-parallel-start-rank=8",
                        "-dpa", "10.0.0.1", "--data-parallel-rpc-port", "13345", "--nnodes", "2", "--node-rank", "1",
                        "--master-port", "x", "-tp", "1", "--tensor-parallel-size", "2", "--headless"])
    assert (args.dp, args.dp_local, args.dp_start_rank, args.dp_address, args.dp_rpc_port) == (16, 8, 8, True, 13345)
    assert (args.nnodes, args.node_rank, args.master_port, args.tp, args.headless) == (2, 1, None, 2, True)
    assert args.gpus_per_node == 16  # tp * pp * dp over --nnodes
    assert args.port is None


def test_engine_args_of_a_bare_argv_are_the_defaults():
    args = engine_args(["vllm", "serve", "m", "--port", "8100"])
    assert (args.port, args.nnodes, args.node_rank, args.tp, args.pp, args.dp, args.dp_local) == ("8100", 1, 0, 1, 1, 1, 1)
    assert (args.headless, args.dp_address, args.master_port, args.gpus_per_node) == (False, False, None, 1)
