"""The vLLM kind object: its facts, its checks and how it parses and expands spec models."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from tritonkit.config import ModelConfig
from tritonkit.kinds.base import BaseKind, BuildFacts, DeployFacts, ServeFacts, SpecContext
from tritonkit.kinds.entry import CONFIG_KEYS, ModelEntry, ModelKind, parse_variants, parse_version
from tritonkit.kinds.releases import VLLM_IMAGE, VLLM_RELEASES, resolve_vllm_target
from tritonkit.kinds.rules import ConfigFile, FileContext
from tritonkit.kinds.vllm.checks import check_vllm, complete_vllm, is_vllm
from tritonkit.kinds.vllm.layout import vllm_config, write_vllm_model
from tritonkit.kinds.vllm.parse import parse_vllm_spec
from tritonkit.kinds.vllm.spec import BACKEND, VLLM_KEYS

__all__ = ["VLLM", "VllmKind"]


def _check(cf: ConfigFile, ctx: FileContext) -> None:
    """vLLM rules on ``cf``; a variant's version dirs are judged once, with the main config,
    unless that config is not a vLLM one."""
    release: str | None
    if ctx.explicit is not None:
        release = ctx.explicit.release  # --target: its -vllm-python-py3 image
    else:
        release = ctx.recorded.target_of(cf.model) if ctx.recorded is not None else None
    files = not ctx.variant or ctx.main is None or not is_vllm(ctx.main)
    check_vllm(
        cf,
        model_dir=ctx.model_dir,
        display_dir=ctx.display,
        versions=ctx.versions,
        release=release,
        files=files,
    )


@dataclass(frozen=True, kw_only=True)
class VllmKind(BaseKind):
    """Parses, writes and configures its stages itself (NVIDIA's backend fixes their tensors)."""

    def describes(self, raw: Mapping[str, Any]) -> bool:
        return raw.get("backend") in self.backends

    def parse(self, raw: Mapping[str, Any], *, name: str, where: str, context: SpecContext) -> ModelEntry:
        spec = context.spec
        llm = parse_vllm_spec(raw, base=context.base, where=where, spec=spec)
        version = parse_version(raw, where=where, spec=spec)
        fields = {k: raw[k] for k in CONFIG_KEYS if k in raw}
        target = raw.get("target")
        release = resolve_vllm_target(target, where=f"{spec}: {where}.target") if target else context.target
        return ModelEntry(
            name=name,
            kind=ModelKind.VLLM,
            source=None,
            generator=None,
            files=(),
            version=version,
            fields=MappingProxyType(fields),
            variants=parse_variants(raw.get("variants"), where=where, spec=spec),
            steps=(),
            base=context.base,
            where=f"{spec}: {where}",
            spec=spec,
            target=release,
            vllm=llm,
        )

    def write_version(self, entry: ModelEntry, version_dir: Path, *, serving_root: str) -> list[str]:
        return write_vllm_model(entry, version_dir, serving_root=serving_root)

    def config(self, entry: ModelEntry, fields: Mapping[str, Any]) -> ModelConfig:
        return vllm_config(entry, fields)


VLLM = VllmKind(
    model_kind=ModelKind.VLLM,
    title=f"a vLLM stage (backend: {BACKEND})",
    backends=frozenset({BACKEND}),
    spec_keys=VLLM_KEYS,
    build=BuildFacts(records_target=True, records_serving_root=True),
    serve=ServeFacts(image=VLLM_IMAGE, default_release="24.10"),
    deploy=DeployFacts(
        serving_root=True,
        picks_own_device=True,  # the GPU on NVIDIA's vLLM image
        aml_decoupled_note=(
            " (a vLLM stage is always decoupled, and Azure ML's Triton image has no vllm backend): "
            "deploy it with `tritonkit deploy --target aks`, which runs NVIDIA's -vllm-python-py3 image"
        ),
    ),
    releases=VLLM_RELEASES,
    file_checks=(_check,),
    auto_complete=complete_vllm,  # NVIDIA's backend completes decoupled, max_batch_size 0, tensors
)
