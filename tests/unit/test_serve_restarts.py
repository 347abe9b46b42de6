"""`tritonkit serve` keeps serving when tritonserver dies: a restart that fails while starting is
tried again (after START_RETRY_WAITS_S), then counts as the next crash of the same budget (3
within 10 minutes); past the budget serve ends with the server's log.

The server here is a stand-in whose deaths and failed starts come on cue (a real tritonserver
that aborts while loading its models cannot be had on cue; benchmarks/chaos.py --pipelines
--faults server met one under CPU hogs)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tritonkit.cli import serve
from tritonkit.errors import ServerError


class _Server:
    """Dead at first; each restart fails while starting until ``failures`` are used up."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.running = False
        self.restarts = 0
        self.started = threading.Event()

    def restart(self) -> _Server:
        self.restarts += 1
        if self.failures:
            self.failures -= 1
            raise ServerError("tritonserver exited with code -6 while starting")
        self.running = True
        self.started.set()
        return self

    def logs(self) -> str:
        return "terminate called after throwing an instance of 'boost::interprocess::lock_exception'"


def _keep_serving(server: _Server, stop: threading.Event) -> list[BaseException]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            serve._keep_serving(server, stop, None, heal=True, state={"serving": True})
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return errors


def test_serve_restarts_again_when_a_restart_dies_while_starting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serve, "START_RETRY_WAITS_S", (0.01, 0.01))
    server, stop = _Server(failures=4), threading.Event()  # 2 crashes' worth of failed starts
    errors = _keep_serving(server, stop)
    assert server.started.wait(30), errors
    stop.set()
    assert server.restarts == 5 and server.running and not errors


def test_serve_ends_with_the_servers_log_when_every_restart_in_the_window_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(serve, "START_RETRY_WAITS_S", (0.01,))
    server, stop = _Server(failures=100), threading.Event()
    errors = _keep_serving(server, stop)
    deadline = threading.Event()
    for _ in range(600):
        if errors:
            break
        deadline.wait(0.05)
    stop.set()
    assert errors and isinstance(errors[0], ServerError), errors
    error: Any = errors[0]
    assert "3 restarts within" in error.message and "lock_exception" in (error.log_tail or "")
    assert server.restarts == serve.MAX_RESTARTS * 2 and not server.running  # 2 tries a crash
