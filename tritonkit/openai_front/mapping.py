"""Which tensors of a Triton model an OpenAI request fills, per kind of model.

Two kinds of model stand behind the front:

- an **LLM stage**: a model with the vLLM backend's tensor contract (``text_input``, ``stream``,
  ``sampling_parameters``, ``exclude_input_in_output``, the ``return_*`` flags; outputs
  ``text_output`` and the additional outputs). It is recognised by that contract, whatever its
  backend is called, and takes the rendered prompt and vLLM's sampling parameters;
- a **pipeline** whose config carries the mapping as config ``parameters`` (``openai.text_input``,
  ``openai.image_input``, ``openai.max_tokens_input``, ``openai.sampling_parameters_input``,
  ``openai.text_output``, ``openai.stream``): the user's text, images, ``max_tokens`` and (when
  declared) the other sampling fields as vLLM's ``sampling_parameters`` JSON go to the named
  inputs, the named output is the answer. A pipeline spec's ``openai:`` key is turned into those parameters by
  :func:`~tritonkit.openai_key.openai_parameters` at build time (a leaf the spec imports too), so a
  front before a remote Triton finds the mapping in the server's model config.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tritonkit.openai_key import MAPPING_KEYS, PARAMETER_PREFIX, openai_parameters
from tritonkit.signature import ModelSignature

__all__ = [
    "LLM_STAGE_INPUTS",
    "MAPPING_KEYS",
    "PARAMETER_PREFIX",
    "LlmEngine",
    "PipelineMapping",
    "llm_engine",
    "openai_parameters",
    "pipeline_mapping",
]

#: the inputs that make a model an LLM stage (the vLLM backend's contract)
LLM_STAGE_INPUTS = ("text_input", "stream", "sampling_parameters")


@dataclass(frozen=True)
class PipelineMapping:
    """A pipeline's declared mapping: which input takes what, which output is the answer."""

    text_input: str
    text_output: str
    image_input: str | None = None
    max_tokens_input: str | None = None
    #: takes the request's sampling fields as vLLM's ``sampling_parameters`` JSON (BYTES [1]) and
    #: hands them to its LLM stage; None: the pipeline fixes its own sampling
    sampling_parameters_input: str | None = None
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
        sampling_parameters_input=checked.get(PARAMETER_PREFIX + "sampling_parameters_input"),
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
