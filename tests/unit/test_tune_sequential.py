"""Measurement spent where it decides something: screening windows that stop once a candidate
cannot reach the incumbent, and warm-ups that end once the model has settled.

The search runs on fake surfaces and the measurer on a stand-in for perf's runner (no server:
what is under test is when measuring stops and what is recorded, not the figures); the warm-up
runs perf's own runner code over scripted windows.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import pytest

from tritonkit.perf.cost import parse_budget
from tritonkit.perf.runner import PerfSettings, Runner
from tritonkit.tune import measure as measure_mod
from tritonkit.tune.measure import LiveMeasurer, cannot_reach
from tritonkit.tune.objective import Objective, Outcome

from .test_tune_verdict import LuckyScreen, M, _live, checked


def test_screening_stop_rule_waits_for_two_windows_and_allows_the_stability_tolerance() -> None:
    stop = cannot_reach(1000.0, 10.0)
    assert not stop([10.0])  # one window is never enough
    assert stop([10.0, 12.0])
    assert not stop([800.0, 910.0])  # 910 x 1.1 reaches the bar
    assert stop([800.0, 900.0])


class Bars(LuckyScreen):
    """LuckyScreen's surface that records the bar each measurement was given."""

    def __init__(self) -> None:
        super().__init__()
        self.bars: list[tuple[bool, float | None]] = []

    def measure(
        self,
        settings: Mapping[str, Mapping[str, Any]],
        load: float,
        *,
        confirm: bool,
        bar: float | None = None,
    ) -> Outcome:
        self.bars.append((confirm, bar))
        return super().measure(settings, load, confirm=confirm, bar=bar)


def test_search_gives_screening_probes_the_incumbents_bar_and_confirmations_none() -> None:
    surface = Bars()
    found = checked(surface, strategy="default", check_rounds=2)
    assert found.winner is not None
    screens = [bar for confirm, bar in surface.bars if not confirm]
    assert screens[0] is None  # the first candidate has no incumbent
    # later probes: 90% of the incumbent's figure, the line under which a probe is not swept
    seen = {m.outcome.throughput for m in found.measurements if m.phase == "screen"}
    assert all(bar is None or any(bar == pytest.approx(0.9 * t) for t in seen) for bar in screens)
    assert any(bar is not None for bar in screens[1:])
    assert all(bar is None for confirm, bar in surface.bars if confirm)


def test_search_gives_no_bar_when_the_objective_is_not_throughput() -> None:
    surface = Bars()
    checked(surface, Objective(kind="latency", budget=parse_budget("p99=1s")), strategy="hill-climb")
    assert all(bar is None for _, bar in surface.bars)


def _stand_in(monkeypatch: pytest.MonkeyPatch, *, stopped: bool) -> list[Any]:
    seen: list[Any] = []

    def fake_run_step(perf: Any, *, stop: Any, **_: Any) -> measure_mod.PerfStep:
        seen.append((perf, stop))
        step = SimpleNamespace(
            requests=40,
            error_count=0,
            stable=False,
            throughput=20.0,
            windows=tuple(SimpleNamespace(throughput=20.0, duration_s=0.5) for _ in range(2)),
            duration_s=1.0,
            client_cpu_us_per_request=10.0,
            stream=None,
            latency_us=lambda stat: 1000.0,
        )
        return measure_mod.PerfStep(step, 0.2, stopped)  # type: ignore[arg-type]

    monkeypatch.setattr(measure_mod, "run_step", fake_run_step)
    monkeypatch.setattr(LiveMeasurer, "apply", lambda self, settings: True)
    return seen


def test_measurer_cuts_a_screening_short_and_says_why_when_it_cannot_reach_the_bar(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = _stand_in(monkeypatch, stopped=True)
    out = _live(load_warmup_s=2.0, warmup_settle_ms=100).measure({M: {}}, 8.0, confirm=False, bar=900.0)
    perf, stop = seen[0]
    assert stop is not None and stop([20.0, 20.0]) and not stop([20.0])
    assert perf.warmup_settle_ms == 100 and perf.warmup_s == 2.0
    assert out.cut_short == "stopped after 2 windows: cannot reach 900.0 infer/s"
    assert out.timing["warmup_s"] == 0.2


def test_measurer_never_cuts_a_confirmation_or_a_screening_without_a_bar(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = _stand_in(monkeypatch, stopped=False)
    live = _live()
    live.measure({M: {}}, 8.0, confirm=False)
    live.measure({M: {}}, 8.0, confirm=True, bar=900.0)
    assert seen[0][1] is None
    assert all(stop is None for _, stop in seen[1:])


# --- perf's settling warm-up ----------------------------------------------------------------------


class Scripted:
    """Warm-up windows with scripted throughputs (one per cut), as perf's Windows yields them."""

    def __init__(self, throughputs: list[float]) -> None:
        self.throughputs = throughputs
        self.cuts = 0

    async def pull(self) -> None:
        return None

    def cut(self, start_ns: int, end_ns: int) -> Any:
        thr = self.throughputs[min(self.cuts, len(self.throughputs) - 1)]
        self.cuts += 1
        return SimpleNamespace(throughput=thr, completed=int(thr), avg_latency_us=lambda: 1000.0)


def _runner(**kw: Any) -> Runner:
    return Runner(PerfSettings(url="http://127.0.0.1:8000", model=M, **kw))


def test_warm_up_ends_once_two_windows_in_a_row_agree() -> None:
    runner = _runner(warmup_s=5.0, warmup_settle_ms=10, stability_percentage=10.0)
    windows = Scripted([3.0, 50.0, 98.0, 100.0, 100.0])  # slow first requests, then settled
    asyncio.run(runner._warm_up(windows))  # type: ignore[arg-type]
    assert windows.cuts == 4  # settled at the fourth window: the warm-up ended there,
    assert 0 < runner.warmed_up_s < 5.0  # before its full length


def test_warm_up_runs_its_full_length_when_the_model_never_settles_or_without_settling() -> None:
    runner = _runner(warmup_s=0.3, warmup_settle_ms=10, stability_percentage=10.0)
    windows = Scripted([10.0 * 2**i for i in range(100)])  # still doubling
    asyncio.run(runner._warm_up(windows))  # type: ignore[arg-type]
    assert runner.warmed_up_s >= 0.3  # its full length (a loaded box may make it longer)
    plain = _runner(warmup_s=0.2)
    fixed = Scripted([100.0])
    asyncio.run(plain._warm_up(fixed))  # type: ignore[arg-type]
    assert fixed.cuts == 0 and plain.warmed_up_s >= 0.2


def test_settling_warm_up_refuses_windows_under_10_ms() -> None:
    from tritonkit.errors import PerfError

    with pytest.raises(PerfError, match="at least 10 ms"):
        _runner(warmup_settle_ms=5)


def test_a_screening_cut_short_is_marked_in_the_table() -> None:
    from tritonkit.tune.outputs import table_rows

    from .test_tune_verdict import _result

    class Cut(LuckyScreen):
        def measure(
            self,
            settings: Mapping[str, Mapping[str, Any]],
            load: float,
            *,
            confirm: bool,
            bar: float | None = None,
        ) -> Outcome:
            out = super().measure(settings, load, confirm=confirm, bar=bar)
            if bar is not None and out.throughput < bar:
                return Outcome(
                    throughput=out.throughput, latency_us=out.latency_us, cut_short="cannot reach it"
                )
            return out

    found = checked(Cut(), strategy="hill-climb", start=(1, 1), check_rounds=0)
    rows = table_rows(_result(found))
    cut = [m.index for m in found.measurements if m.outcome.cut_short]
    assert cut
    assert all(rows[i - 1][1] == "screen (cut short)" for i in cut)
    assert all("cut short" not in r[1] for r in rows if int(r[0]) not in cut)
