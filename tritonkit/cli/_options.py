"""Option aliases that mean the same in several verbs (`infer`, `perf`, `tune`), declared once.

An option belongs here only when its flag, type and help are the same wherever it is used;
options that share a flag but not a meaning (``--concurrency`` in perf is a sweep, in tune the
production load; ``--prompt-tokens`` an optional LLM load in perf, an engine stage's required
one in tune) stay with their verb. The load options below are perf's and tune's alike.

A command with many options of its own (``deploy aks``) declares them as a table of
:func:`option` rows and takes them with :func:`with_options`, so that each is named once rather
than as an alias, a parameter and a keyword argument.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Annotated, Any

import typer

#: One option as data: (parameter name, the Annotated type Typer reads, default).
OptionRow = tuple[str, Any, Any]


def option(flag: str, kind: Any, default: Any, *, help: str, name: str = "", **settings: Any) -> OptionRow:
    """The row of an option table for ``flag`` (Typer's spelling, e.g. ``--x/--no-x``); the command
    gets it as ``name``, by default the flag's own (``--cpu-request``: ``cpu_request``), as Click names it."""
    name = name or flag.split("/")[0].lstrip("-").replace("-", "_")
    return name, Annotated[kind, typer.Option(flag, help=help, **settings)], default


def signature_with(
    command: Callable[..., Any], rows: Iterable[OptionRow], *, replacing: Iterable[str] = ()
) -> inspect.Signature:
    """``command``'s signature with ``rows`` added as keyword parameters after its own: what Typer
    reads. The parameters named in ``replacing``, and a ``**options`` catch-all, are left out."""
    signature = inspect.signature(command, eval_str=True)
    gone = set(replacing)
    own = [p for p in signature.parameters.values() if p.name not in gone and p.kind is not p.VAR_KEYWORD]
    added = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
        for name, annotation, default in rows
    ]
    return signature.replace(parameters=[*own, *added])


def with_options(rows: Iterable[OptionRow]) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Give a Typer command the options of a table; it takes them as ``**options``, by row name."""

    def add(command: Callable[..., None]) -> Callable[..., None]:
        command.__signature__ = signature_with(command, rows)  # type: ignore[attr-defined]
        return command

    return add


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
