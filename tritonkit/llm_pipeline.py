"""The LLM-decoder pipelines' front-door contract: what a caller needs to compose one itself (the
prompt model unary, then the LLM stage's stream straight from Triton).

The shipped LLM-decoder pipelines (``vlm_llm``, ``arr_coc_llm``: ``ensembles/common/llm_front.py``)
put a decoupled Python front door before their LLM stage. On Triton 2.51 that front reads one
engine stream per model instance (a stub process each: ``bls_streams.py`` says why), so a
pipeline served through it streams as many answers at once as it has instances, whatever its
engine batches. Its config carries what the front door does (``PROMPT_MODEL``,
``PROMPT_INPUTS``, ``LLM_MODEL``, ``SAMPLING_PARAMETERS``, ``DEFAULT_MAX_TOKENS``,
``MAX_TOKENS_LIMIT``), so a caller can do the same itself: ask the prompt model (a unary
ensemble of the vision stages), then stream the LLM stage with the prompt. No stub holds a
stream, the number of answers at once is the engine's own limit (vLLM ``max_num_seqs``), and a
caller that leaves cancels the engine's request directly.

This leaf module is the one reader of that contract (:func:`composed_pipeline`) and of the rules
the front door applies to a request's own ``MAX_TOKENS`` and ``SAMPLING_PARAMETERS`` (untrusted: a
refusal is an :class:`~tritonkit.errors.InputMismatchError`, the client's fault). Its users:
``client/composed.py`` (one answer for tritonkit's client and CLI), the OpenAI front
(``openai_front/generate.py``) and the validator, which reports each pipeline's concurrency
ceiling.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tritonkit.errors import InputMismatchError

__all__ = [
    "ENGINE_OUTPUTS",
    "PROMPT_OUTPUT",
    "REQUEST_SAMPLING_KEYS",
    "TEXT_OUTPUT",
    "ComposedPipeline",
    "composed_pipeline",
]

#: the prompt model's output, and the front door's text output
PROMPT_OUTPUT = "PROMPT"
TEXT_OUTPUT = "GENERATED_TEXT"
#: the front door's usage outputs -> (the engine's flag input, the engine's output)
ENGINE_OUTPUTS = {
    "PROMPT_TOKENS": ("return_num_input_tokens", "num_input_tokens"),
    "COMPLETION_TOKENS": ("return_num_output_tokens", "num_output_tokens"),
    "FINISH_REASON": ("return_finish_reason", "finish_reason"),
}
#: what a request's own SAMPLING_PARAMETERS may set (llm_front.py's REQUEST_SAMPLING_KEYS; a
#: unit test holds the two equal)
REQUEST_SAMPLING_KEYS = frozenset(
    {"temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty",
     "repetition_penalty", "seed", "stop", "stop_token_ids", "min_tokens", "ignore_eos",
     "logit_bias", "structured_outputs", "guided_decoding"}
)  # fmt: skip
MAX_SAMPLING_BYTES = 1 << 20
_DEFAULT_SAMPLING: Mapping[str, Any] = {"temperature": 0}


@dataclass(frozen=True)
class ComposedPipeline:
    """What an LLM-decoder pipeline's front door does, read from its config."""

    name: str
    prompt_model: str
    prompt_inputs: tuple[str, ...]
    llm_model: str
    sampling: Mapping[str, Any] = field(default_factory=lambda: dict(_DEFAULT_SAMPLING))
    default_max_tokens: int = 48
    max_tokens_limit: int = 256
    #: the front door's optional inputs for the request's own limit and sampling (None: absent)
    max_tokens_input: str | None = None
    sampling_input: str | None = None
    #: answers the front door itself streams at once (its instances: one stream each on 2.51)
    front_instances: int = 1

    def max_tokens(self, asked: int | None) -> int:
        """The tokens to generate: ``asked`` held to the pipeline's limit, else its default."""
        if asked is None:
            return self.default_max_tokens
        if asked < 1:
            raise InputMismatchError(f"{self.name}: MAX_TOKENS must be at least 1, got {asked}")
        if asked > self.max_tokens_limit:
            raise InputMismatchError(
                f"MAX_TOKENS is {asked}; this pipeline generates at most {self.max_tokens_limit}"
            )
        return asked

    def request_sampling(self, own: Mapping[str, Any] | str | bytes | None) -> dict[str, Any]:
        """A request's own sampling (a JSON object, or its text), checked as the front door checks
        it; ``{}`` when there is none."""
        if own is None:
            return {}
        if isinstance(own, (str, bytes)):
            data = own.encode("utf-8") if isinstance(own, str) else own
            if len(data) > MAX_SAMPLING_BYTES:
                raise InputMismatchError(
                    f"SAMPLING_PARAMETERS is {len(data)} bytes; at most {MAX_SAMPLING_BYTES}"
                )
            try:
                own = json.loads(data.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as exc:
                raise InputMismatchError(f"SAMPLING_PARAMETERS is not JSON: {exc}") from None
        if not isinstance(own, Mapping):
            raise InputMismatchError(f"SAMPLING_PARAMETERS must be a JSON object, got {type(own).__name__}")
        if "max_tokens" in own:
            raise InputMismatchError("SAMPLING_PARAMETERS may not set max_tokens: send it in MAX_TOKENS")
        unknown = sorted(str(key) for key in own if key not in REQUEST_SAMPLING_KEYS)
        if unknown:
            takes = ", ".join(sorted(REQUEST_SAMPLING_KEYS))
            raise InputMismatchError(f"SAMPLING_PARAMETERS takes {takes}; not {', '.join(unknown)}")
        return dict(own)

    def engine_sampling(self, own: Mapping[str, Any], limit: int) -> dict[str, Any]:
        """The LLM stage's ``sampling_parameters``: the pipeline's, the request's over them, and
        the limit."""
        return {**self.sampling, **own, "max_tokens": limit}

    def prompt_request(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """The prompt model's inputs among a request's (the pipeline's names; an optional one the
        request left out stays out, as the front door leaves it: the prompt model judges)."""
        return {name: inputs[name] for name in self.prompt_inputs if name in inputs}


def _text(params: Mapping[str, Any], key: str) -> str | None:
    raw = params.get(key)
    if isinstance(raw, Mapping):  # Triton's JSON: {"string_value": ...} (gRPC: "stringValue")
        raw = raw.get("string_value", raw.get("stringValue"))
    return None if raw is None or str(raw) == "" else str(raw)


def composed_pipeline(config: Mapping[str, Any]) -> ComposedPipeline | None:
    """The composition a model config (as Triton returns it) carries, or None when the model is
    not an LLM-decoder pipeline's front door (or its parameters do not read as one: the model is
    then served as it is)."""
    cfg = config.get("config", config)
    params = cfg.get("parameters") or {}
    prompt_model, llm_model = _text(params, "PROMPT_MODEL"), _text(params, "LLM_MODEL")
    inputs = tuple(n.strip() for n in (_text(params, "PROMPT_INPUTS") or "").split(",") if n.strip())
    if not prompt_model or not llm_model or not inputs:
        return None
    try:
        sampling = json.loads(_text(params, "SAMPLING_PARAMETERS") or json.dumps(_DEFAULT_SAMPLING))
        default = int(float(_text(params, "DEFAULT_MAX_TOKENS") or 48))
        limit = int(float(_text(params, "MAX_TOKENS_LIMIT") or 256))
    except ValueError:
        return None
    if not isinstance(sampling, dict) or "max_tokens" in sampling or not 1 <= default <= limit:
        return None
    names = {str(i.get("name")) for i in cfg.get("input") or []}
    instances = sum(max(int(g.get("count") or 1), 1) for g in cfg.get("instance_group") or [{}])
    return ComposedPipeline(
        name=str(cfg.get("name", "")),
        prompt_model=prompt_model,
        prompt_inputs=inputs,
        llm_model=llm_model,
        sampling=sampling,
        default_max_tokens=default,
        max_tokens_limit=limit,
        max_tokens_input="MAX_TOKENS" if "MAX_TOKENS" in names else None,
        sampling_input="SAMPLING_PARAMETERS" if "SAMPLING_PARAMETERS" in names else None,
        front_instances=instances,
    )


