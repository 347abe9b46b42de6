"""LLM-shaped load: prompts of a set token length, exact output lengths, dataset replay.

``--prompt-tokens MEAN[,STDDEV]`` makes synthetic prompts of exactly that many tokens of the
model's own tokenizer (a local ``tokenizer.json``: never a download), counted as the engine
counts them (with the special tokens the tokenizer adds, such as a BOS token).
``--output-tokens N[,STDDEV]`` asks a vLLM stage for exactly N tokens: ``max_tokens`` with
``min_tokens`` and ``ignore_eos`` inside ``sampling_parameters`` (NVIDIA's vllm backend passes
that JSON to vLLM's ``SamplingParams``), so every request really generates N.
``--dataset FILE.jsonl`` replays real prompts, one JSON object a line::

    {"prompt": "...", "output_tokens": 64, "image": "cat.png"}

(``text_input`` is accepted for ``prompt``, ``max_tokens`` for ``output_tokens``; an image path
is relative to the file and feeds the model's image input, for the VLM pipelines).
Lengths are drawn from a normal distribution (rounded, at least 1) with ``--seed``: the same
seed gives the same prompts and lengths.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tritonkit.errors import PerfError
from tritonkit.perf.inputs import Array, generate_requests
from tritonkit.signature import ModelSignature, TensorInfo

#: distinct synthetic prompts made (requests cycle through them)
DEFAULT_PROMPTS = 200
#: most vocabulary entries checked for the pool prompts are drawn from
_POOL = 4000
#: inputs of NVIDIA's vllm backend that ask for the engine's own token counts
ENGINE_COUNT_INPUTS = ("return_num_input_tokens", "return_num_output_tokens")


@dataclass(frozen=True)
class Length:
    """A token length: a mean and a standard deviation (0: every request the same)."""

    mean: int
    stddev: float = 0.0

    def __str__(self) -> str:
        return f"{self.mean},{self.stddev:g}" if self.stddev else str(self.mean)

    def draw(self, rng: random.Random) -> int:
        if not self.stddev:
            return self.mean
        return max(1, round(rng.gauss(self.mean, self.stddev)))


def parse_length(text: str, option: str) -> Length:
    """``512`` or ``512,128`` (MEAN[,STDDEV], whole tokens)."""
    parts = [p.strip() for p in text.split(",")]
    try:
        if len(parts) not in (1, 2):
            raise ValueError
        mean = int(parts[0])
        stddev = float(parts[1]) if len(parts) == 2 else 0.0
    except ValueError:
        raise PerfError(
            f"{option} '{text}' is not MEAN[,STDDEV]", hint=f"e.g. {option} 512 or {option} 512,128"
        ) from None
    if mean < 1 or stddev < 0 or math.isnan(stddev):
        raise PerfError(f"{option} '{text}': the mean must be at least 1 and the stddev not negative")
    return Length(mean=mean, stddev=stddev)


@dataclass(frozen=True)
class LlmLoad:
    """How to shape the requests of an LLM benchmark."""

    prompt_tokens: Length | None = None
    output_tokens: Length | None = None
    dataset: str | None = None
    seed: int = 0
    prompts: int = DEFAULT_PROMPTS

    def validate(self) -> None:
        if self.dataset and self.prompt_tokens:
            raise PerfError("give --dataset or --prompt-tokens, not both")
        if self.prompts < 1:
            raise PerfError("the number of distinct prompts must be at least 1")

    def to_dict(self) -> dict[str, Any]:
        return {
            "prompt_tokens": str(self.prompt_tokens) if self.prompt_tokens else None,
            "output_tokens": str(self.output_tokens) if self.output_tokens else None,
            "dataset": self.dataset,
            "seed": self.seed,
        }


@dataclass(frozen=True)
class Prompt:
    """One request's shape: its text, tokens (-1: unknown), asked output tokens, image."""

    text: str
    tokens: int = -1
    output_tokens: int | None = None
    image: bytes | None = None


# --- the tokenizer ----------------------------------------------------------------------------


def find_tokenizer(
    path: str | None, *, model: str, repository: str | None = "model_repository"
) -> Path | None:
    """The local ``tokenizer.json`` to use, or None when there is none to find.

    ``path`` may be the file, a directory holding it (an HF model directory), or a model
    repository in which ``<model>/<version>/hf_model/tokenizer.json`` is looked up (what
    ``tritonkit build`` packs into a vLLM stage). Without ``path`` the default repository
    (``./model_repository``) is searched. Nothing is ever downloaded.
    """
    if path is not None:
        given = Path(path)
        if given.is_file():
            return given
        if not given.is_dir():
            raise PerfError(
                f"--tokenizer {path}: no such file or directory",
                hint="give a local tokenizer.json, an HF model directory or a model repository; "
                "nothing is downloaded",
            )
        found = _tokenizer_in(given, model)
        if found is None:
            raise PerfError(
                f"--tokenizer {path}: no tokenizer.json there, nor in {model}/<version>/hf_model/",
                hint="give the tokenizer.json file itself",
            )
        return found
    if repository and Path(repository).is_dir():
        return _tokenizer_in(Path(repository), model)
    return None


def _tokenizer_in(directory: Path, model: str) -> Path | None:
    if (directory / "tokenizer.json").is_file():
        return directory / "tokenizer.json"
    stage = directory / model
    if stage.is_dir():
        versions = sorted(
            (p for p in stage.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: -int(p.name)
        )
        for version in versions:
            candidate = version / "hf_model" / "tokenizer.json"
            if candidate.is_file():
                return candidate
    return None


class PromptTokenizer:
    """A local tokenizer file that counts prompts as the engine does and makes exact ones."""

    def __init__(self, path: Path) -> None:
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise PerfError(
                "--prompt-tokens needs the 'tokenizers' package", hint="pip install 'tritonkit[tokens]'"
            ) from exc
        try:
            self._tok: Any = Tokenizer.from_file(str(path))
        except Exception as exc:  # the tokenizers library raises plain Exception subclasses
            raise PerfError(f"{path}: not a tokenizer file this library reads: {exc}") from exc
        self.path = path
        self._ids = self._clean_ids()
        if not self._ids:
            raise PerfError(f"{path}: the tokenizer has no ordinary tokens to make prompts of")
        self.added = len(self._tok.encode("", add_special_tokens=True).ids)

    def _clean_ids(self) -> list[int]:
        """Token ids that decode to clean text which encodes back to that one token (byte
        pieces of a multi-byte character and special tokens do not): what prompts are made of.
        At most ``_POOL`` ids, sampled in a fixed order, keep this fast on 150k vocabularies."""
        special = set(self._tok.get_added_tokens_decoder())
        ids = [i for i in range(self._tok.get_vocab_size()) if i not in special]
        random.Random(0).shuffle(ids)
        clean = []
        for i in ids[:_POOL]:
            text = self._tok.decode([i])
            if not text.strip() or "\ufffd" in text:
                continue
            if self._tok.encode(text, add_special_tokens=False).ids == [i]:
                clean.append(i)
        return sorted(clean)

    def count(self, text: str) -> int:
        """Tokens the engine sees for ``text`` (special tokens the tokenizer adds included)."""
        return len(self._tok.encode(text, add_special_tokens=True).ids)

    def make(self, tokens: int, rng: random.Random) -> str:
        """A prompt of exactly ``tokens`` tokens (as :meth:`count` counts them)."""
        if tokens <= self.added:
            raise PerfError(
                f"a prompt of {tokens} tokens: the tokenizer adds {self.added} special tokens to every "
                "prompt by itself",
                hint=f"ask for more than {self.added} prompt tokens",
            )
        want = tokens - self.added
        ids = [rng.choice(self._ids) for _ in range(want)]
        for _ in range(50):
            text = self._tok.decode(ids)
            got = self.count(text)
            if got == tokens:
                return str(text)
            # decoding and re-encoding merges or splits some tokens: re-tokenize, trim or pad
            ids = self._tok.encode(text, add_special_tokens=False).ids
            if got > tokens:
                ids = ids[: max(1, len(ids) - (got - tokens))]
            else:
                ids = ids + [rng.choice(self._ids) for _ in range(tokens - got)]
        raise PerfError(
            f"{self.path}: could not make a prompt of exactly {tokens} tokens in 50 tries",
            hint="this tokenizer does not round-trip random text; use --dataset with real prompts",
        )


# --- making the prompts -----------------------------------------------------------------------


def synthetic_prompts(load: LlmLoad, tokenizer: PromptTokenizer | None) -> list[Prompt]:
    """``load.prompts`` prompts of ``--prompt-tokens`` length (seeded)."""
    rng = random.Random(load.seed)
    prompts = []
    for _ in range(load.prompts):
        out = load.output_tokens.draw(rng) if load.output_tokens else None
        if load.prompt_tokens is None:
            prompts.append(
                Prompt(
                    text="Tell me a story.",
                    tokens=tokenizer.count("Tell me a story.") if tokenizer else -1,
                    output_tokens=out,
                )
            )
            continue
        if tokenizer is None:
            raise PerfError(
                "--prompt-tokens needs the model's tokenizer",
                hint="pass --tokenizer PATH (a tokenizer.json, an HF model directory or the model "
                "repository whose vLLM stage packs hf_model/); nothing is downloaded",
            )
        n = load.prompt_tokens.draw(rng)
        prompts.append(Prompt(text=tokenizer.make(n, rng), tokens=n, output_tokens=out))
    return prompts


def read_dataset(path: Path, load: LlmLoad, tokenizer: PromptTokenizer | None) -> list[Prompt]:
    """The prompts of a JSONL dataset (in file order; ``--output-tokens`` fills lengths it lacks)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise PerfError(f"--dataset {path}: cannot read it: {exc}") from exc
    rng = random.Random(load.seed)
    prompts = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            entry = json.loads(line)
        except ValueError as exc:
            raise PerfError(f"{where}: not a JSON object: {exc}") from exc
        if not isinstance(entry, dict):
            raise PerfError(f"{where}: expected a JSON object with a 'prompt'")
        text = entry.get("prompt", entry.get("text_input"))
        if not isinstance(text, str) or not text:
            raise PerfError(
                f"{where}: no 'prompt' string", hint='e.g. {"prompt": "...", "output_tokens": 64}'
            )
        out = entry.get("output_tokens", entry.get("max_tokens"))
        if out is not None and (not isinstance(out, int) or isinstance(out, bool) or out < 1):
            raise PerfError(f"{where}: 'output_tokens' must be a whole number of at least 1")
        if out is None and load.output_tokens is not None:
            out = load.output_tokens.draw(rng)
        image = None
        if entry.get("image") is not None:
            image_path = path.parent / str(entry["image"])
            try:
                image = image_path.read_bytes()
            except OSError as exc:
                raise PerfError(f"{where}: image {image_path}: cannot read it: {exc}") from exc
        prompts.append(
            Prompt(
                text=text, tokens=tokenizer.count(text) if tokenizer else -1, output_tokens=out, image=image
            )
        )
    if not prompts:
        raise PerfError(f"--dataset {path}: no prompts in it")
    return prompts


# --- prompts -> request tensors ---------------------------------------------------------------


def _scalar(value: Any, info: TensorInfo, dtype: Any) -> Array:
    shape = (1,) * max(len(info.dims), 1)
    return np.array([value], dtype=dtype).reshape(shape)


def _text_input(model: ModelSignature, name: str | None) -> TensorInfo:
    if name is not None:
        info = model.find_input(name)
        if info is None or info.datatype != "BYTES":
            raise PerfError(
                f"model '{model.name}' has no text (BYTES) input '{name}'",
                hint="its inputs are: " + ", ".join(f"{t.name} ({t.datatype})" for t in model.inputs),
            )
        return info
    for preferred in ("text_input", "TEXT_QUERY", "prompt", "PROMPT"):
        info = model.find_input(preferred)
        if info is not None and info.datatype == "BYTES":
            return info
    for info in model.inputs:
        if info.datatype == "BYTES" and info.name != "sampling_parameters":
            return info
    raise PerfError(
        f"model '{model.name}' has no text input to send prompts to",
        hint="LLM load (--prompt-tokens/--output-tokens/--dataset) needs a BYTES input such as text_input",
    )


def _image_input(model: ModelSignature, text: TensorInfo) -> TensorInfo | None:
    for info in model.inputs:
        if info.name != text.name and info.datatype in ("UINT8", "BYTES") and info.variable:
            if info.name in ("sampling_parameters",):
                continue
            return info
    return None


def is_vllm_contract(model: ModelSignature) -> bool:
    """Whether the model takes NVIDIA's vllm backend inputs (text_input + sampling_parameters)."""
    return model.find_input("text_input") is not None and model.find_input("sampling_parameters") is not None


def build_requests(
    model: ModelSignature,
    prompts: Sequence[Prompt],
    *,
    stream: bool,
    text_input: str | None = None,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
) -> list[dict[str, Array]]:
    """One request per prompt, in NVIDIA's vllm backend contract when the model takes it.

    A vLLM stage gets ``sampling_parameters`` with ``max_tokens = min_tokens = N`` and
    ``ignore_eos`` (exactly N tokens), ``stream``, ``exclude_input_in_output`` and the
    ``return_num_*_tokens`` switches it declares (the engine's own counts). Another model gets
    the prompt on its text input and N on an integer ``max_tokens`` input when it has one.
    """
    text = _text_input(model, text_input)
    vllm = is_vllm_contract(model)
    image_info = _image_input(model, text)
    max_tokens_info = next(
        (
            t
            for t in model.inputs
            if t.name.lower() == "max_tokens" and t.datatype.startswith(("INT", "UINT"))
        ),
        None,
    )
    if not vllm and any(p.output_tokens is not None for p in prompts) and max_tokens_info is None:
        raise PerfError(
            f"--output-tokens: model '{model.name}' takes neither vLLM's sampling_parameters nor a "
            "max_tokens input",
            hint="drop --output-tokens for this model (its output length is its own)",
        )
    requests = []
    for p in prompts:
        req: dict[str, Array] = {text.name: _scalar(p.text.encode("utf-8"), text, np.object_)}
        if vllm:
            params: dict[str, Any] = {}
            if p.output_tokens is not None:
                params = {"max_tokens": p.output_tokens, "min_tokens": p.output_tokens, "ignore_eos": True}
            sp = model.find_input("sampling_parameters")
            assert sp is not None  # is_vllm_contract checked it
            req[sp.name] = _scalar(json.dumps(params).encode("utf-8"), sp, np.object_)
            for name, value in (("stream", stream), ("exclude_input_in_output", True)):
                info = model.find_input(name)
                if info is not None:
                    req[name] = _scalar(value, info, np.bool_)
            for name in ENGINE_COUNT_INPUTS:
                info = model.find_input(name)
                if info is not None:
                    req[name] = _scalar(True, info, np.bool_)
        elif p.output_tokens is not None and max_tokens_info is not None:
            from tritonkit._dtypes import TRITON_TO_NUMPY

            req[max_tokens_info.name] = _scalar(
                p.output_tokens, max_tokens_info, TRITON_TO_NUMPY[max_tokens_info.datatype]
            )
        if p.image is not None:
            if image_info is None:
                raise PerfError(f"--dataset has images but model '{model.name}' has no image input")
            if image_info.datatype == "BYTES":
                req[image_info.name] = _scalar(p.image, image_info, np.object_)
            else:
                req[image_info.name] = np.frombuffer(p.image, dtype=np.uint8).copy()
        requests.append(req)
    return _fill_required(model, requests, shapes or {})


def _fill_required(
    model: ModelSignature, requests: list[dict[str, Array]], shapes: Mapping[str, tuple[int, ...]]
) -> list[dict[str, Array]]:
    """Generated values for required inputs the prompts do not give (e.g. a pipeline's image)."""
    missing = tuple(t for t in model.inputs if not t.optional and all(t.name not in r for r in requests))
    if not missing:
        return requests
    others = ModelSignature(
        name=model.name,
        version=model.version,
        max_batch_size=model.max_batch_size,
        inputs=missing,
        outputs=(),
    )
    filler = generate_requests(others, shapes=shapes)[0]
    return [{**filler, **r} for r in requests]


def prompt_counts(prompts: Sequence[Prompt]) -> tuple[tuple[int, int], ...]:
    """(prompt tokens or -1, asked output tokens or -1) per request, for the sender's records."""
    return tuple((p.tokens, p.output_tokens if p.output_tokens is not None else -1) for p in prompts)
