"""From a checked request to OpenAI's answer objects: unary bodies and SSE chunks.

``n`` choices run as ``n`` Triton requests at once; a stream interleaves their chunks (each
carries its ``index``). The first piece of the answer is awaited before any byte is sent, so a
request Triton refuses (a bad image, too many tokens) gets its 4xx status, not a 200 stream that
then fails.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncGenerator, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any

from tritonkit.client import AsyncTritonClient
from tritonkit.errors import StreamStalledError
from tritonkit.openai_front import sse
from tritonkit.openai_front.auth import ANONYMOUS
from tritonkit.openai_front.direct_body import DirectBody
from tritonkit.openai_front.errors import AnswerCutShortError, error_of
from tritonkit.openai_front.generate import Ask, ChoiceRun, Delta, check_ask, chosen_and_top
from tritonkit.openai_front.images import ImageFetcher
from tritonkit.openai_front.limits import Limits
from tritonkit.openai_front.metrics import FrontMetrics
from tritonkit.openai_front.models import ModelRegistry, Target
from tritonkit.openai_front.relay import EngineRelay
from tritonkit.openai_front.requests import ChatRequest, CompletionRequest, Sampling, conversation_text
from tritonkit.openai_front.tool_parsers import ToolStream, check_served, shape_answer
from tritonkit.openai_front.tools import Tools

log = logging.getLogger(__name__)

__all__ = ["Prepared", "Service"]

#: one item of the relayed choices: (choice index, a piece or None when that choice ended, its error)
_Item = tuple[int, Delta | None, BaseException | None]


@dataclass
class Prepared:
    """A request ready to run: its target, one run per choice and how to shape the answer."""

    target: Target
    runs: list[ChoiceRun]
    chat: bool
    stream: bool
    include_usage: bool
    #: completions ``echo``: the prompt, put before each choice's text
    echo: str = ""
    #: log-probabilities: None (not asked) or how many top entries per token
    top_logprobs: int | None = None
    #: the id of the API key that asked (metrics count tokens by it; never the key itself)
    key: str = ANONYMOUS
    #: the request's tools (answers read as tool calls) and the model's parser of them
    tools: Tools | None = None
    tool_parser: str | None = None
    #: the response's body written from event-loop callbacks (a stream served by the front's
    #: uvicorn protocol; see :mod:`tritonkit.openai_front.relay`); None: pieces go the ASGI way
    direct: DirectBody | None = None

    @property
    def with_tools(self) -> bool:
        return self.tools is not None and self.tools.offered

    @property
    def object(self) -> str:
        return "chat.completion" if self.chat else "text_completion"


@dataclass(eq=False)
class Service:
    """Turns checked requests into answers, through tritonkit's async client."""

    client: AsyncTritonClient
    registry: ModelRegistry
    _: KW_ONLY
    limits: Limits
    fetcher: ImageFetcher
    metrics: FrontMetrics
    #: the client that streams answers (see :class:`ChoiceRun`); None: ``client``
    streams: AsyncTritonClient | None = None

    # -- preparing -------------------------------------------------------------------------
    async def prepare_chat(self, request: ChatRequest) -> Prepared:
        target = await self.registry.get(request.model)
        parts = request.images
        tools = request.tools
        if tools is not None:
            template = target.template
            check_served(
                tools,
                model=target.name,
                llm_stage=target.engine is not None,
                template_takes_tools=template is None or template.takes_tools,
                parser=target.tool_parser,
            )
        check_ask(target, request.sampling, len(parts), chat=True)
        images = tuple(await self.fetcher.load(parts))
        if target.template is not None and target.engine is not None:
            offered = tools.template_tools() if tools is not None else None
            prompt = target.template.render(request.messages, offered)
        else:
            prompt = conversation_text(request.messages)
        top = request.sampling.logprobs if request.logprobs else None
        return Prepared(
            target,
            self._runs(target, prompt, request.sampling, images, request.n),
            True,
            request.stream,
            request.include_usage,
            top_logprobs=top,
            tools=tools,
            tool_parser=target.tool_parser,
        )

    async def prepare_completion(self, request: CompletionRequest) -> Prepared:
        target = await self.registry.get(request.model)
        check_ask(target, request.sampling, 0, chat=False)
        return Prepared(
            target,
            self._runs(target, request.prompt, request.sampling, (), request.n),
            False,
            request.stream,
            request.include_usage,
            echo=request.prompt if request.echo else "",
            top_logprobs=request.sampling.logprobs,
        )

    def _runs(
        self, target: Target, prompt: str, sampling: Sampling, images: tuple[bytes, ...], n: int
    ) -> list[ChoiceRun]:
        asks = [Ask(prompt, sampling, images, choice=i) for i in range(n)]
        return [ChoiceRun(self.client, target, ask, self.limits, streams=self.streams) for ask in asks]

    # -- running ---------------------------------------------------------------------------
    async def unary(self, prepared: Prepared, started: float) -> dict[str, Any]:
        first: list[float] = []

        async def one(run: ChoiceRun) -> tuple[str, list[dict[str, Any]]]:
            texts: list[str] = []
            rows: list[dict[str, Any]] = []
            async for delta in _closing(run.deltas()):
                if not first:
                    first.append(time.monotonic())
                texts.append(delta.text)
                rows.extend(delta.logprobs)
            return "".join(texts), rows

        tasks = [asyncio.create_task(one(r)) for r in prepared.runs]
        try:
            answers = await asyncio.gather(*tasks)
        except BaseException as exc:
            self._count_failure(prepared, exc)
            for task in tasks:  # one choice failed (or the client left): stop the others too
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        if first:
            self.metrics.first_token(prepared.target.name, first[0] - started)
        choices = []
        for i, (run, (text, rows)) in enumerate(zip(prepared.runs, answers, strict=True)):
            choice: dict[str, Any] = {"index": i, "finish_reason": run.finish_reason}
            logprobs = self._logprobs(prepared, rows, len(prepared.echo))
            if prepared.chat:
                content, calls, choice["finish_reason"] = shape_answer(
                    prepared.tools, prepared.tool_parser, text, run.finish_reason
                )
                choice["message"] = {"role": "assistant", "content": content}
                if calls:
                    choice["message"]["tool_calls"] = [call.message_entry() for call in calls]
                choice["logprobs"] = logprobs
            else:
                choice["text"] = prepared.echo + text
                choice["logprobs"] = logprobs
            choices.append(choice)
        body = self._head(prepared)
        body["choices"] = choices
        body["usage"] = self._usage(prepared)
        self._meter(prepared)
        return body

    async def open_stream(self, prepared: Prepared, started: float) -> AsyncGenerator[bytes, None]:
        """The SSE body; the first piece is awaited here, before the caller sends any byte."""
        relay: _Relay | _Pull = _Pull(prepared.runs[0]) if len(prepared.runs) == 1 else _Relay(prepared.runs)
        try:
            head = await relay.take()
            if head[0][2] is not None:
                raise head[0][2]
        except BaseException:
            await relay.close()
            raise
        self.metrics.first_token(prepared.target.name, time.monotonic() - started)
        return self._events(prepared, relay, head)

    async def _events(
        self, prepared: Prepared, relay: _Relay | _Pull, batch: list[_Item]
    ) -> AsyncGenerator[bytes, None]:
        """One body chunk per batch of pieces: the pieces that came while the last chunk was being
        sent go out together, a choice's consecutive pieces joined into one event (every token is
        there; only the events are fewer)."""
        chunks = sse.ChunkTemplate(
            self._head(prepared),
            chat=prepared.chat,
            usage_slot=prepared.include_usage,
        )
        offsets = [len(prepared.echo)] * len(prepared.runs)
        tools = prepared.tools if prepared.with_tools else None
        fast = self._fast_relay(prepared, chunks)
        streams = [ToolStream(tools, prepared.tool_parser) for _ in prepared.runs] if tools else []
        try:
            opening = self._opening(prepared, chunks, tool_calls=bool(streams))
            while True:
                out: list[bytes] = [opening] if opening else []  # with the first pieces: one write
                opening = b""
                failed: BaseException | None = None
                for index, text, rows, ended, error in _joined(batch):
                    if streams:
                        out.extend(chunks.fields(index, d) for d in streams[index].feed(text))
                    elif text or rows:
                        if prepared.top_logprobs is not None:
                            logprobs = self._logprobs(prepared, rows, offsets[index])
                            out.append(chunks.delta(index, text, logprobs))
                        else:
                            out.append(chunks.text(index, text))
                        offsets[index] += len(text)
                    if error is not None:
                        failed = error
                        break
                    if ended:
                        reason = prepared.runs[index].finish_reason
                        if streams:
                            deltas, reason = streams[index].end(reason)
                            out.extend(chunks.fields(index, d) for d in deltas)
                        out.append(chunks.finish(index, reason))
                if failed is not None:  # after the first byte only an event can say it
                    self._count_failure(prepared, failed, chunks.head["id"])
                    out.append(sse.event(error_of(failed).body()))
                    yield b"".join(out)
                    return
                if relay.left == 0 and not relay.pending:  # every choice ended, all of it is in out
                    if prepared.include_usage:
                        out.append(chunks.usage(self._usage(prepared)))
                    out.append(sse.DONE)
                    yield b"".join(out)
                    return
                if out:
                    yield b"".join(out)
                if fast is not None:  # the plain pieces, written where they arrive
                    await fast.run()
                batch = await relay.take()
        finally:
            await relay.close()
            self._meter(prepared)  # also what a stream that failed or lost its client produced

    def _count_failure(self, prepared: Prepared, exc: BaseException, answer: str = "") -> None:
        """Count and log an answer that failed on Triton's side: a stream the front ended because
        the model went silent past its idle limit, or one that ended short of the engine's last
        piece."""
        name = prepared.target.name
        if isinstance(exc, StreamStalledError):
            self.metrics.stalled(name)
            log.warning("%s: answer %s stalled and was ended: %s", name, answer or "-", exc.message)
        elif isinstance(exc, AnswerCutShortError):
            self.metrics.cut_short(name)
            log.warning("%s: answer %s ended before its last piece and was failed", name, answer or "-")

    @staticmethod
    def _opening(prepared: Prepared, chunks: sse.ChunkTemplate, *, tool_calls: bool) -> bytes:
        """What goes before the first pieces: each chat choice's role, each completion's echo."""
        if prepared.chat:
            content = None if tool_calls else ""
            return b"".join(chunks.opening(i, content) for i in range(len(prepared.runs)))
        if prepared.echo:
            return b"".join(chunks.echo(i, prepared.echo) for i in range(len(prepared.runs)))
        return b""

    @staticmethod
    def _fast_relay(prepared: Prepared, chunks: sse.ChunkTemplate) -> EngineRelay | None:
        """The relay of a stream's plain pieces: one choice of an engine, no log-probabilities,
        no tools (their chunks are shaped piece by piece here)."""
        if len(prepared.runs) != 1 or prepared.top_logprobs is not None or prepared.with_tools:
            return None
        return EngineRelay.of(prepared.runs[0], chunks.first_text, prepared.direct)

    # -- shaping ---------------------------------------------------------------------------
    @staticmethod
    def _head(prepared: Prepared) -> dict[str, Any]:
        prefix = "chatcmpl" if prepared.chat else "cmpl"
        return {
            "id": f"{prefix}-{uuid.uuid4().hex}",
            "object": prepared.object,
            "created": int(time.time()),
            "model": prepared.target.name,
            "system_fingerprint": None,
        }

    @staticmethod
    def _usage(prepared: Prepared) -> dict[str, int] | None:
        """OpenAI's ``usage``: the prompt once, the choices' completions summed; None when the
        model does not count its tokens (a pipeline without count outputs): no made-up figures."""
        prompt = prepared.runs[0].prompt_tokens
        completions = [r.completion_tokens for r in prepared.runs]
        if prompt is None or any(c is None for c in completions):
            return None
        completion = sum(c or 0 for c in completions)
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    def _meter(self, prepared: Prepared) -> None:
        """Count what the model counted, once per request, by model and key id."""
        prompt = prepared.runs[0].prompt_tokens
        completion = sum(r.completion_tokens or 0 for r in prepared.runs)
        self.metrics.tokens(prepared.target.name, prompt=prompt, completion=completion, key=prepared.key)

    @staticmethod
    def _logprobs(prepared: Prepared, rows: Sequence[dict[str, Any]], offset: int) -> dict[str, Any] | None:
        top = prepared.top_logprobs
        if top is None:
            return None
        if prepared.chat:
            content = []
            for row in rows:
                chosen, best = chosen_and_top(row, top)
                content.append(
                    {
                        **_token_entry(chosen),
                        "top_logprobs": [_token_entry(e) for e in best],
                    }
                )
            return {"content": content, "refusal": None}
        tokens, values, tops, offsets = [], [], [], []
        for row in rows:
            chosen, best = chosen_and_top(row, top)
            token = str(chosen.get("decoded_token") or "")
            tokens.append(token)
            values.append(float(chosen.get("logprob", 0.0)))
            tops.append({str(e.get("decoded_token") or ""): float(e.get("logprob", 0.0)) for e in best})
            offsets.append(offset)
            offset += len(token)
        return {"tokens": tokens, "token_logprobs": values, "top_logprobs": tops, "text_offset": offsets}


def _token_entry(entry: dict[str, Any]) -> dict[str, Any]:
    token = str(entry.get("decoded_token") or "")
    return {"token": token, "logprob": float(entry.get("logprob", 0.0)), "bytes": list(token.encode("utf-8"))}


async def _closing(deltas: AsyncGenerator[Delta, None]) -> AsyncGenerator[Delta, None]:
    """``deltas``, closed at once when the reader stops (its Triton request is cancelled then)."""
    try:
        async for delta in deltas:
            yield delta
    finally:
        await deltas.aclose()


def _joined(
    batch: list[_Item],
) -> list[tuple[int, str, list[dict[str, Any]], bool, BaseException | None]]:
    """``batch`` with each run of one choice's consecutive pieces joined: (index, text, log-prob
    rows, whether the choice ended there, the error that ended it)."""
    out: list[tuple[int, str, list[dict[str, Any]], bool, BaseException | None]] = []
    texts: list[str] = []
    rows: list[dict[str, Any]] = []
    current = -1
    for index, delta, error in batch:
        if index != current and (texts or rows):
            out.append((current, "".join(texts), rows, False, None))
            texts, rows = [], []
        current = index
        if delta is not None:
            texts.append(delta.text)
            rows.extend(delta.logprobs)
            continue
        out.append((index, "".join(texts), rows, error is None, error))
        texts, rows = [], []
        if error is not None:
            return out
    if texts or rows:
        out.append((current, "".join(texts), rows, False, None))
    return out


class _Pull:
    """One choice's pieces, read as the client is written to (no task of its own: with one choice,
    a reader task woken per piece cost more CPU per token than it saved, measured on the clock
    model at concurrency 48 and 128); the same interface as :class:`_Relay`."""

    def __init__(self, run: ChoiceRun) -> None:
        self.pending: list[_Item] = []
        self.left = 1
        self._deltas = run.deltas()

    async def take(self) -> list[_Item]:
        try:
            return [(0, await self._deltas.__anext__(), None)]
        except StopAsyncIteration:
            self.left = 0
            return [(0, None, None)]
        except Exception as exc:  # noqa: BLE001 - handed to the writer, which reports it
            self.left = 0
            return [(0, None, exc)]

    async def close(self) -> None:
        """Stop the choice if it still runs (its Triton request is cancelled)."""
        await self._deltas.aclose()


class _Relay:
    """The choices' pieces (``n`` > 1), read from Triton by one task per choice while the client is
    being written to; :meth:`take` hands over everything that came since the last take.

    Items are ``(index, delta, None)``, ``(index, None, None)`` when a choice ends, and
    ``(index, None, error)`` when it failed.
    """

    def __init__(self, runs: Sequence[ChoiceRun]) -> None:
        self.pending: list[_Item] = []
        self.left = len(runs)
        self._wake: asyncio.Future[None] | None = None
        self._tasks = [asyncio.create_task(self._pump(i, r)) for i, r in enumerate(runs)]

    def _put(self, item: _Item) -> None:
        self.pending.append(item)
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    async def _pump(self, index: int, run: ChoiceRun) -> None:
        try:
            async for delta in _closing(run.deltas()):
                self._put((index, delta, None))
        except Exception as exc:  # noqa: BLE001 - handed to the reader, which reports it
            self.left -= 1
            self._put((index, None, exc))
        else:
            self.left -= 1
            self._put((index, None, None))

    async def take(self) -> list[_Item]:
        """Everything that came since the last take (waits for at least one item)."""
        while not self.pending:
            self._wake = asyncio.get_running_loop().create_future()
            try:
                await self._wake
            finally:
                self._wake = None
        batch, self.pending = self.pending, []
        return batch

    async def close(self) -> None:
        """Stop every choice still running (their Triton requests are cancelled)."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
