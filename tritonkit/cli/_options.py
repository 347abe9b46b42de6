"""Option aliases that mean the same in several verbs (`infer`, `perf`, `tune`), declared once.

An option belongs here only when its flag, type and help are the same wherever it is used;
options that share a flag but not a meaning (``--concurrency`` in perf is a sweep, in tune the
production load; ``--prompt-tokens`` an optional LLM load in perf, an engine stage's required
one in tune) stay with their verb. The load options below are perf's and tune's alike.
"""

from __future__ import annotations

from typing import Annotated

import typer

Protocol = Annotated[str, typer.Option("--protocol", "-p", help="http or grpc.")]
ModelVersion = Annotated[
    str, typer.Option("--model-version", help="Model version (default: server's choice).")
]
Shape = Annotated[list[str], typer.Option("--shape", help="NAME:d1,d2 for variable dims (repeat per input).")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No live progress.")]
Spot = Annotated[bool, typer.Option("--spot", help="Use the spot price of --sku.")]

# The load and its measurement, as `perf` and `tune` both take them.
Workers = Annotated[
    int,
    typer.Option(
        "--workers",
        help="Load-generator worker processes (0: in this process; more when one saturates its CPU).",
    ),
]
StabilityPercentage = Annotated[
    float,
    typer.Option(
        "--stability-percentage",
        help="perf_analyzer's stability rule: the last 3 windows agree within +-this % (throughput, latency)",
    ),
]
MaxTrials = Annotated[
    int, typer.Option("--max-trials", help="Most windows per measurement before giving up on stability.")
]
Warmup = Annotated[str, typer.Option("--warmup", help="Warm-up before each measurement (e.g. 2s, 500ms, 0).")]
InputData = Annotated[
    str,
    typer.Option(
        "--input-data",
        help="random, zero, or real data: a perf_analyzer JSON file, directory, image or text.",
    ),
]
Sku = Annotated[
    str | None,
    typer.Option("--sku", help="Azure VM size to price on (perf: the best step; tune: --objective cost)."),
]
Price = Annotated[
    float | None, typer.Option("--price", help="Hourly price in USD (instead of --sku's list price).")
]
