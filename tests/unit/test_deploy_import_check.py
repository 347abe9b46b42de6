"""`tritonkit deploy` (AML and AKS, dry runs too) refuses a repository whose Python imports are unpackaged."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.test_validator_imports import python_model, write_env_archive
from tritonkit.errors import DeployValidationError


def unpackaged_repository(tmp_path: Path) -> Path:
    repo = tmp_path / "model_repository"
    python_model(repo, "from PIL import Image\n\nclass TritonPythonModel:\n    pass\n", name="adder")
    return repo


def test_aml_plan_refuses_before_any_call_when_a_python_import_is_unpackaged(tmp_path: Path) -> None:
    from tests.unit.test_deploy_aml import ReplayTransport, deployer, options

    transport = ReplayTransport([])
    d = deployer(options(unpackaged_repository(tmp_path), tmp_path), transport)
    with pytest.raises(DeployValidationError, match="imports 'PIL'") as info:
        d.apply(d.plan())
    assert "requirements:" in (info.value.hint or "")
    assert transport.requests == []


@pytest.mark.parametrize(
    "image", ["nvcr.io/nvidia/tritonserver:24.10-py3", "nvcr.io/nvidia/tritonserver:99.01-py3"]
)
def test_aks_check_refuses_when_a_python_import_is_unpackaged_and_the_image_is_stock(
    tmp_path: Path, image: str
) -> None:
    from tests.unit.test_deploy_aks import aks

    with pytest.raises(DeployValidationError, match="python|PIL") as info:
        aks(repository=unpackaged_repository(tmp_path), image=image).check()
    assert "model.py:1" in str(info.value)


def test_aks_check_accepts_an_unpackaged_import_when_a_custom_image_may_provide_it(tmp_path: Path) -> None:
    """A hand-made repository on a custom image: tritonkit cannot know the image has Pillow, so
    the import is a warning (the validator's), not a refusal."""
    from tests.unit.test_deploy_aks import aks

    aks(repository=unpackaged_repository(tmp_path), image="myregistry.azurecr.io/triton-vision:1.0").check()


def test_aks_check_uses_the_recorded_target_when_the_image_is_custom(tmp_path: Path) -> None:
    from tests.unit.test_deploy_aks import aks
    from tritonkit.repository.manifest import Manifest

    repo = unpackaged_repository(tmp_path)
    manifest = Manifest()
    manifest.assign("spec", "spec.yaml", ["adder"], {"adder": "24.10"})
    manifest.write(repo)
    with pytest.raises(DeployValidationError, match="imports 'PIL'"):
        aks(repository=repo, image="myregistry.azurecr.io/triton-vision:1.0").check()


def packed_repository(tmp_path: Path, *, python: str, release: str) -> Path:
    repo = tmp_path / "model_repository"
    model = python_model(
        repo,
        "from PIL import Image\n\nclass TritonPythonModel:\n    pass\n",
        name="pre",
        env="$$TRITON_MODEL_DIRECTORY/pyenv.tar.gz",
    )
    write_env_archive(model / "pyenv.tar.gz", ["PIL"], python=python, release=release)
    return repo


@pytest.mark.parametrize("release", ["25.01", "24.12"])  # 24.12: Ubuntu 24.04, Python 3.12 (its notes)
def test_aks_check_refuses_an_image_whose_python_differs_from_the_packed_environment(
    tmp_path: Path, release: str
) -> None:
    from tests.unit.test_deploy_aks import aks

    repo = packed_repository(tmp_path, python="3.10", release="24.10")
    with pytest.raises(DeployValidationError, match="Python 3.10") as info:
        aks(repository=repo, image=f"nvcr.io/nvidia/tritonserver:{release}-py3").check()
    message = str(info.value)
    assert "model 'pre'" in message and "Python 3.12" in message and f'target: "{release}"' in message


@pytest.mark.parametrize(
    "image",
    [
        "nvcr.io/nvidia/tritonserver:24.10-py3",  # the packed target
        "nvcr.io/nvidia/tritonserver:24.09-py3-min",  # another 3.10 release
        "myregistry.azurecr.io/triton-custom:1.0",  # unknown: not judged offline
    ],
)
def test_aks_check_accepts_the_packed_environment_when_the_image_runs_its_python(
    tmp_path: Path, image: str
) -> None:
    from tests.unit.test_deploy_aks import aks

    aks(repository=packed_repository(tmp_path, python="3.10", release="24.10"), image=image).check()


@pytest.mark.parametrize(
    "target_args",
    [
        [
            "--target",
            "aml",
            "--endpoint",
            "triton-ep",
            "--deployment",
            "green",
            "--instance-type",
            "Standard_NC6s_v3",
        ],
        ["--target", "aks", "--model-repository", "pvc://models", "--autoscaler", "none"],
    ],
)
def test_deploy_dry_run_exits_1_without_writing_when_a_python_import_is_unpackaged(
    tmp_path: Path, target_args: list[str]
) -> None:
    out = tmp_path / "out"
    argv = ["deploy", str(unpackaged_repository(tmp_path)), "--dry-run", "-o", str(out), *target_args]
    result = subprocess.run(
        [sys.executable, "-m", "tritonkit.cli.app", *argv], capture_output=True, text=True, check=False
    )
    assert result.returncode == 1, result.stderr
    assert "imports 'PIL'" in result.stderr and "Traceback" not in result.stderr
    assert not out.exists()


def test_aks_check_says_which_imports_a_custom_image_must_provide(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.unit.test_deploy_aks import aks

    with caplog.at_level("WARNING", logger="tritonkit.deploy.checks"):
        aks(
            repository=unpackaged_repository(tmp_path), image="myregistry.azurecr.io/triton-vision:1.0"
        ).check()
    assert any("model.py:1" in r.getMessage() and "imports 'PIL'" in r.getMessage() for r in caplog.records)
