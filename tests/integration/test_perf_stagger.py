"""A staggered closed-loop start against a real tritonserver: the batching-bound benchmark model
with one instance, batch 16 and a 10 ms queue delay fills its batches only while all 16
requests arrive together; started spread over one request's time, the slots split into two
groups that take turns on the instance (what perf_analyzer's one thread per slot over HTTP
measured: 339/s against tune's lock-step 585/s). Two instances do not care how the slots start.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tritonkit.config import parse_config
from tritonkit.perf import PerfSettings, run_perf
from tritonkit.tune.control import ModelControl

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
MODEL = "batch_bound"


@pytest.fixture(scope="module")
def batch_server(tmp_path_factory: pytest.TempPathFactory, triton_server_factory: Callable[..., Any]) -> Any:
    repo = tmp_path_factory.mktemp("stagger") / "repo"
    shutil.copytree(ROOT / "benchmarks" / "models" / MODEL, repo / MODEL)
    return triton_server_factory(repo, extra_args=["--model-control-mode=explicit", f"--load-model={MODEL}"])


def _load(server: Any, instances: int) -> None:
    text = (server.repository / MODEL / "config.pbtxt").read_text()
    text = text.replace("max_batch_size: 32", "max_batch_size: 16").replace("count: 1", f"count: {instances}")
    text += "\ndynamic_batching { max_queue_delay_microseconds: 10000 }\n"
    control = ModelControl(server.http_url)
    try:
        control.load(MODEL, parse_config(text))
    finally:
        control.close()


def _throughput(server: Any, *, stagger: bool) -> float:
    settings = PerfSettings(
        url=server.http_url,
        model=MODEL,
        levels=(16.0,),
        measurement_interval_ms=1000,
        max_trials=6,
        warmup_s=0.5,
        server_stats=False,
        stagger=stagger,
    )
    (step,) = run_perf(settings).steps
    assert step.requests > 0 and step.error_count == 0
    return step.throughput


def test_a_config_that_needs_lock_step_arrivals_measures_its_fall_when_the_slots_start_apart(
    batch_server: Any,
) -> None:
    _load(batch_server, instances=1)
    lock_step = _throughput(batch_server, stagger=False)
    staggered = _throughput(batch_server, stagger=True)
    assert staggered < 0.8 * lock_step, (lock_step, staggered)


def test_two_instances_measure_the_same_however_the_slots_start(batch_server: Any) -> None:
    _load(batch_server, instances=2)
    lock_step = _throughput(batch_server, stagger=False)
    staggered = _throughput(batch_server, stagger=True)
    assert staggered > 0.85 * lock_step, (lock_step, staggered)
