"""Per-worker figures of a step from several load workers: a worker that fell behind is named
(JSON, console, report), never averaged in; a run from one process writes what it always did."""

from __future__ import annotations

import dataclasses
import json

from tritonkit.perf.report import render_markdown, shortfall_note, worker_lines
from tritonkit.perf.results import PerfRun, StepResult
from tritonkit.perf.view import Note, run_view
from tritonkit.perf.worker_load import WorkerLoad, shortfall


def _worker(name: str, *, saturated: bool = False) -> WorkerLoad:
    return WorkerLoad(
        name=name,
        share=4.0,
        requests=120,
        errors=0,
        cpu_share=0.93 if saturated else 0.2,
        delayed_requests=0,
        loop_lag_p50_us=None,
        clock_offset_us=-12.5,
        clock_error_us=40.0,
        saturated=saturated,
        reason="used 93% of a core: its sends lag its share" if saturated else "",
    )


def _run(*workers: WorkerLoad) -> PerfRun:
    step = StepResult(
        mode="concurrency",
        level=16,
        throughput=40.0,
        latency=None,
        requests=480,
        errors={},
        stable=True,
        stability="stable",
        duration_s=12.0,
        windows=(),
        server=None,
        client_cpu_us_per_request=10.0,
        client_send_us=0.0,
        client_recv_us=0.0,
        load_workers=tuple(workers),
    )
    return PerfRun(url="http://h:8000", model="m", protocol="http", mode="concurrency", steps=(step,))


def test_shortfall_names_the_saturated_worker_when_one_fell_behind() -> None:
    run = _run(_worker("pod-0"), _worker("pod-1", saturated=True))
    note = shortfall_note(run)
    assert note is not None and "worker pod-1: used 93% of a core" in note and "pod-0" not in note
    warnings = [b.text for b in run_view(run).blocks if isinstance(b, Note) and b.warn]
    assert any("shortfall" in w and "pod-1" in w for w in warnings)
    assert "shortfall" in render_markdown(run, plot_file=None)
    assert len(worker_lines(run)) == 2 and "clock offset -0.013 ms" in worker_lines(run)[0]


def test_no_shortfall_is_reported_when_every_worker_kept_up() -> None:
    run = _run(_worker("pod-0"), _worker("pod-1"))
    assert shortfall(run.steps[0].load_workers) == "" and shortfall_note(run) is None


def test_per_worker_figures_round_trip_through_the_json_when_written_and_read() -> None:
    run = _run(_worker("pod-0"), _worker("pod-1", saturated=True))
    back = PerfRun.from_dict(json.loads(json.dumps(run.to_dict())))
    assert back.steps[0].load_workers == run.steps[0].load_workers


def test_a_run_from_one_process_writes_no_worker_key_when_it_had_no_workers() -> None:
    run = _run()
    assert "load_workers" not in run.to_dict()["steps"][0]
    assert worker_lines(run) == [] and shortfall_note(run) is None
    assert dataclasses.replace(run.steps[0]).load_workers == ()
