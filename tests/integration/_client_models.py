"""A tiny model repository the client tests write themselves (three Python-backend models).

``add``: FP32 [4] x2 -> sum and difference, batching (max_batch_size 4, so larger batches split).
``echo``: BYTES [-1] -> the same strings, upper-cased, not batching.
``sleep``: FP32 [1] seconds -> sleeps that long, answers the same value (for timeouts).
"""

from __future__ import annotations

from pathlib import Path

ADD_CONFIG = """
name: "add"
backend: "python"
max_batch_size: 4
input [
  { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] }
]
output [
  { name: "SUM" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "DIFF" data_type: TYPE_FP32 dims: [ 4 ] }
]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""

ADD_MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("SUM", (a + b).astype(np.float32)),
                pb_utils.Tensor("DIFF", (a - b).astype(np.float32)),
            ]))
        return responses
"""

ECHO_CONFIG = """
name: "echo"
backend: "python"
max_batch_size: 0
input [ { name: "TEXT" data_type: TYPE_STRING dims: [ -1 ] } ]
output [ { name: "UPPER" data_type: TYPE_STRING dims: [ -1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""

ECHO_MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()
            upper = np.array([t.upper() for t in text.reshape(-1)], dtype=object).reshape(text.shape)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("UPPER", upper)]))
        return responses
"""


SLEEP_CONFIG = """
name: "sleep"
backend: "python"
max_batch_size: 0
input [ { name: "SECONDS" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "SLEPT" data_type: TYPE_FP32 dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""

SLEEP_MODEL = """
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            seconds = pb_utils.get_input_tensor_by_name(request, "SECONDS").as_numpy()
            time.sleep(float(seconds[0]))
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SLEPT", seconds)]))
        return responses
"""


def write_client_repository(root: Path) -> Path:
    """Write the three models under ``root`` and return it."""
    models = (
        ("add", ADD_CONFIG, ADD_MODEL),
        ("echo", ECHO_CONFIG, ECHO_MODEL),
        ("sleep", SLEEP_CONFIG, SLEEP_MODEL),
    )
    for name, config, model in models:
        version = root / name / "1"
        version.mkdir(parents=True, exist_ok=True)
        (root / name / "config.pbtxt").write_text(config.lstrip())
        (version / "model.py").write_text(model.lstrip())
    return root
