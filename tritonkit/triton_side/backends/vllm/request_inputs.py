"""What one Triton request asks for: its input tensors (NVIDIA's vllm backend contract), read and
checked before anything reaches the engine.

Shipped beside ``model.py`` (the stub puts this directory on ``sys.path``); imports nothing
from tritonkit.
"""

from __future__ import annotations

from typing import Any

import triton_python_backend_utils as pb_utils
from backend_errors import BadRequest
from sampling_checks import parse_sampling_parameters

#: the backend's inputs, as NVIDIA's vllm backend declares them (auto-complete adds the missing)
INPUTS: tuple[dict[str, Any], ...] = (
    {"name": "text_input", "data_type": "TYPE_STRING", "dims": [1]},
    {"name": "stream", "data_type": "TYPE_BOOL", "dims": [1], "optional": True},
    {"name": "sampling_parameters", "data_type": "TYPE_STRING", "dims": [1], "optional": True},
    {"name": "exclude_input_in_output", "data_type": "TYPE_BOOL", "dims": [1], "optional": True},
    {"name": "return_finish_reason", "data_type": "TYPE_BOOL", "dims": [1], "optional": True},
    {"name": "return_cumulative_logprob", "data_type": "TYPE_BOOL", "dims": [1], "optional": True},
    {"name": "return_logprobs", "data_type": "TYPE_BOOL", "dims": [1], "optional": True},
    {"name": "return_num_input_tokens", "data_type": "TYPE_BOOL", "dims": [1], "optional": True},
    {"name": "return_num_output_tokens", "data_type": "TYPE_BOOL", "dims": [1], "optional": True},
)
ADDITIONAL_OUTPUTS = (
    "return_finish_reason",
    "return_cumulative_logprob",
    "return_logprobs",
    "return_num_input_tokens",
    "return_num_output_tokens",
)


def _one_value(request: Any, name: str, what: str) -> Any:
    """The one value of the optional input ``name`` (None when the request leaves it out)."""
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    if tensor is None:
        return None
    values = tensor.as_numpy().reshape(-1)
    if values.size != 1:
        raise BadRequest(f"input '{name}' must hold one {what}, got {values.size} values")
    return values[0]


def _bool_input(request: Any, name: str) -> bool | None:
    value = _one_value(request, name, "boolean")
    return None if value is None else bool(value)


def _string_input(request: Any, name: str) -> str | None:
    value = _one_value(request, name, "string")
    if value is None:
        return None
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise BadRequest(f"input '{name}' is not UTF-8 text") from None
    return str(value)


class ParsedRequest:
    """What one Triton request asks for, read and checked before it reaches the engine."""

    def __init__(self, request: Any, *, field_types: dict[str, Any], max_model_len: int) -> None:
        prompt = _string_input(request, "text_input")
        if prompt is None:
            raise BadRequest("the request lacks input 'text_input' (the prompt)")
        if not prompt.strip():
            raise BadRequest("text_input is empty: send a prompt to generate from")
        self.prompt = prompt
        self.stream = bool(_bool_input(request, "stream"))
        exclude = _bool_input(request, "exclude_input_in_output")
        # NVIDIA's contract: the prompt is prepended unless excluded; streaming never prepends.
        self.prepend_input = (not exclude) if exclude is not None else not self.stream
        if self.prepend_input and self.stream:
            raise BadRequest("when streaming, exclude_input_in_output = false is not allowed")
        raw = _string_input(request, "sampling_parameters")
        if raw is None:
            raw = request.parameters() or "{}"
        self.sampling_kwargs, self.lora_name = parse_sampling_parameters(
            raw, field_types, max_model_len=max_model_len
        )
        self.outputs = {name: bool(_bool_input(request, name)) for name in ADDITIONAL_OUTPUTS}
