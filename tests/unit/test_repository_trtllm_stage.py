"""TensorRT-LLM stages: a spec entry builds NVIDIA's inflight-batcher layout, every parameter filled.

The golden configs under tests/fixtures/trtllm/ were reviewed by hand against
tensorrtllm_backend docs/model_config.md, "Model Parameters": the *Mandatory parameters* table of
each model (preprocessing: triton_max_batch_size, tokenizer_dir, preprocessing_instance_count,
max_queue_delay_microseconds [0 here: protobuf leaves a zero unwritten], max_queue_size [0:
unbounded, likewise]; postprocessing: triton_max_batch_size, tokenizer_dir,
postprocessing_instance_count; tensorrt_llm: triton_backend -> backend, triton_max_batch_size ->
max_batch_size, decoupled_mode -> model_transaction_policy, max_queue_delay_microseconds /
max_queue_size -> dynamic_batching, engine_dir -> gpt_model_path, batching_strategy ->
gpt_model_type; logits_datatype and encoder_input_features_data_type only type the
context/generation-logits outputs and the encoder input, which this layout does not declare;
tensorrt_llm_bls: triton_max_batch_size, decoupled_mode, bls_instance_count;
multimodal_encoders: triton_max_batch_size, max_queue_delay_microseconds, max_queue_size,
multimodal_model_path) and against the tensor tables ("Unique Inputs for tensorrt_llm model",
"Unique Inputs for tensorrt_llm_bls model"). Engines and tokenizers are stand-ins (no GPU can
build or run an engine here): see _trtllm_helpers.
Set TRITONKIT_REGEN_TRTLLM_GOLDEN=1 to rewrite them after a deliberate change (then review again).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tritonkit.config import read_config
from tritonkit.errors import SpecError
from tritonkit.kinds.releases import TRTLLM_RELEASES, trtllm_image
from tritonkit.repository.builder import build_spec
from tritonkit.repository.validator import validate_repository

from ._trtllm_helpers import fake_engine, fake_tokenizer, fake_vision_engine, stage_spec

GOLDEN = Path(__file__).parents[1] / "fixtures" / "trtllm"
REGEN = os.environ.get("TRITONKIT_REGEN_TRTLLM_GOLDEN") == "1"

TEXT_STAGE = {
    "max_batch_size": 8,
    "decoupled": True,
    "batching_strategy": "inflight_fused_batching",
    "kv_cache_free_gpu_mem_fraction": 0.85,
    "max_queue_delay_microseconds": 100,
    "max_queue_size": 64,
    "instance_count": {"preprocessing": 2, "postprocessing": 2, "bls": 4},
    "gpu_device_ids": "0",
    "entry_points": ["ensemble", "bls"],
    "parameters": {"enable_kv_cache_reuse": True},
}
MULTIMODAL_STAGE = {
    "max_batch_size": 4,
    "multimodal_engine_dir": "llm/vision",
    "image_input": {"data_type": "FP16", "dims": [3, 448, 448]},
    "kv_cache_free_gpu_mem_fraction": 0.8,
}


def _build(tmp_path: Path, name: str, stage: dict[str, object]) -> Path:
    if "multimodal_engine_dir" in stage:
        fake_vision_engine(tmp_path / "llm" / "vision")
        fake_engine(tmp_path / "llm" / "engine", prompt_table=4096)
    spec = stage_spec(tmp_path, name=name, **stage)
    repo = tmp_path / "repo"
    build_spec(spec, repo)
    return repo


def _compare_golden(repo: Path, kind: str) -> None:
    folder = GOLDEN / kind
    built = {p.parent.name: p for p in repo.glob("*/config.pbtxt")}
    if REGEN:
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("*.pbtxt"):
            old.unlink()
        for name, path in built.items():
            (folder / f"{name}.pbtxt").write_text(path.read_text())
    goldens = {p.stem: p for p in folder.glob("*.pbtxt")}
    assert sorted(built) == sorted(goldens)
    for name, path in built.items():
        assert path.read_text() == goldens[name].read_text(), f"{name} differs from {goldens[name]}"


def test_text_stage_builds_the_reviewed_golden_layout(tmp_path: Path) -> None:
    repo = _build(tmp_path, "decoder", TEXT_STAGE)
    _compare_golden(repo, "text")


def test_multimodal_stage_builds_the_reviewed_golden_layout(tmp_path: Path) -> None:
    repo = _build(tmp_path, "vlm_decoder", MULTIMODAL_STAGE)
    _compare_golden(repo, "multimodal")


@pytest.mark.parametrize("stage", [TEXT_STAGE, MULTIMODAL_STAGE], ids=["text", "multimodal"])
def test_stage_layout_leaves_no_template_and_validates_clean(
    tmp_path: Path, stage: dict[str, object]
) -> None:
    repo = _build(tmp_path, "llm", stage)
    for config in repo.glob("*/config.pbtxt"):
        assert "${" not in config.read_text(), config
    report = validate_repository(repo)
    assert [str(p) for p in report.problems if p.severity != "info"] == []


def test_text_stage_fills_every_mandatory_parameter(tmp_path: Path) -> None:
    repo = _build(tmp_path, "decoder", TEXT_STAGE)
    llm = read_config(repo / "decoder_tensorrt_llm" / "config.pbtxt")
    assert llm.backend == "tensorrtllm" and llm.max_batch_size == 8
    assert llm.model_transaction_policy.decoupled
    assert llm.dynamic_batching.max_queue_delay_microseconds == 100
    assert llm.dynamic_batching.default_queue_policy.max_queue_size == 64
    assert llm.parameters["gpt_model_path"].string_value == "/models/decoder_tensorrt_llm/1/engine"
    assert llm.parameters["gpt_model_type"].string_value == "inflight_fused_batching"
    assert llm.parameters["gpu_device_ids"].string_value == "0"
    for role, count in (("preprocessing", 2), ("postprocessing", 2)):
        cfg = read_config(repo / f"decoder_{role}" / "config.pbtxt")
        assert cfg.max_batch_size == 8 and cfg.instance_group[0].count == count
        assert cfg.parameters["tokenizer_dir"].string_value == f"/models/decoder_{role}/1/tokenizer"
    bls = read_config(repo / "decoder_bls" / "config.pbtxt")
    assert bls.model_transaction_policy.decoupled and bls.instance_group[0].count == 4
    assert bls.parameters["tensorrt_llm_model_name"].string_value == "decoder_tensorrt_llm"
    ensemble = read_config(repo / "decoder" / "config.pbtxt")
    assert ensemble.max_batch_size == 8
    assert {i.name for i in ensemble.input} >= {"text_input", "max_tokens", "stream"}


def test_stage_copies_engine_tokenizer_and_vision_engine_where_the_configs_point(tmp_path: Path) -> None:
    repo = _build(tmp_path, "vlm", MULTIMODAL_STAGE)
    assert (repo / "vlm_tensorrt_llm" / "1" / "engine" / "rank0.engine").is_file()
    assert (repo / "vlm_tensorrt_llm" / "1" / "engine" / "config.json").is_file()
    for role in ("preprocessing", "postprocessing"):
        assert (repo / f"vlm_{role}" / "1" / "tokenizer" / "tokenizer.json").is_file()
        assert (repo / f"vlm_{role}" / "1" / "model.py").is_file()
    assert (repo / "vlm_multimodal_encoders" / "1" / "vision" / "model.engine").is_file()
    for role in ("preprocessing", "postprocessing", "multimodal_encoders"):  # what their model.py imports
        assert (repo / f"vlm_{role}" / "1" / "served_paths.py").is_file()
    pre = read_config(repo / "vlm_preprocessing" / "config.pbtxt")
    assert pre.parameters["vocab_size"].string_value == "151936"


def test_unary_stage_offers_no_stream_input(tmp_path: Path) -> None:
    repo = _build(tmp_path, "plain", {"entry_points": ["ensemble", "bls"]})
    for name in ("plain", "plain_bls"):
        cfg = read_config(repo / name / "config.pbtxt")
        assert "stream" not in {i.name for i in cfg.input}
        assert not cfg.model_transaction_policy.decoupled


def test_bls_only_stage_takes_the_stage_name(tmp_path: Path) -> None:
    repo = _build(tmp_path, "solo", {"entry_points": ["bls"]})
    assert (repo / "solo" / "1" / "model.py").is_file()
    assert not (repo / "solo_bls").exists()


def _refused(tmp_path: Path, match: str, **stage: object) -> None:
    spec = stage_spec(tmp_path, **stage)
    with pytest.raises(SpecError, match=match):
        build_spec(spec, tmp_path / "repo")


def test_stage_refused_when_tokenizer_dir_is_missing(tmp_path: Path) -> None:
    fake_engine(tmp_path / "llm" / "engine")
    fake_tokenizer(tmp_path / "llm" / "tokenizer")
    (tmp_path / "spec.yaml").write_text(
        "name: s\nmodels:\n  - {name: d, backend: tensorrtllm, engine_dir: llm/engine}\n"
    )
    with pytest.raises(SpecError, match="tokenizer_dir"):
        build_spec(tmp_path / "spec.yaml", tmp_path / "repo")


def test_stage_refused_when_engine_config_json_is_missing(tmp_path: Path) -> None:
    fake_engine(tmp_path / "llm" / "engine")
    (tmp_path / "llm" / "engine" / "config.json").unlink()
    _refused(tmp_path, "config.json does not exist")


def test_stage_refused_when_a_rank_engine_file_is_missing(tmp_path: Path) -> None:
    fake_engine(tmp_path / "llm" / "engine", tp=2, ranks=1)
    _refused(tmp_path, "rank1.engine")


def test_stage_refused_when_a_key_is_unknown(tmp_path: Path) -> None:
    _refused(tmp_path, "unknown key", kv_cache_fraction=0.5)


def test_stage_refused_with_suggestion_when_a_parameter_is_misspelled(tmp_path: Path) -> None:
    spec = stage_spec(tmp_path, parameters={"enable_kv_cache_resue": True})
    with pytest.raises(SpecError) as err:
        build_spec(spec, tmp_path / "repo")
    assert "enable_kv_cache_reuse" in str(err.value.hint)


def test_stage_refused_when_kv_cache_fraction_is_not_between_0_and_1(tmp_path: Path) -> None:
    _refused(tmp_path, "strictly between 0 and 1", kv_cache_free_gpu_mem_fraction=1.5)


def test_stage_refused_when_lora_cache_is_set_on_an_engine_without_lora(tmp_path: Path) -> None:
    _refused(tmp_path, "LoRA plugin", lora_cache={"gpu_memory_fraction": 0.05})


def test_multimodal_stage_refused_when_the_engine_takes_no_prompt_table(tmp_path: Path) -> None:
    fake_vision_engine(tmp_path / "llm" / "vision")
    _refused(tmp_path, "max_prompt_embedding_table_size", multimodal_engine_dir="llm/vision")


def test_stage_with_lora_engine_gets_lora_cache_parameters_and_inputs(tmp_path: Path) -> None:
    fake_engine(tmp_path / "llm" / "engine", lora=True)
    repo = _build(tmp_path, "lora", {"lora_cache": {"gpu_memory_fraction": 0.1, "max_adapter_size": 32}})
    cfg = read_config(repo / "lora_tensorrt_llm" / "config.pbtxt")
    assert cfg.parameters["lora_cache_gpu_memory_fraction"].string_value == "0.1"
    assert cfg.parameters["lora_cache_max_adapter_size"].string_value == "32"
    assert {"lora_task_id", "lora_weights", "lora_config"} <= {i.name for i in cfg.input}


def test_stage_refused_when_target_release_runs_another_trtllm(tmp_path: Path) -> None:
    fake_engine(tmp_path / "llm" / "engine", version="0.13.0")
    _refused(tmp_path, "0.13.0.*runs 0.14.0")  # the spec's target: "24.10"


def test_release_table_names_the_trtllm_python_image_and_a_source_per_row() -> None:
    assert TRTLLM_RELEASES["24.10"].trtllm == "0.14.0"
    assert TRTLLM_RELEASES["25.02"].trtllm == "0.17.0.post1"
    assert all("compatibility" in row.source for row in TRTLLM_RELEASES.values())
    assert trtllm_image("24.10") == "nvcr.io/nvidia/tritonserver:24.10-trtllm-python-py3"


def test_build_serving_root_names_the_engine_and_tokenizer_paths(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    build_spec(stage_spec(tmp_path), repo, serving_root="/srv/triton")
    llm = read_config(repo / "decoder_tensorrt_llm" / "config.pbtxt")
    assert llm.parameters["gpt_model_path"].string_value == "/srv/triton/decoder_tensorrt_llm/1/engine"
    pre = read_config(repo / "decoder_preprocessing" / "config.pbtxt")
    assert pre.parameters["tokenizer_dir"].string_value == "/srv/triton/decoder_preprocessing/1/tokenizer"
    assert validate_repository(repo).valid
