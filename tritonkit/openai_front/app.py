"""The HTTP side of the front: routes, body limits, keys, errors in OpenAI's shape, disconnects.

Routes: ``GET /v1/models``, ``GET /v1/models/{id}``, ``POST /v1/chat/completions``,
``POST /v1/completions`` (behind the API keys when there are any), ``GET /health/ready`` (Triton
and every model served are ready), ``GET /health/live`` (the front itself answers) and
``GET /metrics`` (open: probes and scrapers carry no key).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from tritonkit._extras import require
from tritonkit._timeouts import within
from tritonkit.client import AsyncTritonClient, RetryPolicy
from tritonkit.client.auth import AuthProvider
from tritonkit.errors import TritonKitError
from tritonkit.openai_front import sse
from tritonkit.openai_front.auth import ANONYMOUS, ApiKeys
from tritonkit.openai_front.direct_body import direct_body
from tritonkit.openai_front.errors import RETRY_AFTER_S, OpenAIError, error_of
from tritonkit.openai_front.images import ImageFetcher, UrlAllowList
from tritonkit.openai_front.limits import Limits
from tritonkit.openai_front.metrics import FrontMetrics, SharedMetrics
from tritonkit.openai_front.models import ModelRegistry
from tritonkit.openai_front.requests import parse_chat, parse_completion
from tritonkit.openai_front.service import Prepared, Service
from tritonkit.openai_front.templates import ChatTemplate

__all__ = ["FrontSettings", "create_app"]

log = logging.getLogger(__name__)

#: seconds /health/ready waits for Triton's answers before it says not ready
READY_CHECK_S = 1.0
#: seconds between the front's own looks at each served model's readiness (what a request for
#: a model that is down is refused 503 from, at once: see ModelRegistry.watch)
WATCH_PERIOD_S = 0.5
#: how the front's clients retry Triton: once, quickly (a connection Triton closed under a
#: keep-alive). A model or a server that is down is the caller's 503 with Retry-After at once,
#: not a request held through the client's backoff (the caller retries, as Retry-After says)
FRONT_RETRY = RetryPolicy(max_attempts=2, base_delay=0.05, max_delay=0.1, max_retry_after=0.5)
T = TypeVar("T")
_FEATURE = "the OpenAI front (tritonkit openai / serve --openai-port)"


@dataclass(frozen=True, kw_only=True)
class FrontSettings:
    """Where Triton is and how the front treats its own callers."""

    triton_url: str
    #: how the front reaches Triton: "grpc" (streams on one connection; preferred) or "http"
    protocol: str = "grpc"
    #: Triton's HTTP URL, to stream answers over its generate_stream (30-45% less CPU per token
    #: than grpc.aio, docs/openai.md); None: streams go over ``triton_url``
    stream_url: str | None = None
    auth: AuthProvider | None = None
    cacert: Path | None = None
    api_keys: ApiKeys | None = None
    limits: Limits = field(default_factory=Limits)
    image_urls: UrlAllowList = field(default_factory=UrlAllowList)
    chat_templates: Mapping[str, ChatTemplate] = field(default_factory=dict)
    #: model -> the parser of its tool calls (``hermes``, ``llama3_json``); default: its template's
    tool_parsers: Mapping[str, str] = field(default_factory=dict)
    #: a local model repository to read the LLM stages' tokenizers (chat templates) from
    repository: Path | None = None
    #: serve only these models (empty: every model that qualifies)
    models: tuple[str, ...] = ()
    #: with several worker processes: the folder where they share their metrics (see
    #: :class:`tritonkit.openai_front.metrics.SharedMetrics`); None: one process, in memory
    metrics_dir: Path | None = None
    #: compose LLM-decoder pipelines here (their prompt model, then their LLM stage's stream:
    #: as many answers at once as the engine, ``client/composed.py``); False: their own model answers
    compose_pipelines: bool = True


async def _race_disconnect(receive: Callable[[], Awaitable[Mapping[str, Any]]], work: Awaitable[T]) -> T:
    """``work``'s result, or its cancellation (499) when the client goes away first."""
    task = asyncio.ensure_future(work)

    async def gone() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    watcher = asyncio.ensure_future(gone())
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not task.done():
            task.cancel()
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
    if task.cancelled() or not task.done():
        await asyncio.gather(task, return_exceptions=True)
        raise OpenAIError("the client closed the request", status=499, code="client_closed_request")
    return task.result()


class _SseResponse:
    """An SSE body that stops (and cancels its Triton requests) as soon as the client leaves."""

    def __init__(
        self, body: AsyncIterator[bytes], on_end: Callable[[int], None], prepared: Prepared | None = None
    ) -> None:
        self.body = body
        self.on_end = on_end
        self.prepared = prepared  # given the request's DirectBody, if its server has one

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        headers = [
            (b"content-type", sse.MEDIA_TYPE.encode() + b"; charset=utf-8"),
            (b"cache-control", b"no-cache"),
            (b"x-accel-buffering", b"no"),  # nginx and AKS ingresses: do not hold the stream back
        ]
        if self.prepared is not None:
            self.prepared.direct = direct_body(scope)
        await send({"type": "http.response.start", "status": 200, "headers": headers})

        async def pump() -> None:
            async for chunk in self.body:
                last = chunk.endswith(sse.DONE)  # the answer's end and the body's end: one write
                await send({"type": "http.response.body", "body": chunk, "more_body": not last})
                if last:
                    return
            await send({"type": "http.response.body", "body": b"", "more_body": False})

        async def gone() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass

        sender, watcher = asyncio.ensure_future(pump()), asyncio.ensure_future(gone())
        status = 200
        try:
            await asyncio.wait({sender, watcher}, return_when=asyncio.FIRST_COMPLETED)
            if not sender.done():
                status = 499
            elif sender.exception() is not None:
                status = 499 if isinstance(sender.exception(), OSError) else 500
                if status == 500:
                    log.error("stream failed after its first byte: %s", error_of(sender.exception()).message)  # type: ignore[arg-type]
        finally:
            for task in (sender, watcher):
                task.cancel()
            await asyncio.gather(sender, watcher, return_exceptions=True)
            await self.body.aclose()  # type: ignore[attr-defined]
            self.on_end(status)


class _Handlers:
    """The routes' handlers, sharing the settings, the metrics and (once started) the service."""

    def __init__(self, settings: FrontSettings, client: AsyncTritonClient | None) -> None:
        self.settings = settings
        self.limits = settings.limits
        self.metrics = FrontMetrics()
        self.shared: SharedMetrics | None = None
        self._given_client = client
        self._service: Service | None = None

    @property
    def service(self) -> Service:
        if self._service is None:  # pragma: no cover - the lifespan sets it before any request
            raise OpenAIError("the front is starting", status=503, code="starting")
        return self._service

    @asynccontextmanager
    async def lifespan(self, app: Any) -> AsyncIterator[None]:
        settings, limits = self.settings, self.limits
        triton = self._given_client or AsyncTritonClient(
            settings.triton_url,
            protocol=settings.protocol,
            auth=settings.auth,
            cacert=settings.cacert,
            request_timeout=limits.request_timeout,
            max_concurrency=64,
            retry=FRONT_RETRY,
        )
        streams = (
            AsyncTritonClient(
                settings.stream_url,
                protocol="http",
                auth=settings.auth,
                cacert=settings.cacert,
                request_timeout=limits.request_timeout,
                retry=FRONT_RETRY,
            )
            if settings.stream_url
            else None
        )
        registry = ModelRegistry(
            triton,
            templates=settings.chat_templates,
            tool_parsers=settings.tool_parsers,
            repository=settings.repository,
            only=settings.models,
            compose=settings.compose_pipelines,
        )
        fetcher = ImageFetcher(limits=limits, allow=settings.image_urls)
        self._service = Service(
            triton, registry, limits=limits, fetcher=fetcher, metrics=self.metrics, streams=streams
        )
        if settings.metrics_dir is not None:
            self.shared = SharedMetrics(self.metrics, settings.metrics_dir).start()
        watcher = asyncio.ensure_future(registry.watch(WATCH_PERIOD_S, READY_CHECK_S))
        try:
            yield
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
            if self.shared is not None:
                self.shared.stop()
            if self._given_client is None:
                await triton.close()
            if streams is not None:
                await streams.close()

    @staticmethod
    def refusal(exc: BaseException) -> Any:
        from starlette.responses import JSONResponse

        error = error_of(exc)
        if error.status >= 500 and not isinstance(exc, OpenAIError):
            log.warning("request failed: %s", getattr(exc, "message", type(exc).__name__))
        return JSONResponse(error.body(), status_code=error.status, headers=error.headers)

    def guard(self, request: Any) -> str:
        """The id of the request's API key (``none`` on a front without keys); 401 without one."""
        if self.settings.api_keys is None:
            return ANONYMOUS
        return self.settings.api_keys.check(request.headers.get("authorization"))

    async def read_json(self, request: Any) -> Any:
        most = self.limits.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > most:
            raise OpenAIError(
                f"the request body is {declared} bytes; this server takes at most {most}",
                status=413,
                code="request_too_large",
            )
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > most:
                raise OpenAIError(
                    f"the request body is larger than {most} bytes", status=413, code="request_too_large"
                )
            chunks.append(chunk)
        try:
            return json.loads(b"".join(chunks))
        except (ValueError, RecursionError) as exc:
            raise OpenAIError(
                f"the request body is not valid JSON: {exc}", status=400, code="invalid_json"
            ) from exc

    async def list_models(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        try:
            self.guard(request)
            targets = await self.service.registry.targets()
        except Exception as exc:  # noqa: BLE001 - every failure becomes an OpenAI error
            return self.refusal(exc)
        return JSONResponse({"object": "list", "data": [t.card() for t in targets]})

    async def get_model(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        try:
            self.guard(request)
            target = await self.service.registry.get(request.path_params["model"])
        except Exception as exc:  # noqa: BLE001
            return self.refusal(exc)
        return JSONResponse(target.card())

    async def chat_completions(self, request: Any) -> Any:
        return await self.generate(request, chat=True)

    async def completions(self, request: Any) -> Any:
        return await self.generate(request, chat=False)

    async def generate(self, request: Any, *, chat: bool) -> Any:
        from starlette.responses import JSONResponse

        endpoint = "chat" if chat else "completions"
        started = time.monotonic()
        self.metrics.started()
        model, status, streaming, key = "-", 200, False, ANONYMOUS
        try:
            key = self.guard(request)
            body = await self.read_json(request)
            if isinstance(body, dict) and isinstance(body.get("model"), str):
                model = body["model"]
            front = self.service
            if chat:
                prepared = await front.prepare_chat(parse_chat(body, self.limits))
            else:
                prepared = await front.prepare_completion(parse_completion(body, self.limits))
            prepared.key = key
            model = prepared.target.name
            if prepared.stream:
                events = await _race_disconnect(request.receive, front.open_stream(prepared, started))
                streaming = True
                name = model

                def on_end(final: int) -> None:
                    self.metrics.finished(name, endpoint, final, time.monotonic() - started, key=key)

                return _SseResponse(events, on_end, prepared)
            answer = await _race_disconnect(request.receive, front.unary(prepared, started))
            return JSONResponse(answer)
        except Exception as exc:  # noqa: BLE001
            response = self.refusal(exc)
            status = response.status_code
            if status == 503 and self._service is not None:  # Triton says the model is down
                self._service.registry.seen(model, ready=False)
            return response
        finally:
            if not streaming:
                self.metrics.finished(model, endpoint, status, time.monotonic() - started, key=key)

    async def ready(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        registry = self.service.registry
        try:
            # bounded: a Triton that is gone must read as not ready now, not after the client's retries
            ok = await within(self.service.client.is_ready(), READY_CHECK_S)
        except TritonKitError:
            ok = False  # refused or unreachable: an answer, and it says down
        except asyncio.TimeoutError:
            # no answer in time is not "down": under load Triton (or this loop) is slow. What the
            # front's own watch heard last stands for STALE_AFTER_S; a hung server fails after it
            ok = registry.ready_recently()
        try:
            # asked even when the server is not ready (one model down makes it so): what it finds is
            # the state requests are refused from, so a 503 here means a 503 for that model's requests
            down = await within(registry.not_ready(), READY_CHECK_S)
        except (TritonKitError, asyncio.TimeoutError):
            down = registry.down()
        if ok and not down:
            return JSONResponse({"ready": True})
        body: dict[str, Any] = {"ready": False}
        if down:
            body["models_not_ready"] = down
        return JSONResponse(body, status_code=503, headers={"retry-after": str(RETRY_AFTER_S)})

    async def live(self, request: Any) -> Any:
        """200 while the front's own event loop answers: Triton's state is /health/ready's."""
        from starlette.responses import JSONResponse

        return JSONResponse({"live": True})

    async def prometheus(self, request: Any) -> Any:
        from starlette.responses import PlainTextResponse

        text = self.shared.render() if self.shared is not None else self.metrics.render()
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    async def http_error(self, request: Any, exc: Exception) -> Any:
        from starlette.responses import JSONResponse

        code = int(getattr(exc, "status_code", 500))
        detail = getattr(exc, "detail", "error")
        error = OpenAIError(f"{request.method} {request.url.path}: {detail}", status=code)
        return JSONResponse(error.body(), status_code=code)


def create_app(settings: FrontSettings, *, client: AsyncTritonClient | None = None) -> Any:
    """The front as a Starlette ASGI app (uvicorn runs it: :func:`tritonkit.openai_front.serve`).

    ``client``: an :class:`AsyncTritonClient` to use (and leave open); by default the app makes
    one from ``settings`` when it starts and closes it when it stops.
    """
    require("starlette", feature=_FEATURE)
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.routing import Route

    h = _Handlers(settings, client)
    routes = [
        Route("/v1/models", h.list_models, methods=["GET"]),
        Route("/v1/models/{model:path}", h.get_model, methods=["GET"]),
        Route("/v1/chat/completions", h.chat_completions, methods=["POST"]),
        Route("/v1/completions", h.completions, methods=["POST"]),
        Route("/health/ready", h.ready, methods=["GET"]),
        Route("/health/live", h.live, methods=["GET"]),
        Route("/metrics", h.prometheus, methods=["GET"]),
    ]
    app = Starlette(routes=routes, lifespan=h.lifespan, exception_handlers={HTTPException: h.http_error})
    app.state.metrics = h.metrics
    return app
