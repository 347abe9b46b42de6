"""perf on an LLM-decoder pipeline composed: the sender it picks, what it refuses before sending,
and what a result says of it (the load itself: tests/integration/test_perf_composed.py)."""

from __future__ import annotations

import asyncio
import dataclasses

import numpy as np
import pytest

from tests.unit.test_perf_results import make_run
from tritonkit.errors import PerfError
from tritonkit.llm_pipeline import ComposedPipeline
from tritonkit.perf._composed_sender import ComposedSender
from tritonkit.perf._stream_sender import StreamSender
from tritonkit.perf._target import Target
from tritonkit.perf.composition import Composition, composed_record
from tritonkit.perf.loadgen import make_sender
from tritonkit.perf.report import composed_note, render_markdown
from tritonkit.perf.view import Note, run_view

PIPELINE = ComposedPipeline(
    name="vlm_llm",
    prompt_model="vlm_llm_prompt",
    prompt_inputs=("RAW_IMAGE", "TEXT_QUERY"),
    llm_model="tiny_llm",
    max_tokens_limit=128,
    max_tokens_input="MAX_TOKENS",
)
#: the front door's streamed gRPC target, before a composition is applied
TARGET = Target("127.0.0.1:1", False, "grpc", "vlm_llm", "", (), stream=True)


def _request(max_tokens: int) -> dict[str, np.ndarray]:
    return {
        "RAW_IMAGE": np.frombuffer(b"png", dtype=np.uint8),
        "TEXT_QUERY": np.array([b"hi"], dtype=np.object_),
        "MAX_TOKENS": np.array([max_tokens], dtype=np.int32),
    }


def test_make_sender_composes_when_the_target_carries_a_pipeline_and_streams_the_model_otherwise() -> None:
    composed = Composition(pipeline=PIPELINE, stage_inputs=("text_input",), engine_counts=True).target(TARGET)
    assert composed.pipeline == PIPELINE and composed.stage_inputs == ("text_input",)
    assert type(make_sender(target=composed, requests=[_request(4)], conn_limit=1)) is ComposedSender
    assert type(make_sender(target=TARGET, requests=[_request(4)], conn_limit=1)) is StreamSender


def test_composed_sender_refuses_a_limit_past_the_pipelines_naming_it_when_opened() -> None:
    target = dataclasses.replace(TARGET, pipeline=PIPELINE)
    sender = ComposedSender(target=target, requests=[_request(4), _request(1000)], conn_limit=1)
    with pytest.raises(PerfError, match="request 2 of the data set for pipeline 'vlm_llm' is refused") as err:
        asyncio.run(sender.open())
    assert "MAX_TOKENS is 1000; this pipeline generates at most 128" in str(err.value)
    assert err.value.hint is not None and "--no-compose" in err.value.hint


def test_composed_sender_refuses_to_start_when_the_target_carries_no_pipeline() -> None:
    with pytest.raises(PerfError, match="needs the pipeline"):
        ComposedSender(target=TARGET, requests=[_request(4)], conn_limit=1)


def test_run_says_it_was_composed_and_of_which_models_when_its_settings_record_a_composition() -> None:
    record = composed_record(Composition(pipeline=PIPELINE, stage_inputs=(), engine_counts=False))
    assert record == {"prompt_model": "vlm_llm_prompt", "llm_model": "tiny_llm"}
    run = dataclasses.replace(make_run((1,)), model="vlm_llm", settings={"composed": record})
    note = composed_note(run)
    assert note is not None and "'vlm_llm_prompt'" in note and "'tiny_llm'" in note
    assert Note(note) in run_view(run).blocks
    assert f"- {note}" in render_markdown(run, plot_file=None)


def test_run_says_nothing_of_composition_when_the_model_itself_was_measured() -> None:
    assert composed_record(None) is None
    run = make_run((1,))
    assert composed_note(dataclasses.replace(run, settings={"composed": None})) is None
    assert not any(isinstance(b, Note) and b.text.startswith("composed:") for b in run_view(run).blocks)
