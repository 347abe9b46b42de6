"""How many answers an LLM-decoder pipeline streams at once, and what sets it (said, never a verdict).

A pipeline's Python front door (``ensembles/common/llm_front.py``: the contract in
:mod:`tritonkit.llm_pipeline`) reads one engine stream per model instance on Triton 2.51, so plain
Triton clients get at most its instance count of answers at once; tritonkit's OpenAI front and
client compose the pipeline themselves and get as many as its LLM stage takes. ``validate`` and
``build`` say both numbers, so the 9th caller's wait is no surprise.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from tritonkit.config import ModelConfig, config_to_dict, read_config
from tritonkit.errors import TritonKitError
from tritonkit.kinds.names import TENSORRTLLM, is_vllm
from tritonkit.kinds.rules import ModelDirectory
from tritonkit.llm_pipeline import composed_pipeline

__all__ = ["check_pipeline_concurrency", "concurrency_ceiling"]


def _engine_limit(llm: str, cfg: ModelConfig | None, model_dir: Path | None) -> str:
    """What limits the answers the LLM stage ``llm`` streams at once, in words."""
    if cfg is None:
        return f"its LLM stage '{llm}' (not in this repository) takes at once"
    backend = cfg.backend
    if is_vllm(backend):
        seqs = None
        if model_dir is not None:
            try:
                data = json.loads((model_dir / "1" / "model.json").read_text())
                seqs = data.get("max_num_seqs") if isinstance(data, dict) else None
            except (OSError, ValueError):
                seqs = None
        said = f"max_num_seqs {seqs} in its model.json" if seqs else "vLLM's default max_num_seqs"
        return f"its vLLM stage '{llm}' batches at once: {said}"
    if backend == TENSORRTLLM:
        return f"its TensorRT-LLM stage '{llm}' batches at once: the engine's max batch size (its build)"
    count = sum(max(g.count, 1) for g in cfg.instance_group) or 1
    return f"its LLM stage '{llm}' streams at once ({backend or cfg.platform} backend, {count} instance(s))"


def concurrency_ceiling(
    name: str, cfg: ModelConfig, configs: Mapping[str, ModelConfig], root: Path | None = None
) -> str | None:
    """The sentence that says ``name``'s ceilings, or None when it is no LLM-decoder pipeline's
    front door (``configs``: the repository's models; ``root``: the repository, to read model.json)."""
    if not cfg.model_transaction_policy.decoupled:
        return None
    pipeline = composed_pipeline(config_to_dict(cfg))
    if pipeline is None:
        return None
    llm = pipeline.llm_model
    stage = configs.get(llm)
    if stage is None and root is not None:  # built earlier, or by another spec
        try:
            stage = read_config(root / llm / "config.pbtxt")
        except (OSError, TritonKitError):
            stage = None
    limit = _engine_limit(llm, stage, root / llm if root is not None else None)
    return (
        f"pipeline '{name}' streams at most {pipeline.front_instances} answer(s) at once to plain Triton "
        f"clients (its Python front door: {pipeline.front_instances} instance(s), one engine stream each on "
        "Triton 2.51); tritonkit's OpenAI front and client compose it (prompt model "
        f"'{pipeline.prompt_model}', then the stage's stream) and stream as many as {limit}"
    )


def check_pipeline_concurrency(models: Mapping[str, ModelDirectory], root: Path) -> None:
    """Say each LLM-decoder pipeline's ceilings, at its instance_group."""
    configs = {name: info.cf.config for name, info in models.items() if info.cf is not None}
    for info in models.values():
        cf = info.cf
        if cf is None:
            continue
        said = concurrency_ceiling(info.name, cf.config, configs, root)
        if said is not None:
            cf.info("pipeline-concurrency", said, at="instance_group")
