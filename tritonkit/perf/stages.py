"""Per-stage statistics of a pipeline: where an ensemble's or a BLS front's time goes.

The composing models of a pipeline are found from the served configs (an ensemble's steps,
recursively) and from the BLS calls of a Python model's source when the repository is at hand
(:mod:`tritonkit.repository.bls`); ``--composing A,B`` names them by hand. Each window, one
statistics call for the whole server gives every composing model's cumulative counters; the
difference between the first and last snapshot of a step's reported windows is what each stage
did while the pipeline was measured. Figures are per-request averages over that window, as
Triton accounts them (``inference_stats`` of the statistics extension): ``queue_us`` plus the
three ``compute_*_us`` is a stage's time per request; ``request_us`` (Triton's "success"
duration) is that plus the scheduler's own overhead.

perf_analyzer reports the same counters for ensembles and, with ``--bls-composing-models``, for
BLS models (``benchmarks/stage_breakdown.py`` compares both on one server).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritonkit.perf.server_stats import StatsSnapshot, parse_statistics
from tritonkit.perf.stage_results import StageStats
from tritonkit.repository.bls import bls_calls_in, callees

__all__ = [
    "Stage",
    "StageStats",
    "bottleneck",
    "discover_stages",
    "named_stages",
    "stage_deltas",
    "stage_snapshot",
]

#: (model name, version) -> cumulative counters of that version
StageSnapshot = Mapping[tuple[str, str], StatsSnapshot]
ConfigFetcher = Callable[[str], Awaitable[Mapping[str, Any]]]


@dataclass(frozen=True, kw_only=True)
class Stage:
    """A composing model and how the pipeline reaches it."""

    model: str
    via: str  # "ensemble" (a step), "bls" (a BLS call), "named" (--composing), "composed" (perf composes it)
    parent: str  # the model whose step or call it is


def named_stages(model: str, names: Sequence[str]) -> list[Stage]:
    """``--composing A,B``: the stages as the user names them."""
    return [Stage(model=n, via="named", parent=model) for n in dict.fromkeys(names) if n != model]


async def discover_stages(
    model: str, config_of: ConfigFetcher, *, repository: Path | None = None
) -> list[Stage]:
    """Every model ``model`` reaches: ensemble steps from the served configs (nested ones
    followed) and, with ``repository``, the BLS calls of its Python models (their callees
    followed the same way). Order: as reached, breadth first; each model once."""
    found: dict[str, Stage] = {}
    todo = [model]
    while todo:
        current = todo.pop(0)
        config = await config_of(current)
        config = config.get("config", config)
        for stage in _children(current, config, repository):
            if stage.model != model and stage.model not in found:
                found[stage.model] = stage
                todo.append(stage.model)
    return list(found.values())


def _children(name: str, config: Mapping[str, Any], repository: Path | None) -> list[Stage]:
    if config.get("platform") == "ensemble":
        steps = (config.get("ensemble_scheduling") or {}).get("step") or []
        return [Stage(model=str(s["model_name"]), via="ensemble", parent=name) for s in steps]
    if config.get("backend") != "python" or repository is None:
        return []
    params = {
        str(k): str((v or {}).get("string_value", "")) for k, v in (config.get("parameters") or {}).items()
    }
    model_dir = repository / name
    calls = []
    if model_dir.is_dir():
        for version_dir in sorted(p for p in model_dir.iterdir() if p.is_dir() and p.name.isdigit()):
            calls.extend(bls_calls_in(version_dir, params))
    return [Stage(model=m, via="bls", parent=name) for m in callees(calls)]


def stage_snapshot(data: Mapping[str, Any], models: Sequence[str]) -> dict[tuple[str, str], StatsSnapshot]:
    """Per (model, version) counters of ``models`` from one whole-server statistics answer."""
    out: dict[tuple[str, str], StatsSnapshot] = {}
    wanted = set(models)
    for entry in data.get("model_stats", []):
        name = str(entry.get("name", ""))
        if name not in wanted:
            continue
        snap = parse_statistics({"model_stats": [entry]}, name)
        if snap is not None:
            out[(name, str(entry.get("version", "")))] = snap
    return out


def stage_deltas(
    stages: Sequence[Stage], before: StageSnapshot | None, after: StageSnapshot | None
) -> tuple[StageStats, ...]:
    """What each stage did between two snapshots (a stage with no request in it is left out)."""
    if before is None or after is None:
        return ()
    out: list[StageStats] = []
    for stage in stages:
        versions: list[str] = []
        counts = [0] * 5
        ns = [0] * 5
        inf = exe = 0
        for (name, version), now in sorted(after.items()):
            if name != stage.model:
                continue
            then = before.get((name, version), StatsSnapshot())
            moved = now.counts[0] - then.counts[0]
            if moved <= 0:
                continue
            versions.append(version)
            for i in range(5):
                counts[i] += now.counts[i] - then.counts[i]
                ns[i] += now.ns[i] - then.ns[i]
            inf += now.inference_count - then.inference_count
            exe += now.execution_count - then.execution_count
        success = counts[0]
        if success <= 0:
            continue

        def per_request(i: int, success: int = success, ns: list[int] = ns) -> float:
            return ns[i] / success / 1000.0

        out.append(
            StageStats(
                model=stage.model,
                version=",".join(versions),
                via=stage.via,
                parent=stage.parent,
                requests=success,
                executions=exe,
                inferences=inf,
                queue_us=per_request(1),
                compute_input_us=per_request(2),
                compute_infer_us=per_request(3),
                compute_output_us=per_request(4),
                request_us=per_request(0),
            )
        )
    return tuple(out)


def leaf_stages(stages: Sequence[StageStats]) -> list[StageStats]:
    """The stages that do work themselves: not an ensemble whose own steps are listed too.

    An ensemble's time is its steps' time; counting both would count it twice.
    """
    parents = {s.parent for s in stages if s.via == "ensemble"}
    return [s for s in stages if s.model not in parents]


def bottleneck(stages: Sequence[StageStats]) -> StageStats | None:
    """The working stage with the most time per request of the pipeline's requests: its own
    time times how many of its requests each pipeline request makes (a BLS front calling it
    twice counts twice); None without stages."""
    leaves = leaf_stages(stages)
    if not leaves:
        return None
    return max(leaves, key=lambda s: s.time_us * s.requests)
