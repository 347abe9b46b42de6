"""vLLM stages: spec keys -> NVIDIA's vLLM backend layout (golden config.pbtxt and model.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit._vllm_helpers import vllm_spec, write_hf_model, write_lora
from tritonkit.cli.app import main
from tritonkit.config import read_config
from tritonkit.errors import RepositoryError, SpecError
from tritonkit.kinds.entry import ModelKind
from tritonkit.kinds.paths import local_path
from tritonkit.kinds.releases import VLLM_RELEASES, vllm_image
from tritonkit.repository import MANIFEST_NAME, build_spec
from tritonkit.repository.manifest import Manifest
from tritonkit.repository.spec import load_spec

GOLDEN = Path(__file__).parent.parent / "fixtures" / "vllm"


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_build_spec_writes_golden_vllm_layout_when_stage_is_minimal(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    result = build_spec(vllm_spec(tmp_path), repo)
    assert [(m.name, m.kind, m.decoupled) for m in result.models] == [("decoder", "vllm", True)]
    assert (repo / "decoder" / "config.pbtxt").read_text() == (GOLDEN / "minimal.pbtxt").read_text()
    assert (repo / "decoder" / "1" / "model.json").read_text() == (GOLDEN / "minimal.model.json").read_text()
    packed = repo / "decoder" / "1" / "hf_model"
    assert sorted(p.name for p in packed.iterdir()) == [
        "config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
    ]  # fmt: skip
    assert any("/models/decoder/1/hf_model" in n for n in result.notes)


def test_build_spec_writes_golden_vllm_layout_when_stage_uses_every_key(tmp_path: Path) -> None:
    write_lora(tmp_path / "adapters" / "colours")
    spec = vllm_spec(
        tmp_path,
        """
        version: 3
        engine: {enable_lora: true, max_model_len: 512, kv_cache_memory_bytes: 67108864}
        lora: {colours: adapters/colours}
        additional_outputs: [num_output_tokens, finish_reason]
        instance_group: 2
        parameters: {REPORT_CUSTOM_METRICS: true}
        """,
    )
    repo = tmp_path / "repo"
    build_spec(spec, repo, serving_root="/srv/repo")
    model = repo / "decoder"
    assert (model / "config.pbtxt").read_text() == (GOLDEN / "full.pbtxt").read_text()
    assert (model / "3" / "model.json").read_text() == (GOLDEN / "full.model.json").read_text()
    assert json.loads((model / "3" / "multi_lora.json").read_text()) == {
        "colours": "/srv/repo/decoder/3/lora/colours"
    }
    assert (model / "3" / "lora" / "colours" / "adapter_config.json").is_file()
    assert Manifest.load(repo).serving_root_of("decoder") == "/srv/repo"


def test_build_spec_writes_hub_id_unchanged_when_model_is_not_a_local_dir(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: llm\nmodels:\n  - {name: opt, backend: vllm, model: facebook/opt-125m}\n")
    repo = tmp_path / "repo"
    result = build_spec(spec, repo)
    assert json.loads((repo / "opt" / "1" / "model.json").read_text()) == {"model": "facebook/opt-125m"}
    assert any("written as a Hugging Face hub id" in n for n in result.notes)
    assert not (repo / "opt" / "1" / "hf_model").exists()


def test_build_spec_writes_engine_model_as_given_when_spec_has_no_model_key(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "name: llm\nmodels:\n  - {name: m, backend: vllm, engine: {model: /weights/llama, dtype: half}}\n"
    )
    build_spec(spec, tmp_path / "repo")
    args = json.loads((tmp_path / "repo" / "m" / "1" / "model.json").read_text())
    assert args == {"model": "/weights/llama", "dtype": "half"}


def test_build_spec_accepts_absolute_model_dir_when_it_exists(tmp_path: Path) -> None:
    model_dir = write_hf_model(tmp_path / "elsewhere" / "llm")
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"name: llm\nmodels:\n  - {{name: m, backend: vllm, model: {model_dir}}}\n")
    build_spec(spec, tmp_path / "repo")
    assert (tmp_path / "repo" / "m" / "1" / "hf_model" / "config.json").is_file()


def test_build_spec_records_vllm_target_in_manifest_when_stage_names_one(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    build_spec(vllm_spec(tmp_path, 'target: "24.11"'), repo)
    assert Manifest.load(repo).target_of("decoder") == "24.11"
    assert load_spec(tmp_path / "spec.yaml").models[0].kind is ModelKind.VLLM


def test_build_spec_writes_variant_configs_when_vllm_stage_has_variants(tmp_path: Path) -> None:
    spec = vllm_spec(tmp_path, "variants: {cpu: {instance_group: [{kind: KIND_CPU, count: 1}]}}")
    repo = tmp_path / "repo"
    build_spec(spec, repo)
    cpu = read_config(repo / "decoder" / "configs" / "cpu.pbtxt")
    assert cpu.backend == "vllm" and cpu.model_transaction_policy.decoupled
    assert cpu.instance_group[0].kind == cpu.instance_group[0].KIND_CPU


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("inputs: [{name: x, data_type: FP32, dims: [1]}]", "do(es) not apply to a vLLM stage"),
        ("source: model.py", "do(es) not apply to a vLLM stage"),
        ("max_batch_size: 8", "max_batch_size must be 0"),
        ("decoupled: false", "always decoupled"),
        ("engine: [max_model_len]", "engine must map"),
        ("engine: {--max-model-len: 5}", "not an engine argument name"),
        ("engine: {model: other}", "give the model once"),
        ("engine: {seed: 2024-01-01}", "cannot be written to model.json"),
        ("lora: {a: adapters/a}", "needs engine.enable_lora: true"),
        ("engine: {enable_lora: true}\nlora: {a: missing}", "adapter directory not found"),
        ("engine: {enable_lora: true}\nlora: {../a: x}", "not a plain LoRA name"),
        ("additional_outputs: [tokens]", "unknown tokens"),
        ("additional_outputs: finish_reason", "must be a list"),
        ('target: "23.01"', "no -vllm-python-py3 image is known"),
        ("variants: {gpu: {engine: {dtype: half}}}", "may set only"),
        ("instance_group: 0", "must be >= 1"),
    ],
)
def test_load_spec_refuses_vllm_stage_when_key_is_wrong(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build_spec(vllm_spec(tmp_path, body), tmp_path / "repo")
    assert not (tmp_path / "repo").exists()


def test_load_spec_refuses_vllm_keys_when_model_is_not_a_vllm_stage(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: x\nmodels:\n  - {name: m, backend: python, source: m.py, engine: {a: 1}}\n")
    with pytest.raises(SpecError, match="only apply to a vLLM stage"):
        load_spec(spec)


@pytest.mark.parametrize(
    ("tokenizer", "config", "message"),
    [(True, False, "no config.json"), (False, True, "has no tokenizer")],
)
def test_load_spec_refuses_local_model_dir_when_it_is_incomplete(
    tmp_path: Path, tokenizer: bool, config: bool, message: str
) -> None:
    write_hf_model(tmp_path / "half", tokenizer=tokenizer, config=config)
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: x\nmodels:\n  - {name: m, backend: vllm, model: half}\n")
    with pytest.raises(SpecError, match=message):
        load_spec(spec)


def test_load_spec_accepts_model_dir_without_tokenizer_when_engine_names_one(tmp_path: Path) -> None:
    write_hf_model(tmp_path / "half", tokenizer=False)
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "name: x\nmodels:\n  - {name: m, backend: vllm, model: half, engine: {tokenizer: org/t}}\n"
    )
    assert load_spec(spec).models[0].vllm is not None


@pytest.mark.parametrize("model", ["./missing", "/abs/missing", "not a hub id!"])
def test_load_spec_refuses_model_when_it_is_neither_a_dir_nor_a_hub_id(tmp_path: Path, model: str) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"name: x\nmodels:\n  - {{name: m, backend: vllm, model: '{model}'}}\n")
    with pytest.raises(SpecError, match="directory not found"):
        load_spec(spec)


@pytest.mark.parametrize("root", ["models", "/models/../etc", ""])
def test_build_spec_refuses_serving_root_when_it_is_not_absolute(tmp_path: Path, root: str) -> None:
    with pytest.raises(SpecError, match="serving root"):
        build_spec(vllm_spec(tmp_path), tmp_path / "repo", serving_root=root)


def test_build_spec_keeps_repository_when_rebuild_changes_serving_root_without_force(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    spec = vllm_spec(tmp_path)
    build_spec(spec, repo)
    before = snapshot(repo)
    with pytest.raises(RepositoryError, match="different files"):
        build_spec(spec, repo, serving_root="/mnt/repo")
    assert snapshot(repo) == before
    build_spec(spec, repo, serving_root="/mnt/repo", force=True)
    assert json.loads((repo / "decoder" / "1" / "model.json").read_text())["model"].startswith("/mnt/repo/")
    assert json.loads((repo / MANIFEST_NAME).read_text())["specs"]["llm"]["serving_root"] == "/mnt/repo"


def test_build_spec_notes_placeholder_when_engine_holds_unfilled_template(tmp_path: Path) -> None:
    result = build_spec(vllm_spec(tmp_path, "engine: {tensor_parallel_size: '${tp}'}"), tmp_path / "repo")
    assert any("${...}" in n for n in result.notes)


def test_vllm_releases_name_an_image_and_a_source_for_every_row() -> None:
    assert VLLM_RELEASES["24.10"].vllm == "0.5.5"
    assert vllm_image("24.10") == "nvcr.io/nvidia/tritonserver:24.10-vllm-python-py3"
    for row in VLLM_RELEASES.values():
        assert row.source and row.vllm_tuple[:2] >= (0, 4)


def test_cli_build_shows_vllm_stage_and_validate_passes_when_spec_has_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "repo"
    with pytest.raises(SystemExit) as info:
        main(["build", str(vllm_spec(tmp_path)), "-o", str(repo), "--serving-root", "/opt/repo"])
    out = capsys.readouterr().out
    assert info.value.code in (0, None)
    assert "decoder" in out and "vllm" in out and "/opt/repo/decoder/1/hf_model" in out
    with pytest.raises(SystemExit) as info:
        main(["validate", str(repo)])
    out = capsys.readouterr().out
    assert info.value.code in (0, None), out
    assert "0 error(s), 0 warning(s)" in out


@pytest.mark.parametrize(
    ("body", "line"),
    [
        ("engine:\n  max_model_len: 5\n  seed: 2024-01-01", 8),
        ("engine: {enable_lora: true}\nlora:\n  a: missing", 8),
        ("additional_outputs: [tokens]", 6),
    ],
)
def test_load_spec_names_the_spec_line_when_vllm_key_is_wrong(tmp_path: Path, body: str, line: int) -> None:
    with pytest.raises(SpecError) as info:
        load_spec(vllm_spec(tmp_path, body))
    assert info.value.line == line and str(info.value).startswith(f"{tmp_path / 'spec.yaml'}:{line}:")


def test_local_path_maps_server_paths_onto_the_version_dir_whatever_the_serving_root(tmp_path: Path) -> None:
    model_dir = tmp_path / "repo" / "decoder"
    assert (
        local_path("/models/decoder/1/hf_model", model_dir=model_dir)
        == model_dir / "1" / "hf_model"
    )
    assert (
        local_path("/srv/x/decoder/2/lora/a", model_dir=model_dir)
        == model_dir / "2" / "lora" / "a"
    )
    assert local_path("/models/decoder/1", model_dir=model_dir) == model_dir / "1"
    assert local_path("/weights/llama", model_dir=model_dir) is None  # only on the server
    assert local_path(str(tmp_path), model_dir=model_dir) == tmp_path  # exists here
    assert local_path("hf_model", model_dir=model_dir) is None  # relative: not the rule


def test_build_spec_keeps_repository_when_packing_the_model_dir_fails(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    spec = vllm_spec(tmp_path)
    build_spec(spec, repo)
    before = snapshot(repo)
    (tmp_path / "tiny_llm" / "dangling").symlink_to(tmp_path / "nowhere")
    spec.write_text(spec.read_text().replace("decoder", "decoder2"))
    with pytest.raises(RepositoryError, match="nothing was changed"):
        build_spec(spec, repo)
    assert snapshot(repo) == before
    assert not [p for p in tmp_path.iterdir() if "tritonkit-" in p.name]
