"""Side-by-side comparison of two benchmark runs (e.g. dynamic batching on vs off)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tritonkit.errors import PerfError
from tritonkit.perf.results import PerfRun, StepResult


@dataclass(frozen=True)
class ComparedStep:
    level: float
    a: StepResult | None
    b: StepResult | None

    @staticmethod
    def _ratio(x: float | None, y: float | None) -> float | None:
        if x is None or y is None or x == 0:
            return None
        return y / x

    @property
    def throughput_ratio(self) -> float | None:
        """B's throughput over A's (2.0: B does twice the work)."""
        return self._ratio(self.a.throughput if self.a else None, self.b.throughput if self.b else None)

    def latency_ratio(self, stat: str = "p99") -> float | None:
        """B's latency over A's (0.5: B answers in half the time)."""
        return self._ratio(
            self.a.latency_us(stat) if self.a else None, self.b.latency_us(stat) if self.b else None
        )

    def to_dict(self) -> dict[str, Any]:
        def side(s: StepResult | None) -> dict[str, Any] | None:
            if s is None:
                return None
            return {
                "throughput": s.throughput,
                "p50_us": s.latency_us("p50"),
                "p99_us": s.latency_us("p99"),
                "stable": s.stable,
                "errors": s.error_count,
                "avg_batch_size": s.server.avg_batch_size if s.server else None,
                "stream": None
                if s.stream is None
                else {
                    "output_tokens_per_s": s.stream.output_tokens_per_s,
                    "ttft_p50_us": s.stream.get("ttft", "p50"),
                    "ttft_p99_us": s.stream.get("ttft", "p99"),
                    "itl_p50_us": s.stream.get("itl", "p50"),
                    "itl_p99_us": s.stream.get("itl", "p99"),
                },
            }

        return {
            "level": self.level,
            "a": side(self.a),
            "b": side(self.b),
            "throughput_ratio": self.throughput_ratio,
            "p50_ratio": self.latency_ratio("p50"),
            "p99_ratio": self.latency_ratio("p99"),
        }


@dataclass(frozen=True)
class Comparison:
    a: PerfRun
    b: PerfRun
    a_label: str
    b_label: str
    steps: tuple[ComparedStep, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": {"label": self.a_label, "model": self.a.model, "url": self.a.url},
            "b": {"label": self.b_label, "model": self.b.model, "url": self.b.url},
            "mode": self.a.mode,
            "steps": [s.to_dict() for s in self.steps],
        }


def compare(a: PerfRun, b: PerfRun, *, a_label: str = "A", b_label: str = "B") -> Comparison:
    """Pair the steps of two runs by load level (steps only one run has are kept, unpaired)."""
    if a.mode != b.mode:
        raise PerfError(
            f"cannot compare a {a.mode} run with a {b.mode} run",
            hint="compare runs made with the same load mode (--concurrency or --request-rate)",
        )
    by_a = {s.level: s for s in a.steps}
    by_b = {s.level: s for s in b.steps}
    levels = sorted(set(by_a) | set(by_b))
    return Comparison(
        a=a,
        b=b,
        a_label=a_label,
        b_label=b_label,
        steps=tuple(ComparedStep(level=lv, a=by_a.get(lv), b=by_b.get(lv)) for lv in levels),
    )
