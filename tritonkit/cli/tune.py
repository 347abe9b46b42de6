"""`tritonkit tune`: find a model's best config by measurement, without server restarts."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import typer

from tritonkit.cli import render
from tritonkit.cli._auth_options import with_auth_options
from tritonkit.client.auth import AuthProvider
from tritonkit.errors import TuneError
from tritonkit.perf.inputs import parse_shape_options
from tritonkit.perf.levels import parse_duration, parse_levels
from tritonkit.tune import TuneSettings, tune
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
from tritonkit.tune.stages import stage_lines
from tritonkit.tune.strategy import Measurement

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


@with_auth_options
def command(
    target: str = typer.Argument(..., help="Model repository (local server) or endpoint URL."),
    model: str = typer.Argument(..., help="Model (or ensemble) to tune."),
    repository: Path | None = typer.Option(
        None, "--repository", help="With a URL: the repository the server serves (validation, variants)."
    ),
    protocol: str = typer.Option("http", "--protocol", "-p", help="http or grpc."),
    model_config_name: str | None = typer.Option(
        "auto", "--model-config-name", help="Config variant the server uses ('auto': cpu without a GPU)."
    ),
    space: Path | None = typer.Option(None, "--space", help="YAML search space (adds/restricts dimensions)."),
    strategy: str = typer.Option(
        "default",
        "--strategy",
        help="default (surrogate search with optuna, extra 'tune'), hill-climb, or grid (ground truth).",
    ),
    concurrency: str | None = typer.Option(
        None,
        "--concurrency",
        help="Production load: concurrent requests, as perf writes levels: 32, 8,16,32, 8:64 (doubling) "
        "or 8:64:8 (step). "
        "Default: each candidate's sweep grows until throughput saturates or the budget breaks.",
    ),
    request_rate: str | None = typer.Option(
        None, "--request-rate", help="Production load as requests/s (open loop), like --concurrency."
    ),
    workers: int = typer.Option(
        0, "--workers", help="Load-generator processes (when one process saturates its CPU)."
    ),
    trials: int | None = typer.Option(
        None, "--trials", help="Default strategy: most candidate configs to measure."
    ),
    patience: int = typer.Option(
        8, "--patience", help="Default strategy: stop after N candidates in a row without gain."
    ),
    seed: int = typer.Option(0, "--seed", help="Default strategy: the sampler's seed."),
    objective: str = typer.Option(
        "throughput",
        "--objective",
        help="throughput, latency or cost; streaming (decoupled) models: tokens_per_s or ttft.",
    ),
    latency_budget: str | None = typer.Option(
        None, "--latency-budget", help="e.g. p99=20ms; streaming: ttft_p99=200ms,itl_p99=40ms."
    ),
    min_throughput: float | None = typer.Option(None, "--min-throughput", help="Minimum infer/s."),
    sku: str | None = typer.Option(None, "--sku", help="Azure VM size for --objective cost."),
    price: float | None = typer.Option(None, "--price", help="Hourly price in USD (instead of --sku)."),
    spot: bool = typer.Option(False, "--spot", help="Use the spot price of --sku."),
    budget: str | None = typer.Option(None, "--budget", help="Wall-clock budget, e.g. 10m or 90s."),
    max_measurements: int | None = typer.Option(
        None, "--max-measurements", help="Stop after N measurements."
    ),
    finalists: int = typer.Option(2, "--finalists", help="Configs re-measured with the full stability rule."),
    screen_window: str = typer.Option("500ms", "--screen-window", help="Screening window length."),
    confirm_window: str = typer.Option("1s", "--confirm-window", help="Confirmation window length."),
    stability_percentage: float = typer.Option(10.0, "--stability-percentage", help="perf's stability rule."),
    max_trials: int = typer.Option(10, "--max-trials", help="Confirmation: most windows per measurement."),
    warmup: str = typer.Option("500ms", "--warmup", help="Warm-up before each measurement."),
    input_data: str = typer.Option("random", "--input-data", help="random, zero, or a path (as perf)."),
    shape: list[str] = typer.Option([], "--shape", help="NAME:d1,d2 for variable dims (repeat per input)."),
    out: Path | None = typer.Option(None, "--out", help="Output directory (default: tune-MODEL)."),
    resume: bool = typer.Option(False, "--resume", help="Resume from --out's checkpoint.jsonl."),
    write_variant_name: str | None = typer.Option(
        None, "--write-variant", help="Write the winner as MODEL/configs/NAME.pbtxt."
    ),
    apply: bool = typer.Option(
        False, "--apply", help="Make the winner config.pbtxt (old kept as a variant)."
    ),
    force: bool = typer.Option(False, "--force", help="Replace an existing --write-variant file."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No live progress."),
    prompt_tokens: str = typer.Option(
        "64", "--prompt-tokens", help="Engine stages: prompt tokens MEAN[,STDDEV] of the load (as perf)."
    ),
    output_tokens: str = typer.Option(
        "32", "--output-tokens", help="Engine stages: exact output tokens N[,STDDEV] per request (as perf)."
    ),
    tokenizer: Path | None = typer.Option(
        None, "--tokenizer", help="Engine stages: local tokenizer (default: the stage's packed hf_model/)."
    ),
    auth: AuthProvider | None = None,  # with_auth_options: from the credential options
    cacert: Path | None = None,
) -> None:
    is_repo = Path(target).is_dir()
    if not is_repo and "://" not in target and ":" not in target:
        raise TuneError(
            f"'{target}' is neither a model repository directory nor an endpoint URL",
            hint="tritonkit tune REPO MODEL, or tritonkit tune http://HOST:8000 MODEL --repository REPO",
        )
    repo = Path(target) if is_repo else repository
    if (write_variant_name or apply) and repo is None:
        raise TuneError("--write-variant/--apply need the repository", hint="pass --repository REPO")
    out_dir = out or Path(f"tune-{model}")
    if repo is not None and _is_engine_stage(repo / model):
        _tune_engine(
            target=target,
            model=model,
            repo=repo,
            is_repo=is_repo,
            protocol=protocol,
            concurrency=concurrency,
            request_rate=request_rate,
            latency_budget=latency_budget,
            prompt_tokens=prompt_tokens,
            output_tokens=output_tokens,
            tokenizer=tokenizer,
            max_candidates=max_measurements or 12,
            out_dir=out_dir,
            quiet=quiet,
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
        input_data=input_data,
        shapes=parse_shape_options(shape),
        cacert=str(cacert) if cacert else None,
        checkpoint=out_dir / "checkpoint.jsonl",
        resume=resume,
    )
    settings.validate()  # bad flags are refused before anything is written
    out_dir.mkdir(parents=True, exist_ok=True)
    live = _Live(quiet)
    if not quiet:
        render.err_console.print(f"tuning {model} ({strategy} strategy); Ctrl-C restores the original config")
    command_line = "tritonkit " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    result = tune(settings, auth=auth, progress=live, command=command_line)
    render.table(f"tritonkit tune {model}", table_columns(result), table_rows(result))
    render.table("best config per load", PER_LOAD_COLUMNS, per_load_rows(result))
    for line in explain(result):
        render.info(line)
    for line in stage_lines(result.stages):
        render.info(line)
    written, plot_failure = write_outputs(result, out_dir)
    if plot_failure:
        render.warn(f"no Pareto plot: {plot_failure}")
    render.info(f"wrote {out_dir}/" + ", ".join(p.name for p in written))
    if result.winner is None:
        if write_variant_name or apply:
            render.warn("no feasible config: nothing written to the repository")
        raise typer.Exit(2)
    if write_variant_name and repo is not None:
        for path in write_variant(result, repo, write_variant_name, force=force):
            render.info(f"wrote {path}")
        render.info(f"serve it with: tritonkit serve {repo} --model-config-name {write_variant_name}")
        render.info("spec snippet (add under the model's entry to rebuild it with `tritonkit build`):")
        render.info(variant_snippet(result, write_variant_name))
    if apply and repo is not None:
        for path in apply_winner(result, repo):
            render.info(f"applied: {path} (the previous config is kept under configs/pre_tune_*.pbtxt)")


def _is_engine_stage(model_dir: Path) -> bool:
    """A vLLM stage: a version directory holding model.json (the engine's arguments)."""
    return model_dir.is_dir() and any(
        p.is_dir() and p.name.isdigit() and (p / "model.json").is_file() for p in model_dir.iterdir()
    )


def _tune_engine(
    *,
    target: str,
    model: str,
    repo: Path,
    is_repo: bool,
    protocol: str,
    concurrency: str | None,
    request_rate: str | None,
    latency_budget: str | None,
    prompt_tokens: str,
    output_tokens: str,
    tokenizer: Path | None,
    max_candidates: int,
    out_dir: Path,
    quiet: bool,
) -> None:
    """Engine arguments and instance count of a vLLM stage, judged on output tokens/s."""
    import json

    from tritonkit.perf.llm import LlmLoad, parse_length
    from tritonkit.perf.results import atomic_write
    from tritonkit.perf.stream_metrics import is_stream_budget
    from tritonkit.tune.engine import EngineTrial, tune_engine

    if not latency_budget or not is_stream_budget(latency_budget):
        raise TuneError(
            "tuning an engine stage needs a streaming budget",
            hint="e.g. --latency-budget ttft_p99=500ms,itl_p99=50ms (ttft_, itl_, e2e_ limits)",
        )
    mode = "request_rate" if request_rate else "concurrency"
    levels = parse_levels(request_rate or concurrency or "4", mode=mode) or (4.0,)
    llm = LlmLoad(
        prompt_tokens=parse_length(prompt_tokens, "--prompt-tokens"),
        output_tokens=parse_length(output_tokens, "--output-tokens"),
    )

    def show(t: EngineTrial) -> None:
        if not quiet:
            what = " ".join(f"{k}={v}" for k, v in t.settings.items()) or "defaults"
            figure = t.error or (
                f"{t.output_tokens_per_s:.1f} tok/s, TTFT p99 {(t.ttft_p99_us or 0) / 1000:.1f} ms"
                f"{'' if t.meets_budget else ' (over budget)'}"
            )
            render.err_console.print(f"  {what} @ {t.level:g}: {figure}")

    def run(url: str) -> None:
        result = tune_engine(
            url=url,
            model=model,
            model_dir=repo / model,
            levels=levels,
            llm=llm,
            budget=latency_budget or "",
            mode=mode,
            protocol=protocol,
            max_candidates=max_candidates,
            tokenizer=str(tokenizer) if tokenizer else str(repo),
            progress=show,
        )
        out_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(out_dir / "engine_tune.json", json.dumps(result.to_dict(), indent=2) + "\n")
        for level in result.levels:
            base, best, gain = result.baseline(level), result.best(level), result.gain(level)
            if best is None:
                render.warn(f"level {level:g}: no candidate met {result.budget}")
                continue
            what = " ".join(f"{k}={json.dumps(v)}" for k, v in best.settings.items()) or "the defaults"
            vs = f" ({gain:.2f}x the defaults' {base.output_tokens_per_s:.1f})" if gain and base else ""
            render.info(f"level {level:g}: best {what}: {best.output_tokens_per_s:.1f} output tokens/s{vs}")
        for key, why in result.refused.items():
            render.warn(f"refused by the engine: {key}: {why}")
        render.info(f"wrote {out_dir}/engine_tune.json")

    if not is_repo:
        run(target)
        return
    from tritonkit.server import LocalTritonServer

    with LocalTritonServer(
        repo, extra_args=["--model-control-mode=explicit", f"--load-model={model}"]
    ) as server:
        run(server.grpc_url if protocol == "grpc" else server.http_url)
