"""The backend-kind registry and the one repository walk (tritonkit.kinds)."""

from __future__ import annotations

from pathlib import Path

from tritonkit import kinds
from tritonkit.kinds import registry
from tritonkit.kinds.entry import ModelKind
from tritonkit.kinds.tensorrtllm import TENSORRTLLM, trtllm_models
from tritonkit.kinds.vllm import VLLM


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
