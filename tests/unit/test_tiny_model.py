"""The tiny real model of the integration tests (tests/infra/tiny_model.py) and the Hub
stand-in serving it from a directory (``--local-repo``).

The real vLLM engine loads this model in the molecule scenarios; here we check, without vLLM,
what it relies on: the same bytes on every run, the tensors a Qwen3 checkpoint has, a tokenizer
that round-trips text and a chat template, and `hf download` getting the files unchanged.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
TINY_MODEL = REPO_ROOT / "tests" / "infra" / "tiny_model.py"
HUB = REPO_ROOT / "tests" / "infra" / "hub_standin.py"
HF_CLI = shutil.which("hf") or (str(Path(sys.executable).parent / "hf") if (Path(sys.executable).parent / "hf").exists() else None)

np = pytest.importorskip("numpy")
safetensors_numpy = pytest.importorskip("safetensors.numpy")
tokenizers = pytest.importorskip("tokenizers")


def write(out: Path) -> dict[str, str]:
    subprocess.run([sys.executable, str(TINY_MODEL), str(out)], check=True, capture_output=True, text=True)
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.iterdir())}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tiny") / "model"
    write(out)
    return out


def test_the_same_bytes_every_time(model_dir, tmp_path):
    first = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(model_dir.iterdir())}
    assert write(tmp_path / "again") == first
    assert set(first) == {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                          "tokenizer_config.json"}


def test_weights_are_a_qwen3_checkpoint_matching_the_config(model_dir):
    config = json.loads((model_dir / "config.json").read_text())
    tensors = safetensors_numpy.load_file(str(model_dir / "model.safetensors"))
    hidden, head_dim = config["hidden_size"], config["head_dim"]
    assert config["architectures"] == ["Qwen3ForCausalLM"]
    assert tensors["model.embed_tokens.weight"].shape == (config["vocab_size"], hidden)
    for layer in range(config["num_hidden_layers"]):
        prefix = "model.layers.%d.self_attn." % layer
        assert tensors[prefix + "q_proj.weight"].shape == (config["num_attention_heads"] * head_dim, hidden)
        assert tensors[prefix + "k_proj.weight"].shape == (config["num_key_value_heads"] * head_dim, hidden)
        assert tensors[prefix + "q_norm.weight"].shape == (head_dim,)
    assert "lm_head.weight" not in tensors and config["tie_word_embeddings"]
    assert all(np.isfinite(t).all() for t in tensors.values())
    # CPU attention refuses small head sizes; 2 heads over TP 2 leaves one per rank
    assert head_dim >= 32 and config["num_attention_heads"] % 2 == 0


def test_tokenizer_round_trips_and_the_chat_template_has_the_roles(model_dir):
    tokenizer = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    config = json.loads((model_dir / "config.json").read_text())
    text = "the router sends each request to a healthy engine"
    ids = tokenizer.encode(text).ids
    assert tokenizer.decode(ids) == text
    assert len(ids) < len(text)  # merges were learnt: fewer tokens than bytes
    assert max(ids) < config["vocab_size"]
    assert tokenizer.token_to_id("<|im_end|>") == config["eos_token_id"]
    template = json.loads((model_dir / "tokenizer_config.json").read_text())["chat_template"]
    assert "<|im_start|>" in template and "add_generation_prompt" in template


@pytest.mark.skipif(HF_CLI is None, reason="the `hf` CLI (huggingface_hub, requirements.txt) is not installed")
def test_hub_serves_the_directory_and_hf_download_gets_it_unchanged(model_dir, tmp_path):
    hub = subprocess.Popen([sys.executable, str(HUB), "--host", "127.0.0.1", "--port", "0",
                            "--local-repo", "vllm-fleet-test/tiny-qwen3=%s" % model_dir],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = hub.stdout.readline()
        port = int(line.split("127.0.0.1:")[1].split()[0])
        env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
        env.update({"HF_ENDPOINT": "http://127.0.0.1:%d" % port, "HF_HUB_DISABLE_TELEMETRY": "1",
                    "HF_HOME": str(tmp_path / "home")})
        run = subprocess.run([HF_CLI, "download", "vllm-fleet-test/tiny-qwen3", "--cache-dir", str(tmp_path / "cache")],
                             env=env, capture_output=True, text=True, timeout=120, check=False)
        assert run.returncode == 0, run.stderr
        snapshot = next((tmp_path / "cache" / "models--vllm-fleet-test--tiny-qwen3" / "snapshots").iterdir())
        for source in model_dir.iterdir():
            assert (snapshot / source.name).read_bytes() == source.read_bytes(), source.name
    finally:
        hub.terminate()
        hub.wait(timeout=10)
