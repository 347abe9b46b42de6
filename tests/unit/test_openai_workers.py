"""The front's workers: their count from --workers, and /metrics summed across them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tritonkit.errors import ConfigError
from tritonkit.openai_front.metrics import FrontMetrics, SharedMetrics
from tritonkit.openai_front.server import available_cpus, parse_workers


def test_workers_count_is_a_positive_number_or_auto() -> None:
    assert parse_workers("3") == 3 and parse_workers(2) == 2
    assert parse_workers("auto") == available_cpus() >= 1
    for bad in ("0", "-1", "two", ""):
        with pytest.raises(ConfigError, match="--workers"):
            parse_workers(bad)


def _worker_file(folder: Path, pid: int, metrics: FrontMetrics) -> None:
    state = metrics.state()
    state["pid"] = pid
    (folder / f"worker-{pid}.json").write_text(json.dumps(state))


def test_metrics_of_every_worker_are_summed_and_a_gone_worker_keeps_its_counts_not_its_load(
    tmp_path: Path,
) -> None:
    mine = FrontMetrics()
    mine.started()
    mine.first_token("m", 0.02)
    mine.tokens("m", prompt=5, completion=7)
    mine.finished("m", "chat", 200, 0.3)
    mine.started()  # in flight here

    other = FrontMetrics()
    other.started()
    other.first_token("m", 0.2)
    other.tokens("m", prompt=1, completion=2)
    other.tokens("m", prompt=1, completion=4, key="team-a")  # a key's counts are summed by its id
    other.finished("m", "chat", 200, 0.5)
    other.started()
    other.finished("m", "completions", 401, None)
    other.started()  # in flight there
    _worker_file(tmp_path, 1, other)  # pid 1 lives (init)

    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead = FrontMetrics()
    dead.started()
    dead.finished("m", "chat", 200, 0.1)
    dead.started()  # was in flight when it died: not in flight any more
    _worker_file(tmp_path, int(gone.stdout), dead)
    (tmp_path / "worker-9.tmp").write_text("{half")  # a worker writing now: ignored

    shared = SharedMetrics(mine, tmp_path)
    text = shared.render()
    assert 'tritonkit_openai_requests_total{model="m",endpoint="chat",status="200",key="none"} 3' in text
    refused = 'tritonkit_openai_requests_total{model="m",endpoint="completions",status="401",key="none"} 1'
    assert refused in text
    assert "tritonkit_openai_requests_active 2" in text
    assert 'tritonkit_openai_tokens_total{model="m",kind="completion",key="none"} 9' in text
    assert 'tritonkit_openai_tokens_total{model="m",kind="completion",key="team-a"} 4' in text
    assert 'tritonkit_openai_time_to_first_token_seconds_bucket{model="m",le="0.025"} 1' in text
    assert 'tritonkit_openai_time_to_first_token_seconds_count{model="m"} 2' in text
    assert 'tritonkit_openai_request_duration_seconds_count{model="m"} 3' in text


def test_a_worker_writes_its_share_and_leaves_nothing_in_flight_when_it_stops(tmp_path: Path) -> None:
    metrics = FrontMetrics()
    shared = SharedMetrics(metrics, tmp_path, interval=60).start()
    metrics.started()
    shared.flush()
    written = json.loads(shared.path.read_text())
    assert written["active"] == 1
    shared.stop()
    assert json.loads(shared.path.read_text())["active"] == 0
