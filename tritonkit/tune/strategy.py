"""The search: which (config, concurrency) to measure next, and which config wins.

Pure logic over a :class:`Measurer` (the real one loads configs into Triton and runs perf's
load engine; tests pass synthetic response surfaces). Two strategies:

- ``default``: screen the start config with a concurrency sweep that stops at saturation (or at
  the first level over the latency budget), then hill-climb over the config dimensions: each
  neighbour is screened at the incumbent's best concurrency (one short measurement), and only a
  neighbour that beats the incumbent is swept further and becomes the new incumbent. Infeasible
  neighbours are never swept, so the search does not dig into the infeasible region.
- ``grid``: every distinct config at every concurrency level (ground truth).

Both finish the same way: the best few configs (the finalists) are re-measured with perf's full
stability rule, and the winner is the best confirmed one; when it is within noise of the
runner-up the result says so.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from tritonkit.errors import TuneError
from tritonkit.perf.cost import LatencyBudget, usd_per_million
from tritonkit.tune.space import Point, Space

__all__ = [
    "Measurement",
    "Measurer",
    "Objective",
    "Outcome",
    "SearchResult",
    "search",
]

STRATEGIES = ("default", "grid")
OBJECTIVES = ("throughput", "latency", "cost")


@dataclass(frozen=True)
class Outcome:
    """What one measurement of one config at one concurrency gave."""

    throughput: float = 0.0
    latency_us: Mapping[str, float] = field(default_factory=dict)  # avg, p50, p90, p95, p99, max
    errors: int = 0
    stable: bool = True
    failed: str | None = None  # Triton refused the config, or the measurement could not run
    spread_pct: float = 0.0  # how far the windows' throughputs strayed from their mean

    def to_dict(self) -> dict[str, Any]:
        return {
            "throughput": self.throughput,
            "latency_us": dict(self.latency_us),
            "errors": self.errors,
            "stable": self.stable,
            "failed": self.failed,
            "spread_pct": self.spread_pct,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Outcome:
        return cls(
            throughput=float(data["throughput"]),
            latency_us={str(k): float(v) for k, v in dict(data.get("latency_us") or {}).items()},
            errors=int(data.get("errors", 0)),
            stable=bool(data.get("stable", True)),
            failed=data.get("failed"),
            spread_pct=float(data.get("spread_pct", 0.0)),
        )


class Measurer(Protocol):
    """Loads a candidate (``model -> field -> value``) and measures it at one concurrency."""

    def measure(
        self, settings: Mapping[str, Mapping[str, Any]], concurrency: int, *, confirm: bool
    ) -> Outcome: ...


@dataclass(frozen=True)
class Objective:
    """What "best" means, and which results count as feasible."""

    kind: str = "throughput"
    latency_stat: str = "p99"  # the latency objective's statistic
    budget: LatencyBudget | None = None
    min_throughput: float | None = None
    usd_per_hour: float | None = None  # cost objective

    def __post_init__(self) -> None:
        if self.kind not in OBJECTIVES:
            raise TuneError(f"unknown objective '{self.kind}'", hint="use throughput, latency or cost")
        if self.kind == "cost" and not self.usd_per_hour:
            raise TuneError(
                "--objective cost needs a price", hint="pass --sku VM_SIZE or --price USD_PER_HOUR"
            )

    @property
    def unit(self) -> str:
        return {"throughput": "infer/s", "latency": "us", "cost": "USD/1M"}[self.kind]

    def value(self, o: Outcome) -> float:
        """The objective as reported (infer/s, microseconds or dollars per million)."""
        if self.kind == "throughput":
            return o.throughput
        if self.kind == "latency":
            return float(o.latency_us.get(self.latency_stat, math.inf))
        if o.throughput <= 0 or self.usd_per_hour is None:
            return math.inf
        return usd_per_million(self.usd_per_hour, o.throughput)

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
        if self.min_throughput is not None and o.throughput < self.min_throughput:
            misses.append(f"throughput {o.throughput:.1f} < {self.min_throughput:g} infer/s")
            excess += self.min_throughput / o.throughput - 1.0
        if misses:
            return False, "; ".join(misses), -excess
        v = self.value(o)
        return True, "", v if self.kind == "throughput" else -v


@dataclass(frozen=True)
class Measurement:
    """One measurement as the search recorded it."""

    index: int
    point: Point
    signature: str
    settings: Mapping[str, Any]
    concurrency: int
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
        return f"{self.phase}|{self.concurrency}|{self.signature}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "point": list(self.point),
            "signature": self.signature,
            "settings": dict(self.settings),
            "concurrency": self.concurrency,
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

    @property
    def new_measurements(self) -> int:
        return sum(1 for m in self.measurements if not m.resumed)


class _OutOfBudgetError(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Search:
    def __init__(
        self,
        space: Space,
        objective: Objective,
        measurer: Measurer,
        *,
        max_measurements: int | None,
        deadline: float | None,
        finalists: int,
        min_gain_pct: float,
        saturation_pct: float,
        noise_pct: float,
        cache: Mapping[str, Outcome],
        on_measurement: Callable[[Measurement], None] | None,
        clock: Callable[[], float],
    ) -> None:
        self.space = space
        self.objective = objective
        self.measurer = measurer
        self.max_measurements = max_measurements
        self.deadline = deadline
        self.finalists = finalists
        self.min_gain = min_gain_pct / 100.0
        self.saturation = saturation_pct / 100.0
        self.noise_pct = noise_pct
        self.cache = dict(cache)
        self.on_measurement = on_measurement
        self.clock = clock
        self.levels = tuple(sorted(space.concurrency))
        self.reserve = finalists
        self.done: dict[str, Measurement] = {}  # key -> measurement
        self.order: list[Measurement] = []
        self.best: dict[str, Measurement] = {}  # signature -> best screening measurement

    # -- measuring ----------------------------------------------------------------------------

    def _budget_left(self, reserve: int) -> None:
        """Screening stops early enough to leave the finalists' confirmations room (in count,
        and in time: each estimated at twice the mean measurement so far); confirmations of
        the finalists always run, so a bounded run still ends with a confirmed winner."""
        if self.max_measurements is not None and len(self.order) + reserve >= self.max_measurements:
            raise _OutOfBudgetError("max-measurements")
        if self.deadline is not None and reserve:
            walls = [m.wall_s for m in self.order if not m.resumed]
            keep = reserve * 2 * (sum(walls) / len(walls)) if walls else 0.0
            if self.clock() + keep >= self.deadline:
                raise _OutOfBudgetError("budget")

    def measure(self, point: Point, level: int, *, phase: str = "screen") -> Measurement:
        sig = self.space.signature(point)
        key = f"{phase}|{level}|{sig}"
        if key in self.done:
            return self.done[key]
        cached = self.cache.get(key)
        if cached is None:
            # screening keeps room for the finalists' confirmations
            self._budget_left(self.reserve if phase == "screen" else 0)
        start = self.clock()
        outcome = (
            cached
            if cached is not None
            else self.measurer.measure(self.space.by_model(point), level, confirm=phase == "confirm")
        )
        feasible, why, score = self.objective.evaluate(outcome)
        m = Measurement(
            index=len(self.order) + 1,
            point=point,
            signature=sig,
            settings=self.space.settings(point),
            concurrency=level,
            phase=phase,
            outcome=outcome,
            feasible=feasible,
            violation=why,
            score=score,
            value=self.objective.value(outcome),
            wall_s=self.clock() - start,
            resumed=cached is not None,
        )
        self.done[key] = m
        self.order.append(m)
        if phase == "screen":
            prev = self.best.get(sig)
            if prev is None or _rank(m) > _rank(prev):
                self.best[sig] = m
        if self.on_measurement is not None:
            self.on_measurement(m)
        return m

    def _gain(self, new: Measurement, old: Measurement, threshold: float) -> bool:
        """Whether ``new`` beats ``old`` by more than ``threshold`` (relative)."""
        if new.feasible != old.feasible:
            return new.feasible
        if not new.feasible:
            return new.score > old.score
        if self.objective.kind == "throughput":
            return new.score > old.score * (1 + threshold)
        return new.score > old.score * (1 - threshold)  # scores are negative: less negative wins

    # -- strategies ---------------------------------------------------------------------------

    def _over_latency(self, m: Measurement) -> bool:
        budget = self.objective.budget
        if budget is None or m.outcome.failed:
            return False
        value = m.outcome.latency_us.get(budget.stat)
        return value is None or value > budget.limit_us

    def _can_climb(self, m: Measurement) -> bool:
        """Whether more load may still help: feasible, or short only on throughput (more load
        adds latency, so a latency miss, errors or a refused config end the climb)."""
        if m.feasible:
            return True
        return not (
            m.outcome.failed or m.outcome.errors or m.outcome.throughput <= 0 or self._over_latency(m)
        )

    def sweep(self, point: Point, start: int) -> Measurement:
        """Screen ``point`` from level index ``start`` up until saturation, down when needed."""
        first = self.measure(point, self.levels[start])
        best = first
        i = start
        while i + 1 < len(self.levels) and self._can_climb(best):
            nxt = self.measure(point, self.levels[i + 1])
            if _rank(nxt) > _rank(best):
                saturated = best.feasible and not self._gain(nxt, best, self.saturation)
                best = nxt
                i += 1
                if saturated:
                    break
            else:
                break
        walk_down = self._over_latency(first) or self.objective.kind == "latency"
        if best is first and start > 0 and walk_down:
            j = start - 1
            while j >= 0:
                lower = self.measure(point, self.levels[j])
                if _rank(lower) <= _rank(best):
                    break
                best = lower
                j -= 1
        return best

    def hill_climb(self, start: Point) -> None:
        current = start
        # throughput and cost peak at high load: start the first sweep mid-way (it walks down
        # when that level is over a latency budget); latency is best at the lowest load
        first = len(self.levels) // 2 if self.objective.kind != "latency" else 0
        self.sweep(current, first)
        while True:
            incumbent = self.best[self.space.signature(current)]
            nxt = self._better_neighbour(current, incumbent)
            if nxt is None:
                return
            self.sweep(nxt, self.levels.index(incumbent.concurrency))
            current = nxt

    def _better_neighbour(self, current: Point, incumbent: Measurement) -> Point | None:
        """First neighbour that beats the incumbent at its load (one short measurement each).

        A neighbour that ties but switches a feature on (dynamic batching, which makes the queue
        delay matter) is looked past: its own neighbours are probed too, since the feature's
        benefit may need a setting the plain step did not try.
        """
        ties: list[Point] = []
        for nb in self.space.neighbours(current):
            if self.space.signature(nb) == incumbent.signature:
                continue  # a step along a dimension that has no effect here
            probe = self.measure(nb, incumbent.concurrency)
            if self._gain(probe, incumbent, self.min_gain):
                return nb
            if (
                probe.feasible
                and self._gain(probe, incumbent, -self.min_gain)
                and _opens(self.space, current, nb)
            ):
                ties.append(nb)
        for tie in ties:
            for nb in self.space.neighbours(tie):
                if nb == current or self.space.signature(nb) in (
                    incumbent.signature,
                    self.space.signature(tie),
                ):
                    continue
                if not _opens(self.space, current, nb) or nb in self.space.neighbours(current):
                    continue
                probe = self.measure(nb, incumbent.concurrency)
                if self._gain(probe, incumbent, self.min_gain):
                    return nb
        return None

    def grid(self) -> None:
        for point in self.space.points():
            for level in self.levels:
                self.measure(point, level)

    def confirm(self) -> tuple[Measurement | None, Measurement | None, tuple[Measurement, ...]]:
        ranked = sorted(self.best.values(), key=_rank, reverse=True)
        chosen = [m for m in ranked if m.feasible][: self.finalists]
        confirmed: list[Measurement] = []
        for m in chosen:
            try:
                confirmed.append(self.measure(m.point, m.concurrency, phase="confirm"))
            except _OutOfBudgetError:
                break
        confirmed.sort(key=_rank, reverse=True)
        feasible = [c for c in confirmed if c.feasible]
        winner = feasible[0] if feasible else None
        runner = feasible[1] if len(feasible) > 1 else None
        return winner, runner, tuple(confirmed)


def _opens(space: Space, a: Point, b: Point) -> bool:
    """Whether ``b`` has settings in effect that ``a`` has not (e.g. batching switched on)."""
    keys_a = set(json.loads(space.signature(a)))
    keys_b = set(json.loads(space.signature(b)))
    return bool(keys_b - keys_a)


def _rank(m: Measurement) -> tuple[bool, float]:
    return (m.feasible, m.score)


def within_noise(a: Measurement, b: Measurement, noise_pct: float) -> bool:
    """Whether two confirmed results are closer than the measurement noise."""
    if not (a.feasible and b.feasible) or a.value == 0 or not math.isfinite(a.value):
        return False
    diff = abs(a.value - b.value) / abs(a.value) * 100.0
    noise = max(noise_pct, a.outcome.spread_pct, b.outcome.spread_pct)
    return diff <= noise


def search(
    space: Space,
    objective: Objective,
    measurer: Measurer,
    *,
    strategy: str = "default",
    start: Point | None = None,
    max_measurements: int | None = None,
    deadline: float | None = None,
    finalists: int = 2,
    min_gain_pct: float = 3.0,
    saturation_pct: float = 5.0,
    noise_pct: float = 5.0,
    cache: Mapping[str, Outcome] | None = None,
    on_measurement: Callable[[Measurement], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> SearchResult:
    """Run ``strategy`` over ``space`` and confirm the finalists.

    ``cache`` maps :attr:`Measurement.key` to outcomes from an earlier run (a checkpoint): the
    search is deterministic, so replaying it over the cache resumes where the run stopped.
    ``max_measurements`` counts every measurement (cached ones too); ``deadline`` is a
    ``clock()`` value after which no new measurement starts.
    """
    if strategy not in STRATEGIES:
        raise TuneError(f"unknown strategy '{strategy}'", hint="use default or grid")
    if not space.concurrency:
        raise TuneError("the search space has no concurrency level to measure")
    if max_measurements is not None and max_measurements < 1:
        raise TuneError("--max-measurements must be at least 1")
    s = _Search(
        space,
        objective,
        measurer,
        max_measurements=max_measurements,
        deadline=deadline,
        finalists=max(1, finalists),
        min_gain_pct=min_gain_pct,
        saturation_pct=saturation_pct,
        noise_pct=noise_pct,
        cache=cache or {},
        on_measurement=on_measurement,
        clock=clock,
    )
    stopped = "converged" if strategy == "default" else "complete"
    try:
        if strategy == "grid":
            s.grid()
        else:
            s.hill_climb(start if start is not None else tuple(0 for _ in space.dimensions))
    except _OutOfBudgetError as exc:
        stopped = exc.reason
    winner, runner, confirmed = s.confirm()
    return SearchResult(
        measurements=tuple(s.order),
        winner=winner,
        runner_up=runner,
        within_noise=bool(winner and runner and within_noise(winner, runner, noise_pct)),
        noise_pct=noise_pct,
        stopped_by=stopped,
        finalists=confirmed,
    )


def cache_from_lines(lines: list[str]) -> dict[str, Outcome]:
    """Checkpoint lines (JSONL, one measurement each) -> the search cache."""
    cache: dict[str, Outcome] = {}
    for line in lines:
        data = json.loads(line)
        if data.get("type") != "measurement":
            continue
        key = f"{data['phase']}|{data['concurrency']}|{data['signature']}"
        cache[key] = Outcome.from_dict(data["outcome"])
    return cache
