"""How every strategy ends: the finalists measured at every production level (the per-load
answer), then re-measured with perf's full stability rule; the best confirmed one wins (when
that overturned the screening's order, the climb goes on from it first: :func:`reclimb`), and a
final check re-measures it against the original config in turns (does the gain hold up?)."""

from __future__ import annotations

import contextlib
import math
from dataclasses import replace

from tritonkit.tune.objective import Measurement
from tritonkit.tune.space import Point
from tritonkit.tune.strategies.base import BudgetSpentError, Search, rank
from tritonkit.tune.strategies.coordinate import polish
from tritonkit.tune.verdict import FinalCheck

__all__ = ["confirm", "final_check", "production_sweep", "reclimb"]

Confirmed = tuple[Measurement | None, Measurement | None, tuple[Measurement, ...]]


def production_sweep(search: Search, chosen: list[Measurement]) -> None:
    """The finalists at every production level (the per-load answer)."""
    for m in chosen:
        for level in search.production[:-1]:
            search.measure(m.point, level)


def _screened(search: Search) -> list[Measurement]:
    """The feasible screened candidates, best first: at the production peak when one was given,
    else each config's best level."""
    ranked = sorted(search.best.values(), key=rank, reverse=True)
    if search.production:
        peak = search.production[-1]
        at_peak = [m for m in search.order if m.phase == "screen" and m.load == peak]
        ranked = sorted({m.signature: m for m in at_peak}.values(), key=rank, reverse=True)
    return [m for m in ranked if m.feasible]


def confirm(search: Search, keep: tuple[Measurement, ...] = ()) -> Confirmed:
    """Re-measure the finalists with the full stability rule: at the production peak when
    one was given (the recommended config must hold there), else at each one's best level.
    ``keep``: confirmations made before (by :func:`reclimb`), ranked with the new ones."""
    chosen = _screened(search)[: search.finalists]
    if search.production:
        with contextlib.suppress(BudgetSpentError):  # confirming the finalists still runs
            production_sweep(search, chosen)
    confirmed: dict[str, Measurement] = {m.signature: m for m in keep}
    for m in chosen:
        try:
            c = search.measure(m.point, m.load, phase="confirm")
        except BudgetSpentError:
            break
        confirmed[c.signature] = c
    ranked = sorted(confirmed.values(), key=rank, reverse=True)
    feasible = [c for c in ranked if c.feasible]
    winner = feasible[0] if feasible else None
    runner = feasible[1] if len(feasible) > 1 else None
    return winner, runner, tuple(ranked)


def reclimb(search: Search, confirmed: Confirmed) -> Confirmed:
    """When the confirmation overturned the screening's order (the screening's leader confirmed
    below another finalist: its short windows were lucky, as a config whose batches only
    sometimes fill is), the climb had stopped around the wrong config. Climb again from the
    confirmed winner (its neighbours one probe each, a better one adopted) and confirm what
    that finds beside the earlier confirmations; the best confirmed one still wins. Costs
    nothing when the confirmation agreed with the screening."""
    winner = confirmed[0]
    screened = _screened(search)
    if winner is None or not screened or screened[0].signature == winner.signature:
        return confirmed
    before = len(search.order)
    with contextlib.suppress(BudgetSpentError):  # the earlier confirmations stand
        polish(search, winner.point)
    if len(search.order) == before:
        return confirmed
    return confirm(search, keep=confirmed[2])


def _figure(m: Measurement) -> float | None:
    """The original config's figure in a check round: measured, feasible or not (an original
    that misses the constraints is what the winner replaces); None when it gave none."""
    if m.outcome.failed or m.outcome.throughput <= 0 or not math.isfinite(m.value):
        return None
    return m.value


def final_check(
    search: Search, winner: Measurement | None, baseline: Point, rounds: int
) -> FinalCheck | None:
    """The winner and the original config (``baseline``) measured in turns, at most ``rounds``
    times each, at the winner's load with the full stability rule; the order flips every round
    so that a machine that gets busier or quieter over time weighs on both alike. After two
    rounds it stops once another could not change the verdict (:attr:`FinalCheck.settled`)."""
    if winner is None:
        return None
    unit = search.objective.unit
    check = FinalCheck(
        load=winner.load,
        noise_pct=search.noise_pct,
        higher_is_better=search.objective.higher_is_better,
        unit=unit,
        max_rounds=rounds,
    )
    if rounds < 1:
        return replace(check, skipped="--check-rounds 0")
    if search.space.signature(baseline) == winner.signature:
        return replace(check, skipped="the winner is the original config")
    points = {"winner": winner.point, "baseline": baseline}
    values: dict[str, list[float | None]] = {"winner": [], "baseline": []}
    index: dict[str, list[int]] = {"winner": [], "baseline": []}
    misses: list[str] = []
    skipped = ""
    for n in range(1, rounds + 1):
        order = ("winner", "baseline") if n % 2 else ("baseline", "winner")
        try:
            if search.deadline is not None and search.clock() >= search.deadline:
                raise BudgetSpentError("budget")
            got = {who: search.measure(points[who], winner.load, phase=f"check-{n}") for who in order}
        except BudgetSpentError as exc:
            skipped = f"stopped by the {exc.reason} after {n - 1} of {rounds} rounds"
            break
        w, b = got["winner"], got["baseline"]
        values["winner"].append(w.value if w.feasible else None)
        values["baseline"].append(_figure(b))
        misses.append("" if b.feasible else b.violation)
        index["winner"].append(w.index)
        index["baseline"].append(b.index)
        check = replace(
            check,
            winner_values=tuple(values["winner"]),
            baseline_values=tuple(values["baseline"]),
            winner_index=tuple(index["winner"]),
            baseline_index=tuple(index["baseline"]),
            baseline_misses=tuple(misses),
        )
        if check.settled:
            break
    return replace(check, skipped=skipped)
