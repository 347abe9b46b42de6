"""The search: which (config, concurrency) to measure next, and which config wins.

This module is the public entry (:func:`search`); each strategy lives in its own module under
:mod:`tritonkit.tune.strategies`, the types it measures and judges in :mod:`tritonkit.tune.objective`.

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
runner-up the result says so. When the confirmation overturned the screening's order (the
screening's leader had lucky windows), the default and hill-climb strategies climb again from
the confirmed winner and confirm what that finds (``finalists.reclimb``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from tritonkit._extras import require
from tritonkit.errors import TuneError
from tritonkit.tune.objective import Measurement, Measurer, Objective, Outcome, SearchResult
from tritonkit.tune.space import Point, Space
from tritonkit.tune.strategies.base import BudgetSpentError, Search, within_noise
from tritonkit.tune.strategies.coordinate import hill_climb
from tritonkit.tune.strategies.finalists import confirm, final_check, reclimb
from tritonkit.tune.strategies.grid import grid
from tritonkit.tune.strategies.surrogate import tpe

__all__ = ["STRATEGIES", "search", "within_noise"]

STRATEGIES = ("default", "hill-climb", "grid")


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
    check_rounds: int = 0,
) -> SearchResult:
    """Run ``strategy`` over ``space`` and confirm the finalists.

    ``cache`` maps :attr:`Measurement.key` to outcomes from an earlier run (a checkpoint): the
    search is deterministic, so replaying it over the cache resumes where the run stopped.
    ``max_measurements`` counts every measurement (cached ones too); ``deadline`` is a
    ``clock()`` value after which no new measurement starts. ``production_loads``: the load
    the config will face (judged at their peak, see the module docstring); ``load_hint``: a
    candidate's settings -> the load its first sweep starts at; ``trials``, ``patience`` and
    ``seed`` steer the default (surrogate) strategy. ``check_rounds``: how many times the
    winner and the original config (``start``) are re-measured in turns at the end (0: none).
    """
    if strategy not in STRATEGIES:
        raise TuneError(f"unknown strategy '{strategy}'", hint="use " + ", ".join(STRATEGIES))
    if not space.loads:
        raise TuneError("the search space has no concurrency level to measure")
    if max_measurements is not None and max_measurements < 1:
        raise TuneError("--max-measurements must be at least 1")
    s = Search(
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
            grid(s)
        elif strategy == "hill-climb":
            hill_climb(s, first)
        else:
            asked = tpe(s, first, trials=trials, patience=patience, seed=seed)
    except BudgetSpentError as exc:
        stopped = exc.reason
    confirmed_once = confirm(s)
    winner, runner, confirmed = confirmed_once if strategy == "grid" else reclimb(s, confirmed_once)
    check = final_check(s, winner, first, check_rounds)
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
        check=check,
    )
