"""From a checked request to OpenAI's answer objects: unary bodies and SSE chunks.

``n`` choices run as ``n`` Triton requests at once; a stream interleaves their chunks (each
carries its ``index``). The first piece of the answer is awaited before any byte is sent, so a
request Triton refuses (a bad image, too many tokens) gets its 4xx status, not a 200 stream that
then fails.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncGenerator, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any

from tritonkit.client import AsyncTritonClient
from tritonkit.openai_front import sse
from tritonkit.openai_front.auth import ANONYMOUS
from tritonkit.openai_front.errors import error_of
from tritonkit.openai_front.generate import Ask, ChoiceRun, Delta, check_ask, chosen_and_top
from tritonkit.openai_front.images import ImageFetcher
from tritonkit.openai_front.limits import Limits
from tritonkit.openai_front.metrics import FrontMetrics
from tritonkit.openai_front.models import ModelRegistry, Target
from tritonkit.openai_front.requests import ChatRequest, CompletionRequest, Sampling, conversation_text

__all__ = ["Prepared", "Service"]

#: one event of the merged choices: (choice index, a piece, or None when that choice ended)
_Item = tuple[int, Delta | None]


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

    # -- preparing -------------------------------------------------------------------------
    async def prepare_chat(self, request: ChatRequest) -> Prepared:
        target = await self.registry.get(request.model)
        parts = request.images
        check_ask(target, request.sampling, len(parts), chat=True)
        images = tuple(await self.fetcher.load(parts))
        if target.template is not None and target.engine is not None:
            prompt = target.template.render(request.messages)
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
        return [
            ChoiceRun(self.client, target, Ask(prompt, sampling, images, choice=i), self.limits)
            for i in range(n)
        ]

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
        except BaseException:
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
                choice["message"] = {"role": "assistant", "content": text}
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
        items = _merge(prepared.runs)
        try:
            head = await items.__anext__()
        except StopAsyncIteration:
            head = None
        except BaseException:
            await items.aclose()
            raise
        self.metrics.first_token(prepared.target.name, time.monotonic() - started)
        return self._events(prepared, items, head)

    async def _events(
        self, prepared: Prepared, items: AsyncGenerator[_Item, None], head: _Item | None
    ) -> AsyncGenerator[bytes, None]:
        base = self._head(prepared)
        base["object"] = "chat.completion.chunk" if prepared.chat else "text_completion"
        usage_slot = {"usage": None} if prepared.include_usage else {}
        offsets = [len(prepared.echo)] * len(prepared.runs)
        choice: dict[str, Any]
        try:
            if prepared.chat:
                for i in range(len(prepared.runs)):
                    opening = {"role": "assistant", "content": ""}
                    choice = {"index": i, "delta": opening, "logprobs": None, "finish_reason": None}
                    yield sse.event({**base, "choices": [choice], **usage_slot})
            elif prepared.echo:
                for i in range(len(prepared.runs)):
                    choice = {"index": i, "text": prepared.echo, "logprobs": None, "finish_reason": None}
                    yield sse.event({**base, "choices": [choice], **usage_slot})
            item = head
            while item is not None:
                index, delta = item
                run = prepared.runs[index]
                if delta is None:
                    choice = {"index": index, "logprobs": None, "finish_reason": run.finish_reason}
                    if prepared.chat:
                        choice["delta"] = {}
                    else:
                        choice["text"] = ""
                    yield sse.event({**base, "choices": [choice], **usage_slot})
                elif delta.text or delta.logprobs:
                    logprobs = self._logprobs(prepared, list(delta.logprobs), offsets[index])
                    offsets[index] += len(delta.text)
                    choice = {"index": index, "logprobs": logprobs, "finish_reason": None}
                    choice.update(
                        {"delta": {"content": delta.text}} if prepared.chat else {"text": delta.text}
                    )
                    yield sse.event({**base, "choices": [choice], **usage_slot})
                try:
                    item = await anext_or_none(items)
                except Exception as exc:  # noqa: BLE001 - after the first byte only an event can say it
                    yield sse.event(error_of(exc).body())
                    return
            if prepared.include_usage:
                yield sse.event({**base, "choices": [], "usage": self._usage(prepared)})
            yield sse.DONE
        finally:
            await items.aclose()
            self._meter(prepared)  # also what a stream that failed or lost its client produced

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


async def anext_or_none(items: AsyncGenerator[_Item, None]) -> _Item | None:
    try:
        return await items.__anext__()
    except StopAsyncIteration:
        return None


async def _closing(deltas: AsyncGenerator[Delta, None]) -> AsyncGenerator[Delta, None]:
    """``deltas``, closed at once when the reader stops (its Triton request is cancelled then)."""
    try:
        async for delta in deltas:
            yield delta
    finally:
        await deltas.aclose()


async def _merge(runs: Sequence[ChoiceRun]) -> AsyncGenerator[_Item, None]:
    """The choices' pieces as they come, each followed by ``(index, None)`` when it ends."""
    if len(runs) == 1:
        async for delta in _closing(runs[0].deltas()):
            yield 0, delta
        yield 0, None
        return
    queue: asyncio.Queue[tuple[int, Delta | None, BaseException | None]] = asyncio.Queue()

    async def pump(index: int, run: ChoiceRun) -> None:
        try:
            async for piece in _closing(run.deltas()):
                await queue.put((index, piece, None))
            await queue.put((index, None, None))
        except Exception as exc:  # noqa: BLE001 - handed to the reader, which raises it
            await queue.put((index, None, exc))

    tasks = [asyncio.create_task(pump(i, r)) for i, r in enumerate(runs)]
    try:
        left = len(runs)
        while left:
            index, piece, error = await queue.get()
            if error is not None:
                raise error
            if piece is None:
                left -= 1
            yield index, piece
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
