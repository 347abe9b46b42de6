"""Custom serving images (spec key ``image:``) and offline builds (``--find-links``/``--no-index``).

pip runs for real, against wheels the tests write into a local directory (``tests/_wheels``); the
package index is pointed at a port nothing listens on, so a build that asked it would fail.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests._wheels import write_wheel
from tritonkit.cli.app import app
from tritonkit.deploy.aks import DEFAULT_IMAGE, AksDeployer, AksOptions
from tritonkit.deploy.checks import custom_image_problems, recorded_image
from tritonkit.errors import ModelImportError, SpecError
from tritonkit.repository import build_spec, validate_repository
from tritonkit.repository.execution_env import PipOptions, read_metadata
from tritonkit.repository.spec import load_spec

IMAGE = "myacr.azurecr.io/triton-torch:24.10"

TORCH_STAGE = textwrap.dedent(
    """
    import numpy as np
    import torch
    import tkoffline


    class TritonPythonModel:
        def execute(self, requests):
            return []
    """
)

FREEZE = "numpy==1.26.4\ntorch==2.5.1+cu124\ntorchvision==0.20.1+cu124\npillow==10.4.0\n"


@pytest.fixture()
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A wheel directory with one tiny pure-Python wheel, a dead index and a private cache."""
    wheels = tmp_path / "wheels"
    write_wheel(wheels, "tkoffline", "1.0", "py3-none-any", {"tkoffline/__init__.py": "VALUE = 1\n"})
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.delenv("PIP_NO_INDEX", raising=False)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # nothing listens there
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("TRITONKIT_CACHE_DIR", str(tmp_path / "cache"))
    return wheels


def write_spec(tmp_path: Path, *, image: bool = True, requirements: str = "[torch, tkoffline]") -> Path:
    (tmp_path / "stage.py").write_text(TORCH_STAGE)
    (tmp_path / "image-freeze.txt").write_text(FREEZE)
    image_key = f'image: {{name: {IMAGE}, python: "3.10", packages: image-freeze.txt}}' if image else ""
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        textwrap.dedent(
            """
            name: torchy
            {image_key}
            models:
              - name: classifier
                backend: python
                source: stage.py
                requirements: {requirements}
                max_batch_size: 8
                inputs: [{{name: X, data_type: FP32, dims: [3]}}]
                outputs: [{{name: Y, data_type: FP32, dims: [3]}}]
                instance_group: [{{kind: KIND_GPU, count: 1}}]
            """
        ).format(image_key=image_key, requirements=requirements)
    )
    return spec


def _packed(model_dir: Path) -> set[str]:
    """The top-level modules the model's packed archive makes importable."""
    (archive,) = model_dir.glob("pyenv-*.tar.gz")
    meta = read_metadata(archive)
    assert meta is not None
    return set(meta["modules"])


def test_torch_stage_builds_and_validates_against_the_declared_image_packing_only_what_it_lacks(
    offline: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    build_spec(write_spec(tmp_path), repo, pip=PipOptions(find_links=(offline,), no_index=True))
    site = _packed(repo / "classifier")
    assert "tkoffline" in site
    assert not {"torch", "numpy"} & site  # the image has them: not packed
    report = validate_repository(repo)  # judged against the image the manifest recorded
    assert report.valid, [str(p) for p in report.problems]
    recorded = json.loads((repo / ".tritonkit-manifest.json").read_text())["specs"]["torchy"]["image"]
    assert recorded["name"] == IMAGE and recorded["python"] == "3.10" and recorded["distributions"]["torch"]


def test_torch_stage_is_refused_without_a_custom_image(offline: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path, image=False, requirements="[tkoffline]")
    with pytest.raises(ModelImportError, match="torch") as info:
        build_spec(spec, tmp_path / "repo", pip=PipOptions(find_links=(offline,), no_index=True))
    assert "image:" in (info.value.hint or "")


def test_a_model_whose_requirements_the_image_has_gets_no_archive(offline: Path, tmp_path: Path) -> None:
    (tmp_path / "stage.py").write_text("import torch\n\nclass TritonPythonModel:\n    pass\n")
    spec = write_spec(tmp_path, requirements="[torch, pillow]")
    (tmp_path / "stage.py").write_text("import torch\nimport PIL\n\nclass TritonPythonModel:\n    pass\n")
    repo = tmp_path / "repo"
    build_spec(spec, repo)  # no pip at all: nothing to pack
    assert not list((repo / "classifier").glob("pyenv-*.tar.gz"))
    assert validate_repository(repo).valid


def test_offline_build_fails_with_pips_reason_when_the_wheel_directory_lacks_a_wheel(
    offline: Path, tmp_path: Path
) -> None:
    from tritonkit.errors import RepositoryError

    spec = write_spec(tmp_path, requirements="[tkoffline, tkmissing]")
    with pytest.raises(RepositoryError, match="tkmissing") as info:
        build_spec(spec, tmp_path / "repo", pip=PipOptions(find_links=(offline,), no_index=True))
    assert "wheel directory" in (info.value.hint or "")
    assert not (tmp_path / "repo").exists()


def test_cli_build_passes_find_links_and_no_index_to_pip(offline: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    result = CliRunner().invoke(
        app,
        ["build", str(write_spec(tmp_path)), "-o", str(repo), "--find-links", str(offline), "--no-index"],
    )
    assert result.exit_code == 0, result.output
    assert "tkoffline" in _packed(repo / "classifier")
    refused = CliRunner().invoke(app, ["build", str(write_spec(tmp_path)), "-o", str(repo), "--no-index"])
    assert refused.exit_code == 2 and "--find-links" in refused.output


def test_deploy_aks_runs_the_recorded_image_and_aml_refuses_it(offline: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    build_spec(write_spec(tmp_path), repo, pip=PipOptions(find_links=(offline,), no_index=True))
    assert recorded_image(repo) == IMAGE
    aks = AksDeployer(options=AksOptions(repository=repo, model_repository="pvc://models/repo"))
    assert aks.options.image == IMAGE
    told = AksDeployer(options=AksOptions(repository=repo, model_repository="pvc://m/r", image="x/y:1"))
    assert told.options.image == "x/y:1"  # --image still wins
    assert DEFAULT_IMAGE != IMAGE
    (problem,) = custom_image_problems(repo)
    assert IMAGE in problem and "deploy aks" in problem


def test_spec_image_is_refused_when_its_python_or_packages_are_missing(tmp_path: Path) -> None:
    spec = write_spec(tmp_path)
    text = spec.read_text()
    spec.write_text(text.replace('python: "3.10", ', ""))
    with pytest.raises(SpecError, match="image.python"):
        load_spec(spec)
    spec.write_text(text.replace("packages: image-freeze.txt", "packages: nowhere.txt"))
    with pytest.raises(SpecError, match="cannot read"):
        load_spec(spec)
    spec.write_text(text.replace("    source: stage.py", '    source: stage.py\n    target: "24.10"'))
    with pytest.raises(SpecError, match="both name the serving image"):
        load_spec(spec)


def test_cli_validate_takes_the_custom_images_python(tmp_path: Path) -> None:
    (tmp_path / "freeze.txt").write_text(FREEZE)
    repo = tmp_path / "repo"
    (repo / "m" / "1").mkdir(parents=True)
    (repo / "m" / "1" / "model.py").write_text(
        "import tomllib\nimport torch\n\nclass TritonPythonModel:\n    pass\n"
    )
    (repo / "m" / "config.pbtxt").write_text('name: "m"\nbackend: "python"\nmax_batch_size: 0\n')
    args = ["validate", str(repo), "--image-requirements", str(tmp_path / "freeze.txt"), "--json"]
    old = CliRunner().invoke(app, [*args, "--image-python", "3.10"])  # tomllib: 3.11 and later
    new = CliRunner().invoke(app, [*args, "--image-python", "3.12"])
    assert old.exit_code == 1 and "tomllib" in old.output
    assert new.exit_code == 0, new.output
    bad = CliRunner().invoke(app, [*args, "--image-python", "three"])
    assert bad.exit_code == 2
