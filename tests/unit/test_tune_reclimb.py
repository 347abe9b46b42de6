"""The climb goes on from the confirmed winner when the confirmation overturned the screening.

Modelled on ``batch_bound`` at concurrency 16 (issue #44, verdict run 7): two instances with
batch 16 and a 2 ms queue delay screened at 561/s on lucky windows and confirmed at 480/s; the
runner-up (batch 16, 10 ms) confirmed at 555/s and won, while its one-step neighbour (batch 8,
10 ms: 650/s, the best config by construction) was never measured, two steps from the lucky
one. The searches run on a fake measurer: what is under test is which configs get measured and
which one wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tritonkit.tune.objective import Objective, Outcome
from tritonkit.tune.space import Dimension, Space
from tritonkit.tune.strategy import search

M = "batch_bound"
LUCKY = (1, 0)  # batch 16, 2 ms
RUNNER = (1, 1)  # batch 16, 10 ms
BEST = (0, 1)  # batch 8, 10 ms


def _space() -> Space:
    return Space(
        target=M,
        dimensions=(
            Dimension(M, "max_batch_size", (8, 16)),
            Dimension(M, "max_queue_delay_microseconds", (2000, 10000)),
        ),
        loads=(16.0,),
    )


class Surface:
    """Screening and confirmed figures per point (batch index, delay index)."""

    SCREEN = {LUCKY: 561.0, RUNNER: 533.0, BEST: 650.0, (0, 0): 441.0}
    CONFIRM = {LUCKY: 480.0, RUNNER: 555.0, BEST: 640.0, (0, 0): 430.0}

    def __init__(self, lucky_confirms_at: float | None = None) -> None:
        self.confirm = dict(self.CONFIRM)
        if lucky_confirms_at is not None:
            self.confirm[LUCKY] = lucky_confirms_at
        self.calls: list[tuple[tuple[int, int], bool]] = []

    def measure(
        self,
        settings: Mapping[str, Mapping[str, Any]],
        load: float,
        *,
        confirm: bool,
        bar: float | None = None,
    ) -> Outcome:
        knobs = settings[M]
        key = (
            (8, 16).index(int(knobs["max_batch_size"])),
            (2000, 10000).index(int(knobs["max_queue_delay_microseconds"])),
        )
        self.calls.append((key, confirm))
        thr = (self.confirm if confirm else self.SCREEN)[key]
        lat = load / thr * 1e6
        return Outcome(throughput=thr, latency_us={"avg": lat, "p50": lat, "p99": lat * 1.3})


def _climb(surface: Surface) -> Any:
    return search(
        _space(),
        Objective(),
        surface,
        strategy="hill-climb",
        production_loads=(16.0,),
        start=LUCKY,
        check_rounds=0,
    )


def test_a_confirmation_that_overturns_the_screening_climbs_on_from_the_confirmed_winner() -> None:
    surface = Surface()
    found = _climb(surface)
    w = found.winner
    assert w is not None and w.phase == "confirm"
    assert w.settings == {f"{M}.max_batch_size": 8, f"{M}.max_queue_delay_microseconds": 10000}
    assert w.outcome.throughput == 640.0
    # the first climb stopped at the lucky config: its two neighbours screened under its 561/s
    screened = [key for key, confirm in surface.calls if not confirm]
    assert screened.index(BEST) > screened.index(RUNNER) and screened.count(BEST) == 1
    # every confirmation stands: the overturned one, its runner-up and the new best
    confirmed = [key for key, confirm in surface.calls if confirm]
    assert confirmed == [LUCKY, RUNNER, BEST]
    assert {m.outcome.throughput for m in found.finalists} == {640.0, 555.0, 480.0}
    assert found.runner_up is not None and found.runner_up.outcome.throughput == 555.0
    # one winner: the per-load answer at the peak is the winner's own measurement
    assert dict(found.per_level)[16.0] is w


def test_a_confirmation_that_agrees_with_the_screening_costs_nothing_more() -> None:
    surface = Surface(lucky_confirms_at=600.0)
    found = _climb(surface)
    w = found.winner
    assert w is not None and w.outcome.throughput == 600.0
    # the climb is not repeated: the best config two steps away stays unmeasured, as before
    assert BEST not in [key for key, _ in surface.calls]
    assert [key for key, confirm in surface.calls if confirm] == [LUCKY, RUNNER]


def test_the_grid_is_not_climbed_again() -> None:
    surface = Surface()
    found = search(_space(), Objective(), surface, strategy="grid", production_loads=(16.0,), check_rounds=0)
    assert found.winner is not None and found.winner.outcome.throughput == 640.0
    assert len([1 for _, confirm in surface.calls if not confirm]) == 4
