"""The composition contract of LLM-decoder pipelines (tritonkit/llm_pipeline.py): read from the
configs the shipped specs build, and the front door's rules for a request's own limit and
sampling, held equal to ensembles/common/llm_front.py's."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests._examples import load_example
from tritonkit.config import config_to_dict, read_config
from tritonkit.errors import InputMismatchError
from tritonkit.llm_pipeline import (
    ENGINE_OUTPUTS,
    REQUEST_SAMPLING_KEYS,
    ComposedPipeline,
    composed_pipeline,
)
from tritonkit.triton_side import TRITON_SIDE_DIR

ROOT = Path(__file__).resolve().parents[2]
reference = load_example("ensembles/reference.py")
if str(TRITON_SIDE_DIR) not in sys.path:  # bls_streams.py, shipped beside the front by its spec
    sys.path.insert(0, str(TRITON_SIDE_DIR))
front = reference.load_stage("common/llm_front.py")


def _config(repository: Path, name: str) -> dict[str, Any]:
    return config_to_dict(read_config(repository / name / "config.pbtxt"))


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tritonkit.repository import build_spec

    repo = tmp_path_factory.mktemp("repo")
    for spec in ("ensembles/vlm.yaml", "ensembles/arr_coc.yaml", "benchmarks/clock_tiny_llm.yaml",
                 "ensembles/vlm_llm.yaml", "ensembles/arr_coc_llm.yaml"):  # fmt: skip
        build_spec(ROOT / spec, repo, force=True)
    return repo


def test_composed_pipeline_reads_the_front_doors_parameters_when_built_from_the_shipped_specs(
    repository: Path,
) -> None:
    vlm = composed_pipeline(_config(repository, "vlm_llm"))
    assert vlm == ComposedPipeline(
        name="vlm_llm",
        prompt_model="vlm_llm_prompt",
        prompt_inputs=("RAW_IMAGE", "TEXT_QUERY"),
        llm_model="tiny_llm",
        sampling={"temperature": 0},
        default_max_tokens=48,
        max_tokens_limit=128,
        max_tokens_input="MAX_TOKENS",
        sampling_input="SAMPLING_PARAMETERS",
        front_instances=8,
    )
    arr = composed_pipeline(_config(repository, "arr_coc_llm"))
    assert arr is not None and arr.prompt_model == "arr_coc_llm_prompt" and arr.llm_model == "tiny_llm"


def test_composed_pipeline_is_none_when_a_model_is_no_front_door(repository: Path) -> None:
    for name in ("tiny_llm", "vlm_llm_prompt", "vlm_ensemble"):
        assert composed_pipeline(_config(repository, name)) is None


def test_composed_pipeline_reads_triton_json_and_is_none_when_its_parameters_do_not_parse() -> None:
    def cfg(**params: str) -> dict[str, Any]:
        return {"config": {"name": "p", "parameters": {k: {"string_value": v} for k, v in params.items()}}}

    base = {"PROMPT_MODEL": "pm", "PROMPT_INPUTS": "A, B", "LLM_MODEL": "llm"}
    got = composed_pipeline(cfg(**base))
    assert got is not None and got.prompt_inputs == ("A", "B") and got.front_instances == 1
    assert composed_pipeline(cfg(**base, SAMPLING_PARAMETERS="[1]")) is None
    assert composed_pipeline(cfg(**base, SAMPLING_PARAMETERS='{"max_tokens": 3}')) is None
    assert composed_pipeline(cfg(**base, DEFAULT_MAX_TOKENS="9", MAX_TOKENS_LIMIT="4")) is None
    assert composed_pipeline(cfg(**base, DEFAULT_MAX_TOKENS="many")) is None
    assert composed_pipeline(cfg(PROMPT_MODEL="pm", LLM_MODEL="llm")) is None


def test_request_sampling_keys_are_the_front_doors() -> None:
    assert REQUEST_SAMPLING_KEYS == front.REQUEST_SAMPLING_KEYS
    assert {k: v for k, v in ENGINE_OUTPUTS.items()} == front.USAGE_OUTPUTS


@pytest.mark.parametrize(
    "raw",
    [
        "[1, 2]",
        "not json",
        '{"max_tokens": 4}',
        '{"temperature": 0, "n": 3}',
        b"\xff\xfe",
        "x" * ((1 << 20) + 1),
    ],
)
def test_request_sampling_refuses_what_the_front_door_refuses_when_given_bad_json(raw: str | bytes) -> None:
    pipeline = ComposedPipeline(name="p", prompt_model="pm", prompt_inputs=("A",), llm_model="llm")
    with pytest.raises(InputMismatchError) as ours:
        pipeline.request_sampling(raw)
    with pytest.raises(front.StageError) as theirs:
        front.request_sampling(np.array([raw if isinstance(raw, bytes) else raw.encode()], dtype=np.object_))
    assert ours.value.message.split(":")[0] == str(theirs.value).split(":")[0]


def test_request_sampling_passes_an_allowed_object_and_engine_sampling_puts_the_limit_last() -> None:
    pipeline = ComposedPipeline(
        name="p",
        prompt_model="pm",
        prompt_inputs=("A",),
        llm_model="llm",
        sampling={"temperature": 0, "seed": 1},
    )
    own = pipeline.request_sampling(json.dumps({"temperature": 0.7, "stop": ["."]}))
    assert own == front.request_sampling(np.array([json.dumps(own).encode()], dtype=np.object_))
    assert pipeline.engine_sampling(own, 12) == {
        "temperature": 0.7,
        "seed": 1,
        "stop": ["."],
        "max_tokens": 12,
    }
    assert pipeline.request_sampling(None) == {}


def test_max_tokens_is_the_default_or_the_asked_limit_and_refuses_past_the_limit() -> None:
    pipeline = ComposedPipeline(
        name="p",
        prompt_model="pm",
        prompt_inputs=("A",),
        llm_model="llm",
        default_max_tokens=5,
        max_tokens_limit=9,
    )
    assert pipeline.max_tokens(None) == 5
    assert pipeline.max_tokens(9) == 9
    with pytest.raises(InputMismatchError, match="MAX_TOKENS is 10; this pipeline generates at most 9"):
        pipeline.max_tokens(10)
    with pytest.raises(InputMismatchError, match="at least 1"):
        pipeline.max_tokens(0)


def test_prompt_request_takes_the_prompt_models_inputs_and_leaves_out_what_the_request_has_not() -> None:
    pipeline = ComposedPipeline(name="p", prompt_model="pm", prompt_inputs=("A", "B"), llm_model="llm")
    assert pipeline.prompt_request({"A": 1, "B": 2, "MAX_TOKENS": 3}) == {"A": 1, "B": 2}
    assert pipeline.prompt_request({"B": 2}) == {"B": 2}


def test_validate_says_each_pipelines_ceilings_at_its_instance_group_when_built_from_the_specs(
    repository: Path,
) -> None:
    from tritonkit.repository import validate_repository

    report = validate_repository(repository)
    said = {p.model: p for p in report.problems if p.code == "pipeline-concurrency"}
    assert set(said) == {"vlm_llm", "arr_coc_llm"}
    assert said["vlm_llm"].severity == "info" and said["vlm_llm"].line is not None
    assert "at most 8 answer(s) at once to plain Triton clients" in said["vlm_llm"].message
    assert "prompt model 'vlm_llm_prompt'" in said["vlm_llm"].message


def test_concurrency_ceiling_names_the_vllm_stages_max_num_seqs_when_its_model_json_sets_it(
    repository: Path, tmp_path: Path
) -> None:
    from tritonkit.config import parse_config
    from tritonkit.repository.validator.pipeline_rules import concurrency_ceiling

    front_door = read_config(repository / "vlm_llm" / "config.pbtxt")
    stage = parse_config('name: "tiny_llm"\nbackend: "vllm"\nmodel_transaction_policy { decoupled: true }\n')
    (tmp_path / "tiny_llm" / "1").mkdir(parents=True)
    (tmp_path / "tiny_llm" / "1" / "model.json").write_text(json.dumps({"model": "m", "max_num_seqs": 64}))
    said = concurrency_ceiling("vlm_llm", front_door, {"tiny_llm": stage}, tmp_path)
    assert said is not None and "its vLLM stage 'tiny_llm' batches at once: max_num_seqs 64" in said
    (tmp_path / "tiny_llm" / "1" / "model.json").write_text(json.dumps({"model": "m"}))
    said = concurrency_ceiling("vlm_llm", front_door, {"tiny_llm": stage}, tmp_path)
    assert said is not None and "vLLM's default max_num_seqs" in said
    assert concurrency_ceiling("tiny_llm", stage, {}, tmp_path) is None
