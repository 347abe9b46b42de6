"""Per-stage perf on the real tritonserver: an ensemble's steps and a BLS front's callees, each
with Triton's own per-request accounting, adding up to the pipeline's latency."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tritonkit.cli.app import main
from tritonkit.perf import PerfSettings, run_perf
from tritonkit.perf.inputs import encode_image_png
from tritonkit.perf.stages import bottleneck, leaf_stages

pytestmark = pytest.mark.integration

QUICK = {"measurement_interval_ms": 800, "max_trials": 4, "warmup_s": 0.3}


@pytest.fixture()
def image_inputs(tmp_path: Path) -> Path:
    """A directory input: one file per input (a PNG image and a text query)."""
    data = tmp_path / "inputs"
    data.mkdir()
    pixels = np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    (data / "RAW_IMAGE").write_bytes(encode_image_png(pixels))
    (data / "TEXT_QUERY").write_bytes(b"where is the red square?")
    (data / "MAX_TOKENS").write_bytes(np.array([4], dtype=np.int32).tobytes())
    return data


def test_perf_stages_of_a_linear_ensemble_add_up_to_its_server_side_latency(
    example_server: Any, image_inputs: Path
) -> None:
    run = run_perf(
        PerfSettings(
            url=example_server.http_url,
            model="vlm_ensemble",
            levels=(1,),
            input_data=str(image_inputs),
            **QUICK,  # type: ignore[arg-type]
        )
    )
    (step,) = run.steps
    assert step.error_count == 0 and step.server is not None
    assert [s.model for s in step.stages] == ["image_preprocessor", "vision_encoder", "vlm_model"]
    assert all(s.via == "ensemble" and s.parent == "vlm_ensemble" for s in step.stages)
    for st in step.stages:
        # one call per step per pipeline request (the request in flight at a window's edge aside)
        assert abs(st.requests - step.server.success_count) <= 1
        assert st.compute_infer_us > 0 and st.batch_size >= 1.0
    # Triton's own accounting: an ensemble's compute times are its steps' compute times added up
    server = step.server
    for phase in ("compute_input_us", "compute_infer_us", "compute_output_us"):
        added = sum(getattr(st, phase) for st in step.stages)
        assert added == pytest.approx(getattr(server, phase), rel=0.03), phase
    # and a linear pipeline's time is its steps' times one after another: each step's time ends
    # when its response is released, a little after the next step has started (measured ~5% on an
    # idle box, 17% with two CPU hogs beside the suite: the overlap grows when threads wait for a
    # core, so only its floor is asserted: the steps never cover less than the request)
    total = sum(st.time_us for st in step.stages)
    assert 0.85 * server.request_us <= total, (total, server.request_us)
    assert bottleneck(step.stages) is not None


def test_perf_stages_of_a_bls_front_follow_its_calls_into_the_features_ensemble(
    example_server: Any, streaming_example_repository: Path, image_inputs: Path
) -> None:
    run = run_perf(
        PerfSettings(
            url=example_server.grpc_url,
            protocol="grpc",
            model="vlm_stream",
            levels=(1,),
            input_data=str(image_inputs),
            repository=str(streaming_example_repository),
            **QUICK,  # type: ignore[arg-type]
        )
    )
    (step,) = run.steps
    assert step.error_count == 0
    found = {(s.model, s.via, s.parent) for s in step.stages}
    assert found == {
        ("vlm_features", "bls", "vlm_stream"),
        ("image_preprocessor", "ensemble", "vlm_features"),
        ("vision_encoder", "ensemble", "vlm_features"),
    }
    assert {s.model for s in leaf_stages(step.stages)} == {"image_preprocessor", "vision_encoder"}
    features = next(s for s in step.stages if s.model == "vlm_features")
    inner = [s for s in step.stages if s.parent == "vlm_features"]
    for phase in ("compute_input_us", "compute_infer_us", "compute_output_us"):
        added = sum(getattr(st, phase) * st.requests for st in inner) / features.requests
        assert added == pytest.approx(getattr(features, phase), rel=0.05), phase


def test_perf_cli_names_stages_by_hand_and_writes_them_to_json_and_a_stacked_plot(
    example_server: Any, tmp_path: Path, image_inputs: Path
) -> None:
    out = tmp_path / "run.json"
    plot = tmp_path / "run.png"
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "perf",
                example_server.http_url,
                "vlm_ensemble",
                "--concurrency",
                "1",
                "--measurement-interval",
                "600",
                "--max-trials",
                "3",
                "--warmup",
                "0.2s",
                "--input-data",
                str(image_inputs),
                "--composing",
                "vision_encoder",
                "--json",
                str(out),
                "--plot",
                str(plot),
                "-q",
            ]
        )
    assert exc.value.code == 0
    (step,) = json.loads(out.read_text())["steps"]
    [stage] = step["stages"]
    assert stage["model"] == "vision_encoder" and stage["via"] == "named"
    assert {
        "model",
        "version",
        "requests",
        "queue_us",
        "compute_input_us",
        "compute_infer_us",
        "compute_output_us",
    } <= set(stage)
    assert stage["version"] == "1" and stage["requests"] > 0
    assert (tmp_path / "run-stages.png").stat().st_size > 1000
