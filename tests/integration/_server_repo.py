"""A tiny model repository for the server tests, written by the tests themselves.

- ``py_add``: Python backend, Y = X + 1.
- ``onnx_mix``: ``platform: "onnxruntime_onnx"`` (served by tritonkit's Python-based onnxruntime
  backend) with dynamic batching: Y = 2 * X; T_OUT = T (BYTES); R_SUM = sum over the last axis
  of R, where R arrives as [4] and the config reshapes it to the graph's [2, 2]. Its
  ``config.pbtxt`` is the production GPU one (TensorRT accelerator); ``configs/cpu.pbtxt`` is the
  CPU variant that ``--model-config-name=cpu`` picks.
- ``onnx_plain``: ``backend: "onnxruntime"`` without batching, Y = 2 * X.
- ``onnx_auto``: the ``onnx_plain`` graph with a config that names no tensors (auto-complete).
"""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import TensorProto, helper

PY_ADD_CONFIG = """name: "py_add"
backend: "python"
max_batch_size: 8
input [{ name: "X" data_type: TYPE_FP32 dims: [4] }]
output [{ name: "Y" data_type: TYPE_FP32 dims: [4] }]
instance_group [{ kind: KIND_CPU count: 1 }]
"""

PY_ADD_MODEL = """import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x + 1)]))
        return responses
"""

ONNX_MIX_CONFIG = """name: "onnx_mix"
platform: "onnxruntime_onnx"
max_batch_size: 16
input [
  { name: "X" data_type: TYPE_FP32 dims: [4] },
  { name: "T" data_type: TYPE_STRING dims: [1] },
  { name: "R" data_type: TYPE_FP32 dims: [4] reshape { shape: [2, 2] } }
]
output [
  { name: "Y" data_type: TYPE_FP32 dims: [4] },
  { name: "T_OUT" data_type: TYPE_STRING dims: [1] },
  { name: "R_SUM" data_type: TYPE_FP32 dims: [2] }
]
dynamic_batching { max_queue_delay_microseconds: 100000 }
instance_group [{ kind: KIND_CPU count: 1 }]
parameters { key: "intra_op_thread_count" value: { string_value: "1" } }
"""

ONNX_MIX_GPU_CONFIG = ONNX_MIX_CONFIG.replace(
    "instance_group [{ kind: KIND_CPU count: 1 }]",
    "instance_group [{ kind: KIND_GPU count: 1 }]\n"
    'optimization { execution_accelerators { gpu_execution_accelerator: [{ name: "tensorrt" }] } }',
)

ONNX_PLAIN_CONFIG = """name: "onnx_plain"
backend: "onnxruntime"
max_batch_size: 0
input [{ name: "X" data_type: TYPE_FP32 dims: [2, 4] }]
output [{ name: "Y" data_type: TYPE_FP32 dims: [2, 4] }]
instance_group [{ kind: KIND_CPU count: 1 }]
"""

ONNX_AUTO_CONFIG = """name: "onnx_auto"
platform: "onnxruntime_onnx"
instance_group [{ kind: KIND_CPU count: 1 }]
"""

BROKEN_MODEL = 'raise RuntimeError("this model is broken on purpose")\n'


def _save(model: onnx.ModelProto, path: Path) -> None:
    model.ir_version = 8
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


def onnx_mix_model() -> onnx.ModelProto:
    graph = helper.make_graph(
        [
            helper.make_node("Mul", ["X", "two"], ["Y"]),
            helper.make_node("Identity", ["T"], ["T_OUT"]),
            helper.make_node("ReduceSum", ["R", "axes"], ["R_SUM"], keepdims=0),
        ],
        "onnx_mix",
        [
            helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 4]),
            helper.make_tensor_value_info("T", TensorProto.STRING, ["N", 1]),
            helper.make_tensor_value_info("R", TensorProto.FLOAT, ["N", 2, 2]),
        ],
        [
            helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 4]),
            helper.make_tensor_value_info("T_OUT", TensorProto.STRING, ["N", 1]),
            helper.make_tensor_value_info("R_SUM", TensorProto.FLOAT, ["N", 2]),
        ],
        [
            helper.make_tensor("two", TensorProto.FLOAT, [1], [2.0]),
            helper.make_tensor("axes", TensorProto.INT64, [1], [2]),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def onnx_plain_model() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Mul", ["X", "two"], ["Y"])],
        "onnx_plain",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor("two", TensorProto.FLOAT, [1], [2.0])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def write_python_model(repo: Path, name: str, config: str, source: str) -> None:
    (repo / name / "1").mkdir(parents=True, exist_ok=True)
    (repo / name / "config.pbtxt").write_text(config)
    (repo / name / "1" / "model.py").write_text(source)


def write_tiny_repository(repo: Path, *, models: tuple[str, ...] = ("py_add", "onnx_mix")) -> Path:
    """Write the chosen tiny models into ``repo`` and return it."""
    if "py_add" in models:
        write_python_model(repo, "py_add", PY_ADD_CONFIG, PY_ADD_MODEL)
    if "onnx_mix" in models:
        (repo / "onnx_mix").mkdir(parents=True, exist_ok=True)
        (repo / "onnx_mix" / "configs").mkdir(parents=True, exist_ok=True)
        (repo / "onnx_mix" / "config.pbtxt").write_text(ONNX_MIX_GPU_CONFIG)
        (repo / "onnx_mix" / "configs" / "cpu.pbtxt").write_text(ONNX_MIX_CONFIG)
        _save(onnx_mix_model(), repo / "onnx_mix" / "1" / "model.onnx")
    if "onnx_plain" in models:
        (repo / "onnx_plain").mkdir(parents=True, exist_ok=True)
        (repo / "onnx_plain" / "config.pbtxt").write_text(ONNX_PLAIN_CONFIG)
        _save(onnx_plain_model(), repo / "onnx_plain" / "1" / "model.onnx")
    if "onnx_auto" in models:
        (repo / "onnx_auto").mkdir(parents=True, exist_ok=True)
        (repo / "onnx_auto" / "config.pbtxt").write_text(ONNX_AUTO_CONFIG)
        _save(onnx_plain_model(), repo / "onnx_auto" / "1" / "model.onnx")
    if "broken" in models:
        config = PY_ADD_CONFIG.replace('"py_add"', '"broken"')
        write_python_model(repo, "broken", config, BROKEN_MODEL)
    return repo
