"""Option aliases that mean the same in several verbs (`infer`, `perf`, `tune`), declared once.

An option belongs here only when its flag, type and help are the same wherever it is used;
options that share a flag but not a meaning (``--concurrency`` in perf is a sweep, in tune the
production load) stay with their verb.
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
