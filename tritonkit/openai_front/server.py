"""Running the front on uvicorn: in the foreground (``tritonkit openai``) or on a thread beside a
local tritonserver (``tritonkit serve --openai-port``)."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
import math
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Coroutine
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from tritonkit._extras import require
from tritonkit.errors import ConfigError, ServerError
from tritonkit.openai_front.app import FrontSettings, create_app
from tritonkit.openai_front.direct_body import protocol_class

__all__ = ["FrontServer", "available_cpus", "parse_workers", "serve"]

log = logging.getLogger(__name__)
_FEATURE = "the OpenAI front (tritonkit openai / serve --openai-port)"


def _config(settings: FrontSettings, host: str, port: int) -> Any:
    uvicorn = require("uvicorn", feature=_FEATURE)
    # log_config=None: the library configures no logging; no access log (it would show paths and
    # client addresses of untrusted traffic in the server's output; keys are never in it anyway).
    return uvicorn.Config(
        create_app(settings),
        host=host,
        port=port,
        log_config=None,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=5,
        # uvicorn's httptools protocol, giving each request the DirectBody the relay writes to
        http=protocol_class() or "auto",
    )


def serve(settings: FrontSettings, *, host: str = "127.0.0.1", port: int = 9000, workers: int = 1) -> None:
    """Run the front until SIGINT or SIGTERM (uvicorn's own handling).

    ``workers`` > 1: that many processes accept on the one port (bound here, inherited by each),
    each with its own channel to Triton, the same settings, and a share of the metrics (summed on
    ``/metrics``). SIGTERM or SIGINT stops them gracefully (each finishes its streams for up to
    5 s); a worker that dies is replaced.
    """
    if workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {workers}")
    if workers > 1:
        _Workers(settings, host, port, workers).run()
        return
    uvicorn = require("uvicorn", feature=_FEATURE)
    server = uvicorn.Server(_config(settings, host, port))
    _freeze_heap()
    server.run()
    if not server.started:
        raise ServerError(f"the OpenAI front could not start on {host}:{port}", hint="is the port free?")


def available_cpus() -> int:
    """The CPUs this process may use: its affinity, cut by a cgroup v2 CPU quota (a container's
    limit), rounded up; at least 1."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            cpus = min(cpus, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):
        pass
    return max(1, cpus)


def parse_workers(value: str | int) -> int:
    """``--workers``: a count, or ``auto`` (:func:`available_cpus`)."""
    text = str(value).strip().lower()
    if text == "auto":
        return available_cpus()
    if not text.isdigit() or int(text) < 1:
        raise ConfigError(f"--workers must be a number of processes (1 or more) or 'auto', got {value!r}")
    return int(text)


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named: asyncio turns Nagle off (TCP_NODELAY) only on sockets whose proto says
    # TCP, and accepted sockets inherit it; with proto 0 every SSE event waits for the client's
    # delayed ACK (~40 ms measured on the first token).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ServerError(
            f"the OpenAI front could not listen on {host}:{port}: {exc}", hint="is the port free?"
        ) from exc
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _worker(settings: FrontSettings, host: str, port: int, sock: socket.socket) -> None:
    """One worker process: uvicorn on the inherited socket (its own signal handling)."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)  # the supervisor's handlers are not this process's
    uvicorn = require("uvicorn", feature=_FEATURE)
    server = uvicorn.Server(_config(settings, host, port))
    _freeze_heap()
    server.run(sockets=[sock])


def _freeze_heap() -> None:
    """Leave what the process has made so far (its modules: ~96,000 objects) out of the cyclic
    garbage collector's full passes, which otherwise paused a busy front for ~60 ms every few
    seconds (measured on the clock model at concurrency 16; ~5 us of CPU per token)."""
    gc.collect()
    gc.freeze()


class _Workers:
    """The supervisor of ``workers`` front processes sharing one listening socket."""

    #: a worker that exits sooner than this after its start counts as failing to start
    EARLY_EXIT_S = 5.0

    def __init__(self, settings: FrontSettings, host: str, port: int, workers: int) -> None:
        self.settings, self.host, self.port, self.count = settings, host, port, workers
        self._stop = threading.Event()
        self._procs: list[tuple[Any, float]] = []

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._stop.set()

    def _spawn(self, settings: FrontSettings, sock: socket.socket) -> tuple[Any, float]:
        # fork: the children inherit the socket and the settings as they are (API keys, chat
        # templates) with nothing pickled; no channel to Triton exists yet in this process.
        proc = multiprocessing.get_context("fork").Process(
            target=_worker, args=(settings, self.host, self.port, sock), name="tritonkit-openai-worker"
        )
        proc.start()
        return proc, time.monotonic()

    def run(self) -> None:
        sock = _listen(self.host, self.port)
        folder = Path(tempfile.mkdtemp(prefix="tritonkit-openai-metrics-"))
        settings = dataclasses.replace(self.settings, metrics_dir=folder)
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        early_exits = 0
        try:
            self._procs = [self._spawn(settings, sock) for _ in range(self.count)]
            while not self._stop.wait(0.5):
                for i, (proc, started) in enumerate(self._procs):
                    if proc.is_alive() or self._stop.is_set():
                        continue
                    log.warning(
                        "OpenAI front worker %s exited (code %s); starting another", proc.pid, proc.exitcode
                    )
                    if time.monotonic() - started < self.EARLY_EXIT_S:
                        early_exits += 1
                        if early_exits > 2 * self.count:
                            raise ServerError(
                                f"the OpenAI front's workers keep exiting at start ({self.host}:{self.port})",
                                hint="run with --workers 1 to see why",
                            )
                    self._procs[i] = self._spawn(settings, sock)
        finally:
            self._shutdown()
            sock.close()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            shutil.rmtree(folder, ignore_errors=True)

    def _shutdown(self) -> None:
        for proc, _ in self._procs:
            if proc.is_alive() and proc.pid is not None:
                os.kill(proc.pid, signal.SIGTERM)  # uvicorn's graceful shutdown in each
        deadline = time.monotonic() + 15
        for proc, _ in self._procs:
            proc.join(timeout=max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join()


def _run_on_uvicorns_loop(main: Coroutine[Any, Any, None], config: Any) -> None:
    """Run ``main`` on the event loop uvicorn picks for a process of its own (uvloop when it is
    installed), so a front on a thread costs what a front process does."""
    get_factory = getattr(config, "get_loop_factory", None)  # uvicorn 0.36 and later
    factory = get_factory() if get_factory is not None else None
    if factory is None or sys.version_info < (3, 11):
        asyncio.run(main)
        return
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(main)


class FrontServer:
    """The front on a background thread: ``with FrontServer(settings, port=9000) as front: ...``.

    ``start()`` returns once the front listens (or raises ServerError); ``stop()`` ends it.
    """

    def __init__(self, settings: FrontSettings, *, host: str = "127.0.0.1", port: int = 0) -> None:
        uvicorn = require("uvicorn", feature=_FEATURE)
        self.settings = settings
        self.host = host
        self._server = uvicorn.Server(_config(settings, host, port))
        self._server.install_signal_handlers = lambda: None  # the main thread keeps its own
        self._thread: threading.Thread | None = None
        self._failed: BaseException | None = None
        self._started = threading.Event()

    @property
    def port(self) -> int:
        servers = getattr(self._server, "servers", None) or []
        for server in servers:
            for sock in server.sockets:
                return int(sock.getsockname()[1])
        return int(self._server.config.port)

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}"

    def _run(self) -> None:
        try:
            _run_on_uvicorns_loop(self._server.serve(), self._server.config)
        except BaseException as exc:  # noqa: BLE001 - reported by start() on the caller's thread
            self._failed = exc
        finally:
            self._started.set()

    def start(self, timeout: float = 30.0) -> FrontServer:
        self._thread = threading.Thread(target=self._run, name="tritonkit-openai-front", daemon=True)
        self._thread.start()
        waited = 0.0
        while not self._server.started and self._thread.is_alive() and waited < timeout:
            self._started.wait(0.05)  # uvicorn has no event for "listening": poll its flag
            waited += 0.05
        if not self._server.started:
            self.stop()
            why = f": {self._failed}" if self._failed else ""
            raise ServerError(
                f"the OpenAI front could not start on {self.host}{why}", hint="is the port free?"
            )
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=15)

    def __enter__(self) -> FrontServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
