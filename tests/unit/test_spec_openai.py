"""A pipeline spec's ``openai:`` key: parsed with its checks and built into the config's
parameters, where the front (before any Triton) reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonkit.config import read_config
from tritonkit.errors import SpecError
from tritonkit.openai_front.mapping import pipeline_mapping
from tritonkit.repository import build_spec, load_spec
from tritonkit.signature import ModelSignature, TensorInfo

ROOT = Path(__file__).resolve().parents[2]
MODEL = """
  - name: echo
    backend: python
    source: model.py
    max_batch_size: 0
    inputs:
      - {name: RAW_IMAGE, data_type: UINT8, dims: [-1]}
      - {name: TEXT_QUERY, data_type: BYTES, dims: [1]}
    outputs:
      - {name: GENERATED_TEXT, data_type: BYTES, dims: [1]}
    decoupled: true
"""
OPENAI = """    openai: {text_input: TEXT_QUERY, image_input: RAW_IMAGE, text_output: GENERATED_TEXT}
"""
SOURCE = "class TritonPythonModel:\n    def execute(self, requests):\n        return []\n"


def _spec(tmp_path: Path, extra: str = OPENAI, model: str = MODEL) -> Path:
    (tmp_path / "model.py").write_text(SOURCE)
    path = tmp_path / "spec.yaml"
    path.write_text("name: p\nmodels:" + model + extra)
    return path


def test_spec_openai_key_is_built_into_the_config_parameters_the_front_reads(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    build_spec(_spec(tmp_path), repo)
    cfg = read_config(repo / "echo" / "config.pbtxt")
    params = {k: v.string_value for k, v in cfg.parameters.items()}
    assert params == {
        "openai.text_input": "TEXT_QUERY",
        "openai.image_input": "RAW_IMAGE",
        "openai.text_output": "GENERATED_TEXT",
        "openai.stream": "true",
    }
    signature = ModelSignature(
        name="echo",
        version="",
        max_batch_size=0,
        inputs=(TensorInfo("RAW_IMAGE", "UINT8", (-1,)), TensorInfo("TEXT_QUERY", "BYTES", (1,))),
        outputs=(TensorInfo("GENERATED_TEXT", "BYTES", (1,)),),
    )
    mapping = pipeline_mapping({"parameters": {k: {"string_value": v} for k, v in params.items()}}, signature)
    assert mapping is not None and mapping.image_input == "RAW_IMAGE" and mapping.stream


def test_spec_openai_key_reaches_a_variant_that_sets_its_own_parameters(tmp_path: Path) -> None:
    variant = "    variants:\n      small:\n        parameters: {SIZE: 1}\n"
    entry = load_spec(_spec(tmp_path, OPENAI + variant)).models[0]
    assert entry.variants["small"]["parameters"]["SIZE"] == 1
    assert entry.variants["small"]["parameters"]["openai.text_input"] == "TEXT_QUERY"


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ("    openai: {text_input: QUESTION, text_output: GENERATED_TEXT}\n", "QUESTION"),
        ("    openai: {text_input: TEXT_QUERY}\n", "lacks text_output"),
        ("    openai: {text_input: TEXT_QUERY, text_output: GENERATED_TEXT, stream: false}\n", "stream"),
        (OPENAI + "    parameters: {openai.stream: 'true'}\n", "written from its openai key"),
    ],
)
def test_spec_openai_key_is_refused_naming_the_spec_when_it_does_not_fit_the_model(
    tmp_path: Path, extra: str, words: str
) -> None:
    path = _spec(tmp_path, extra)
    with pytest.raises(SpecError, match=words) as info:
        load_spec(path)
    assert str(path) in str(info.value)


def test_shipped_llm_pipelines_declare_the_openai_mapping() -> None:
    for name in ("vlm_llm", "arr_coc_llm", "vlm_stream", "arr_coc_stream"):
        entry = next(m for m in load_spec(ROOT / "ensembles" / f"{name}.yaml").models if m.name == name)
        assert entry.fields["parameters"]["openai.image_input"] == "RAW_IMAGE", name
        # the LLM pipelines hand the request's sampling (response_format...) to their vLLM stage
        sampling = entry.fields["parameters"].get("openai.sampling_parameters_input")
        assert sampling == ("SAMPLING_PARAMETERS" if name.endswith("_llm") else None), name
