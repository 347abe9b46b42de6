"""Inputs of an LLM stage served by a vLLM backend (NVIDIA's ``vllm`` backend, or tritonkit's local
one, which follows the same contract), as one dict for ``TritonClient.stream``.

The contract (NVIDIA vllm_backend ``README.md`` and ``docs/additional_outputs.md``): ``text_input``
BYTES [1] (the prompt), ``stream`` BOOL [1] (one response per generation step, else one response
holding the whole answer), ``sampling_parameters`` BYTES [1] (a JSON object the backend hands to
vLLM's ``SamplingParams``), ``exclude_input_in_output`` BOOL [1], and one ``return_<output>``
BOOL [1] per additional output (``finish_reason``, ``cumulative_logprob``, ``logprobs``,
``num_input_tokens``, ``num_output_tokens``; NVIDIA's backend has them since r24.12).
``num_output_tokens`` counts the tokens of that response only, so their sum is the answer's length.

The stage is decoupled whatever ``stream`` says: it is always called through a stream
(``client.stream(model, llm_inputs(...))``); ``stream=False`` makes that stream one response.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from tritonkit.errors import InputMismatchError

__all__ = ["LLM_OUTPUTS", "llm_inputs", "sampling_json"]

#: the additional outputs a vLLM stage sends when the request's ``return_<name>`` input is true
LLM_OUTPUTS = ("finish_reason", "cumulative_logprob", "logprobs", "num_input_tokens", "num_output_tokens")


def _reject_non_finite(value: Any, where: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise InputMismatchError(
            f"sampling parameter {where} is {value}: JSON has no such number",
            hint="use a finite number",
        )
    if isinstance(value, Mapping):
        for key, item in value.items():
            _reject_non_finite(item, f"{where}.{key}")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _reject_non_finite(item, f"{where}[{i}]")


def sampling_json(sampling: Mapping[str, Any]) -> str:
    """``sampling`` as the JSON object the stage's ``sampling_parameters`` input carries.

    Keys are not checked here (they are vLLM's ``SamplingParams`` fields, which change between vLLM
    releases): the stage refuses an unknown one for that request.
    """
    if not isinstance(sampling, Mapping):
        raise InputMismatchError(
            f"sampling parameters must be a mapping, got {type(sampling).__name__}",
            hint='pass a dict, e.g. sampling={"max_tokens": 32, "temperature": 0}',
        )
    bad = [repr(k) for k in sampling if not isinstance(k, str)]
    if bad:
        raise InputMismatchError(
            f"sampling parameter names must be strings, got {', '.join(bad)}",
            hint="name them as vLLM's SamplingParams does: max_tokens, temperature, top_p, ...",
        )
    for key, value in sampling.items():
        _reject_non_finite(value, key)
    try:
        return json.dumps(dict(sampling), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InputMismatchError(
            f"sampling parameters cannot be written as JSON: {exc}",
            hint="use numbers, strings, booleans, lists and dicts only",
        ) from exc


def llm_inputs(
    prompt: str,
    *,
    sampling: Mapping[str, Any] | None = None,
    stream: bool = True,
    outputs: Iterable[str] = (),
    exclude_input_in_output: bool | None = None,
) -> dict[str, Any]:
    """The inputs of one request to a vLLM stage: ``client.stream(model, llm_inputs("Hi", ...))``.

    ``sampling``: vLLM sampling parameters (``{"max_tokens": 32, "temperature": 0}``), sent as the
    JSON string the backend reads; ``stream``: one response per generation step (True) or one
    response with the whole answer (False); ``outputs``: additional outputs to ask for, by name
    (:data:`LLM_OUTPUTS`), each turned on through its ``return_<name>`` input;
    ``exclude_input_in_output``: leave the prompt out of a non-streamed answer (None: the
    backend's default, which is to include it).
    """
    if not isinstance(prompt, str):
        raise InputMismatchError(
            f"the prompt must be text, got {type(prompt).__name__}", hint="pass a str"
        )
    inputs: dict[str, Any] = {
        "text_input": np.array([prompt.encode("utf-8")], dtype=np.object_),
        "stream": np.array([bool(stream)], dtype=np.bool_),
    }
    if sampling is not None:
        inputs["sampling_parameters"] = np.array([sampling_json(sampling).encode("utf-8")], dtype=np.object_)
    if exclude_input_in_output is not None:
        inputs["exclude_input_in_output"] = np.array([bool(exclude_input_in_output)], dtype=np.bool_)
    wanted = [outputs] if isinstance(outputs, str) else list(outputs)
    unknown = [name for name in wanted if name not in LLM_OUTPUTS]
    if unknown:
        raise InputMismatchError(
            f"a vLLM stage has no additional output {', '.join(map(repr, unknown))}",
            hint=f"ask for some of: {', '.join(LLM_OUTPUTS)}",
        )
    for name in wanted:
        inputs[f"return_{name}"] = np.array([True], dtype=np.bool_)
    return inputs
