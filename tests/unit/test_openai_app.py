"""The front's HTTP side before Triton is reached: keys, body limits, bad JSON, wrong fields,
unknown routes, readiness, and how client errors become OpenAI errors.

The Triton URL points at a closed port on 127.0.0.1: every request here is refused before the
front would call it, except readiness, which must say "not ready".
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from tritonkit.errors import (
    AuthenticationError,
    EndpointUnreachableError,
    InferenceError,
    InputMismatchError,
    RequestTimeoutError,
    ThrottledError,
)
from tritonkit.openai_front import ApiKeys, FrontSettings, Limits, create_app
from tritonkit.openai_front.auth import key_id
from tritonkit.openai_front.errors import error_of

pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402

KEY = "sk-unit"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def front() -> Iterator[Any]:
    settings = FrontSettings(
        triton_url=f"grpc://127.0.0.1:{_closed_port()}",
        api_keys=ApiKeys([KEY]),
        limits=Limits(max_body_bytes=1000),
    )
    with TestClient(create_app(settings)) as client:
        yield client


def _post(front: Any, body: Any, key: str | None = KEY, path: str = "/v1/chat/completions") -> Any:
    headers = {"authorization": f"Bearer {key}"} if key else {}
    if isinstance(body, bytes):
        return front.post(path, content=body, headers={**headers, "content-type": "application/json"})
    return front.post(path, json=body, headers=headers)


def _error(reply: Any) -> dict[str, Any]:
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return dict(error)


def test_front_refuses_missing_or_wrong_keys_with_401_before_reading_the_body(front: Any) -> None:
    for key in (None, "sk-wrong"):
        reply = _post(front, b"{not json", key)
        assert reply.status_code == 401 and _error(reply)["type"] == "authentication_error"
    reply = front.get("/v1/models")
    assert reply.status_code == 401 and _error(reply)["code"] == "invalid_api_key"


def test_front_refuses_a_body_past_the_limit_with_413(front: Any) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "x" * 2000}]}
    reply = _post(front, body)
    assert reply.status_code == 413 and _error(reply)["code"] == "request_too_large"

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        yield b'{"model": "m", "messages": "'
        yield b"x" * 2000
        yield b'"}'

    reply = front.post("/v1/completions", content=chunks(), headers={"authorization": f"Bearer {KEY}"})
    assert reply.status_code == 413


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (b"{not json", None),
        (b"[1, 2]", None),
        (
            {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": "hot"},
            "temperature",
        ),
        ({"model": "m", "messages": [{"role": "user", "content": "hi"}], "n": 0}, "n"),
        ({"messages": [{"role": "user", "content": "hi"}]}, "model"),
    ],
)
def test_front_answers_malformed_requests_with_400_in_openais_shape(
    front: Any, body: Any, param: str | None
) -> None:
    reply = _post(front, body)
    assert reply.status_code == 400
    error = _error(reply)
    assert error["type"] == "invalid_request_error" and error["param"] == param


def test_front_unknown_route_and_method_are_openai_errors(front: Any) -> None:
    assert front.get("/v1/nothing").status_code == 404 and _error(front.get("/v1/nothing"))
    reply = front.get("/v1/chat/completions")
    assert reply.status_code == 405 and _error(reply)


def test_front_is_not_ready_while_triton_cannot_be_reached_and_metrics_need_no_key(front: Any) -> None:
    assert front.get("/health/ready").status_code == 503
    _post(front, b"{not json")
    _post(front, b"{}", key="sk-wrong")
    text = front.get("/metrics").text
    ident = key_id(KEY)
    assert (
        f'tritonkit_openai_requests_total{{model="-",endpoint="chat",status="400",key="{ident}"}} 1' in text
    )
    # a refused key is counted under no key's id, and no key's text is ever in the metrics
    assert 'tritonkit_openai_requests_total{model="-",endpoint="chat",status="401",key="none"} 1' in text
    assert KEY not in text and "sk-wrong" not in text


@pytest.mark.parametrize(
    ("exc", "status"),
    [
        (InputMismatchError("bad input"), 400),
        (InferenceError("MAX_TOKENS is 500", status="INVALID_ARGUMENT"), 400),
        (InferenceError("refused", status=400), 400),
        (InferenceError("MAX_TOKENS is 500 (the model's error inside its gRPC stream)"), 400),
        (InferenceError("no model", status="NOT_FOUND"), 503),  # resolved, then unloaded
        (InferenceError("engine died", status="UNAVAILABLE"), 503),
        (InferenceError("Stub process 'llm_0_0' is not healthy."), 503),
        (InferenceError("model 'tiny_llm' is unavailable: its vLLM engine died"), 503),
        (InferenceError("Request for unknown model: 'tiny_llm' has no available versions"), 503),
        (InferenceError("boom", status="INTERNAL"), 502),
        (ThrottledError("busy"), 429),
        (EndpointUnreachableError("down"), 503),
        (RequestTimeoutError("slow"), 504),
        (AuthenticationError("front's own key is wrong"), 502),
        (RuntimeError("bug"), 500),
    ],
)
def test_error_of_maps_client_errors_to_the_status_the_caller_should_see(exc: Exception, status: int) -> None:
    error = error_of(exc)
    assert error.status == status
    if isinstance(exc, RuntimeError):
        assert "bug" not in error.message  # internals are logged, not shown


def test_a_503_says_server_error_and_when_to_come_back() -> None:
    error = error_of(InferenceError("Stub process 'echo_0_0' is not healthy."))
    assert error.status == 503 and error.type == "server_error"
    assert error.headers == {"retry-after": "5"}
    assert error_of(InferenceError("max_tokens must be at most 16")).headers == {}


def test_registry_calls_a_model_it_served_before_and_lost_unavailable_not_unknown() -> None:
    import asyncio
    import time

    from tritonkit.openai_front.errors import OpenAIError
    from tritonkit.openai_front.models import ModelRegistry

    registry = ModelRegistry(client=None)  # type: ignore[arg-type] # no scan happens below
    registry._known = {"llm"}
    registry._scanned = time.monotonic()
    with pytest.raises(OpenAIError) as lost:
        asyncio.run(registry.get("llm"))
    assert lost.value.status == 503 and lost.value.code == "model_unavailable"
    registry._scanned = time.monotonic()
    registry._rescan_after = 60.0
    with pytest.raises(OpenAIError) as unknown:
        asyncio.run(registry.get("never-served"))
    assert unknown.value.status == 404


class _ReadinessOnly:
    """A stand-in for the front's Triton client that answers only readiness (scripted) and
    remembers what it was asked: any other call fails, so a refusal is shown to come from the
    registry's own state, not from a request to Triton (no tritonserver can be stopped and
    reloaded on cue in a unit test; tests/integration/test_faults_llm.py does it for real)."""

    def __init__(self, ready: bool) -> None:
        self.ready = ready
        self.asked: list[str] = []
        self.forgotten: list[str] = []

    async def is_ready(self, model: str | None = None) -> bool:
        self.asked.append(str(model))
        return self.ready

    def forget(self, model: str | None = None) -> None:
        self.forgotten.append(str(model))


def test_registry_refuses_a_model_seen_down_at_once_and_serves_it_once_seen_ready() -> None:
    import asyncio
    import time

    from tritonkit.openai_front.errors import OpenAIError
    from tritonkit.openai_front.models import ModelRegistry

    client = _ReadinessOnly(ready=False)
    registry = ModelRegistry(client=client)  # type: ignore[arg-type]
    from tritonkit.openai_front.models import Target
    from tritonkit.signature import ModelSignature

    signature = ModelSignature(name="llm", version="", max_batch_size=0, inputs=(), outputs=())
    target = Target("llm", signature, 0)
    registry._known, registry._targets = {"llm"}, {"llm": target}
    registry._scanned = time.monotonic()

    async def watch_once() -> None:
        task = asyncio.ensure_future(registry.watch(period=0.01, check_timeout=5))
        while not client.asked:
            await asyncio.sleep(0.001)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(watch_once())  # Triton says not ready (the model is being reloaded)
    with pytest.raises(OpenAIError) as refused:
        asyncio.run(registry.get("llm"))
    assert refused.value.status == 503 and refused.value.code == "model_unavailable"
    assert refused.value.headers == {"retry-after": "5"}
    assert client.asked == ["llm"]  # the refusal asked Triton nothing more
    registry.seen("never-served", ready=False)  # not a model this front served: no state
    assert not registry.is_down("never-served")

    client.ready, client.asked = True, []
    asyncio.run(watch_once())  # back: served again, its cached signature dropped (a reload)
    assert asyncio.run(registry.get("llm")) is target
    assert client.forgotten == ["llm"] and not registry.is_down("llm")


class _SlowReadiness(_ReadinessOnly):
    """Readiness checks that answer only when ``answer`` is set (a busy server, or a busy loop)."""

    def __init__(self) -> None:
        super().__init__(ready=True)
        self.answer = False

    async def is_ready(self, model: str | None = None) -> bool:
        import asyncio

        self.asked.append(str(model))
        while not self.answer:
            await asyncio.sleep(0.001)
        return self.ready


def test_registry_keeps_a_ready_model_served_while_its_checks_time_out_when_the_server_is_busy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import asyncio
    import time

    from tritonkit.openai_front import models
    from tritonkit.openai_front.models import ModelRegistry, Target
    from tritonkit.signature import ModelSignature

    monkeypatch.setattr(models, "STALE_AFTER_S", 0.3)
    client = _SlowReadiness()
    registry = ModelRegistry(client=client)  # type: ignore[arg-type]
    signature = ModelSignature(name="llm", version="", max_batch_size=0, inputs=(), outputs=())
    target = Target("llm", signature, 0)
    registry._known, registry._targets = {"llm"}, {"llm": target}
    registry._scanned = time.monotonic()
    registry.seen("llm", ready=True)  # the last answer: ready

    async def watch_until(done: Any) -> None:
        task = asyncio.ensure_future(registry.watch(period=0.001, check_timeout=0.01))
        while not done():
            await asyncio.sleep(0.005)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    # checks that time out, a few of them, within the stale limit: still served, still "ready"
    asyncio.run(watch_until(lambda: len(client.asked) >= 3))
    assert not registry.is_down("llm") and registry.ready_recently()
    assert asyncio.run(registry.get("llm")) is target
    # no answer at all for longer than the limit: a hung server, down
    asyncio.run(watch_until(lambda: registry.is_down("llm")))
    assert registry.down() == ["llm"] and not registry.ready_recently()
    client.answer = True  # it answers again, ready: served again
    asyncio.run(watch_until(lambda: not registry.is_down("llm")))
    assert asyncio.run(registry.get("llm")) is target
