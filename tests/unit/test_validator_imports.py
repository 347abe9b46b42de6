"""python-import-unavailable: what a Python model may import in its production image."""

from __future__ import annotations

import json
import tarfile
import textwrap
from pathlib import Path

from tritonkit.repository import validate_repository
from tritonkit.repository.pyenv import METADATA_NAME

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


def import_problems(repo: Path) -> list[tuple[str, int | None, str]]:
    report = validate_repository(repo)
    return [(p.file, p.line, p.message) for p in report.problems if p.code == "python-import-unavailable"]


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


def test_import_check_reports_module_file_and_line_when_an_import_is_missing(tmp_path: Path) -> None:
    python_model(tmp_path, "import json\nfrom PIL import Image\n\nclass TritonPythonModel:\n    pass\n")
    ((file, line, message),) = import_problems(tmp_path)
    assert (file, line) == (f"{tmp_path}/m/1/model.py", 2)
    assert "'PIL'" in message and "requirements:" in message
    assert not validate_repository(tmp_path).valid


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
