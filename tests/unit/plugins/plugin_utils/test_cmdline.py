"""argv dedupe and command layout (_cmdline): the one-pass ``render_kept`` agrees with dedupe then format."""

from __future__ import annotations

import pytest

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._cmdline import (
    dedupe_flags,
    format_argv,
    format_command,
    render_kept,
)

ARGVS = [
    [],
    ["--a", "1", "--b", "--a", "2"],
    ["pos", "--x", "--x", "v"],
    ["--flag", "-1", "--flag", "val"],
    ["--k", "v", "--k"],
    ["--k", "v", "w", "--k", "u", "x"],
    ["--json", '{"a": 1}', "--quote", "it's", "--var", "$HEAD_IP", "--lower", "$lower"],
    ["lone", "words", "--f", "v", "after"],
    ["--a", "--b", "--a", "--c", "1", "--b", "2"],
]


@pytest.mark.parametrize("args", ARGVS)
def test_render_kept_is_dedupe_then_format(args):
    words = dedupe_flags(args)
    command, argv = render_kept("org/model", list(args))
    assert command == format_command("org/model", words, final=True)
    assert argv == format_argv("org/model", words, final=True) == ["vllm", "serve", "org/model", *words]


def test_render_kept_lays_out_one_flag_per_line():
    command, argv = render_kept(7, ["--a", "1", "--b", "it's", "--a", "2", "--c"])
    assert command == "vllm serve 7 \\\n  --b 'it'\\''s' \\\n  --a 2 \\\n  --c"
    assert argv == ["vllm", "serve", 7, "--b", "it's", "--a", "2", "--c"]


def test_render_kept_refuses_non_string_tokens_like_format_command():
    with pytest.raises(TypeError, match="non-string token 4096"):
        render_kept("org/model", ["--max-model-len", 4096, "--max-model-len", "1"] + ["--x", 4096])
    with pytest.raises(TypeError, match="non-string token 4096"):
        format_command("org/model", ["--max-model-len", 4096])


def test_render_kept_keeps_a_non_string_token_dropped_by_dedupe_out():
    assert render_kept("m", ["--n", 4096, "--n", "1"]) == ("vllm serve m \\\n  --n 1", ["vllm", "serve", "m", "--n", "1"])
