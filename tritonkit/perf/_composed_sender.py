"""The composed streaming sender: one request of an LLM-decoder pipeline as its caller composes it
(:mod:`tritonkit.client.composed`): the prompt model unary, then the LLM stage's stream straight
from Triton, timed as one request.

The request starts before the prompt call; its TTFT is the stage's first piece, its latency the
stage's last, its tokens the stage's; a failure of either step is the request's error (a refusal
by the prompt model counts under its gRPC status). The stage's stream goes out on the streaming
sender's long-lived ``ModelStreamInfer`` calls (:mod:`tritonkit.perf._stream_sender`), so the
composition adds one unary call per request and nothing else to what the client spends.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tritonkit.client.composed import Composer
from tritonkit.errors import InputMismatchError, PerfError, StreamError
from tritonkit.llm_pipeline import PROMPT_OUTPUT, ComposedPipeline
from tritonkit.perf._stream_sender import StreamSender
from tritonkit.perf._target import Target, grpc_infer_request
from tritonkit.perf.inputs import Array

__all__ = ["ComposedSender"]

#: the stage's requests kept per request of the data set, by the prompt they carry: a prompt
#: model answers the same data alike, so the stage's request is serialized once, not per request
_KEPT_PROMPTS = 8


class ComposedSender(StreamSender):
    """Streams a pipeline composed: ``send()`` asks the prompt model, then streams the stage."""

    def __init__(self, *, target: Target, requests: Sequence[Mapping[str, Array]], conn_limit: int) -> None:
        super().__init__(target=target, requests=requests, conn_limit=conn_limit)
        if target.pipeline is None:
            raise PerfError("a composed sender needs the pipeline it composes (Target.pipeline)")
        self._pipeline: ComposedPipeline = target.pipeline
        self._plans: list[Composer] = []
        self._prompt_payloads: list[bytes] = []
        self._prompt_calls: list[Any] = []
        self._unary_turn = 0
        #: per request of the data set: the prompt model's serialized PROMPT -> the stage's request
        self._bodies: list[dict[bytes, bytes]] = []

    def _open_grpc(self) -> None:
        pipeline = self._pipeline
        self._plans = [self._plan(i, request) for i, request in enumerate(self._requests)]
        self._open_grpc_streams()
        self._prompt_calls = [
            channel.unary_unary("/inference.GRPCInferenceService/ModelInfer") for channel in self._channels
        ]
        for plan in self._plans:
            msg = grpc_infer_request(
                plan.prompt_inputs, model=pipeline.prompt_model, model_version="", outputs=(PROMPT_OUTPUT,)
            )
            self._prompt_payloads.append(msg.SerializeToString())
        self._bodies = [{} for _ in self._plans]

    def _plan(self, index: int, request: Mapping[str, Array]) -> Composer:
        """The composition of one request of the data set, its limit and sampling checked as the
        front door checks them: a refusal stops the run before anything is sent."""
        try:
            return Composer(self._pipeline, request, None)
        except InputMismatchError as exc:
            raise PerfError(
                f"request {index + 1} of the data set for pipeline '{self._pipeline.name}' is refused: {exc}",
                hint="fix that input in --input-data (the pipeline's own limits apply), or measure the "
                "front door with --no-compose",
            ) from exc

    async def _body(self, index: int) -> bytes:
        """Ask the prompt model; the stage's request for its answer (part of the request's time)."""
        self._unary_turn = (self._unary_turn + 1) % len(self._prompt_calls)
        call = self._prompt_calls[self._unary_turn]
        raw = await call(self._prompt_payloads[index], metadata=self._metadata, timeout=self.target.timeout_s)
        prompt = self._prompt_of(self._pb.ModelInferResponse.FromString(raw))
        kept = self._bodies[index]
        body = kept.get(prompt)
        if body is None:
            from tritonclient.utils import deserialize_bytes_tensor

            answer = {PROMPT_OUTPUT: deserialize_bytes_tensor(prompt)}
            inputs = self._plans[index].engine_request(answer, self.target.stage_inputs)
            body = self._stream_request(inputs, model=self._pipeline.llm_model, model_version="", outputs=())
            if len(kept) < _KEPT_PROMPTS:
                kept[prompt] = body
        return body

    def _prompt_of(self, response: Any) -> bytes:
        """The prompt model's serialized ``PROMPT`` tensor in its response."""
        for i, out in enumerate(response.outputs):
            if out.name == PROMPT_OUTPUT and i < len(response.raw_output_contents):
                return bytes(response.raw_output_contents[i])
        raise StreamError(
            f"the prompt model '{self._pipeline.prompt_model}' answered without its {PROMPT_OUTPUT} output",
            kind="prompt model sent no PROMPT",
        )
