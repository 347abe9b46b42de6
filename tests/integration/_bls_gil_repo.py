"""Triton 2.51's Python stub frees a BLS stream's responses without the GIL (smallest repository).

- ``ticker``: a decoupled Python model that streams 48 responses of four tensors each (as the vLLM
  stage does with its counts: ``text_output``, ``num_input_tokens``, ``num_output_tokens``,
  ``finish_reason``), then the final flag.
- ``relay``: a decoupled Python model that reads one ``ticker`` stream by BLS
  (``exec(decoupled=True)``), lets go of the iterator as soon as the stream ends, and answers how
  many pieces it read; a thread of its own allocates Python objects meanwhile, as a busy model's
  threads do. The stub's utility thread then often drops the iterator's last reference without
  the GIL, freeing every response's numpy arrays there, and the stub dies ("Stub process
  'relay_0_0' is not healthy", or its requests are never answered): 360 streams from 6 clients
  took it down within 30-35 s in 2 of 2 runs, while ``relay_held`` answered all 360 in 7 s.
- ``relay_held``: the same, keeping each finished iterator referenced for 10 s before letting go
  (what ``ensembles/common/llm_front.py`` does): the last reference is Python's, dropped with the GIL.
"""

from __future__ import annotations

from pathlib import Path

TICKER = """import threading
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        for r in requests:
            threading.Thread(target=self.talk, args=(r.get_response_sender(),), daemon=True).start()
    def talk(self, sender):
        for i in range(48):
            sender.send(pb_utils.InferenceResponse([
                pb_utils.Tensor("text_output", np.array([b"tok "], dtype=np.object_)),
                pb_utils.Tensor("num_input_tokens", np.array([11], dtype=np.uint32)),
                pb_utils.Tensor("num_output_tokens", np.array([1], dtype=np.uint32)),
                pb_utils.Tensor("finish_reason", np.array([b"None"], dtype=np.object_)),
            ]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
"""

RELAY = """import json, threading, time
from collections import deque
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.hold = json.loads(args["model_config"])["name"].endswith("held")
        self.kept = deque()
        self.lock = threading.Lock()
        threading.Thread(target=self.churn, daemon=True).start()
    def churn(self):
        while True:
            junk = [{"a": str(i), "b": (i, i)} for i in range(500)]
            del junk
            time.sleep(0)
    def execute(self, requests):
        for r in requests:
            threading.Thread(target=self.relay, args=(r.get_response_sender(),), daemon=True).start()
    def relay(self, sender):
        req = pb_utils.InferenceRequest(model_name="ticker",
            inputs=[pb_utils.Tensor("IN", np.array([b"x"], dtype=np.object_))],
            requested_output_names=["text_output", "num_input_tokens", "num_output_tokens", "finish_reason"])
        responses = req.exec(decoupled=True)
        n = 0
        for response in responses:
            if pb_utils.get_output_tensor_by_name(response, "text_output") is not None:
                n += 1
        if self.hold:
            now = time.monotonic()
            with self.lock:
                self.kept.append((now, responses))
                while self.kept and now - self.kept[0][0] > 10:
                    self.kept.popleft()
        del responses, response
        count = pb_utils.Tensor("N", np.array([str(n).encode()], dtype=np.object_))
        sender.send(pb_utils.InferenceResponse([count]), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
"""

_TEXT = "TYPE_STRING"


def _config(name: str, outputs: list[tuple[str, str, str]]) -> str:
    outs = ", ".join(f'{{ name: "{n}" data_type: {t} dims: [ {d} ] }}' for n, t, d in outputs)
    return (
        f'name: "{name}"\nbackend: "python"\nmax_batch_size: 0\n'
        f'input [ {{ name: "IN" data_type: {_TEXT} dims: [ 1 ] }} ]\noutput [ {outs} ]\n'
        "model_transaction_policy { decoupled: true }\ninstance_group [ { kind: KIND_CPU count: 1 } ]\n"
    )


def write_bls_gil_repository(repository: Path) -> Path:
    ticks = [("text_output", _TEXT, "-1"), ("num_input_tokens", "TYPE_UINT32", "1")]
    ticks += [("num_output_tokens", "TYPE_UINT32", "1"), ("finish_reason", _TEXT, "-1")]
    models = {"ticker": (TICKER, ticks), "relay": (RELAY, [("N", _TEXT, "1")])}
    models["relay_held"] = models["relay"]
    for name, (source, outputs) in models.items():
        (repository / name / "1").mkdir(parents=True, exist_ok=True)
        (repository / name / "1" / "model.py").write_text(source)
        (repository / name / "config.pbtxt").write_text(_config(name, outputs))
    return repository
