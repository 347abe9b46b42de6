"""`tritonkit tune`: find a model's best config by measurement, without server restarts."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from tritonkit.cli import render
from tritonkit.cli._auth_options import with_auth_options
from tritonkit.cli._options import InputData as _InputData
from tritonkit.cli._options import MaxTrials as _MaxTrials
from tritonkit.cli._options import OptionRow, option, with_options
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

#: tune's options, in the order --help lists them. A row named like a TuneSettings field sets it
#: as given, and so do the three named like tune_to_files' parameters (what becomes of the
#: winner); :func:`command` reads the others (parsed first, or about the files it writes).
_OPTIONS: tuple[OptionRow, ...] = (
    option(
        "--repository",
        Path | None,
        None,
        help="With a URL: the repository the server serves (validation, variants).",
    ),
    ("protocol", _Protocol, "http"),
    option(
        "--model-config-name",
        str | None,
        "auto",
        help="Config variant the server uses ('auto': cpu without a GPU).",
    ),
    option(
        "--space", Path | None, None, help="YAML search space (adds/restricts dimensions).", name="space_file"
    ),
    option(
        "--strategy",
        str,
        "default",
        help="default (surrogate search with optuna, extra 'tune'), hill-climb, or grid (ground truth).",
    ),
    option(
        "--concurrency",
        str | None,
        None,
        help="Production load: concurrent requests, as perf writes levels: 32, 8,16,32, 8:64 (doubling) "
        "or 8:64:8 (step). "
        "Default: each candidate's sweep grows until throughput saturates or the budget breaks.",
    ),
    option(
        "--request-rate",
        str | None,
        None,
        help="Production load as requests/s (open loop), like --concurrency.",
    ),
    ("workers", _Workers, 0),
    option("--trials", int | None, None, help="Default strategy: most candidate configs to measure."),
    option("--patience", int, 8, help="Default strategy: stop after N candidates in a row without gain."),
    option("--seed", int, 0, help="Default strategy: the sampler's seed."),
    option(
        "--objective",
        str,
        "throughput",
        help="throughput, latency or cost; streaming (decoupled) models: tokens_per_s or ttft.",
    ),
    option(
        "--latency-budget",
        str | None,
        None,
        help="e.g. p99=20ms; streaming: ttft_p99=200ms,itl_p99=40ms.",
    ),
    option("--min-throughput", float | None, None, help="Minimum infer/s."),
    ("sku", _Sku, None),
    ("price_per_hour", _Price, None),
    ("spot", _Spot, False),
    option("--budget", str | None, None, help="Wall-clock budget, e.g. 10m or 90s."),
    option("--max-measurements", int | None, None, help="Stop after N measurements."),
    option("--finalists", int, 2, help="Configs re-measured with the full stability rule."),
    option("--screen-window", str, "500ms", help="Screening window length."),
    option("--confirm-window", str, "1s", help="Confirmation window length."),
    ("stability_percentage", _StabilityPercentage, 10.0),
    ("max_trials", _MaxTrials, 10),
    ("warmup", _Warmup, "500ms"),
    option(
        "--load-warmup",
        str,
        "2s",
        help="Most warm-up after a candidate is loaded (ends once the model settles).",
    ),
    option("--screen-max-windows", int, 6, help="Screening: most windows (3 or more) until stable."),
    option(
        "--check-rounds",
        int,
        3,
        help="Final check: winner vs original config, most rounds (stops once decided; 0: none).",
    ),
    ("input_data", _InputData, "random"),
    ("shape", _Shape, []),  # Typer reads the default; it is never mutated
    option("--out", Path | None, None, help="Output directory (default: tune-MODEL)."),
    option("--resume", bool, False, help="Resume from --out's checkpoint.jsonl."),
    option(
        "--write-variant",
        str | None,
        None,
        help="Write the winner as MODEL/configs/NAME.pbtxt.",
        name="variant",
    ),
    option("--apply", bool, False, help="Make the winner config.pbtxt (old kept as a variant)."),
    option("--force", bool, False, help="Replace an existing --write-variant file."),
    ("quiet", _Quiet, False),
    option(
        "--prompt-tokens",
        str,
        "64",
        help="Engine stages: prompt tokens MEAN[,STDDEV] of the load (as perf).",
    ),
    option(
        "--output-tokens",
        str,
        "32",
        help="Engine stages: exact output tokens N[,STDDEV] per request (as perf).",
    ),
    option(
        "--tokenizer",
        Path | None,
        None,
        help="Engine stages: local tokenizer (default: the stage's packed hf_model/).",
    ),
)


@with_auth_options
@with_options(_OPTIONS)
def command(
    target: _Target,
    model: _Model,
    auth: AuthProvider | None = None,  # with_auth_options: from the credential options
    cacert: Path | None = None,
    **given: Any,
) -> None:
    is_repo, repo = _where(target, given.pop("repository"))
    winner = {name: given.pop(name) for name in ("variant", "apply", "force")}  # tune_to_files takes them
    if (winner["variant"] or winner["apply"]) and repo is None:
        raise TuneError("--write-variant/--apply need the repository", hint="pass --repository REPO")
    out_dir = given.pop("out") or Path(f"tune-{model}")
    quiet = given.pop("quiet")
    prompt_tokens, output_tokens = given.pop("prompt_tokens"), given.pop("output_tokens")
    tokenizer = given.pop("tokenizer")
    concurrency, request_rate = given.pop("concurrency"), given.pop("request_rate")
    if repo is not None and is_engine_model(repo / model):
        levels, mode, llm = _engine_load(concurrency, request_rate, prompt_tokens, output_tokens)
        tune_engine_to_files(
            levels=levels,
            mode=mode,
            llm=llm,
            url=None if is_repo else target,
            model=model,
            repository=repo,
            budget=given["latency_budget"],
            protocol=given["protocol"],
            max_candidates=given["max_measurements"] or 12,
            tokenizer=tokenizer,
            out_dir=out_dir,
            show=show,
            progress=None if quiet else _engine_trial,
        )
        return
    budget = given.pop("budget")
    settings = TuneSettings(
        model=model,
        repository=repo,
        url=None if is_repo else target,
        concurrency=None if concurrency is None else tuple(int(c) for c in parse_levels(concurrency)),
        request_rate=None if request_rate is None else parse_levels(request_rate, mode="request_rate"),
        budget_s=parse_duration(budget, "--budget") if budget else None,
        screen_window_ms=_ms(given.pop("screen_window"), "--screen-window"),
        confirm_window_ms=_ms(given.pop("confirm_window"), "--confirm-window"),
        warmup_s=parse_duration(given.pop("warmup"), "--warmup"),
        load_warmup_s=parse_duration(given.pop("load_warmup"), "--load-warmup"),
        shapes=parse_shape_options(given.pop("shape")),
        cacert=str(cacert) if cacert else None,
        checkpoint=out_dir / "checkpoint.jsonl",
        **given,  # the rows named like the fields they set
    )
    settings.validate()  # bad flags are refused before anything is written
    if not quiet:
        render.err_console.print(
            f"tuning {model} ({settings.strategy} strategy); Ctrl-C restores the original config"
        )
    result = tune_to_files(
        settings,
        out_dir=out_dir,
        show=show,
        auth=auth,
        progress=_Live(quiet),
        command="tritonkit " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
        **winner,
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
