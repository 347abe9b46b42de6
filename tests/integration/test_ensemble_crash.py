"""The Triton 2.51 ensemble crash that one bad request can trigger, and the pattern that avoids it.

Documents the bundled server's behaviour (see ``_crash_repo``): an ensemble step that fails
while a sibling step of the same scheduling batch is still being dispatched kills
tritonserver (fixed upstream in triton-inference-server/core#483, after 2.51). If the
"dies" test starts failing, the bundled Triton no longer has the bug: update the README's
Known issues and the ``ensemble-parallel-step-failure`` validator rule.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration._crash_repo import hammer, write_crash_repository

pytestmark = pytest.mark.integration


@pytest.fixture()
def crash_server(tmp_path: Path) -> Iterator[Any]:
    from tritonkit.server import LocalTritonServer

    server = LocalTritonServer(write_crash_repository(tmp_path / "repo"), startup_timeout=120)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_gated_ensemble_answers_every_bad_request_400_and_stays_up_when_hammered(
    crash_server: Any,
) -> None:
    result = hammer(crash_server, "gated", requests=1000, concurrency=4, deadline_s=60)
    assert not result.server_died, result
    assert result.statuses == {"400": result.sent}, result
    assert result.sent == 1000, result


def test_fanout_ensemble_takes_triton_251_down_when_a_step_fails_beside_a_sibling(
    crash_server: Any,
) -> None:
    # Crashed within 12..4,700 requests (0.5-6 s) in every run on a 2-core box, concurrency 1-8;
    # the same race can instead leave the ensemble wedged (seen with the old arr_coc over gRPC).
    result = hammer(crash_server, "fanout", requests=100_000, concurrency=4, deadline_s=45)
    if not result.server_died:
        # the other outcome of the same bug: the server stays up but the ensemble never answers
        probe = hammer(crash_server, "fanout", requests=1, concurrency=1, deadline_s=30)
        assert probe.statuses == {"no answer": 1}, (
            f"survived {result.sent} requests in {result.seconds:.0f}s and still answers: {result.statuses}"
        )
        return
    assert "Signal (11) received" in crash_server.logs()
