"""`tritonkit tune`: find a model's best config by measurement, without server restarts."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated

import typer

from tritonkit.cli import render
from tritonkit.cli._auth_options import with_auth_options
from tritonkit.cli._options import InputData as _InputData
from tritonkit.cli._options import MaxTrials as _MaxTrials
from tritonkit.cli._options import Price as _Price
from tritonkit.cli._options import Protocol as _Protocol
from tritonkit.cli._options import Quiet as _Quiet
from tritonkit.cli._options import Shape as _Shape
from tritonkit.cli._options import Sku as _Sku
from tritonkit.cli._options import Spot as _Spot
from tritonkit.cli._options import StabilityPercentage as _StabilityPercentage
from tritonkit.cli._options import Warmup as _Warmup
from tritonkit.cli._options import Workers as _Workers
from tritonkit.cli._view import show
from tritonkit.client.auth import AuthProvider
from tritonkit.errors import TuneError
from tritonkit.perf.inputs import parse_shape_options
from tritonkit.perf.levels import parse_duration, parse_levels
from tritonkit.perf.llm import LlmLoad, parse_length
from tritonkit.tune import TuneSettings
from tritonkit.tune.engine import EngineTrial
from tritonkit.tune.objective import Measurement
from tritonkit.tune.session import is_engine_model, tune_engine_to_files, tune_to_files

HELP = (
    "Find MODEL's best config by measurement. `tritonkit tune REPO MODEL` starts a local server "
    "(explicit model control); `tritonkit tune URL MODEL --repository REPO` tunes a running one. "
    "Candidates are loaded through Triton's model-repository API (no restarts), validated first, "
    "and the original config is restored at the end. Writes JSON, CSV, a Pareto plot, a report "
    "and a resumable checkpoint under --out."
)


def _ms(text: str, option: str) -> int:
    return int(round(parse_duration(text, option) * 1000))


class _Live:
    """One line per measurement on stderr (the run's live progress)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet

    def __call__(self, m: Measurement) -> None:
        if self.quiet:
            return
        p99 = m.outcome.latency_us.get("p99")
        state = "ok" if m.feasible else m.violation
        render.err_console.print(
            f"[{m.index:3d}] {m.phase:7s} load={m.load:<4g} {m.outcome.throughput:8.1f} infer/s  "
            f"p99 {(p99 or 0) / 1000:7.2f} ms  {state}{'  (resumed)' if m.resumed else ''}  "
            + " ".join(f"{k}={v}" for k, v in m.settings.items())
            + ("  CLIENT CPU-BOUND" if m.outcome.client_bound else ""),
            markup=False,
            highlight=False,
        )


_Target = Annotated[str, typer.Argument(help="Model repository (local server) or endpoint URL.")]
_Model = Annotated[str, typer.Argument(help="Model (or ensemble) to tune.")]
_Repository = Annotated[
    Path | None,
    typer.Option("--repository", help="With a URL: the repository the server serves (validation, variants)."),
]
_ModelConfigName = Annotated[
    str | None,
    typer.Option("--model-config-name", help="Config variant the server uses ('auto': cpu without a GPU)."),
]
_Space = Annotated[
    Path | None, typer.Option("--space", help="YAML search space (adds/restricts dimensions).")
]
_Strategy = Annotated[
    str,
    typer.Option(
        "--strategy",
        help="default (surrogate search with optuna, extra 'tune'), hill-climb, or grid (ground truth).",
    ),
]
_Concurrency = Annotated[
    str | None,
    typer.Option(
        "--concurrency",
        help="Production load: concurrent requests, as perf writes levels: 32, 8,16,32, 8:64 (doubling) "
        "or 8:64:8 (step). "
        "Default: each candidate's sweep grows until throughput saturates or the budget breaks.",
    ),
]
_RequestRate = Annotated[
    str | None,
    typer.Option("--request-rate", help="Production load as requests/s (open loop), like --concurrency."),
]
_Trials = Annotated[
    int | None, typer.Option("--trials", help="Default strategy: most candidate configs to measure.")
]
_Patience = Annotated[
    int, typer.Option("--patience", help="Default strategy: stop after N candidates in a row without gain.")
]
_Seed = Annotated[int, typer.Option("--seed", help="Default strategy: the sampler's seed.")]
_Objective = Annotated[
    str,
    typer.Option(
        "--objective", help="throughput, latency or cost; streaming (decoupled) models: tokens_per_s or ttft."
    ),
]
_LatencyBudget = Annotated[
    str | None,
    typer.Option("--latency-budget", help="e.g. p99=20ms; streaming: ttft_p99=200ms,itl_p99=40ms."),
]
_MinThroughput = Annotated[float | None, typer.Option("--min-throughput", help="Minimum infer/s.")]
_Budget = Annotated[str | None, typer.Option("--budget", help="Wall-clock budget, e.g. 10m or 90s.")]
_MaxMeasurements = Annotated[
    int | None, typer.Option("--max-measurements", help="Stop after N measurements.")
]
_Finalists = Annotated[
    int, typer.Option("--finalists", help="Configs re-measured with the full stability rule.")
]
_ScreenWindow = Annotated[str, typer.Option("--screen-window", help="Screening window length.")]
_ConfirmWindow = Annotated[str, typer.Option("--confirm-window", help="Confirmation window length.")]
_LoadWarmup = Annotated[
    str,
    typer.Option(
        "--load-warmup", help="Most warm-up after a candidate is loaded (ends once the model settles)."
    ),
]
_ScreenMaxWindows = Annotated[
    int, typer.Option("--screen-max-windows", help="Screening: most windows (3 or more) until stable.")
]
_CheckRounds = Annotated[
    int,
    typer.Option(
        "--check-rounds",
        help="Final check: winner vs original config, most rounds (stops once decided; 0: none).",
    ),
]
_Out = Annotated[Path | None, typer.Option("--out", help="Output directory (default: tune-MODEL).")]
_Resume = Annotated[bool, typer.Option("--resume", help="Resume from --out's checkpoint.jsonl.")]
_WriteVariantName = Annotated[
    str | None, typer.Option("--write-variant", help="Write the winner as MODEL/configs/NAME.pbtxt.")
]
_Apply = Annotated[
    bool, typer.Option("--apply", help="Make the winner config.pbtxt (old kept as a variant).")
]
_Force = Annotated[bool, typer.Option("--force", help="Replace an existing --write-variant file.")]
_PromptTokens = Annotated[
    str,
    typer.Option("--prompt-tokens", help="Engine stages: prompt tokens MEAN[,STDDEV] of the load (as perf)."),
]
_OutputTokens = Annotated[
    str,
    typer.Option(
        "--output-tokens", help="Engine stages: exact output tokens N[,STDDEV] per request (as perf)."
    ),
]
_Tokenizer = Annotated[
    Path | None,
    typer.Option(
        "--tokenizer", help="Engine stages: local tokenizer (default: the stage's packed hf_model/)."
    ),
]


@with_auth_options
def command(
    target: _Target,
    model: _Model,
    repository: _Repository = None,
    protocol: _Protocol = "http",
    model_config_name: _ModelConfigName = "auto",
    space: _Space = None,
    strategy: _Strategy = "default",
    concurrency: _Concurrency = None,
    request_rate: _RequestRate = None,
    workers: _Workers = 0,
    trials: _Trials = None,
    patience: _Patience = 8,
    seed: _Seed = 0,
    objective: _Objective = "throughput",
    latency_budget: _LatencyBudget = None,
    min_throughput: _MinThroughput = None,
    sku: _Sku = None,
    price: _Price = None,
    spot: _Spot = False,
    budget: _Budget = None,
    max_measurements: _MaxMeasurements = None,
    finalists: _Finalists = 2,
    screen_window: _ScreenWindow = "500ms",
    confirm_window: _ConfirmWindow = "1s",
    stability_percentage: _StabilityPercentage = 10.0,
    max_trials: _MaxTrials = 10,
    warmup: _Warmup = "500ms",
    load_warmup: _LoadWarmup = "2s",
    screen_max_windows: _ScreenMaxWindows = 6,
    check_rounds: _CheckRounds = 3,
    input_data: _InputData = "random",
    shape: _Shape = [],  # noqa: B006 - Typer reads the default; it is never mutated
    out: _Out = None,
    resume: _Resume = False,
    write_variant_name: _WriteVariantName = None,
    apply: _Apply = False,
    force: _Force = False,
    quiet: _Quiet = False,
    prompt_tokens: _PromptTokens = "64",
    output_tokens: _OutputTokens = "32",
    tokenizer: _Tokenizer = None,
    auth: AuthProvider | None = None,  # with_auth_options: from the credential options
    cacert: Path | None = None,
) -> None:
    is_repo, repo = _where(target, repository)
    if (write_variant_name or apply) and repo is None:
        raise TuneError("--write-variant/--apply need the repository", hint="pass --repository REPO")
    out_dir = out or Path(f"tune-{model}")
    if repo is not None and is_engine_model(repo / model):
        levels, mode, llm = _engine_load(concurrency, request_rate, prompt_tokens, output_tokens)
        tune_engine_to_files(
            levels=levels,
            mode=mode,
            llm=llm,
            url=None if is_repo else target,
            model=model,
            repository=repo,
            budget=latency_budget,
            protocol=protocol,
            max_candidates=max_measurements or 12,
            tokenizer=tokenizer,
            out_dir=out_dir,
            show=show,
            progress=None if quiet else _engine_trial,
        )
        return
    settings = TuneSettings(
        model=model,
        repository=repo,
        url=None if is_repo else target,
        protocol=protocol,
        model_config_name=model_config_name,
        space_file=space,
        strategy=strategy,
        concurrency=None if concurrency is None else tuple(int(c) for c in parse_levels(concurrency)),
        request_rate=None if request_rate is None else parse_levels(request_rate, mode="request_rate"),
        workers=workers,
        trials=trials,
        patience=patience,
        seed=seed,
        objective=objective,
        latency_budget=latency_budget,
        min_throughput=min_throughput,
        sku=sku,
        price_per_hour=price,
        spot=spot,
        budget_s=parse_duration(budget, "--budget") if budget else None,
        max_measurements=max_measurements,
        finalists=finalists,
        screen_window_ms=_ms(screen_window, "--screen-window"),
        confirm_window_ms=_ms(confirm_window, "--confirm-window"),
        stability_percentage=stability_percentage,
        max_trials=max_trials,
        warmup_s=parse_duration(warmup, "--warmup"),
        load_warmup_s=parse_duration(load_warmup, "--load-warmup"),
        screen_max_windows=screen_max_windows,
        check_rounds=check_rounds,
        input_data=input_data,
        shapes=parse_shape_options(shape),
        cacert=str(cacert) if cacert else None,
        checkpoint=out_dir / "checkpoint.jsonl",
        resume=resume,
    )
    settings.validate()  # bad flags are refused before anything is written
    if not quiet:
        render.err_console.print(f"tuning {model} ({strategy} strategy); Ctrl-C restores the original config")
    result = tune_to_files(
        settings,
        out_dir=out_dir,
        show=show,
        variant=write_variant_name,
        apply=apply,
        force=force,
        auth=auth,
        progress=_Live(quiet),
        command="tritonkit " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
    )
    if result.winner is None:
        raise typer.Exit(2)


def _where(target: str, repository: Path | None) -> tuple[bool, Path | None]:
    """Whether TARGET is a repository (a local server) and the repository to use, if any."""
    is_repo = Path(target).is_dir()
    if not is_repo and "://" not in target and ":" not in target:
        raise TuneError(
            f"'{target}' is neither a model repository directory nor an endpoint URL",
            hint="tritonkit tune REPO MODEL, or tritonkit tune http://HOST:8000 MODEL --repository REPO",
        )
    return is_repo, Path(target) if is_repo else repository


def _engine_load(
    concurrency: str | None, request_rate: str | None, prompt_tokens: str, output_tokens: str
) -> tuple[tuple[float, ...], str, LlmLoad]:
    """An engine stage's load: its levels (default: concurrency 4), mode and prompt shapes."""
    mode = "request_rate" if request_rate else "concurrency"
    llm = LlmLoad(
        prompt_tokens=parse_length(prompt_tokens, "--prompt-tokens"),
        output_tokens=parse_length(output_tokens, "--output-tokens"),
    )
    return parse_levels(request_rate or concurrency or "4", mode=mode) or (4.0,), mode, llm


def _engine_trial(t: EngineTrial) -> None:
    """One line per engine candidate on stderr (the engine tune's live progress)."""
    what = " ".join(f"{k}={v}" for k, v in t.settings.items()) or "defaults"
    figure = t.error or (
        f"{t.output_tokens_per_s:.1f} tok/s, TTFT p99 {(t.ttft_p99_us or 0) / 1000:.1f} ms"
        f"{'' if t.meets_budget else ' (over budget)'}"
    )
    render.err_console.print(f"  {what} @ {t.level:g}: {figure}")
