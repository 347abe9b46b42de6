"""The OpenAI front's relay of an engine's plain pieces (``relay.py``), the reader of Triton's
events it uses (``ChoiceRun.read_sse``) and the body it writes to (``direct_body.py``).

The relay must change nothing but the cost: ``read_sse`` reads an event as the generic path reads
it (``_read_engine(decode_sse_data(...))``) or leaves it, untouched, to that path; a DirectBody
writes the bytes uvicorn's own ``send`` writes; the relay stops, leaving what it does not read
queued, whenever the generic path must take over. The front on a real Triton:
tests/integration/test_openai_relay.py.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

import pytest

from tritonkit.client._inputs import ModelInfo, TensorInfo
from tritonkit.client._stream import StreamStats, StreamWaits, decode_sse_data
from tritonkit.client._stream_h1 import _Exchange
from tritonkit.errors import StreamTimeoutError
from tritonkit.openai_front import Limits
from tritonkit.openai_front.direct_body import EXTENSION, DirectBody, direct_body, protocol_class
from tritonkit.openai_front.generate import Ask, ChoiceRun
from tritonkit.openai_front.mapping import LlmEngine
from tritonkit.openai_front.models import Target
from tritonkit.openai_front.relay import EngineRelay
from tritonkit.openai_front.requests import Sampling
from tritonkit.signature import ModelSignature

STAGE_OUTPUTS = (
    TensorInfo("text_output", "BYTES", (-1,)),
    TensorInfo("finish_reason", "BYTES", (-1,)),
    TensorInfo("num_input_tokens", "UINT32", (1,)),
    TensorInfo("num_output_tokens", "UINT32", (-1,)),
)
STAGE = ModelInfo("llm", "", 0, (TensorInfo("text_input", "BYTES", (1,)),), STAGE_OUTPUTS, decoupled=True)
#: the same stage, also answering log-probabilities
WITH_LOGPROBS = ModelInfo(
    "llm", "", 0, STAGE.inputs, (*STAGE_OUTPUTS, TensorInfo("logprobs", "BYTES", (-1,))), decoupled=True
)


def _run(info: ModelInfo = STAGE, *, wanted: Any = None, sampling: Sampling | None = None) -> ChoiceRun:
    """A choice of an LLM stage whose stream came as Triton's HTTP events (its call's model info)."""
    signature = ModelSignature(name="llm", version="", max_batch_size=0, inputs=(), outputs=())
    target = Target(
        "llm", signature, 0, engine=LlmEngine(token_counts=True, logprobs=False, finish_reason=True)
    )
    run = ChoiceRun(client=None, target=target, ask=Ask("p", sampling or Sampling()), limits=Limits())  # type: ignore[arg-type]
    run.stream = SimpleNamespace(call=SimpleNamespace(info=info, wanted=wanted))  # type: ignore[assignment]
    return run


def _noted(run: ChoiceRun) -> tuple[Any, ...]:
    return run.prompt_tokens, run.completion_tokens, run._engine_reason, run.responses


def _data(doc: Any) -> bytes:
    return b"data: " + json.dumps(doc).encode()


#: answers as the engine sends them, one list per answer (its events in order)
CORPUS: list[list[bytes]] = [
    [_data({"text_output": "Hello", "model_name": "llm", "model_version": "1"})],
    [_data({"text_output": ["Hel", "lo"]}), _data({"text_output": []})],
    [
        _data({"text_output": 'é\n\t"\\ \u2028 😀 \u0000'}),
        b'data: {"text_output":"\\ud83d\\ude00\\u00e9\\n"}',
    ],
    ['data: {"text_output":"ünï 😀"}'.encode()],
    [_data({"text_output": ""}), _data({"text_output": [""]})],
    [
        _data({"text_output": "a", "num_input_tokens": 7, "num_output_tokens": 1}),
        _data({"text_output": "b", "num_input_tokens": [7], "num_output_tokens": [2, 3]}),
        _data({"text_output": "c", "num_output_tokens": 1, "finish_reason": "None"}),
        _data({"finish_reason": "length", "num_output_tokens": 0}),  # flags only
    ],
    [_data({"text_output": "x", "finish_reason": ["len", "gth"]}), _data({"finish_reason": ["None"]})],
    [_data({"text_output": "x", "finish_reason": "stop"}), _data({"model_name": "llm", "id": "7"})],
    # names that are no output of the model (a parameter, logprobs it does not have) are not read
    [_data({"text_output": "y", "logprobs": [1.5], "triton_final_response": False, "seq": 3})],
]


@pytest.mark.parametrize("answer", CORPUS, ids=range(len(CORPUS)))
def test_read_sse_reads_each_event_as_the_generic_path_reads_it_decoded(answer: list[bytes]) -> None:
    fast, generic = _run(), _run()
    assert fast.reads_sse()
    for index, block in enumerate(answer):
        text = fast.read_sse(block)
        delta = generic._read_engine(decode_sse_data(block[6:], STAGE, index=index))
        assert text is not None, block
        assert text == (delta.text if delta is not None else ""), block
        assert _noted(fast) == _noted(generic), block
    fast._finish()
    generic._finish()
    assert fast.finish_reason == generic.finish_reason


REFUSED = {
    "error event": _data({"error": "engine died"}),
    "error beside text": _data({"text_output": "a", "error": "x"}),
    "not JSON": b"data: {text_output: 'a'}",
    "trailing garbage": _data({"text_output": "a"}) + b"}",
    "two objects": _data({"text_output": "a"}) + _data({"text_output": "b"})[6:],
    "trailing space": _data({"text_output": "a"}) + b" ",
    "JSON array": _data([{"text_output": "a"}]),
    "not UTF-8": b'data: {"text_output":"\xff"}',
    "text a number": _data({"text_output": 5, "num_input_tokens": 3}),
    "text null": _data({"text_output": None, "num_output_tokens": 1}),
    "text nested": _data({"text_output": [["a"]], "num_output_tokens": 1}),
    "count a bool": _data({"text_output": "a", "num_output_tokens": True}),
    "count a string": _data({"text_output": "a", "num_input_tokens": "3"}),
    "count a float": _data({"text_output": "a", "num_output_tokens": 1.0}),
    "count nested": _data({"text_output": "a", "num_output_tokens": [[1]]}),
    "count list of bools": _data({"text_output": "a", "num_output_tokens": [1, False]}),
    "prompt empty": _data({"text_output": "a", "num_input_tokens": []}),
    "reason a number": _data({"text_output": "a", "finish_reason": 1, "num_output_tokens": 1}),
    "reason null": _data({"text_output": "a", "finish_reason": None}),
    "two lines": _data({"text_output": "a"}) + b"\ndata: {}",
    "event name first": b"event: x\n" + _data({"text_output": "a"}),
    "comment": b": keep-alive",
    "no space after data:": b'data:{"text_output":"a"}',
    "done": b"data: [DONE]",
    "empty": b"",
}


@pytest.mark.parametrize("block", REFUSED.values(), ids=REFUSED.keys())
def test_read_sse_leaves_any_other_event_to_the_generic_path_noting_nothing(block: bytes) -> None:
    run = _run()
    assert run.reads_sse()
    run.read_sse(_data({"text_output": "a", "num_input_tokens": 4, "num_output_tokens": 1}))
    before = _noted(run)
    assert run.read_sse(block) is None
    assert _noted(run) == before


def test_read_sse_leaves_logprobs_to_the_generic_path_when_the_model_answers_them() -> None:
    run = _run(WITH_LOGPROBS)
    assert run.reads_sse()
    assert run.read_sse(_data({"text_output": "a", "logprobs": ["[]"], "num_output_tokens": 1})) is None
    assert _noted(run) == (None, None, "", 0)
    assert run.read_sse(_data({"text_output": "a", "num_output_tokens": 1})) == "a"  # none in it


def test_reads_sse_only_for_an_engines_text_answer_over_http_events() -> None:
    assert _run().reads_sse()
    assert not _run(wanted=["text_output"]).reads_sse()  # events read whole
    assert not _run(sampling=Sampling(logprobs=2)).reads_sse()
    no_info = _run()
    no_info.stream = SimpleNamespace(call=SimpleNamespace(info=None, wanted=None))  # type: ignore[assignment]
    assert not no_info.reads_sse()
    grpc = _run()
    grpc.stream = SimpleNamespace(call=object())  # type: ignore[assignment]
    assert not grpc.reads_sse()
    numbers = ModelInfo("llm", "", 0, STAGE.inputs, (TensorInfo("text_output", "INT32", (-1,)),))
    assert not _run(numbers).reads_sse()
    reasons = ModelInfo(
        "llm", "", 0, STAGE.inputs, (STAGE_OUTPUTS[0], TensorInfo("finish_reason", "INT32", (1,)))
    )
    assert not _run(reasons).reads_sse()
    pipeline = _run()
    pipeline.target = Target("p", pipeline.target.signature, 0, pipeline=None, engine=None)
    assert not pipeline.reads_sse()


# -- DirectBody: uvicorn's own framing, from its own request cycle ---------------------------------


class _Transport(asyncio.Transport):
    """What uvicorn's protocol writes, kept write by write."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closing = False

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 5000), "sockname": ("127.0.0.1", 8000)}.get(name, default)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass


App = Callable[[Any, Any, Any], Awaitable[None]]


async def _serve_one(
    app: App, request: bytes = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", *, protocols: list[Any] | None = None
) -> tuple[Any, _Transport]:
    """Feed ``request`` through the front's uvicorn protocol (also put in ``protocols``); the
    protocol and its transport once ``app`` ended."""
    from uvicorn.config import Config
    from uvicorn.server import ServerState

    cls = protocol_class()
    assert cls is not None, "uvicorn's request cycle changed: the relay is off"
    ended = asyncio.Event()

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        try:
            await app(scope, receive, send)
        finally:
            ended.set()

    config = Config(app=wrapped, lifespan="off", log_config=None)
    protocol = cls(config=config, server_state=ServerState(), app_state={}, _loop=asyncio.get_running_loop())
    if protocols is not None:
        protocols.append(protocol)
    transport = _Transport()
    protocol.connection_made(transport)
    protocol.data_received(request)
    await ended.wait()
    return protocol, transport


PIECES = [b"data: {}\n\n", "ünï 😀\r\n".encode(), b"x" * 70_000, b"0\r\n\r\n"]


def test_direct_body_writes_byte_for_byte_what_uvicorns_send_writes() -> None:
    seen: dict[str, Any] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        body = direct_body(scope)
        assert isinstance(body, DirectBody)
        transport = body._cycle.transport
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]}
        )
        pairs = []
        for piece in PIECES:
            assert body.writable()
            body.write(piece)
            direct = transport.writes.pop()
            await send({"type": "http.response.body", "body": piece, "more_body": True})
            pairs.append((direct, transport.writes.pop()))
        seen["pairs"] = pairs
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        seen["after"] = body.writable()

    _, transport = asyncio.run(_serve_one(app))
    assert [direct for direct, _ in seen["pairs"]] == [uvicorns for _, uvicorns in seen["pairs"]]
    assert b"transfer-encoding: chunked" in transport.writes[0]
    assert transport.writes[-1] == b"0\r\n\r\n" and seen["after"] is False  # complete


def test_protocol_puts_a_direct_body_of_this_request_in_its_scope() -> None:
    scopes: list[Any] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        scopes.append(scope)
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    protocol, _ = asyncio.run(
        _serve_one(app, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
    )
    body = scopes[0]["extensions"][EXTENSION]
    assert isinstance(body, DirectBody) and body._cycle is protocol.cycle and body._cycle.scope is scopes[0]
    assert direct_body({"type": "http"}) is None and direct_body({"extensions": {}}) is None


def test_direct_body_is_writable_only_in_a_started_chunked_body_the_client_can_take() -> None:
    states: dict[str, bool] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        body = direct_body(scope)
        assert body is not None
        cycle = body._cycle
        states["not started"] = body.writable()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        states["started"] = body.writable()
        cycle.flow.pause_writing()
        states["paused"], states["paused()"] = body.writable(), body.paused()
        cycle.flow.resume_writing()
        states["resumed"], states["resumed paused()"] = body.writable(), body.paused()
        cycle.transport.closing = True
        states["closing"] = body.writable()
        cycle.transport.closing = False
        cycle.disconnected = True
        states["disconnected"] = body.writable()
        cycle.disconnected = False
        states["again"] = body.writable()

    asyncio.run(_serve_one(app))
    assert states == {
        "not started": False,
        "started": True,
        "paused": False,
        "paused()": True,
        "resumed": True,
        "resumed paused()": False,
        "closing": False,
        "disconnected": False,
        "again": True,
    }

    sized: list[bool] = []

    async def fixed(scope: Any, receive: Any, send: Any) -> None:
        body = direct_body(scope)
        assert body is not None
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        sized.append(body.writable())  # not chunked: a DirectBody's chunk would break the body
        await send({"type": "http.response.body", "body": b"ok"})

    asyncio.run(_serve_one(fixed))
    assert sized == [False]


def test_direct_body_is_not_writable_once_the_client_left_the_connection() -> None:
    protocols: list[Any] = []
    states: list[bool] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        body = direct_body(scope)
        assert body is not None
        await send({"type": "http.response.start", "status": 200, "headers": []})
        states.append(body.writable())
        protocols[0].connection_lost(None)  # as uvicorn hears of it
        states.append(body.writable())

    asyncio.run(_serve_one(app, protocols=protocols))
    assert states == [True, False]


# -- EngineRelay: on a real connection reader, fed bytes as Triton sends them ---------------------


class _Body:
    """A DirectBody's interface, kept write by write; ``pause_after``: paused after that many writes."""

    def __init__(self, pause_after: int | None = None) -> None:
        self.writes: list[bytes] = []
        self.pause_after = pause_after
        self.open = True

    def writable(self) -> bool:
        return self.open and not self.paused()

    def paused(self) -> bool:
        return self.pause_after is not None and len(self.writes) >= self.pause_after

    def write(self, data: bytes) -> None:
        assert self.writable() and data
        self.writes.append(data)


HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def _chunk(*events: bytes) -> bytes:
    data = b"".join(e + b"\n\n" for e in events)
    return b"%x\r\n%b\r\n" % (len(data), data)


def _piece(text: str) -> bytes:
    return b"<" + text.encode() + b">"


def _relay(
    body: _Body, waits: StreamWaits | None = None
) -> tuple[EngineRelay, _Exchange, ChoiceRun, StreamStats]:
    conn = _Exchange()
    conn.data_received(HEAD)
    stats = StreamStats()
    stats.record()  # the first response, read the generic way
    run = _run()
    assert run.reads_sse()
    stream = SimpleNamespace(call=SimpleNamespace(connection=conn), stats=stats, waits=waits)
    return EngineRelay(stream, run, _piece, body), conn, run, stats  # type: ignore[arg-type]


def _text(text: str, **flags: Any) -> bytes:
    return _data({"text_output": text, **flags})


def test_relay_writes_each_reads_pieces_in_one_write_and_stops_at_the_answers_end() -> None:
    body = _Body()

    async def main() -> tuple[_Exchange, ChoiceRun, StreamStats]:
        relay, conn, run, stats = _relay(body)
        conn.data_received(_chunk(_text("a", num_input_tokens=3, num_output_tokens=1)))  # came before
        task = asyncio.ensure_future(relay.run())
        await asyncio.sleep(0)
        assert body.writes == [b"<a>"] and conn.sink is not None
        conn.data_received(
            _chunk(_text("b", num_output_tokens=1), _text(""), _text("c", num_output_tokens=2))
        )
        assert body.writes == [b"<a>", b"<b><c>"]  # written in the callback, one write
        conn.data_received(_chunk(_text("d")) + _chunk(_data({"finish_reason": "length"})) + b"0\r\n\r\n")
        await asyncio.wait_for(task, 5)
        return conn, run, stats

    conn, run, stats = asyncio.run(main())
    assert body.writes == [b"<a>", b"<b><c>", b"<d>"]
    assert conn.complete and not conn.events and conn.sink is None and conn.error is None
    assert (run.prompt_tokens, run.completion_tokens, run._engine_reason, run.responses) == (
        3,
        4,
        "length",
        5,
    )
    assert stats.responses == 1 + 6


def test_relay_stops_leaving_an_event_it_does_not_read_queued_for_the_generic_path() -> None:
    body = _Body()

    async def main() -> tuple[_Exchange, ChoiceRun]:
        relay, conn, run, _ = _relay(body)
        task = asyncio.ensure_future(relay.run())
        await asyncio.sleep(0)
        conn.data_received(_chunk(_text("a"), _data({"error": "engine died"}), _text("b")))
        await asyncio.wait_for(task, 5)
        conn.data_received(_chunk(_text("c")))  # after the relay stopped: not read by it
        return conn, run

    conn, run = asyncio.run(main())
    assert body.writes == [b"<a>"] and run.responses == 1
    assert list(conn.events) == [_data({"error": "engine died"}), _text("b"), _text("c")]
    assert conn.sink is None


def test_relay_stops_when_the_clients_socket_is_full_and_reads_nothing_more() -> None:
    body = _Body(pause_after=1)

    async def main() -> _Exchange:
        relay, conn, _, _ = _relay(body)
        task = asyncio.ensure_future(relay.run())
        await asyncio.sleep(0)
        conn.data_received(_chunk(_text("a"), _text("b")))
        await asyncio.wait_for(task, 5)  # paused after its write: the ASGI send drains
        return conn

    conn = asyncio.run(main())
    assert body.writes == [b"<a><b>"] and not conn.events

    async def already_paused() -> _Exchange:
        relay, conn, _, _ = _relay(body)
        conn.data_received(_chunk(_text("c")))
        await asyncio.wait_for(relay.run(), 5)
        return conn

    conn = asyncio.run(already_paused())
    assert body.writes == [b"<a><b>"] and list(conn.events) == [_text("c")]  # left to the generic path


def test_relay_stops_when_the_connection_breaks_leaving_its_error() -> None:
    body = _Body()

    async def main() -> _Exchange:
        relay, conn, _, _ = _relay(body)
        task = asyncio.ensure_future(relay.run())
        await asyncio.sleep(0)
        conn.data_received(_chunk(_text("a")))
        conn.connection_lost(None)
        await asyncio.wait_for(task, 5)
        return conn

    conn = asyncio.run(main())
    assert body.writes == [b"<a>"] and isinstance(conn.error, ConnectionResetError)


def test_relay_wait_running_out_is_the_streams_timeout_raised_by_the_generic_read() -> None:
    body = _Body()

    async def main() -> _Exchange:
        relay, conn, _, _ = _relay(body, StreamWaits(first=60, gap=0.05))
        await asyncio.wait_for(relay.run(), 30)  # nothing comes
        return conn

    conn = asyncio.run(main())
    assert isinstance(conn.error, StreamTimeoutError) and conn.sink is None and body.writes == []

    async def total() -> _Exchange:
        relay, conn, _, _ = _relay(body, StreamWaits(first=60, gap=60, total=0.05))
        await asyncio.wait_for(relay.run(), 30)
        return conn

    assert isinstance(asyncio.run(total()).error, StreamTimeoutError)


def test_relay_timer_rearms_while_pieces_keep_coming_and_fires_once_they_stop() -> None:
    body = _Body()

    async def main() -> tuple[list[Any], _Exchange]:
        relay, conn, _, stats = _relay(body, StreamWaits(first=60, gap=30))
        loop = asyncio.get_running_loop()
        relay._done = loop.create_future()
        seen = []
        stats.last = time.monotonic()  # a piece just came: the gap has not run out
        relay._expire()
        seen.append((relay._timer is not None, relay._done.done(), conn.error))
        assert relay._timer is not None
        seen.append(relay._timer.when() - loop.time())  # re-armed for the rest of the gap
        relay._timer.cancel()
        stats.last = time.monotonic() - 31  # none since
        relay._expire()
        seen.append((relay._timer is not None, relay._done.done(), conn.error))
        return seen, conn

    seen, conn = asyncio.run(main())
    assert seen[0] == (True, False, None)
    assert 29 < seen[1] <= 30
    assert seen[2][:2] == (False, True) and isinstance(seen[2][2], StreamTimeoutError)


def test_relay_of_needs_a_direct_body_and_an_http_events_stream() -> None:
    from tritonkit.client._stream_h1 import H1SseCall

    run = _run()
    assert EngineRelay.of(run, _piece, None) is None  # served the ASGI way only
    assert EngineRelay.of(run, _piece, _Body()) is None  # type: ignore[arg-type]  # not an H1SseCall
    call = H1SseCall(None, _Exchange(), STAGE, None)  # type: ignore[arg-type]
    run.stream = SimpleNamespace(call=call, stats=StreamStats(), waits=None)  # type: ignore[assignment]
    assert isinstance(EngineRelay.of(run, _piece, _Body()), EngineRelay)  # type: ignore[arg-type]
    run.stream = None
    assert EngineRelay.of(run, _piece, _Body()) is None  # type: ignore[arg-type]


def test_every_front_server_runs_uvicorn_with_the_direct_body_protocol() -> None:
    from tritonkit.openai_front import FrontSettings
    from tritonkit.openai_front.server import _config

    config = _config(FrontSettings(triton_url="127.0.0.1:1"), "127.0.0.1", 0)
    assert config.http is protocol_class() is not None  # serve, openai, --workers and FrontServer
