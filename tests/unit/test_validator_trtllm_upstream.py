"""TensorRT-LLM rules of issue 32 on NVIDIA's own template (tests/fixtures/upstream).

tensorrtllm_backend's ``all_models/inflight_batcher_llm`` configs are templates: ``${...}`` stays
until ``tools/fill_template.py`` fills it, and a placeholder where Triton expects a number, a bool
or a data type (``decoupled: ${decoupled_mode}``, ``data_type: ${logits_datatype}``) fails the
parse (served: tests/integration/test_upstream_verdicts_triton.py). Filled, the template's typed
tensors must be what the engine produces (``logits_datatype``,
``encoder_input_features_data_type``), and NVIDIA's tokenizer models need ``tokenizer_dir``.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from tests.unit._trtllm_helpers import fake_engine, fake_tokenizer
from tritonkit.repository import validate_repository
from tritonkit.triton_side import TRTLLM_MODELS_DIR

UPSTREAM = Path(__file__).resolve().parent.parent / "fixtures" / "upstream" / "tensorrtllm_backend"
TEMPLATE = UPSTREAM / "inflight_batcher_llm"
#: fill_template.py values as NVIDIA's docs use them; engine_dir is the model's own engine
FILLED = {
    "decoupled_mode": "false",
    "engine_dir": "engine",
    "max_tokens_in_paged_kv_cache": "2560",
    "batch_scheduler_policy": "guaranteed_no_evict",
    "kv_cache_free_gpu_mem_fraction": "0.5",
    "max_num_sequences": "4",
    "enable_trt_overlap": "false",
}
LOGITS = 'output [{ name: "context_logits" data_type: TYPE_%s dims: [ -1, -1 ] }]\n'


def _filled(tmp_path: Path, extra: str = "", *, logits_dtype: str | None = None) -> Path:
    repo = tmp_path / "repo"
    shutil.copytree(TEMPLATE, repo)
    model = repo / "tensorrt_llm"
    config = model / "config.pbtxt"
    text = re.sub(r"\$\{(\w+)\}", lambda m: FILLED[m.group(1)], config.read_text())
    config.write_text(text + extra)
    engine = fake_engine(model / "engine")
    if logits_dtype is not None:
        data = json.loads((engine / "config.json").read_text())
        data["pretrained_config"]["logits_dtype"] = logits_dtype
        (engine / "config.json").write_text(json.dumps(data))
    return repo


def test_config_parse_names_the_placeholder_when_nvidia_template_is_not_filled() -> None:
    [problem] = validate_repository(TEMPLATE).errors
    assert (problem.code, problem.line) == ("config-parse", 10)
    assert "unfilled template placeholder ${decoupled_mode}" in problem.message
    assert "fill_template.py -i config.pbtxt decoupled_mode:<value>" in problem.message


def test_config_parse_not_reported_when_nvidia_template_is_filled(tmp_path: Path) -> None:
    report = validate_repository(_filled(tmp_path))
    assert report.valid, [str(p) for p in report.errors]


def test_trtllm_datatype_warns_when_context_logits_are_not_the_engine_logits_type(tmp_path: Path) -> None:
    repo = _filled(tmp_path, LOGITS % "FP16")  # the engine's logits: float32 (TensorRT-LLM's default)
    [problem] = [p for p in validate_repository(repo).warnings if p.code == "trtllm-datatype"]
    assert "TYPE_FP16 but the engine's is TYPE_FP32" in problem.message
    assert "logits_datatype" in problem.message


def test_trtllm_datatype_not_reported_when_logits_match_the_engine(tmp_path: Path) -> None:
    for dtype, engine in (("FP32", None), ("FP16", "float16")):
        repo = _filled(tmp_path / dtype, LOGITS % dtype, logits_dtype=engine)
        assert not [p for p in validate_repository(repo).problems if p.code == "trtllm-datatype"]


def test_trtllm_datatype_checks_encoder_input_features_against_the_engine_dtype(tmp_path: Path) -> None:
    features = 'input [{ name: "encoder_input_features" data_type: TYPE_%s dims: [-1, -1] optional: true }]\n'
    warned = validate_repository(_filled(tmp_path / "bf16", features % "BF16")).warnings
    assert [p.code for p in warned if p.code == "trtllm-datatype"] == ["trtllm-datatype"]  # engine: float16
    quiet = validate_repository(_filled(tmp_path / "fp16", features % "FP16")).problems
    assert not [p for p in quiet if p.code == "trtllm-datatype"]


PREPROCESSING = """name: "preprocessing"
backend: "python"
max_batch_size: 8
input [{ name: "QUERY" data_type: TYPE_STRING dims: [ 1 ] },
       { name: "REQUEST_OUTPUT_LEN" data_type: TYPE_INT32 dims: [ 1 ] }]
output [{ name: "INPUT_ID" data_type: TYPE_INT32 dims: [ -1 ] },
        { name: "REQUEST_INPUT_LEN" data_type: TYPE_INT32 dims: [ 1 ] }]
"""


def test_trtllm_tokenizer_missing_when_a_tokenizer_model_sets_no_tokenizer_dir(tmp_path: Path) -> None:
    """The layout's preprocessing model.py reads parameters["tokenizer_dir"] as NVIDIA's does."""
    model = tmp_path / "preprocessing"
    (model / "1").mkdir(parents=True)
    shutil.copy(TRTLLM_MODELS_DIR / "preprocessing.py", model / "1" / "model.py")
    (model / "config.pbtxt").write_text(PREPROCESSING)
    found = [p for p in validate_repository(tmp_path).errors if p.code == "trtllm-tokenizer-missing"]
    assert len(found) == 1 and "KeyError" in found[0].message
    fake_tokenizer(model / "1" / "tokenizer")
    (model / "config.pbtxt").write_text(
        PREPROCESSING + 'parameters { key: "tokenizer_dir" value: { string_value: "tokenizer" } }\n'
    )
    assert not [p for p in validate_repository(tmp_path).problems if p.code == "trtllm-tokenizer-missing"]
