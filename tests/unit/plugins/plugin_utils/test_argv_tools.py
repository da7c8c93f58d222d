"""_argv_tools: what an engine's final argv serves (read once, at placement)."""

from __future__ import annotations

import pytest

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._argv_tools import served_model


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
    assert served_model(argv) == expected
