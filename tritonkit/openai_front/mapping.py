"""Which tensors of a Triton model an OpenAI request fills, per kind of model.

Two kinds of model stand behind the front:

- an **LLM stage**: a model with the vLLM backend's tensor contract (``text_input``, ``stream``,
  ``sampling_parameters``, ``exclude_input_in_output``, the ``return_*`` flags; outputs
  ``text_output`` and the additional outputs). It is recognised by that contract, whatever its
  backend is called, and takes the rendered prompt and vLLM's sampling parameters;
- a **pipeline** whose config carries the mapping as config ``parameters`` (``openai.text_input``,
  ``openai.image_input``, ``openai.max_tokens_input``, ``openai.text_output``, ``openai.stream``):
  the user's text, images and ``max_tokens`` go to the named inputs, the named output is the
  answer. A pipeline spec's ``openai:`` key is turned into those parameters by
  :func:`openai_parameters` at build time, so a front before a remote Triton finds the mapping in
  the server's model config.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from tritonkit.errors import SpecError
from tritonkit.signature import ModelSignature

__all__ = [
    "LLM_STAGE_INPUTS",
    "MAPPING_KEYS",
    "PARAMETER_PREFIX",
    "USAGE_KEYS",
    "LlmEngine",
    "PipelineMapping",
    "llm_engine",
    "openai_parameters",
    "pipeline_mapping",
]

#: config parameter names start with this: ``openai.text_input`` ...
PARAMETER_PREFIX = "openai."
#: the keys of a spec's ``openai:`` mapping -> whether each is required
MAPPING_KEYS: dict[str, bool] = {
    "text_input": True,
    "text_output": True,
    "image_input": False,
    "max_tokens_input": False,
    "stream": False,
    "prompt_tokens_output": False,
    "completion_tokens_output": False,
    "finish_reason_output": False,
}
#: the inputs that make a model an LLM stage (the vLLM backend's contract)
LLM_STAGE_INPUTS = ("text_input", "stream", "sampling_parameters")

#: the outputs through which a pipeline relays its LLM stage's own counts and finish reason
USAGE_KEYS = ("prompt_tokens_output", "completion_tokens_output", "finish_reason_output")
_TENSOR_KEYS = ("text_input", "text_output", "image_input", "max_tokens_input", *USAGE_KEYS)
_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")


@dataclass(frozen=True)
class PipelineMapping:
    """A pipeline's declared mapping: which input takes what, which output is the answer."""

    text_input: str
    text_output: str
    image_input: str | None = None
    max_tokens_input: str | None = None
    #: the pipeline answers with a stream of responses (decoupled); else one response
    stream: bool = True
    #: outputs relaying the LLM stage's counts (INT32/UINT32 [1], totals) and finish reason
    #: (BYTES [1]); a stream carries them with its last piece
    prompt_tokens_output: str | None = None
    completion_tokens_output: str | None = None
    finish_reason_output: str | None = None

    @property
    def counts_tokens(self) -> bool:
        """True when the pipeline relays its LLM stage's prompt and completion token counts."""
        return self.prompt_tokens_output is not None and self.completion_tokens_output is not None

    @property
    def usage_outputs(self) -> tuple[str, ...]:
        """The count and finish-reason outputs to ask for besides the text."""
        names = (self.prompt_tokens_output, self.completion_tokens_output, self.finish_reason_output)
        return tuple(n for n in names if n is not None)


@dataclass(frozen=True)
class LlmEngine:
    """What an LLM stage can return besides text (its optional ``return_*`` inputs)."""

    token_counts: bool
    logprobs: bool
    finish_reason: bool


def _tensor_name(key: str, value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip() or value != value.strip():
        raise SpecError(
            f"{where}: openai.{key} must name a tensor of the model, got {value!r}",
            hint=f"e.g. openai: {{{key}: TEXT_QUERY}}",
        )
    return value


def _stream_flag(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise SpecError(
        f"{where}: openai.stream must be true or false, got {value!r}", hint="openai: {stream: true}"
    )


def openai_parameters(
    mapping: Any,
    *,
    model: str = "",
    inputs: Collection[str] | None = None,
    outputs: Collection[str] | None = None,
    decoupled: bool | None = None,
) -> dict[str, str]:
    """A spec's ``openai:`` mapping as the config parameters the front reads.

    ``{"text_input": "TEXT_QUERY", "text_output": "GENERATED_TEXT", "stream": True}`` ->
    ``{"openai.text_input": "TEXT_QUERY", "openai.text_output": "GENERATED_TEXT",
    "openai.stream": "true"}``. When the model's ``inputs``/``outputs`` names (and whether it is
    ``decoupled``) are given, the named tensors must exist and ``stream`` must match. Raises
    :class:`SpecError` naming the model and the key.
    """
    where = f"model '{model}'" if model else "the openai mapping"
    if not isinstance(mapping, Mapping):
        raise SpecError(
            f"{where}: openai must be a mapping, got {type(mapping).__name__}",
            hint="openai: {text_input: TEXT_QUERY, text_output: GENERATED_TEXT}",
        )
    unknown = sorted(str(k) for k in mapping if k not in MAPPING_KEYS)
    if unknown:
        raise SpecError(
            f"{where}: unknown openai key(s) {', '.join(map(repr, unknown))}",
            hint=f"the keys are {', '.join(MAPPING_KEYS)}",
        )
    missing = [k for k, required in MAPPING_KEYS.items() if required and k not in mapping]
    if missing:
        raise SpecError(
            f"{where}: the openai mapping lacks {', '.join(missing)}",
            hint="name the input that takes the user's text and the output that holds the answer",
        )
    params: dict[str, str] = {}
    for key in _TENSOR_KEYS:
        if key in mapping and mapping[key] is not None:
            params[PARAMETER_PREFIX + key] = _tensor_name(key, mapping[key], where)
    stream = _stream_flag(mapping["stream"], where) if "stream" in mapping else bool(decoupled)
    if decoupled is not None and stream != decoupled:
        raise SpecError(
            f"{where}: openai.stream is {str(stream).lower()} but the model is "
            f"{'' if decoupled else 'not '}decoupled",
            hint="openai.stream says whether the model answers with a stream of responses",
        )
    params[PARAMETER_PREFIX + "stream"] = "true" if stream else "false"
    checks = (
        ("text_input", inputs),
        ("image_input", inputs),
        ("max_tokens_input", inputs),
        ("text_output", outputs),
        *((key, outputs) for key in USAGE_KEYS),
    )
    for key, names in checks:
        value = params.get(PARAMETER_PREFIX + key)
        if value is not None and names is not None and value not in names:
            side = "output" if key.endswith("output") else "input"
            raise SpecError(
                f"{where}: openai.{key} names {side} '{value}', which the model does not have",
                hint=f"its {side}s are {', '.join(sorted(names)) or '(none)'}",
            )
    inputs_used = [
        params[PARAMETER_PREFIX + k]
        for k in ("text_input", "image_input", "max_tokens_input")
        if PARAMETER_PREFIX + k in params
    ]
    if len(set(inputs_used)) != len(inputs_used):
        raise SpecError(f"{where}: the openai mapping names one input twice: {inputs_used}")
    counts = [PARAMETER_PREFIX + k in params for k in USAGE_KEYS[:2]]
    if any(counts) and not all(counts):
        raise SpecError(
            f"{where}: the openai mapping names one token count output without the other",
            hint="name both prompt_tokens_output and completion_tokens_output (usage needs both)",
        )
    outputs_used = [
        params[PARAMETER_PREFIX + k] for k in ("text_output", *USAGE_KEYS) if PARAMETER_PREFIX + k in params
    ]
    if len(set(outputs_used)) != len(outputs_used):
        raise SpecError(f"{where}: the openai mapping names one output twice: {outputs_used}")
    return params


def _parameter(params: Mapping[str, Any], key: str) -> str | None:
    raw = params.get(PARAMETER_PREFIX + key)
    if raw is None:
        return None
    if isinstance(raw, Mapping):  # Triton's JSON: {"string_value": "..."} (gRPC: "stringValue")
        raw = raw.get("string_value", raw.get("stringValue"))
    return None if raw is None else str(raw)


def pipeline_mapping(config: Mapping[str, Any], signature: ModelSignature) -> PipelineMapping | None:
    """The mapping a model config carries (as Triton returns the config), or None without one.

    Raises :class:`SpecError` when the parameters are there but wrong (a front should say so
    rather than hide the model).
    """
    cfg = config.get("config", config)
    params = cfg.get("parameters") or {}
    if not any(str(k).startswith(PARAMETER_PREFIX) for k in params):
        return None
    mapping: dict[str, Any] = {}
    for key in MAPPING_KEYS:
        value = _parameter(params, key)
        if value is not None:
            mapping[key] = value
    checked = openai_parameters(
        mapping,
        model=signature.name,
        inputs=[t.name for t in signature.inputs],
        outputs=[t.name for t in signature.outputs],
    )
    return PipelineMapping(
        text_input=checked[PARAMETER_PREFIX + "text_input"],
        text_output=checked[PARAMETER_PREFIX + "text_output"],
        image_input=checked.get(PARAMETER_PREFIX + "image_input"),
        max_tokens_input=checked.get(PARAMETER_PREFIX + "max_tokens_input"),
        stream=checked[PARAMETER_PREFIX + "stream"] == "true",
        prompt_tokens_output=checked.get(PARAMETER_PREFIX + "prompt_tokens_output"),
        completion_tokens_output=checked.get(PARAMETER_PREFIX + "completion_tokens_output"),
        finish_reason_output=checked.get(PARAMETER_PREFIX + "finish_reason_output"),
    )


def llm_engine(signature: ModelSignature) -> LlmEngine | None:
    """The LLM stage's abilities when ``signature`` follows the vLLM backend's contract, else None."""
    names = {t.name for t in signature.inputs}
    outputs = {t.name for t in signature.outputs}
    if not set(LLM_STAGE_INPUTS) <= names or "text_output" not in outputs:
        return None
    return LlmEngine(
        token_counts={"return_num_input_tokens", "return_num_output_tokens"} <= names,
        logprobs="return_logprobs" in names,
        finish_reason="return_finish_reason" in names,
    )
