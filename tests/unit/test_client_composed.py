"""The composition's reading of the LLM stage's stream (``client/composed.py``): an answer whose
stream ends without the finish reason the stage was asked for is refused as cut short, not passed
off as whole. On a real server: tests/integration/test_pipeline_composed.py."""

from __future__ import annotations

import numpy as np
import pytest

from tritonkit.client._stream import StreamResponse
from tritonkit.client.composed import Composer
from tritonkit.errors import ServerUnavailableError, StreamCutShortError
from tritonkit.llm_pipeline import PROMPT_OUTPUT, ComposedPipeline

PIPELINE = ComposedPipeline(
    name="vlm_llm", prompt_model="vlm_llm_prompt", prompt_inputs=("A",), llm_model="tiny_llm"
)
PROMPT = {PROMPT_OUTPUT: np.array([b"Describe it."], dtype=np.object_)}
#: the vLLM stage's inputs, its return_* flags included
STAGE_INPUTS = ("text_input", "stream", "sampling_parameters", "exclude_input_in_output",
                "return_num_input_tokens", "return_num_output_tokens", "return_finish_reason")  # fmt: skip


def _piece(index: int, text: str, reason: str | None = None) -> StreamResponse:
    outputs = {"text_output": np.array([text.encode()], dtype=np.object_)}
    if reason is not None:
        outputs["finish_reason"] = np.array([reason.encode()], dtype=np.object_)
    return StreamResponse(outputs=outputs, index=index)


def _read(plan: Composer, pieces: list[StreamResponse]) -> list[str]:
    got = [plan.read(p) for p in pieces]
    return [r.text("GENERATED_TEXT") for r in got if r is not None]


def test_composer_ended_passes_when_the_last_piece_carries_the_finish_reason() -> None:
    plan = Composer(PIPELINE, {"A": 1}, None)
    request = plan.engine_request(PROMPT, STAGE_INPUTS)
    assert "return_finish_reason" in request
    texts = _read(plan, [_piece(0, "a "), _piece(1, "b ", "None"), _piece(2, "c ", "length")])
    assert texts == ["a ", "b ", "c "]
    plan.ended()  # whole: no error


def test_composer_ended_raises_cut_short_when_the_stream_ends_without_the_finish_reason() -> None:
    plan = Composer(PIPELINE, {"A": 1}, None)
    plan.engine_request(PROMPT, STAGE_INPUTS)
    _read(plan, [_piece(0, "a "), _piece(1, "b ", "None")])  # vLLM sends "None" before the end
    with pytest.raises(
        StreamCutShortError, match="'vlm_llm' ended without the last piece of its LLM stage 'tiny_llm'"
    ) as err:
        plan.ended()
    assert isinstance(err.value, ServerUnavailableError)  # a server-class error: retry policies see it


def test_composer_asks_the_finish_reason_and_refuses_a_cut_answer_when_only_the_text_is_wanted() -> None:
    plan = Composer(PIPELINE, {"A": 1}, ["GENERATED_TEXT"])
    request = plan.engine_request(PROMPT, STAGE_INPUTS)
    assert "return_finish_reason" in request and "return_num_output_tokens" not in request
    assert _read(plan, [_piece(0, "a ")]) == ["a "]
    with pytest.raises(StreamCutShortError):
        plan.ended()


def test_composer_ended_passes_when_the_stage_cannot_say_its_finish_reason() -> None:
    plan = Composer(PIPELINE, {"A": 1}, None)
    request = plan.engine_request(PROMPT, STAGE_INPUTS[:4])  # no return_* flags: nothing to tell a cut by
    assert "return_finish_reason" not in request
    _read(plan, [_piece(0, "a ")])
    plan.ended()
