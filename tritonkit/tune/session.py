"""A tuning run from start to files: tune, show, write the outputs and (when asked) the winner
into the repository. What `tritonkit tune` does, as one library call per kind of model (a
config search, or an engine stage's arguments); the CLI parses options and prints the views
it is handed, as soon as they are known.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from tritonkit.client.auth import AuthProvider
from tritonkit.errors import TuneError
from tritonkit.perf.benchmark import Show
from tritonkit.perf.llm import LlmLoad
from tritonkit.perf.results import atomic_write
from tritonkit.perf.stream_metrics import is_stream_budget
from tritonkit.perf.view import Note, Table, View
from tritonkit.tune.engine import EngineTrial, EngineTuneResult, tune_engine
from tritonkit.tune.objective import Measurement
from tritonkit.tune.outputs import (
    PER_LOAD_COLUMNS,
    apply_winner,
    explain,
    per_load_rows,
    table_columns,
    table_rows,
    variant_snippet,
    write_outputs,
    write_variant,
)
from tritonkit.tune.runner import TuneResult, tune
from tritonkit.tune.settings import TuneSettings
from tritonkit.tune.stages import stage_lines
from tritonkit.tune.timing import TIME_COLUMNS, time_rows

__all__ = ["engine_view", "is_engine_model", "result_view", "tune_engine_to_files", "tune_to_files"]


def result_view(result: TuneResult) -> View:
    """Every measurement, the best config per load, why the winner won, a pipeline's stages."""
    return View(
        (
            Table.of(f"tritonkit tune {result.model}", table_columns(result), table_rows(result)),
            Table.of("best config per load", PER_LOAD_COLUMNS, per_load_rows(result)),
            Table.of("where the time went", TIME_COLUMNS, time_rows(result.time_breakdown())),
        )
    ) + View.lines([*explain(result), *stage_lines(result.stages)])


def _write_winner(
    result: TuneResult, repository: Path, *, variant: str | None, apply: bool, force: bool, show: Show
) -> None:
    if variant:
        lines = [f"wrote {path}" for path in write_variant(result, repository, variant, force=force)]
        lines += [
            f"serve it with: tritonkit serve {repository} --model-config-name {variant}",
            "spec snippet (add under the model's entry to rebuild it with `tritonkit build`):",
            variant_snippet(result, variant),
        ]
        show(View.lines(lines))
    if apply:
        show(
            View.lines(
                f"applied: {path} (the previous config is kept under configs/pre_tune_*.pbtxt)"
                for path in apply_winner(result, repository)
            )
        )


def tune_to_files(
    settings: TuneSettings,
    *,
    out_dir: Path,
    show: Show,
    variant: str | None = None,
    apply: bool = False,
    force: bool = False,
    auth: AuthProvider | None = None,
    headers: Mapping[str, str] | None = None,
    progress: Callable[[Measurement], None] | None = None,
    command: str = "",
) -> TuneResult:
    """Tune, show the result, write it under ``out_dir``; with a winner, write it as ``variant``
    and/or ``apply`` it in ``settings.repository`` (no winner: nothing goes to the repository)."""
    if (variant or apply) and settings.repository is None:
        raise TuneError("--write-variant/--apply need the repository", hint="pass --repository REPO")
    out_dir.mkdir(parents=True, exist_ok=True)
    result = tune(settings, auth=auth, headers=headers, progress=progress, command=command)
    show(result_view(result))
    written, plot_failure = write_outputs(result, out_dir)
    if plot_failure:
        show(View((Note(f"no Pareto plot: {plot_failure}", warn=True),)))
    show(View.lines([f"wrote {out_dir}/" + ", ".join(p.name for p in written)]))
    if result.winner is None:
        if variant or apply:
            show(View((Note("no feasible config: nothing written to the repository", warn=True),)))
        return result
    if settings.repository is not None:
        _write_winner(result, Path(settings.repository), variant=variant, apply=apply, force=force, show=show)
    return result


def is_engine_model(model_dir: Path) -> bool:
    """A vLLM stage: a version directory holding model.json (the engine's arguments)."""
    return model_dir.is_dir() and any(
        p.is_dir() and p.name.isdigit() and (p / "model.json").is_file() for p in model_dir.iterdir()
    )


def engine_view(result: EngineTuneResult) -> View:
    """The best engine arguments per level against the defaults, and what the engine refused."""
    blocks: list[Table | Note] = []
    for level in result.levels:
        base, best, gain = result.baseline(level), result.best(level), result.gain(level)
        if best is None:
            blocks.append(Note(f"level {level:g}: no candidate met {result.budget}", warn=True))
            continue
        what = " ".join(f"{k}={json.dumps(v)}" for k, v in best.settings.items()) or "the defaults"
        vs = f" ({gain:.2f}x the defaults' {base.output_tokens_per_s:.1f})" if gain and base else ""
        figure = f"{best.output_tokens_per_s:.1f} output tokens/s{vs}"
        blocks.append(Note(f"level {level:g}: best {what}: {figure}"))
    blocks += [Note(f"refused by the engine: {key}: {why}", warn=True) for key, why in result.refused.items()]
    return View(tuple(blocks))


def tune_engine_to_files(
    *,
    url: str | None,
    model: str,
    repository: Path,
    levels: Sequence[float],
    mode: str,
    llm: LlmLoad,
    budget: str | None,
    protocol: str,
    max_candidates: int,
    tokenizer: Path | None,
    out_dir: Path,
    show: Show,
    progress: Callable[[EngineTrial], None] | None = None,
) -> EngineTuneResult:
    """Engine arguments and instance count of a vLLM stage, judged on output tokens/s; on the
    server at ``url``, else on a local one started on ``repository``."""
    if not budget or not is_stream_budget(budget):
        raise TuneError(
            "tuning an engine stage needs a streaming budget",
            hint="e.g. --latency-budget ttft_p99=500ms,itl_p99=50ms (ttft_, itl_, e2e_ limits)",
        )

    def run(at: str) -> EngineTuneResult:
        result = tune_engine(
            url=at,
            model=model,
            model_dir=repository / model,
            levels=levels,
            llm=llm,
            budget=budget,
            mode=mode,
            protocol=protocol,
            max_candidates=max_candidates,
            tokenizer=str(tokenizer) if tokenizer else str(repository),
            progress=progress,
        )
        out_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(out_dir / "engine_tune.json", json.dumps(result.to_dict(), indent=2) + "\n")
        show(engine_view(result) + View.lines([f"wrote {out_dir}/engine_tune.json"]))
        return result

    if url is not None:
        return run(url)
    from tritonkit.server import LocalTritonServer

    with LocalTritonServer(
        repository, extra_args=["--model-control-mode=explicit", f"--load-model={model}"]
    ) as server:
        return run(server.grpc_url if protocol == "grpc" else server.http_url)
