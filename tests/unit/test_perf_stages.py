"""tritonkit.perf.stages: composing models found, statistics deltas per stage, the bottleneck."""

from __future__ import annotations

import asyncio
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tritonkit.perf.results import StepResult
from tritonkit.perf.stage_results import StageStats
from tritonkit.perf.stages import (
    Stage,
    bottleneck,
    discover_stages,
    named_stages,
    stage_deltas,
    stage_snapshot,
)


def stats(
    name: str, version: str, n: int, *, queue: int, infer: int, executions: int | None = None
) -> dict[str, Any]:
    block = lambda count, ns: {"count": count, "ns": ns}  # noqa: E731
    return {
        "name": name,
        "version": version,
        "inference_count": n,
        "execution_count": executions if executions is not None else n,
        "inference_stats": {
            "success": block(n, (queue + infer + 30) * n * 1000),
            "queue": block(n, queue * n * 1000),
            "compute_input": block(n, 10 * n * 1000),
            "compute_infer": block(n, infer * n * 1000),
            "compute_output": block(n, 20 * n * 1000),
        },
    }


def test_stage_deltas_are_per_request_averages_over_the_window() -> None:
    stages = [Stage(model="a", via="ensemble", parent="p"), Stage(model="b", via="ensemble", parent="p")]
    before = stage_snapshot({"model_stats": [stats("a", "1", 10, queue=5, infer=100)]}, ["a", "b"])
    after = stage_snapshot(
        {
            "model_stats": [
                # 10 more requests at queue 25 us, infer 300 us, in 5 executions (batches of 2)
                {
                    **stats("a", "1", 20, queue=15, infer=200, executions=15),
                },
                stats("b", "1", 4, queue=1, infer=50),
                stats("other", "1", 99, queue=1, infer=1),
            ]
        },
        ["a", "b"],
    )
    a, b = stage_deltas(stages, before, after)
    assert (a.model, a.version, a.requests, a.executions) == ("a", "1", 10, 5)
    assert a.queue_us == (15 * 20 - 5 * 10) / 10 and a.compute_infer_us == (200 * 20 - 100 * 10) / 10
    assert a.batch_size == 2.0 and a.time_us == a.queue_us + 10 + a.compute_infer_us + 20
    assert (b.requests, b.queue_us, b.compute_infer_us) == (4, 1.0, 50.0)


def test_stage_deltas_leave_out_an_idle_stage_and_a_missing_snapshot() -> None:
    stages = [Stage(model="a", via="bls", parent="p")]
    snap = stage_snapshot({"model_stats": [stats("a", "1", 3, queue=1, infer=1)]}, ["a"])
    assert stage_deltas(stages, snap, snap) == ()
    assert stage_deltas(stages, None, snap) == ()


def test_stage_deltas_join_the_versions_that_served() -> None:
    stages = [Stage(model="a", via="named", parent="p")]
    after = stage_snapshot(
        {"model_stats": [stats("a", "1", 2, queue=1, infer=1), stats("a", "2", 2, queue=1, infer=1)]}, ["a"]
    )
    (a,) = stage_deltas(stages, {}, after)
    assert a.version == "1,2" and a.requests == 4


def configs() -> dict[str, Mapping[str, Any]]:
    return {
        "front": {
            "backend": "python",
            "parameters": {"FEATURES_MODEL": {"string_value": "features"}},
        },
        "features": {
            "platform": "ensemble",
            "ensemble_scheduling": {"step": [{"model_name": "pre"}, {"model_name": "inner"}]},
        },
        "inner": {"platform": "ensemble", "ensemble_scheduling": {"step": [{"model_name": "enc"}]}},
        "pre": {"backend": "python"},
        "enc": {"backend": "onnxruntime"},
    }


def fetcher(table: Mapping[str, Mapping[str, Any]]) -> Any:
    async def config_of(name: str) -> Mapping[str, Any]:
        return {"config": table.get(name, {})}

    return config_of


def test_discover_stages_follows_nested_ensembles_and_bls_calls_in_the_repository(tmp_path: Path) -> None:
    version = tmp_path / "front" / "1"
    version.mkdir(parents=True)
    (version / "model.py").write_text(
        textwrap.dedent(
            """\
            import json
            import triton_python_backend_utils as pb_utils

            class TritonPythonModel:
                def initialize(self, args):
                    params = json.loads(args["model_config"])["parameters"]
                    self.name = params["FEATURES_MODEL"]["string_value"]

                def execute(self, requests):
                    pb_utils.InferenceRequest(model_name=self.name, inputs=[], requested_output_names=[])
                    pb_utils.InferenceRequest(model_name="pre", inputs=[], requested_output_names=[]).exec()
            """
        )
    )
    found = asyncio.run(discover_stages("front", fetcher(configs()), repository=tmp_path))
    assert [(s.model, s.via, s.parent) for s in found] == [
        ("features", "bls", "front"),
        ("pre", "bls", "front"),
        ("inner", "ensemble", "features"),
        ("enc", "ensemble", "inner"),
    ]
    # without the repository, a BLS front's callees are not known: no guess
    assert asyncio.run(discover_stages("front", fetcher(configs()))) == []


def test_named_stages_drop_duplicates_and_the_target_itself() -> None:
    assert [s.model for s in named_stages("p", ["a", "p", "a", "b"])] == ["a", "b"]


def stage(
    model: str, *, parent: str = "p", via: str = "ensemble", time: float = 1.0, n: int = 10
) -> StageStats:
    return StageStats(
        model=model,
        version="1",
        via=via,
        parent=parent,
        requests=n,
        executions=n,
        inferences=n,
        queue_us=0.0,
        compute_input_us=0.0,
        compute_infer_us=time,
        compute_output_us=0.0,
        request_us=time,
    )


def test_bottleneck_is_the_working_stage_with_the_most_time_not_an_inner_ensemble() -> None:
    stages = [
        stage("features", parent="front", via="bls", time=100.0),
        stage("pre", parent="features", time=30.0),
        stage("enc", parent="features", time=60.0),
    ]
    slowest = bottleneck(stages)
    assert slowest is not None and slowest.model == "enc"
    assert bottleneck([]) is None
    # a stage called twice per pipeline request counts twice
    assert bottleneck([stage("x", time=40.0, n=20), stage("y", time=60.0, n=10)]).model == "x"  # type: ignore[union-attr]


def test_stage_stats_round_trip_through_the_step_json() -> None:
    s = stage("enc", time=12.5)
    assert StageStats.from_dict(s.to_dict()) == s
    step = StepResult(
        mode="concurrency",
        level=1,
        throughput=1.0,
        latency=None,
        requests=1,
        errors={},
        stable=True,
        stability="",
        duration_s=1.0,
        windows=(),
        server=None,
        client_cpu_us_per_request=0.0,
        client_send_us=0.0,
        client_recv_us=0.0,
        stages=(s,),
    )
    data = step.to_dict()
    assert set(data["stages"][0]) >= {
        "model",
        "version",
        "requests",
        "queue_us",
        "compute_input_us",
        "compute_infer_us",
        "compute_output_us",
    }
    assert StepResult.from_dict(data).stages == (s,)


def test_stage_rows_and_the_stacked_plot_show_each_stage_per_pipeline_request(tmp_path: Path) -> None:
    from tritonkit.perf.results import PerfRun, ServerStats
    from tritonkit.perf.stage_report import per_pipeline_request, plot_stages, stage_rows

    server = ServerStats(
        success_count=10,
        inference_count=10,
        execution_count=10,
        queue_us=1.0,
        compute_input_us=0.0,
        compute_infer_us=0.0,
        compute_output_us=0.0,
        request_us=3000.0,
    )
    twice = stage("enc", time=1000.0, n=20)  # called twice per pipeline request
    step = StepResult(
        mode="concurrency",
        level=2,
        throughput=5.0,
        latency=None,
        requests=10,
        errors={},
        stable=True,
        stability="",
        duration_s=2.0,
        windows=(),
        server=server,
        client_cpu_us_per_request=0.0,
        client_send_us=0.0,
        client_recv_us=0.0,
        stages=(stage("pre", time=500.0), twice),
    )
    assert per_pipeline_request(step, twice) == 2000.0
    run = PerfRun(url="u", model="p", protocol="http", mode="concurrency", steps=(step,), settings={})
    rows = stage_rows(run)
    assert [r[1] for r in rows] == ["pre", "enc"]
    assert rows[1][4] == "20" and rows[1][9] == "2.00"
    plot_stages(run, tmp_path / "stages.png")
    assert (tmp_path / "stages.png").read_bytes()[:4] == b"\x89PNG"
    from tritonkit.perf.report import render_html, render_markdown

    assert "## Stages (ms per stage request)" in render_markdown(run, plot_file=None)
    assert "<h2>Stages (ms per stage request)</h2>" in render_html(run, png=None)
