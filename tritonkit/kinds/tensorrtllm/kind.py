"""The TensorRT-LLM kind object: its facts, its checks and how it parses and expands spec models."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritonkit.kinds.base import BaseKind, BuildFacts, DeployFacts, ServeFacts, SpecContext
from tritonkit.kinds.entry import ModelKind
from tritonkit.kinds.releases import TRTLLM_IMAGE, TRTLLM_RELEASES
from tritonkit.kinds.rules import ConfigFile, FileContext, RepositoryContext
from tritonkit.kinds.tensorrtllm.checks import check_trtllm_config, check_trtllm_repository
from tritonkit.kinds.tensorrtllm.expand import expand_trtllm_spec
from tritonkit.kinds.tensorrtllm.spec import BACKEND, ENGINE_DIRNAME, is_trtllm_spec

__all__ = ["TENSORRTLLM", "TensorrtllmKind", "trtllm_models"]


def _check_config(cf: ConfigFile, ctx: FileContext) -> None:
    if ctx.variant and not ctx.versions:
        return  # a variant's files are judged only where the model has version dirs
    check_trtllm_config(cf, model_dir=ctx.model_dir, versions=ctx.versions)


def _check_repository(ctx: RepositoryContext) -> None:
    check_trtllm_repository(ctx.root, ctx.infos, explicit=ctx.explicit, recorded=ctx.recorded)


@dataclass(frozen=True, kw_only=True)
class TensorrtllmKind(BaseKind):
    """A spec entry with ``engine_dir`` is a whole stage: it expands into ordinary spec models."""

    def describes(self, raw: Mapping[str, Any]) -> bool:
        return is_trtllm_spec(raw)

    def expand(self, raw: Mapping[str, Any], *, context: SpecContext) -> list[Mapping[str, Any]]:
        return list(
            expand_trtllm_spec(
                raw,
                base=context.base,
                spec=context.spec,
                default_target=context.target,
                default_serving_root=context.serving_root,
            )
        )


TENSORRTLLM = TensorrtllmKind(
    name=BACKEND,
    model_kind=ModelKind.OTHER,  # the engine model; its other models are Python ones and ensembles
    title="a TensorRT-LLM stage",
    backends=frozenset({BACKEND}),
    build=BuildFacts(default_filename=ENGINE_DIRNAME),  # where gpt_model_path points
    serve=ServeFacts(
        local=False, needs_gpu=True, image=TRTLLM_IMAGE, image_marker="trtllm", default_release="24.10"
    ),
    deploy=DeployFacts(
        serving_root=True,
        aml_warning=(
            "TensorRT-LLM models {models}: Azure ML's no-code Triton image is documented for "
            "TensorFlow, ONNX Runtime, PyTorch and TensorRT models, not for the tensorrtllm backend (NVIDIA "
            "ships it in the -trtllm-python-py3 image), and it mounts the repository in its own model "
            "directory, not at the serving_root (/models) the engine and tokenizer paths name; tritonkit "
            "cannot check either before deploying: `tritonkit deploy --target aks` runs NVIDIA's image "
            "with the repository at /models"
        ),
    ),
    releases=TRTLLM_RELEASES,
    file_checks=(_check_config,),
    repository_checks=(_check_repository,),
)


def trtllm_models(repository: Path) -> list[str]:
    """The models of ``repository`` whose config.pbtxt names the tensorrtllm backend."""
    return TENSORRTLLM.models_in(repository)
