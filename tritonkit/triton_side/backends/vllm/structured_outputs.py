"""The ``structured_outputs`` sampling parameter (a JSON schema, regex, choice, grammar, ...),
checked before it reaches the engine, and handed to vLLM as its ``StructuredOutputsParams``.

Shipped beside ``model.py`` (the stub puts this directory on ``sys.path``); imports nothing
from tritonkit.
"""

from __future__ import annotations

import json
from typing import Any

from backend_errors import BadRequest

#: the constraints of vLLM's StructuredOutputsParams (one per request) and its other options
STRUCTURED_CONSTRAINTS = ("json", "regex", "choice", "grammar", "json_object", "structural_tag")
_STRUCTURED_OPTIONS = (
    "disable_any_whitespace",
    "disable_additional_properties",
    "whitespace_pattern",
    "backend",
)


def structured_outputs(value: Any) -> dict[str, Any]:
    """The ``structured_outputs`` (or ``guided_decoding``) sampling parameter, checked: an object,
    or that object as a JSON string (NVIDIA's backend takes the string form), with exactly one
    constraint. The engine checks the constraint itself (a schema it cannot compile is its verdict
    on that request)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise BadRequest(
                f"structured_outputs is not valid JSON: {exc.msg} at position {exc.pos}"
            ) from None
    if not isinstance(value, dict):
        raise BadRequest(f"structured_outputs must be a JSON object, got {type(value).__name__}")
    unknown = sorted(k for k in value if k not in STRUCTURED_CONSTRAINTS + _STRUCTURED_OPTIONS)
    if unknown:
        raise BadRequest(
            f"unknown structured_outputs key(s) {', '.join(map(repr, unknown))}; "
            f"give one of {', '.join(STRUCTURED_CONSTRAINTS)}"
        )
    given = [k for k in STRUCTURED_CONSTRAINTS if value.get(k) is not None]
    if len(given) != 1:
        raise BadRequest(
            f"structured_outputs takes exactly one of {', '.join(STRUCTURED_CONSTRAINTS)}, got "
            f"{', '.join(given) or 'none'}"
        )
    backend = value.pop("backend", None)
    if backend not in (None, "auto"):
        raise BadRequest(
            f"structured_outputs.backend {backend!r}: the backend is the engine's choice "
            "(model.json's structured_outputs_config), not a request's"
        )
    if value.get("choice") is not None and not (
        isinstance(value["choice"], list)
        and value["choice"]
        and all(isinstance(c, str) for c in value["choice"])
    ):
        raise BadRequest("structured_outputs.choice must be a non-empty array of strings")
    for key in ("regex", "grammar", "whitespace_pattern", "structural_tag"):
        if value.get(key) is not None and not isinstance(value[key], str):
            raise BadRequest(f"structured_outputs.{key} must be a string")
    schema = value.get("json")
    if schema is not None and not isinstance(schema, (dict, bool, str)):
        raise BadRequest("structured_outputs.json must be a JSON schema (an object)")
    if value.get("json_object") is not None and value["json_object"] is not True:
        raise BadRequest("structured_outputs.json_object must be true")
    return value


def with_engine_structured_outputs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """SamplingParams keyword arguments with a checked ``structured_outputs`` object turned into
    vLLM's StructuredOutputsParams (what SamplingParams takes); others unchanged."""
    if "structured_outputs" not in kwargs:
        return kwargs
    from vllm.sampling_params import StructuredOutputsParams

    return {**kwargs, "structured_outputs": StructuredOutputsParams(**kwargs["structured_outputs"])}
