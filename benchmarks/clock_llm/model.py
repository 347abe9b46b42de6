"""clock_llm: an LLM stage's tensors, answered by the clock (see benchmarks/clock_llm.yaml).

One scheduler thread serves every request: a heap of (due time, request) pairs, so a thousand
concurrent streams cost one thread and their timings hold as long as the CPU keeps up.

Token counts, where the config declares them (benchmarks/clock_llm_counted.yaml): with the vLLM
stage's optional inputs ``return_num_input_tokens`` / ``return_num_output_tokens`` true, each
response carries ``num_input_tokens`` (the prompt's whitespace-separated words: one token each)
and ``num_output_tokens`` (the pieces in that response: one token each), as NVIDIA's vllm backend
does, so the OpenAI front reports ``usage`` for it.

The finish reason, where the config declares it (``return_finish_reason``; benchmarks/
clock_tiny_llm.yaml): the last piece carries ``finish_reason`` "length" (every answer runs to its
limit), as the vLLM stage marks the step that ends an answer.

A stall, where the config sets STALL_AFTER: after that many pieces a request gets nothing more
(neither a piece nor the final flag) until Triton cancels it, as a wedged engine would behave.

A cut answer, where the config sets CUT_AFTER: after that many pieces the final flag comes, with
no more pieces and no finish reason, as an answer looks whose tail Triton lost (how the OpenAI
front tells it from a whole one: tests/integration/test_openai_relay.py).

Cancellations, where the config names a file in the parameter CANCELLED_LOG: a line for each
request Triton cancelled before its last piece (how many pieces it had sent), so a test proves on
the server's side that a client leaving cancelled its request
(tests/integration/test_openai_relay.py).
"""

import heapq
import itertools
import json
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class _Stream:
    def __init__(self, request, arrived, pieces, streamed, counts):
        self.sender = request.get_response_sender()
        self.request = request
        self.arrived = arrived
        self.pieces = pieces
        self.streamed = streamed
        self.counts = counts  # (prompt tokens or None, count output tokens?)
        self.sent = 0


def _flag(request, name):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return bool(tensor.as_numpy().reshape(-1)[0]) if tensor is not None else False


class TritonPythonModel:
    def initialize(self, args):
        params = json.loads(args["model_config"]).get("parameters", {})

        def value(key, default):
            return params.get(key, {}).get("string_value", default)

        self.pieces = int(value("PIECES", 32))
        self.first_s = float(value("FIRST_DELAY_MS", 20)) / 1000.0
        self.gap_s = float(value("GAP_MS", 10)) / 1000.0
        self.text = str(value("PIECE_TEXT", "tick"))
        self.cancelled_log = str(value("CANCELLED_LOG", ""))
        # a stage that goes silent mid-answer: after STALL_AFTER pieces, neither a piece nor the
        # final flag until Triton says the request was cancelled (0: never)
        self.stall_after = int(value("STALL_AFTER", 0))
        # an answer whose tail is lost: after CUT_AFTER pieces the final flag, nothing more (0: never)
        self.cut_after = int(value("CUT_AFTER", 0))
        self.heap = []
        self.order = itertools.count()
        self.cond = threading.Condition()
        self.stopping = False
        self.thread = threading.Thread(target=self._run, name="clock_llm", daemon=True)
        self.thread.start()

    def _wanted(self, request):
        pieces = self.pieces
        raw = pb_utils.get_input_tensor_by_name(request, "sampling_parameters")
        if raw is not None:
            item = raw.as_numpy().reshape(-1)[0]
            sampling = json.loads(item.decode("utf-8") if isinstance(item, bytes) else str(item))
            if isinstance(sampling, dict) and isinstance(sampling.get("max_tokens"), int):
                pieces = max(0, min(pieces, sampling["max_tokens"]))
        prompt = None
        if _flag(request, "return_num_input_tokens"):
            item = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy().reshape(-1)[0]
            prompt = len((item.decode("utf-8", "replace") if isinstance(item, bytes) else str(item)).split())
        counts = (prompt, _flag(request, "return_num_output_tokens"), _flag(request, "return_finish_reason"))
        return pieces, _flag(request, "stream"), counts

    def _piece(self, numbers, counts, last=False):
        text = "".join(f"{self.text}{i} " for i in numbers)
        tensors = [pb_utils.Tensor("text_output", np.array([text.encode()], dtype=np.object_))]
        prompt, outputs, reason = counts
        if reason and last:  # the engine's word on the step that ends the answer: it ran to its limit
            tensors.append(pb_utils.Tensor("finish_reason", np.array([b"length"], dtype=np.object_)))
        if prompt is not None:
            tensors.append(pb_utils.Tensor("num_input_tokens", np.array([prompt], dtype=np.uint32)))
        if outputs:
            tensors.append(pb_utils.Tensor("num_output_tokens", np.array([len(numbers)], dtype=np.uint32)))
        return pb_utils.InferenceResponse(tensors)

    def _step(self, s):
        """Send what is due for ``s``; the time of its next piece, or None when it is done."""
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        done = s.sent >= s.pieces or (self.cut_after and s.sent >= self.cut_after)
        if done or s.request.is_cancelled():
            if not done and self.cancelled_log:
                with open(self.cancelled_log, "a") as log:
                    log.write(f"{s.sent}\n")  # the pieces it had sent when Triton said cancelled
            s.sender.send(flags=final)
            return None
        if self.stall_after and s.sent >= self.stall_after:
            return time.monotonic() + 0.05  # silent: look again whether Triton cancelled it
        if s.streamed:
            s.sender.send(self._piece([s.sent], s.counts, last=s.sent + 1 >= s.pieces))
            s.sent += 1
            return s.arrived + self.first_s + s.sent * self.gap_s
        # one response holding the whole answer
        s.sender.send(self._piece(range(s.pieces), s.counts, last=True))
        s.sent = s.pieces
        return time.monotonic()

    def _run(self):
        while True:
            with self.cond:
                while not self.stopping and (not self.heap or self.heap[0][0] > time.monotonic()):
                    wait = self.heap[0][0] - time.monotonic() if self.heap else None
                    self.cond.wait(wait)
                if self.stopping:
                    return
                _, _, s = heapq.heappop(self.heap)
            due = self._step(s)
            if due is not None:
                with self.cond:
                    heapq.heappush(self.heap, (due, next(self.order), s))

    def execute(self, requests):
        arrived = time.monotonic()
        for request in requests:
            try:
                pieces, streamed, counts = self._wanted(request)
            except (ValueError, UnicodeDecodeError) as exc:
                sender = request.get_response_sender()
                error = pb_utils.TritonError(f"sampling_parameters is not a JSON object: {exc}")
                final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
                sender.send(pb_utils.InferenceResponse(error=error), flags=final)
                continue
            s = _Stream(request, arrived, pieces, streamed, counts)
            due = arrived + (self.first_s if pieces else 0.0)
            with self.cond:
                heapq.heappush(self.heap, (due, next(self.order), s))
                self.cond.notify()
        return None

    def finalize(self):
        with self.cond:
            self.stopping = True
            self.cond.notify()
        self.thread.join(timeout=5)
