"""Where a tuning run's time went: per phase of the search (screening, confirmation, the final
check), split into config loads, warm-ups, measurement windows and the load generator's set-up,
beside the run's own steps (server start, set-up, restoring the original configs).

Each measurement's :attr:`Outcome.timing` says how its time was spent (the live measurer fills
it); :func:`time_breakdown` sums them per phase. Measurements replayed from a checkpoint cost
nothing in this run and are left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tritonkit.tune.objective import Measurement

__all__ = [
    "PHASES",
    "PHASE_PARTS",
    "TIME_COLUMNS",
    "phase_group",
    "time_breakdown",
    "time_lines",
    "time_rows",
]

#: the search's phases in the order a run goes through them
PHASES = ("screen", "confirm", "check")
#: how one measurement's time splits (keys of Outcome.timing)
PHASE_PARTS = ("load_s", "warmup_s", "windows_s", "overhead_s")
_NAMES = {"screen": "screening", "confirm": "confirmation", "check": "final check"}
#: the run's own steps (TuneResult.timing), before and after the search
_BEFORE = (("server_start_s", "server start"), ("setup_s", "set-up"))
_AFTER = (
    ("stage_profile_s", "the winner profiled stage by stage"),
    ("restore_s", "restoring the original configs"),
    ("server_stop_s", "server stop"),
    ("other_s", "other"),
)


def phase_group(phase: str) -> str:
    """A measurement's phase as the breakdown groups it (``check-2`` -> ``check``)."""
    return "check" if phase.startswith("check") else phase


def _phase_totals(measurements: Iterable[Measurement]) -> list[dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for m in measurements:
        if m.resumed:
            continue
        group = phase_group(m.phase)
        row = rows.setdefault(
            group,
            {
                "phase": group,
                "measurements": 0,
                "wall_s": 0.0,
                "windows": 0,
                **dict.fromkeys(PHASE_PARTS, 0.0),
            },
        )
        row["measurements"] += 1
        row["wall_s"] += m.wall_s
        row["windows"] += m.outcome.windows
        for part in PHASE_PARTS:
            row[part] += float(m.outcome.timing.get(part, 0.0))
    order = [p for p in PHASES if p in rows] + sorted(p for p in rows if p not in PHASES)
    out = []
    for name in order:
        row = rows[name]
        # the search's own work between the perf runs (choosing, checkpointing) is the rest
        row["search_s"] = max(0.0, row["wall_s"] - sum(row[p] for p in PHASE_PARTS))
        out.append({k: round(v, 2) if isinstance(v, float) else v for k, v in row.items()})
    return out


def time_breakdown(
    measurements: Iterable[Measurement], *, total_s: float, steps: Mapping[str, float]
) -> dict[str, Any]:
    """The run's time: ``steps`` (e.g. ``server_start_s``, ``setup_s``, ``restore_s``, measured
    by the runner), the search's phases, and what is left (``other_s``: choosing candidates,
    writing the checkpoint, anything not timed)."""
    phases = _phase_totals(measurements)
    accounted = sum(steps.values()) + sum(p["wall_s"] for p in phases)
    totals = {part: round(sum(p[part] for p in phases), 2) for part in ("wall_s", *PHASE_PARTS)}
    return {
        "total_s": round(total_s, 2),
        **{k: round(v, 2) for k, v in steps.items()},
        "phases": phases,
        "measuring": {"measurements": sum(p["measurements"] for p in phases), **totals},
        "other_s": round(max(0.0, total_s - accounted), 2),
    }


TIME_COLUMNS = ("phase", "measurements", "wall s", "loads s", "warm-ups s", "windows", "client set-up s")


def time_rows(breakdown: Mapping[str, Any]) -> list[list[str]]:
    """The breakdown as table rows: the run's steps, then each phase of the search."""
    rows = []
    for key, label in _BEFORE:
        if breakdown.get(key):
            rows.append([label, "", f"{breakdown[key]:.1f}", "", "", "", ""])
    for p in breakdown.get("phases", []):
        rows.append(
            [
                _NAMES.get(p["phase"], p["phase"]),
                str(p["measurements"]),
                f"{p['wall_s']:.1f}",
                f"{p['load_s']:.1f}",
                f"{p['warmup_s']:.1f}",
                f"{p['windows']} ({p['windows_s']:.1f} s)",
                f"{p['overhead_s']:.1f}",
            ]
        )
    for key, label in _AFTER:
        if breakdown.get(key):
            rows.append([label, "", f"{breakdown[key]:.1f}", "", "", "", ""])
    rows.append(["total", "", f"{breakdown.get('total_s', 0.0):.1f}", "", "", "", ""])
    return rows


def time_lines(breakdown: Mapping[str, Any]) -> list[str]:
    """One sentence: the total and its largest parts."""
    parts = []
    for key, label in _BEFORE:
        if breakdown.get(key):
            parts.append(f"{label} {breakdown[key]:.0f} s")
    for p in breakdown.get("phases", []):
        parts.append(
            f"{_NAMES.get(p['phase'], p['phase'])} {p['wall_s']:.0f} s ({p['measurements']} measurements: "
            f"loads {p['load_s']:.0f} s, warm-ups {p['warmup_s']:.0f} s, {p['windows']} windows "
            f"{p['windows_s']:.0f} s)"
        )
    for key, label in _AFTER[:-1]:
        if breakdown.get(key, 0.0) >= 0.5:
            parts.append(f"{label} {breakdown[key]:.0f} s")
    return [f"Time: {breakdown.get('total_s', 0.0):.0f} s = " + ", ".join(parts) + "."]
