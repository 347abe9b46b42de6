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
    grpc: str | None = typer.Option(
        None,
        "--grpc",
        help="Triton's gRPC address (host:port) to load models through: a load over HTTP holds "
        "every HTTP request to Triton until the model is loaded.",
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
    probe_period: float = typer.Option(
        5.0,
        "--probe-period",
        min=0.0,
        help="Seconds between the healer's own one-token request to each LLM stage (and each "
        "--probe-model): a dead engine or stub is seen with no user's request in flight. 0: off.",
    ),
    probe_model: list[str] = typer.Option(
        [],
        "--probe-model",
        help="Also probe this model (not an LLM stage) with one request of zeros shaped by its "
        "config, which runs its code: how a dead Python stub is seen without Triton's processes.",
    ),
    watch_processes: bool = typer.Option(
        True,
        "--watch-processes/--no-watch-processes",
        help="Look for Triton's stub processes where they are visible (a shared process namespace); "
        "off: only Triton's API, as in a pod that does not share it.",
    ),
    restricted: RestrictedHeaders = [],  # noqa: B006 - Typer's list default
) -> None:
    import os

    from tritonkit.server import RemoteTriton, run_healer

    headers = {}
    for item in restricted:
        header, env = split_pair(item, "--restricted-header")
        headers[header] = os.environ.get(env, "")
    server = RemoteTriton(
        url,
        metrics_url=metrics_url,
        headers=headers,
        load_timeout=load_timeout,
        watch_processes=watch_processes,
        grpc_address=grpc,
    )
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
        probe_period=probe_period or None,
        probe_models=probe_model,
    )
