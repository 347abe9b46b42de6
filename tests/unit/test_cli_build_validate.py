"""`tritonkit build` and `tritonkit validate` through the real entry point (app.main)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.unit._repo_helpers import identity_onnx, pipeline_spec, write_onnx
from tritonkit.cli.app import main
from tritonkit.config import read_config

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "validator"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(argv)
        raise SystemExit(0)
    out = capsys.readouterr()
    code = info.value.code
    return (code if isinstance(code, int) else 0), out.out, out.err


def test_cli_build_then_validate_succeeds_when_spec_is_valid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "repo"
    code, out, _ = run(["build", str(pipeline_spec(tmp_path)), "-o", str(repo)], capsys)
    assert code == 0
    assert "built 4 model(s) of 'demo'" in out
    code, out, _ = run(["validate", str(repo)], capsys)
    assert code == 0
    assert "valid (0 error(s), 0 warning(s))" in out


def test_cli_build_writes_single_onnx_model_when_given_onnx_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = write_onnx(tmp_path / "net.onnx", identity_onnx())
    argv = [
        "build",
        str(src),
        "--name",
        "net",
        "--max-batch-size",
        "16",
        "--dynamic-batching",
        "-o",
        str(tmp_path / "r"),
    ]
    code, _, _ = run(argv, capsys)
    assert code == 0
    cfg = read_config(tmp_path / "r" / "net" / "config.pbtxt")
    assert cfg.max_batch_size == 16 and cfg.HasField("dynamic_batching")
    assert (tmp_path / "r" / "net" / "1" / "model.onnx").is_file()


def test_cli_build_exits_1_with_clean_message_when_onnx_is_corrupt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "bad.onnx"
    src.write_bytes(b"\x08\x07garbage-not-onnx")
    code, out, err = run(["build", str(src), "--name", "bad", "-o", str(tmp_path / "r")], capsys)
    assert code == 1
    assert "error:" in err and "bad.onnx" in err
    assert "Traceback" not in err + out
    assert not (tmp_path / "r").exists()


def test_cli_build_exits_1_without_traceback_when_version_exists(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = pipeline_spec(tmp_path)
    repo = tmp_path / "repo"
    assert run(["build", str(spec), "-o", str(repo)], capsys)[0] == 0
    write_onnx(tmp_path / "src" / "ident.onnx", identity_onnx(batch="other_batch"))
    code, out, err = run(["build", str(spec), "-o", str(repo)], capsys)
    assert code == 1
    assert "already exists" in err and "--force" in err
    assert "Traceback" not in err + out
    assert run(["build", str(spec), "-o", str(repo), "--force"], capsys)[0] == 0


def test_cli_build_exits_2_when_onnx_options_are_given_with_a_spec(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(
        ["build", str(pipeline_spec(tmp_path)), "--name", "x", "-o", str(tmp_path / "r")], capsys
    )
    assert code == 2
    assert "apply to a .onnx input" in err


def test_cli_validate_prints_json_and_exits_1_when_repository_is_invalid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURES / "base", repo)
    shutil.copyfile(FIXTURES / "truncated_config.pbtxt", repo / "solo" / "config.pbtxt")
    code, out, _ = run(["validate", str(repo), "--json"], capsys)
    assert code == 1
    data = json.loads(out)
    assert data["valid"] is False
    assert data["problems"] == [
        {
            "severity": "error",
            "model": "solo",
            "file": f"{repo}/solo/config.pbtxt",
            "line": 6,
            "code": "config-parse",
            "message": data["problems"][0]["message"],
        }
    ]


def test_cli_validate_lists_file_line_and_code_when_human_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURES / "base", repo)
    text = (repo / "solo" / "config.pbtxt").read_text().replace("max_batch_size: 8", "max_batch_size: -1")
    (repo / "solo" / "config.pbtxt").write_text(text)
    code, out, _ = run(["validate", str(repo)], capsys)
    assert code == 1
    assert f"{repo}/solo/config.pbtxt:3: error: max-batch-size-negative:" in out
    assert "invalid (1 error(s), 0 warning(s))" in out


def test_cli_validate_prints_line_100_as_a_number_not_an_emoji(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``config.pbtxt:100:`` reached the terminal as ``config.pbtxt💯`` (rich read ``:100:`` as an
    emoji code)."""
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURES / "base", repo)
    path = repo / "solo" / "config.pbtxt"
    text = path.read_text().replace("max_batch_size: 8", "")
    path.write_text("# padding\n" * (99 - text.count("\n")) + text + "max_batch_size: -1\n")
    assert path.read_text().splitlines()[99] == "max_batch_size: -1"
    code, out, _ = run(["validate", str(repo)], capsys)
    assert code == 1
    assert f"{repo}/solo/config.pbtxt:100: error: max-batch-size-negative:" in out
    assert "💯" not in out


def test_cli_validate_exits_0_with_json_when_repository_is_valid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["validate", str(FIXTURES / "base"), "--json"], capsys)
    assert code == 0
    assert json.loads(out) == {"valid": True, "problems": []}


def test_cli_validate_exits_2_when_repository_does_not_exist(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["validate", str(tmp_path / "nope")], capsys)
    assert code == 2
    assert "does not exist" in err


def _streaming_spec(tmp_path: Path) -> Path:
    (tmp_path / "gen.py").write_text(
        "import triton_python_backend_utils as pb_utils\n\n\nclass TritonPythonModel:\n"
        "    def execute(self, requests):\n        return None\n"
    )
    spec = tmp_path / "stream.yaml"
    spec.write_text(
        "name: stream\nmodels:\n"
        "  - name: gen\n    source: gen.py\n    decoupled: true\n"
        "    inputs: [{name: A, data_type: FP32, dims: [1]}]\n"
        "    outputs: [{name: B, data_type: FP32, dims: [1]}]\n"
        "  - name: pipe\n    platform: ensemble\n    decoupled: false\n"
        "    inputs: [{name: A, data_type: FP32, dims: [1]}]\n"
        "    outputs: [{name: B, data_type: FP32, dims: [1]}]\n"
        "    steps: [{model: gen, inputs: {A: A}, outputs: {B: B}}]\n"
    )
    return spec


def test_cli_build_and_validate_say_ensemble_is_decoupled_when_a_step_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "repo"
    code, out, _ = run(["build", str(_streaming_spec(tmp_path)), "-o", str(repo)], capsys)
    assert code == 0
    flat = " ".join(out.split())
    assert "ensemble 'pipe' is decoupled because its step 'gen' is, whatever its own config says" in flat
    assert "generate_stream" in flat and "501" in flat
    assert not read_config(repo / "pipe" / "config.pbtxt").model_transaction_policy.decoupled
    code, out, _ = run(["validate", str(repo)], capsys)
    assert code == 0
    flat = " ".join(out.split())
    assert "info: ensemble-decoupled: Triton serves ensemble 'pipe' as decoupled" in flat
    assert "info: decoupled-model: 'gen' is decoupled" in flat


def torch_model_repository(tmp_path: Path) -> Path:
    """A hand-made repository (no tritonkit manifest) whose Python model imports torch."""
    repo = tmp_path / "repo"
    (repo / "m" / "1").mkdir(parents=True)
    (repo / "m" / "config.pbtxt").write_text('name: "m"\nbackend: "python"\nmax_batch_size: 0\n')
    (repo / "m" / "1" / "model.py").write_text("import torch\n\nclass TritonPythonModel:\n    pass\n")
    return repo


def test_cli_validate_warns_and_exits_0_when_no_target_is_known(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["validate", str(torch_model_repository(tmp_path))], capsys)
    assert code == 0
    assert "warning: python-import-unavailable: imports 'torch'" in out
    assert "valid (0 error(s), 1 warning(s))" in out


def test_cli_validate_exits_1_when_the_target_release_lacks_an_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        ["validate", str(torch_model_repository(tmp_path)), "--target", "24.12", "--json"], capsys
    )
    assert code == 1
    (problem,) = json.loads(out)["problems"]
    assert (problem["severity"], problem["code"], problem["line"]) == (
        "error",
        "python-import-unavailable",
        1,
    )


def test_cli_validate_accepts_the_import_when_the_image_requirements_list_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    freeze = tmp_path / "freeze.txt"
    freeze.write_text("torch==2.3.1\nnumpy==1.26.4\n")
    code, out, _ = run(
        ["validate", str(torch_model_repository(tmp_path)), "--image-requirements", str(freeze)], capsys
    )
    assert code == 0 and "valid (0 error(s), 0 warning(s))" in out


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [("--target", "99.99", "unknown Triton release"), ("--image-requirements", "missing.txt", "cannot read")],
)
def test_cli_validate_exits_2_without_traceback_when_the_target_option_is_wrong(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str, says: str
) -> None:
    code, _, err = run(["validate", str(torch_model_repository(tmp_path)), option, value], capsys)
    assert code == 2
    assert says in err and option in err and "Traceback" not in err
