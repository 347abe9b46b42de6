"""Files a vLLM stage's tests build from: a Hugging Face model directory and a LoRA adapter.

The build only copies them and the validator only reads their names and JSON, so they are
written by hand here (no weights, no download); a real tiny model is made by the engine tests.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

HF_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "vocab_size": 1000,
    "hidden_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "max_position_embeddings": 512,
}


def write_hf_model(path: Path, *, tokenizer: bool = True, config: bool = True) -> Path:
    """A Hugging Face model directory as save_pretrained() lays it out (weights are a stub)."""
    path.mkdir(parents=True, exist_ok=True)
    if config:
        (path / "config.json").write_text(json.dumps(HF_CONFIG, indent=2))
    (path / "model.safetensors").write_bytes(b"stub weights")
    if tokenizer:
        (path / "tokenizer.json").write_text('{"version": "1.0", "model": {"type": "BPE"}}')
        (path / "tokenizer_config.json").write_text('{"bos_token": "<s>", "eos_token": "</s>"}')
    return path


def write_lora(path: Path) -> Path:
    """A PEFT LoRA adapter directory (adapter_config.json + stub weights)."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "adapter_config.json").write_text(
        json.dumps({"peft_type": "LORA", "r": 8, "lora_alpha": 16, "target_modules": ["q_proj"]})
    )
    (path / "adapter_model.safetensors").write_bytes(b"stub adapter")
    return path


def vllm_spec(tmp: Path, body: str = "", *, name: str = "spec.yaml") -> Path:
    """A spec with one vLLM stage 'decoder' on ./tiny_llm (``body`` adds keys to the stage)."""
    write_hf_model(tmp / "tiny_llm")
    extra = textwrap.indent(textwrap.dedent(body).strip(), " " * 4) if body.strip() else ""
    text = textwrap.dedent(
        """\
        name: llm
        models:
          - name: decoder
            backend: vllm
            model: tiny_llm
        """
    ) + (extra + "\n" if extra else "")
    path = tmp / name
    path.write_text(text)
    return path
