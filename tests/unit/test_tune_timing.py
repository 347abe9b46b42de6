"""Where a tuning run's time went: every measurement's split (loads, warm-ups, windows, the load
generator's set-up), summed per search phase in tune.json, the report and the console view.

The measurer runs with perf's runner replaced by a fake that sleeps as a real one would (no
server: what is under test is how the time is attributed and reported, not how it is measured).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tritonkit.tune import measure as measure_mod
from tritonkit.tune.measure import LiveMeasurer
from tritonkit.tune.objective import Objective, Outcome
from tritonkit.tune.outputs import explain, write_report
from tritonkit.tune.strategy import search
from tritonkit.tune.timing import time_breakdown, time_rows

from .test_tune_verdict import LuckyScreen, M, _live, _result, _space, checked


class Timed(LuckyScreen):
    """LuckyScreen's surface, each outcome with a known split of its time."""

    def measure(
        self,
        settings: Mapping[str, Mapping[str, Any]],
        load: float,
        *,
        confirm: bool,
        bar: float | None = None,
    ) -> Outcome:
        out = super().measure(settings, load, confirm=confirm, bar=bar)
        timing = {"load_s": 1.0, "warmup_s": 2.0, "windows_s": 3.0 if confirm else 1.5, "overhead_s": 0.25}
        windows = 3
        return Outcome(
            throughput=out.throughput,
            latency_us=out.latency_us,
            timing=timing,
            windows=windows,
            window_ms=500,
        )


def _ticking() -> Any:
    """A clock that advances 5 s per reading (so every measurement's wall is 5 s)."""
    now = [0.0]

    def clock() -> float:
        now[0] += 5.0
        return now[0]

    return clock


def test_time_breakdown_sums_each_phase_and_groups_the_final_check_rounds() -> None:
    found = checked(Timed(), check_rounds=2, clock=_ticking())
    phases = {m.phase for m in found.measurements}
    assert {"screen", "confirm", "check-1", "check-2"} <= phases
    out = time_breakdown(found.measurements, total_s=500.0, steps={"server_start_s": 4.0, "restore_s": 1.0})
    by = {p["phase"]: p for p in out["phases"]}
    assert list(by) == ["screen", "confirm", "check"]
    n = {g: sum(1 for m in found.measurements if m.phase.startswith(g)) for g in by}
    for group, row in by.items():
        assert row["measurements"] == n[group]
        assert row["load_s"] == pytest.approx(1.0 * n[group])
        assert row["warmup_s"] == pytest.approx(2.0 * n[group])
        assert row["windows"] == 3 * n[group]
        assert row["wall_s"] == pytest.approx(5.0 * n[group])  # each measure() read the clock twice
    assert by["screen"]["windows_s"] == pytest.approx(1.5 * n["screen"])
    assert by["check"]["windows_s"] == pytest.approx(3.0 * n["check"])
    assert out["measuring"]["measurements"] == len(found.measurements)
    measured = sum(p["wall_s"] for p in out["phases"])
    assert out["other_s"] == pytest.approx(500.0 - 5.0 - measured)
    assert out["server_start_s"] == 4.0 and out["restore_s"] == 1.0


def test_time_breakdown_leaves_out_measurements_replayed_from_a_checkpoint() -> None:
    found = search(_space(), Objective(), Timed(), strategy="grid", production_loads=(16.0,))
    cache = {m.key: m.outcome for m in found.measurements if m.phase == "screen"}
    again = search(_space(), Objective(), Timed(), strategy="grid", production_loads=(16.0,), cache=cache)
    out = time_breakdown(again.measurements, total_s=10.0, steps={})
    assert [p["phase"] for p in out["phases"]] == ["confirm"]


def test_tune_json_report_and_sentence_carry_the_time_breakdown(tmp_path: Path) -> None:
    found = checked(Timed(), check_rounds=2)
    result = _result(found)
    result = type(result)(**{**result.__dict__, "timing": {"server_start_s": 3.0, "restore_s": 0.5}})
    data = json.loads(json.dumps(result.to_dict()))
    tb = data["time_breakdown"]
    assert [p["phase"] for p in tb["phases"]] == ["screen", "confirm", "check"]
    assert tb["server_start_s"] == 3.0 and tb["total_s"] == result.wall_s
    assert any(line.startswith("Time: ") and "final check" in line for line in explain(result))
    write_report(result, tmp_path / "report.md")
    text = (tmp_path / "report.md").read_text()
    assert "## Where the time went" in text
    rows = time_rows(result.time_breakdown())
    assert [r[0] for r in rows] == [
        "server start",
        "screening",
        "confirmation",
        "final check",
        "restoring the original configs",
        "total",
    ]
    assert "| final check |" in text


def _sleepy(monkeypatch: pytest.MonkeyPatch, *, warmup_sleep: float, window_s: float, windows: int) -> None:
    def fake_run_step(perf: Any, **_: Any) -> measure_mod.PerfStep:
        time.sleep(warmup_sleep + window_s * windows)
        step = SimpleNamespace(
            requests=300,
            error_count=0,
            stable=True,
            throughput=100.0,
            windows=tuple(SimpleNamespace(throughput=100.0, duration_s=window_s) for _ in range(windows)),
            duration_s=window_s * windows,
            client_cpu_us_per_request=10.0,
            stream=None,
            latency_us=lambda stat: 1000.0,
        )
        return measure_mod.PerfStep(step, warmup_sleep, False)  # type: ignore[arg-type]

    def slow_apply(self: LiveMeasurer, settings: Any) -> bool:
        time.sleep(0.05)
        return True

    monkeypatch.setattr(measure_mod, "run_step", fake_run_step)
    monkeypatch.setattr(LiveMeasurer, "apply", slow_apply)


def test_live_measurement_splits_its_time_into_load_warm_up_windows_and_set_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _sleepy(monkeypatch, warmup_sleep=0.03, window_s=0.02, windows=3)
    out = _live(load_warmup_s=0.0).measure({M: {}}, 8.0, confirm=False)
    t = out.timing
    assert set(t) == {"load_s", "warmup_s", "windows_s", "overhead_s"}
    assert t["load_s"] >= 0.05
    assert t["warmup_s"] == 0.03  # as long as the runner's warm-up ran
    assert t["windows_s"] == pytest.approx(0.06)
    assert t["overhead_s"] >= 0.0
    assert Outcome.from_dict(json.loads(json.dumps(out.to_dict()))).timing == t  # checkpoints keep it
