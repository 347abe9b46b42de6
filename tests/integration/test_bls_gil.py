"""Triton 2.51's Python stub and a BLS stream's last reference (see ``_bls_gil_repo``).

A model that lets go of a finished BLS stream at once leaves the stub's utility thread to drop it
without the GIL, and the stub dies; one that holds the stream a while (the LLM pipelines' front,
``ensembles/common/llm_front.py``) survives the same load. If the "dies" test starts failing, the
bundled Triton changed: update docs/known-issues.md and the front's ``BLS_HOLD_SECONDS``.
"""

from __future__ import annotations

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


@pytest.mark.xfail(
    strict=False,
    reason="the hold is a margin, not a guarantee: on the shared 2-core CI box (a full run, other "
    "servers alive) all 6 clients of the holding model once got no response within 30 s "
    "(docs/known-issues.md); it passed every run on a quiet box",
)
def test_a_model_holding_its_finished_bls_streams_survives(gil_server: Any) -> None:
    assert _hammer(gil_server, "relay_held") == []


def test_a_model_letting_go_of_a_finished_bls_stream_at_once_kills_its_stub_on_2_51(gil_server: Any) -> None:
    failures: list[str] = []
    for _ in range(3):  # 360 streams took it down in 30 s when measured; up to three times that
        failures = _hammer(gil_server, "relay")
        if failures:
            break
    # the stub dies: "Stub process 'relay_0_0' is not healthy", or requests it held never answered
    assert any("is not healthy" in f or "no response within" in f for f in failures), failures
