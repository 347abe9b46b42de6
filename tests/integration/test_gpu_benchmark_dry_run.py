"""benchmarks/gpu/run.py --dry-run: the GPU benchmark's own code, on the CPU, tiny and fast.

CI has no GPU: this runs every step the GPU run does (build both stages, serve them, batching
ratios, perf vs perf_analyzer when installed, a short tune, the JSON and plot) with KIND_CPU,
a tiny input and short windows. The torch stage needs a venv with torch ($TRITONKIT_LLM_ENV,
as `make test` provides); without one the benchmark skips it and says so.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu" / "run.py"


def load_benchmark() -> Any:
    spec = importlib.util.spec_from_file_location("tritonkit_gpu_benchmark_under_test", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_gpu_benchmark_dry_run_records_every_step_and_the_onnx_provider(tmp_path: Path) -> None:
    path = load_benchmark().main(["--dry-run", "--out", str(tmp_path)])
    data = json.loads(path.read_text())
    env = data["environment"]
    assert {"gpus", "nvidia-pytriton", "tritonkit", "numpy", "onnxruntime_providers"} <= env.keys()
    assert data["tritonserver"] == "2.51.0"
    onnx = data["dynamic_batching"]["densenet_onnx"]
    assert onnx["batched"]["levels"] == [1, 4] and len(onnx["ratio"]) == 2
    assert all(r is not None and r > 0 for r in onnx["ratio"])
    # the GPU config's TensorRT accelerator on a CPU instance: said once per model, and as a gauge
    assert any(
        n.startswith("densenet_onnx__batched: config asks KIND_CPU")
        and "running on CPUExecutionProvider" in n
        for n in data["server_notes"]
    ), data["server_notes"]
    assert any('provider="CPUExecutionProvider"' in m for m in data["onnx_provider_metric"])
    assert data["complete"] is True
    assert data["tune"]["winner"] is not None and data["tune"]["server_restarts"] == 0
    if os.environ.get("TRITONKIT_LLM_ENV"):
        assert "resnet_torch" in data["dynamic_batching"]
        assert data["tune"]["model"] == "resnet_torch__batched"
    else:
        assert any("torch stage skipped" in n for n in data["notes"])
    if importlib.util.find_spec("matplotlib") is not None:
        assert (tmp_path / "dry_run.png").stat().st_size > 0
