"""The backend-kind registry and the one repository walk (tritonkit.kinds)."""

from __future__ import annotations

from pathlib import Path

from tritonkit import kinds
from tritonkit.kinds import registry
from tritonkit.kinds.entry import ModelKind
from tritonkit.kinds.tensorrtllm.kind import TENSORRTLLM, trtllm_models
from tritonkit.kinds.vllm.kind import VLLM


def _config(repo: Path, model: str, backend: str, *, name: str = "config.pbtxt") -> Path:
    path = repo / model / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'name: "{model}"\nbackend: "{backend}"\n', encoding="utf-8")
    return path


def test_registry_lists_one_kind_per_name_with_disjoint_backends_and_platforms() -> None:
    names = [k.name for k in registry.all_kinds()]
    assert sorted(names) == ["ensemble", "onnx", "python", "tensorrtllm", "vllm"]
    backends = [b for k in registry.all_kinds() for b in k.backends]
    platforms = [p for k in registry.all_kinds() for p in k.platforms]
    assert len(backends) == len(set(backends)) and len(platforms) == len(set(platforms))
    assert all(registry.kind_named(n) is not None for n in names)
    assert registry.kind_named("tensorflow") is None


def test_kind_for_finds_the_kind_by_backend_or_platform_and_the_ensemble_platform_wins() -> None:
    assert registry.kind_for(backend="python") is registry.kind_named("python")
    assert registry.kind_for(platform="onnxruntime_onnx") is registry.kind_named("onnx")
    assert registry.kind_for(backend="onnxruntime") is registry.kind_named("onnx")
    assert registry.kind_for(backend="python", platform="ensemble") is registry.kind_named("ensemble")
    assert registry.kind_for(backend="vllm") is VLLM
    assert registry.kind_for(backend="tensorrtllm") is TENSORRTLLM
    assert registry.kind_for(backend="openvino") is None


def test_kind_for_spec_answers_only_for_the_forms_a_kind_parses_itself() -> None:
    assert registry.kind_for_spec({"backend": "vllm", "model": "x"}) is VLLM
    assert registry.kind_for_spec({"backend": "tensorrtllm", "engine_dir": "e"}) is TENSORRTLLM
    assert registry.kind_for_spec({"backend": "tensorrtllm", "source": "e"}) is None  # a hand-written one
    assert registry.kind_for_spec({"backend": "python", "source": "m.py"}) is None


def test_spec_keys_name_the_kind_that_alone_takes_them() -> None:
    owners = registry.spec_keys()
    assert owners["engine"] is VLLM and owners["lora"] is VLLM
    assert "name" not in owners and "engine_dir" not in owners  # a TensorRT-LLM stage expands first


def test_kind_facts_say_where_each_llm_kind_serves_and_which_releases_carry_it() -> None:
    assert VLLM.serve.local and not VLLM.serve.needs_gpu and VLLM.deploy.serving_root
    assert not TENSORRTLLM.serve.local and TENSORRTLLM.serve.needs_gpu
    assert TENSORRTLLM.serve.image is not None and "24.10" in TENSORRTLLM.releases
    assert "24.10" in VLLM.releases
    assert TENSORRTLLM.model_kind is ModelKind.OTHER and VLLM.model_kind is ModelKind.VLLM


def test_deploy_facts_give_each_llm_kind_its_image_per_release_and_what_azure_ml_says_of_it() -> None:
    assert VLLM.serve.image_for("24.10") == "nvcr.io/nvidia/tritonserver:24.10-vllm-python-py3"
    assert TENSORRTLLM.serve.image_for("24.10") == "nvcr.io/nvidia/tritonserver:24.10-trtllm-python-py3"
    onnx = registry.kind_named("onnx")
    assert onnx is not None and onnx.serve.image_for("24.10") is None  # the py3 image serves it
    assert VLLM.deploy.picks_own_device and not TENSORRTLLM.deploy.picks_own_device
    assert VLLM.deploy.aml_decoupled_note and not VLLM.deploy.aml_warning
    assert "{models}" in TENSORRTLLM.deploy.aml_warning


def test_models_of_walks_config_pbtxt_and_with_variants_configs_too_when_asked(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    _config(repo, "decoder", "vllm")
    _config(repo, "engine", "tensorrtllm")
    _config(repo, "pre", "python")
    _config(repo, "pre", "vllm", name="configs/llm.pbtxt")
    _config(repo, ".hidden", "vllm")
    (repo / "broken").mkdir()
    (repo / "broken" / "config.pbtxt").write_text('backend: "vllm" nonsense {', encoding="utf-8")
    assert kinds.models_of(repo, {"vllm"}) == ["decoder"]
    assert kinds.config_files_of(repo, {"vllm"}, variants=True) == {
        "decoder": [repo / "decoder" / "config.pbtxt"],
        "pre": [repo / "pre" / "configs" / "llm.pbtxt"],
    }
    assert VLLM.models_in(repo, variants=True) == ["decoder", "pre"]
    assert trtllm_models(repo) == TENSORRTLLM.models_in(repo) == ["engine"]
    assert kinds.models_of(tmp_path / "missing", {"vllm"}) == []


def test_models_in_finds_a_platform_kind_by_its_configs_platform(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    _config(repo, "decoder", "vllm")
    (repo / "pipeline").mkdir()
    config = 'name: "pipeline"\nplatform: "ensemble"\n'
    (repo / "pipeline" / "config.pbtxt").write_text(config, encoding="utf-8")
    ensemble = registry.kind_named("ensemble")
    assert ensemble is not None and ensemble.models_in(repo) == ["pipeline"]
    assert kinds.models_of(repo, (), platforms=("ensemble",)) == ["pipeline"]
