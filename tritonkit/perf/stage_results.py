"""One composing model's share of a perf step (kept apart from :mod:`tritonkit.perf.stages`,
which reads the server, so that results can hold it without importing that)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tritonkit._records import from_record, to_record

__all__ = ["StageStats"]


@dataclass(frozen=True, kw_only=True)
class StageStats:
    """One composing model's share of a step, per request (Triton's accounting, microseconds)."""

    model: str
    version: str  # the version(s) that served requests in the window, comma-joined
    via: str
    parent: str
    requests: int
    executions: int
    inferences: int
    queue_us: float
    compute_input_us: float
    compute_infer_us: float
    compute_output_us: float
    request_us: float

    @property
    def batch_size(self) -> float:
        """Average executed batch size (inferences per execution)."""
        return self.inferences / self.executions if self.executions else 0.0

    @property
    def time_us(self) -> float:
        """Queue plus compute, per request: the stage's own time."""
        return self.queue_us + self.compute_input_us + self.compute_infer_us + self.compute_output_us

    def to_dict(self) -> dict[str, Any]:
        return to_record(self, skip=("inferences",), after={"executions": {"batch_size": self.batch_size}})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StageStats:
        executions = int(data.get("executions", 0))
        inferences = round(float(data.get("batch_size", 0.0)) * executions)
        return from_record(
            cls,
            data,
            defaults={"version": "", "via": "", "parent": "", "request_us": 0.0},
            values={"executions": executions, "inferences": inferences},
        )
