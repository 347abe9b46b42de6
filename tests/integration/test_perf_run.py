"""Short real benchmarks against the shared local tritonserver (HTTP and gRPC, a few seconds)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from tritonkit.cli.app import main
from tritonkit.errors import PerfError
from tritonkit.perf import CSV_HEADER, PerfSettings, Progress, run_perf

pytestmark = pytest.mark.integration

QUICK = {"measurement_interval_ms": 400, "max_trials": 4, "warmup_s": 0.2}


def test_perf_measures_throughput_latency_and_server_stats_when_run_over_http(example_server: Any) -> None:
    seen: list[Progress] = []
    run = run_perf(
        PerfSettings(url=example_server.http_url, model="densenet_onnx", levels=(1, 4), **QUICK),  # type: ignore[arg-type]
        progress=seen.append,
    )
    assert [s.level for s in run.steps] == [1, 4]
    assert seen and seen[-1].level == 4
    for step in run.steps:
        assert step.requests > 0 and step.throughput > 0 and step.error_count == 0
        assert step.latency is not None
        assert 0 < step.latency.p50_us <= step.latency.p99_us <= step.latency.max_us
        # the reported numbers cover the last 3 windows (or all of them if fewer were needed)
        assert step.duration_s == pytest.approx(min(len(step.windows), 3) * 0.4, rel=0.2)
        assert step.server is not None
        assert step.server.success_count >= step.requests * 0.5
        assert step.server.compute_infer_us > 0 and step.server.avg_batch_size >= 1.0
        assert step.client_cpu_us_per_request > 0
    assert (
        run.steps[1].server is not None and run.steps[1].server.avg_batch_size > 1.0
    )  # dynamic batching works


def test_perf_runs_over_grpc_with_worker_processes_when_asked(example_server: Any) -> None:
    run = run_perf(
        PerfSettings(
            url=example_server.grpc_url,
            model="propositional_scorer",
            protocol="grpc",
            levels=(2,),
            workers=2,
            input_data="zero",
            **QUICK,  # type: ignore[arg-type]
        )
    )
    (step,) = run.steps
    assert step.requests > 0 and step.error_count == 0 and step.server is not None
    assert step.server.compute_infer_us > 0


@pytest.mark.parametrize(("protocol", "kind"), [("http", "http 400"), ("grpc", "grpc INVALID_ARGUMENT")])
def test_perf_counts_errors_by_kind_when_requests_fail(
    example_server: Any, tmp_path: Path, protocol: str, kind: str
) -> None:
    # real data with the wrong size for the model's fixed dims: the server rejects every request
    data = tmp_path / "bad.json"
    data.write_text(json.dumps({"data": [{"data_0": {"content": [0.0] * 12, "shape": [3, 2, 2]}}]}))
    url = example_server.http_url if protocol == "http" else example_server.grpc_url
    settings = PerfSettings(
        url=url,
        model="densenet_onnx",
        protocol=protocol,
        levels=(1,),
        input_data=str(data),
        **QUICK,  # type: ignore[arg-type]
    )
    (step,) = run_perf(settings).steps
    assert step.requests == 0 and not step.stable
    assert set(step.errors) == {kind} and step.error_count > 0
    assert "no request succeeded" in step.stability


def test_perf_raises_when_model_is_unknown(example_server: Any) -> None:
    with pytest.raises(PerfError, match="no_such_model"):
        run_perf(PerfSettings(url=example_server.http_url, model="no_such_model", **QUICK))  # type: ignore[arg-type]


def test_cli_writes_csv_json_and_plot_when_benchmarking(example_server: Any, tmp_path: Path) -> None:
    out = {k: tmp_path / f"run.{k}" for k in ("csv", "json", "png")}
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "perf",
                example_server.grpc_url,
                "densenet_onnx",
                "--protocol",
                "grpc",
                "--concurrency",
                "1,2",
                "--measurement-interval",
                "400",
                "--max-trials",
                "4",
                "--warmup",
                "200ms",
                "-q",
                "--csv",
                str(out["csv"]),
                "--json",
                str(out["json"]),
                "--plot",
                str(out["png"]),
                "--sku",
                "Standard_D4s_v5",
                "--latency-budget",
                "p99=5s",
            ]
        )
    assert exc.value.code == 0
    rows = list(csv.reader(out["csv"].open()))
    assert tuple(rows[0]) == CSV_HEADER
    assert [r[0] for r in rows[1:]] == ["1", "2"]
    assert all(float(r[1]) > 0 and int(r[9]) > 0 for r in rows[1:])
    data = json.loads(out["json"].read_text())
    assert data["protocol"] == "grpc" and len(data["steps"]) == 2
    assert data["command"].startswith("tritonkit perf ")
    if data["cost"]["step_level"] is not None:  # only stable steps are priced; a busy box may have none
        assert data["cost"]["usd_per_million_inferences"] > 0
    assert out["png"].read_bytes().startswith(b"\x89PNG")


def test_perf_sends_at_the_requested_rate_when_mode_is_request_rate(example_server: Any) -> None:
    run = run_perf(
        PerfSettings(
            url=example_server.grpc_url,
            model="densenet_onnx",
            protocol="grpc",
            mode="request_rate",
            levels=(100.0,),
            poisson=True,
            measurement_interval_ms=500,
            max_trials=3,
            warmup_s=0.2,
        )
    )
    (step,) = run.steps
    assert step.mode == "request_rate" and step.error_count == 0
    # Poisson arrivals over ~1.5 s: the completed rate is near the offered 100/s
    assert 60 <= step.throughput <= 140


def test_perf_windows_hold_exactly_n_requests_when_requests_per_window_given(example_server: Any) -> None:
    run = run_perf(
        PerfSettings(
            url=example_server.http_url,
            model="densenet_onnx",
            levels=(2,),
            requests_per_window=40,
            max_trials=3,
            warmup_s=0.2,
        )
    )
    (step,) = run.steps
    assert [w.requests for w in step.windows] == [40] * len(step.windows)
    assert step.requests == 40 * min(len(step.windows), 3)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_perf_raises_naming_the_dead_server_when_it_stops_answering_mid_sweep(
    tmp_path: Path, protocol: str
) -> None:
    """A real server, stopped during the first step: the second step cannot connect at all."""
    from tests.integration._server_repo import write_tiny_repository
    from tritonkit.server import LocalTritonServer

    server = LocalTritonServer(write_tiny_repository(tmp_path / "repo", models=("py_add",)))
    server.start()
    try:
        url = server.http_url if protocol == "http" else server.grpc_url

        def stop_server_once(progress: Progress) -> None:
            if server.running:
                server.stop()

        settings = PerfSettings(url=url, model="py_add", protocol=protocol, levels=(1, 2), **QUICK)  # type: ignore[arg-type]
        with pytest.raises(PerfError, match="stopped answering during the concurrency 2 step"):
            run_perf(settings, progress=stop_server_once)
    finally:
        server.stop()
