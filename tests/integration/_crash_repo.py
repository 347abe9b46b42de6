"""The smallest repository that crashes Triton 2.51 with bad input, and its safe twin.

- ``reject``: Python model that answers every request with INVALID_ARGUMENT (a stage refusing
  bad client input).
- ``passthrough``: Python identity model.
- ``fanout`` (the crash): ensemble whose first two steps both start from the ensemble inputs,
  ``reject`` listed first. Triton puts both in one scheduling batch and dispatches them in step
  order from the request's thread; when ``reject``'s error comes back before ``passthrough`` is
  dispatched, 2.51's ``EnsembleContext::ScheduleSteps`` releases the request one time too many
  (triton-inference-server/core#483) and the server dies with SIGSEGV.
- ``gated`` (the fix): ``reject`` reads both inputs and runs alone; the two passthroughs fan
  out after it, so a refusal never races a dispatch.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

REJECT_MODEL = """import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        error = pb_utils.TritonError("A is not acceptable", pb_utils.TritonError.INVALID_ARG)
        return [pb_utils.InferenceResponse(error=error) for _ in requests]
"""

PASSTHROUGH_MODEL = """import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy())]
            )
            for r in requests
        ]
"""

_U8 = "data_type: TYPE_UINT8 dims: [-1]"


def _python_model(root: Path, name: str, code: str, inputs: list[str], outputs: list[str]) -> None:
    (root / name / "1").mkdir(parents=True)
    (root / name / "1" / "model.py").write_text(code)
    ins = ", ".join(f'{{ name: "{n}" {_U8} }}' for n in inputs)
    outs = ", ".join(f'{{ name: "{n}" {_U8} }}' for n in outputs)
    (root / name / "config.pbtxt").write_text(
        f'name: "{name}"\nbackend: "python"\nmax_batch_size: 0\ninput [{ins}]\noutput [{outs}]\n'
        "instance_group [{ kind: KIND_CPU count: 1 }]\n"
    )


Step = tuple[str, dict[str, str], dict[str, str]]


def _ensemble(root: Path, name: str, outputs: list[str], steps: list[Step]) -> None:
    (root / name / "1").mkdir(parents=True)
    outs = ", ".join(f'{{ name: "{n}" {_U8} }}' for n in outputs)
    text = [
        f'name: "{name}"',
        'platform: "ensemble"',
        "max_batch_size: 0",
        f'input [{{ name: "A" {_U8} }}, {{ name: "B" {_U8} }}]',
        f"output [{outs}]",
        "ensemble_scheduling {",
    ]
    for model, inputs, outs_map in steps:
        text.append(f'  step {{ model_name: "{model}" model_version: -1')
        text += [f'    input_map {{ key: "{k}" value: "{v}" }}' for k, v in inputs.items()]
        text += [f'    output_map {{ key: "{k}" value: "{v}" }}' for k, v in outs_map.items()]
        text.append("  }")
    text.append("}")
    (root / name / "config.pbtxt").write_text("\n".join(text) + "\n")


def write_crash_repository(root: Path) -> Path:
    """Write ``reject``, ``passthrough``, ``passthrough_b`` and the ``fanout`` / ``gated`` ensembles."""
    _python_model(root, "reject", REJECT_MODEL, ["A", "B"], ["A_OUT", "B_OUT"])
    _python_model(root, "passthrough", PASSTHROUGH_MODEL, ["X"], ["Y"])
    _python_model(root, "passthrough_b", PASSTHROUGH_MODEL, ["X"], ["Y"])
    _ensemble(
        root,
        "fanout",
        ["A_OUT", "B_OUT", "Y"],
        [
            ("reject", {"A": "A", "B": "B"}, {"A_OUT": "A_OUT", "B_OUT": "B_OUT"}),
            ("passthrough", {"X": "B"}, {"Y": "Y"}),
        ],
    )
    _ensemble(
        root,
        "gated",
        ["Y", "Y_B"],
        [
            ("reject", {"A": "A", "B": "B"}, {"A_OUT": "checked_a", "B_OUT": "checked_b"}),
            ("passthrough", {"X": "checked_a"}, {"Y": "Y"}),
            ("passthrough_b", {"X": "checked_b"}, {"Y": "Y_B"}),
        ],
    )
    return root


@dataclass
class Hammered:
    """What a bounded burst of bad requests did to a server."""

    sent: int
    statuses: Counter[str]
    server_died: bool
    seconds: float


def hammer(server: Any, model: str, *, requests: int, concurrency: int, deadline_s: float) -> Hammered:
    """Send up to ``requests`` bad requests with ``concurrency`` threads; stop early if the server dies."""
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException

    lock = threading.Lock()
    statuses: Counter[str] = Counter()
    remaining = [requests]
    died = threading.Event()
    start = time.monotonic()

    def worker() -> None:
        client = httpclient.InferenceServerClient(server.http_address, network_timeout=10.0)
        data = np.arange(16, dtype=np.uint8)
        inputs = []
        for name in ("A", "B"):
            tensor = httpclient.InferInput(name, [16], "UINT8")
            tensor.set_data_from_numpy(data)
            inputs.append(tensor)
        while not died.is_set() and time.monotonic() - start < deadline_s:
            with lock:
                if remaining[0] == 0:
                    return
                remaining[0] -= 1
            try:
                client.infer(model, inputs)
                status = "200"
            except InferenceServerException as exc:
                status = str(exc.status())
            except Exception:  # the connection broke: did the server die?
                status = "no answer"
            with lock:
                statuses[status] += 1
            if not server.running:
                died.set()

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    time.sleep(0.5)  # a crash on the last request shows up a moment later
    died_now = not server.running
    return Hammered(
        sent=sum(statuses.values()),
        statuses=statuses,
        server_died=died.is_set() or died_now,
        seconds=time.monotonic() - start,
    )
