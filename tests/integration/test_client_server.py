"""TritonClient / AsyncTritonClient against a real tritonserver started with restricted APIs.

The server runs ``--http-restricted-api`` and ``--grpc-restricted-protocol`` on every API, so
every call must carry the key (HTTP header ``tk-admin``, gRPC metadata
``triton-grpc-protocol-tk-admin``); it is restarted once in the middle of a run.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tests.integration._client_models import write_client_repository
from tritonkit.client import AsyncTritonClient, RestrictedApiAuth, RetryPolicy, TritonClient
from tritonkit.errors import (
    AuthenticationError,
    EndpointUnreachableError,
    InputMismatchError,
    RequestTimeoutError,
)

pytestmark = pytest.mark.integration

KEY = "tk-admin"
SECRET = f"s3cr3t-{secrets.token_hex(8)}"
APIS = "health,metadata,inference,model-config,model-repository,statistics,shared-memory,trace,logging"
PROTOCOLS = ["http", "grpc"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, triton_server_factory: Callable[..., Any]) -> Any:
    repo = write_client_repository(tmp_path_factory.mktemp("client_repo"))
    return triton_server_factory(
        repo,
        http_restricted_api=[f"{APIS}:{KEY}={SECRET}"],
        grpc_restricted_protocol=[f"{APIS}:{KEY}={SECRET}"],
    )


def url(server: Any, protocol: str) -> str:
    return str(server.http_url if protocol == "http" else server.grpc_url)


def auth() -> RestrictedApiAuth:
    return RestrictedApiAuth(KEY, SECRET)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_client_infers_with_auto_batch_dim_when_restricted_key_is_given(server: Any, protocol: str) -> None:
    with TritonClient(url(server, protocol), protocol=protocol, auth=auth()) as client:
        assert client.is_ready() and client.is_ready("add")
        a = np.array([1, 2, 3, 4], np.float32)
        out = client.infer("add", INPUT0=a, INPUT1=np.ones(4, np.float32))
        assert set(out) == {"SUM", "DIFF"}
        np.testing.assert_array_equal(out["SUM"], [[2, 3, 4, 5]])
        np.testing.assert_array_equal(out["DIFF"], [[0, 1, 2, 3]])
        text = client.infer("echo", TEXT=["héllo", "triton"])
        assert text["UPPER"].tolist() == ["HéLLO".encode(), b"TRITON"]  # bytes.upper(): ASCII only


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_client_splits_large_batch_by_max_batch_size_when_batch_exceeds_it(
    server: Any, protocol: str
) -> None:
    a = np.arange(40, dtype=np.float32).reshape(10, 4)
    with TritonClient(url(server, protocol), protocol=protocol, auth=auth()) as client:
        before = _batch_sizes(client)
        out = client.infer("add", INPUT0=a, INPUT1=a, outputs=["SUM"])
        after = _batch_sizes(client)
    assert list(out) == ["SUM"]
    np.testing.assert_array_equal(out["SUM"], a * 2)
    # Triton saw two batches of 4 and one of 2 (max_batch_size is 4).
    assert after.get(4, 0) - before.get(4, 0) == 2
    assert after.get(2, 0) - before.get(2, 0) == 1


def _batch_sizes(client: TritonClient) -> dict[int, int]:
    stats = client.statistics("add")["model_stats"][0]
    return {int(b["batch_size"]): int(b["compute_infer"]["count"]) for b in stats.get("batch_stats", [])}


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("credential", [None, "wrong-value-123"])
def test_client_is_refused_with_auth_error_when_restricted_key_is_missing_or_wrong(
    server: Any, protocol: str, credential: str | None
) -> None:
    provider = RestrictedApiAuth(KEY, credential) if credential else None
    with TritonClient(url(server, protocol), protocol=protocol, auth=provider) as client:
        with pytest.raises(AuthenticationError) as info:
            client.infer("add", INPUT0=np.zeros(4, np.float32), INPUT1=np.zeros(4, np.float32))
        with pytest.raises(AuthenticationError):
            client.is_ready()  # "not ready" would hide a wrong key
    text = str(info.value)
    assert "was refused" in text and KEY in text
    assert SECRET not in text and (credential is None or credential not in text)
    assert info.value.hint and "RestrictedApiAuth" in info.value.hint


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_client_raises_input_mismatch_before_sending_when_shape_is_wrong(server: Any, protocol: str) -> None:
    with TritonClient(url(server, protocol), protocol=protocol, auth=auth()) as client:
        with pytest.raises(InputMismatchError, match=r"input 'INPUT1' of model 'add' expects shape \[N, 4\]"):
            client.infer("add", INPUT0=np.zeros(4, np.float32), INPUT1=np.zeros(5, np.float32))
        with pytest.raises(InputMismatchError, match="no input named 'IMAGE'"):
            client.infer("echo", IMAGE=b"x")


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_async_client_infers_concurrent_chunks_when_batch_is_large(server: Any, protocol: str) -> None:
    a = np.random.default_rng(0).random((9, 4), dtype=np.float32)
    async with AsyncTritonClient(
        url(server, protocol), protocol=protocol, auth=auth(), max_concurrency=3
    ) as client:
        assert await client.is_ready()
        out = await client.infer("add", INPUT0=a, INPUT1=a)
        small = await client.infer("add", INPUT0=a[:2], INPUT1=a[:2])  # one request
        echo = await client.infer("echo", {"TEXT": ["a"]})
        with pytest.raises(InputMismatchError):
            await client.infer("add", INPUT0=a.astype(np.float64), INPUT1=a)
    np.testing.assert_allclose(out["SUM"], a * 2)
    np.testing.assert_allclose(small["DIFF"], np.zeros((2, 4)))
    assert echo["UPPER"].tolist() == [b"A"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_client_raises_request_timeout_when_model_is_slower_than_timeout(server: Any, protocol: str) -> None:
    with TritonClient(url(server, protocol), protocol=protocol, auth=auth(), request_timeout=0.5) as client:
        client.model_info("sleep")  # metadata first, so the timeout hits the inference itself
        waits: list[float] = []
        client._sleep = waits.append  # a retry would wait first
        with pytest.raises(RequestTimeoutError, match="timed out") as info:
            client.infer("sleep", SECONDS=[1.5])
    assert waits == [] and "gave up after" not in info.value.message  # gave up at the timeout, no retry
    assert info.value.hint and "request_timeout" in info.value.hint


def test_client_raises_unreachable_after_retries_when_nothing_listens(unused_tcp_port: int) -> None:
    with TritonClient(
        f"127.0.0.1:{unused_tcp_port}", retry=RetryPolicy(max_attempts=2, base_delay=0.01)
    ) as client:
        assert client.is_ready() is False
        with pytest.raises(EndpointUnreachableError, match="gave up after 2 attempts"):
            client.model_metadata("add")


def test_clients_recover_through_retries_when_server_restarts_mid_run(
    server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    policy = RetryPolicy(max_attempts=40, base_delay=0.1, max_delay=1.0)
    clients = {p: TritonClient(url(server, p), protocol=p, auth=auth(), retry=policy) for p in PROTOCOLS}
    results: dict[str, list[float]] = {p: [] for p in PROTOCOLS}
    errors: list[BaseException] = []
    restarted = threading.Event()

    def run(protocol: str) -> None:
        client = clients[protocol]
        try:
            n = 0
            while not restarted.is_set() or n < 3:
                n += 1
                out = client.infer("add", INPUT0=np.full(4, n, np.float32), INPUT1=np.ones(4, np.float32))
                results[protocol].append(float(out["SUM"][0, 0]) - n)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    with caplog.at_level(logging.INFO, logger="tritonkit.client"):
        threads = [threading.Thread(target=run, args=(p,)) for p in PROTOCOLS]
        for t in threads:
            t.start()
        server.restart()
        restarted.set()
        for t in threads:
            t.join(timeout=120)
    for c in clients.values():
        c.close()
    assert not errors, errors
    assert all(r and set(r) == {1.0} for r in results.values()), results
    retried = [r.getMessage() for r in caplog.records if "retry" in r.getMessage()]
    assert retried, "the restart should have forced at least one retry"
    assert all(SECRET not in m for m in retried)
