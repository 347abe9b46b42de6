"""`tritonkit serve`: run a real tritonserver on a model repository until SIGINT or SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

import typer

from tritonkit.cli import openai, render
from tritonkit.errors import ModelLoadError, ServerError, TritonKitError

HELP = "Serve a model repository with a real local tritonserver (no Docker, no GPU) until Ctrl-C or SIGTERM."


def command(
    repository: Path = typer.Argument(..., help="The model repository to serve."),
    http_port: int | None = typer.Option(None, "--http-port", help="HTTP port (default: a free one)."),
    grpc_port: int | None = typer.Option(None, "--grpc-port", help="gRPC port (default: a free one)."),
    metrics_port: int | None = typer.Option(
        None, "--metrics-port", help="Metrics port (default: a free one)."
    ),
    host: str = typer.Option(
        "127.0.0.1", "--host", help="Address to bind (0.0.0.0 exposes the server to the network)."
    ),
    model_config_name: str = typer.Option(
        "auto",
        "--model-config-name",
        help="Use <model>/configs/<NAME>.pbtxt where present; 'auto' picks 'cpu' without a GPU; "
        "'' uses config.pbtxt.",
    ),
    http_restricted_api: list[str] = typer.Option(
        [], "--http-restricted-api", help="APIS:HEADER=VALUE, passed to Triton (repeatable; never echoed)."
    ),
    grpc_restricted_protocol: list[str] = typer.Option(
        [],
        "--grpc-restricted-protocol",
        help="PROTOCOLS:HEADER=VALUE, passed to Triton (repeatable; never echoed).",
    ),
    server_arg: list[str] = typer.Option(
        [], "--server-arg", help="Any other tritonserver flag, e.g. --server-arg=--log-verbose=1."
    ),
    startup_timeout: float = typer.Option(180.0, "--startup-timeout", help="Seconds to wait for ready."),
    log_file: Path | None = typer.Option(
        None, "--log-file", help="Write Triton's log here (default: a temporary file, shown on failure)."
    ),
    engine: str = typer.Option("local", "--engine", help="local (the pip-installed binary) or docker."),
    image: str | None = typer.Option(None, "--image", help="Container image for --engine docker."),
    openai_port: int | None = typer.Option(
        None, "--openai-port", help="Also serve the OpenAI-compatible API on this port (tritonkit openai)."
    ),
    openai_api_key_file: Path | None = typer.Option(
        None, "--openai-api-key-file", help=openai.API_KEY_FILE_HELP
    ),
    chat_template: list[str] = typer.Option([], "--chat-template", help=openai.CHAT_TEMPLATE_HELP),
    allow_image_url: list[str] = typer.Option([], "--allow-image-url", help=openai.IMAGE_URL_HELP),
    openai_workers: str = typer.Option("1", "--openai-workers", help=openai.WORKERS_HELP),
) -> None:
    from tritonkit.openai_front.server import parse_workers

    front_settings = None
    workers = parse_workers(openai_workers)
    if openai_port is not None:  # checked before the server starts: a bad key file fails fast
        front_settings = openai.front_settings(
            "",
            protocol="grpc",
            auth=None,
            cacert=None,
            api_key_file=openai_api_key_file,
            chat_templates=chat_template,
            image_url_prefixes=allow_image_url,
            repository=repository,
            models=[],
        )
    server = _make_server(
        engine,
        repository,
        image=image,
        host=host,
        http_port=http_port,
        grpc_port=grpc_port,
        metrics_port=metrics_port,
        model_config_name=model_config_name,
        http_restricted_api=http_restricted_api,
        grpc_restricted_protocol=grpc_restricted_protocol,
        extra_args=server_arg,
        startup_timeout=startup_timeout,
        log_file=log_file,
    )
    stop = threading.Event()
    received: list[int] = []
    serving = False
    front: Any = None

    def on_signal(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        stop.set()
        if not serving:
            # Still starting: abandon the start (it stops what it launched) instead of waiting.
            raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        render.info(f"starting tritonserver on {repository} ...")
        server.start()
        serving = True
        for twin in getattr(server, "python_env_twins", ()):  # the Docker engine runs archives as-is
            render.info(f"packed environment: {twin}")
        _show(server)
        if front_settings is not None:
            cli = {"--openai-api-key-file": openai_api_key_file, "--chat-template": chat_template}
            cli |= {"--allow-image-url": allow_image_url, "--repository": repository}
            front = _start_front(front_settings, server, host, openai_port or 0, workers, cli)
        while not stop.wait(0.5):
            if not server.running:
                raise ServerError(
                    "tritonserver stopped unexpectedly",
                    log_tail="\n".join(server.logs().splitlines()[-30:]),
                    hint="see the log lines above",
                )
    except ServerError as exc:
        # A refused model's reason is in the message; other failures need the server's own words.
        if exc.log_tail and not isinstance(exc, ModelLoadError):
            render.err_console.print(exc.log_tail, markup=False, highlight=False)
        raise
    finally:
        if front is not None:
            front.stop()
        if server.running:
            render.info("stopping tritonserver ...")
        server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    name = signal.Signals(received[0]).name if received else "request"
    render.info(f"tritonserver stopped ({name}).")


def _start_front(settings: Any, server: Any, host: str, port: int, workers: int, cli: dict[str, Any]) -> Any:
    """The OpenAI front reaching the server just started over gRPC: on a thread of this process,
    or (``workers`` > 1) as ``tritonkit openai --workers`` with the same options (``cli``)."""
    import dataclasses

    from tritonkit.openai_front import FrontServer

    if workers > 1:
        options = {
            flag: value if isinstance(value, list) else [value] for flag, value in cli.items() if value
        }
        return _FrontWorkers(server.grpc_url, host, port, workers, options).start()
    front = FrontServer(dataclasses.replace(settings, triton_url=server.grpc_url), host=host, port=port)
    front.start()
    render.info(f"OpenAI   {front.url}/v1")
    return front


class _FrontWorkers:
    """``tritonkit openai --workers N`` beside the server (worker processes cannot be threads of
    this one): started once Triton is ready, stopped (SIGTERM, graceful) before it."""

    def __init__(
        self, grpc_url: str, host: str, port: int, workers: int, options: dict[str, list[Any]]
    ) -> None:
        self.grpc_url, self.host, self.workers = grpc_url, host, workers
        self.port = port or _free_port(host)
        self.argv = [sys.executable, "-m", "tritonkit", "openai", grpc_url, "--host", host]
        self.argv += ["--port", str(self.port), "--workers", str(workers)]
        for flag, values in options.items():
            for value in values:
                self.argv += [flag, str(value)]
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}"

    def start(self, timeout: float = 60.0) -> _FrontWorkers:
        import urllib.request

        self.process = subprocess.Popen(self.argv)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                with urllib.request.urlopen(f"{self.url}/health/ready", timeout=2):
                    break
            except OSError:
                time.sleep(0.2)
        else:
            self.stop()
            raise ServerError(
                f"the OpenAI front's workers did not start on {self.url}", hint="is the port free?"
            )
        render.info(f"OpenAI   {self.url}/v1 ({self.workers} workers)")
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _free_port(host: str) -> int:
    import socket

    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _make_server(engine: str, repository: Path, *, image: str | None, **kwargs: Any) -> Any:
    if engine == "local":
        from tritonkit.server import LocalTritonServer

        # vLLM stages take tens of seconds to start their engines: show their progress as it comes.
        return LocalTritonServer(repository, on_progress=render.info, **kwargs)
    if engine == "docker":
        from tritonkit.server.docker import DockerTritonServer

        options = {k: v for k, v in kwargs.items() if k not in ("host", "log_file")}
        if image:
            options["image"] = image
        return DockerTritonServer(repository, **options)
    raise TritonKitError(f"unknown engine '{engine}'", hint="use --engine local or --engine docker")


def _show(server: Any) -> None:
    render.info(f"HTTP     {server.http_url}")
    render.info(f"gRPC     {server.grpc_url}")
    render.info(f"metrics  {server.metrics_url}")
    if server.model_config_name:
        render.info(f"model config name: {server.model_config_name}")
    try:
        index = server.repository_index()
    except (TritonKitError, OSError) as exc:
        render.warn(f"could not list the models: {exc}")
    else:
        rows = [(e.get("name", ""), e.get("version", ""), e.get("state") or "NOT LOADED") for e in index]
        render.table("models", ["model", "version", "state"], rows)
    render.info("serving; press Ctrl-C (or send SIGTERM) to stop")
