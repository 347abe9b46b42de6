"""The front's own Prometheus metrics (text exposition format 0.0.4), kept in memory.

Requests by model, endpoint, status and API key id; time to first token and end-to-end latency
histograms; prompt and completion tokens by model and key id, as the model counted them; requests
in flight. A key is shown by its id (:mod:`tritonkit.openai_front.auth`), never by its text;
``key="none"`` on a front without keys.
"""

from __future__ import annotations

import bisect
import threading
from collections import defaultdict

from tritonkit.openai_front.auth import ANONYMOUS

__all__ = ["FrontMetrics"]

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

    def tokens(self, model: str, *, prompt: int | None, completion: int | None, key: str = ANONYMOUS) -> None:
        with self._lock:
            if prompt:
                self._tokens[(model, "prompt", key)] += prompt
            if completion:
                self._tokens[(model, "completion", key)] += completion

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
