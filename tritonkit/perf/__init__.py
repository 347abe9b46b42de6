"""Benchmarking Triton endpoints: load generator, statistics, reports, plots and cost.

``run_perf(PerfSettings(url=..., model=..., levels=(1, 4, 16)))`` measures each load level
until perf_analyzer's stability rule holds and returns a :class:`PerfRun`; ``write_json``,
``write_csv`` (perf_analyzer's columns), ``write_report`` and ``estimate_cost`` turn it into
files and dollars. Plots need the ``plot`` extra (matplotlib).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tritonkit._lazy import lazy_exports
from tritonkit.perf.compare import Comparison, compare  # eager: the function shares its module's name

if TYPE_CHECKING:
    from tritonkit.perf.cost import LatencyBudget, estimate_cost, load_prices, parse_budget, usd_per_million
    from tritonkit.perf.levels import parse_duration, parse_levels
    from tritonkit.perf.results import (
        CSV_HEADER,
        CostEstimate,
        PerfRun,
        ServerStats,
        StepResult,
        read_json,
        to_csv,
        write_csv,
        write_json,
    )
    from tritonkit.perf.runner import PerfSettings, Progress, Runner, run_perf
    from tritonkit.perf.stats import LatencySummary, check_stability, percentile

# The names imported above load on first use: importing one module of the package costs only its
# own floor.
__getattr__, __dir__ = lazy_exports(__name__, __file__)

__all__ = [
    "CSV_HEADER",
    "Comparison",
    "CostEstimate",
    "LatencyBudget",
    "LatencySummary",
    "PerfRun",
    "PerfSettings",
    "Progress",
    "Runner",
    "ServerStats",
    "StepResult",
    "check_stability",
    "compare",
    "estimate_cost",
    "load_prices",
    "parse_budget",
    "parse_duration",
    "parse_levels",
    "percentile",
    "read_json",
    "run_perf",
    "to_csv",
    "usd_per_million",
    "write_csv",
    "write_json",
]
