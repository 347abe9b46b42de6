"""``hill-climb``: a coordinate search. The start config is swept over concurrency; then each
neighbour (one step along one dimension) is screened at the incumbent's best load, and only a
neighbour that beats the incumbent is swept further and becomes the new incumbent. Infeasible
neighbours are never swept, so the search does not dig into the infeasible region. ``polish``
is the same climb from a given start (the surrogate search ends with it)."""

from __future__ import annotations

from tritonkit.tune.objective import Measurement
from tritonkit.tune.space import Point
from tritonkit.tune.strategies.base import Search, opens

__all__ = ["better_neighbour", "hill_climb", "polish"]


def hill_climb(search: Search, start: Point) -> None:
    search.sweep(start, search.start_index(start))
    _climb(search, start, at_peak=False)


def better_neighbour(search: Search, current: Point, incumbent: Measurement) -> Point | None:
    """First neighbour that beats the incumbent at its load (one short measurement each).

    A neighbour that ties but switches a feature on (dynamic batching, which makes the queue
    delay matter) is looked past: its own neighbours are probed too, since the feature's
    benefit may need a setting the plain step did not try.
    """
    ties: list[Point] = []
    for nb in search.space.neighbours(current):
        if search.space.signature(nb) == incumbent.signature:
            continue  # a step along a dimension that has no effect here
        probe = search.measure(nb, incumbent.load, against=incumbent)
        if search.gains(probe, incumbent, search.min_gain):
            return nb
        if (
            probe.feasible
            and search.gains(probe, incumbent, -search.min_gain)
            and opens(search.space, current, nb)
        ):
            ties.append(nb)
    for tie in ties:
        for nb in search.space.neighbours(tie):
            if nb == current or search.space.signature(nb) in (
                incumbent.signature,
                search.space.signature(tie),
            ):
                continue
            if not opens(search.space, current, nb) or nb in search.space.neighbours(current):
                continue
            probe = search.measure(nb, incumbent.load, against=incumbent)
            if search.gains(probe, incumbent, search.min_gain):
                return nb
    return None


def polish(search: Search, start: Point) -> None:
    """Hill-climb from ``start``: neighbours probed at the incumbent's load, a better one
    swept and adopted (measurements already made are reused, not repeated)."""
    _climb(search, start, at_peak=bool(search.production))


def _climb(search: Search, current: Point, *, at_peak: bool) -> None:
    """Move to a better neighbour until none is: each new incumbent swept over load, or, with
    ``at_peak``, measured once at the production peak."""
    while True:
        incumbent = search.best.get(search.space.signature(current))
        if incumbent is None:
            return
        nxt = better_neighbour(search, current, incumbent)
        if nxt is None:
            return
        if at_peak:
            search.measure(nxt, search.production[-1])
        else:
            search.sweep(nxt, search.levels.index(incumbent.load))
        current = nxt
