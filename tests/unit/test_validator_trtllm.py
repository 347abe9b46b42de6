"""TensorRT-LLM validator rules: each one fails on a broken layout and stays silent on a legal one.

Layouts are built from fake-but-well-formed engines (see _trtllm_helpers: no GPU can build or run
a real engine here) and then broken one field at a time through tritonkit's protobuf layer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tritonkit.config import ModelConfig, read_config, write_config
from tritonkit.repository.builder import build_spec
from tritonkit.repository.validator import validate_repository

from ._trtllm_helpers import fake_engine, stage_spec


def _layout(tmp_path: Path, **stage: object) -> Path:
    repo = tmp_path / "repo"
    build_spec(stage_spec(tmp_path, **stage), repo)
    return repo


def _edit(repo: Path, model: str, change: Callable[[ModelConfig], None]) -> None:
    path = repo / model / "config.pbtxt"
    cfg = read_config(path)
    change(cfg)
    write_config(cfg, path)


def _set(key: str, value: str) -> Callable[[ModelConfig], None]:
    def change(cfg: ModelConfig) -> None:
        cfg.parameters[key].string_value = value

    return change


def _drop(key: str) -> Callable[[ModelConfig], None]:
    def change(cfg: ModelConfig) -> None:
        del cfg.parameters[key]

    return change


def _codes(repo: Path, severity: str = "error", **kwargs: object) -> list[tuple[str, str, int | None]]:
    report = validate_repository(repo, **kwargs)  # type: ignore[arg-type]
    return [
        (p.code, p.model, p.line)
        for p in report.problems
        if p.severity == severity and p.code.startswith("trtllm-")
    ]


def _only(repo: Path, code: str, severity: str = "error", **kwargs: object) -> str:
    found = [c for c in _codes(repo, severity, **kwargs) if c[0] == code]
    assert found, _codes(repo, severity, **kwargs)
    assert found[0][2] is not None  # a line in the config file
    return found[0][1]


def test_legal_layouts_raise_no_trtllm_problem(tmp_path: Path) -> None:
    repo = _layout(tmp_path, decoupled=True, entry_points=["ensemble", "bls"], gpu_device_ids="0")
    for severity in ("error", "warning"):
        assert _codes(repo, severity) == []
        assert _codes(repo, severity, target="24.10") == []


def test_missing_gpt_model_type_is_an_error(tmp_path: Path) -> None:
    repo = _layout(tmp_path)
    _edit(repo, "decoder_tensorrt_llm", _drop("gpt_model_type"))
    assert ("trtllm-parameter-missing", "decoder_tensorrt_llm") in [c[:2] for c in _codes(repo)]


def test_missing_gpt_model_path_is_an_error(tmp_path: Path) -> None:
    repo = _layout(tmp_path)
    _edit(repo, "decoder_tensorrt_llm", _drop("gpt_model_path"))
    assert ("trtllm-parameter-missing", "decoder_tensorrt_llm") in [c[:2] for c in _codes(repo)]


def test_unfilled_mandatory_template_is_an_error(tmp_path: Path) -> None:
    repo = _layout(tmp_path)
    _edit(repo, "decoder_tensorrt_llm", _set("gpt_model_path", "${engine_dir}"))
    _only(repo, "trtllm-parameter-unfilled")


def test_unfilled_optional_template_is_a_warning(tmp_path: Path) -> None:
    repo = _layout(tmp_path)
    _edit(
        repo, "decoder_tensorrt_llm", _set("max_tokens_in_paged_kv_cache", "${max_tokens_in_paged_kv_cache}")
    )
    _only(repo, "trtllm-parameter-unfilled", "warning")
    assert _codes(repo) == []


def test_misspelled_parameter_is_a_warning_naming_the_right_one(tmp_path: Path) -> None:
    repo = _layout(tmp_path)
    _edit(repo, "decoder_tensorrt_llm", _set("kv_cache_free_gpu_memory_fraction", "0.5"))
    _only(repo, "trtllm-parameter-unknown", "warning")
    report = validate_repository(repo)
    assert any("kv_cache_free_gpu_mem_fraction" in p.message for p in report.problems)


@pytest.mark.parametrize(
    ("key", "value", "severity"),
    [
        ("gpt_model_type", "inflight", "error"),
        ("kv_cache_free_gpu_mem_fraction", "1.0", "error"),
        ("worker_path", "/opt/worker", "error"),
        ("enable_kv_cache_reuse", "yes", "warning"),
        ("max_tokens_in_paged_kv_cache", "lots", "warning"),
        ("batch_scheduler_policy", "greedy", "warning"),
    ],
)
def test_value_of_the_wrong_kind_is_reported(tmp_path: Path, key: str, value: str, severity: str) -> None:
    repo = _layout(tmp_path)
    _edit(repo, "decoder_tensorrt_llm", _set(key, value))
    _only(repo, "trtllm-parameter-value", severity)


@pytest.mark.parametrize(
    ("key", "value"),
    [("enable_kv_cache_reuse", "TRUE"), ("kv_cache_free_gpu_mem_fraction", "0.95"), ("gpt_model_type", "V1")],
)
def test_values_the_backend_parses_are_not_reported(tmp_path: Path, key: str, value: str) -> None:
    repo = _layout(tmp_path)
    _edit(repo, "decoder_tensorrt_llm", _set(key, value))
    assert _codes(repo) == [] and _codes(repo, "warning") == []


def test_engine_without_config_json_is_an_error(tmp_path: Path) -> None:
    repo = _layout(tmp_path)
    (repo / "decoder_tensorrt_llm" / "1" / "engine" / "config.json").unlink()
    _only(repo, "trtllm-engine")


def test_engine_missing_a_rank_file_is_an_error(tmp_path: Path) -> None:
    repo = _layout(tmp_path)
    (repo / "decoder_tensorrt_llm" / "1" / "engine" / "rank0.engine").unlink()
    _only(repo, "trtllm-engine")


def test_triton_batch_above_the_engines_is_a_warning(tmp_path: Path) -> None:
    repo = _layout(tmp_path)  # the engine's max_batch_size is 8
    _edit(repo, "decoder_tensorrt_llm", lambda cfg: setattr(cfg, "max_batch_size", 64))
    _only(repo, "trtllm-engine", "warning")


def test_beam_width_above_the_engines_is_an_error(tmp_path: Path) -> None:
    repo = _layout(tmp_path)
    _edit(repo, "decoder_tensorrt_llm", _set("max_beam_width", "4"))
    _only(repo, "trtllm-engine")


def test_engine_outside_the_repository_is_only_an_info(tmp_path: Path) -> None:
    repo = _layout(tmp_path)
    _edit(repo, "decoder_tensorrt_llm", _set("gpt_model_path", "/opt/engines/qwen"))
    assert _codes(repo) == []
    assert ("trtllm-engine", "decoder_tensorrt_llm") in [c[:2] for c in _codes(repo, "info")]


def test_gpu_ids_fewer_than_tp_times_pp_is_an_error(tmp_path: Path) -> None:
    fake_engine(tmp_path / "llm" / "engine", tp=2)
    repo = _layout(tmp_path)
    _edit(repo, "decoder_tensorrt_llm", _set("gpu_device_ids", "0"))
    _only(repo, "trtllm-gpus")


def test_gpu_ids_matching_tp_times_pp_pass(tmp_path: Path) -> None:
    fake_engine(tmp_path / "llm" / "engine", tp=2)
    repo = _layout(tmp_path, gpu_device_ids="0,1;2,3")
    _edit(repo, "decoder_tensorrt_llm", lambda cfg: setattr(cfg.instance_group[0], "count", 2))
    assert _codes(repo) == [] and _codes(repo, "warning") == []


def test_more_instances_than_gpu_groups_is_a_warning(tmp_path: Path) -> None:
    repo = _layout(tmp_path, gpu_device_ids="0")
    _edit(repo, "decoder_tensorrt_llm", lambda cfg: setattr(cfg.instance_group[0], "count", 2))
    _only(repo, "trtllm-gpus", "warning")


def test_missing_tokenizer_dir_is_an_error(tmp_path: Path) -> None:
    repo = _layout(tmp_path)
    for f in (repo / "decoder_preprocessing" / "1" / "tokenizer").iterdir():
        f.unlink()
    assert _only(repo, "trtllm-tokenizer-missing") == "decoder_preprocessing"


def test_unfilled_tokenizer_dir_is_an_error(tmp_path: Path) -> None:
    repo = _layout(tmp_path)
    _edit(repo, "decoder_postprocessing", _set("tokenizer_dir", "${tokenizer_dir}"))
    assert _only(repo, "trtllm-tokenizer-missing") == "decoder_postprocessing"


def test_stream_into_a_non_decoupled_engine_is_a_warning(tmp_path: Path) -> None:
    repo = _layout(tmp_path, decoupled=True)

    def unary(cfg: ModelConfig) -> None:
        cfg.model_transaction_policy.decoupled = False

    _edit(repo, "decoder_tensorrt_llm", unary)
    assert _only(repo, "trtllm-stream-not-decoupled", "warning") == "decoder"


def test_bls_naming_a_missing_model_is_a_warning(tmp_path: Path) -> None:
    """Triton loads a BLS model whatever it calls; the calls fail per request (issue 32)."""
    repo = _layout(tmp_path, entry_points=["ensemble", "bls"])
    _edit(repo, "decoder_bls", _set("tensorrt_llm_model_name", "tensorrt_llm"))
    assert _only(repo, "trtllm-bls-target-missing", "warning") == "decoder_bls"


def test_nvidia_named_bls_defaults_to_tensorrt_llm(tmp_path: Path) -> None:
    repo = _layout(tmp_path, entry_points=["bls"], name="tensorrt_llm_bls")

    def nvidia_style(cfg: ModelConfig) -> None:
        for key in ("tensorrt_llm_model_name", "preprocessing_model_name", "postprocessing_model_name"):
            del cfg.parameters[key]

    _edit(repo, "tensorrt_llm_bls", nvidia_style)
    assert _only(repo, "trtllm-bls-target-missing", "warning") == "tensorrt_llm_bls"


def test_target_release_running_another_trtllm_is_an_error(tmp_path: Path) -> None:
    repo = _layout(tmp_path)
    assert _only(repo, "trtllm-version-mismatch", target="24.09") == "decoder_tensorrt_llm"


def test_engine_rebuilt_by_another_trtllm_than_the_recorded_target_is_an_error(tmp_path: Path) -> None:
    repo = _layout(tmp_path)  # built for target 24.10 (TensorRT-LLM 0.14.0)
    config = repo / "decoder_tensorrt_llm" / "1" / "engine" / "config.json"
    data = json.loads(config.read_text())
    data["version"] = "0.15.0"
    config.write_text(json.dumps(data))
    assert _only(repo, "trtllm-version-mismatch") == "decoder_tensorrt_llm"


def _nvidia_shaped_engine_config(gpt_model_path: str) -> str:
    """A tensorrt_llm config the way NVIDIA's template looks after fill_template.py set the
    mandatory values and left optional ones as placeholders (written here, not copied)."""
    params = {
        "gpt_model_type": "inflight_fused_batching",
        "gpt_model_path": gpt_model_path,
        "max_beam_width": "1",
        "FORCE_CPU_ONLY_INPUT_TENSORS": "no",
        "batch_scheduler_policy": "guaranteed_no_evict",
        "kv_cache_free_gpu_mem_fraction": "0.9",
        "exclude_input_in_output": "True",
        "executor_worker_path": "/opt/tritonserver/backends/tensorrtllm/trtllmExecutorWorker",
        "max_tokens_in_paged_kv_cache": "${max_tokens_in_paged_kv_cache}",
        "gpu_device_ids": "${gpu_device_ids}",
        "decoding_mode": "${decoding_mode}",
    }
    text = "\n".join(
        f'parameters: {{ key: "{k}" value: {{ string_value: "{v}" }} }}' for k, v in params.items()
    )
    return (
        'name: "tensorrt_llm"\nbackend: "tensorrtllm"\nmax_batch_size: 8\n'
        "model_transaction_policy { decoupled: false }\n"
        "dynamic_batching { preferred_batch_size: [ 8 ] max_queue_delay_microseconds: 0 }\n"
        'input [ { name: "input_ids" data_type: TYPE_INT32 dims: [ -1 ] allow_ragged_batch: true },\n'
        '  { name: "input_lengths" data_type: TYPE_INT32 dims: [ 1 ] reshape: { shape: [ ] } },\n'
        '  { name: "request_output_len" data_type: TYPE_INT32 dims: [ 1 ] reshape: { shape: [ ] } } ]\n'
        'output [ { name: "output_ids" data_type: TYPE_INT32 dims: [ -1, -1 ] },\n'
        '  { name: "sequence_length" data_type: TYPE_INT32 dims: [ -1 ] } ]\n'
        "instance_group [ { count: 1 kind: KIND_CPU } ]\n" + text + "\n"
    )


def test_nvidia_shaped_hand_filled_engine_model_has_no_error(tmp_path: Path) -> None:
    """Optional parameters NVIDIA's template leaves as ${...} are legal (the backend uses its
    defaults): warnings, never errors."""
    repo = tmp_path / "repo"
    fake_engine(repo / "tensorrt_llm" / "1")
    (repo / "tensorrt_llm" / "config.pbtxt").write_text(
        _nvidia_shaped_engine_config("/all_models/inflight_batcher_llm/tensorrt_llm/1")
    )
    assert _codes(repo) == []
    assert validate_repository(repo).valid
    warned = {c[0] for c in _codes(repo, "warning")}
    assert warned == {"trtllm-parameter-unfilled"}


def test_hub_id_tokenizer_is_only_an_info(tmp_path: Path) -> None:
    repo = _layout(tmp_path)
    _edit(repo, "decoder_preprocessing", _set("tokenizer_dir", "Qwen/Qwen2-0.5B"))
    assert _codes(repo) == [] and _codes(repo, "warning") == []
    assert ("trtllm-tokenizer-missing", "decoder_preprocessing") in [c[:2] for c in _codes(repo, "info")]


def test_relative_tokenizer_dir_is_found_in_the_version_directory(tmp_path: Path) -> None:
    repo = _layout(tmp_path)
    _edit(repo, "decoder_preprocessing", _set("tokenizer_dir", "tokenizer"))
    assert _codes(repo) == [] and _codes(repo, "warning") == []
    _edit(repo, "decoder_preprocessing", _set("tokenizer_dir", "missing_tokenizer"))
    _only(repo, "trtllm-tokenizer-missing", "warning")


def test_relative_engine_path_outside_the_model_is_a_warning_not_an_error(tmp_path: Path) -> None:
    repo = _layout(tmp_path)
    _edit(repo, "decoder_tensorrt_llm", _set("gpt_model_path", "engines/qwen"))
    assert _codes(repo) == []
    _only(repo, "trtllm-engine", "warning")
