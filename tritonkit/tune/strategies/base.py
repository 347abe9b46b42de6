"""What every strategy shares: one :class:`Search` holding the measurements made so far (with
the checkpoint's cache and the budget), how two results compare, and the concurrency sweep the
climbing strategies move with."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from tritonkit.errors import TuneError
from tritonkit.tune.objective import Measurement, Measurer, Objective, Outcome, level_label
from tritonkit.tune.space import Point, Space

__all__ = ["PROBE_MARGIN", "BudgetSpentError", "Search", "opens", "rank", "told", "within_noise"]

#: a probe within this share of the incumbent is still worth a sweep (or a closer look)
PROBE_MARGIN = 0.10


class BudgetSpentError(TuneError):
    """The measurement budget (count or time) is spent: the search stops and confirms what it
    has. Caught inside :func:`tritonkit.tune.strategy.search`; ``reason`` is the stop reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Search:
    """The search state every strategy works on."""

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
        production: tuple[float, ...] = (),
        load_hint: Callable[[Mapping[str, Mapping[str, Any]]], float] | None = None,
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
        self.levels = tuple(sorted(space.loads))
        self.production = tuple(sorted(production))
        self.load_hint = load_hint
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
            raise BudgetSpentError("max-measurements")
        if self.deadline is not None and reserve:
            walls = [m.wall_s for m in self.order if not m.resumed]
            keep = reserve * 2 * (sum(walls) / len(walls)) if walls else 0.0
            if self.clock() + keep >= self.deadline:
                raise BudgetSpentError("budget")

    def bar(self, against: Measurement | None) -> float | None:
        """The throughput a candidate screened against ``against`` (the incumbent) must be able
        to reach for its figure to decide anything: the 10% a probe may trail the incumbent and
        still be swept (:func:`~tritonkit.tune.strategies.surrogate.evaluate`). Below it every
        decision (sweep, adopt, tie) comes out the same, so its windows may stop early."""
        if against is None or not against.feasible or self.objective.kind != "throughput":
            return None
        return against.value * (1 - PROBE_MARGIN)

    def measure(
        self, point: Point, level: float, *, phase: str = "screen", against: Measurement | None = None
    ) -> Measurement:
        """Measure ``point`` at ``level`` (once: a repeat returns the first measurement).
        ``against``: the incumbent a screening measurement is compared with (see :meth:`bar`)."""
        sig = self.space.signature(point)
        key = f"{phase}|{level_label(level)}|{sig}"
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
            else self.measurer.measure(
                self.space.by_model(point),
                level,
                confirm=phase != "screen",
                bar=self.bar(against) if phase == "screen" else None,
            )
        )
        feasible, why, score = self.objective.evaluate(outcome)
        m = Measurement(
            index=len(self.order) + 1,
            point=point,
            signature=sig,
            settings=self.space.settings(point),
            load=level,
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
            if prev is None or rank(m) > rank(prev):
                self.best[sig] = m
        if self.on_measurement is not None:
            self.on_measurement(m)
        return m

    def gains(self, new: Measurement, old: Measurement, threshold: float) -> bool:
        """Whether ``new`` beats ``old`` by more than ``threshold`` (relative)."""
        if new.feasible != old.feasible:
            return new.feasible
        if not new.feasible:
            return new.score > old.score
        if self.objective.higher_is_better:
            return new.score > old.score * (1 + threshold)
        return new.score > old.score * (1 - threshold)  # scores are negative: less negative wins

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
            if rank(nxt) > rank(best):
                saturated = best.feasible and not self.gains(nxt, best, self.saturation)
                best = nxt
                i += 1
                if saturated:
                    break
            else:
                break
        # more load did not help: less may (over the budget, a latency objective, or a client
        # that competes with the server for the same cores, where throughput peaks early)
        if best is first and start > 0:
            j = start - 1
            while j >= 0:
                lower = self.measure(point, self.levels[j])
                if rank(lower) <= rank(best):
                    break
                best = lower
                j -= 1
        return best

    def start_index(self, point: Point) -> int:
        """Where a first sweep of ``point`` starts: latency is best at the lowest load; throughput
        and cost peak at high load, so at the level the config's capacity suggests (the
        ``load_hint``), else mid-way (the sweep walks down when that level is over budget)."""
        if self.objective.kind == "latency":
            return 0
        if self.load_hint is None:
            return len(self.levels) // 2
        hint = self.load_hint(self.space.by_model(point))
        above = [i for i, lv in enumerate(self.levels) if lv >= hint]
        return above[0] if above else len(self.levels) - 1

    def per_level(self) -> tuple[tuple[float, Measurement], ...]:
        """The best feasible measurement at each level: among the confirmed ones where the
        level has any (so the winner's level names the winner, with its confirmed figures),
        else among the screened ones."""
        out: dict[float, Measurement] = {}
        for m in self.order:
            if m.phase not in ("screen", "confirm") or not m.feasible:
                continue
            prev = out.get(m.load)
            if prev is None or (m.phase == "confirm", rank(m)) > (prev.phase == "confirm", rank(prev)):
                out[m.load] = m
        return tuple(sorted(out.items()))


def opens(space: Space, a: Point, b: Point) -> bool:
    """Whether ``b`` has settings in effect that ``a`` has not (e.g. batching switched on)."""
    keys_a = set(json.loads(space.signature(a)))
    keys_b = set(json.loads(space.signature(b)))
    return bool(keys_b - keys_a)


def rank(m: Measurement) -> tuple[bool, float]:
    return (m.feasible, m.score)


def told(score: float) -> float:
    """A score optuna accepts (finite): refused configs rank below every measured one."""
    return score if math.isfinite(score) else -1e12


def within_noise(a: Measurement, b: Measurement, noise_pct: float) -> bool:
    """Whether two confirmed results are closer than the measurement noise."""
    if not (a.feasible and b.feasible) or a.value == 0 or not math.isfinite(a.value):
        return False
    diff = abs(a.value - b.value) / abs(a.value) * 100.0
    noise = max(noise_pct, a.outcome.spread_pct, b.outcome.spread_pct)
    return diff <= noise
