"""Azure ML and TensorRT-LLM stages: a decoupled stage is refused like any decoupled model, a
unary one passes the offline checks (validator, upload layout, the azure-ai-ml SDK's own entity
validation and YAML loaders) with a warning naming what only Azure can tell.

Engines are stand-ins (no GPU here, see _trtllm_helpers).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonkit.deploy.aml import AmlDeployer
from tritonkit.errors import DeployValidationError
from tritonkit.repository.builder import build_spec

from ._trtllm_helpers import stage_spec
from .test_deploy_aml import options


def _repo(tmp_path: Path, **stage: object) -> Path:
    repo = tmp_path / "repo"
    build_spec(stage_spec(tmp_path, **stage), repo)
    return repo


def test_aml_plan_accepts_a_unary_trtllm_stage_with_a_warning(tmp_path: Path) -> None:
    repo = _repo(tmp_path, decoupled=False)
    plan = AmlDeployer(options=options(repo, tmp_path)).plan()
    assert "decoder" in dict(plan.summary)["models"]
    assert any("tensorrtllm backend" in w and "--target aks" in w for w in plan.warnings)


def test_aml_plan_refuses_a_decoupled_trtllm_stage(tmp_path: Path) -> None:
    repo = _repo(tmp_path, decoupled=True)
    with pytest.raises(DeployValidationError) as info:
        AmlDeployer(options=options(repo, tmp_path)).plan()
    assert "model 'decoder_tensorrt_llm' is decoupled" in str(info.value)
    assert "--target aks" in (info.value.hint or "")
