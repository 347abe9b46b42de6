"""A pipeline spec's ``openai:`` key: its keys, and the config parameters it becomes.

A leaf (it depends on :mod:`tritonkit.errors` alone): the spec parser
(:mod:`tritonkit.repository.spec`) writes the parameters at build time and the OpenAI front
(:mod:`tritonkit.openai_front.mapping`) reads them back, without either loading the other.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from tritonkit.errors import SpecError

__all__ = ["MAPPING_KEYS", "PARAMETER_PREFIX", "USAGE_KEYS", "openai_parameters"]

#: config parameter names start with this: ``openai.text_input`` ...
PARAMETER_PREFIX = "openai."
#: the keys of a spec's ``openai:`` mapping -> whether each is required
MAPPING_KEYS: dict[str, bool] = {
    "text_input": True,
    "text_output": True,
    "image_input": False,
    "max_tokens_input": False,
    "sampling_parameters_input": False,
    "stream": False,
    "prompt_tokens_output": False,
    "completion_tokens_output": False,
    "finish_reason_output": False,
}
#: the outputs through which a pipeline relays its LLM stage's own counts and finish reason
USAGE_KEYS = ("prompt_tokens_output", "completion_tokens_output", "finish_reason_output")
#: the inputs the front fills (the sampling input takes vLLM's sampling parameters as JSON)
_INPUT_KEYS = ("text_input", "image_input", "max_tokens_input", "sampling_parameters_input")
_TENSOR_KEYS = (*_INPUT_KEYS, "text_output", *USAGE_KEYS)
_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")


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
        *((key, inputs) for key in _INPUT_KEYS),
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
    inputs_used = [params[PARAMETER_PREFIX + k] for k in _INPUT_KEYS if PARAMETER_PREFIX + k in params]
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
