"""What goes back to the client: the response tensors of one engine output (only the new part of
each completion when streaming) and a sender that sends one final response at most.

Shipped beside ``model.py`` (the stub puts this directory on ``sys.path``); imports nothing
from tritonkit.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils
from request_inputs import ParsedRequest

#: the backend's outputs, as NVIDIA's vllm backend declares them (auto-complete adds the missing)
OUTPUTS: tuple[dict[str, Any], ...] = (
    {"name": "text_output", "data_type": "TYPE_STRING", "dims": [-1]},
    {"name": "finish_reason", "data_type": "TYPE_STRING", "dims": [-1]},
    {"name": "cumulative_logprob", "data_type": "TYPE_FP32", "dims": [-1]},
    {"name": "logprobs", "data_type": "TYPE_STRING", "dims": [-1]},
    {"name": "num_input_tokens", "data_type": "TYPE_UINT32", "dims": [1]},
    {"name": "num_output_tokens", "data_type": "TYPE_UINT32", "dims": [-1]},
)


class ResponseState:
    """How much of each completion earlier streamed responses already carried."""

    def __init__(self) -> None:
        self.text_lens: list[int] | None = None
        self.token_lens: list[int] | None = None
        self.logprob_lens: list[int] | None = None


def _deltas(previous: list[int] | None, current: list[int]) -> list[int]:
    return [0] * len(current) if previous is None else previous


def build_response(output: Any, parsed: ParsedRequest, state: ResponseState, *, prepend: bool) -> Any:
    """The InferenceResponse of one engine output: what ``state`` says was not sent yet, and the
    additional outputs the request asked for; ``prepend`` puts the prompt before the text."""
    completions = list(output.outputs)
    text_lens = _deltas(state.text_lens, [len(c.text) for c in completions])
    prefix = parsed.prompt if prepend else ""
    texts = [
        (prefix + c.text[start:]).encode("utf-8") for c, start in zip(completions, text_lens, strict=True)
    ]
    state.text_lens = [len(c.text) for c in completions]
    tensors = [pb_utils.Tensor("text_output", np.asarray(texts, dtype=np.object_))]
    wants = parsed.outputs
    if wants["return_finish_reason"]:
        reasons = [str(c.finish_reason).encode("utf-8") for c in completions]
        tensors.append(pb_utils.Tensor("finish_reason", np.asarray(reasons, dtype=np.object_)))
    if wants["return_cumulative_logprob"]:
        values = [math.nan if c.cumulative_logprob is None else c.cumulative_logprob for c in completions]
        tensors.append(pb_utils.Tensor("cumulative_logprob", np.asarray(values, dtype=np.float32)))
    if wants["return_logprobs"]:
        logprobs = np.asarray(_logprobs(completions, state), dtype=np.object_)
        tensors.append(pb_utils.Tensor("logprobs", logprobs))
    if wants["return_num_input_tokens"]:
        count = len(output.prompt_token_ids or ())
        tensors.append(pb_utils.Tensor("num_input_tokens", np.asarray([count], dtype=np.uint32)))
    if wants["return_num_output_tokens"]:
        token_lens = _deltas(state.token_lens, [len(c.token_ids) for c in completions])
        counts = [len(c.token_ids) - start for c, start in zip(completions, token_lens, strict=True)]
        state.token_lens = [len(c.token_ids) for c in completions]
        tensors.append(pb_utils.Tensor("num_output_tokens", np.asarray(counts, dtype=np.uint32)))
    return pb_utils.InferenceResponse(output_tensors=tensors)


def _logprobs(completions: list[Any], state: ResponseState) -> list[bytes]:
    starts = _deltas(state.logprob_lens, [0] * len(completions))
    encoded: list[bytes] = []
    lens: list[int] = []
    for completion, start in zip(completions, starts, strict=True):
        steps = completion.logprobs
        if steps is None:
            encoded.append(b"null")
            lens.append(0)
            continue
        lens.append(len(steps))
        rows = [
            {
                str(token): {"logprob": lp.logprob, "rank": lp.rank, "decoded_token": lp.decoded_token}
                for token, lp in step.items()
            }
            for step in list(steps)[start:]
        ]
        encoded.append(json.dumps(rows).encode("utf-8"))
    state.logprob_lens = lens
    return encoded


class Reply:
    """One request's response sender: sends at most one final response, never raises.

    ``warn`` takes a line for Triton's log (a response that could not be sent).
    """

    def __init__(self, sender: Any, warn: Callable[[str], None]) -> None:
        self._sender = sender
        self._warn = warn
        self.done = False

    def cancelled(self) -> bool:
        try:
            return bool(self._sender.is_cancelled())
        except Exception:  # noqa: BLE001 - a sender that cannot tell has lost its client
            return True

    def send(self, response: Any, *, final: bool) -> bool:
        """Send ``response``; False when the client is gone (the request should be aborted)."""
        if self.done:
            return False
        flags = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL if final else 0
        try:
            self._sender.send(response, flags=flags)
        except Exception as exc:  # noqa: BLE001 - the client dropped its stream
            self._warn(f"could not send a response: {exc}")
            self.done = True
            return False
        self.done = final
        return True

    def error(self, message: str, code: int | None = None) -> None:
        """Send ``message`` as the final (error) response, unless one was sent already."""
        if self.done:
            return
        if code is None:
            code = pb_utils.TritonError.INVALID_ARG
        self.send(pb_utils.InferenceResponse(error=pb_utils.TritonError(message, code)), final=True)
        self.done = True
