"""Triton 2.51's Python stub and BLS streams (smallest repository; see ``bls_streams.py``).

- ``ticker``: a decoupled Python model that streams 48 responses of four tensors each (as the vLLM
  stage does with its counts: ``text_output``, ``num_input_tokens``, ``num_output_tokens``,
  ``finish_reason``), then the final flag.
- ``relay``: a decoupled Python model that reads one ``ticker`` stream by BLS
  (``exec(decoupled=True)``) in a thread per request, lets go of the iterator as soon as the
  stream ends, and answers how many pieces it read; a thread of its own allocates Python objects
  meanwhile, as a busy model's threads do. The stub's utility thread then often drops the
  iterator's last reference without the GIL, and the stub dies ("Stub process 'relay_0_0' is not
  healthy", or its requests are never answered): 360 streams from 6 clients took it down within
  30-35 s in 2 of 2 runs.
- ``relay_safe``: the same work done the way ``tritonkit/triton_side/bls_streams.py`` says (what
  the LLM pipelines' front does): each request read in ``execute`` (one stream per instance at a
  time, six instances), and the stream let go only after the stub's cleanup of it has run.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tritonkit.triton_side import TRITON_SIDE_DIR

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

#: what both relays share: a thread churning Python objects, and the BLS request to the ticker
_RELAY_COMMON = """import threading, time
import numpy as np
import triton_python_backend_utils as pb_utils

def churn():
    while True:
        junk = [{"a": str(i), "b": (i, i)} for i in range(500)]
        del junk
        time.sleep(0)

def ticker_request():
    return pb_utils.InferenceRequest(model_name="ticker",
        inputs=[pb_utils.Tensor("IN", np.array([b"x"], dtype=np.object_))],
        requested_output_names=["text_output", "num_input_tokens", "num_output_tokens", "finish_reason"])

def answer(sender, n):
    count = pb_utils.Tensor("N", np.array([str(n).encode()], dtype=np.object_))
    sender.send(pb_utils.InferenceResponse([count]), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
"""

RELAY = (
    _RELAY_COMMON
    + """
class TritonPythonModel:
    def initialize(self, args):
        threading.Thread(target=churn, daemon=True).start()
    def execute(self, requests):
        for r in requests:
            threading.Thread(target=self.relay, args=(r.get_response_sender(),), daemon=True).start()
    def relay(self, sender):
        responses = ticker_request().exec(decoupled=True)
        n = 0
        for response in responses:
            if pb_utils.get_output_tensor_by_name(response, "text_output") is not None:
                n += 1
        del responses, response  # let go at once: the stub's cleanup may hold the last reference
        answer(sender, n)
"""
)

RELAY_SAFE = (
    _RELAY_COMMON
    + """from bls_streams import BlsStream

class TritonPythonModel:
    def initialize(self, args):
        threading.Thread(target=churn, daemon=True).start()
    def execute(self, requests):
        for r in requests:  # read here: one stream at a time per instance
            sender = r.get_response_sender()
            n = 0
            with BlsStream(ticker_request(), sender) as responses:
                for response in responses:
                    if pb_utils.get_output_tensor_by_name(response, "text_output") is not None:
                        n += 1
                del response
            answer(sender, n)
"""
)

_TEXT = "TYPE_STRING"


def _config(name: str, outputs: list[tuple[str, str, str]], instances: int = 1) -> str:
    outs = ", ".join(f'{{ name: "{n}" data_type: {t} dims: [ {d} ] }}' for n, t, d in outputs)
    return (
        f'name: "{name}"\nbackend: "python"\nmax_batch_size: 0\n'
        f'input [ {{ name: "IN" data_type: {_TEXT} dims: [ 1 ] }} ]\noutput [ {outs} ]\n'
        "model_transaction_policy { decoupled: true }\n"
        f"instance_group [ {{ kind: KIND_CPU count: {instances} }} ]\n"
    )


def write_bls_gil_repository(repository: Path, *, safe_instances: int = 6) -> Path:
    ticks = [("text_output", _TEXT, "-1"), ("num_input_tokens", "TYPE_UINT32", "1")]
    ticks += [("num_output_tokens", "TYPE_UINT32", "1"), ("finish_reason", _TEXT, "-1")]
    count = [("N", _TEXT, "1")]
    models = {"ticker": (TICKER, ticks, 1), "relay": (RELAY, count, 1)}
    models["relay_safe"] = (RELAY_SAFE, count, safe_instances)
    for name, (source, outputs, instances) in models.items():
        (repository / name / "1").mkdir(parents=True, exist_ok=True)
        (repository / name / "1" / "model.py").write_text(source)
        (repository / name / "config.pbtxt").write_text(_config(name, outputs, instances))
    shutil.copy(TRITON_SIDE_DIR / "bls_streams.py", repository / "relay_safe" / "1" / "bls_streams.py")
    return repository
