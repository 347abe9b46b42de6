"""The load side of tuning, on synthetic response surfaces (a fake measurer: no server here).

The surface is the one that bites a tuner probing only light loads: a config without batching
answers fastest while the load is light, a batching config with a bigger max_batch_size pays a
queueing cost at light load but carries far more once the load is heavy (its per-batch cost is
shared). Latency follows Little's law (concurrency / throughput). Noise-free and deterministic.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from typing import Any

import pytest

from tritonkit.errors import MissingExtraError, TuneError
from tritonkit.perf.cost import LatencyBudget
from tritonkit.tune.objective import Objective, Outcome
from tritonkit.tune.outputs import explain, per_load_rows, write_report
from tritonkit.tune.runner import TuneResult, TuneSettings
from tritonkit.tune.space import Dimension, Space, load_hint
from tritonkit.tune.strategy import search

from .test_tune_space import DENSENET

M = "densenet_onnx"
LADDER = tuple(float(2**i) for i in range(11))


def _space(levels: tuple[float, ...] = LADDER) -> Space:
    return Space(
        target=M,
        dimensions=(
            Dimension(M, "instance_count", (1, 2)),
            Dimension(M, "max_batch_size", (4, 32)),
            Dimension(M, "dynamic_batching", (False, True)),
        ),
        loads=levels,
    )


class BatchSurface:
    """A batch costs ``fixed`` ms plus ``per_item`` ms per request; without dynamic batching
    every request is its own batch. With batching on, a queueing delay makes light loads slower.

    Throughput at concurrency c: instances each run batches of b = min(mbs, c / instances)
    requests, so c = in flight; throughput = instances * b / batch_time, capped by c / min_latency.
    """

    def __init__(
        self, *, fixed_ms: float = 20.0, per_item_ms: float = 0.5, client_limit: float | None = None
    ) -> None:
        self.fixed_ms = fixed_ms
        self.per_item_ms = per_item_ms
        self.client_limit = client_limit
        self.calls: list[tuple[str, float, bool]] = []

    def truth(self, knobs: Mapping[str, Any], c: float) -> float:
        inst = int(knobs["instance_count"])
        if knobs["dynamic_batching"]:
            b = max(1.0, min(float(knobs["max_batch_size"]), c / inst))
            queue_ms = 6.0  # the batcher waits for company; costly when there is none
        else:
            b, queue_ms = 1.0, 0.0
        batch_ms = self.fixed_ms + self.per_item_ms * b
        capacity = inst * b / batch_ms * 1000.0
        return min(capacity, c / (batch_ms + queue_ms) * 1000.0)

    def measure(
        self,
        settings: Mapping[str, Mapping[str, Any]],
        concurrency: float,
        *,
        confirm: bool,
        bar: float | None = None,
    ) -> Outcome:
        knobs = settings[M]
        self.calls.append((repr(sorted(knobs.items())), concurrency, confirm))
        thr = self.truth(knobs, concurrency)
        bound = False
        if self.client_limit is not None and thr >= self.client_limit:
            thr, bound = self.client_limit, True
        lat = concurrency / thr * 1e6
        return Outcome(
            throughput=thr,
            latency_us={"avg": lat, "p50": lat, "p90": lat * 1.1, "p95": lat * 1.2, "p99": lat * 1.3},
            client_cpu=0.95 if bound else 0.3,
            client_bound=bound,
        )


def _grid_best_at(space: Space, surface: BatchSurface, level: float) -> float:
    return max(surface.truth(space.by_model(p)[M], level) for p in space.points())


def _result(space: Space, found: Any, objective: Objective, **settings: Any) -> TuneResult:
    return TuneResult(
        model=M,
        url="http://127.0.0.1:8000",
        strategy="default",
        objective=objective,
        space=space,
        search=found,
        base_configs={M: DENSENET},
        original_configs={M: DENSENET},
        wall_s=1.0,
        server_restarts=0,
        config_loads=4,
        restore_problems=(),
        started_at="2026-01-01T00:00:00+00:00",
        settings=settings,
    )


def test_surface_has_a_light_load_winner_that_loses_at_peak_load() -> None:
    """The premise of the tests below, checked on the surface itself."""
    s = BatchSurface()
    plain = {"instance_count": 2, "max_batch_size": 4, "dynamic_batching": False}
    batched = {"instance_count": 2, "max_batch_size": 32, "dynamic_batching": True}
    assert s.truth(plain, 2) > s.truth(batched, 2)
    assert s.truth(batched, 64) > 5 * s.truth(plain, 64)


@pytest.mark.parametrize("strategy", ["default", "hill-climb"])
def test_search_with_a_production_load_recommends_the_config_that_wins_at_that_load(strategy: str) -> None:
    space = _space(levels=(2.0, 64.0))
    surface = BatchSurface()
    found = search(space, Objective(), surface, strategy=strategy, production_loads=(2.0, 64.0))
    assert found.winner is not None
    assert found.winner.load == 64.0 and found.winner.phase == "confirm"
    assert found.winner.settings[f"{M}.dynamic_batching"] is True
    assert surface.truth(space.by_model(found.winner.point)[M], 64) >= 0.97 * _grid_best_at(
        space, surface, 64
    )
    # every screening measurement is at a production level, none at the light-load end of a ladder
    assert {m.load for m in found.measurements} <= {2.0, 64.0}


def test_per_load_answer_shows_a_light_load_winner_and_a_peak_load_winner_that_differ() -> None:
    space = _space(levels=(2.0, 64.0))
    found = search(space, Objective(), BatchSurface(), strategy="grid", production_loads=(2.0, 64.0))
    per = dict(found.per_level)
    assert per[2.0].settings[f"{M}.dynamic_batching"] is False
    assert per[64.0].settings[f"{M}.dynamic_batching"] is True
    result = _result(space, found, Objective())
    rows = per_load_rows(result)
    assert [r[0] for r in rows] == ["2", "64"]
    assert "depends on the load" in " ".join(explain(result))


def test_recommended_config_is_confirmed_at_the_peak_and_measured_at_every_production_level() -> None:
    space = _space(levels=(2.0, 16.0, 64.0))
    surface = BatchSurface()
    found = search(space, Objective(), surface, production_loads=(2.0, 16.0, 64.0))
    assert found.winner is not None
    confirms = [c for c in surface.calls if c[2]]
    assert confirms and all(level == 64.0 for _, level, _ in confirms)
    winner_levels = {m.load for m in found.measurements if m.signature == found.winner.signature}
    assert winner_levels == {2.0, 16.0, 64.0}


def test_sweep_without_a_production_load_climbs_past_the_client_cores_until_saturation() -> None:
    space = _space()
    surface = BatchSurface()
    found = search(space, Objective(), surface, load_hint=load_hint({M: DENSENET}))
    assert found.winner is not None
    # the best config saturates near 2 x 32 in flight: far above the old 1-8 ceiling
    assert found.winner.load >= 64
    assert surface.truth(space.by_model(found.winner.point)[M], found.winner.load) >= 0.97 * max(
        _grid_best_at(space, surface, c) for c in LADDER
    )
    # and it stopped at saturation: nothing near MA's 1,024 ceiling was needed
    assert max(m.load for m in found.measurements) <= 256


def test_first_sweep_starts_at_the_candidates_capacity_hint() -> None:
    space = _space()
    surface = BatchSurface()
    start = space.point_of(
        {f"{M}.instance_count": 2, f"{M}.max_batch_size": 32, f"{M}.dynamic_batching": True}
    )
    search(space, Objective(), surface, start=start, load_hint=load_hint({M: DENSENET}))
    assert surface.calls[0][1] == 2 * 2 * 32


def test_sweep_stops_at_the_latency_budget_at_high_load() -> None:
    budget = LatencyBudget(stat="p99", limit_us=60_000.0)
    surface = BatchSurface()
    found = search(_space(), Objective(budget=budget), surface, load_hint=load_hint({M: DENSENET}))
    assert found.winner is not None
    assert found.winner.outcome.latency_us["p99"] <= budget.limit_us
    assert max(m.load for m in found.measurements) < 1024


def test_client_bound_measurements_are_reported_with_a_workers_hint_and_not_capped() -> None:
    space = _space()
    surface = BatchSurface(client_limit=800.0)
    found = search(space, Objective(), surface, load_hint=load_hint({M: DENSENET}))
    assert found.client_bound
    text = " ".join(explain(_result(space, found, Objective(), workers=0)))
    assert "load generator saturated its CPU" in text and "--workers" in text


def test_report_says_when_the_confirmation_run_misses_the_budget() -> None:
    class Flaky(BatchSurface):
        """Screening looks fine; the long confirmation run shows the real (worse) latency."""

        def measure(self, settings, concurrency, *, confirm, bar=None):  # type: ignore[no-untyped-def]
            o = super().measure(settings, concurrency, confirm=confirm)
            if confirm:
                return Outcome(
                    throughput=o.throughput, latency_us={k: v * 50 for k, v in o.latency_us.items()}
                )
            return o

    space = _space(levels=(32.0,))
    objective = Objective(budget=LatencyBudget(stat="p99", limit_us=200_000.0))
    found = search(space, objective, Flaky(), production_loads=(32.0,))
    assert found.winner is None and found.finalists
    text = " ".join(explain(_result(space, found, objective)))
    assert "confirmation run" in text and "NOT recommended" in text


def test_report_has_the_per_load_table_and_the_pareto_front(tmp_path: Any) -> None:
    space = _space(levels=(2.0, 64.0))
    found = search(space, Objective(), BatchSurface(), strategy="grid", production_loads=(2.0, 64.0))
    path = tmp_path / "report.md"
    write_report(_result(space, found, Objective()), path)
    text = path.read_text()
    assert "## Best config per load" in text and "## Throughput vs p99: the Pareto front" in text


def test_default_strategy_names_the_extra_to_install_when_optuna_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "optuna", None)  # what an environment without it shows
    surface = BatchSurface()
    with pytest.raises(MissingExtraError) as err:
        search(_space(), Objective(), surface)
    assert "tune" in str(err.value) and not surface.calls


def test_tune_settings_refuse_both_load_kinds_and_bad_levels() -> None:
    with pytest.raises(TuneError, match="not both"):
        TuneSettings(model=M, repository=".", concurrency=(8,), request_rate=(10.0,)).validate()
    with pytest.raises(TuneError, match="positive"):
        TuneSettings(model=M, repository=".", request_rate=(0.0,)).validate()
    s = TuneSettings(model=M, repository=".", request_rate=(50.0, 10.0))
    assert s.production_loads == (10.0, 50.0) and s.load_mode == "request_rate"


def test_request_rate_levels_keep_their_fractions_in_checkpoint_keys() -> None:
    space = Space(target=M, dimensions=_space().dimensions, loads=(12.5,), load_mode="request_rate")
    found = search(space, Objective(), BatchSurface(), strategy="grid", production_loads=(12.5,))
    assert all(m.load == 12.5 and "|12.5|" in m.key for m in found.measurements)
    assert math.isfinite(found.winner.value if found.winner else math.nan)


def test_sweep_walks_down_when_more_load_does_not_help() -> None:
    """A client that shares the server's cores: throughput peaks at low load and falls after."""

    class Contended(BatchSurface):
        def truth(self, knobs: Mapping[str, Any], c: float) -> float:
            return 500.0 / (1.0 + abs(math.log2(c) - 1.0))  # best at concurrency 2

    surface = Contended()
    start = _space().point_of(
        {f"{M}.instance_count": 2, f"{M}.max_batch_size": 32, f"{M}.dynamic_batching": True}
    )
    found = search(_space(), Objective(), surface, start=start, load_hint=load_hint({M: DENSENET}))
    assert surface.calls[0][1] == 128  # the hint: 2 x 2 x 32
    assert found.winner is not None and found.winner.load == 2
