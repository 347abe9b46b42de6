"""JSON and CSV forms of benchmark results (the CSV header is perf_analyzer's, exactly)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from tritonkit.errors import PerfError
from tritonkit.perf.results import (
    CSV_HEADER,
    PerfRun,
    ServerStats,
    StepResult,
    WindowSummary,
    read_json,
    to_csv,
    write_csv,
    write_json,
)
from tritonkit.perf.stats import summarize_ns

PERF_ANALYZER_HEADER = (
    "Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,"
    "Server Compute Input,Server Compute Infer,Server Compute Output,Client Recv,"
    "p50 latency,p90 latency,p95 latency,p99 latency"
)


def make_step(
    level: float, *, mode: str = "concurrency", latency_ms: float = 2.0, stable: bool = True
) -> StepResult:
    lat = summarize_ns([int(latency_ms * 1e6 * f) for f in (0.5, 0.9, 1.0, 1.1, 1.5)])
    return StepResult(
        mode=mode,
        level=level,
        throughput=100.0 * level,
        latency=lat,
        requests=500,
        errors={"http 503": 2} if level > 4 else {},
        stable=stable,
        stability="stable" if stable else "NOT STABLE after 10 windows: throughput varies 20.0% (limit 10%)",
        duration_s=3.0,
        windows=(
            WindowSummary(duration_s=1.0, requests=100, throughput=100.0, avg_latency_us=2000.0, errors=0),
        ),
        server=ServerStats(
            success_count=500,
            inference_count=500,
            execution_count=125,
            queue_us=300.0,
            compute_input_us=50.0,
            compute_infer_us=1000.0,
            compute_output_us=25.0,
            request_us=1400.0,
        ),
        client_cpu_us_per_request=80.0,
        client_send_us=0.0,
        client_recv_us=0.0,
    )


def make_run(levels: tuple[float, ...] = (1, 4, 16), *, mode: str = "concurrency") -> PerfRun:
    return PerfRun(
        url="http://127.0.0.1:8000",
        model="densenet_onnx",
        protocol="http",
        mode=mode,
        steps=tuple(make_step(lv, mode=mode) for lv in levels),
        settings={"stability_percentage": 10.0},
        started_at="2026-01-01T00:00:00+00:00",
        command="tritonkit perf http://127.0.0.1:8000 densenet_onnx",
    )


def test_csv_header_is_perf_analyzers_exactly_when_mode_is_concurrency() -> None:
    text = to_csv(make_run())
    assert text.splitlines()[0] == PERF_ANALYZER_HEADER
    assert ",".join(CSV_HEADER) == PERF_ANALYZER_HEADER


def test_csv_has_one_row_per_step_in_microseconds_when_written() -> None:
    rows = list(csv.DictReader(io.StringIO(to_csv(make_run()))))
    assert [r["Concurrency"] for r in rows] == ["1", "4", "16"]
    first = rows[0]
    assert float(first["Inferences/Second"]) == pytest.approx(100.0)
    assert first["Server Queue"] == "300"
    assert first["Server Compute Input"] == "50"
    assert first["Server Compute Infer"] == "1000"
    assert first["Server Compute Output"] == "25"
    assert first["p50 latency"] == "2000"  # 2 ms -> microseconds
    assert first["p99 latency"] == str(round(summarize_ns([1e6, 1.8e6, 2e6, 2.2e6, 3e6]).p99_us))  # type: ignore[union-attr]
    # network = avg client latency - server request time - client send/recv
    assert first["Network+Server Send/Recv"] == str(round(2000.0 - 1400.0))
    for row in rows:
        for key in CSV_HEADER[2:]:
            int(row[key])  # latency columns are whole microseconds


def test_csv_names_first_column_request_rate_when_mode_is_request_rate() -> None:
    header = to_csv(make_run((10, 20), mode="request_rate")).splitlines()[0]
    assert header.split(",")[0] == "Request Rate"
    assert header.split(",")[1:] == list(CSV_HEADER[1:])


def test_json_round_trips_every_field_when_written_and_read(tmp_path: Path) -> None:
    run = make_run()
    path = tmp_path / "run.json"
    write_json(run, path)
    data = json.loads(path.read_text())
    assert data["schema_version"] == 1
    assert set(data) >= {"tool", "url", "model", "protocol", "mode", "steps", "settings", "command", "cost"}
    step = data["steps"][0]
    assert set(step["latency_us"]) == {"count", "avg", "std", "min", "max", "p50", "p90", "p95", "p99"}
    assert step["server"]["avg_batch_size"] == pytest.approx(4.0)
    assert set(step["client"]) == {"cpu_us_per_request", "send_us", "recv_us"}
    assert read_json(path) == run


def test_write_csv_leaves_no_temporary_file_when_done(tmp_path: Path) -> None:
    path = tmp_path / "out.csv"
    write_csv(make_run(), path)
    assert [p.name for p in tmp_path.iterdir()] == ["out.csv"]


def test_write_raises_perf_error_when_directory_is_missing(tmp_path: Path) -> None:
    with pytest.raises(PerfError, match="does not exist"):
        write_csv(make_run(), tmp_path / "nope" / "out.csv")


def test_read_json_raises_perf_error_when_file_is_not_a_perf_result(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema_version": 1, "url": "x"}))
    with pytest.raises(PerfError, match="not a tritonkit perf result"):
        read_json(bad)
    with pytest.raises(PerfError, match="no such file"):
        read_json(tmp_path / "missing.json")
    bad.write_text("{not json")
    with pytest.raises(PerfError, match="not readable JSON"):
        read_json(bad)


def test_avg_batch_size_is_inferences_over_executions_when_server_batches() -> None:
    stats = make_step(1).server
    assert stats is not None
    assert stats.avg_batch_size == pytest.approx(500 / 125)
