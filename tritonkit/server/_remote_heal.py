"""The healer beside a tritonserver tritonkit did not start: ``tritonkit heal URL`` (an AKS sidecar).

On AKS, Triton runs as its image's own ``tritonserver`` (explicit model control, every model
loaded at start) and a second container of the pod runs ``tritonkit heal http://127.0.0.1:8000``:
the same :class:`~tritonkit.server._heal.Healer` as ``tritonkit serve``'s, asking Triton over HTTP.

- A model that was ready and is now down (NVIDIA's vllm backend unloads a model whose engine
  failed its health check, ``ENABLE_VLLM_HEALTH_CHECK``) is loaded again, with the backoff and
  limit of serve's healer.
- A Python stage whose stub died is seen where the healer sees Triton's processes (a pod with
  ``shareProcessNamespace``, or the same host): the stubs' command lines name the server's pid.
  Without them, the healer's probe (``probe_period``; :mod:`tritonkit.server._probe`) sees it
  through Triton's API: every LLM stage, and each model named in ``probe_models``, gets a small
  request of the healer's own, whose refusal (``Stub process ... is not healthy``, a dead engine)
  says so. NVIDIA's vllm backend checks its engine on requests only: the probe is such a request.
- A tritonserver that restarted (a new pid, or it answered again after a silence) is looked at
  anew once it is ready: its models were loaded by its own start.

``/healthz`` on ``--port`` answers 200 while the healer's loop turns (its container's probes).
Giving up on a model is left to Triton's container: its readiness stays false, and its liveness
(readiness held false longer than a reload takes) restarts it.
"""

from __future__ import annotations

import http.server
import threading
import time
import urllib.parse
from collections.abc import Callable, Collection, Mapping
from pathlib import Path

from tritonkit.server._base import TritonServerBase
from tritonkit.server._heal import Healer

__all__ = ["RemoteTriton", "find_tritonserver", "run_healer"]

SERVER_BINARY = "tritonserver"


def find_tritonserver(http_port: int | None = None, proc: Path = Path("/proc")) -> int | None:
    """The pid of the tritonserver visible here (the one serving ``http_port`` where several
    are), or None: none, or no single one."""
    found: list[tuple[int, list[bytes]]] = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if Path(argv[0].decode("utf-8", "replace")).name == SERVER_BINARY:
            found.append((int(entry.name), argv))
    if len(found) > 1 and http_port is not None:
        flag = f"--http-port={http_port}".encode()
        found = [(pid, argv) for pid, argv in found if flag in argv]
    return found[0][0] if len(found) == 1 else None


class RemoteTriton(TritonServerBase):
    """A running tritonserver reached at ``url``: what :class:`Healer` asks of a server."""

    def __init__(
        self,
        url: str,
        *,
        metrics_url: str | None = None,
        headers: Mapping[str, str] | None = None,
        load_timeout: float = 900.0,
        find_pid: Callable[[int | None], int | None] = find_tritonserver,
        watch_processes: bool = True,
        grpc_address: str | None = None,
    ) -> None:
        self._url = url.rstrip("/")
        self._metrics_url = metrics_url
        self._probe_headers = dict(headers or {})
        self._secrets = list(self._probe_headers.values())
        self.startup_timeout = load_timeout
        self._find_pid = find_pid
        #: False: Triton's processes are not looked for (only its API, as in a pod that does not
        #: share its process namespace)
        self.watch_processes = watch_processes
        #: where model loads go over gRPC (``host:port``): a load over HTTP holds every HTTP request
        #: to Triton until it ends (see TritonServerBase.control_model); None: over HTTP
        self.grpc_address_for_control = grpc_address
        self.pid: int | None = None

    @property
    def http_url(self) -> str:
        return self._url

    @property
    def metrics_url(self) -> str | None:  # type: ignore[override]
        return self._metrics_url

    def control_grpc(self) -> tuple[str, Mapping[str, str]] | None:
        """gRPC where given, with the same restricted-API headers as HTTP (one admin key)."""
        if self.grpc_address_for_control is None:
            return None
        return self.grpc_address_for_control, self._probe_headers

    def look_for_pid(self) -> int | None:
        """Find the server's process again (None where its processes are not visible)."""
        port = urllib.parse.urlsplit(self._url).port
        self.pid = self._find_pid(port) if self.watch_processes else None
        return self.pid


class _Beat:
    """When the healer last looked: ``/healthz`` answers 200 while that is recent."""

    def __init__(self, stale_after: float) -> None:
        self.stale_after = stale_after
        self.last = time.monotonic()

    def touch(self) -> None:
        self.last = time.monotonic()

    def fresh(self) -> bool:
        return time.monotonic() - self.last < self.stale_after


def _health_server(port: int, beat: _Beat) -> http.server.ThreadingHTTPServer:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the standard library's name
            good = self.path == "/healthz" and beat.fresh()
            self.send_response(200 if good else (503 if self.path == "/healthz" else 404))
            self.send_header("content-type", "text/plain")
            self.end_headers()
            self.wfile.write(b"ok\n" if good else b"not ok\n")

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
            return

    server = http.server.ThreadingHTTPServer(("0.0.0.0", port), Handler)  # noqa: S104 - the kubelet probes it
    threading.Thread(target=server.serve_forever, name="tritonkit-heal-health", daemon=True).start()
    return server


def run_healer(
    server: RemoteTriton,
    stop: threading.Event,
    *,
    say: Callable[[str], None],
    warn: Callable[[str], None],
    port: int | None = None,
    period: float = 0.5,
    max_reloads: int = 5,
    window: float = 600.0,
    probe_period: float | None = None,
    probe_models: Collection[str] = (),
) -> Healer:
    """Heal ``server`` until ``stop`` is set; the healer (its ``events``) is returned at the end."""
    healer = Healer(
        server,
        say=say,
        warn=warn,
        period=period,
        max_reloads=max_reloads,
        window=window,
        probe_period=probe_period,
        probe_models=probe_models,
    )
    beat = _Beat(stale_after=max(30.0, 20 * period))
    health = _health_server(port, beat) if port is not None else None
    try:
        _watch(server, healer, stop, beat, say)
    finally:
        healer.stop()
        if health is not None:
            health.shutdown()
    return healer


def _watch(
    server: RemoteTriton, healer: Healer, stop: threading.Event, beat: _Beat, say: Callable[[str], None]
) -> None:
    """Start the healer once Triton is ready; begin again when Triton restarted under it."""
    watching = False
    pid: int | None = None
    while not stop.is_set():
        beat.touch()
        ready = server.is_ready()
        if not watching:
            if ready:
                pid = server.look_for_pid()
                healer.start()
                watching = True
                stubs = (
                    f"; its Python stubs watched (pid {pid})"
                    if pid
                    else "; its processes are not visible here"
                )
                say(f"healing the models of {server.http_url}{stubs}")
        elif not _alive(server) or (pid is not None and server.look_for_pid() not in (None, pid)):
            say("tritonserver went away; healing again once it is ready")
            healer.stop()
            watching = False
        stop.wait(healer.period)


def _alive(server: RemoteTriton) -> bool:
    try:
        status, _ = server._request("GET", "/v2/health/live")
    except OSError:
        return False
    return status == 200
