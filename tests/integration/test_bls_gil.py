"""Triton 2.51's Python stub and BLS streams (see ``tritonkit/triton_side/bls_streams.py``).

A model that reads BLS streams in threads of its own and lets go of each at once leaves the stub's
utility thread to drop it without the GIL, and the stub dies; one that reads them the way
``bls_streams.py`` says (in ``execute``, one stream per instance at a time, released after the
stub's cleanup: what the LLM pipelines' front does) answers the same load, also beside CPU hogs.
If the "dies" test starts failing, the bundled Triton changed: update docs/known-issues.md.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests._examples import load_example
from tests.integration._bls_gil_repo import write_bls_gil_repository

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

plain = load_example("ensembles/plain_streams.py")
CLIENTS, EACH = 6, 60


@pytest.fixture()
def gil_server(tmp_path: Path) -> Iterator[Any]:
    from tritonkit.server import LocalTritonServer

    with LocalTritonServer(write_bls_gil_repository(tmp_path / "repo"), startup_timeout=120) as server:
        yield server


def _hammer(server: Any, model: str) -> list[str]:
    """CLIENTS threads each asking ``model`` EACH times (one gRPC stream each); what went wrong."""
    import tritonclient.grpc as grpcclient

    failures: list[str] = []

    def client() -> None:
        grpc = grpcclient.InferenceServerClient(server.grpc_address)
        try:
            for _ in range(EACH):
                stream = plain.stream_grpc(
                    grpc, model, {"IN": np.array([b"x"], dtype=np.object_)}, output="N"
                )
                if stream.error is not None or stream.text != "48":
                    failures.append(stream.error or stream.text)
                    return
        finally:
            grpc.close()

    threads = [threading.Thread(target=client, daemon=True) for _ in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return failures


@pytest.fixture()
def cpu_hogs() -> Iterator[None]:
    """Two busy processes (this box has two cores): the load under which threads reading BLS
    streams deadlocked the stub in the first round (docs/known-issues.md)."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def test_a_model_reading_its_bls_streams_as_bls_streams_says_survives_beside_cpu_hogs(
    gil_server: Any, cpu_hogs: None
) -> None:
    for _ in range(3):  # 1,080 streams; the threaded reader hung in the first 360 under this load
        assert _hammer(gil_server, "relay_safe") == []


def test_a_model_letting_go_of_a_finished_bls_stream_at_once_kills_its_stub_on_2_51(gil_server: Any) -> None:
    failures: list[str] = []
    for _ in range(3):  # 360 streams took it down in 30 s when measured; up to three times that
        failures = _hammer(gil_server, "relay")
        if failures:
            break
    # the stub dies: "Stub process 'relay_0_0' is not healthy", or requests it held never answered
    assert any("is not healthy" in f or "no response within" in f for f in failures), failures
