"""`tritonkit perf`: benchmark a model on a Triton endpoint, with plots, reports and cost."""

from __future__ import annotations

import contextlib
import shlex
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from tritonkit.cli import perf_kube as kube
from tritonkit.cli import render
from tritonkit.cli._auth_options import with_auth_options
from tritonkit.cli._options import InputData as _InputData
from tritonkit.cli._options import MaxTrials as _MaxTrials
from tritonkit.cli._options import ModelVersion as _ModelVersion
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
from tritonkit.errors import PerfError
from tritonkit.perf import PerfSettings, Progress, parse_budget, parse_duration, parse_levels
from tritonkit.perf.benchmark import Outputs, Pricing, benchmark, compare_runs, present
from tritonkit.perf.inputs import parse_shape_options
from tritonkit.perf.llm import LlmLoad, parse_length
from tritonkit.perf.stream_metrics import is_stream_budget

HELP = (
    "Benchmark MODEL on a Triton endpoint (URL as for `tritonkit infer`): a concurrency or "
    "request-rate sweep measured in windows until perf_analyzer's stability rule holds, with "
    "client and server-side latency, errors, CSV (perf_analyzer's columns), JSON, plots, reports "
    "and cost per million inferences. `tritonkit perf --compare A.json B.json` compares two runs."
)


class _LiveProgress:
    """A one-line live status on stderr (the only place perf progress is shown)."""

    def __init__(self) -> None:
        self.status: Any = None

    def __enter__(self) -> _LiveProgress:
        self.status = render.err_console.status("connecting...")
        self.status.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.status.__exit__(None, None, None)

    def __call__(self, p: Progress) -> None:
        what = "concurrency" if p.mode == "concurrency" else "rate"
        if p.stream:
            self.status.update(
                f"step {p.step}/{p.steps} ({what} {p.level:g}): window {p.window}/{p.max_windows}  "
                f"{p.throughput:.1f} req/s  {p.output_tokens_per_s:.0f} tok/s  "
                f"TTFT p50 {p.ttft_p50_us / 1000:.2f} ms  ITL p50 {p.itl_p50_us / 1000:.2f} ms  "
                f"errors {p.errors}  [{p.stability}]"
            )
            return
        self.status.update(
            f"step {p.step}/{p.steps} ({what} {p.level:g}): window {p.window}/{p.max_windows}  "
            f"{p.throughput:.1f} infer/s  avg {p.avg_latency_us / 1000:.2f} ms  errors {p.errors}  "
            f"[{p.stability}]"
        )


def _llm_load(
    prompt_tokens: str | None, output_tokens: str | None, dataset: Path | None, seed: int
) -> LlmLoad | None:
    """The LLM load the options ask for, or None (kept apart: one grammar for load options)."""
    if prompt_tokens is None and output_tokens is None and dataset is None:
        return None
    return LlmLoad(
        prompt_tokens=parse_length(prompt_tokens, "--prompt-tokens") if prompt_tokens else None,
        output_tokens=parse_length(output_tokens, "--output-tokens") if output_tokens else None,
        dataset=str(dataset) if dataset else None,
        seed=seed,
    )


_Url = Annotated[str | None, typer.Argument(help="Endpoint URL or host:port (not with --compare).")]
_Model = Annotated[str | None, typer.Argument(help="Model name (not with --compare).")]
_Concurrency = Annotated[
    str | None,
    typer.Option(
        "--concurrency", help="Concurrency levels: 1,4,16 or 1:64 (doubling) or 1:64:8 (step). Default 1."
    ),
]
_RequestRate = Annotated[
    str | None,
    typer.Option("--request-rate", help="Request rates (requests/s) instead: 10,50 or 10:80 or 10:80:10."),
]
_Poisson = Annotated[
    bool, typer.Option("--poisson", help="Poisson arrivals for --request-rate (default: constant).")
]
_Duration = Annotated[
    float | None,
    typer.Option("--duration", help="Measure each step exactly S seconds (no early stop on stability)."),
]
_Requests = Annotated[
    int | None, typer.Option("--requests", help="Windows of N completed requests instead of time windows.")
]
_MeasurementInterval = Annotated[int, typer.Option("--measurement-interval", help="Window length in ms.")]
_Timeout = Annotated[float, typer.Option("--timeout", help="Request timeout in seconds.")]
_NoServerStats = Annotated[
    bool,
    typer.Option(
        "--no-server-stats", help="Do not read Triton's statistics API (e.g. blocked by a gateway)."
    ),
]
_CsvOut = Annotated[Path | None, typer.Option("--csv", help="Write perf_analyzer-style CSV here.")]
_JsonOut = Annotated[Path | None, typer.Option("--json", help="Write the full results as JSON here.")]
_Plot = Annotated[Path | None, typer.Option("--plot", help="Write a PNG plot here (extra 'plot').")]
_Report = Annotated[Path | None, typer.Option("--report", help="Write a .md or .html report (table + plot).")]
_LatencyBudget = Annotated[
    str | None,
    typer.Option(
        "--latency-budget",
        help="e.g. p99=50ms: the best step must meet it to be priced; streaming: "
        "ttft_p99=200ms,itl_p99=40ms gives each step's goodput.",
    ),
]
_CompareFiles = Annotated[
    tuple[Path, Path] | None, typer.Option("--compare", help="Compare two --json results: A.json B.json.")
]
_Stream = Annotated[
    bool | None,
    typer.Option(
        "--stream/--no-stream",
        help="Stream each request (gRPC streaming / HTTP generate_stream) and measure TTFT, ITL and "
        "tokens/s. Default: on for decoupled models.",
    ),
]
_Compose = Annotated[
    bool,
    typer.Option(
        "--compose/--no-compose",
        help="A streamed gRPC run on an LLM-decoder pipeline (vlm_llm, arr_coc_llm): ask its prompt "
        "model, then stream its LLM stage straight from Triton, as many at once as the engine, timed "
        "as one request (--no-compose: its Python front door answers, one answer per instance). "
        "See docs/pipelines.md.",
    ),
]
_Composing = Annotated[
    str | None,
    typer.Option(
        "--composing",
        metavar="A,B",
        help="A pipeline's composing models, named by hand, reported stage by stage (default: an "
        "ensemble's steps from the served configs, and BLS callees found with --repository).",
    ),
]
_Repository = Annotated[
    Path | None,
    typer.Option(
        "--repository",
        file_okay=False,
        help="The model repository the server serves: the BLS calls of a Python front found in its "
        "source become per-stage rows.",
    ),
]
_Tokenizer = Annotated[
    Path | None,
    typer.Option(
        "--tokenizer",
        help="Local tokenizer: a tokenizer.json, an HF model directory or a model repository whose "
        "vLLM stage packs hf_model/ (extra 'tokens'; never downloads). Counts streamed output tokens "
        "when the engine does not, and makes --prompt-tokens prompts. Default for streams: one "
        "response = one token.",
    ),
]
_PromptTokens = Annotated[
    str | None,
    typer.Option(
        "--prompt-tokens",
        help="LLM load: synthetic prompts of MEAN[,STDDEV] tokens of the model's own tokenizer.",
    ),
]
_OutputTokens = Annotated[
    str | None,
    typer.Option(
        "--output-tokens",
        help="LLM load: exactly N[,STDDEV] output tokens per request (vLLM: max_tokens = min_tokens, "
        "ignore_eos).",
    ),
]
_Dataset = Annotated[
    Path | None,
    typer.Option(
        "--dataset", help='LLM load: replay prompts from a JSONL file ({"prompt", "output_tokens", "image"}).'
    ),
]
_Seed = Annotated[int, typer.Option("--seed", help="LLM load: seed of the prompts and lengths drawn.")]
_TextInput = Annotated[
    str | None,
    typer.Option(
        "--text-input", help="LLM load: the input prompts go to (default: text_input, TEXT_QUERY, ...)."
    ),
]
_OpenAi = Annotated[
    str | None,
    typer.Option(
        "--openai",
        help="URL is an OpenAI-compatible server (tritonkit openai): stream POST /v1/chat/completions "
        "('chat') or /v1/completions ('completions') and measure TTFT, ITL and tokens/s from the SSE "
        "stream. Shape prompts with --prompt-tokens/--output-tokens/--dataset; --key-env sends a key.",
    ),
]


@with_auth_options(elsewhere=kube.runs_elsewhere)
def command(
    url: _Url = None,
    model: _Model = None,
    protocol: _Protocol = "http",
    model_version: _ModelVersion = "",
    concurrency: _Concurrency = None,
    request_rate: _RequestRate = None,
    poisson: _Poisson = False,
    duration: _Duration = None,
    requests: _Requests = None,
    measurement_interval: _MeasurementInterval = 3000,
    stability_percentage: _StabilityPercentage = 10.0,
    max_trials: _MaxTrials = 10,
    warmup: _Warmup = "1s",
    input_data: _InputData = "random",
    shape: _Shape = [],  # noqa: B006 - Typer reads the default; it is never mutated
    workers: _Workers = 0,
    timeout: _Timeout = 30.0,
    no_server_stats: _NoServerStats = False,
    csv_out: _CsvOut = None,
    json_out: _JsonOut = None,
    plot: _Plot = None,
    report: _Report = None,
    sku: _Sku = None,
    spot: _Spot = False,
    latency_budget: _LatencyBudget = None,
    price: _Price = None,
    compare_files: _CompareFiles = None,
    quiet: _Quiet = False,
    auth: AuthProvider | None = None,  # with_auth_options: from the credential options
    cacert: Path | None = None,
    stream: _Stream = None,
    compose: _Compose = True,
    composing: _Composing = None,
    repository: _Repository = None,
    tokenizer: _Tokenizer = None,
    prompt_tokens: _PromptTokens = None,
    output_tokens: _OutputTokens = None,
    dataset: _Dataset = None,
    seed: _Seed = 0,
    text_input: _TextInput = None,
    openai: _OpenAi = None,
    kube_workers: kube.Kube = None,
    dry_run: kube.DryRun = None,
    namespace: kube.Namespace = "default",
    image: kube.Image = None,
    context: kube.Context = None,
    kube_secret: kube.KubeSecret = None,
    kube_name: kube.KubeName = None,
    listen: kube.Listen = None,
) -> None:
    outputs = Outputs(json=json_out, csv=csv_out, plot=plot, report=report)
    if compare_files:
        if url or model:
            raise PerfError("--compare takes two JSON files and no URL/MODEL")
        compare_runs(*compare_files, outputs=outputs, show=show)
        return
    if not url or not model:
        raise PerfError("give URL and MODEL", hint="e.g. tritonkit perf http://127.0.0.1:8000 densenet_onnx")
    if concurrency and request_rate:
        raise PerfError("give --concurrency or --request-rate, not both")
    if poisson and not request_rate:
        raise PerfError("--poisson needs --request-rate")
    stream_budget = latency_budget if latency_budget and is_stream_budget(latency_budget) else None
    if stream_budget and stream is False:
        raise PerfError(
            "--latency-budget ttft_/itl_/latency_ limits need a streamed run", hint="drop --no-stream"
        )
    if (spot or (latency_budget and not stream_budget)) and not (sku or price is not None):
        raise PerfError("--spot and --latency-budget price a VM: add --sku NAME or --price USD_PER_HOUR")
    mode = "request_rate" if request_rate else "concurrency"
    settings = PerfSettings(
        url=url,
        model=model,
        protocol=protocol,
        model_version=model_version,
        mode=mode,
        levels=parse_levels(request_rate or concurrency or "1", mode=mode),
        poisson=poisson,
        measurement_interval_ms=measurement_interval,
        requests_per_window=requests,
        duration_s=duration,
        stability_percentage=stability_percentage,
        max_trials=max_trials,
        warmup_s=parse_duration(warmup, "--warmup"),
        input_data=input_data,
        shapes=parse_shape_options(shape),
        workers=workers,
        timeout_s=timeout,
        server_stats=not no_server_stats,
        cacert=str(cacert) if cacert else None,
        stream=stream,
        compose=compose,
        tokenizer=str(tokenizer) if tokenizer else None,
        stream_budget=stream_budget,
        composing=tuple(n.strip() for n in (composing or "").split(",") if n.strip()),
        repository=str(repository) if repository else None,
        llm=_llm_load(prompt_tokens, output_tokens, dataset, seed),
        text_input=text_input,
        openai=openai,
        listen=listen,
    )
    pricing = None
    if sku or price is not None:
        budget = parse_budget(latency_budget) if latency_budget and not stream_budget else None
        pricing = Pricing(sku=sku, price=price, spot=spot, budget=budget)
    argv = sys.argv[sys.argv.index("perf") + 1 :] if "perf" in sys.argv else [url, model]
    cmd = ("tritonkit perf " + shlex.join(argv)).strip()
    if kube_workers is not None or dry_run is not None:
        where = kube.KubeOptions(
            kube_workers or 0, namespace, image, context, kube_secret, kube_name, dry_run
        )
        return _run_kube(settings, argv, where, pricing=pricing, outputs=outputs)
    with contextlib.ExitStack() as stack:
        live = None if quiet or not render.err_console.is_terminal else stack.enter_context(_LiveProgress())
        benchmark(
            settings, auth=auth, progress=live, command=cmd, pricing=pricing, outputs=outputs, show=show
        )


def _run_kube(
    settings: PerfSettings,
    argv: list[str],
    options: kube.KubeOptions,
    *,
    pricing: Pricing | None,
    outputs: Outputs,
) -> None:
    """--kube: write the manifests (--dry-run), or run them and show the collected result."""
    if not any(a == "--kube" or a.startswith("--kube=") for a in argv):
        # the coordinator pod runs this command line: one rebuilt from the parsed values could
        # drop an option, so it is read as typed (sys.argv) or not at all
        raise PerfError("--kube reads its perf options from the command line (sys.argv), which lacks --kube")
    if options.dry_run is not None:
        if options.workers < 1:
            raise PerfError("--dry-run renders a --kube run: add --kube N")
        for path in kube.dry_run(settings, argv, options):
            render.info(f"wrote {path}")
        return
    from tritonkit.perf.results import PerfRun

    data = kube.run_on_cluster(settings, argv, options)
    present(
        PerfRun.from_dict(data, source="the coordinator pod's log"),
        show=show,
        pricing=pricing,
        outputs=outputs,
    )
