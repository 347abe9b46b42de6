"""Running the front on uvicorn: in the foreground (``tritonkit openai``) or on a thread beside a
local tritonserver (``tritonkit serve --openai-port``)."""

from __future__ import annotations

import asyncio
import logging
import threading
from types import TracebackType
from typing import Any

from tritonkit._extras import require
from tritonkit.errors import ServerError
from tritonkit.openai_front.app import FrontSettings, create_app

__all__ = ["FrontServer", "serve"]

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
    )


def serve(settings: FrontSettings, *, host: str = "127.0.0.1", port: int = 9000) -> None:
    """Run the front until SIGINT or SIGTERM (uvicorn's own handling)."""
    uvicorn = require("uvicorn", feature=_FEATURE)
    server = uvicorn.Server(_config(settings, host, port))
    server.run()
    if not server.started:
        raise ServerError(f"the OpenAI front could not start on {host}:{port}", hint="is the port free?")


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
            asyncio.run(self._server.serve())
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
