"""Tiny decoupled Python models the streaming tests write themselves.

``pieces``: N (INT32 [1]) -> N responses, each PIECE (BYTES [1], "p0 ", "p1 ", ...), INDEX
(INT32 [1]) and GRID (FP32 [2, 3], filled with the index); the last data response carries the
FINAL flag. Optional inputs: DELAY (FP32 [1], seconds between pieces), WAIT (FP32 [1], seconds
before the first), FAIL_AT (INT32 [1]: the response with that index is an error that ends the
stream instead).
``pieces_flagged``: the same, but ends with a separate flags-only final response (what vLLM and
TensorRT-LLM backends do), so a client sees the end only as ``triton_final_response`` (gRPC,
``enable_empty_final_response``) or as the end of the SSE body.

Both write ``<log_dir>/<request id>.json`` when a request ends: how many pieces were sent, and
whether Triton reported the request cancelled. That file is how tests prove, on the server side,
that a client leaving early stopped the generation.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
model_transaction_policy {{ decoupled: true }}
input [
  {{ name: "N" data_type: TYPE_INT32 dims: [ 1 ] }},
  {{ name: "DELAY" data_type: TYPE_FP32 dims: [ 1 ] optional: true }},
  {{ name: "FAIL_AT" data_type: TYPE_INT32 dims: [ 1 ] optional: true }},
  {{ name: "WAIT" data_type: TYPE_FP32 dims: [ 1 ] optional: true }}
]
output [
  {{ name: "PIECE" data_type: TYPE_STRING dims: [ 1 ] }},
  {{ name: "INDEX" data_type: TYPE_INT32 dims: [ 1 ] }},
  {{ name: "GRID" data_type: TYPE_FP32 dims: [ 2, 3 ] }}
]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
parameters [
  {{ key: "final" value: {{ string_value: "{final}" }} }},
  {{ key: "log_dir" value: {{ string_value: "{log_dir}" }} }}
]
"""

MODEL = """
import json
import os
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


def _optional(request, name, default):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return default if tensor is None else tensor.as_numpy().reshape(-1)[0].item()


class TritonPythonModel:
    def initialize(self, args):
        params = json.loads(args["model_config"])["parameters"]
        self.separate_final = params["final"]["string_value"] == "separate"
        self.log_dir = params["log_dir"]["string_value"]
        self.threads = []

    def execute(self, requests):
        # One thread per request: streams run concurrently on one instance, as real decoders do.
        for request in requests:
            thread = threading.Thread(target=self.generate, args=(request,), daemon=True)
            thread.start()
            self.threads.append(thread)
        return None

    def generate(self, request):
        sender = request.get_response_sender()
        n = int(_optional(request, "N", 0))
        delay = float(_optional(request, "DELAY", 0.0))
        fail_at = int(_optional(request, "FAIL_AT", -1))
        wait = float(_optional(request, "WAIT", 0.0))
        if wait:
            time.sleep(wait)
        sent = 0
        cancelled = False
        final_sent = False
        for i in range(n):
            if sender.is_cancelled():
                cancelled = True
                break
            if i == fail_at:
                error = pb_utils.TritonError(f"piece {i} failed on purpose")
                sender.send(pb_utils.InferenceResponse(error=error),
                            flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                final_sent = True
                break
            response = pb_utils.InferenceResponse([
                pb_utils.Tensor("PIECE", np.array([f"p{i} ".encode()], dtype=object)),
                pb_utils.Tensor("INDEX", np.array([i], dtype=np.int32)),
                pb_utils.Tensor("GRID", np.full((2, 3), i, dtype=np.float32)),
            ])
            last = i == n - 1 and not self.separate_final
            sender.send(response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL if last else 0)
            final_sent = final_sent or last
            sent += 1
            if delay and i < n - 1:
                time.sleep(delay)
        if not final_sent:
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        # Never ask the sender anything after the FINAL flag: Triton 2.51's python backend
        # segfaults the whole server in ResponseFactoryIsCancelled once the factory is gone.
        record = {"sent": sent, "n": n, "cancelled": cancelled}
        name = request.request_id() or f"anon-{time.monotonic_ns()}"
        path = os.path.join(self.log_dir, name + ".json")
        with open(path + ".tmp", "w") as f:
            json.dump(record, f)
        os.replace(path + ".tmp", path)

    def finalize(self):
        for thread in self.threads:
            thread.join(timeout=5)
"""

#: model name -> how it ends its streams
MODELS = {"pieces": "with_last", "pieces_flagged": "separate"}


def write_stream_repository(root: Path, log_dir: Path) -> Path:
    """Write the decoupled models under ``root`` (records go to ``log_dir``) and return ``root``."""
    log_dir.mkdir(parents=True, exist_ok=True)
    for name, final in MODELS.items():
        version = root / name / "1"
        version.mkdir(parents=True, exist_ok=True)
        config = CONFIG.format(name=name, final=final, log_dir=log_dir)
        (root / name / "config.pbtxt").write_text(config.lstrip())
        (version / "model.py").write_text(MODEL.lstrip())
    return root


def wait_for_record(log_dir: Path, request_id: str, timeout: float = 15.0) -> dict[str, Any]:
    """The server-side record of ``request_id`` once the model finished with it."""
    path = log_dir / f"{request_id}.json"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return dict(json.loads(path.read_text()))
        time.sleep(0.05)
    raise AssertionError(f"the model wrote no record for request {request_id} within {timeout}s")
