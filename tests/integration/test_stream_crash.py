"""Two Triton 2.51 behaviours behind the streaming pipelines' design (see ``_stream_crash_repo``).

1. A Python model updating a custom metric from concurrent threads crashes the server: the
   decoders' counters (ensembles/common/text_stream.py) take a lock.
2. A client leaving an ensemble's stream never reaches the running step: vlm_stream and
   arr_coc_stream are therefore decoupled Python models in front (their inputs fetched through
   BLS), not ensembles ending in a decoupled step.

Clients are tritonclient's gRPC stream (``stop_stream(cancel_requests=True)``) and raw SSE (the
connection closed). If a "dies" or "never tells" test starts failing, the bundled Triton changed:
update docs/pipelines.md and ensembles/common/text_stream.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests._examples import load_example
from tests.integration._stream_crash_repo import write_stream_crash_repository

pytestmark = pytest.mark.integration

plain = load_example("ensembles/plain_streams.py")
PROMPT = {"PROMPT": np.array([b"talk"], dtype=np.object_)}


@pytest.fixture()
def crash_server(tmp_path: Path) -> Iterator[Any]:
    from tritonkit.server import LocalTritonServer

    server = LocalTritonServer(write_stream_crash_repository(tmp_path / "repo"), startup_timeout=120)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _grpc(server: Any) -> Any:
    import tritonclient.grpc as grpcclient

    return grpcclient.InferenceServerClient(server.grpc_address)


def _concurrent_streams(
    server: Any, model: str, clients: int = 8, each: int = 10, deadline_s: float = 90.0
) -> tuple[list[Any], bool]:
    """``clients`` threads each streaming ``each`` answers; all stop at the first failed stream.

    Returns the streams and whether every client finished within ``deadline_s`` (a server left
    hung holds its clients forever; they are daemon threads, left behind).
    """
    results: list[Any] = []
    lock = threading.Lock()
    failed = threading.Event()

    def client() -> None:
        grpc = _grpc(server)
        try:
            for _ in range(each):
                if failed.is_set():
                    return
                stream = plain.stream_grpc(grpc, model, PROMPT, output="TEXT")
                with lock:
                    results.append(stream)
                if stream.error is not None:
                    failed.set()
                    return
        finally:
            grpc.close()

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + deadline_s
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    time.sleep(1.0)
    with lock:
        return list(results), not any(thread.is_alive() for thread in threads)


def _words(server: Any, model: str) -> float:
    import urllib.request

    with urllib.request.urlopen(server.metrics_url, timeout=10) as response:  # noqa: S310 - loopback
        for line in response.read().decode().splitlines():
            if line.startswith(f'talker_words_total{{model="{model}"}}'):
                return float(line.split()[-1])
    return 0.0


def test_triton_251_dies_when_a_python_model_updates_a_custom_metric_from_concurrent_threads(
    crash_server: Any,
) -> None:
    results, finished = _concurrent_streams(crash_server, "talker_unlocked")
    broken = [r.error for r in results if r.error is not None]
    if not finished:  # the other outcome: the server hangs and never answers those clients
        return
    assert broken, f"{len(results)} concurrent streams, all answered: the bundled Triton no longer crashes"
    # Mostly the server dies (SIGSEGV, or terminate() on boost::interprocess::lock_exception or
    # std::length_error: corrupted shared state); a run may leave it up with the model's streams
    # failing from then on, or hung.
    if not crash_server.running:
        logs = crash_server.logs()
        assert any(s in logs for s in ("Signal (11) received", "terminate called")), logs[-2000:]


def test_python_model_serves_concurrent_streams_when_its_metric_updates_take_a_lock(
    crash_server: Any,
) -> None:
    results, finished = _concurrent_streams(crash_server, "talker")
    assert finished and crash_server.running
    assert len(results) == 80 and all(r.error is None and r.final and len(r.pieces) == 40 for r in results)
    assert _words(crash_server, "talker") == 80 * 40


def _leave(server: Any, model: str, times: int) -> None:
    """Leave ``times`` streams after three pieces, gRPC and SSE in turn."""
    grpc = _grpc(server)
    try:
        for i in range(times):
            if i % 2:
                plain.stream_grpc(grpc, model, PROMPT, stop_after=3, output="TEXT")
            else:
                plain.stream_sse(server.http_address, model, PROMPT, stop_after=3, output="TEXT")
    finally:
        grpc.close()
    time.sleep(0.5)  # abandoned answers run 40 x 5 ms at most


def test_triton_251_never_tells_an_ensembles_running_step_that_the_client_left(crash_server: Any) -> None:
    _leave(crash_server, "talk", times=6)
    assert _words(crash_server, "talker") == 6 * 40  # every abandoned answer finished
    before = _words(crash_server, "talker")
    _leave(crash_server, "talker", times=6)  # called directly, the model sees the client leave
    assert 6 * 3 <= _words(crash_server, "talker") - before <= 6 * 6
    assert crash_server.running
