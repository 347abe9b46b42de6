"""Whether the winner's gain holds up: the winner and the original config re-measured in turns.

A search ranks many configs on short windows, so its best can be the luckiest window rather than
a better config. The final check loads the winner and the original config alternately (the
order flips each round, so drift on the machine hits both), measures each with the full
stability rule, and reports the margin per round. The margin *holds* when every round shows the
winner ahead by more than the noise; it is *within noise* when the median round does not; in
between it is *unstable* (the rounds disagree), and the report gives their range.

The rounds are sequential: after two (both orders), the check stops as soon as a further round
could not change the verdict (:attr:`FinalCheck.settled`). An original config that misses the
constraints at the winner's load still has a figure: the margin is measured against it, and
the report says it missed them.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FinalCheck"]


@dataclass(frozen=True)
class FinalCheck:
    """The winner and the baseline (original config) re-measured alternately at one load.

    ``winner_values`` and ``baseline_values`` are the objective's values per round (None: the
    winner's measurement was infeasible, or either failed to give a figure); ``higher_is_better``
    orients the margin so that a positive margin always means the winner is better.
    ``baseline_misses``: per round, the constraint the original config missed ("" when it met
    them). ``max_rounds``: the most rounds the check was allowed (0: as many as ran).
    """

    load: float
    noise_pct: float
    higher_is_better: bool = True
    winner_values: tuple[float | None, ...] = ()
    baseline_values: tuple[float | None, ...] = ()
    #: why the check did not run or stopped early ("" when every round ran)
    skipped: str = ""
    unit: str = "infer/s"
    winner_index: tuple[int, ...] = field(default_factory=tuple)  # the measurements behind it
    baseline_index: tuple[int, ...] = field(default_factory=tuple)
    baseline_misses: tuple[str, ...] = ()
    max_rounds: int = 0

    @property
    def ratios(self) -> tuple[float, ...]:
        """Per round, how many times better the winner was (1.0: the same)."""
        out = []
        for w, b in zip(self.winner_values, self.baseline_values, strict=False):
            if w is None or b is None or w <= 0 or b <= 0:
                continue
            out.append(w / b if self.higher_is_better else b / w)
        return tuple(out)

    @property
    def margin_pct(self) -> float | None:
        """The median round's margin, in percent (positive: the winner is better)."""
        r = self.ratios
        return (statistics.median(r) - 1.0) * 100.0 if r else None

    @property
    def spread_pct(self) -> tuple[float, float] | None:
        """The lowest and highest round's margin, in percent."""
        r = self.ratios
        return ((min(r) - 1.0) * 100.0, (max(r) - 1.0) * 100.0) if r else None

    @property
    def settled(self) -> bool:
        """Whether a further round could not change the verdict: at least two rounds (both
        orders), every one with a margin, and even a round off by the rounds' own spread plus the
        noise again would leave it where it is (every round still beyond the noise: *holds*; the
        best round still within it: *within noise*)."""
        r = self.ratios
        if len(r) < 2 or len(r) < len(self.winner_values):
            return False
        drift = (max(r) - min(r)) / min(r) + self.noise_pct / 100.0
        threshold = 1.0 + self.noise_pct / 100.0
        return min(r) / (1.0 + drift) > threshold or max(r) * (1.0 + drift) <= threshold

    @property
    def verdict(self) -> str:
        """``holds`` | ``unstable`` | ``within noise`` | ``not run``."""
        r = self.ratios
        if not r:
            return "not run"
        threshold = 1.0 + self.noise_pct / 100.0
        if statistics.median(r) <= threshold:
            return "within noise"
        return "holds" if min(r) > threshold else "unstable"

    def sentence(self) -> str:
        """One line for the report."""
        if not self.ratios:
            return "Final check not run: " + (self.skipped or "no round produced two feasible figures") + "."
        margin = self.margin_pct or 0.0
        lo, hi = self.spread_pct or (0.0, 0.0)
        w = _median(self.winner_values)
        b = _median(self.baseline_values)
        head = (
            f"Final check ({len(self.ratios)} rounds, winner and original config measured in turns at "
            f"load {self.load:g}): winner {w:.1f} vs original {b:.1f} {self.unit} (medians), margin "
            f"{margin:+.0f}% (rounds {lo:+.0f}% to {hi:+.0f}%)"
        )
        tail = {
            "holds": f"; it holds: every round beat the original by more than the {self.noise_pct:g}% noise.",
            "unstable": f"; NOT stable: some rounds were within the {self.noise_pct:g}% noise, so the "
            "margin depends on the moment (rerun with longer --confirm-window or on a quieter machine).",
            "within noise": f"; the winner's margin is within noise ({self.noise_pct:g}%): the original "
            "config is as good a choice.",
        }[self.verdict]
        misses = [x for x in self.baseline_misses if x]
        if misses:
            tail += (
                f" The original config missed the constraints in {len(misses)} of "
                f"{len(self.baseline_misses)} rounds ({misses[0]}); its figures are compared as measured."
            )
        if self.max_rounds > len(self.winner_values) and not self.skipped:
            tail += (
                f" Stopped after {len(self.winner_values)} of at most {self.max_rounds} rounds: "
                "a further round could not change the verdict."
            )
        return head + tail + (f" ({self.skipped})" if self.skipped else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "load": self.load,
            "noise_pct": self.noise_pct,
            "unit": self.unit,
            "winner_values": list(self.winner_values),
            "baseline_values": list(self.baseline_values),
            "ratios": [round(x, 4) for x in self.ratios],
            "margin_pct": _round(self.margin_pct),
            "spread_pct": [round(x, 2) for x in self.spread_pct] if self.spread_pct else None,
            "verdict": self.verdict,
            "skipped": self.skipped,
            "winner_measurements": list(self.winner_index),
            "baseline_measurements": list(self.baseline_index),
            "baseline_misses": list(self.baseline_misses),
            "rounds": len(self.winner_values),
            "max_rounds": self.max_rounds,
        }


def _median(values: tuple[float | None, ...]) -> float:
    got = [v for v in values if v is not None and math.isfinite(v)]
    return statistics.median(got) if got else 0.0


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 2)
