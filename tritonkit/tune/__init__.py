"""Tuning: find a model's best config by measurement on a live server, without restarts.

``tune(TuneSettings(model=..., repository=...))`` loads each candidate config through Triton's
model-repository API, measures it with perf's load engine and stability rule, and returns a
:class:`TuneResult` (every measurement, the confirmed winner, whether it is within noise of the
runner-up). :mod:`tritonkit.tune.outputs` writes JSON, CSV, the Pareto plot, the report and the
winner back into the repository.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tritonkit._lazy import lazy_exports

if TYPE_CHECKING:
    from tritonkit.tune.objective import Measurement, Objective, Outcome, SearchResult
    from tritonkit.tune.runner import TuneResult, TuneSettings, tune
    from tritonkit.tune.space import Dimension, Space, default_space, load_space
    from tritonkit.tune.strategy import search

# The names imported above load on first use: importing one module of the package costs only its
# own floor.
__getattr__, __dir__ = lazy_exports(__name__, __file__)

__all__ = [
    "Dimension",
    "Measurement",
    "Objective",
    "Outcome",
    "SearchResult",
    "Space",
    "TuneResult",
    "TuneSettings",
    "default_space",
    "load_space",
    "search",
    "tune",
]
