"""The gauges the backend reports through Triton's metrics: requests in the engine now and
whether the engine is alive (``tritonkit serve``'s healer reads the latter).

Shipped beside ``model.py`` (the stub puts this directory on ``sys.path``); imports nothing
from tritonkit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import triton_python_backend_utils as pb_utils

ACTIVE_METRIC = "tritonkit_generation_active"
ALIVE_METRIC = "tritonkit_engine_alive"


class Gauge:
    """A gauge of this instance: ``tritonkit_generation_active`` (requests in the engine now) and
    ``tritonkit_engine_alive`` (1 while the engine runs, 0 once it died).

    A failed update (the stub's message to Triton did not go through) is logged once (through
    ``warn``) and the next update tries again: giving the metric up would leave the gauge stuck at
    a stale value.
    """

    def __init__(
        self, name: str, description: str, labels: dict[str, str], warn: Callable[[str], None]
    ) -> None:
        self._metric: Any = None
        self._name = name
        self._warn = warn
        self._failed = False
        try:
            family = pb_utils.MetricFamily
            self._family = family(name, description, family.GAUGE)
            self._metric = self._family.Metric(labels=labels)
        except Exception:  # noqa: BLE001 - metrics are optional (--allow-metrics=false)
            self._metric = None

    def set(self, value: int) -> None:
        if self._metric is None:
            return
        try:
            self._metric.set(float(value))
        except Exception as exc:  # noqa: BLE001 - a metric must never fail a request
            if not self._failed:
                self._warn(f"could not update {self._name}: {exc}")
            self._failed = True
