"""The front's own Prometheus metrics (text exposition format 0.0.4), kept in memory.

Requests by model, endpoint, status and API key id; time to first token and end-to-end latency
histograms; prompt and completion tokens by model and key id, as the model counted them; requests
in flight. A key is shown by its id (:mod:`tritonkit.openai_front.auth`), never by its text;
``key="none"`` on a front without keys.
"""

from __future__ import annotations

import bisect
import json
import os
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

from tritonkit._processes import pid_alive
from tritonkit.openai_front.auth import ANONYMOUS

__all__ = ["FrontMetrics", "SharedMetrics"]

_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
_PREFIX = "tritonkit_openai_"


def _labels(names: tuple[str, ...], values: tuple[str, ...]) -> str:
    def esc(v: str) -> str:
        return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')

    return ",".join(f'{n}="{esc(v)}"' for n, v in zip(names, values, strict=True))


class _Histogram:
    def __init__(self) -> None:
        self.counts = [0] * (len(_BUCKETS) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(_BUCKETS, value)] += 1
        self.total += value


class FrontMetrics:
    """Counters and histograms of the front; thread-safe; :meth:`render` is the /metrics body."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: dict[tuple[str, str, str, str], int] = defaultdict(int)
        self._tokens: dict[tuple[str, str, str], int] = defaultdict(int)
        self._ttft: dict[str, _Histogram] = defaultdict(_Histogram)
        self._e2e: dict[str, _Histogram] = defaultdict(_Histogram)
        self._stalled: dict[str, int] = defaultdict(int)
        self._cut_short: dict[str, int] = defaultdict(int)
        self._active = 0

    def started(self) -> None:
        with self._lock:
            self._active += 1

    def finished(
        self, model: str, endpoint: str, status: int, seconds: float | None, *, key: str = ANONYMOUS
    ) -> None:
        with self._lock:
            self._active -= 1
            self._requests[(model, endpoint, str(status), key)] += 1
            if seconds is not None:
                self._e2e[model].observe(seconds)

    def first_token(self, model: str, seconds: float) -> None:
        with self._lock:
            self._ttft[model].observe(seconds)

    def stalled(self, model: str) -> None:
        """A stream that went silent past its idle limit and was ended by the front."""
        with self._lock:
            self._stalled[model] += 1

    def cut_short(self, model: str) -> None:
        """An answer whose stream ended before the engine's last piece (no finish reason came)."""
        with self._lock:
            self._cut_short[model] += 1

    def tokens(self, model: str, *, prompt: int | None, completion: int | None, key: str = ANONYMOUS) -> None:
        with self._lock:
            if prompt:
                self._tokens[(model, "prompt", key)] += prompt
            if completion:
                self._tokens[(model, "completion", key)] += completion

    def state(self) -> dict[str, Any]:
        """Every counter as plain JSON data (what :meth:`absorb` adds back)."""
        with self._lock:
            return {
                "active": self._active,
                "requests": [[*k, v] for k, v in self._requests.items()],
                "tokens": [[*k, v] for k, v in self._tokens.items()],
                "ttft": {m: [h.counts, h.total] for m, h in self._ttft.items()},
                "e2e": {m: [h.counts, h.total] for m, h in self._e2e.items()},
                "stalled": dict(self._stalled),
                "cut_short": dict(self._cut_short),
            }

    def absorb(self, state: dict[str, Any]) -> None:
        """Add another worker's :meth:`state` to these counters."""
        with self._lock:
            self._active += int(state.get("active", 0))
            for model, endpoint, status, key, count in state.get("requests", []):
                self._requests[(model, endpoint, status, key)] += int(count)
            for model, kind, key, count in state.get("tokens", []):
                self._tokens[(model, kind, key)] += int(count)
            for key, counter in (("stalled", self._stalled), ("cut_short", self._cut_short)):
                for model, count in state.get(key, {}).items():
                    counter[model] += int(count)
            for key, table in (("ttft", self._ttft), ("e2e", self._e2e)):
                for model, (counts, total) in state.get(key, {}).items():
                    hist = table[model]
                    if len(counts) == len(hist.counts):
                        hist.counts = [a + int(b) for a, b in zip(hist.counts, counts, strict=True)]
                        hist.total += float(total)

    def render(self) -> str:
        with self._lock:
            lines = [
                f"# HELP {_PREFIX}requests_total Requests answered, by model, endpoint, HTTP status and "
                "API key id.",
                f"# TYPE {_PREFIX}requests_total counter",
            ]
            for (model, endpoint, status, key), count in sorted(self._requests.items()):
                labels = _labels(("model", "endpoint", "status", "key"), (model, endpoint, status, key))
                lines.append(f"{_PREFIX}requests_total{{{labels}}} {count}")
            lines += [
                f"# HELP {_PREFIX}requests_active Requests being answered now.",
                f"# TYPE {_PREFIX}requests_active gauge",
                f"{_PREFIX}requests_active {self._active}",
                f"# HELP {_PREFIX}tokens_total Tokens in and out as the model counted them, by model, "
                "kind (prompt, completion) and API key id.",
                f"# TYPE {_PREFIX}tokens_total counter",
            ]
            for (model, kind, key), count in sorted(self._tokens.items()):
                labels = _labels(("model", "kind", "key"), (model, kind, key))
                lines.append(f"{_PREFIX}tokens_total{{{labels}}} {count}")
            for name, helptext, counter in (
                (
                    "stalled_streams_total",
                    "Streams the front ended because the model sent nothing for its idle limit (the "
                    "request cancelled in Triton), by model.",
                    self._stalled,
                ),
                (
                    "cut_short_answers_total",
                    "Answers whose stream from Triton ended before the engine's last piece (no finish "
                    "reason came), failed with an error, by model.",
                    self._cut_short,
                ),
            ):
                lines += [f"# HELP {_PREFIX}{name} {helptext}", f"# TYPE {_PREFIX}{name} counter"]
                for model, count in sorted(counter.items()):
                    lines.append(f"{_PREFIX}{name}{{{_labels(('model',), (model,))}}} {count}")
            for name, helptext, table in (
                ("time_to_first_token_seconds", "Seconds from the request to its first token.", self._ttft),
                ("request_duration_seconds", "Seconds from the request to its last byte.", self._e2e),
            ):
                lines += [f"# HELP {_PREFIX}{name} {helptext}", f"# TYPE {_PREFIX}{name} histogram"]
                for model, hist in sorted(table.items()):
                    cumulative = 0
                    for bound, count in zip((*_BUCKETS, float("inf")), hist.counts, strict=True):
                        cumulative += count
                        le = "+Inf" if bound == float("inf") else repr(bound)
                        labels = _labels(("model", "le"), (model, le))
                        lines.append(f"{_PREFIX}{name}_bucket{{{labels}}} {cumulative}")
                    lines.append(f"{_PREFIX}{name}_sum{{{_labels(('model',), (model,))}}} {hist.total}")
                    lines.append(f"{_PREFIX}{name}_count{{{_labels(('model',), (model,))}}} {cumulative}")
            return "\n".join(lines) + "\n"


class SharedMetrics:
    """One worker's share of the front's metrics when ``--workers`` runs several processes.

    Each worker writes its counters to ``<folder>/worker-<pid>.json`` (atomically, at most every
    ``interval`` seconds while they change, and when it stops); ``/metrics``, whichever worker
    answers it, is the sum of its own live counters and every other worker's file. Counters of a
    worker that has exited stay in the sum (a counter never goes down); its requests in flight
    do not.
    """

    def __init__(self, metrics: FrontMetrics, folder: Path, *, interval: float = 0.2) -> None:
        self.metrics = metrics
        self.folder = folder
        self.interval = interval
        self.path = folder / f"worker-{os.getpid()}.json"
        self._stop = threading.Event()
        self._written: dict[str, Any] | None = None
        self._thread = threading.Thread(target=self._run, name="tritonkit-openai-metrics", daemon=True)

    def start(self) -> SharedMetrics:
        self.flush()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self.flush(active=False)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.flush()

    def flush(self, *, active: bool = True) -> None:
        state = self.metrics.state()
        state["pid"] = os.getpid()
        if not active:
            state["active"] = 0
        if state == self._written:
            return
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, self.path)
        self._written = state

    def render(self) -> str:
        total = FrontMetrics()
        total.absorb(self.metrics.state())
        for path in sorted(self.folder.glob("worker-*.json")):
            if path == self.path:
                continue
            try:
                state = json.loads(path.read_text())
            except (OSError, ValueError):
                continue  # a worker replacing its file right now: counted at the next scrape
            if not pid_alive(int(state.get("pid", 0))):
                state["active"] = 0
            total.absorb(state)
        return total.render()

