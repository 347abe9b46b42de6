"""`tritonkit heal URL`: keep a running tritonserver's models loaded (the AKS pod's healer sidecar)."""

from __future__ import annotations

import signal
import threading
from types import FrameType

import typer

from tritonkit.cli import render
from tritonkit.cli._auth_options import RestrictedHeaders, split_pair

HELP = (
    "Reload the models of a running tritonserver (explicit model control) whose engine or stub "
    "died, until SIGINT or SIGTERM: tritonkit serve's healer, beside a server it did not start."
)


def command(
    url: str = typer.Argument(..., help="Triton's HTTP address, e.g. http://127.0.0.1:8000."),
    metrics_url: str | None = typer.Option(
        None, "--metrics-url", help="Triton's /metrics (tritonkit's vllm backend's engine gauge)."
    ),
    port: int | None = typer.Option(
        None, "--port", help="Serve /healthz here (200 while the healer runs), for probes."
    ),
    period: float = typer.Option(0.5, "--period", min=0.05, help="Seconds between looks."),
    max_reloads: int = typer.Option(
        5, "--max-reloads", min=1, help="Reloads of one model within --window before giving up."
    ),
    window: float = typer.Option(600.0, "--window", min=1.0, help="Seconds the reload limit counts."),
    load_timeout: float = typer.Option(
        900.0, "--load-timeout", min=1.0, help="Seconds one model's load may take."
    ),
    restricted: RestrictedHeaders = [],  # noqa: B006 - Typer's list default
) -> None:
    import os

    from tritonkit.server import RemoteTriton, run_healer

    headers = {}
    for item in restricted:
        header, env = split_pair(item, "--restricted-header")
        headers[header] = os.environ.get(env, "")
    server = RemoteTriton(url, metrics_url=metrics_url, headers=headers, load_timeout=load_timeout)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    render.info(f"waiting for {url} to be ready")
    run_healer(
        server,
        stop,
        say=render.info,
        warn=render.warn,
        port=port,
        period=period,
        max_reloads=max_reloads,
        window=window,
    )
