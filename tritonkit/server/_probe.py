"""The healer's liveness probe: a small request of its own to a model, to see a dead engine or stub
while no one else asks.

Triton 2.51 learns that a model's process died only when a request reaches it: a Python stage
whose stub died stays READY (its model readiness too) and NVIDIA's vllm backend checks its engine
on requests only, so an idle pod with a dead engine or stub stays ready until a user's request
fails. The healer asks on its own, every ``period`` seconds:

- an LLM stage (the vLLM tensor contract: a ``text_input`` input, a ``text_output`` output) gets
  Triton's ``generate`` with one token to make (``max_tokens: 1``: a prefill of a few tokens and
  one decoding step);
- any other model only when named (``tritonkit heal --probe-model``): one ``infer`` of zeros (empty
  strings) shaped by its config. It runs the model's code, so it is the operator's choice.

A model is dead when the probe's refusal says the server lost it (Triton's ``Stub process ... is
not healthy``, an engine that died or is unhealthy, UNAVAILABLE); any other answer, a refusal of
the zeros by the model's own code included, says it is alive. A probe that gets no answer in time
gives no verdict (a busy model may queue it; the backend's own stall check covers a wedge).
"""

from __future__ import annotations

import json
import math
import urllib.parse
from dataclasses import dataclass
from typing import Any

__all__ = ["DEAD_WORDS", "Probe", "dead_reason", "probe_for"]

#: what a refusal says when the server lost the model's process (lower case): Triton's words for
#: a dead stub, tritonkit's vllm backend's and NVIDIA's for a dead or unhealthy engine
DEAD_WORDS = ("not healthy", "unhealthy", "stub process", "engine died", "unavailable")

#: config data types -> the KServe datatype and a zero of it in JSON
_ZERO: dict[str, tuple[str, Any]] = {
    "TYPE_STRING": ("BYTES", ""),
    "TYPE_BOOL": ("BOOL", False),
    **{f"TYPE_{t}": (t, 0) for t in ("UINT8", "UINT16", "UINT32", "UINT64")},
    **{f"TYPE_{t}": (t, 0) for t in ("INT8", "INT16", "INT32", "INT64")},
    **{f"TYPE_{t}": (t, 0.0) for t in ("FP16", "FP32", "FP64")},
}


@dataclass(frozen=True)
class Probe:
    """One model's probe: where it goes and what it sends."""

    model: str
    path: str
    body: bytes


def probe_for(model: str, config: dict[str, Any], *, named: bool) -> Probe | None:
    """The probe of ``model`` from its config (Triton's JSON), or None when it is not probed: not
    an LLM stage and not ``named``, or inputs a probe cannot make."""
    quoted = urllib.parse.quote(model, safe="")
    inputs = [i for i in config.get("input", []) if isinstance(i, dict)]
    outputs = {str(o.get("name")) for o in config.get("output", []) if isinstance(o, dict)}
    if any(i.get("name") == "text_input" for i in inputs) and "text_output" in outputs:
        body = {"text_input": "ping", "parameters": {"max_tokens": 1, "temperature": 0}}
        return Probe(model, f"/v2/models/{quoted}/generate", json.dumps(body).encode())
    if not named:
        return None
    batched = int(config.get("max_batch_size") or 0) > 0
    tensors = []
    for item in inputs:
        if item.get("optional"):
            continue
        zero = _ZERO.get(str(item.get("data_type")))
        if zero is None:
            return None
        shape = [1 if int(d) < 0 else int(d) for d in item.get("dims", [])]
        if batched:
            shape = [1, *shape]
        datatype, value = zero
        data = [value] * math.prod(shape)
        tensors.append({"name": item.get("name"), "shape": shape, "datatype": datatype, "data": data})
    return Probe(model, f"/v2/models/{quoted}/infer", json.dumps({"inputs": tensors}).encode())


def dead_reason(status: int, body: bytes) -> str | None:
    """Why the probe's answer says the model's process is gone, or None: it is alive."""
    if status == 200:
        return None
    try:
        text = str(json.loads(body).get("error", ""))
    except (ValueError, AttributeError):
        text = body.decode("utf-8", "replace")
    lowered = text.lower()
    if any(word in lowered for word in DEAD_WORDS):
        return text.strip()[:300] or f"HTTP {status}"
    return None
