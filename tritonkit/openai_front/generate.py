"""One choice of one request, run on Triton through tritonkit's client: its text as it comes,
then what it cost and why it ended.

An LLM stage gets its native tensors (the rendered prompt in ``text_input``, vLLM's sampling
parameters, ``exclude_input_in_output``, the ``return_*`` flags it has); a pipeline gets its
mapped inputs. Token counts are the stage's own (``num_input_tokens``/``num_output_tokens``);
``finish_reason`` is ``"length"`` when the answer reached ``max_tokens``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tritonkit.client import AsyncResponseStream, AsyncTritonClient, StreamResponse, llm_inputs
from tritonkit.llm_pipeline import PROMPT_OUTPUT, ComposedPipeline
from tritonkit.openai_front.errors import AnswerCutShortError, OpenAIError
from tritonkit.openai_front.limits import Limits
from tritonkit.openai_front.mapping import LlmEngine, PipelineMapping
from tritonkit.openai_front.models import Target
from tritonkit.openai_front.requests import Sampling

__all__ = ["Ask", "ChoiceRun", "Delta", "check_ask", "chosen_and_top"]


@dataclass(frozen=True)
class Ask:
    """What one choice asks of the model: prompt text, image bytes, sampling, its index."""

    prompt: str
    sampling: Sampling
    images: tuple[bytes, ...] = ()
    choice: int = 0


@dataclass(frozen=True)
class Delta:
    """A piece of the answer: its text and, when asked, its tokens' log-probability rows."""

    text: str
    logprobs: tuple[dict[str, dict[str, Any]], ...] = ()


def check_ask(target: Target, sampling: Sampling, images: int, *, chat: bool) -> None:
    """Refuse, before any image is fetched, what ``target`` cannot do (400 naming the field)."""
    if target.engine is not None:
        if images:
            raise OpenAIError(
                f"model '{target.name}' is an LLM stage and takes no images",
                param="messages",
                code="images_not_supported",
                hint="send images to a pipeline that declares openai.image_input",
            )
        if sampling.logprobs is not None and not target.engine.logprobs:
            raise OpenAIError(
                f"model '{target.name}' does not return log-probabilities",
                param="logprobs",
                code="logprobs_not_supported",
            )
        if chat and target.template is None:
            raise OpenAIError(
                f"model '{target.name}' has no chat template",
                param="model",
                code="chat_template_missing",
                hint=f"start the front with --chat-template {target.name}=FILE, or use /v1/completions",
            )
        return
    mapping = target.pipeline
    if mapping is None:  # pragma: no cover - a Target is one kind or the other
        raise OpenAIError(f"model '{target.name}' cannot be served", status=500)
    if mapping.sampling_parameters_input is None:
        refused = sampling.generation_options
        why = (
            "with its own sampling; it does not take {} "
            "(its openai mapping declares no sampling_parameters_input)"
        )
    else:  # the sampling fields go to its LLM stage; log-probabilities have no way back
        refused = ["logprobs"] if sampling.logprobs is not None else []
        why = "; it does not return {}"
    if refused:
        raise OpenAIError(
            f"model '{target.name}' is a pipeline " + why.format(", ".join(refused)),
            param=refused[0],
            code="unsupported_parameter",
        )
    if images and mapping.image_input is None:
        raise OpenAIError(
            f"model '{target.name}' takes no images", param="messages", code="images_not_supported"
        )
    if images > 1:
        raise OpenAIError(
            f"model '{target.name}' takes one image per request, got {images}",
            param="messages",
            code="too_many_images",
        )
    image_input = target.signature.find_input(mapping.image_input) if mapping.image_input else None
    if image_input is not None and not image_input.optional and not images:
        raise OpenAIError(
            f"model '{target.name}' needs an image: add an image_url part to the user message",
            param="messages",
            code="image_required",
        )


@dataclass
class ChoiceRun:
    """Runs one choice; after :meth:`deltas` ends, the counts and ``finish_reason`` are set."""

    client: AsyncTritonClient
    target: Target
    ask: Ask
    limits: Limits
    #: the client that streams answers (Triton's HTTP generate_stream, ``FrontSettings.stream_url``);
    #: None, or a choice with an image: ``client``
    streams: AsyncTritonClient | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str = "stop"
    responses: int = 0
    #: the engine's stream while it runs (:class:`tritonkit.openai_front.relay.EngineRelay` reads on)
    stream: AsyncResponseStream | None = field(default=None, repr=False)
    _engine_reason: str = field(default="", repr=False)
    #: the LLM stage whose stream this choice reads (the target, or a composed pipeline's stage)
    _streamed: LlmEngine | None = field(default=None, repr=False)
    #: a composed pipeline's max_tokens, as its front door would set it
    _limit: int | None = field(default=None, repr=False)
    #: the outputs :meth:`read_sse` reads (set by :meth:`reads_sse`)
    _sse_outputs: frozenset[str] = field(default=frozenset(), repr=False)

    @property
    def max_tokens(self) -> int | None:
        if self.target.engine is not None:
            return self.ask.sampling.max_tokens or self.limits.default_max_tokens
        if self._limit is not None:
            return self._limit
        return self.ask.sampling.max_tokens

    def deltas(self) -> AsyncGenerator[Delta, None]:
        if self.target.engine is not None:
            sampling = self.ask.sampling.vllm(
                default_max_tokens=self.limits.default_max_tokens, choice=self.ask.choice
            )
            return self._engine(self.target.engine, self.target.name, self.ask.prompt, sampling)
        if self.target.pipeline is None:  # pragma: no cover - a Target is one kind or the other
            raise OpenAIError(f"model '{self.target.name}' cannot be served", status=500)
        if self.target.composed is not None and self.target.composed_engine is not None:
            return self._composed(self.target.pipeline, self.target.composed, self.target.composed_engine)
        return self._pipeline(self.target.pipeline)

    async def _engine(
        self, engine: LlmEngine, model: str, prompt: str, sampling: Mapping[str, Any], *, images: bool = True
    ) -> AsyncGenerator[Delta, None]:
        """Stream ``model`` (an LLM stage) for ``prompt``; ``images``: whether this choice's images
        travel on the stream (a composed pipeline's went to its prompt model)."""
        wanted: list[str] = []
        if engine.token_counts:
            wanted += ["num_input_tokens", "num_output_tokens"]
        if engine.finish_reason:
            wanted.append("finish_reason")
        if self.ask.sampling.logprobs is not None:
            wanted.append("logprobs")
        inputs = llm_inputs(
            prompt, sampling=sampling, stream=True, outputs=wanted, exclude_input_in_output=True
        )
        self._streamed = engine
        async with self._streamer(images=images).stream(
            model,
            inputs,
            first_response_timeout=self.limits.request_timeout,
            response_timeout=self.limits.idle_timeout(self.target.name),
            total_timeout=self.limits.request_timeout,
        ) as stream:
            self.stream = stream
            try:
                async for response in stream:
                    delta = self._read_engine(response)
                    if delta is not None:
                        yield delta
            finally:
                self.stream = None
        if engine.finish_reason and not self._engine_reason:
            # its last piece carries the reason: the stream ended, without an error, short of it
            raise AnswerCutShortError(model)
        self._finish()

    def _streamer(self, *, images: bool = True) -> AsyncTritonClient:
        """``streams`` unless the stream carries an image (raw bytes: gRPC carries them as they are,
        generate_stream's JSON only as a list of numbers)."""
        if self.streams is not None and not (images and self.ask.images):
            return self.streams
        return self.client

    def _read_engine(self, response: StreamResponse) -> Delta | None:
        outputs = response.outputs
        if "num_input_tokens" in outputs:
            self.prompt_tokens = int(outputs["num_input_tokens"].reshape(-1)[0])
        if "num_output_tokens" in outputs:
            self.completion_tokens = (self.completion_tokens or 0) + int(outputs["num_output_tokens"].sum())
        if "finish_reason" in outputs:
            reason = response.text("finish_reason")
            if reason and reason != "None":
                self._engine_reason = reason
        if "text_output" not in outputs:
            return None  # a flags-only final response
        self.responses += 1
        rows: tuple[dict[str, dict[str, Any]], ...] = ()
        if "logprobs" in outputs:
            rows = _logprob_rows(outputs["logprobs"])
        return Delta(response.text("text_output"), rows)

    def reads_sse(self) -> bool:
        """Whether :meth:`read_sse` can read this choice's events as they come: an engine's answer
        streamed as Triton's HTTP events, text only (no log-probabilities), its outputs of the
        types the reader knows."""
        call = self.stream.call if self.stream is not None else None
        info = getattr(call, "info", None)
        engine = self._streamed if self._streamed is not None else self.target.engine
        if engine is None or self.ask.sampling.logprobs is not None or info is None:
            return False
        if getattr(call, "wanted", None) is not None:
            return False  # the engine's events are read whole (see _engine)
        kinds = {name: tensor.datatype for name, tensor in info.output_map.items()}
        if kinds.get("text_output") != "BYTES" or kinds.get("finish_reason", "BYTES") != "BYTES":
            return False
        self._sse_outputs = frozenset(kinds) & _SSE_OUTPUTS
        return True

    def read_sse(self, block: bytes) -> str | None:
        """One of the engine's server-sent events, read as :meth:`_read_engine` reads it once
        decoded: its text ("" when it has none), its counts and finish reason noted. None, with
        nothing noted, for any other event (not one ``data:`` line of a JSON object, an error,
        log-probabilities, values of other types): the generic path reads that one."""
        if not block.startswith(b"data: {") or b"\n" in block:
            return None
        try:
            data = block[6:].decode()
            doc, end = _scan_json(data, 0)  # json.loads without its Python layers
        except (ValueError, StopIteration):
            return None
        if end != len(data) or type(doc) is not dict or "error" in doc:
            return None
        has = self._sse_outputs
        if "logprobs" in doc and "logprobs" in has:
            return None
        text: str | None = None
        if "text_output" in has and "text_output" in doc:
            text = doc["text_output"]
            if type(text) is not str:
                text = _strings(text)  # null too: the generic path counts it a response
                if text is None:
                    return None
        flags = _sse_flags(doc, has)
        if flags is None:
            return None
        prompt, completion, reason = flags
        if prompt:
            self.prompt_tokens = prompt[0]
        if completion:
            self.completion_tokens = (self.completion_tokens or 0) + sum(completion)
        if reason and reason != "None":
            self._engine_reason = reason
        if text is None:
            return ""  # a flags-only response
        self.responses += 1
        return text

    async def _composed(
        self, mapping: PipelineMapping, composed: ComposedPipeline, engine: LlmEngine
    ) -> AsyncGenerator[Delta, None]:
        """A pipeline composed here: its prompt model (unary), then its LLM stage's stream, with the
        limit and sampling its front door would give it (a refusal is the client's 400)."""
        inputs = self._pipeline_inputs(mapping, max_tokens=False, sampling=False)
        limit = composed.max_tokens(self.ask.sampling.max_tokens)
        own = composed.request_sampling(
            self.ask.sampling.pipeline(choice=self.ask.choice) if mapping.sampling_parameters_input else None
        )
        self._limit = limit
        answer = await self.client.infer(
            composed.prompt_model, composed.prompt_request(inputs), outputs=[PROMPT_OUTPUT]
        )
        prompt = _joined(answer[PROMPT_OUTPUT])
        sampling = composed.engine_sampling(own, limit)
        async for delta in self._engine(engine, composed.llm_model, prompt, sampling, images=False):
            yield delta

    def _pipeline_inputs(
        self, mapping: PipelineMapping, *, max_tokens: bool = True, sampling: bool = True
    ) -> dict[str, Any]:
        """The pipeline's inputs for this choice (its mapped names)."""
        inputs: dict[str, Any] = {
            mapping.text_input: np.array([self.ask.prompt.encode("utf-8")], dtype=np.object_)
        }
        if mapping.image_input and self.ask.images:
            inputs[mapping.image_input] = np.frombuffer(self.ask.images[0], dtype=np.uint8)
        limit = self.ask.sampling.max_tokens
        if max_tokens and mapping.max_tokens_input and limit is not None:
            spec = self.target.signature.find_input(mapping.max_tokens_input)
            dtype = spec.np_dtype if spec is not None and spec.np_dtype is not None else np.int32
            inputs[mapping.max_tokens_input] = np.array([limit], dtype=dtype)
        forwarded = self.ask.sampling.pipeline(choice=self.ask.choice) if sampling else {}
        if mapping.sampling_parameters_input and forwarded:
            inputs[mapping.sampling_parameters_input] = np.array(
                [json.dumps(forwarded).encode("utf-8")], dtype=np.object_
            )
        return inputs

    async def _pipeline(self, mapping: PipelineMapping) -> AsyncGenerator[Delta, None]:
        inputs = self._pipeline_inputs(mapping)
        out = mapping.text_output
        wanted = [out, *mapping.usage_outputs]
        if mapping.stream:
            async with self._streamer().stream(
                self.target.name,
                inputs,
                outputs=wanted,
                first_response_timeout=self.limits.request_timeout,
                response_timeout=self.limits.idle_timeout(self.target.name),
                total_timeout=self.limits.request_timeout,
            ) as stream:
                async for response in stream:
                    self._read_usage(mapping, response.outputs)
                    if out in response.outputs:
                        self.responses += 1
                        yield Delta(response.text(out))
        else:
            result = await self.client.infer(self.target.name, inputs, outputs=wanted)
            self.responses = 1
            self._read_usage(mapping, result)
            yield Delta(_joined(result[out]))
        self._finish()

    def _read_usage(self, mapping: PipelineMapping, outputs: Mapping[str, Any]) -> None:
        """The LLM stage's counts (totals) and finish reason, as the pipeline relays them with its
        last piece."""
        if mapping.prompt_tokens_output and mapping.prompt_tokens_output in outputs:
            self.prompt_tokens = int(outputs[mapping.prompt_tokens_output].reshape(-1)[0])
        if mapping.completion_tokens_output and mapping.completion_tokens_output in outputs:
            self.completion_tokens = int(outputs[mapping.completion_tokens_output].reshape(-1)[0])
        if mapping.finish_reason_output and mapping.finish_reason_output in outputs:
            reason = _joined(outputs[mapping.finish_reason_output])
            if reason and reason != "None":
                self._engine_reason = reason

    def _finish(self) -> None:
        limit = self.max_tokens
        # a pipeline's responses are at most its tokens (the engine may merge them): a lower bound
        produced = (
            self.completion_tokens
            if self.completion_tokens is not None
            else (
                self.responses if self.target.pipeline is not None and self.target.pipeline.stream else None
            )
        )
        reached = limit is not None and produced is not None and produced >= limit
        if self._engine_reason:  # the engine's own word, relayed through a pipeline too
            reached = self._engine_reason == "length"
        self.finish_reason = "length" if reached else "stop"

    async def collect(self) -> tuple[str, list[dict[str, dict[str, Any]]]]:
        """The whole answer (text, log-probability rows)."""
        texts: list[str] = []
        rows: list[dict[str, dict[str, Any]]] = []
        async for delta in self.deltas():
            texts.append(delta.text)
            rows.extend(delta.logprobs)
        return "".join(texts), rows


#: one JSON value at an offset of a string: (value, where it ends); the decoder's C scanner
_scan_json: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]

#: the engine's outputs :meth:`ChoiceRun.read_sse` reads (any other is not relayed, as in _read_engine)
_SSE_OUTPUTS = frozenset(
    {"text_output", "num_input_tokens", "num_output_tokens", "finish_reason", "logprobs"}
)


def _sse_flags(doc: dict[str, Any], has: frozenset[str]) -> tuple[list[int], list[int], str] | None:
    """An engine event's counts (prompt, completion: empty when it has none) and finish reason
    ("" when none); None when one of them is not of the type the engine sends."""
    prompt: list[int] | None = []
    completion: list[int] | None = []
    reason: str | None = ""
    if "num_input_tokens" in doc and "num_input_tokens" in has:
        prompt = _ints(doc["num_input_tokens"]) or None
    if "num_output_tokens" in doc and "num_output_tokens" in has:
        completion = _ints(doc["num_output_tokens"])
    if "finish_reason" in doc and "finish_reason" in has:
        value = doc["finish_reason"]
        reason = value if type(value) is str else _strings(value)
    if prompt is None or completion is None or reason is None:
        return None
    return prompt, completion, reason


def _ints(value: Any) -> list[int] | None:
    """A JSON count (one value, or a flat list) as ints; None when it is anything else."""
    values = value if type(value) is list else [value]
    return values if all(type(v) is int for v in values) else None


def _strings(value: Any) -> str | None:
    """A JSON string, or a flat list of them, joined; None when it is anything else."""
    if type(value) is list and all(type(v) is str for v in value):
        return "".join(value)
    return None


def _joined(tensor: Any) -> str:
    """A BYTES tensor's elements as one string."""
    return "".join(
        v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in tensor.reshape(-1).tolist()
    )


def _logprob_rows(tensor: Any) -> tuple[dict[str, dict[str, Any]], ...]:
    raw = tensor.reshape(-1)[0]
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    try:
        rows = json.loads(text)
    except ValueError:
        return ()
    return tuple(r for r in rows if isinstance(r, dict)) if isinstance(rows, list) else ()


def chosen_and_top(row: dict[str, dict[str, Any]], top: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The sampled token's entry (the backend lists it first) and the ``top`` best by rank."""
    entries = list(row.values())
    chosen = entries[0] if entries else {"decoded_token": "", "logprob": 0.0}
    best = sorted(entries, key=lambda e: int(e.get("rank") or 1 << 30))[:top]
    return chosen, best
