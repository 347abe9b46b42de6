"""The validator's report: JSON shape, file and line for broken text, variants, built specs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.unit._repo_helpers import pipeline_spec
from tritonkit.errors import RepositoryError
from tritonkit.repository import build_spec, validate_repository

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "validator"


def copy_base(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURES / "base", repo)
    return repo


def test_validate_repository_reports_file_and_line_when_config_is_truncated(tmp_path: Path) -> None:
    repo = copy_base(tmp_path)
    shutil.copyfile(FIXTURES / "truncated_config.pbtxt", repo / "solo" / "config.pbtxt")
    report = validate_repository(repo)
    [problem] = report.problems
    assert (problem.code, problem.model, problem.severity) == ("config-parse", "solo", "error")
    assert problem.file == f"{repo}/solo/config.pbtxt"
    assert problem.line == 6  # the text ends inside 'dims: [1, ' on line 5; the parser stops at EOF
    assert not report.valid


def test_validate_repository_reports_line_when_config_is_not_utf8(tmp_path: Path) -> None:
    repo = copy_base(tmp_path)
    (repo / "solo" / "config.pbtxt").write_bytes(b'name: "solo"\nbackend: "python"\n\xff\xfe\n')
    [problem] = validate_repository(repo).problems
    assert (problem.code, problem.line) == ("config-parse", 3)


def test_validation_report_to_dict_has_exact_json_shape_when_problems_exist(tmp_path: Path) -> None:
    repo = copy_base(tmp_path)
    shutil.rmtree(repo / "solo" / "1")
    data = validate_repository(repo).to_dict()
    assert set(data) == {"valid", "problems"}
    assert data["valid"] is False
    assert set(data["problems"][0]) == {"severity", "model", "file", "line", "code", "message"}
    assert json.loads(json.dumps(data)) == data


def test_validate_repository_uses_named_variant_when_config_name_is_given(tmp_path: Path) -> None:
    repo = copy_base(tmp_path)
    (repo / "solo" / "configs").mkdir()
    bad = (repo / "solo" / "config.pbtxt").read_text().replace("max_batch_size: 8", "max_batch_size: -3")
    (repo / "solo" / "configs" / "cpu.pbtxt").write_text(bad)
    by_default = validate_repository(repo)
    assert [p.file for p in by_default.problems] == [f"{repo}/solo/configs/cpu.pbtxt"]
    with_cpu = validate_repository(repo, config_name="cpu")
    assert [(p.code, p.line) for p in with_cpu.problems] == [("max-batch-size-negative", 3)]
    assert validate_repository(repo, config_name="gpu").valid


def test_validate_repository_ignores_files_when_scanning_for_models(tmp_path: Path) -> None:
    repo = copy_base(tmp_path)
    (repo / ".tritonkit-manifest.json").write_text("{}")
    (repo / ".amlignore").write_text("")
    (repo / "README.txt").write_text("top-level files are not models")
    report = validate_repository(repo)
    assert report.valid and report.problems == [], [str(p) for p in report.problems]


def test_validate_repository_reports_hidden_directory_when_triton_would_take_it_for_a_model(
    tmp_path: Path,
) -> None:
    repo = copy_base(tmp_path)
    (repo / ".ipynb_checkpoints").mkdir()
    (repo / ".ipynb_checkpoints" / "model-checkpoint.py").write_text("")
    report = validate_repository(repo)
    assert [(p.code, p.model, p.severity) for p in report.problems] == [
        ("hidden-directory", ".ipynb_checkpoints", "error")
    ]
    assert report.problems[0].file == str(repo / ".ipynb_checkpoints")
    assert "delete it or move it out" in report.problems[0].message


def test_validate_repository_accepts_hidden_directory_when_it_is_a_complete_model(tmp_path: Path) -> None:
    """Triton 2.51 loads a dot-directory that holds a real model (checked on the real server)."""
    repo = copy_base(tmp_path)
    shutil.copytree(repo / "solo", repo / ".solo")
    (repo / ".solo" / "config.pbtxt").write_text(
        (repo / "solo" / "config.pbtxt").read_text().replace('name: "solo"', 'name: ".solo"')
    )
    report = validate_repository(repo)
    assert report.valid and report.problems == [], [str(p) for p in report.problems]


def test_validate_repository_raises_repository_error_when_path_is_not_a_directory(tmp_path: Path) -> None:
    with pytest.raises(RepositoryError, match="not a directory"):
        validate_repository(tmp_path / "missing")


def test_validate_repository_accepts_repository_when_built_from_spec(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    build_spec(pipeline_spec(tmp_path), repo)
    report = validate_repository(repo)
    assert report.valid and report.problems == [], [str(p) for p in report.problems]
    assert validate_repository(repo, config_name="cpu").valid
