"""Retry policy and the client's retry loop (driven by tritonclient's own exception type)."""

from __future__ import annotations

import logging

import pytest
from tritonclient.utils import InferenceServerException

from tritonkit.client import AsyncTritonClient, KeyAuth, RetryPolicy, TritonClient
from tritonkit.client._errors import RETRY_AFTER_ATTR
from tritonkit.client.retry import parse_retry_after
from tritonkit.errors import AuthenticationError, InferenceError, ServerUnavailableError, ThrottledError

SECRET = "retry-secret-key-42"


def test_retry_policy_doubles_delay_within_jitter_when_retrying() -> None:
    policy = RetryPolicy(base_delay=0.5, max_delay=3.0, jitter=0.5)
    assert [policy.delay(n, rand=lambda: 0.0) for n in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert [policy.delay(n, rand=lambda: 1.0) for n in range(3)] == [0.25, 0.5, 1.0]


def test_retry_jitter_leaves_the_global_random_state_alone_when_drawn() -> None:
    """The caller's seeded ``random`` (and Hypothesis, which checks it) is not moved by a retry
    drawing its jitter, from any thread: the CI once failed a property test this way."""
    import random

    state = random.getstate()
    delays = [RetryPolicy(base_delay=1.0, jitter=1.0).delay(0) for _ in range(50)]
    with TritonClient("localhost:1", protocol="http") as client:
        client._rand()
    assert random.getstate() == state
    assert len(set(delays)) > 1 and all(0.0 <= d <= 1.0 for d in delays)  # still jittered


def test_retry_policy_uses_retry_after_capped_when_server_sends_it() -> None:
    policy = RetryPolicy(max_retry_after=10.0)
    assert policy.delay(0, retry_after=4.0) == 4.0
    assert policy.delay(3, retry_after=120.0) == 10.0


def test_retry_policy_rejects_values_when_out_of_range() -> None:
    with pytest.raises(ValueError):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError):
        RetryPolicy(jitter=2.0)


def test_parse_retry_after_reads_seconds_and_http_dates_when_present() -> None:
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past


class Flaky:
    """Fails with the given tritonclient exceptions, then answers 'ok'."""

    def __init__(self, *failures: BaseException) -> None:
        self.failures = list(failures)
        self.headers: list[dict[str, str] | None] = []

    def __call__(self, headers: dict[str, str] | None) -> str:
        self.headers.append(headers)
        if self.failures:
            raise self.failures.pop(0)
        return "ok"


def client(**kwargs: object) -> tuple[TritonClient, list[float]]:
    c = TritonClient("127.0.0.1:1", auth=KeyAuth(SECRET), **kwargs)  # type: ignore[arg-type]
    slept: list[float] = []
    c._sleep = slept.append
    c._rand = lambda: 0.0
    return c, slept


def ise(status: str, msg: str = "busy", retry_after: float | None = None) -> InferenceServerException:
    exc = InferenceServerException(msg=msg, status=status)
    setattr(exc, RETRY_AFTER_ATTR, retry_after)
    return exc


def test_client_retries_with_backoff_when_server_answers_503_then_recovers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    c, slept = client(retry=RetryPolicy(max_attempts=4, base_delay=0.1))
    fn = Flaky(ise("503"), ise("502"), ConnectionResetError(104, "reset"))
    with caplog.at_level(logging.INFO, logger="tritonkit.client"):
        assert c._call("inference on model 'm'", fn) == "ok"
    assert slept == [0.1, 0.2, 0.4]
    assert all(h == {"Authorization": f"Bearer {SECRET}"} for h in fn.headers)
    assert len(caplog.records) == 3 and all(SECRET not in r.getMessage() for r in caplog.records)


def test_client_honours_retry_after_when_throttled() -> None:
    c, slept = client(retry=RetryPolicy(max_attempts=2))
    assert c._call("x", Flaky(ise("429", retry_after=1.5))) == "ok"
    assert slept == [1.5]


def test_client_raises_throttled_after_all_attempts_when_429_persists() -> None:
    c, slept = client(retry=RetryPolicy(max_attempts=3, base_delay=0.1))
    with pytest.raises(ThrottledError, match="gave up after 3 attempts"):
        c._call("x", Flaky(*(ise("429") for _ in range(5))))
    assert len(slept) == 2


@pytest.mark.parametrize(
    ("status", "kind"), [("400", InferenceError), ("404", InferenceError), ("401", AuthenticationError)]
)
def test_client_does_not_retry_when_error_is_a_client_4xx(status: str, kind: type[Exception]) -> None:
    c, slept = client()
    fn = Flaky(ise(status, "no"))
    with pytest.raises(kind):
        c._call("x", fn)
    assert slept == [] and len(fn.headers) == 1


async def test_async_client_retries_when_grpc_is_unavailable() -> None:
    c = AsyncTritonClient("127.0.0.1:1", protocol="grpc", retry=RetryPolicy(max_attempts=2, base_delay=0.05))
    slept: list[float] = []

    async def sleep(d: float) -> None:
        slept.append(d)

    c._sleep = sleep
    c._rand = lambda: 0.0
    calls = Flaky(ise("StatusCode.UNAVAILABLE"), ise("StatusCode.UNAVAILABLE"))

    async def fn(h: dict[str, str] | None) -> str:
        return calls(h)

    with pytest.raises(ServerUnavailableError, match="gave up after 2 attempts"):
        await c._call("x", fn)
    assert slept == [0.05]
