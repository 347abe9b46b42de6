"""NVIDIA's own Python models, served on the real tritonserver 2.51: Triton's verdicts, recorded.

Each served repository of tests/fixtures/upstream (NVIDIA's QA BLS models, python_backend
examples) is loaded by one local tritonserver (``--exit-on-error=false``). The models its startup
table lists READY must be the ones ``verdicts.json`` says load, and the validator (no image
declared) must report errors for exactly the others. Models that ``import torch`` get the llm venv
(which has torch) as their ``EXECUTION_ENV_PATH`` in the served copy, as NVIDIA's QA image has
torch; without that venv the test is skipped.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.integration._verdict_corpus import ready_models
from tritonkit.errors import MissingExtraError, ModelLoadError
from tritonkit.repository import validate_repository
from tritonkit.server import LocalTritonServer
from tritonkit.server._vllm import find_llm_env

pytestmark = pytest.mark.integration

UPSTREAM = Path(__file__).resolve().parent.parent / "fixtures" / "upstream"
TABLE: list[dict[str, Any]] = json.loads((UPSTREAM / "verdicts.json").read_text())["models"]
SERVED = sorted({row["repository"] for row in TABLE if row["how"].startswith("served here")})
_TORCH = re.compile(r"^\s*(import|from)\s+torch\b", re.MULTILINE)


def _served_copy(repository: str, target: Path) -> Path:
    shutil.copytree(UPSTREAM / repository, target)
    for model in target.iterdir():
        code = "".join(p.read_text() for p in model.glob("*/*.py"))
        if not _TORCH.search(code):
            continue
        try:
            env = find_llm_env()
        except MissingExtraError:
            pytest.skip("no llm venv (torch) for the QA models that import torch: make llm-venv")
        config = model / "config.pbtxt"
        config.write_text(
            config.read_text()
            + f'\nparameters {{ key: "EXECUTION_ENV_PATH" value: {{ string_value: "{env.path}" }} }}\n'
        )
    return target


@pytest.mark.parametrize("repository", SERVED)
def test_triton_loads_the_upstream_models_the_table_says_and_the_validator_agrees(
    tmp_path: Path, repository: str
) -> None:
    rows = {row["model"]: row for row in TABLE if row["repository"] == repository}
    served = _served_copy(repository, tmp_path / "repo")
    server = LocalTritonServer(served, model_config_name=None, startup_timeout=600)
    try:
        server.start()
    except ModelLoadError:
        pass  # a repository with a refused model fails the start; the table says which
    finally:
        server.stop()
    refused = set(rows) - ready_models(server.logs())
    assert refused == {m for m, row in rows.items() if row["triton"] == "refused"}, server.logs()[-4000:]
    report = validate_repository(UPSTREAM / repository)
    assert {p.model for p in report.errors} == refused, [str(p) for p in report.errors]
