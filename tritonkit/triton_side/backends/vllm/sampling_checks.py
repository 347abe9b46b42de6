"""The ``sampling_parameters`` input (JSON) read into vLLM SamplingParams keyword arguments, checked:
unknown keys, values of the wrong type (numbers and booleans may come as strings, as genai-perf
sends them) and a ``max_tokens`` the model cannot give are the request's own fault (BadRequest).

Shipped beside ``model.py`` (the stub puts this directory on ``sys.path``); imports nothing
from tritonkit.
"""

from __future__ import annotations

import json
import math
import types
import typing
from typing import Any

from backend_errors import BadRequest
from structured_outputs import structured_outputs


def _strip_optional(hint: Any) -> Any:
    """``int | None`` -> ``int``; any other hint unchanged."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return args[0] if len(args) == 1 else hint
    return hint


def _as_bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0"):
        return value.strip().lower() in ("true", "1")
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise BadRequest(f"sampling parameter '{key}' must be true or false, got {value!r}")


def _as_int(key: str, value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise BadRequest(f"sampling parameter '{key}' must be an integer, got {value!r}")


def _as_float(key: str, value: Any) -> float:
    if isinstance(value, bool):
        raise BadRequest(f"sampling parameter '{key}' must be a number, got {value!r}")
    try:
        number = float(value.strip()) if isinstance(value, str) else float(value)
    except (TypeError, ValueError):
        raise BadRequest(f"sampling parameter '{key}' must be a number, got {value!r}") from None
    if not math.isfinite(number):
        raise BadRequest(f"sampling parameter '{key}' must be finite, got {value!r}")
    return number


def coerce_value(key: str, value: Any, hint: Any) -> Any:
    """A JSON value for SamplingParams field ``key``; numbers and booleans may come as strings."""
    target = _strip_optional(hint)
    if value is None:
        return None
    if target is bool:
        return _as_bool(key, value)
    if target is int:
        return _as_int(key, value)
    if target is float:
        return _as_float(key, value)
    if target is str and not isinstance(value, str):
        raise BadRequest(f"sampling parameter '{key}' must be a string, got {value!r}")
    return value


def _logit_bias(value: Any) -> dict[int, float]:
    """``{"token id": bias}`` (JSON keys are strings) as vLLM's ``{int: float}``."""
    if not isinstance(value, dict):
        raise BadRequest("sampling parameter 'logit_bias' must be an object of token id: bias")
    out: dict[int, float] = {}
    for key, bias in value.items():
        token = _as_int("logit_bias", key)
        out[token] = _as_float(f"logit_bias[{key}]", bias)
    return out


def parse_sampling_parameters(
    raw: str, field_types: dict[str, Any], *, max_model_len: int
) -> tuple[dict[str, Any], str | None]:
    """The SamplingParams keyword arguments in ``raw`` (JSON), and the LoRA name, if any.

    Raises BadRequest for text that is not a JSON object, keys SamplingParams does not know,
    values of the wrong type and a ``max_tokens`` outside 1..max_model_len.
    """
    try:
        params = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        raise BadRequest(f"sampling_parameters is not valid JSON: {exc.msg} at position {exc.pos}") from None
    if not isinstance(params, dict):
        raise BadRequest(f"sampling_parameters must be a JSON object, got {type(params).__name__}")
    lora_name = params.pop("lora_name", None)
    if lora_name is not None and not isinstance(lora_name, str):
        raise BadRequest(f"sampling parameter 'lora_name' must be a string, got {lora_name!r}")
    guided = params.pop("guided_decoding", None)  # vLLM < 0.11's name, as NVIDIA's backend maps it
    if guided is not None and params.get("structured_outputs") is None:
        params["structured_outputs"] = guided
    unknown = sorted(k for k in params if k not in field_types or k.startswith("_"))
    if unknown:
        raise BadRequest(
            f"unknown sampling parameter(s) {', '.join(map(repr, unknown))}; "
            f"vLLM's SamplingParams takes e.g. max_tokens, temperature, top_p, top_k, seed, stop, "
            f"ignore_eos, logprobs"
        )
    kwargs = {k: coerce_value(k, v, field_types[k]) for k, v in params.items() if v is not None}
    if "structured_outputs" in kwargs:
        kwargs["structured_outputs"] = structured_outputs(kwargs["structured_outputs"])
    if "logit_bias" in kwargs:
        kwargs["logit_bias"] = _logit_bias(kwargs["logit_bias"])
    max_tokens = kwargs.get("max_tokens")
    if max_tokens is not None and not 1 <= max_tokens <= max_model_len:
        raise BadRequest(
            f"max_tokens must be between 1 and the model's max_model_len ({max_model_len}), got {max_tokens}"
        )
    return kwargs, lora_name
