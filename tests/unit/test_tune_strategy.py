"""The tuning search on synthetic response surfaces (a fake measurer: no server involved).

The surfaces model what a CPU server shows: throughput that grows with concurrency until it
saturates, more instances and dynamic batching helping, latency that grows with load, configs
Triton refuses, and a flat plateau. Noise is seeded, so every test is deterministic.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from typing import Any

import pytest

from tritonkit.errors import TuneError
from tritonkit.perf.cost import LatencyBudget
from tritonkit.tune.objective import Measurement, Objective, Outcome, cache_from_lines
from tritonkit.tune.space import Dimension, Space
from tritonkit.tune.strategy import search

M = "m"


def _space(levels: tuple[int, ...] = (1, 2, 4, 8, 16)) -> Space:
    return Space(
        target=M,
        dimensions=(
            Dimension(M, "instance_count", (1, 2, 3, 4)),
            Dimension(M, "dynamic_batching", (False, True)),
            Dimension(M, "max_queue_delay_microseconds", (0, 500, 2000)),
        ),
        loads=levels,
    )


class Surface:
    """throughput = capacity * (1 - exp(-c / knee)); latency = c / throughput (Little's law)."""

    def __init__(
        self, *, noise: float = 0.0, seed: int = 0, refuse_count: int | None = None, flat: bool = False
    ):
        self.noise = noise
        self.rng = random.Random(seed)
        self.refuse_count = refuse_count
        self.flat = flat
        self.calls: list[tuple[str, int, bool]] = []

    def capacity(self, knobs: Mapping[str, Any]) -> float:
        if self.flat:
            return 100.0
        inst = int(knobs["instance_count"])
        cap = 100.0 * min(inst, 3) ** 0.6  # past 3 instances the 2 cores are busy
        if knobs["dynamic_batching"]:
            cap *= 1.0 + 0.15 * (1 if knobs["max_queue_delay_microseconds"] == 500 else 0.5)
        return cap

    def measure(
        self,
        settings: Mapping[str, Mapping[str, Any]],
        concurrency: int,
        *,
        confirm: bool,
        bar: float | None = None,
    ) -> Outcome:
        knobs = settings[M]
        self.calls.append((repr(sorted(knobs.items())), concurrency, confirm))
        if self.refuse_count is not None and knobs["instance_count"] == self.refuse_count:
            return Outcome(failed="instance count refused by the fake server")
        thr = self.capacity(knobs) * (1 - math.exp(-concurrency / 3.0))
        thr *= 1 + self.rng.uniform(-self.noise, self.noise)
        lat = concurrency / thr * 1e6
        return Outcome(
            throughput=thr,
            latency_us={"avg": lat, "p50": lat, "p90": lat * 1.2, "p95": lat * 1.3, "p99": lat * 1.5},
            spread_pct=self.noise * 100,
        )


def _grid_best(space: Space, surface: Surface, objective: Objective) -> float:
    exact = Surface(flat=surface.flat, refuse_count=surface.refuse_count)
    best = -math.inf
    for p in space.points():
        for c in space.loads:
            feasible, _, score = objective.evaluate(exact.measure(space.by_model(p), c, confirm=True))
            if feasible:
                best = max(best, score)
    return best


def test_default_strategy_reaches_near_grid_best_with_a_quarter_of_the_measurements_when_noisy() -> None:
    space = _space()
    objective = Objective()
    grid = search(space, objective, Surface(noise=0.05, seed=1), strategy="grid")
    result = search(space, objective, Surface(noise=0.05, seed=1))
    assert result.winner is not None and grid.winner is not None
    true_best = _grid_best(space, Surface(), objective)
    exact = Surface()
    chosen = exact.measure(space.by_model(result.winner.point), result.winner.load, confirm=True)
    assert chosen.throughput >= 0.95 * true_best
    assert len(result.measurements) <= 0.25 * len(grid.measurements)


def test_grid_strategy_measures_every_distinct_config_at_every_level() -> None:
    space = _space(levels=(1, 4))
    surface = Surface()
    result = search(space, Objective(), surface, strategy="grid", finalists=2)
    screened = [m for m in result.measurements if m.phase == "screen"]
    # dynamic batching off makes the queue delay irrelevant: 4 * (1 + 3) distinct configs
    assert len({m.signature for m in screened}) == 16
    assert len(screened) == 32
    assert [m.phase for m in result.finalists] == ["confirm", "confirm"]
    assert result.stopped_by == "complete"


def test_search_never_picks_a_config_over_the_latency_budget_and_does_not_sweep_past_it() -> None:
    space = _space()
    budget = LatencyBudget(stat="p99", limit_us=40_000.0)
    objective = Objective(budget=budget)
    result = search(space, objective, Surface())
    assert result.winner is not None
    assert result.winner.outcome.latency_us["p99"] <= budget.limit_us
    screened = [m for m in result.measurements if m.phase == "screen"]
    for sig in {m.signature for m in screened if m.feasible}:
        top = max(m.load for m in screened if m.signature == sig and m.feasible)
        above = [m for m in screened if m.signature == sig and m.load > top]
        # at most one level beyond the budget above a config's best feasible one: it stops there
        assert len(above) <= 1


def test_search_records_refused_configs_and_never_chooses_one() -> None:
    space = _space()
    result = search(space, Objective(), Surface(refuse_count=2), strategy="grid")
    refused = [m for m in result.measurements if m.outcome.failed]
    assert refused and all(not m.feasible for m in refused)
    assert result.winner is not None and result.winner.settings["m.instance_count"] != 2


def test_search_reports_no_winner_when_no_config_meets_the_constraints() -> None:
    objective = Objective(min_throughput=10_000.0)
    result = search(_space(), objective, Surface())
    assert result.winner is None
    assert all(not m.feasible for m in result.measurements)
    assert "throughput" in result.measurements[0].violation


def test_search_flags_a_winner_within_noise_of_the_runner_up_on_a_plateau() -> None:
    result = search(_space(), Objective(), Surface(flat=True, noise=0.03, seed=4), strategy="grid")
    assert result.winner is not None and result.runner_up is not None
    assert result.within_noise


def test_search_stops_at_max_measurements_and_still_confirms() -> None:
    result = search(_space(), Objective(), Surface(), max_measurements=8, finalists=2)
    assert len(result.measurements) <= 8
    assert result.stopped_by == "max-measurements"
    assert len(result.finalists) == 2 and result.winner is not None


def test_search_resumes_from_a_checkpoint_without_measuring_again() -> None:
    import json

    space = _space()
    full = search(space, Objective(), Surface())
    lines: list[str] = []

    def record(m: Measurement) -> None:
        lines.append(json.dumps({"type": "measurement", **m.to_dict()}))

    search(space, Objective(), Surface(), max_measurements=5, finalists=1, on_measurement=record)
    done = [json.loads(line) for line in lines if json.loads(line)["phase"] == "screen"]
    second = Surface()
    resumed = search(space, Objective(), second, cache=cache_from_lines(lines))
    assert len(second.calls) == len(full.measurements) - len(done)
    assert resumed.winner is not None and full.winner is not None
    assert resumed.winner.signature == full.winner.signature
    assert sum(m.resumed for m in resumed.measurements) == len(done)


def test_latency_objective_prefers_low_concurrency() -> None:
    result = search(_space(), Objective(kind="latency"), Surface())
    assert result.winner is not None and result.winner.load == 1


def test_search_rejects_an_unknown_strategy() -> None:
    with pytest.raises(TuneError, match="unknown strategy"):
        search(_space(), Objective(), Surface(), strategy="optuna")


def test_cost_objective_needs_a_price() -> None:
    with pytest.raises(TuneError, match="needs a price"):
        Objective(kind="cost")


def test_search_stops_at_the_time_budget_and_still_confirms() -> None:
    now = [0.0]

    class Slow(Surface):
        def measure(self, settings, concurrency, *, confirm, bar=None):  # type: ignore[no-untyped-def]
            now[0] += 10.0
            return super().measure(settings, concurrency, confirm=confirm)

    result = search(_space(), Objective(), Slow(), strategy="grid", deadline=75.0, clock=lambda: now[0])
    assert result.stopped_by == "budget"
    # each measurement takes 10 s; two confirmations (2 x 2 x 10 s) are kept out of the 75 s
    assert sum(m.phase == "screen" for m in result.measurements) == 4
    assert result.winner is not None and len(result.finalists) == 1


def test_cost_objective_prices_throughput_from_the_sku_table() -> None:
    from tritonkit.tune import TuneSettings

    objective = TuneSettings(
        model=M, repository=".", objective="cost", sku="Standard_D4s_v5"
    ).objective_spec()
    assert objective.usd_per_hour and objective.usd_per_hour > 0
    fast, slow = Outcome(throughput=200.0), Outcome(throughput=100.0)
    assert objective.evaluate(fast)[2] > objective.evaluate(slow)[2]
    assert objective.value(fast) < objective.value(slow)


def test_search_climbs_the_load_to_meet_a_minimum_throughput() -> None:
    """Only concurrency 16 of the best configs reaches 215 infer/s: the sweep must keep climbing
    through levels that are infeasible only for being too slow."""
    objective = Objective(min_throughput=215.0)
    grid = search(_space(), objective, Surface(), strategy="grid")
    result = search(_space(), objective, Surface())
    assert grid.winner is not None and result.winner is not None
    assert result.winner.load == 16 and result.winner.outcome.throughput >= 215.0
