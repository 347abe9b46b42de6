"""LLM-decoder pipelines composed by tritonkit's client: the prompt model unary, then the LLM
stage's stream straight from Triton (the contract: :mod:`tritonkit.llm_pipeline`).

No stub holds a stream, so a pipeline answers as many callers at once as its engine batches, and
a caller that leaves cancels the engine's request directly; each response carries the pipeline's
own outputs, as its Python front door would send them.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Collection, Generator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from tritonkit.errors import InputMismatchError, StreamCutShortError
from tritonkit.llm_pipeline import ENGINE_OUTPUTS, PROMPT_OUTPUT, TEXT_OUTPUT, ComposedPipeline

if TYPE_CHECKING:
    from tritonkit.client._async_client import AsyncTritonClient
    from tritonkit.client._client import TritonClient
    from tritonkit.client._stream import ResponseStream, StreamResponse

__all__ = ["Composer", "open_composed", "stream_composed"]


def _scalar(value: Any) -> Any:
    flat = np.asarray(value, dtype=object).reshape(-1)
    if flat.size != 1:
        raise InputMismatchError(f"expected one element, got {flat.size}")
    return flat[0]


class Composer:
    """One composed answer's plan (its limit, sampling and the outputs asked for) and the reading
    of the stage's responses as the pipeline's; shared by the async and the blocking client and
    by ``tritonkit perf`` (which sends the stage's request on its own streams)."""

    def __init__(
        self, pipeline: ComposedPipeline, inputs: Mapping[str, Any], outputs: Sequence[str] | None
    ) -> None:
        self.pipeline = pipeline
        asked = inputs.get(pipeline.max_tokens_input) if pipeline.max_tokens_input else None
        self.limit = pipeline.max_tokens(None if asked is None else int(_scalar(asked)))
        raw = inputs.get(pipeline.sampling_input) if pipeline.sampling_input else None
        self.own = pipeline.request_sampling(None if raw is None else _scalar(raw))
        self.prompt_inputs = pipeline.prompt_request(inputs)
        self.wanted = list(outputs) if outputs is not None else [TEXT_OUTPUT, *ENGINE_OUTPUTS]
        self.usage = [n for n in ENGINE_OUTPUTS if n in self.wanted]
        self.counts: dict[str, Any] = {"PROMPT_TOKENS": 0, "COMPLETION_TOKENS": 0, "FINISH_REASON": ""}
        #: the stage was asked for its finish reason (set by engine_request): its last piece has one
        self.reason_asked = False

    def engine_request(self, answer: Mapping[str, Any], engine_inputs: Collection[str]) -> dict[str, Any]:
        """The stage's request for the prompt model's ``answer`` (as the front door asks it: every
        count the stage can give when any is wanted, and its finish reason always, which marks the
        last piece); ``engine_inputs``: the stage's input names."""
        from tritonkit.client._llm import llm_inputs

        flags = set(engine_inputs)
        reason = ENGINE_OUTPUTS["FINISH_REASON"][1]
        # the finish reason always, where the stage gives it: it marks the last piece, so an answer
        # whose tail the server lost is told from a whole one (ended())
        asked = [
            out for flag, out in ENGINE_OUTPUTS.values() if flag in flags and (self.usage or out == reason)
        ]
        self.reason_asked = reason in asked
        prompt = _scalar(answer[PROMPT_OUTPUT])
        text = prompt.decode("utf-8") if isinstance(prompt, bytes) else str(prompt)
        sampling = self.pipeline.engine_sampling(self.own, self.limit)
        return llm_inputs(text, sampling=sampling, stream=True, outputs=asked, exclude_input_in_output=True)

    def ended(self) -> None:
        """The stage's stream ended: raise :class:`StreamCutShortError` when the finish reason it
        was asked for never came (the answer's tail was lost on the server's side)."""
        if self.reason_asked and not self.counts["FINISH_REASON"]:
            raise StreamCutShortError(
                f"the answer of pipeline '{self.pipeline.name}' ended without the last piece of its "
                f"LLM stage '{self.pipeline.llm_model}' (no finish reason came): the server lost "
                "its tail; ask again",
                hint="tritonserver 2.51's HTTP frontend loses a few answers' tails under load when "
                "other clients leave (docs/known-issues.md); the request can be sent again",
            )

    def read(self, response: StreamResponse) -> StreamResponse | None:
        """The stage's response as the pipeline's (None for its flags-only final response)."""
        got, counts = response.outputs, self.counts
        if "num_input_tokens" in got:
            counts["PROMPT_TOKENS"] = int(np.asarray(got["num_input_tokens"]).reshape(-1)[0])
        if "num_output_tokens" in got:
            counts["COMPLETION_TOKENS"] += int(np.asarray(got["num_output_tokens"]).sum())
        if "finish_reason" in got:
            reason = response.text("finish_reason")
            if reason and reason != "None":
                counts["FINISH_REASON"] = reason
        if "text_output" not in got:
            return None  # the stream's end says it
        out: dict[str, Any] = {}
        if TEXT_OUTPUT in self.wanted:
            out[TEXT_OUTPUT] = np.array([response.text("text_output").encode("utf-8")], dtype=np.object_)
        if self.usage and counts["FINISH_REASON"]:  # the last piece carries the counts
            values = {
                "PROMPT_TOKENS": np.array([counts["PROMPT_TOKENS"]], dtype=np.int32),
                "COMPLETION_TOKENS": np.array([counts["COMPLETION_TOKENS"]], dtype=np.int32),
                "FINISH_REASON": np.array([str(counts["FINISH_REASON"]).encode("utf-8")], dtype=np.object_),
            }
            out.update({name: values[name] for name in self.usage})
        return replace(response, outputs=out, model=self.pipeline.name)


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
    on the last piece) as the front door would send them. A refusal of the request's own limit or
    sampling is an :class:`~tritonkit.errors.InputMismatchError`, raised before anything is sent."""
    plan = Composer(pipeline, inputs, outputs)
    engine = await client.model_info(pipeline.llm_model)
    answer = await client.infer(pipeline.prompt_model, plan.prompt_inputs, outputs=[PROMPT_OUTPUT])
    async with client.stream(
        pipeline.llm_model,
        plan.engine_request(answer, engine.input_map),
        request_id=request_id,
        first_response_timeout=first_response_timeout,
        response_timeout=response_timeout,
        total_timeout=total_timeout,
    ) as stream:
        async for response in stream:
            piece = plan.read(response)
            if piece is not None:
                yield piece
    plan.ended()


def open_composed(
    client: TritonClient,
    pipeline: ComposedPipeline,
    inputs: Mapping[str, Any],
    *,
    outputs: Sequence[str] | None = None,
    request_id: str = "",
    first_response_timeout: float | None = None,
    response_timeout: float | None = None,
    total_timeout: float | None = None,
) -> ResponseStream:
    """:func:`stream_composed` for the blocking client: a :class:`ResponseStream` whose ``stats``
    count from the prompt model's request (the time to the first piece is the pipeline's) and
    whose ``close()`` cancels the stage's request. The request's limit and sampling are checked
    now; the prompt model is asked on the first ``next()``."""
    from tritonkit.client._stream import ResponseStream, StreamStats

    plan = Composer(pipeline, inputs, outputs)
    stats = StreamStats()

    def pieces() -> Generator[StreamResponse, None, None]:
        stats.started = time.monotonic()
        engine = client.model_info(pipeline.llm_model)
        answer = client.infer(pipeline.prompt_model, plan.prompt_inputs, outputs=[PROMPT_OUTPUT])
        with client.stream(
            pipeline.llm_model,
            plan.engine_request(answer, engine.input_map),
            request_id=request_id,
            first_response_timeout=first_response_timeout,
            response_timeout=response_timeout,
            total_timeout=total_timeout,
        ) as stream:
            for response in stream:
                piece = plan.read(response)
                if piece is not None:
                    stats.record()
                    yield piece
        plan.ended()

    return ResponseStream(pieces(), stats)
