"""Smoke test of a deployed endpoint through the tritonkit client: readiness, then one inference
per model named (the ensembles), with inputs generated from the model's metadata."""

from __future__ import annotations

import io
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from tritonkit._dtypes import TRITON_TO_NUMPY
from tritonkit.deploy.base import SmokeResult
from tritonkit.errors import TritonKitError

logger = logging.getLogger(__name__)

def _png() -> bytes:
    """A tiny valid PNG: variable-length UINT8 inputs are, by convention here, encoded images."""
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (32, 32), (120, 60, 200)).save(buf, format="PNG")
    return buf.getvalue()


def sample_inputs(info: Any) -> dict[str, Any]:
    """One request's worth of inputs for a ``tritonkit.client.ModelInfo`` (batch of 1 when batching).

    Variable dims become 1, BYTES tensors get a short text, a 1-D variable UINT8 tensor gets a
    small PNG (image models take encoded bytes), numbers get values in [0, 1).
    """
    rng = np.random.default_rng(0)
    out: dict[str, Any] = {}
    for spec in info.inputs:
        if spec.optional:
            continue
        dims = tuple(1 if d < 0 else d for d in spec.dims)
        if spec.datatype == "BYTES":
            arr: Any = np.full(dims or (1,), b"tritonkit smoke test", dtype=object)
        elif spec.datatype == "UINT8" and len(spec.dims) == 1 and spec.dims[0] < 0:
            arr = np.frombuffer(_png(), dtype=np.uint8).copy()
        elif spec.datatype in TRITON_TO_NUMPY:
            dtype = TRITON_TO_NUMPY[spec.datatype]
            if np.issubdtype(dtype, np.floating):
                arr = rng.random(dims, dtype=np.float32).astype(dtype)
            else:
                arr = np.zeros(dims, dtype=dtype)
        else:
            raise TritonKitError(
                f"model {info.name}: cannot generate a {spec.datatype} input for {spec.name}"
            )
        out[spec.name] = arr[np.newaxis, ...] if info.batching else arr
    return out


def smoke_test(
    url: str,
    *,
    models: Sequence[str],
    auth: Any | None = None,
    request_timeout: float = 120.0,
) -> list[SmokeResult]:
    """Readiness of the server and each model, then one inference per model; never raises for a
    failing check (each becomes a failed SmokeResult), so the caller reports all of them."""
    from tritonkit.client import TritonClient

    results: list[SmokeResult] = []
    with TritonClient(url, auth=auth, request_timeout=request_timeout) as client:
        try:
            ready = client.is_ready()
        except TritonKitError as exc:
            return [SmokeResult(check="server ready", ok=False, detail=exc.message)]
        results.append(SmokeResult(check="server ready", ok=ready, detail="" if ready else "not ready"))
        if not ready:
            return results
        for model in models:
            try:
                inputs = sample_inputs(client.model_info(model))
                outputs = client.infer(model, inputs)
            except TritonKitError as exc:
                results.append(SmokeResult(check=f"infer {model}", ok=False, detail=exc.message))
                continue
            shapes = ", ".join(f"{k}{list(v.shape)}" for k, v in sorted(outputs.items()))
            results.append(SmokeResult(check=f"infer {model}", ok=True, detail=shapes))
    return results
