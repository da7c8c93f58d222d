"""Write the tiny test model the real vLLM CPU engine serves in the integration tests.

A real architecture at toy size, so that vLLM loads it through its ordinary code
path: Qwen3 (hidden 128, 2 layers, 2 attention heads of head_dim 64, 1 KV head,
tied embeddings), float32 safetensors (served as bfloat16), and a byte-level BPE
tokenizer trained here with ``tokenizers`` on a fixed corpus, with a ChatML chat
template. Everything is seeded, so every machine writes the same bytes: the Hub
stand-in serves the directory and the weights role downloads it like any model.

The weights are random: the model answers with well-formed, meaningless tokens.

Run: ``python tests/infra/tiny_model.py OUT_DIR`` (writes OUT_DIR/*, prints a summary).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

SEED = 20261203
VOCAB_SIZE = 512
HIDDEN = 128
INTERMEDIATE = 256
LAYERS = 2
HEADS = 2
KV_HEADS = 1
HEAD_DIM = 64  # CPU attention refuses small head sizes (16)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
WORDS = ("the fleet serves a model on every host while the router sends each request to a healthy "  # noqa: SIM905 (a sentence, not 41 quoted words)
         "engine prefill decode cache tokens weights systemd unit restart group rank head worker "
         "node network port health metrics upgrade rollback image registry download verify").split()


def training_corpus() -> list[str]:
    """Deterministic sentences: enough text for the BPE trainer to fill VOCAB_SIZE."""
    rng = np.random.default_rng(SEED)
    lines = []
    for _sentence in range(4000):
        picks = rng.integers(0, len(WORDS), size=int(rng.integers(4, 12)))
        lines.append(" ".join(WORDS[i] for i in picks) + ".")
    return lines


def build_tokenizer() -> Tokenizer:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(training_corpus(), trainer=trainer)
    return tokenizer


def build_weights() -> dict[str, np.ndarray]:
    """Qwen3ForCausalLM tensors (Hugging Face names), small random normals, norms at one."""
    rng = np.random.default_rng(SEED)

    def normal(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    def ones(size: int) -> np.ndarray:
        return np.ones(size, dtype=np.float32)

    tensors = {"model.embed_tokens.weight": normal(VOCAB_SIZE, HIDDEN), "model.norm.weight": ones(HIDDEN)}
    for layer in range(LAYERS):
        prefix = "model.layers.%d." % layer
        tensors.update({
            prefix + "input_layernorm.weight": ones(HIDDEN),
            prefix + "post_attention_layernorm.weight": ones(HIDDEN),
            prefix + "self_attn.q_proj.weight": normal(HEADS * HEAD_DIM, HIDDEN),
            prefix + "self_attn.k_proj.weight": normal(KV_HEADS * HEAD_DIM, HIDDEN),
            prefix + "self_attn.v_proj.weight": normal(KV_HEADS * HEAD_DIM, HIDDEN),
            prefix + "self_attn.o_proj.weight": normal(HIDDEN, HEADS * HEAD_DIM),
            prefix + "self_attn.q_norm.weight": ones(HEAD_DIM),
            prefix + "self_attn.k_norm.weight": ones(HEAD_DIM),
            prefix + "mlp.gate_proj.weight": normal(INTERMEDIATE, HIDDEN),
            prefix + "mlp.up_proj.weight": normal(INTERMEDIATE, HIDDEN),
            prefix + "mlp.down_proj.weight": normal(HIDDEN, INTERMEDIATE),
        })
    return tensors


def model_config(tokenizer: Tokenizer) -> dict:
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "hidden_act": "silu",
        "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "tie_word_embeddings": True,
        "use_sliding_window": False,
        "sliding_window": None,
        "max_window_layers": LAYERS,
        "vocab_size": VOCAB_SIZE,
        "bos_token_id": tokenizer.token_to_id("<|endoftext|>"),
        "eos_token_id": tokenizer.token_to_id("<|im_end|>"),
        "torch_dtype": "bfloat16",
        "_vllm_fleet_test": "tiny random Qwen3 for the integration tests (tests/infra/tiny_model.py)",
    }


def write_model(out: Path) -> dict[str, int]:
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer()
    tokenizer.save(str(out / "tokenizer.json"))
    eos = "<|im_end|>"
    files = {
        "config.json": model_config(tokenizer),
        "generation_config.json": {"eos_token_id": tokenizer.token_to_id(eos), "max_new_tokens": 16},
        "tokenizer_config.json": {
            "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 2048,
            "eos_token": eos, "pad_token": "<|endoftext|>", "bos_token": None, "unk_token": None,
            "chat_template": CHAT_TEMPLATE,
        },
    }
    for name, body in files.items():
        (out / name).write_text(json.dumps(body, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    save_file(build_weights(), str(out / "model.safetensors"), metadata={"format": "pt"})
    return {p.name: p.stat().st_size for p in sorted(out.iterdir())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("out", type=Path, help="directory to write the model into")
    sizes = write_model(parser.parse_args(argv).out)
    print("tiny-model: %s" % ", ".join("%s %d B" % item for item in sizes.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
