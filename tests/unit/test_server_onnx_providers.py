"""tritonkit's onnxruntime backend: which execution providers a config gets, and what it says.

The backend module imports ``triton_python_backend_utils``, which exists only inside Triton's
Python backend stub: it is loaded here with a stand-in module of that name (a fake, because the
real one cannot be imported outside the stub). These are pure functions of the config, the
instance kind and the providers onnxruntime reports; no GPU is needed (none is here).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.unit._triton_side import load_backend_module
from tritonkit.triton_side import BACKENDS_DIR

BACKEND = BACKENDS_DIR / "onnxruntime" / "model.py"
CACHE = Path("/cache/trt")
CPU_ONLY = ["AzureExecutionProvider", "CPUExecutionProvider"]
GPU_ORT = ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]
CUDA_ONLY = ["CUDAExecutionProvider", "CPUExecutionProvider"]


@pytest.fixture(scope="module")
def backend() -> Any:
    return load_backend_module(BACKEND, "tritonkit_onnx_backend_under_test")


def accelerators(
    gpu: list[dict[str, Any]] | None = None, cpu: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    acc: dict[str, Any] = {}
    if gpu is not None:
        acc["gpu_execution_accelerator"] = gpu
    if cpu is not None:
        acc["cpu_execution_accelerator"] = cpu
    return {"optimization": {"execution_accelerators": acc}}


TRT_FP16 = accelerators(
    gpu=[
        {
            "name": "tensorrt",
            "parameters": {
                "precision_mode": "FP16",
                "max_workspace_size_bytes": "1073741824",
                "trt_engine_cache_enable": "1",
            },
        }
    ]
)
TRT_OPTIONS = {
    "device_id": "1",
    "trt_fp16_enable": "True",
    "trt_max_workspace_size": "1073741824",
    "trt_engine_cache_enable": "1",
    "trt_engine_cache_path": str(CACHE / "densenet_onnx"),
}

# (config, kind, available) -> (providers with options, the line the backend logs)
CASES = [
    pytest.param(
        TRT_FP16,
        "GPU",
        CPU_ONLY,
        [("CPUExecutionProvider", {})],
        "densenet_onnx: config asks KIND_GPU + TensorRT FP16 (engine cache); "
        "onnxruntime 1.32.0 here has only "
        "AzureExecutionProvider, CPUExecutionProvider: running on CPUExecutionProvider "
        "(pip install 'tritonkit[gpu]': onnxruntime-gpu)",
        id="gpu-trt-fp16-on-cpu-onnxruntime",
    ),
    pytest.param(
        TRT_FP16,
        "GPU",
        GPU_ORT,
        [
            ("TensorrtExecutionProvider", TRT_OPTIONS),
            ("CUDAExecutionProvider", {"device_id": "1"}),
            ("CPUExecutionProvider", {}),
        ],
        "densenet_onnx: config asks KIND_GPU + TensorRT FP16 (engine cache); running on "
        "TensorrtExecutionProvider (then CUDAExecutionProvider, CPUExecutionProvider)",
        id="gpu-trt-fp16-on-onnxruntime-gpu",
    ),
    pytest.param(
        TRT_FP16,
        "GPU",
        CUDA_ONLY,
        [("CUDAExecutionProvider", {"device_id": "1"}), ("CPUExecutionProvider", {})],
        "densenet_onnx: config asks KIND_GPU + TensorRT FP16 (engine cache); "
        "onnxruntime 1.32.0 here has only "
        "CUDAExecutionProvider, CPUExecutionProvider: running on CUDAExecutionProvider "
        "(pip install 'tritonkit[gpu]': onnxruntime-gpu)",
        id="gpu-trt-without-tensorrt-provider",
    ),
    pytest.param(
        accelerators(gpu=[{"name": "cuda", "parameters": {"cudnn_conv_use_max_workspace": "0"}}]),
        "GPU",
        GPU_ORT,
        [
            ("CUDAExecutionProvider", {"device_id": "1", "cudnn_conv_use_max_workspace": "0"}),
            ("CPUExecutionProvider", {}),
        ],
        "densenet_onnx: config asks KIND_GPU + CUDA; "
        "running on CUDAExecutionProvider (then CPUExecutionProvider)",
        id="gpu-cuda-options",
    ),
    pytest.param(
        {},
        "GPU",
        GPU_ORT,
        [("CUDAExecutionProvider", {"device_id": "1"}), ("CPUExecutionProvider", {})],
        "densenet_onnx: config asks KIND_GPU; running on CUDAExecutionProvider (then CPUExecutionProvider)",
        id="gpu-plain-runs-cuda",
    ),
    pytest.param(
        TRT_FP16,
        "CPU",
        GPU_ORT,
        [("CPUExecutionProvider", {})],
        "densenet_onnx: config asks KIND_CPU + GPU accelerators (ignored for CPU instances); running on "
        "CPUExecutionProvider",
        id="cpu-instance-ignores-gpu-accelerators",
    ),
    pytest.param({}, "CPU", CPU_ONLY, [("CPUExecutionProvider", {})], None, id="cpu-plain-says-nothing"),
    pytest.param(
        accelerators(cpu=[{"name": "openvino"}]),
        "CPU",
        CPU_ONLY,
        [("CPUExecutionProvider", {})],
        "densenet_onnx: config asks KIND_CPU + OpenVINO; onnxruntime 1.32.0 here has only "
        "AzureExecutionProvider, CPUExecutionProvider: running on CPUExecutionProvider",
        id="cpu-openvino-missing",
    ),
]


@pytest.mark.parametrize(("config", "kind", "available", "providers", "line"), CASES)
def test_plan_providers_follows_tritons_onnxruntime_backend(
    backend: Any,
    config: dict[str, Any],
    kind: str,
    available: list[str],
    providers: list[tuple[str, dict[str, str]]],
    line: str | None,
) -> None:
    wanted, asked = backend.plan_providers(
        config, model="densenet_onnx", kind=kind, device_id=1, cache_root=CACHE
    )
    chosen = [(name, opts) for name, opts in wanted if name in available or name == "CPUExecutionProvider"]
    assert chosen == providers
    running = [name for name, _ in chosen]  # what onnxruntime reports when every provider starts
    note = backend.provider_note("densenet_onnx", asked, [n for n, _ in wanted], running, available, "1.32.0")
    assert note == line


def test_provider_note_says_when_an_available_provider_failed_to_start(backend: Any) -> None:
    wanted, asked = backend.plan_providers(TRT_FP16, model="m", kind="GPU", device_id=0, cache_root=CACHE)
    note = backend.provider_note(
        "m", asked, [n for n, _ in wanted], ["CPUExecutionProvider"], GPU_ORT, "1.20.1"
    )
    assert note == (
        "m: config asks KIND_GPU + TensorRT FP16 (engine cache); onnxruntime could not start "
        "TensorrtExecutionProvider, CUDAExecutionProvider (see above): running on CPUExecutionProvider"
    )


def test_plan_providers_keeps_a_configured_engine_cache_path_and_int8(backend: Any) -> None:
    config = accelerators(
        gpu=[
            {
                "name": "tensorrt",
                "parameters": {
                    "precision_mode": "int8",
                    "trt_engine_cache_enable": "true",
                    "trt_engine_cache_path": "/models/cache",
                    "int8_calibration_table_name": "calib.flatbuffers",
                },
            }
        ]
    )
    wanted, asked = backend.plan_providers(config, model="m", kind="GPU", device_id=0, cache_root=CACHE)
    assert wanted[0] == (
        "TensorrtExecutionProvider",
        {
            "device_id": "0",
            "trt_int8_enable": "True",
            "trt_engine_cache_enable": "true",
            "trt_engine_cache_path": "/models/cache",
            "trt_int8_calibration_table_name": "calib.flatbuffers",
        },
    )
    assert asked == "KIND_GPU + TensorRT INT8 (engine cache)"


def test_server_log_parser_reads_the_provider_line_per_model() -> None:
    from tritonkit.server import _logs

    log = (
        'I1126 23:50:01.000 77 model.py:1] "[tritonkit onnxruntime] densenet_onnx: config asks KIND_GPU; '
        'running on CUDAExecutionProvider (then CPUExecutionProvider)"\n'
        "I1126 23:50:02.000 77 model_lifecycle.cc:1] successfully loaded 'densenet_onnx'\n"
        'I1126 23:50:03.000 78 model.py:1] "[tritonkit onnxruntime] densenet_onnx: a second group"\n'
    )
    assert _logs.execution_providers(log) == {
        "densenet_onnx": "densenet_onnx: config asks KIND_GPU; running on CUDAExecutionProvider "
        "(then CPUExecutionProvider)"
    }
    assert _logs.backend_message("no marker here", (_logs.ONNX_PROVIDER_MARKER,)) is None
