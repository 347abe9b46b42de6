"""The model-file cross-checks agree with a real tritonserver on what it refuses to load.

A repository holds the valid base fixture plus copies whose config no longer matches the model
file (a tensor the ONNX graph does not have, an ONNX file that is not ONNX, a model.py that does
not parse). The validator must flag exactly those copies, and the local tritonserver must refuse
exactly those; a model.py reading a name the config lacks is only a warning, and Triton loads it.

The local server runs tritonkit's Python-based onnxruntime backend, which compares tensor names
but casts data types and leaves shapes to onnxruntime; Triton's native backend, which production
runs, also refuses data-type and shape mismatches, and the validator follows it. Those
cases are unit-tested against the native backend's rules (tests/unit/test_validator_model_files.py).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration._verdict_corpus import ready_models
from tritonkit.config import read_config, write_config
from tritonkit.errors import ModelLoadError
from tritonkit.repository import validate_repository
from tritonkit.server import LocalTritonServer

BASE = Path(__file__).resolve().parent.parent / "fixtures" / "validator" / "base"


def copy_model(repo: Path, base: str, name: str) -> Path:
    shutil.copytree(repo / base, repo / name)
    cfg = read_config(repo / name / "config.pbtxt")
    cfg.name = name
    write_config(cfg, repo / name / "config.pbtxt")
    return repo / name


def renamed_onnx_input(repo: Path) -> None:
    model = copy_model(repo, "onnx_m", "onnx_wrong_input")
    cfg = read_config(model / "config.pbtxt")
    cfg.input[0].name = "INPUT0"  # the graph's input is 'x'
    write_config(cfg, model / "config.pbtxt")


def renamed_onnx_output(repo: Path) -> None:
    model = copy_model(repo, "onnx_m", "onnx_wrong_output")
    cfg = read_config(model / "config.pbtxt")
    cfg.output[0].name = "probabilities"  # the graph's output is 'y'
    write_config(cfg, model / "config.pbtxt")


def not_onnx(repo: Path) -> None:
    model = copy_model(repo, "onnx_m", "onnx_lfs_pointer")
    (model / "1" / "model.onnx").write_text(
        "version https://git-lfs.github.com/spec/v1\noid sha256:0123\nsize 1234\n"
    )


def python_syntax_error(repo: Path) -> None:
    model = copy_model(repo, "solo", "py_syntax_error")
    (model / "1" / "model.py").write_text("class TritonPythonModel(:\n    pass\n")


def python_reads_undeclared_input(repo: Path) -> None:
    """Loads fine (the name only matters when a request runs), so the validator only warns."""
    model = copy_model(repo, "solo", "py_reads_other_name")
    source = (model / "1" / "model.py").read_text()
    (model / "1" / "model.py").write_text(source.replace('"A"', '"INPUT_A"'))


BROKEN: dict[str, Callable[[Path], None]] = {
    "onnx_wrong_input": renamed_onnx_input,
    "onnx_wrong_output": renamed_onnx_output,
    "onnx_lfs_pointer": not_onnx,
    "py_syntax_error": python_syntax_error,
}


@pytest.mark.integration
def test_model_file_checks_flag_exactly_the_models_triton_refuses_when_configs_miss_their_files(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(BASE, repo)
    for make in BROKEN.values():
        make(repo)
    python_reads_undeclared_input(repo)

    report = validate_repository(repo)
    flagged = {p.model for p in report.errors}
    assert flagged == set(BROKEN), [str(p) for p in report.problems]
    codes = {p.model: p.code for p in report.errors}
    assert codes == {
        "onnx_wrong_input": "onnx-tensor-missing",
        "onnx_wrong_output": "onnx-tensor-missing",
        "onnx_lfs_pointer": "model-file-unreadable",
        "py_syntax_error": "model-file-unreadable",
    }
    warned = {(p.model, p.code) for p in report.warnings}
    assert ("py_reads_other_name", "python-tensor-unknown") in warned

    server = LocalTritonServer(repo, model_config_name=None, startup_timeout=240)
    try:
        with pytest.raises(ModelLoadError):
            server.start()
    finally:
        server.stop()
    ready = ready_models(server.logs())
    assert ready == {"ens", "onnx_m", "py_m", "solo", "py_reads_other_name"}, server.logs()[-4000:]
    refused = {p.name for p in repo.iterdir()} - ready
    assert refused == set(BROKEN)
