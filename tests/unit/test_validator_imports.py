"""python-import-unavailable: what a Python model may import in its serving image.

Each target mode on minimal repositories: an NGC release (``target=``), the release
``tritonkit build`` recorded, a custom image's pip freeze (``image_requirements=``), and none
(a warning, never a refusal: the validator cannot know the image).
"""

from __future__ import annotations

import json
import tarfile
import textwrap
from pathlib import Path

import pytest
import yaml

from tritonkit.errors import SpecError
from tritonkit.repository import build_spec, validate_repository
from tritonkit.repository.execution_env import METADATA_NAME
from tritonkit.repository.image_packages import distribution_for, top_level_names

CONFIG = 'name: "{name}"\nbackend: "python"\nmax_batch_size: 0\n{params}'
ENV_PARAM = 'parameters {{ key: "EXECUTION_ENV_PATH" value {{ string_value: "{value}" }} }}\n'


def python_model(
    repo: Path, source: str, *, name: str = "m", env: str | None = None, files: dict[str, str] | None = None
) -> Path:
    model = repo / name
    (model / "1").mkdir(parents=True)
    params = ENV_PARAM.format(value=env) if env else ""
    (model / "config.pbtxt").write_text(CONFIG.format(name=name, params=params))
    (model / "1" / "model.py").write_text(textwrap.dedent(source))
    for rel, text in (files or {}).items():
        (model / rel).parent.mkdir(parents=True, exist_ok=True)
        (model / rel).write_text(text)
    return model


def import_problems(repo: Path, **target: str | Path) -> list[tuple[str, int | None, str]]:
    report = validate_repository(repo, **target)  # type: ignore[arg-type]
    return [(p.file, p.line, p.message) for p in report.problems if p.code == "python-import-unavailable"]


def import_findings(repo: Path, **target: str | Path) -> list[tuple[str, str, int | None]]:
    """(severity, module named, line) of each import finding."""
    report = validate_repository(repo, **target)  # type: ignore[arg-type]
    return [
        (p.severity, p.message.split("'")[1], p.line)
        for p in report.problems
        if p.code == "python-import-unavailable"
    ]


def write_env_archive(
    path: Path,
    modules: list[str],
    *,
    tritonkit_made: bool = True,
    python: str = "3.10",
    release: str = "24.10",
) -> None:
    """An EXECUTION_ENV_PATH archive: tritonkit's (metadata first) or someone's conda-pack."""
    with tarfile.open(path, "w:gz") as tar:
        entries: dict[str, bytes] = {}
        if tritonkit_made:
            entries[METADATA_NAME] = json.dumps(
                {"format": 1, "modules": modules, "python": python, "release": release}
            ).encode()
        entries["bin/activate"] = b"true\n"
        for module in modules:
            entries[f"lib/python3.10/site-packages/{module}/__init__.py"] = b""
        for name, data in entries.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            import io

            tar.addfile(info, io.BytesIO(data))


def test_import_check_passes_when_imports_are_stdlib_image_or_local(tmp_path: Path) -> None:
    python_model(
        tmp_path,
        """
        import json, os.path
        from __future__ import annotations
        import numpy as np
        import triton_python_backend_utils as pb_utils
        import helpers
        from tokenizer import split
        from . import sibling

        try:
            import orjson
        except ImportError:
            orjson = None
        if TYPE_CHECKING:
            import torch

        def later():
            import scipy

        class TritonPythonModel:
            pass
        """,
        files={"1/helpers.py": "", "1/tokenizer/__init__.py": ""},
    )
    assert import_problems(tmp_path) == []


def test_import_check_reports_an_error_with_file_and_line_when_the_target_release_lacks_the_module(
    tmp_path: Path,
) -> None:
    python_model(tmp_path, "import json\nfrom PIL import Image\n\nclass TritonPythonModel:\n    pass\n")
    report = validate_repository(tmp_path, target="24.10")
    (problem,) = report.problems
    assert (problem.severity, problem.file, problem.line) == ("error", f"{tmp_path}/m/1/model.py", 2)
    assert "'PIL'" in problem.message and "requirements: [pillow]" in problem.message
    assert "tritonserver 24.10" in problem.message and "--image-requirements" in problem.message
    assert not report.valid


def test_import_check_warns_naming_both_fixes_when_no_target_is_known(tmp_path: Path) -> None:
    """A repository tritonkit did not build, validated without --target: upstream runs such models
    on images that install torch/OpenCV, so the validator must not claim Triton refuses them."""
    python_model(tmp_path, "import torch\nimport cv2\nfrom PIL import Image\n")
    report = validate_repository(tmp_path)
    assert report.valid and not report.errors
    assert [(p.severity, p.line) for p in report.problems] == [("warning", 1), ("warning", 2), ("warning", 3)]
    message = report.problems[1].message
    assert "'cv2'" in message and "requirements: [opencv-python-headless]" in message
    assert "--target" in message and "--image-requirements" in message


def test_import_check_passes_when_the_packed_env_provides_the_module(tmp_path: Path) -> None:
    model = python_model(tmp_path, "from PIL import Image\n", env="$$TRITON_MODEL_DIRECTORY/pyenv.tar.gz")
    write_env_archive(model / "pyenv.tar.gz", ["PIL"])
    assert import_problems(tmp_path) == []


def test_import_check_reads_site_packages_when_the_env_is_not_tritonkits(tmp_path: Path) -> None:
    model = python_model(tmp_path, "import PIL\nimport cv2\n", env="$$TRITON_MODEL_DIRECTORY/conda.tar.gz")
    write_env_archive(model / "conda.tar.gz", ["PIL"], tritonkit_made=False)
    ((_, line, message),) = import_problems(tmp_path)
    assert line == 2 and "'cv2'" in message and "packed environment" in message


def test_import_check_stays_silent_when_the_env_lives_only_in_the_serving_image(tmp_path: Path) -> None:
    python_model(tmp_path, "import PIL\n", env="/opt/envs/vision.tar.gz")
    assert import_problems(tmp_path) == []


def test_import_check_errors_against_the_release_tritonkit_build_recorded(tmp_path: Path) -> None:
    """Built by tritonkit (so the manifest records the target), then edited by hand."""
    spec = tmp_path / "spec.yaml"
    (tmp_path / "pre.py").write_text("import numpy as np\n\nclass TritonPythonModel:\n    pass\n")
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "demo",
                "target": "25.01",
                "models": [
                    {
                        "name": "pre",
                        "backend": "python",
                        "source": "pre.py",
                        "inputs": [{"name": "IN", "data_type": "FP32", "dims": [4]}],
                        "outputs": [{"name": "OUT", "data_type": "FP32", "dims": [4]}],
                    }
                ],
            }
        )
    )
    repo = tmp_path / "repo"
    build_spec(spec, repo)
    manifest = json.loads((repo / ".tritonkit-manifest.json").read_text())
    assert manifest["specs"]["demo"]["targets"] == {"pre": "25.01"}
    assert validate_repository(repo).problems == []

    model_py = repo / "pre" / "1" / "model.py"
    model_py.write_text("import torch\n" + model_py.read_text())
    ((severity, module, line),) = import_findings(repo)
    assert (severity, module, line) == ("error", "torch", 1)
    (problem,) = validate_repository(repo).problems
    assert "tritonserver 25.01" in problem.message and "Python 3.12" in problem.message


def test_import_check_uses_the_packed_environments_release_when_no_manifest_records_one(
    tmp_path: Path,
) -> None:
    model = python_model(tmp_path, "import PIL\nimport cv2\n", env="$$TRITON_MODEL_DIRECTORY/pyenv.tar.gz")
    write_env_archive(model / "pyenv.tar.gz", ["PIL"], release="24.10")
    assert import_findings(tmp_path) == [("error", "cv2", 2)]


def test_import_check_lets_an_explicit_target_override_the_recorded_one(tmp_path: Path) -> None:
    python_model(tmp_path, "import tomllib\n")
    (tmp_path / ".tritonkit-manifest.json").write_text(
        json.dumps(
            {"format": 1, "specs": {"s": {"source": "s.yaml", "models": ["m"], "targets": {"m": "25.01"}}}}
        )
    )
    assert import_findings(tmp_path) == []  # 25.01: Python 3.12 has tomllib
    assert import_findings(tmp_path, target="24.10") == [("error", "tomllib", 1)]  # 3.10 has not


@pytest.mark.parametrize(
    ("module", "release", "found"),
    [
        ("tomllib", "24.10", True),  # added in 3.11
        ("tomllib", "24.12", False),
        ("asyncore", "24.10", False),  # removed in 3.12
        ("asyncore", "24.12", True),
        ("distutils", "24.12", False),  # removed in 3.12, but setuptools in the image brings it back
    ],
)
def test_import_check_judges_the_standard_library_of_the_targets_python(
    tmp_path: Path, module: str, release: str, found: bool
) -> None:
    python_model(tmp_path, f"import {module}\n")
    assert bool(import_findings(tmp_path, target=release)) is found
    assert import_findings(tmp_path) == []  # no target: any Python's standard library


FREEZE = """\
# pip freeze inside myregistry.azurecr.io/triton-vision:1.0
numpy==1.26.4
torch==2.3.1
opencv-python-headless==4.9.0.80
Pillow==10.3.0
PyYAML==6.0.1
-e git+https://example.invalid/org/tokenizers-fork.git@abc123#egg=fasttok
--extra-index-url https://download.pytorch.org/whl/cu121
"""


def test_image_requirements_provide_what_the_freeze_lists_and_nothing_else(tmp_path: Path) -> None:
    freeze = tmp_path / "image-freeze.txt"
    freeze.write_text(FREEZE)
    repo = tmp_path / "repo"
    python_model(
        repo, "import torch\nimport cv2\nfrom PIL import Image\nimport yaml\nimport fasttok\nimport sklearn\n"
    )
    report = validate_repository(repo, image_requirements=freeze)
    (problem,) = report.problems
    assert (problem.severity, problem.line) == ("error", 6)
    assert "'sklearn'" in problem.message and str(freeze) in problem.message
    assert "requirements: [scikit-learn]" in problem.message and "install it in the image" in problem.message


def test_image_requirements_take_the_python_of_the_release_they_are_built_on(tmp_path: Path) -> None:
    freeze = tmp_path / "freeze.txt"
    freeze.write_text("torch==2.3.1\n")
    repo = tmp_path / "repo"
    python_model(repo, "import torch\nimport tomllib\n")
    assert import_findings(repo, image_requirements=freeze) == []
    assert import_findings(repo, image_requirements=freeze, target="24.10") == [("error", "tomllib", 2)]


def test_image_requirements_refuse_a_line_that_is_not_a_requirement_with_file_and_line(
    tmp_path: Path,
) -> None:
    freeze = tmp_path / "freeze.txt"
    freeze.write_text("torch==2.3.1\nthis is not == a requirement\n")
    with pytest.raises(SpecError, match=r"freeze.txt:2: "):
        validate_repository(tmp_path, image_requirements=freeze)
    with pytest.raises(SpecError, match="cannot read"):
        validate_repository(tmp_path, image_requirements=tmp_path / "missing.txt")


def test_unknown_or_unconfirmed_target_release_is_refused_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="unknown Triton release '99.99'") as unknown:
        validate_repository(tmp_path, target="99.99")
    assert "24.10" in (unknown.value.hint or "")
    with pytest.raises(SpecError, match="not offered") as unconfirmed:
        validate_repository(tmp_path, target="24.11")
    assert "3.10.12" in (unconfirmed.value.hint or "") and "3.12.3" in (unconfirmed.value.hint or "")


@pytest.mark.parametrize(
    ("distribution", "module"),
    [
        ("opencv-python", "cv2"),
        ("opencv-python-headless", "cv2"),
        ("opencv-contrib-python-headless", "cv2"),
        ("Pillow", "PIL"),
        ("scikit-learn", "sklearn"),
        ("PyYAML", "yaml"),  # installed here: read from its own top_level record
        ("huggingface-hub", "huggingface_hub"),  # not installed, not in the table: the name itself
        ("protobuf", "google"),
        ("google-cloud-storage", "google"),  # a namespace package: its prefix
        ("azure-storage-blob", "azure"),
    ],
)
def test_distributions_map_to_the_modules_they_install(distribution: str, module: str) -> None:
    assert module in top_level_names(distribution)


def test_the_suggested_requirement_is_the_distribution_of_the_module() -> None:
    assert [distribution_for(m) for m in ("PIL", "cv2", "sklearn", "yaml", "torch")] == [
        "pillow",
        "opencv-python-headless",
        "scikit-learn",
        "pyyaml",
        "torch",
    ]


def test_an_ensemble_falls_with_its_members_import_error_but_not_with_its_warning(tmp_path: Path) -> None:
    from tests.unit.test_validator_rules import fresh

    repo = fresh(tmp_path, lambda r: (r / "py_m/1/model.py").write_text("import torch\n"))
    unknown = validate_repository(repo)
    assert unknown.valid, [str(p) for p in unknown.problems]
    assert {(p.model, p.code, p.severity) for p in unknown.problems} == {
        ("py_m", "python-import-unavailable", "warning")
    }
    stock = validate_repository(repo, target="24.10")
    assert {(p.model, p.code) for p in stock.errors} == {
        ("py_m", "python-import-unavailable"),
        ("ens", "ensemble-member-invalid"),
    }
