"""Two Triton 2.51 behaviours that shaped the streaming pipelines, in the smallest repository.

- ``talker``: a decoupled Python model that streams 40 one-word responses, each from a worker
  thread of its own request (5 ms apart), counts them in a custom Prometheus counter (as a token
  counter would), then sends a flags-only final response; it stops early when ``is_cancelled()``.
  Its counter updates take a lock.
- ``talker_unlocked``: the same without the lock. Custom-metric updates from concurrent threads
  of one model crash Triton 2.51 (SIGSEGV, or terminate() on boost::interprocess::lock_exception
  or std::length_error, in the Python backend): 8 clients streaming at once took it down in
  every run on a 2-core box.
- ``talk``: an ensemble whose only step is ``talker``. Triton 2.51 never tells a step that is
  already running that the client left (core#263 checks the parent's cancellation between steps
  only), so ``talker`` finishes every abandoned answer; called directly, it stops.
"""

from __future__ import annotations

from pathlib import Path

TALKER_MODEL = """import json
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.name = config["name"]
        self.locked = self.name == "talker"
        self.lock = threading.Lock()
        self.family = pb_utils.MetricFamily("talker_words_total", "Words sent", pb_utils.MetricFamily.COUNTER)
        self.words = self.family.Metric(labels={"model": self.name})

    def execute(self, requests):
        for request in requests:
            threading.Thread(target=self.talk, args=(request.get_response_sender(),), daemon=True).start()
        return None

    def count(self):
        if self.locked:
            with self.lock:
                self.words.increment(1)
        else:
            self.words.increment(1)

    def talk(self, sender):
        for i in range(40):
            if sender.is_cancelled():
                break
            time.sleep(0.005)
            word = np.array([f" word{i}".encode()], dtype=np.object_)
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("TEXT", word)]))
            self.count()
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
"""

_IO = """input [{ name: "PROMPT" data_type: TYPE_STRING dims: [1] }]
output [{ name: "TEXT" data_type: TYPE_STRING dims: [1] }]
"""

TALK_CONFIG = f"""name: "talk"
platform: "ensemble"
max_batch_size: 0
{_IO}ensemble_scheduling {{
  step [{{
    model_name: "talker" model_version: -1
    input_map {{ key: "PROMPT" value: "PROMPT" }}
    output_map {{ key: "TEXT" value: "TEXT" }}
  }}]
}}
"""


def write_stream_crash_repository(root: Path) -> Path:
    """Write ``talker``, ``talker_unlocked`` and ``talk`` into ``root`` and return it."""
    for name in ("talker", "talker_unlocked"):
        (root / name / "1").mkdir(parents=True)
        (root / name / "1" / "model.py").write_text(TALKER_MODEL)
        (root / name / "config.pbtxt").write_text(
            f'name: "{name}"\nbackend: "python"\nmax_batch_size: 0\n{_IO}'
            "model_transaction_policy { decoupled: true }\ninstance_group [{ kind: KIND_CPU count: 1 }]\n"
        )
    (root / "talk" / "1").mkdir(parents=True)
    (root / "talk" / "config.pbtxt").write_text(TALK_CONFIG)
    return root
