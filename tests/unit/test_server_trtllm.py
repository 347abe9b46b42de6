"""`tritonkit serve` refuses a TensorRT-LLM model it cannot load, saying where it can run.

No GPU machine is needed: the refusal happens before any server or container starts
(``gpu_present`` is patched so the result does not depend on the machine running the tests).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonkit.cli.app import main
from tritonkit.errors import ServerError
from tritonkit.kinds.tensorrtllm.kind import trtllm_models
from tritonkit.repository.builder import build_spec
from tritonkit.server import _local
from tritonkit.server._trtllm import refuse_unservable_trtllm

from ._repo_helpers import pipeline_spec
from ._trtllm_helpers import stage_spec

TRTLLM_IMAGE = "nvcr.io/nvidia/tritonserver:24.10-trtllm-python-py3"


@pytest.fixture
def trtllm_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    build_spec(stage_spec(tmp_path), repo)
    return repo


def test_refusal_without_gpu_names_the_gpu_image_and_aks(trtllm_repo: Path) -> None:
    with pytest.raises(ServerError) as err:
        refuse_unservable_trtllm(trtllm_repo, gpu=False, image=None)
    assert "'decoder_tensorrt_llm'" in err.value.message and "no" in err.value.message
    assert TRTLLM_IMAGE in str(err.value.hint) and "--target aks" in str(err.value.hint)


def test_refusal_on_a_gpu_with_the_pip_tritonserver(trtllm_repo: Path) -> None:
    with pytest.raises(ServerError, match="pip-installed tritonserver"):
        refuse_unservable_trtllm(trtllm_repo, gpu=True, image=None)


def test_refusal_on_a_gpu_with_an_image_without_trtllm(trtllm_repo: Path) -> None:
    with pytest.raises(ServerError, match="does not have"):
        refuse_unservable_trtllm(trtllm_repo, gpu=True, image="nvcr.io/nvidia/tritonserver:24.10-py3")


def test_gpu_with_the_trtllm_image_is_not_refused(trtllm_repo: Path) -> None:
    refuse_unservable_trtllm(trtllm_repo, gpu=True, image=TRTLLM_IMAGE)


def test_repository_without_trtllm_is_not_refused(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    build_spec(pipeline_spec(tmp_path), repo)
    assert trtllm_models(repo) == []
    refuse_unservable_trtllm(repo, gpu=False, image=None)


def test_cli_serve_exits_1_with_the_message_and_no_traceback(
    trtllm_repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_local, "gpu_present", lambda: False)
    with pytest.raises(SystemExit) as info:
        main(["serve", str(trtllm_repo)])
    captured = capsys.readouterr()
    assert info.value.code == 1
    text = captured.out + captured.err
    assert "TensorRT-LLM backend" in text and TRTLLM_IMAGE in text
    assert "Traceback" not in text
