"""What the search measures and judges: an :class:`Outcome` of one measurement, the
:class:`Objective` that scores it, the :class:`Measurement` the search records and the
:class:`SearchResult` it returns."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from tritonkit._records import JsonRecord, from_record
from tritonkit.errors import TuneError
from tritonkit.perf.cost import LatencyBudget, usd_per_million
from tritonkit.perf.stream_metrics import StreamLimit
from tritonkit.tune.space import Point
from tritonkit.tune.verdict import FinalCheck

__all__ = [
    "OBJECTIVE_KINDS",
    "Measurement",
    "Measurer",
    "Objective",
    "ObjectiveKind",
    "Outcome",
    "SearchResult",
    "cache_from_lines",
    "level_label",
]


@dataclass(frozen=True)
class ObjectiveKind:
    """One objective: its unit, which way is better, and how to read it off an outcome.

    A registry (``OBJECTIVE_KINDS``) rather than a closed if-chain, so new objectives (e.g. a
    streaming model's time to first token, from ``Outcome.metrics``) plug in without touching
    the search."""

    unit: str
    higher_is_better: bool
    value: Callable[[Objective, Outcome], float]


def _throughput_value(_: Objective, o: Outcome) -> float:
    return o.throughput


def _latency_value(obj: Objective, o: Outcome) -> float:
    return float(o.latency_us.get(obj.latency_stat, math.inf))


def _tokens_value(_: Objective, o: Outcome) -> float:
    return float(o.metrics.get("output_tokens_per_s", 0.0))


def _ttft_value(obj: Objective, o: Outcome) -> float:
    return float(o.metrics.get(f"ttft_{obj.latency_stat}_us", math.inf))


def _cost_value(obj: Objective, o: Outcome) -> float:
    if o.throughput <= 0 or obj.usd_per_hour is None:
        return math.inf
    return usd_per_million(obj.usd_per_hour, o.throughput)


#: objective name -> how it is read and compared (extend to add an objective)
OBJECTIVE_KINDS: dict[str, ObjectiveKind] = {
    "throughput": ObjectiveKind("infer/s", True, _throughput_value),
    "latency": ObjectiveKind("us", False, _latency_value),
    "cost": ObjectiveKind("USD/1M", False, _cost_value),
    # streaming (decoupled) models, from perf --stream's figures in Outcome.metrics
    "tokens_per_s": ObjectiveKind("tokens/s", True, _tokens_value),
    "ttft": ObjectiveKind("us", False, _ttft_value),
}


def level_label(level: float) -> str:
    """A load level as people write it: ``8`` (concurrency), ``12.5`` (requests/s)."""
    return f"{level:g}"


@dataclass(frozen=True)
class Outcome(JsonRecord):
    """What one measurement of one config at one load level gave."""

    throughput: float = 0.0
    latency_us: Mapping[str, float] = field(default_factory=dict)  # avg, p50, p90, p95, p99, max
    errors: int = 0
    stable: bool = True
    failed: str | None = None  # Triton refused the config, or the measurement could not run
    spread_pct: float = 0.0  # how far the windows' throughputs strayed from their mean
    #: CPU cores the load generator used; ``client_bound``: it ran out of them, so the numbers
    #: are the client's limit, not the server's
    client_cpu: float = 0.0
    client_bound: bool = False
    #: further metrics (e.g. a streaming model's time to first token) for pluggable objectives
    metrics: Mapping[str, float] = field(default_factory=dict)
    #: the windows the figures come from: how many ran and how long each was (they adapt)
    windows: int = 0
    window_ms: int = 0
    #: where the measurement's time went, in seconds: ``load_s`` (the candidate loaded and read
    #: back), ``warmup_s``, ``windows_s`` (the measurement windows) and ``overhead_s`` (the load
    #: generator's set-up and teardown); see :mod:`tritonkit.tune.timing`
    timing: Mapping[str, float] = field(default_factory=dict)
    #: why the windows stopped before the stability rule was met (screening a candidate that
    #: cannot reach the incumbent); "" when they ran to it
    cut_short: str = ""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Outcome:
        # throughput is the one figure a stored outcome must have; the rest default
        return from_record(cls, data, values={"throughput": float(data["throughput"])})


class Measurer(Protocol):
    """Loads a candidate (``model -> field -> value``) and measures it at one load level (a
    concurrency or a request rate, as the run's load mode says)."""

    def measure(
        self,
        settings: Mapping[str, Mapping[str, Any]],
        load: float,
        *,
        confirm: bool,
        bar: float | None = None,
    ) -> Outcome:
        """``bar``: when given (screening), a throughput below which the figure decides
        nothing: the measurer may stop early once its windows cannot reach it."""
        ...


@dataclass(frozen=True)
class Objective:
    """What "best" means, and which results count as feasible."""

    kind: str = "throughput"
    latency_stat: str = "p99"  # the latency objective's statistic
    budget: LatencyBudget | None = None
    min_throughput: float | None = None
    usd_per_hour: float | None = None  # cost objective
    #: streaming constraints, e.g. ttft_p99 <= 200 ms, itl_p99 <= 40 ms (Outcome.metrics)
    stream_limits: tuple[StreamLimit, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in OBJECTIVE_KINDS:
            raise TuneError(
                f"unknown objective '{self.kind}'", hint="use one of " + ", ".join(OBJECTIVE_KINDS)
            )
        if self.kind == "cost" and not self.usd_per_hour:
            raise TuneError(
                "--objective cost needs a price", hint="pass --sku VM_SIZE or --price USD_PER_HOUR"
            )

    @property
    def unit(self) -> str:
        return OBJECTIVE_KINDS[self.kind].unit

    @property
    def higher_is_better(self) -> bool:
        return OBJECTIVE_KINDS[self.kind].higher_is_better

    def value(self, o: Outcome) -> float:
        """The objective as reported (infer/s, microseconds or dollars per million)."""
        return OBJECTIVE_KINDS[self.kind].value(self, o)

    def evaluate(self, o: Outcome) -> tuple[bool, str, float]:
        """(feasible, why not, score): score is higher-is-better; for an infeasible result it
        is minus how far it misses (so a search can head back towards feasibility)."""
        if o.failed:
            return False, f"failed: {o.failed}", -math.inf
        if o.throughput <= 0:
            return False, "no request succeeded", -1e9
        if o.errors:
            return False, f"{o.errors} request errors", -1e6
        misses: list[str] = []
        excess = 0.0
        if self.budget is not None:
            lat = o.latency_us.get(self.budget.stat)
            if lat is None or lat > self.budget.limit_us:
                misses.append(f"{self.budget.stat} {(lat or math.inf) / 1000:.2f} ms > {self.budget}")
                excess += (lat or math.inf) / self.budget.limit_us - 1.0
        for lim in self.stream_limits:
            key = f"{lim.metric}_{lim.stat}_us"
            got = o.latency_us.get(lim.stat) if lim.metric == "latency" else o.metrics.get(key)
            if got is None or got > lim.limit_us:
                misses.append(f"{lim.metric} {lim.stat} {(got or math.inf) / 1000:.2f} ms > {lim}")
                excess += (got or math.inf) / lim.limit_us - 1.0
        if self.kind in ("tokens_per_s", "ttft") and "output_tokens_per_s" not in o.metrics:
            misses.append(f"no streaming figures (objective {self.kind} needs a decoupled model)")
            excess += 1.0
        if self.min_throughput is not None and o.throughput < self.min_throughput:
            misses.append(f"throughput {o.throughput:.1f} < {self.min_throughput:g} infer/s")
            excess += self.min_throughput / o.throughput - 1.0
        if misses:
            return False, "; ".join(misses), -excess
        v = self.value(o)
        return True, "", v if self.higher_is_better else -v


@dataclass(frozen=True)
class Measurement:
    """One measurement as the search recorded it."""

    index: int
    point: Point
    signature: str
    settings: Mapping[str, Any]
    load: float  # the load level: a concurrency, or requests/s in request-rate mode
    phase: str  # screen | confirm
    outcome: Outcome
    feasible: bool
    violation: str
    score: float
    value: float
    wall_s: float
    resumed: bool = False

    @property
    def key(self) -> str:
        return f"{self.phase}|{level_label(self.load)}|{self.signature}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "point": list(self.point),
            "signature": self.signature,
            "settings": dict(self.settings),
            "concurrency": self.load,  # the checkpoint format keeps its key
            "phase": self.phase,
            "outcome": self.outcome.to_dict(),
            "feasible": self.feasible,
            "violation": self.violation,
            "score": self.score if math.isfinite(self.score) else None,
            "value": self.value if math.isfinite(self.value) else None,
            "wall_s": round(self.wall_s, 3),
        }


@dataclass(frozen=True)
class SearchResult:
    measurements: tuple[Measurement, ...]
    winner: Measurement | None
    runner_up: Measurement | None
    within_noise: bool
    noise_pct: float
    stopped_by: str  # converged | complete | max-measurements | budget
    finalists: tuple[Measurement, ...]
    #: the production load levels the user gave (empty: none; the sweep found the load)
    production_loads: tuple[float, ...] = ()
    #: level -> the best feasible measurement there (the per-load answer): a confirmed one where
    #: the level has one, so the winner's level names the winner
    per_level: tuple[tuple[float, Measurement], ...] = ()
    trials: int = 0  # candidates the surrogate proposed (default strategy)
    #: the winner and the original config re-measured in turns (None: no winner to check)
    check: FinalCheck | None = None

    @property
    def new_measurements(self) -> int:
        return sum(1 for m in self.measurements if not m.resumed)

    @property
    def client_bound(self) -> tuple[Measurement, ...]:
        """Measurements where the load generator ran out of CPU (say so; never a silent cap)."""
        return tuple(m for m in self.measurements if m.outcome.client_bound)


def cache_from_lines(lines: list[str]) -> dict[str, Outcome]:
    """Checkpoint lines (JSONL, one measurement each) -> the search cache."""
    cache: dict[str, Outcome] = {}
    for line in lines:
        data = json.loads(line)
        if data.get("type") != "measurement":
            continue
        key = f"{data['phase']}|{level_label(float(data['concurrency']))}|{data['signature']}"
        cache[key] = Outcome.from_dict(data["outcome"])
    return cache
