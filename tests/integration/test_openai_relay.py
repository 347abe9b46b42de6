"""The OpenAI front's relay (``relay.py``) on a real tritonserver 2.51, before the clock model.

The front runs in-process (FrontServer), streaming over Triton's HTTP generate_stream as ``serve``
runs it, so the tests see which path moved each piece: ``EngineRelay.run`` and
``DirectBody.write`` are counted, and the relay is turned off per test by giving no DirectBody
(``app.direct_body``). The relay changes nothing a client sees: the same events, usage and end as
the generic path; a slow reader still gets every piece (the relay hands over to the ASGI send
while the client's socket is full); a client that leaves cancels its Triton request.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.test_server_local import wait_until
from tritonkit.errors import StreamTimeoutError
from tritonkit.openai_front import FrontServer, FrontSettings, Limits
from tritonkit.openai_front import app as front_app
from tritonkit.openai_front.direct_body import DirectBody
from tritonkit.openai_front.relay import EngineRelay
from tritonkit.openai_front.templates import ChatTemplate

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
#: the slow reader's model: many big pieces, quickly, so the front's socket to the client fills
BIG_TEXT, BIG_PIECES = "x" * 8000, 600
#: the leaving client's model: an answer that would take days, unless cancelled
LONG_PIECES = 1_000_000
#: the silent model: 3 pieces, then nothing (no piece, no final flag) until Triton cancels it;
#: the front's idle limit for it
SILENT_AFTER, SILENT_LIMIT_S = 3, 1.0
#: the cut model: 5 pieces, then the final flag with no finish reason (a tail Triton lost)
CUT_AFTER = 5


def _variant(repository: Path, name: str, source: str = "clock_llm", **parameters: Any) -> None:
    """A copy of ``source`` (a clock model) named ``name`` with other (or more) parameters."""
    shutil.copytree(repository / source, repository / name)
    config = repository / name / "config.pbtxt"
    text = config.read_text().replace(f'name: "{source}"', f'name: "{name}"', 1)
    for key, value in parameters.items():
        text, found = re.subn(
            rf'(key: "{key}"\s*value \{{\s*string_value: )"[^"]*"', rf'\g<1>"{value}"', text
        )
        if not found:
            text += f'parameters {{\n  key: "{key}"\n  value {{\n    string_value: "{value}"\n  }}\n}}\n'
    config.write_text(text)


@pytest.fixture(scope="module")
def front(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from tritonkit.repository import build_spec
    from tritonkit.server import LocalTritonServer

    repository = tmp_path_factory.mktemp("relay") / "model_repository"
    build_spec(ROOT / "benchmarks" / "clock_llm.yaml", repository)
    build_spec(ROOT / "benchmarks" / "clock_llm_counted.yaml", repository, force=True)
    _variant(repository, "clock_llm_big", PIECES=BIG_PIECES, PIECE_TEXT=BIG_TEXT, GAP_MS=1, FIRST_DELAY_MS=1)
    cancelled = repository.parent / "cancelled.log"
    _variant(repository, "clock_llm_long", PIECES=LONG_PIECES, GAP_MS=50, CANCELLED_LOG=cancelled)
    silent = repository.parent / "silent.log"
    _variant(repository, "clock_llm_silent", STALL_AFTER=SILENT_AFTER, CANCELLED_LOG=silent)
    # the vLLM stage's whole contract (its last piece says why it ended), whole and cut short
    build_spec(ROOT / "benchmarks" / "clock_tiny_llm.yaml", repository, force=True)
    _variant(repository, "clock_llm_cut", source="tiny_llm", CUT_AFTER=CUT_AFTER)
    with LocalTritonServer(repository) as server:
        # as serve --openai-port runs it: answers stream over Triton's HTTP generate_stream
        template = ChatTemplate(
            "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}assistant:"
        )
        settings = FrontSettings(
            triton_url=server.grpc_url,
            stream_url=server.http_url,
            chat_templates={"clock_llm": template, "clock_llm_counted": template},
            limits=Limits(stream_idle_timeouts=(("clock_llm_silent", SILENT_LIMIT_S),)),
        )
        with FrontServer(settings) as served:
            yield {
                "server": server, "front": served, "cancelled": cancelled, "settings": settings,
                "silent": silent,
            }  # fmt: skip


class Seen:
    """What the relay did: runs, direct writes, and whether the client's socket was full at each
    stop (counted in the front's thread, read here)."""

    def __init__(self) -> None:
        self.runs = 0
        self.writes = 0
        self.stops_paused = 0  # stops before the answer ended, the client's socket full
        self.writes_unwritable = 0  # writes while paused, or to a body not writable: never
        self.cancelled_runs = 0  # the client left while the relay waited for Triton
        self.timeouts = 0  # the relay's timer ran out, leaving the stream's timeout error


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> Seen:
    counts = Seen()
    run, write, stop, expire = EngineRelay.run, DirectBody.write, EngineRelay._stop, EngineRelay._expire

    async def counted_run(self: EngineRelay) -> None:
        counts.runs += 1
        try:
            await run(self)
        except asyncio.CancelledError:
            counts.cancelled_runs += 1
            raise

    def counted_write(self: DirectBody, data: bytes) -> None:
        counts.writes += 1
        if self.paused() or not self.writable():
            counts.writes_unwritable += 1
        write(self, data)

    def counted_stop(self: EngineRelay) -> None:
        if self._body.paused() and not self._conn.complete:
            counts.stops_paused += 1
        stop(self)

    def counted_expire(self: EngineRelay) -> None:
        expire(self)
        if isinstance(self._conn.error, StreamTimeoutError):
            counts.timeouts += 1

    monkeypatch.setattr(EngineRelay, "run", counted_run)
    monkeypatch.setattr(EngineRelay, "_expire", counted_expire)
    monkeypatch.setattr(DirectBody, "write", counted_write)
    monkeypatch.setattr(EngineRelay, "_stop", counted_stop)
    return counts


def _events(body: bytes) -> list[Any]:
    """An SSE body's events (JSON, or the "[DONE]" mark), without what differs per request."""
    assert body.endswith(b"\n\n"), body[-200:]
    events: list[Any] = []
    for block in body[:-2].split(b"\n\n"):
        assert block.startswith(b"data: ") and b"\n" not in block, block[:200]
        data = block[6:].decode()
        if data == "[DONE]":
            events.append(data)
            continue
        event = json.loads(data)
        event.pop("id", None), event.pop("created", None)
        events.append(event)
    return events


def _post(front: dict[str, Any], path: str, body: dict[str, Any]) -> bytes:
    with httpx.Client(timeout=120) as client:
        response = client.post(front["front"].url + path, json=body)
        assert response.status_code == 200, response.text
        return response.content


ASKS = [
    ("/v1/completions", {"model": "clock_llm_counted", "prompt": "one two three", "max_tokens": 32}),
    ("/v1/completions", {"model": "clock_llm", "prompt": "hello", "max_tokens": 8, "echo": True}),
    (
        "/v1/chat/completions",
        {"model": "clock_llm_counted", "messages": [{"role": "user", "content": "a b"}]},
    ),
    (
        "/v1/chat/completions",
        {"model": "clock_llm", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5},
    ),
]


@pytest.mark.parametrize(("path", "ask"), ASKS, ids=["completion", "echo", "chat", "chat-uncounted"])
def test_relayed_stream_is_event_for_event_the_generic_paths_and_joins_to_the_unary_answer(
    front: dict[str, Any], seen: Seen, monkeypatch: pytest.MonkeyPatch, path: str, ask: dict[str, Any]
) -> None:
    streamed = {**ask, "stream": True, "stream_options": {"include_usage": True}}
    relayed = _events(_post(front, path, streamed))
    assert seen.runs > 0 and seen.writes > 0, "the relay moved no piece"
    runs, writes = seen.runs, seen.writes
    monkeypatch.setattr(front_app, "direct_body", lambda scope: None)  # the generic path only
    generic = _events(_post(front, path, streamed))
    assert (seen.runs, seen.writes) == (runs, writes)
    assert relayed == generic
    assert relayed[-1] == "[DONE]" and relayed[-2]["choices"] == []
    usage = relayed[-2]["usage"]
    unary = json.loads(_post(front, path, ask))
    assert usage == unary["usage"]
    if "clock_llm_counted" in ask["model"]:
        assert usage["completion_tokens"] == 32 and usage["prompt_tokens"] > 0
    choices = [e["choices"][0] for e in relayed[:-2]]
    if path.endswith("chat/completions"):
        text = "".join(c["delta"].get("content") or "" for c in choices)
        assert text == unary["choices"][0]["message"]["content"]
    else:
        text = "".join(c["text"] for c in choices)
        assert text == unary["choices"][0]["text"]
    assert text.count("tick") == ask.get("max_tokens", 32)
    assert choices[-1]["finish_reason"] == unary["choices"][0]["finish_reason"]
    assert all(c["finish_reason"] is None for c in choices[:-1])


def _request(front: dict[str, Any], body: dict[str, Any], *, rcvbuf: int | None = None) -> socket.socket:
    """A raw HTTP/1.1 POST of a streamed completion (the connection closes after the answer)."""
    sock = socket.socket()
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)  # before connect: the window
    sock.connect(("127.0.0.1", front["front"].port))
    data = json.dumps(body).encode()
    sock.sendall(
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Connection: close\r\nContent-Length: %d\r\n\r\n%b" % (len(data), data)
    )
    return sock


def _dechunk(raw: bytes) -> bytes:
    """An HTTP/1.1 response's chunked body (the whole response, to its last chunk)."""
    head, _, rest = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and b"transfer-encoding: chunked" in head.lower(), head
    body = bytearray()
    while True:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            assert rest == b"\r\n", rest[:100]
            return bytes(body)
        body += rest[:size]
        assert rest[size : size + 2] == b"\r\n"
        rest = rest[size + 2 :]


def test_slow_reader_gets_every_piece_in_order_as_the_relay_hands_over_while_its_socket_is_full(
    front: dict[str, Any], seen: Seen
) -> None:
    sock = _request(
        front,
        {"model": "clock_llm_big", "prompt": "p", "max_tokens": BIG_PIECES, "stream": True},
        rcvbuf=4096,
    )
    with sock:
        # reading nothing: the front's socket fills and uvicorn pauses writing; the relay stops
        assert wait_until(lambda: seen.stops_paused > 0, 60), f"never paused: {vars(seen)}"
        raw = bytearray()
        while chunk := sock.recv(2048):  # then slowly, a little at a time, to the end
            raw += chunk
    events = _events(_dechunk(bytes(raw)))
    assert events[-1] == "[DONE]" and events[-2]["choices"][0]["finish_reason"] == "stop"
    texts = [e["choices"][0]["text"] for e in events[:-2]]
    assert texts == [f"{BIG_TEXT}{i} " for i in range(BIG_PIECES)]  # every piece, in order, once
    assert seen.writes > 0 and seen.writes_unwritable == 0


def _cancelled(front: dict[str, Any]) -> list[int]:
    """The pieces each cancelled request of clock_llm_long had sent (the model's own record)."""
    log: Path = front["cancelled"]
    return [int(line) for line in log.read_text().split()] if log.exists() else []


def test_client_leaving_a_relayed_stream_cancels_its_triton_request_and_the_front_serves_on(
    front: dict[str, Any], seen: Seen
) -> None:
    before = len(_cancelled(front))
    sock = _request(
        front, {"model": "clock_llm_long", "prompt": "p", "max_tokens": LONG_PIECES, "stream": True}
    )
    with sock:
        got = b""
        while got.count(b"tick") < 3:  # pieces came, the later ones through the relay
            chunk = sock.recv(65536)
            assert chunk, got
            got += chunk
        assert wait_until(lambda: seen.writes > 0, 30), vars(seen)
    assert wait_until(lambda: seen.cancelled_runs == 1, 30), vars(seen)  # left during the relay
    # the answer would take LONG_PIECES * 50 ms: it ends only because the front cancelled it
    assert wait_until(lambda: len(_cancelled(front)) == before + 1, 30), "Triton never cancelled it"
    assert _cancelled(front)[-1] < LONG_PIECES
    url = front["front"].url
    assert wait_until(lambda: "tritonkit_openai_requests_active 0" in httpx.get(url + "/metrics").text, 30)
    metrics = httpx.get(url + "/metrics").text
    assert re.search(
        r'requests_total\{model="clock_llm_long",endpoint="completions",status="499",[^}]*\} 1', metrics
    )
    again = _events(_post(front, "/v1/completions", {"model": "clock_llm", "prompt": "t", "stream": True}))
    assert "".join(e["choices"][0]["text"] for e in again[:-1]) == "".join(f"tick{i} " for i in range(32))


def test_request_timeout_running_out_in_the_relay_ends_the_stream_as_the_generic_path_does(
    front: dict[str, Any], seen: Seen, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The relay's own timer (no task waits on Triton while it relays) ends the stream with the
    same timeout error event, and the request is cancelled in the model, as the generic read's."""
    before = len(_cancelled(front))
    tight = dataclasses.replace(front["settings"], limits=Limits(request_timeout=1.0))
    body = {"model": "clock_llm_long", "prompt": "p", "max_tokens": LONG_PIECES, "stream": True}
    ends = []
    with FrontServer(tight) as served:
        for relayed in (True, False):
            if not relayed:
                monkeypatch.setattr(front_app, "direct_body", lambda scope: None)
            events = _events(_post({"front": served}, "/v1/completions", body))
            assert all(e["choices"][0]["text"].startswith("tick") for e in events[:-1])
            ends.append(events[-1])
            want = before + 1 + (not relayed)
            assert wait_until(lambda want=want: len(_cancelled(front)) == want, 30)
    assert seen.timeouts == 1 and seen.writes > 0, vars(seen)  # the first stream's, in the relay
    assert ends[0] == ends[1] and ends[0]["error"]["code"] == "timeout", ends


# -- a stage that goes silent mid-answer (issue #53) ---------------------------------------------


def _silent_cancels(front: dict[str, Any]) -> list[int]:
    log: Path = front["silent"]
    return [int(line) for line in log.read_text().split()] if log.exists() else []


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "unary"])
def test_a_stage_gone_silent_mid_answer_is_ended_as_a_server_error_cancelled_and_counted(
    front: dict[str, Any], stream: bool
) -> None:
    url = front["front"].url
    before = len(_silent_cancels(front))
    body = {"model": "clock_llm_silent", "prompt": "p", "max_tokens": 32, "stream": stream}
    with httpx.Client(timeout=120) as client:
        response = client.post(url + "/v1/completions", json=body)
    if stream:  # the pieces it sent, then the front's server-class error event, and no [DONE]
        assert response.status_code == 200
        blocks = response.content.strip().split(b"\n\n")
        events = [json.loads(b[6:]) for b in blocks if b.startswith(b"data: {")]
        assert "".join(e["choices"][0]["text"] for e in events[:-1]) == "tick0 tick1 tick2 "
        assert events[-1]["error"]["code"] == "stream_stalled", events[-1]
        assert b"[DONE]" not in response.content
    else:
        assert response.status_code == 504, response.text
        assert response.json()["error"]["code"] == "stream_stalled"
    # the stage saw its request cancelled after its 3 pieces
    assert wait_until(lambda: len(_silent_cancels(front)) == before + 1, 60), "the stage never saw the cancel"
    assert _silent_cancels(front)[-1] == SILENT_AFTER
    metrics = httpx.get(url + "/metrics").text
    assert re.search(r'stalled_streams_total\{model="clock_llm_silent"\} [1-9]', metrics), metrics


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "unary"])
def test_an_answer_that_ends_before_the_engines_last_piece_is_a_server_error_not_a_whole_answer(
    front: dict[str, Any], stream: bool
) -> None:
    """tritonserver 2.51's HTTP frontend was seen ending streams short of their last pieces under
    load (benchmarks/front_soak.py): an engine that marks its last piece with a finish reason
    shows the cut, and the client gets an error, never a shorter answer as if whole."""
    url = front["front"].url
    with httpx.Client(timeout=120) as client:
        for model in ("tiny_llm", "clock_llm_cut"):
            body = {"model": model, "prompt": "p", "max_tokens": 8, "stream": stream}
            response = client.post(url + "/v1/completions", json=body)
            whole = model == "tiny_llm"  # the same contract, its last piece carrying "length"
            if stream:
                assert response.status_code == 200
                blocks = response.content.strip().split(b"\n\n")
                events = [json.loads(b[6:]) for b in blocks if b.startswith(b"data: {")]
                text = "".join(e["choices"][0]["text"] for e in events if "choices" in e)
                assert text == "".join(f"tick{i} " for i in range(8 if whole else CUT_AFTER))
                if whole:
                    assert events[-1]["choices"][0]["finish_reason"] == "length", events[-1]
                    assert response.content.rstrip().endswith(b"data: [DONE]")
                else:
                    assert events[-1]["error"]["code"] == "answer_cut_short", events[-1]
                    assert events[-1]["error"]["type"] == "upstream_error"  # a 502: server-class
                    assert b"[DONE]" not in response.content
            elif whole:
                assert response.status_code == 200, response.text
                assert response.json()["choices"][0]["finish_reason"] == "length"
            else:
                assert response.status_code == 502, response.text
                assert response.json()["error"]["code"] == "answer_cut_short"
    metrics = httpx.get(url + "/metrics").text
    assert re.search(r'cut_short_answers_total\{model="clock_llm_cut"\} [1-9]', metrics), metrics
    assert 'cut_short_answers_total{model="tiny_llm"}' not in metrics


def test_infer_stream_exits_non_zero_with_a_message_when_the_stage_goes_silent(
    front: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    from tritonkit.cli.app import main

    server = front["server"]
    argv = ["infer", server.grpc_url, "clock_llm_silent", "-p", "grpc", "--stream", "--timeout", "1",
            "-i", "text_input=p", "-i", "stream=[true]"]  # fmt: skip
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 1
    err = capsys.readouterr().err
    assert "stalled: no response for 1s after response 3" in err and "Traceback" not in err
