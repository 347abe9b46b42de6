"""Whether the engine is alive: its processes, vLLM's own error flag and progress; and a watchdog
that kills its processes when the stub dies without finalize().

Shipped beside ``model.py`` (the stub puts this directory on ``sys.path``); imports nothing
from tritonkit.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: how often the engine's health is looked at (its processes, vLLM's own error state, progress)
HEALTH_PERIOD_S = 0.5
#: requests in the engine and no output for this long: the engine counts as wedged (the
#: environment variable of the same name, in seconds, chooses another; 0 turns the check off)
STALL_ENV = "TRITONKIT_VLLM_STALL_SECONDS"
DEFAULT_STALL_S = 120.0


#: run beside the stub: when the stub dies without finalize() (SIGKILL, a crash), the engine's
#: processes would live on (vLLM's EngineCore does not watch its parent); this kills them then.
_WATCHDOG = """
import os, signal, sys, time
stub, pids = int(sys.argv[1]), [int(p) for p in sys.argv[2:]]
while os.getppid() == stub:
    time.sleep(1.0)
for pid in pids:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
"""


def engine_processes(root: int) -> list[int]:
    """Every process below ``root`` (the engine core and its workers), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text(encoding="ascii", errors="replace").rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: list[int] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return sorted(found)


def process_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, dead but not yet reaped, counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return False
    fields = stat.rsplit(")", 1)[1].split()
    return bool(fields) and fields[0] not in ("Z", "X", "x")


def stall_seconds(environ: dict[str, str] | os._Environ[str]) -> float | None:
    """How long requests may see no output before the engine counts as wedged (None: never)."""
    raw = environ.get(STALL_ENV, "").strip()
    try:
        value = float(raw) if raw else DEFAULT_STALL_S
    except ValueError:
        value = DEFAULT_STALL_S
    return value if value > 0 and math.isfinite(value) else None


class EngineHealth:
    """Whether an engine is alive: its processes, vLLM's own error flag, and progress.

    ``problem()`` says why the engine is dead or wedged, or None while it is fine. Progress:
    while requests are in the engine, some output must come at least every ``stall`` seconds
    (a step that never ends: a hung worker, a stopped process).
    """

    def __init__(self, pids: list[int], *, stall: float | None, clock: Any = time.monotonic) -> None:
        self.pids = list(pids)
        self.stall = stall
        self._clock = clock
        self._busy_since: float | None = None
        self._last_output = clock()

    def busy(self, requests: int) -> None:
        """The engine holds ``requests`` requests now (0: idle, no progress expected)."""
        if requests <= 0:
            self._busy_since = None
        elif self._busy_since is None:
            self._busy_since = self._last_output = self._clock()

    def progressed(self) -> None:
        self._last_output = self._clock()

    def problem(self, engine: Any) -> str | None:
        for pid in self.pids:
            if not process_alive(pid):
                return f"engine process {pid} is gone"
        if engine is not None and bool(getattr(engine, "errored", False)):
            return "the engine reported itself dead (EngineDeadError)"
        if self.stall is not None and self._busy_since is not None:
            quiet = self._clock() - self._last_output
            if quiet > self.stall:
                return f"no output for {quiet:.0f} s while requests were in the engine"
        return None


def engine_pids() -> list[int]:
    """The engine's processes (vLLM names them VLLM::...), else every process below the stub."""
    pids = engine_processes(os.getpid())
    named = []
    for pid in pids:
        try:
            comm = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"VLLM" in comm or b"EngineCore" in comm:
            named.append(pid)
    return named or pids


def start_watchdog(warn: Callable[[str], None]) -> subprocess.Popen[bytes] | None:
    """A process that kills the engine's processes once the stub is gone (None: nothing to
    watch, or it could not start; ``warn`` hears why)."""
    pids = engine_processes(os.getpid())
    if not pids:
        return None
    try:
        return subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(os.getpid()), *map(str, pids)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except OSError as exc:
        warn(f"no watchdog for the engine's processes: {exc}")
        return None
