"""The ownership manifest records each Python model's target release, and keeps it with its owner."""

from __future__ import annotations

from pathlib import Path

from tritonkit.repository.manifest import Manifest


def test_manifest_records_targets_and_reads_them_back(tmp_path: Path) -> None:
    manifest = Manifest()
    manifest.assign("vlm", "vlm.yaml", ["pre", "enc"], {"pre": "24.10"})
    manifest.write(tmp_path)
    again = Manifest.load(tmp_path)
    assert again.target_of("pre") == "24.10"
    assert again.target_of("enc") is None  # an ONNX model has no Python target
    assert again.target_of("unknown") is None


def test_manifest_moves_a_models_target_with_the_model_when_another_spec_takes_it_over() -> None:
    manifest = Manifest()
    manifest.assign("a", "a.yaml", ["pre", "post"], {"pre": "24.10", "post": "24.10"})
    manifest.assign("b", "b.yaml", ["pre"], {"pre": "25.01"})
    assert manifest.target_of("pre") == "25.01"
    assert manifest.specs["a"]["targets"] == {"post": "24.10"}


def test_manifest_from_an_older_tritonkit_has_no_recorded_target(tmp_path: Path) -> None:
    (tmp_path / ".tritonkit-manifest.json").write_text(
        '{"format": 1, "specs": {"vlm": {"source": "vlm.yaml", "models": ["pre"]}}}'
    )
    assert Manifest.load(tmp_path).target_of("pre") is None


def test_sibling_release_is_the_one_target_of_the_models_of_a_spec_and_none_when_several() -> None:
    manifest = Manifest()
    manifest.assign("llm", "llm.yaml", ["engine", "pre", "post"], {"pre": "24.10", "post": "24.10"})
    manifest.assign("mixed", "mixed.yaml", ["a", "b"], {"a": "24.10", "b": "25.01"})
    assert manifest.sibling_release("engine") == "24.10"  # the engine records none of its own
    assert manifest.sibling_release("a") is None
    assert manifest.sibling_release("unknown") is None
