"""`tritonkit perf` on an LLM-decoder pipeline, composed (the prompt model unary, then the LLM
stage's stream, timed as one request) or through its front door (``--no-compose``), on a real
tritonserver 2.51 serving the pipelines over the clock stage (``test_pipeline_composed``'s: every
answer is exactly MAX_TOKENS pieces, one every 40 ms; the stage streams any number at once).

The front door (``vlm_llm``) has 8 instances, one stream each on 2.51: composed, 16 answers
stream at once. Everything asserted is state (pieces, tokens, errors, which answers overlapped),
never how fast: the suite runs beside CPU hogs.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tests.integration.test_pipeline_composed as composed
from tritonkit.perf import PerfSettings
from tritonkit.perf._target import Record, Target
from tritonkit.perf.inputs import Array
from tritonkit.perf.loadgen import Load
from tritonkit.perf.runner import Runner
from tritonkit.perf.view import run_view

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

PIPELINE = "vlm_llm"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, triton_server_factory: Callable[..., Any]) -> Any:
    repository, _ = composed.build_composed_repository(tmp_path_factory.mktemp("perf_composed"))
    composed._set_parameters(
        repository / "tiny_llm" / "config.pbtxt", PIECES=128
    )  # as many as MAX_TOKENS asks
    return triton_server_factory(repository)


def _inputs(where: Path, *, max_tokens: int, image: bytes | None = None) -> Path:
    """perf's --input-data directory for the pipeline: one file per input, named by it."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "RAW_IMAGE").write_bytes(composed.SAMPLE.read_bytes() if image is None else image)
    (where / "TEXT_QUERY").write_text(composed.QUESTIONS[PIPELINE])
    (where / "MAX_TOKENS").write_bytes(np.array([max_tokens], dtype=np.int32).tobytes())
    return where


class _RecordingRunner(Runner):
    """A runner that keeps every raw record its load hands back (to see which answers overlapped)."""

    def __init__(self, settings: PerfSettings) -> None:
        super().__init__(settings)
        self.records: list[Record] = []

    async def _open_load(self, target: Target, requests: list[dict[str, Array]]) -> Load:
        load = await super()._open_load(target, requests)
        drain = load.drain

        async def recorded() -> tuple[list[Record], float, int]:
            got = await drain()
            self.records.extend(got[0])
            return got

        load.drain = recorded  # type: ignore[method-assign]
        return load


def _streaming_at_once(records: list[Record]) -> int:
    """The most answers that were streaming at one moment: each answer from its first piece to
    its last, as the client saw them (record: end, latency to the last piece, error, stream info)."""
    edges = []
    for end, latency, _, info in records:
        assert info is not None
        start = end - max(info[4], 0) - latency  # end is the final response: the tail after the last
        edges += [(start + info[0], 1), (start + latency, -1)]
    most = now = 0
    for _, step in sorted(edges, key=lambda e: (e[0], e[1])):  # an end before a start at one instant
        now += step
        most = max(most, now)
    return most


def test_perf_composes_a_pipeline_and_streams_more_answers_at_once_than_its_front_door_has_instances(
    server: Any, tmp_path: Path
) -> None:
    pieces = 64  # ~2.6 s an answer: 16 prompts are asked well within one
    settings = PerfSettings(
        url=server.grpc_url,
        model=PIPELINE,
        protocol="grpc",
        levels=(16,),
        compose=True,
        input_data=str(_inputs(tmp_path / "data", max_tokens=pieces)),
        duration_s=6.0,
        warmup_s=0.0,
    )
    runner = _RecordingRunner(settings)
    run = asyncio.run(runner.run())
    assert run.settings["composed"] == {"prompt_model": "vlm_llm_prompt", "llm_model": "tiny_llm"}
    (step,) = run.steps
    assert step.errors == {} and step.requests >= 16
    st = step.stream
    assert st is not None and st.token_counting == "engine"
    assert st.output_tokens is not None and st.output_tokens.min_us == st.output_tokens.max_us == pieces
    assert st.responses == pieces * step.requests
    records = runner.records
    assert records and all(r[2] is None and r[3] is not None and r[3][2] == pieces for r in records)
    # the front door streams 8 at once (one per instance); composed, the clock stage streams all 16
    assert _streaming_at_once(records) > 8
    # the server side is the stage's, and the stages are the composition's two steps
    assert step.server is not None and step.server.success_count > 0
    assert [s.model for s in step.stages][0] == "vlm_llm_prompt" and step.stages[-1].model == "tiny_llm"
    notes = [getattr(block, "text", "") for block in run_view(run)]
    assert any("composed: each request asked vlm_llm's prompt model 'vlm_llm_prompt'" in n for n in notes)


@pytest.mark.parametrize("compose", [True, False], ids=["composed", "front-door"])
def test_perf_cli_measures_every_answer_right_composed_or_through_the_front_door(
    server: Any, tmp_path: Path, compose: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run.json"
    argv = ["perf", server.grpc_url, PIPELINE, "-p", "grpc", "--concurrency", "2", "--duration", "2",
            "--warmup", "0", "--input-data", str(_inputs(tmp_path / "data", max_tokens=4)),
            "--json", str(out), "--compose" if compose else "--no-compose"]  # fmt: skip
    assert composed._run_cli(argv) == 0
    printed = capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["settings"]["compose"] is compose
    (step,) = data["steps"]
    assert step["errors"] == {} and step["requests"] > 0
    assert step["stream"]["responses"] == 4 * step["requests"]
    if compose:
        assert data["settings"]["composed"] == {"prompt_model": "vlm_llm_prompt", "llm_model": "tiny_llm"}
        assert "composed: each request asked" in printed
    else:
        assert data["settings"]["composed"] is None
        assert "composed:" not in printed


def test_perf_cli_refuses_a_limit_past_the_pipelines_before_sending_with_a_message_not_a_traceback(
    server: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["perf", server.grpc_url, PIPELINE, "-p", "grpc", "--duration", "1", "--warmup", "0",
            "--input-data", str(_inputs(tmp_path / "data", max_tokens=1000))]  # fmt: skip
    assert composed._run_cli(argv) == 1
    err = capsys.readouterr().err
    assert "MAX_TOKENS is 1000; this pipeline generates at most 128" in err
    assert "--no-compose" in err and "Traceback" not in err


def test_perf_counts_the_prompt_models_refusal_as_the_requests_error_when_the_image_is_not_one(
    server: Any, tmp_path: Path
) -> None:
    settings = PerfSettings(
        url=server.grpc_url,
        model=PIPELINE,
        protocol="grpc",
        compose=True,
        input_data=str(_inputs(tmp_path / "data", max_tokens=4, image=b"hello")),
        duration_s=1.0,
        warmup_s=0.0,
    )
    runner = _RecordingRunner(settings)
    run = asyncio.run(runner.run())
    (step,) = run.steps
    assert step.requests == 0 and sum(step.errors.values()) > 0
    (kind,) = step.errors
    assert kind.startswith("grpc "), step.errors  # the prompt model's refusal, under its gRPC status
    assert runner.records and all(r[2] == kind and r[3] is None for r in runner.records)
