"""The search: which (config, concurrency) to measure next, and which config wins.

Pure logic over a :class:`Measurer` (the real one loads configs into Triton and runs perf's
load engine; tests pass synthetic response surfaces). Three strategies:

- ``default``: a surrogate search (optuna's TPE sampler) over the config dimensions. Each trial is
  one candidate config; its value is its best screened objective at the load (see below). TPE
  learns from every value told so far which regions pay, so few candidates are measured; a
  candidate whose first probe is clearly worse than the incumbent is not swept further.
- ``hill-climb``: screen the start config with a concurrency sweep that stops at saturation (or at
  the first level over the latency budget), then hill-climb over the config dimensions: each
  neighbour is screened at the incumbent's best concurrency (one short measurement), and only a
  neighbour that beats the incumbent is swept further and becomes the new incumbent. Infeasible
  neighbours are never swept, so the search does not dig into the infeasible region.
- ``grid``: every distinct config at every concurrency level (ground truth).

The load: with production levels given (``--concurrency`` / ``--request-rate``), every candidate
is judged at the peak of them, and the finalists are also measured at every other level (the
per-load answer). Without them each candidate's sweep starts where its capacity suggests
(``load_hint``: Model Analyzer's 2 x instances x max batch size) on a ladder up to 1,024 and
grows until throughput saturates or the latency budget breaks, so no client-side ceiling.

All finish the same way: the best few configs (the finalists) are re-measured with perf's full
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

from tritonkit._extras import require
from tritonkit.errors import TuneError
from tritonkit.perf.cost import LatencyBudget, usd_per_million
from tritonkit.perf.stream_metrics import StreamLimit
from tritonkit.tune.space import Point, Space

__all__ = [
    "OBJECTIVE_KINDS",
    "Measurement",
    "Measurer",
    "Objective",
    "Outcome",
    "SearchResult",
    "search",
]

STRATEGIES = ("default", "hill-climb", "grid")


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
class Outcome:
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

    def to_dict(self) -> dict[str, Any]:
        return {
            "throughput": self.throughput,
            "latency_us": dict(self.latency_us),
            "errors": self.errors,
            "stable": self.stable,
            "failed": self.failed,
            "spread_pct": self.spread_pct,
            "client_cpu": self.client_cpu,
            "client_bound": self.client_bound,
            "metrics": dict(self.metrics),
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
            client_cpu=float(data.get("client_cpu", 0.0)),
            client_bound=bool(data.get("client_bound", False)),
            metrics={str(k): float(v) for k, v in dict(data.get("metrics") or {}).items()},
        )


class Measurer(Protocol):
    """Loads a candidate (``model -> field -> value``) and measures it at one load level (a
    concurrency or a request rate, as the run's load mode says)."""

    def measure(
        self, settings: Mapping[str, Mapping[str, Any]], load: float, *, confirm: bool
    ) -> Outcome: ...


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
    #: level -> the best feasible screened measurement there (the per-load answer)
    per_level: tuple[tuple[float, Measurement], ...] = ()
    trials: int = 0  # candidates the surrogate proposed (default strategy)

    @property
    def new_measurements(self) -> int:
        return sum(1 for m in self.measurements if not m.resumed)

    @property
    def client_bound(self) -> tuple[Measurement, ...]:
        """Measurements where the load generator ran out of CPU (say so; never a silent cap)."""
        return tuple(m for m in self.measurements if m.outcome.client_bound)


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
            raise _OutOfBudgetError("max-measurements")
        if self.deadline is not None and reserve:
            walls = [m.wall_s for m in self.order if not m.resumed]
            keep = reserve * 2 * (sum(walls) / len(walls)) if walls else 0.0
            if self.clock() + keep >= self.deadline:
                raise _OutOfBudgetError("budget")

    def measure(self, point: Point, level: float, *, phase: str = "screen") -> Measurement:
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
            else self.measurer.measure(self.space.by_model(point), level, confirm=phase == "confirm")
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
        if self.objective.higher_is_better:
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
        # more load did not help: less may (over the budget, a latency objective, or a client
        # that competes with the server for the same cores, where throughput peaks early)
        if best is first and start > 0:
            j = start - 1
            while j >= 0:
                lower = self.measure(point, self.levels[j])
                if _rank(lower) <= _rank(best):
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

    def hill_climb(self, start: Point) -> None:
        current = start
        self.sweep(current, self.start_index(current))
        while True:
            incumbent = self.best[self.space.signature(current)]
            nxt = self._better_neighbour(current, incumbent)
            if nxt is None:
                return
            self.sweep(nxt, self.levels.index(incumbent.load))
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
            probe = self.measure(nb, incumbent.load)
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
                probe = self.measure(nb, incumbent.load)
                if self._gain(probe, incumbent, self.min_gain):
                    return nb
        return None

    def grid(self) -> None:
        for point in self.space.points():
            for level in self.levels:
                self.measure(point, level)

    # -- the surrogate search ---------------------------------------------------------------

    def evaluate(self, point: Point, incumbent: Measurement | None) -> Measurement:
        """A candidate's best screened result at the load.

        At production levels: one measurement at their peak. Otherwise the first candidate is
        swept from its load hint; later ones are probed once at the incumbent's level and swept
        (up until saturation, down when over the budget) only when the probe is within 10% of
        the incumbent: a clearly worse config costs one measurement.
        """
        if self.production:
            return self.measure(point, self.production[-1])
        if incumbent is None:
            return self.sweep(point, self.start_index(point))
        probe = self.measure(point, incumbent.load)
        if not self._gain(probe, incumbent, -0.10):
            return probe
        return self.sweep(point, self.levels.index(incumbent.load))

    def tpe(self, start: Point, *, trials: int | None, patience: int, seed: int) -> int:
        """Optuna's TPE sampler proposes candidates; each is told its evaluated score. Then a
        local polish: a hill-climb from the best one (its neighbours, one probe each), since
        TPE samples regions, not single steps.

        Deterministic for a seed and the same scores, so replaying over a checkpoint's cache
        resumes the run. The sampling stops after ``trials`` distinct candidates, after
        ``patience`` in a row that did not beat the best by ``min_gain``, or when the sampler
        keeps proposing configs already measured (it has converged). Returns the number of
        trials asked.
        """
        optuna = require("optuna", feature="tritonkit tune --strategy default")
        # optuna logs every trial at INFO on its own handler; the search reports measurements
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        dims = self.space.dimensions
        distributions = {
            f"d{i}": optuna.distributions.CategoricalDistribution(list(range(len(d.values))))
            for i, d in enumerate(dims)
        }
        distinct = len(self.space.points())
        limit = min(distinct, trials if trials is not None else 10 + 3 * len(dims))
        sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=min(5, max(1, limit // 3)))
        study = optuna.create_study(direction="maximize", sampler=sampler)
        study.enqueue_trial({f"d{i}": v for i, v in enumerate(start)})
        scores: dict[str, float] = {}
        best: Measurement | None = None
        best_point = start
        stale = repeats = asked = 0
        while len(scores) < limit and stale < patience and repeats < 4 * distinct:
            trial = study.ask(distributions)
            asked += 1
            point = tuple(int(trial.params[f"d{i}"]) for i in range(len(dims)))
            sig = self.space.signature(point)
            if sig in scores:
                study.tell(trial, scores[sig])
                repeats += 1
                continue
            repeats = 0
            m = self.evaluate(point, best)
            result = self.best.get(sig, m)
            scores[sig] = _told(result.score)
            study.tell(trial, scores[sig])
            if best is None or self._gain(result, best, self.min_gain):
                best, best_point, stale = result, point, 0
            else:
                stale += 1
                if _rank(result) > _rank(best):
                    best, best_point = result, point  # better within noise: the incumbent
        self.polish(best_point)
        return asked

    def polish(self, start: Point) -> None:
        """Hill-climb from ``start``: neighbours probed at the incumbent's load, a better one
        swept and adopted (measurements already made are reused, not repeated)."""
        current = start
        while True:
            incumbent = self.best.get(self.space.signature(current))
            if incumbent is None:
                return
            nxt = self._better_neighbour(current, incumbent)
            if nxt is None:
                return
            if self.production:
                self.measure(nxt, self.production[-1])
            else:
                self.sweep(nxt, self.levels.index(incumbent.load))
            current = nxt

    def production_sweep(self, chosen: list[Measurement]) -> None:
        """The finalists at every production level (the per-load answer)."""
        for m in chosen:
            for level in self.production[:-1]:
                self.measure(m.point, level)

    def per_level(self) -> tuple[tuple[float, Measurement], ...]:
        out: dict[float, Measurement] = {}
        for m in self.order:
            if m.phase != "screen" or not m.feasible:
                continue
            prev = out.get(m.load)
            if prev is None or _rank(m) > _rank(prev):
                out[m.load] = m
        return tuple(sorted(out.items()))

    def confirm(self) -> tuple[Measurement | None, Measurement | None, tuple[Measurement, ...]]:
        """Re-measure the finalists with the full stability rule: at the production peak when
        one was given (the recommended config must hold there), else at each one's best level."""
        ranked = sorted(self.best.values(), key=_rank, reverse=True)
        if self.production:
            peak = self.production[-1]
            at_peak = [m for m in self.order if m.phase == "screen" and m.load == peak]
            ranked = sorted({m.signature: m for m in at_peak}.values(), key=_rank, reverse=True)
        chosen = [m for m in ranked if m.feasible][: self.finalists]
        if self.production:
            try:
                self.production_sweep(chosen)
            except _OutOfBudgetError:
                pass
        confirmed: list[Measurement] = []
        for m in chosen:
            try:
                confirmed.append(self.measure(m.point, m.load, phase="confirm"))
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


def _told(score: float) -> float:
    """A score optuna accepts (finite): refused configs rank below every measured one."""
    return score if math.isfinite(score) else -1e12


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
    production_loads: tuple[float, ...] = (),
    load_hint: Callable[[Mapping[str, Mapping[str, Any]]], float] | None = None,
    trials: int | None = None,
    patience: int = 8,
    seed: int = 0,
) -> SearchResult:
    """Run ``strategy`` over ``space`` and confirm the finalists.

    ``cache`` maps :attr:`Measurement.key` to outcomes from an earlier run (a checkpoint): the
    search is deterministic, so replaying it over the cache resumes where the run stopped.
    ``max_measurements`` counts every measurement (cached ones too); ``deadline`` is a
    ``clock()`` value after which no new measurement starts. ``production_loads``: the load
    the config will face (judged at their peak, see the module docstring); ``load_hint``: a
    candidate's settings -> the load its first sweep starts at; ``trials``, ``patience`` and
    ``seed`` steer the default (surrogate) strategy.
    """
    if strategy not in STRATEGIES:
        raise TuneError(f"unknown strategy '{strategy}'", hint="use " + ", ".join(STRATEGIES))
    if not space.loads:
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
        production=tuple(production_loads),
        load_hint=load_hint,
    )
    stopped = "complete" if strategy == "grid" else "converged"
    first = start if start is not None else tuple(0 for _ in space.dimensions)
    asked = 0
    if strategy == "default":
        # fail before any measurement when the extra is missing
        require("optuna", feature="tritonkit tune --strategy default")
    try:
        if strategy == "grid":
            s.grid()
        elif strategy == "hill-climb":
            s.hill_climb(first)
        else:
            asked = s.tpe(first, trials=trials, patience=patience, seed=seed)
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
        production_loads=s.production,
        per_level=s.per_level(),
        trials=asked,
    )


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
