"""`tritonkit serve`: run a real tritonserver on a model repository until SIGINT or SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import typer

from tritonkit.cli import openai, render
from tritonkit.errors import ModelLoadError, ServerError, TritonKitError

if TYPE_CHECKING:
    from tritonkit.server import Healer

#: how serve starts Triton to heal: explicit model control, every model loaded at start
HEAL_ARGS = ("--model-control-mode=explicit", "--load-model=*")
#: a tritonserver that dies is started again, at most this often within the window; then serve
#: exits non-zero, for its own supervisor (systemd, Kubernetes) to take over
MAX_RESTARTS = 3
RESTART_WINDOW_S = 600.0
#: a restart that dies while starting is tried again this many times, after these waits (s),
#: before it counts as the next crash: seen under CPU hogs, 2.51's Python backend aborting with
#: boost::interprocess::lock_exception while the restarted server loads its many stub instances
START_RETRY_WAITS_S = (2.0, 5.0, 10.0)

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
    tool_parser: list[str] = typer.Option([], "--tool-parser", help=openai.TOOL_PARSER_HELP),
    allow_image_url: list[str] = typer.Option([], "--allow-image-url", help=openai.IMAGE_URL_HELP),
    heal: bool = typer.Option(
        True,
        "--heal/--no-heal",
        help="Reload a model whose engine or stub process died, and restart a tritonserver that died "
        "(with backoff and limits; docs/deploy.md). Needs explicit model control, which serve then uses.",
    ),
    openai_workers: str = typer.Option("1", "--openai-workers", help=openai.WORKERS_HELP),
) -> None:
    from tritonkit.openai_front.server import parse_workers

    workers = parse_workers(openai_workers)
    # checked before the server starts: a bad key file fails fast
    front_settings = (
        None
        if openai_port is None
        else _front_settings(repository, openai_api_key_file, chat_template, allow_image_url, tool_parser)
    )
    heal = heal and _explicit_model_control(server_arg)
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
        extra_args=[*server_arg, *(HEAL_ARGS if heal and not _model_control_mode(server_arg) else [])],
        startup_timeout=startup_timeout,
        log_file=log_file,
    )
    stop = threading.Event()
    received: list[int] = []
    state = {"serving": False}
    front: Any = None
    healer: Healer | None = None

    def on_signal(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        stop.set()
        if not state["serving"]:
            # Still starting: abandon the start (it stops what it launched) instead of waiting.
            raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        render.info(f"starting tritonserver on {repository} ...")
        server.start()
        state["serving"] = True
        for twin in getattr(server, "python_env_twins", ()):  # the Docker engine runs archives as-is
            render.info(f"packed environment: {twin}")
        _show(server)
        if front_settings is not None:
            cli = {"--openai-api-key-file": openai_api_key_file, "--chat-template": chat_template}
            cli |= {"--tool-parser": tool_parser}
            cli |= {"--allow-image-url": allow_image_url, "--repository": repository}
            front = _start_front(front_settings, server, host, openai_port or 0, workers, cli)
        healer = _start_healer(server) if heal else None
        _keep_serving(server, stop, healer, heal=heal, state=state)
    except ServerError as exc:
        # A refused model's reason is in the message; other failures need the server's own words.
        if exc.log_tail and not isinstance(exc, ModelLoadError):
            render.err_console.print(exc.log_tail, markup=False, highlight=False)
        raise
    finally:
        if healer is not None:
            healer.stop()
        if front is not None:
            front.stop()
        if server.running:
            render.info("stopping tritonserver ...")
        server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    name = signal.Signals(received[0]).name if received else "request"
    render.info(f"tritonserver stopped ({name}).")


def _front_settings(
    repository: Path,
    api_key_file: Path | None,
    chat_templates: list[str],
    image_url_prefixes: list[str],
    tool_parsers: list[str],
) -> Any:
    """The front's settings before the local server (its URL is filled in once it listens)."""
    return openai.front_settings(
        "",
        protocol="grpc",
        auth=None,
        cacert=None,
        api_key_file=api_key_file,
        chat_templates=chat_templates,
        image_url_prefixes=image_url_prefixes,
        repository=repository,
        models=[],
        tool_parsers=tool_parsers,
    )


def _start_healer(server: Any) -> Healer:
    from tritonkit.server import Healer

    return Healer(server, say=render.info, warn=render.warn).start()


def _keep_serving(
    server: Any, stop: threading.Event, healer: Healer | None, *, heal: bool, state: dict[str, bool]
) -> None:
    """Until ``stop``: a tritonserver that died is restarted (healing) or ends serve."""
    crashes: list[float] = []
    while not stop.wait(0.5):
        if server.running:
            continue
        _restart_or_raise(server, crashes, heal=heal)
        if healer is not None:
            healer.stop()
        state["serving"] = False  # a signal now abandons the restart
        if not _start_again(server, stop):
            continue  # it did not start: the next crash of the same budget, or stopped
        state["serving"] = True
        render.info("tritonserver is serving again")
        if healer is not None:
            healer.start()


def _start_again(server: Any, stop: threading.Event) -> bool:
    """Restart ``server``; a start that fails is tried again after each of START_RETRY_WAITS_S.
    False when every try failed (or ``stop`` was set while waiting)."""
    for attempt, wait in enumerate((*START_RETRY_WAITS_S, None), start=1):
        try:
            server.restart()
            return True
        except ServerError as exc:
            if wait is None:
                render.warn(f"tritonserver did not start again ({attempt} tries): {exc.message}")
                return False
            render.warn(f"tritonserver did not start again: {exc.message}; trying again in {wait:g} s")
            if stop.wait(wait):
                return False
    return False  # pragma: no cover - the loop returns on its last try


def _restart_or_raise(server: Any, crashes: list[float], *, heal: bool) -> None:
    """A dead tritonserver: raise (no healing, or too many restarts) or say it restarts."""
    tail = "\n".join(server.logs().splitlines()[-30:])
    now = time.monotonic()
    crashes[:] = [t for t in crashes if now - t < RESTART_WINDOW_S]
    if not heal or len(crashes) >= MAX_RESTARTS:
        why = f" ({MAX_RESTARTS} restarts within {RESTART_WINDOW_S:.0f} s already)" if heal else ""
        raise ServerError(
            f"tritonserver stopped unexpectedly{why}", log_tail=tail, hint="see the log lines above"
        )
    crashes.append(now)
    render.warn(
        "tritonserver stopped unexpectedly; restarting it on the same ports "
        f"(restart {len(crashes)} of {MAX_RESTARTS} within {RESTART_WINDOW_S:.0f} s)"
    )
    render.err_console.print(tail, markup=False, highlight=False)


def _model_control_mode(server_args: list[str]) -> str | None:
    """The --model-control-mode among the user's --server-arg values, if any."""
    for i, arg in enumerate(server_args):
        if arg.startswith("--model-control-mode"):
            if "=" in arg:
                return arg.partition("=")[2]
            return server_args[i + 1] if i + 1 < len(server_args) else ""
    return None


def _explicit_model_control(server_args: list[str]) -> bool:
    """Whether healing can work: explicit model control (serve's own choice, or the user's)."""
    mode = _model_control_mode(server_args)
    if mode in (None, "explicit"):
        return True
    render.warn(
        f"--model-control-mode={mode}: models whose engine or stub dies cannot be reloaded "
        "(healing needs explicit model control); a dead tritonserver ends serve"
    )
    return False


def _start_front(settings: Any, server: Any, host: str, port: int, workers: int, cli: dict[str, Any]) -> Any:
    """The OpenAI front reaching the server just started over gRPC, its streams over HTTP
    (generate_stream: the cheaper hot path, docs/openai.md): on a thread of this process, or
    (``workers`` > 1) as ``tritonkit openai --workers`` with the same options (``cli``)."""
    import dataclasses

    from tritonkit.openai_front import FrontServer

    if workers > 1:
        options = {
            flag: value if isinstance(value, list) else [value] for flag, value in cli.items() if value
        }
        options["--stream-url"] = [server.http_url]
        return _FrontWorkers(server.grpc_url, host, port, workers, options).start()
    local = dataclasses.replace(settings, triton_url=server.grpc_url, stream_url=server.http_url)
    front = FrontServer(local, host=host, port=port)
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
