"""A tiny Llama-style language model made in code: a Hugging Face directory vLLM can serve.

Nothing is downloaded. ``make_tiny_llm(out_dir)`` trains a byte-level BPE tokenizer on the small
corpus below (``tokenizers``, offline; at most 1,000 tokens, 590 from this corpus), builds a
``LlamaConfig`` of two layers (hidden 128, four attention heads of 32, two KV heads: vLLM's CPU
attention takes head sizes 32, 64, 80, ... and refuses 16), initialises its weights at random
from a fixed seed and writes both with ``save_pretrained``. The same seed writes the same
files, byte for byte.

The weights are random, so the text it generates is nonsense: it exists to exercise a real LLM
engine (tokenising, KV cache, batching, streaming, cancellation), not to say anything.

Run it as a script to write a directory: ``python ensembles/llm/tiny_llm.py OUT_DIR``. Needs the
``llm`` extra (torch, transformers, tokenizers).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

#: what the tokenizer learns its merges from: plain English about scenes, colours and pipelines
CORPUS = """\
The image shows a red apple on a wooden table near the window.
A blue sky over green hills, with white clouds drifting to the east.
The pipeline reads an image, finds the salient patches and describes them in words.
Triton serves the model; the engine batches the requests and streams the tokens back.
A grey cat sleeps on the black chair while the yellow lamp lights the room.
The query asks what colour the car is, and the decoder answers: the car is orange.
Texture, colour and shape become features; the features become a prompt; the prompt becomes text.
An orange sunset over the purple sea, a brown boat and a pink sail.
Every request carries a prompt and sampling parameters: temperature, top p and max tokens.
The scene is a kitchen: a white cup, a silver spoon and a loaf of bread on the counter.
Relevance realisation weighs each patch of the image against the question that was asked.
The forest is dark green in the morning and golden in the evening light.
"""

#: the chat template: one turn per message, the assistant's turn opened when asked to generate.
#: With ``tools`` it speaks the Hermes/Qwen tool format: the tools listed in a system turn inside
#: <tools></tools>, each call an assistant writes as <tool_call>{"name", "arguments"}</tool_call>,
#: each tool message's content inside <tool_response></tool_response>.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% if tools %}<|system|>\nYou may call functions. Write each call as <tool_call>\n"
    '{"name": <function-name>, "arguments": <arguments-object>}\n</tool_call>\n<tools>\n'
    "{% for tool in tools %}{{ tool | tojson }}\n{% endfor %}</tools>{{ eos_token }}\n{% endif %}"
    "{% for message in messages %}<|{{ message['role'] }}|>\n"
    "{% if message['role'] == 'tool' %}<tool_response>\n{{ message['content'] }}\n</tool_response>"
    "{% elif message['content'] %}{{ message['content'] }}{% endif %}"
    "{% for call in message['tool_calls'] or [] %}<tool_call>\n"
    '{"name": {{ call[\'function\'][\'name\'] | tojson }}, '
    '"arguments": {{ call[\'function\'][\'arguments\'] | tojson }}}\n</tool_call>{% endfor %}'
    "{{ eos_token }}\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)

VOCAB_SIZE = 1000
UNK, BOS, EOS = "<unk>", "<s>", "</s>"
#: the context the model takes (its max_position_embeddings; vLLM's max_model_len at most this)
MAX_POSITIONS = 2048


def _train_tokenizer(vocab_size: int) -> object:
    """A byte-level BPE (every byte is a token, so any text encodes) trained on CORPUS."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE(unk_token=UNK))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=1,
        special_tokens=[UNK, BOS, EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # Repeating the corpus changes no merge order; each line is one training text.
    tokenizer.train_from_iterator(CORPUS.splitlines() * 4, trainer=trainer)
    bos_id = tokenizer.token_to_id(BOS)
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, bos_id)]
    )
    return tokenizer


def make_tiny_llm(
    out_dir: str | Path, *, seed: int = 0, vocab_size: int = VOCAB_SIZE, max_positions: int = MAX_POSITIONS
) -> Path:
    """Write the tiny model (config, safetensors weights, tokenizer) to ``out_dir``; return it.

    ``out_dir`` is replaced as a whole: the files are written to a temporary sibling first and
    renamed into place, so a reader never sees half a model.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    raw = _train_tokenizer(vocab_size)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw, bos_token=BOS, eos_token=EOS, unk_token=UNK, model_max_length=max_positions
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=max_positions,
        rms_norm_eps=1e-5,
        # Wider than Llama's 0.02: random weights then give peaked logits, so greedy decoding
        # has one clear best token per step and batched kernels agree with single runs.
        initializer_range=0.5,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=None,
        torch_dtype="float32",
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).eval()
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        model.save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging)
        # Readable by whoever serves it (a container's user, a packed repository), like a checkout.
        staging.chmod(0o755)
        for path in staging.iterdir():
            path.chmod(0o644)
        if out.exists():
            shutil.rmtree(out)
        os.replace(staging, out)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return out


def digest(model_dir: str | Path) -> str:
    """A sha256 over every file's name and bytes: equal digests mean equal models."""
    sha = hashlib.sha256()
    for path in sorted(Path(model_dir).rglob("*")):
        if path.is_file():
            sha.update(path.relative_to(model_dir).as_posix().encode())
            sha.update(path.read_bytes())
    return sha.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    out = make_tiny_llm(args.out_dir, seed=args.seed)
    print(json.dumps({"model": str(out), "sha256": digest(out)}))


if __name__ == "__main__":
    main()
