"""LLM-decoder pipelines composed by tritonkit's client: the prompt model unary, then the LLM
stage's stream straight from Triton (the contract: :mod:`tritonkit.llm_pipeline`).

No stub holds a stream, so a pipeline answers as many callers at once as its engine batches, and
a caller that leaves cancels the engine's request directly; each response carries the pipeline's
own outputs, as its Python front door would send them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from tritonkit.errors import InputMismatchError
from tritonkit.llm_pipeline import ENGINE_OUTPUTS, PROMPT_OUTPUT, TEXT_OUTPUT, ComposedPipeline

if TYPE_CHECKING:
    from tritonkit.client._async_client import AsyncTritonClient
    from tritonkit.client._stream import StreamResponse

__all__ = ["stream_composed"]


def _scalar(value: Any) -> Any:
    flat = np.asarray(value, dtype=object).reshape(-1)
    if flat.size != 1:
        raise InputMismatchError(f"expected one element, got {flat.size}")
    return flat[0]


async def stream_composed(
    client: AsyncTritonClient,
    pipeline: ComposedPipeline,
    inputs: Mapping[str, Any],
    *,
    outputs: Sequence[str] | None = None,
    request_id: str = "",
    first_response_timeout: float | None = None,
    response_timeout: float | None = None,
    total_timeout: float | None = None,
) -> AsyncIterator[StreamResponse]:
    """One answer of ``pipeline`` for ``inputs`` (the pipeline's own input names), composed: each
    response carries the pipeline's outputs (``GENERATED_TEXT``, and the usage outputs asked for
    on the last piece) as the front door would send them."""
    from tritonkit.client._llm import llm_inputs

    asked = inputs.get(pipeline.max_tokens_input) if pipeline.max_tokens_input else None
    limit = pipeline.max_tokens(None if asked is None else int(_scalar(asked)))
    raw = inputs.get(pipeline.sampling_input) if pipeline.sampling_input else None
    own = pipeline.request_sampling(None if raw is None else _scalar(raw))
    wanted = list(outputs) if outputs is not None else [TEXT_OUTPUT, *ENGINE_OUTPUTS]
    engine = await client.model_info(pipeline.llm_model)
    flags = {t.name for t in engine.inputs}
    usage = [n for n in ENGINE_OUTPUTS if n in wanted]
    # as the front door: every count the engine can give when any is wanted, since the finish
    # reason marks the last piece, which carries them
    asked = [ENGINE_OUTPUTS[n][1] for n in ENGINE_OUTPUTS if usage and ENGINE_OUTPUTS[n][0] in flags]
    answer = await client.infer(
        pipeline.prompt_model, pipeline.prompt_request(inputs), outputs=[PROMPT_OUTPUT]
    )
    prompt = _scalar(answer[PROMPT_OUTPUT])
    text = prompt.decode("utf-8") if isinstance(prompt, bytes) else str(prompt)
    request = llm_inputs(
        text,
        sampling=pipeline.engine_sampling(own, limit),
        stream=True,
        outputs=asked,
        exclude_input_in_output=True,
    )
    counts: dict[str, Any] = {"PROMPT_TOKENS": 0, "COMPLETION_TOKENS": 0, "FINISH_REASON": ""}
    async with client.stream(
        pipeline.llm_model,
        request,
        request_id=request_id,
        first_response_timeout=first_response_timeout,
        response_timeout=response_timeout,
        total_timeout=total_timeout,
    ) as stream:
        async for response in stream:
            got = response.outputs
            if "num_input_tokens" in got:
                counts["PROMPT_TOKENS"] = int(np.asarray(got["num_input_tokens"]).reshape(-1)[0])
            if "num_output_tokens" in got:
                counts["COMPLETION_TOKENS"] += int(np.asarray(got["num_output_tokens"]).sum())
            if "finish_reason" in got:
                reason = response.text("finish_reason")
                if reason and reason != "None":
                    counts["FINISH_REASON"] = reason
            if "text_output" not in got:
                continue  # the engine's flags-only final response: the stream's end says it
            out: dict[str, Any] = {}
            if TEXT_OUTPUT in wanted:
                out[TEXT_OUTPUT] = np.array([response.text("text_output").encode("utf-8")], dtype=np.object_)
            if usage and counts["FINISH_REASON"]:  # the last piece carries the counts
                out.update(_usage_values(counts, usage))
            yield replace(response, outputs=out, model=pipeline.name)


def _usage_values(counts: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    values = {
        "PROMPT_TOKENS": np.array([counts["PROMPT_TOKENS"]], dtype=np.int32),
        "COMPLETION_TOKENS": np.array([counts["COMPLETION_TOKENS"]], dtype=np.int32),
        "FINISH_REASON": np.array([str(counts["FINISH_REASON"]).encode("utf-8")], dtype=np.object_),
    }
    return {name: values[name] for name in names}
