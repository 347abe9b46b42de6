"""Bring a served repository's models back after their process died: ``tritonkit serve``'s healer.

Triton 2.51 itself never does. Measured on a local server:

- a vLLM stage whose engine dies unloads itself (tritonkit's vllm backend, explicit model
  control): its model, the ensembles using it and the server turn not ready; nothing loads it
  again;
- a Python stage whose stub process dies (``kill -9``, an out-of-memory kill) stays READY and
  answers every request ``Stub process '<instance>' is not healthy`` (HTTP 500) forever.

The healer looks every ``period`` seconds at the repository index, at the server's stub
processes and at the gauge ``tritonkit_engine_alive`` tritonkit's vllm backend exports (0 once
its engine died or wedged: the model then answers UNAVAILABLE); with ``probe_period``, it also
sends each LLM stage (and each model in ``probe_models``) a small request of its own that often
(:mod:`tritonkit.server._probe`): a dead engine or stub is then seen with no user's request in
flight, and without seeing Triton's processes. A model that was ready once and
is now down (unloaded, a stub gone, an engine dead) is unloaded (readiness then says so) and
loaded again, composing models before ensembles, with a backoff
between failed tries and at most ``max_reloads`` reloads per model in ``window`` seconds; each
step is said in one line. It needs explicit model control (``tritonkit serve`` starts Triton so).
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritonkit.server._probe import Probe, dead_reason, probe_for

logger = logging.getLogger(__name__)

STUB_BINARY = "triton_python_backend_stub"
#: the stub's command line: argv[5] is the server's pid, argv[8] the model instance's name
_STUB_PARENT_ARG, _STUB_INSTANCE_ARG = 5, 8

#: tritonkit's vllm backend: 0 once a model instance's engine died (tritonkit/triton_side/backends/vllm)
ALIVE_METRIC = "tritonkit_engine_alive"
_ALIVE_LINE = re.compile(rf'^{ALIVE_METRIC}{{[^}}]*model="([^"]+)"[^}}]*}} (\S+)', re.MULTILINE)

DEFAULT_PERIOD_S = 0.5
DEFAULT_MAX_RELOADS = 5
DEFAULT_WINDOW_S = 600.0
FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 30.0


def stub_processes(server_pid: int, proc: Path = Path("/proc")) -> dict[int, str]:
    """The Python backend stubs a tritonserver started: pid -> model instance name."""
    found: dict[int, str] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text(encoding="ascii", errors="replace")
            state = stat.rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if len(argv) <= _STUB_INSTANCE_ARG or not argv[0].endswith(STUB_BINARY.encode()) or state == "Z":
            continue
        if argv[_STUB_PARENT_ARG] != str(server_pid).encode():
            continue
        found[int(entry.name)] = argv[_STUB_INSTANCE_ARG].decode("utf-8", "replace")
    return found


def dead_engines(metrics_text: str) -> set[str]:
    """The models with an instance whose ``tritonkit_engine_alive`` gauge reads 0."""
    dead = set()
    for model, value in _ALIVE_LINE.findall(metrics_text):
        try:
            if float(value) == 0:
                dead.add(model)
        except ValueError:
            continue
    return dead


def model_of_instance(instance: str, models: set[str]) -> str | None:
    """The model an instance name (``<model>_<group>_<n>`` by default) belongs to: the longest match."""
    matches = [m for m in models if instance == m or instance.startswith(m + "_")]
    return max(matches, key=len) if matches else None


@dataclass
class _Reloads:
    times: list[float] = field(default_factory=list)
    next_try: float = 0.0
    backoff: float = FIRST_BACKOFF_S
    gave_up: bool = False


class Healer:
    """Watches one server's models and reloads those that went down (see the module doc)."""

    def __init__(
        self,
        server: Any,
        *,
        say: Callable[[str], None],
        warn: Callable[[str], None],
        period: float = DEFAULT_PERIOD_S,
        max_reloads: int = DEFAULT_MAX_RELOADS,
        window: float = DEFAULT_WINDOW_S,
        load_timeout: float | None = None,
        probe_period: float | None = None,
        probe_models: Collection[str] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.server = server
        self.say = say
        self.warn = warn
        self.period = period
        self.max_reloads = max_reloads
        self.window = window
        self.load_timeout = load_timeout or float(getattr(server, "startup_timeout", 180.0))
        self._clock = clock
        self._wanted: set[str] = set()
        self._ensembles: set[str] = set()
        self._stubs: dict[int, str] = {}
        self._down: set[str] = set()
        self._reloads: dict[str, _Reloads] = {}
        self.probe_period = probe_period
        self.probe_models = frozenset(probe_models)
        self._probes: dict[str, Probe] = {}
        self._probed: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: what the healer did, in order: (model, what) — for tests and the chaos benchmark
        self.events: list[tuple[str, str]] = []

    # -- lifecycle --------------------------------------------------------------------------

    def baseline(self) -> None:
        """Remember the models ready now (the ones to keep ready) and their stubs."""
        index = self.server.repository_index()
        self._wanted = {str(e["name"]) for e in index if e.get("state") == "READY"}
        self._ensembles = {m for m in self._wanted if self._is_ensemble(m)}
        self._stubs = self._current_stubs(self._wanted)
        self._down = set()
        self._probes = self._find_probes(self._wanted) if self.probe_period else {}
        self._probed = {}

    def start(self) -> Healer:
        self.baseline()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="tritonkit-healer", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.load_timeout + 5)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            try:
                self.poll()
            except Exception as exc:  # noqa: BLE001 - the server may be restarting: look again
                logger.debug("healer: %s", exc)

    # -- one look ---------------------------------------------------------------------------

    def poll(self) -> None:
        """Look once; reload (at most) one model that is down."""
        if not getattr(self.server, "running", True):
            return
        index = self.server.repository_index()
        states = {str(e["name"]): str(e.get("state") or "") for e in index}
        ready = {m for m, s in states.items() if s == "READY"}
        broken: list[str] = []
        current = self._current_stubs(ready)
        for pid, model in self._stubs.items():
            if pid not in current and model in ready:
                self.say(f"model '{model}': its Python stub process {pid} died; reloading the model")
                self.events.append((model, "stub died"))
                broken.append(model)
        self._stubs = current
        for model in sorted(self._dead_engines() & ready - set(broken)):
            self.say(f"model '{model}': its vLLM engine died; reloading the model")
            self.events.append((model, "engine died"))
            broken.append(model)
        for model in self._probes_due(ready - set(broken)):
            why = self._probe(model)
            if why is not None:
                self.say(f"model '{model}': the healer's probe was refused ({why}); reloading the model")
                self.events.append((model, "probe refused"))
                broken.append(model)
        down = [m for m in sorted(self._wanted) if states.get(m) not in ("READY", "LOADING", "UNLOADING")]
        for model in sorted(set(down) - self._down):
            reason = next((str(e.get("reason") or "") for e in index if e.get("name") == model), "")
            state = states.get(model) or "gone"
            self.say(f"model '{model}' is down ({state}{': ' + reason if reason else ''})")
            self.events.append((model, "down"))
        self._down = set(down)
        # composing models first: loading one brings back the ensembles that use it
        todo = sorted(set(broken) | set(down), key=lambda m: (m in self._ensembles, m))
        for model in todo:
            if self._reload(model, unload_first=model in broken):
                return

    def _reload(self, model: str, *, unload_first: bool) -> bool:
        """Reload ``model`` when its backoff and limit allow; True when a reload was tried."""
        record = self._reloads.setdefault(model, _Reloads())
        now = self._clock()
        if record.gave_up or now < record.next_try:
            return False
        record.times = [t for t in record.times if now - t < self.window]
        if len(record.times) >= self.max_reloads:
            record.gave_up = True
            self.warn(
                f"model '{model}': {self.max_reloads} reloads within {self.window:.0f} s; giving up, it "
                "stays unavailable (and the server not ready) until the server is restarted"
            )
            self.events.append((model, "gave up"))
            return False
        record.times.append(now)
        attempt = len(record.times)
        if unload_first:
            status, text = self.server.control_model("unload", model, timeout=self.load_timeout)
            if status != 200:
                self.warn(f"model '{model}': unload failed (HTTP {status}): {text.strip()}")
        self.say(f"model '{model}': reloading (attempt {attempt} of {self.max_reloads})")
        began = self._clock()
        status, text = self.server.control_model("load", model, timeout=self.load_timeout)
        if status == 200:
            self.say(f"model '{model}': ready again after {self._clock() - began:.1f} s")
            self.events.append((model, "reloaded"))
            record.backoff = FIRST_BACKOFF_S
            record.next_try = 0.0
            self._stubs = self._current_stubs(self._wanted)
        else:
            record.next_try = self._clock() + record.backoff
            self.warn(
                f"model '{model}': reload failed (HTTP {status}): {text.strip()[:300]}; "
                f"next try in {record.backoff:.0f} s"
            )
            self.events.append((model, "reload failed"))
            record.backoff = min(record.backoff * 2, MAX_BACKOFF_S)
        return True

    # -- helpers ----------------------------------------------------------------------------

    def _current_stubs(self, models: set[str]) -> dict[int, str]:
        pid = getattr(self.server, "pid", None)
        if not isinstance(pid, int):
            return {}  # a container's processes are not ours to look at
        stubs = {}
        for stub, instance in stub_processes(pid).items():
            model = model_of_instance(instance, models)
            if model is not None:
                stubs[stub] = model
        return stubs

    def _dead_engines(self) -> set[str]:
        url = getattr(self.server, "metrics_url", None)
        if not isinstance(url, str):
            return set()
        try:
            with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url, timeout=3) as reply:
                return dead_engines(reply.read().decode("utf-8", "replace"))
        except (OSError, urllib.error.URLError):
            return set()

    def _find_probes(self, models: set[str]) -> dict[str, Probe]:
        """The probe of each model that gets one (LLM stages, and the models named)."""
        probes = {}
        for model in sorted(models):
            try:
                status, body = self.server._request("GET", f"/v2/models/{model}/config")
                config = json.loads(body) if status == 200 else None
            except (OSError, ValueError):
                config = None
            named = model in self.probe_models
            probe = probe_for(model, config, named=named) if isinstance(config, dict) else None
            if probe is not None:
                probes[model] = probe
            elif model in self.probe_models:
                self.warn(f"model '{model}': no probe can be made from its config; it is not probed")
        return probes

    def _probes_due(self, ready: set[str]) -> list[str]:
        now, period = self._clock(), self.probe_period or 0.0
        due = [
            m for m in sorted(self._probes) if m in ready and now - self._probed.get(m, -math.inf) >= period
        ]
        for model in due:
            self._probed[model] = now
        return due

    def _probe(self, model: str) -> str | None:
        """Why the model's probe says its process is gone, or None (alive, or no answer in time)."""
        probe = self._probes[model]
        try:
            status, body = self.server._request("POST", probe.path, probe.body)
        except OSError as exc:  # no answer in time: no verdict (a busy model may queue it)
            logger.debug("probe of %s: %s", model, exc)
            return None
        return dead_reason(status, body)

    def _is_ensemble(self, model: str) -> bool:
        try:
            status, body = self.server._request("GET", f"/v2/models/{model}/config")
        except OSError:
            return False
        return status == 200 and b'"platform":"ensemble"' in body.replace(b" ", b"")
