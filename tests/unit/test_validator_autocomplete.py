"""auto-complete: the config Triton judges is the config after the backend's auto-complete.

A Python model's ``auto_complete_config`` runs at load unless tritonserver is started with
``--disable-auto-complete-config`` (``validate --no-auto-complete``). The cases are upstream
models (tests/fixtures/upstream): NVIDIA's QA ``auto_complete`` model, and python_backend's
decoupled ``square_int32`` example with its decoupled policy moved from config.pbtxt into
``auto_complete_config``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tritonkit.repository import validate_repository

UPSTREAM = Path(__file__).resolve().parent.parent / "fixtures" / "upstream"
QA = UPSTREAM / "server" / "qa_python_models"
EXAMPLES = UPSTREAM / "python_backend" / "examples"

AUTO_DECOUPLED = """
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        auto_complete_model_config.set_model_transaction_policy(dict(decoupled=True))
        return auto_complete_model_config
"""
ENSEMBLE = """name: "square_pipe"
platform: "ensemble"
max_batch_size: 0
input [{ name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }]
output [{ name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }]
ensemble_scheduling { step [{ model_name: "square_int32" model_version: -1
  input_map { key: "IN" value: "IN" } output_map { key: "OUT" value: "OUT" } }] }
"""


def _qa_auto_complete(repo: Path, extra: str = "") -> Path:
    shutil.copytree(QA / "auto_complete", repo / "auto_complete")
    config = repo / "auto_complete" / "config.pbtxt"
    config.write_text(config.read_text() + extra)
    return repo


def _square_decoupled_by_auto_complete(repo: Path) -> Path:
    """square_int32 whose config says nothing of decoupled; its auto_complete_config sets it."""
    shutil.copytree(EXAMPLES / "square_int32", repo / "square_int32")
    config = repo / "square_int32" / "config.pbtxt"
    config.write_text(config.read_text().replace("model_transaction_policy {\n  decoupled: True\n}\n", ""))
    model = repo / "square_int32" / "1" / "model.py"
    model.write_text(model.read_text() + AUTO_DECOUPLED)
    return repo


def _codes(repo: Path, **kwargs: bool) -> set[tuple[str, str, str]]:
    report = validate_repository(repo, **kwargs)  # type: ignore[arg-type]
    return {(p.severity, p.model, p.code) for p in report.problems}


def test_auto_complete_conflict_is_an_error_when_config_batches_more_than_auto_complete_config_allows(
    tmp_path: Path,
) -> None:
    """set_max_batch_size(0) raises ValueError when the config says 8: Triton fails the load."""
    repo = _qa_auto_complete(tmp_path, "max_batch_size: 8\n")
    report = validate_repository(repo)
    [problem] = [p for p in report.errors if p.code == "auto-complete-conflict"]
    assert problem.line == 6 and "model.py:12" in problem.message and "ValueError" in problem.message
    # judged as written (--disable-auto-complete-config), nothing raises
    as_written = validate_repository(repo, auto_complete=False)
    assert "auto-complete-conflict" not in {p.code for p in as_written.problems}


def test_auto_complete_conflict_not_reported_when_the_qa_model_leaves_batching_to_auto_complete(
    tmp_path: Path,
) -> None:
    report = validate_repository(_qa_auto_complete(tmp_path))
    assert report.valid and not report.warnings


def test_auto_complete_makes_a_python_model_decoupled_when_its_auto_complete_config_says_so(
    tmp_path: Path,
) -> None:
    repo = _square_decoupled_by_auto_complete(tmp_path)
    (repo / "square_pipe" / "1").mkdir(parents=True)
    (repo / "square_pipe" / "config.pbtxt").write_text(ENSEMBLE)
    found = _codes(repo)
    assert ("info", "square_int32", "decoupled-model") in found
    assert ("info", "square_pipe", "ensemble-decoupled") in found
    # the response cache Triton refuses for a decoupled model, here made decoupled by auto-complete
    config = repo / "square_int32" / "config.pbtxt"
    config.write_text(config.read_text() + "response_cache { enable: true }\n")
    assert ("error", "square_int32", "response-cache-unsupported") in _codes(repo)


def test_auto_complete_off_judges_the_config_as_written(tmp_path: Path) -> None:
    repo = _square_decoupled_by_auto_complete(tmp_path)
    assert ("info", "square_int32", "decoupled-model") not in _codes(repo, auto_complete=False)


def test_cli_validate_no_auto_complete_mirrors_disable_auto_complete_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tritonkit.cli.app import main

    repo = _qa_auto_complete(tmp_path, "max_batch_size: 8\n")
    for extra, expected in (([], 1), (["--no-auto-complete"], 0)):
        with pytest.raises(SystemExit) as info:
            main(["validate", str(repo), *extra])
        assert info.value.code == expected
    assert "auto-complete-conflict" in capsys.readouterr().out


# -- the vLLM backend's auto-complete (NVIDIA's src/model.py), on NVIDIA's own vLLM repositories --

VLLM_REPOSITORIES = (
    UPSTREAM / "tutorials" / "llama2vllm",
    UPSTREAM / "tutorials" / "fg_speculative_vllm",
    UPSTREAM / "vllm_backend" / "samples",
)


@pytest.mark.parametrize("repo", VLLM_REPOSITORIES, ids=lambda p: p.name)
def test_vllm_not_decoupled_not_reported_when_auto_complete_completes_nvidia_vllm_configs(repo: Path) -> None:
    """NVIDIA's tutorials name only the backend; Triton's default auto-complete makes them decoupled
    with max_batch_size 0 and the backend's tensors."""
    report = validate_repository(repo)
    assert report.valid and not report.warnings, [str(p) for p in report.problems]
    assert {p.code for p in report.problems if p.severity == "info"} >= {"decoupled-model"}


@pytest.mark.parametrize("repo", VLLM_REPOSITORIES, ids=lambda p: p.name)
def test_vllm_not_decoupled_and_output_missing_are_errors_when_auto_complete_is_off(repo: Path) -> None:
    """--disable-auto-complete-config: the backend asserts decoupled and reads text_output's config."""
    report = validate_repository(repo, auto_complete=False)
    models = {p.name for p in repo.iterdir() if p.is_dir()}
    for code in ("vllm-not-decoupled", "vllm-output-missing"):
        assert {p.model for p in report.errors if p.code == code} == models


def test_auto_complete_conflict_is_an_error_when_a_vllm_config_batches(tmp_path: Path) -> None:
    """set_max_batch_size(0) in the backend's auto_complete_config raises for max_batch_size 8."""
    repo = tmp_path / "repo"
    shutil.copytree(UPSTREAM / "vllm_backend" / "samples", repo)
    config = repo / "vllm_model" / "config.pbtxt"
    config.write_text(config.read_text() + "max_batch_size: 8\n")
    [problem] = validate_repository(repo).errors
    assert (problem.code, problem.line) == ("auto-complete-conflict", 15)
    assert validate_repository(repo, auto_complete=False).errors  # then not decoupled, no text_output


@pytest.mark.parametrize(
    "block", ["model_transaction_policy { decoupled: false }", "model_transaction_policy {}"]
)
def test_auto_complete_conflict_is_an_error_when_a_vllm_config_pins_decoupled_false(
    tmp_path: Path, block: str
) -> None:
    """The backend's set_model_transaction_policy(decoupled=True) raises beside a block saying
    otherwise (an empty block reads false), as Triton's QA model_transaction_policy_mismatch shows."""
    repo = tmp_path / "repo"
    shutil.copytree(UPSTREAM / "vllm_backend" / "samples", repo)
    config = repo / "vllm_model" / "config.pbtxt"
    config.write_text(config.read_text() + block + "\n")
    [problem] = validate_repository(repo).errors
    assert (problem.code, problem.line) == ("auto-complete-conflict", 15)
    config.write_text(config.read_text().replace(block, "model_transaction_policy { decoupled: true }"))
    assert validate_repository(repo).valid


def test_vllm_auto_complete_adds_the_backend_tensors_an_ensemble_may_wire(tmp_path: Path) -> None:
    """An ensemble reading finish_reason of NVIDIA's sample (which declares no tensors) is wired."""
    repo = tmp_path / "repo"
    shutil.copytree(UPSTREAM / "vllm_backend" / "samples", repo)
    (repo / "chat" / "1").mkdir(parents=True)
    (repo / "chat" / "config.pbtxt").write_text(
        'name: "chat"\nplatform: "ensemble"\nmax_batch_size: 0\n'
        'input [{ name: "PROMPT" data_type: TYPE_STRING dims: [ 1 ] }]\n'
        'output [{ name: "TEXT" data_type: TYPE_STRING dims: [ -1 ] },'
        ' { name: "WHY" data_type: TYPE_STRING dims: [ -1 ] }]\n'
        'ensemble_scheduling { step [{ model_name: "vllm_model" model_version: -1\n'
        '  input_map { key: "text_input" value: "PROMPT" }\n'
        '  output_map { key: "text_output" value: "TEXT" }\n'
        '  output_map { key: "finish_reason" value: "WHY" } }] }\n'
    )
    report = validate_repository(repo)
    assert report.valid, [str(p) for p in report.errors]
