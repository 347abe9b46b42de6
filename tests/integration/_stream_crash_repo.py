"""The smallest repository where a client leaving a stream crashes Triton 2.51, and its safe twin.

- ``talker``: a decoupled Python model that streams 40 one-word responses from a worker thread
  (5 ms apart), counting them in a custom Prometheus counter (as a token counter would), then a
  flags-only final response; it stops early when ``is_cancelled()``.
- ``talk`` (the crash): an ensemble whose only step is ``talker``. Triton 2.51 never forwards
  the client's cancellation to a step that is already running (core#263 checks the parent's flag
  between steps), so ``talker`` goes on sending and counting after the client left; a few such
  streams later the server dies (SIGSEGV or boost::interprocess::lock_exception in the Python
  backend). Measured on a 2-core box: 5-6 streams left; the same without the counter survived 40.
- ``talker`` called directly (the fix, what vlm_stream and arr_coc_stream do): the client's
  request is the model's own, so ``is_cancelled()`` turns true and it stops; 40 left, no crash.
"""

from __future__ import annotations

from pathlib import Path

TALKER_MODEL = """import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        family = pb_utils.MetricFamily("talker_words_total", "Words sent", pb_utils.MetricFamily.COUNTER)
        self.family = family
        self.words = family.Metric(labels={"model": "talker"})

    def execute(self, requests):
        for request in requests:
            threading.Thread(target=self.talk, args=(request.get_response_sender(),), daemon=True).start()
        return None

    def talk(self, sender):
        for i in range(40):
            if sender.is_cancelled():
                break
            time.sleep(0.005)
            word = np.array([f" word{i}".encode()], dtype=np.object_)
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("TEXT", word)]))
            self.words.increment(1)
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
"""

TALKER_CONFIG = """name: "talker"
backend: "python"
max_batch_size: 0
input [{ name: "PROMPT" data_type: TYPE_STRING dims: [1] }]
output [{ name: "TEXT" data_type: TYPE_STRING dims: [1] }]
model_transaction_policy { decoupled: true }
instance_group [{ kind: KIND_CPU count: 1 }]
"""

TALK_CONFIG = """name: "talk"
platform: "ensemble"
max_batch_size: 0
input [{ name: "PROMPT" data_type: TYPE_STRING dims: [1] }]
output [{ name: "TEXT" data_type: TYPE_STRING dims: [1] }]
ensemble_scheduling {
  step [{
    model_name: "talker" model_version: -1
    input_map { key: "PROMPT" value: "PROMPT" }
    output_map { key: "TEXT" value: "TEXT" }
  }]
}
"""


def write_stream_crash_repository(root: Path) -> Path:
    """Write ``talker`` and ``talk`` into ``root`` and return it."""
    (root / "talker" / "1").mkdir(parents=True)
    (root / "talker" / "1" / "model.py").write_text(TALKER_MODEL)
    (root / "talker" / "config.pbtxt").write_text(TALKER_CONFIG)
    (root / "talk" / "1").mkdir(parents=True)
    (root / "talk" / "config.pbtxt").write_text(TALK_CONFIG)
    return root
