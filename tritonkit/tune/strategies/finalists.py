"""How every strategy ends: the finalists measured at every production level (the per-load
answer), then re-measured with perf's full stability rule; the best confirmed one wins."""

from __future__ import annotations

import contextlib

from tritonkit.tune.objective import Measurement
from tritonkit.tune.strategies.base import BudgetSpentError, Search, rank

__all__ = ["confirm", "production_sweep"]


def production_sweep(search: Search, chosen: list[Measurement]) -> None:
    """The finalists at every production level (the per-load answer)."""
    for m in chosen:
        for level in search.production[:-1]:
            search.measure(m.point, level)


def confirm(search: Search) -> tuple[Measurement | None, Measurement | None, tuple[Measurement, ...]]:
    """Re-measure the finalists with the full stability rule: at the production peak when
    one was given (the recommended config must hold there), else at each one's best level."""
    ranked = sorted(search.best.values(), key=rank, reverse=True)
    if search.production:
        peak = search.production[-1]
        at_peak = [m for m in search.order if m.phase == "screen" and m.load == peak]
        ranked = sorted({m.signature: m for m in at_peak}.values(), key=rank, reverse=True)
    chosen = [m for m in ranked if m.feasible][: search.finalists]
    if search.production:
        with contextlib.suppress(BudgetSpentError):  # confirming the finalists still runs
            production_sweep(search, chosen)
    confirmed: list[Measurement] = []
    for m in chosen:
        try:
            confirmed.append(search.measure(m.point, m.load, phase="confirm"))
        except BudgetSpentError:
            break
    confirmed.sort(key=rank, reverse=True)
    feasible = [c for c in confirmed if c.feasible]
    winner = feasible[0] if feasible else None
    runner = feasible[1] if len(feasible) > 1 else None
    return winner, runner, tuple(confirmed)
