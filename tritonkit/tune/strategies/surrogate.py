"""``default``: a surrogate search (optuna's TPE sampler) over the config dimensions. Each trial
is one candidate config; its value is its best screened objective at the load. TPE learns from
every value told so far which regions pay, so few candidates are measured; a candidate whose
first probe is clearly worse than the incumbent is not swept further."""

from __future__ import annotations

from tritonkit._extras import require
from tritonkit.tune.objective import Measurement
from tritonkit.tune.space import Point
from tritonkit.tune.strategies.base import PROBE_MARGIN, Search, rank, told
from tritonkit.tune.strategies.coordinate import polish

__all__ = ["evaluate", "tpe"]


def evaluate(search: Search, point: Point, incumbent: Measurement | None) -> Measurement:
    """A candidate's best screened result at the load.

    At production levels: one measurement at their peak. Otherwise the first candidate is
    swept from its load hint; later ones are probed once at the incumbent's level and swept
    (up until saturation, down when over the budget) only when the probe is within 10% of
    the incumbent: a clearly worse config costs one measurement.
    """
    if search.production:
        return search.measure(point, search.production[-1], against=incumbent)
    if incumbent is None:
        return search.sweep(point, search.start_index(point))
    probe = search.measure(point, incumbent.load, against=incumbent)
    if not search.gains(probe, incumbent, -PROBE_MARGIN):
        return probe
    return search.sweep(point, search.levels.index(incumbent.load))


def tpe(search: Search, start: Point, *, trials: int | None, patience: int, seed: int) -> int:
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
    dims = search.space.dimensions
    distributions = {
        f"d{i}": optuna.distributions.CategoricalDistribution(list(range(len(d.values))))
        for i, d in enumerate(dims)
    }
    distinct = len(search.space.points())
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
        sig = search.space.signature(point)
        if sig in scores:
            study.tell(trial, scores[sig])
            repeats += 1
            continue
        repeats = 0
        m = evaluate(search, point, best)
        result = search.best.get(sig, m)
        scores[sig] = told(result.score)
        study.tell(trial, scores[sig])
        if best is None or search.gains(result, best, search.min_gain):
            best, best_point, stale = result, point, 0
        else:
            stale += 1
            if rank(result) > rank(best):
                best, best_point = result, point  # better within noise: the incumbent
    polish(search, best_point)
    return asked
