"""AsyncTritonClient: the asyncio client over tritonclient's ``http.aio`` / ``grpc.aio``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

from numpy.typing import NDArray

from tritonkit.client._client_base import _Common
from tritonkit.client._errors import classify
from tritonkit.client._inputs import ModelInfo, PreparedInput, merge
from tritonkit.client._stream import (
    AsyncResponseStream,
    ParamValue,
    StreamPlan,
    StreamResponse,
    StreamStats,
    next_wait,
)
from tritonkit.client._stream_transport import AsyncStreamTransport
from tritonkit.client._transport import AsyncTransport
from tritonkit.errors import EndpointUnreachableError, ServerUnavailableError

__all__ = ["AsyncTritonClient"]

T = TypeVar("T")


class AsyncTritonClient(_Common):
    """The asyncio twin of :class:`TritonClient` (tritonclient's ``http.aio`` / ``grpc.aio``)."""

    def _setup(self) -> None:
        self._transport, self._streams = self._transports(AsyncTransport, AsyncStreamTransport)
        self._sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    async def __aenter__(self) -> AsyncTritonClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self._transport.close()
        await self._streams.close()

    async def _headers(self) -> dict[str, str] | None:
        return self._merge(await self.auth.aheaders() if self.auth is not None else None)

    async def _call(self, action: str, fn: Callable[[dict[str, str] | None], Awaitable[T]]) -> T:
        attempt = 0
        while True:
            attempt += 1
            try:
                return await fn(await self._headers())
            except Exception as exc:  # every failure goes through classify() exactly once
                failure = classify(exc, self._context(action))
                await self._sleep(self._retry_delay(failure, exc, action, attempt))

    async def model_info(self, model: str, version: str = "") -> ModelInfo:
        info = self._models.get((model, version))
        if info is None:
            meta = await self.model_metadata(model, version)
            info = self._remember(model, version, meta, await self.model_config(model, version))
        return info

    async def model_metadata(self, model: str, version: str = "") -> dict[str, Any]:
        t = self._transport
        return await self._call(
            f"metadata request for model '{model}'", lambda h: t.metadata(model, version, h)
        )

    async def model_config(self, model: str, version: str = "") -> dict[str, Any]:
        t = self._transport
        return await self._call(f"config request for model '{model}'", lambda h: t.config(model, version, h))

    async def statistics(self, model: str = "", version: str = "") -> dict[str, Any]:
        t = self._transport
        return await self._call("statistics request", lambda h: t.statistics(model, version, h))

    async def is_ready(self, model: str | None = None, version: str = "") -> bool:
        t = self._transport
        try:
            if model is None:
                return await self._call("readiness check", t.server_ready)
            return await self._call(
                f"readiness check of model '{model}'", lambda h: t.model_ready(model, version, h)
            )
        except (EndpointUnreachableError, ServerUnavailableError):
            return False

    async def infer(
        self,
        model: str,
        inputs: Mapping[str, Any] | None = None,
        /,
        *,
        model_version: str = "",
        outputs: Sequence[str] | None = None,
        **named_inputs: Any,
    ) -> dict[str, NDArray[Any]]:
        """See :meth:`TritonClient.infer`; chunks go out concurrently (at most ``max_concurrency``)."""
        info = self._models.get((model, model_version)) or await self.model_info(model, model_version)
        chunks, wanted = self._infer_plan(info, model, inputs, named_inputs, outputs)
        if len(chunks) == 1:
            return await self._infer_chunk(model, chunks[0], model_version, wanted)
        gate = asyncio.Semaphore(self.max_concurrency)

        async def gated(chunk: list[PreparedInput]) -> dict[str, NDArray[Any]]:
            async with gate:
                return await self._infer_chunk(model, chunk, model_version, wanted)

        return merge(list(await asyncio.gather(*(gated(c) for c in chunks))))

    async def _infer_chunk(
        self, model: str, chunk: list[PreparedInput], version: str, wanted: Sequence[str]
    ) -> dict[str, NDArray[Any]]:
        t = self._transport
        return await self._call(
            f"inference on model '{model}'",
            lambda h: t.infer(model, chunk, version=version, outputs=wanted, headers=h),
        )

    def stream(
        self,
        model: str,
        inputs: Mapping[str, Any] | None = None,
        /,
        *,
        model_version: str = "",
        outputs: Sequence[str] | None = None,
        request_id: str = "",
        parameters: Mapping[str, ParamValue] | None = None,
        first_response_timeout: float | None = None,
        response_timeout: float | None = None,
        total_timeout: float | None = None,
        **named_inputs: Any,
    ) -> AsyncResponseStream:
        """See :meth:`TritonClient.stream`: ``async for r in client.stream(...)``.

        Nothing is checked or sent before the first ``__anext__`` (input errors surface there).
        Cancelling the iterating task cancels the request on the server.
        """
        waits = self._waits(first_response_timeout, response_timeout, total_timeout)
        stats = StreamStats()

        async def plan() -> StreamPlan:
            info = self._models.get((model, model_version)) or await self.model_info(model, model_version)
            return self._stream_plan(
                info, model, model_version, inputs, named_inputs, outputs, request_id, parameters, waits
            )

        return AsyncResponseStream(lambda stream: self._stream_responses(plan, stats, stream), stats)

    async def _open_stream(self, plan: StreamPlan, stats: StreamStats) -> Any:
        headers = await self._headers()
        if self.protocol == "grpc":
            total = plan.waits.total
            deadline = None if total is None else stats.started + total
            return await self._streams.open_grpc(plan.payload, headers, deadline=deadline)
        return await self._streams.open_http(plan, headers, first=next_wait(stats, plan.waits))

    async def _stream_responses(
        self, make_plan: Callable[[], Awaitable[StreamPlan]], stats: StreamStats, stream: AsyncResponseStream
    ) -> AsyncGenerator[StreamResponse, None]:
        plan = await make_plan()
        call: Any = None
        attempt = 0
        stats.started = time.monotonic()
        try:
            while True:  # retries, only until the first response
                attempt += 1
                try:
                    call = await self._open_stream(plan, stats)
                    response = await call.next(next_wait(stats, plan.waits))
                    stream.call, stream.waits = call, plan.waits
                    break
                except Exception as exc:
                    if call is not None:
                        await call.cancel()
                        call = None
                    await self._sleep(self._stream_retry_delay(exc, plan, attempt))
            while response is not None:
                stats.record()
                yield response
                if response.final:
                    return
                response = await call.next(next_wait(stats, plan.waits))
        except Exception as exc:
            self._end_stream(exc, plan, stats)
        finally:
            if call is not None:
                # Shielded: when the task was cancelled, the cancel must still reach the server.
                await asyncio.shield(call.cancel())
