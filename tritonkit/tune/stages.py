"""Tuning a pipeline stage by stage: which models to tune, which first, and which bound the result.

A pipeline is an ensemble (its steps, nested ensembles followed) or a BLS front (a Python model
whose ``InferenceRequest`` calls name other models, found statically in the repository's source,
:mod:`tritonkit.repository.bls`; their own steps and calls followed). Its *working stages* are
the models that do the work (not the ensembles, which only schedule): a BLS front itself is one.

Before the search, one per-stage perf run (:mod:`tritonkit.perf.stages`) on the shipped configs
names the bottleneck stage; the search space lists that stage's knobs first, so the hill climb
tries them first (the surrogate strategy samples every knob anyway, starting at the shipped
point). After the search the winner is put on the server and profiled again: the stage that now
takes the most time per pipeline request is the one that bound the result.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tritonkit._records import to_record
from tritonkit.config import ModelConfig
from tritonkit.perf.runner import PerfSettings, run_perf
from tritonkit.perf.stage_report import per_pipeline_request
from tritonkit.perf.stage_results import StageStats
from tritonkit.repository.bls import callees, model_bls_calls
from tritonkit.repository.scan import version_dirs
from tritonkit.tune.space import Dimension, Space, _model_dimensions, default_concurrency

__all__ = ["Pipeline", "StageProfile", "pipeline_of", "pipeline_space", "profile_stages", "stage_lines"]


@dataclass(frozen=True, kw_only=True)
class Pipeline:
    """The models a pipeline reaches: ``working`` are tuned, ``bls_callees`` must be loaded by
    name on a server in explicit model-control mode (Triton loads an ensemble's steps itself,
    never a BLS callee)."""

    target: str
    working: tuple[str, ...]
    reached: tuple[str, ...]  # every composing model (ensembles included), as reached
    bls_callees: tuple[str, ...]

    @property
    def is_pipeline(self) -> bool:
        return bool(self.reached)


def pipeline_of(
    target: str, config_of: Callable[[str], ModelConfig | None], repository: Path | None
) -> Pipeline:
    """Walk ``target``'s ensemble steps and BLS calls (``repository``: the BLS sources)."""
    reached: list[str] = []
    bls: list[str] = []
    todo = [target]
    seen = {target}
    while todo:
        name = todo.pop(0)
        cfg = config_of(name)
        if cfg is None:
            continue
        children: list[str] = []
        if cfg.platform == "ensemble":
            children = [str(s.model_name) for s in cfg.ensemble_scheduling.step]
        elif cfg.backend == "python" and repository is not None:
            calls = []
            for version in version_dirs(repository / name):
                calls.extend(model_bls_calls(cfg, repository / name / str(version)))
            children = callees(calls)
            bls.extend(c for c in children if c not in bls)
        for child in children:
            if child not in seen:
                seen.add(child)
                reached.append(child)
                todo.append(child)
    working = []
    for name in ([target] if bls and target not in reached else []) + reached:
        cfg = config_of(name)
        if cfg is not None and cfg.platform != "ensemble" and name not in working:
            working.append(name)
    return Pipeline(target=target, working=tuple(working), reached=tuple(reached), bls_callees=tuple(bls))


def pipeline_space(
    target: str,
    configs: Mapping[str, ModelConfig],
    working: Sequence[str],
    *,
    first: str | None = None,
    cores: int | None = None,
) -> Space:
    """Instance counts (and dynamic batching, for a batching model) of every working stage,
    the ``first`` stage's (the bottleneck's) knobs first."""
    cores = cores or os.cpu_count() or 1
    order: list[str] = ([first] if first is not None and first in working else []) + [
        m for m in working if m != first
    ]
    dims: list[Dimension] = []
    for name in order:
        cfg = configs.get(name)
        if cfg is None:
            continue
        dims.extend(d for d in _model_dimensions(cfg, cores=cores) if d.name == "instance_count")
        if int(cfg.max_batch_size) > 0:
            dims.append(Dimension(name, "dynamic_batching", (False, True)))
    return Space(target=target, dimensions=tuple(dims), loads=default_concurrency())


@dataclass(frozen=True, kw_only=True)
class StageProfile:
    """One per-stage measurement of the pipeline at one load."""

    level: float
    stages: tuple[StageStats, ...]
    shares_us: Mapping[str, float]  # stage -> queue + compute per request of the pipeline
    bottleneck: str | None
    latency_us: float | None  # the pipeline's average latency (client side)
    ttft_us: float | None = None  # streams: average time to the first response

    def to_dict(self) -> dict[str, Any]:
        shares = self.shares_us
        stages = [{**st.to_dict(), "per_pipeline_request_us": shares.get(st.model)} for st in self.stages]
        return to_record(self, skip=("stages", "shares_us"), after={"ttft_us": {"stages": stages}})


def profile_stages(
    perf: PerfSettings, stages: Sequence[str], level: float, *, window_ms: int
) -> StageProfile:
    """Measure the pipeline once at ``level`` with per-stage statistics of ``stages`` (working
    stages only: an ensemble's time is its steps' and would be counted twice)."""
    settings = replace(
        perf, levels=(level,), measurement_interval_ms=window_ms, server_stats=True, composing=tuple(stages)
    )
    (step,) = run_perf(settings).steps
    shares = {st.model: per_pipeline_request(step, st) for st in step.stages}
    slowest = max(shares, key=lambda m: shares[m]) if shares else None
    ttft = step.stream.ttft.avg_us if step.stream is not None and step.stream.ttft is not None else None
    return StageProfile(
        level=level,
        stages=step.stages,
        shares_us=shares,
        bottleneck=slowest,
        latency_us=step.latency.avg_us if step.latency is not None else None,
        ttft_us=ttft,
    )


def stage_lines(stages: Mapping[str, Any]) -> list[str]:
    """What ``tritonkit tune`` says about a pipeline's stages (``TuneResult.stages``)."""
    if not stages:
        return []
    lines = [f"pipeline stages tuned: {', '.join(stages.get('working', []))}"]
    before = stages.get("before") or {}
    if before.get("bottleneck"):
        share = _share(before, before["bottleneck"])
        lines.append(
            f"shipped configs: stage '{before['bottleneck']}' takes the most time ({share}) at load "
            f"{before['level']:g}; its knobs were searched first"
        )
    if stages.get("bound_by"):
        after = stages.get("after") or {}
        bound = stages["bound_by"]
        lines.append(
            f"the result is bound by stage '{bound}' ({_share(after, bound)} at load "
            f"{after.get('level', 0):g}): more of it (instances, batching) is where the next gain is"
        )
    elif stages.get("note"):
        lines.append(str(stages["note"]))
    return lines


def _share(profile: Mapping[str, Any], model: str) -> str:
    for st in profile.get("stages", []):
        if st.get("model") == model and st.get("per_pipeline_request_us") is not None:
            return f"{st['per_pipeline_request_us'] / 1000:.2f} ms per pipeline request"
    return "time unknown"
