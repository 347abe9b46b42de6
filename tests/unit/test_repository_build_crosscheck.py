"""`tritonkit build` runs the validator's model-file checks on what it writes, atomically."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.unit._repo_helpers import write_onnx
from tritonkit.errors import ModelImportError, SpecError
from tritonkit.repository import build_spec, validate_repository


def spec(tmp: Path, body: str) -> Path:
    write_onnx(tmp / "ident.onnx")  # x: FP32 [batch, 4] -> y: FP32 [batch, 4]
    path = tmp / "spec.yaml"
    path.write_text(textwrap.dedent(body).lstrip())
    return path


GOOD = """
    name: demo
    models:
      - name: ident
        source: ident.onnx
        max_batch_size: 8
        inputs:
          - {name: x, data_type: FP32, dims: [4]}
        outputs:
          - {name: y, data_type: FP32, dims: [4]}
"""


def line(path: Path, number: int | None) -> str:
    assert number is not None
    return path.read_text().splitlines()[number - 1]


def test_build_accepts_spec_when_declared_tensors_match_onnx_file(tmp_path: Path) -> None:
    result = build_spec(spec(tmp_path, GOOD), tmp_path / "repo")
    assert [m.name for m in result.models] == ["ident"]
    assert validate_repository(tmp_path / "repo").problems == []


def test_build_fails_on_spec_tensor_line_when_onnx_file_lacks_the_tensor(tmp_path: Path) -> None:
    path = spec(tmp_path, GOOD.replace("{name: y,", "{name: probs,"))
    with pytest.raises(SpecError) as err:
        build_spec(path, tmp_path / "repo")
    assert err.value.file == str(path)
    assert "probs" in line(path, err.value.line)
    assert "graph outputs: y" in err.value.message
    assert not (tmp_path / "repo").exists()


def test_build_fails_on_spec_tensor_line_when_dims_repeat_batch_dimension(tmp_path: Path) -> None:
    path = spec(
        tmp_path,
        GOOD.replace("{name: x, data_type: FP32, dims: [4]}", "{name: x, data_type: FP32, dims: [-1, 4]}"),
    )
    with pytest.raises(SpecError) as err:
        build_spec(path, tmp_path / "repo")
    assert "name: x" in line(path, err.value.line)
    assert "include the batch dimension" in err.value.message


def test_build_fails_on_data_type_when_spec_declares_another_type(tmp_path: Path) -> None:
    path = spec(tmp_path, GOOD.replace("{name: x, data_type: FP32", "{name: x, data_type: FP16"))
    with pytest.raises(SpecError, match="TYPE_FP16"):
        build_spec(path, tmp_path / "repo")


def test_build_points_at_variant_when_only_the_variant_mismatches(tmp_path: Path) -> None:
    body = (
        GOOD
        + """\
        variants:
          small:
            outputs:
              - {name: logits, data_type: FP32, dims: [4]}
    """
    )
    path = spec(tmp_path, body)
    with pytest.raises(SpecError, match="variant 'small'") as err:
        build_spec(path, tmp_path / "repo")
    assert "logits" in line(path, err.value.line)


def test_build_leaves_previous_repository_untouched_when_cross_check_fails(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    build_spec(spec(tmp_path, GOOD), repo)
    before = {p.relative_to(repo): p.read_bytes() for p in repo.rglob("*") if p.is_file()}
    bad = spec(tmp_path, GOOD.replace("{name: x,", "{name: INPUT0,"))
    with pytest.raises(SpecError):
        build_spec(bad, repo, force=True)
    after = {p.relative_to(repo): p.read_bytes() for p in repo.rglob("*") if p.is_file()}
    assert after == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tritonkit-tmp")]


def test_build_refuses_python_model_cleanly_when_source_nests_too_deeply(tmp_path: Path) -> None:
    (tmp_path / "deep.py").write_text("x = " + "-" * 100_000 + "1\n")
    path = tmp_path / "spec.yaml"
    path.write_text(
        "name: deep\nmodels:\n  - name: deep\n    backend: python\n    source: deep.py\n"
        "    inputs: [{name: A, data_type: FP32, dims: [1]}]\n"
        "    outputs: [{name: B, data_type: FP32, dims: [1]}]\n"
    )
    with pytest.raises(ModelImportError, match="cannot be parsed"):
        build_spec(path, tmp_path / "repo")
    assert not (tmp_path / "repo").exists()
