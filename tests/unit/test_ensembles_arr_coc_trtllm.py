"""ensembles/arr_coc_trtllm.yaml: ARR-COC with its decoder swapped for a TensorRT-LLM VLM stage.

Built and validated only (the engine files are stand-ins: ensembles/arr_coc_trtllm/README.md; no
GPU is here to run TensorRT-LLM). The prompt stage is plain numpy and runs here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests._examples import load_example
from tritonkit.config import read_config
from tritonkit.repository.builder import build_spec
from tritonkit.repository.validator import validate_repository

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("arr_coc_trtllm") / "repo"
    build_spec(ROOT / "ensembles" / "arr_coc.yaml", repo)
    build_spec(ROOT / "ensembles" / "arr_coc_trtllm.yaml", repo)
    return repo


def test_variant_builds_the_trtllm_layout_beside_arr_coc_and_validates_clean(repository: Path) -> None:
    for model in (
        "arr_coc_qwen3_vl",
        "arr_coc_qwen3_vl_preprocessing",
        "arr_coc_qwen3_vl_tensorrt_llm",
        "arr_coc_qwen3_vl_postprocessing",
        "arr_coc_qwen3_vl_multimodal_encoders",
        "arr_coc_trtllm",
        "arr_coc",
    ):
        assert (repository / model / "config.pbtxt").is_file(), model
    for target in (None, "24.10"):
        report = validate_repository(repository, target=target)
        assert [str(p) for p in report.problems if p.severity != "info"] == []


def test_variant_calls_the_stage_ensemble_as_its_decoder(repository: Path) -> None:
    cfg = read_config(repository / "arr_coc_trtllm" / "config.pbtxt")
    last = cfg.ensemble_scheduling.step[-1]
    assert last.model_name == "arr_coc_qwen3_vl"
    assert dict(last.input_map) == {
        "text_input": "prompt",
        "image_input": "image",
        "max_tokens": "max_tokens",
    }
    llm = read_config(repository / "arr_coc_qwen3_vl_tensorrt_llm" / "config.pbtxt")
    assert llm.backend == "tensorrtllm" and not llm.model_transaction_policy.decoupled


def test_prompt_stage_makes_the_vlm_request_from_the_features() -> None:
    prompt = load_example("ensembles/arr_coc_trtllm/prompt.py")
    relevance = np.zeros((14, 14), dtype=np.float32)
    relevance[3, 9] = 1.0
    budget = np.full((14, 14), 4, dtype=np.int32)
    texture = np.random.default_rng(0).random((1, 13, 224, 224), dtype=np.float32)
    out = prompt.prepare("Where is the sun?", relevance, budget, texture)
    text = out["PROMPT"][0, 0].decode()
    assert "Where is the sun?" in text and "row 4, column 10" in text
    assert out["IMAGE"].shape == (1, 3, 448, 448) and out["IMAGE"].dtype == np.float16
    assert out["MAX_TOKENS"].tolist() == [[98]]
    with pytest.raises(ValueError):
        prompt.prepare("q", relevance[:2], budget, texture)
