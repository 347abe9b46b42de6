"""`tritonkit tune` on a BLS front against a real local tritonserver: its stages found in the
source, its BLS callee loaded by name in explicit mode, the bottleneck profiled before and the
stage that bound the result after (tiny budget, short windows)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tritonkit.perf.inputs import encode_image_png
from tritonkit.repository import build_spec
from tritonkit.tune import TuneSettings, tune

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def vlm_stream_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("tune-stages") / "repo"
    for spec in ("vlm.yaml", "vlm_stream.yaml"):
        build_spec(ROOT / "ensembles" / spec, repo)
    return repo


def test_tune_on_a_bls_front_searches_its_stages_and_names_the_stage_that_bound_it(
    vlm_stream_repo: Path, tmp_path: Path
) -> None:
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    pixels = np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    (inputs / "RAW_IMAGE").write_bytes(encode_image_png(pixels))
    (inputs / "TEXT_QUERY").write_bytes(b"what is there?")
    (inputs / "MAX_TOKENS").write_bytes(np.array([3], dtype=np.int32).tobytes())
    result = tune(
        TuneSettings(
            model="vlm_stream",
            repository=vlm_stream_repo,  # a local server: explicit mode, vlm_stream + its BLS callee
            protocol="grpc",
            concurrency=(2,),
            strategy="hill-climb",
            max_measurements=3,
            finalists=1,
            latency_budget="ttft_p99=30s",
            input_data=str(inputs),
            screen_window_ms=500,
            confirm_window_ms=500,
            max_trials=3,
            warmup_s=0.2,
        )
    )
    stages: dict[str, Any] = dict(result.stages)
    assert stages["working"] == ["vlm_stream", "image_preprocessor", "vision_encoder"]
    assert {d.model for d in result.space.dimensions} == set(stages["working"])
    before = stages["before"]
    assert before["bottleneck"] in ("image_preprocessor", "vision_encoder")
    assert result.space.dimensions[0].model == before["bottleneck"]
    assert {s["model"] for s in before["stages"]} == {"image_preprocessor", "vision_encoder"}
    assert result.winner is not None and result.restore_problems == ()
    assert stages["bound_by"] in ("image_preprocessor", "vision_encoder")
    assert result.to_dict()["stages"]["after"]["level"] == 2
