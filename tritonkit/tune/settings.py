"""What defines one tuning run: :class:`TuneSettings`, checked before anything starts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritonkit.errors import TuneError
from tritonkit.perf.cost import find_sku, parse_budget
from tritonkit.tune.objective import Objective
from tritonkit.tune.space import Space
from tritonkit.tune.strategy import STRATEGIES

__all__ = ["TuneSettings"]


@dataclass(frozen=True, kw_only=True)
class TuneSettings:
    """Everything that defines one tuning run."""

    model: str
    repository: str | Path | None = None  # local server's repository; with url: for validation/variants
    url: str | None = None  # None: start a local server on ``repository``
    protocol: str = "http"
    model_config_name: str | None = "auto"
    space_file: str | Path | None = None
    space: Space | None = None  # instead of defaults / space_file
    strategy: str = "default"
    #: the production load: concurrency levels or request rates (one level or several; the
    #: recommended config is judged at their peak). None: each candidate's sweep finds the load
    concurrency: tuple[int, ...] | None = None
    request_rate: tuple[float, ...] | None = None
    workers: int = 0  # load-generator processes (perf's --workers); 0: in-process
    trials: int | None = None  # default strategy: most candidates (None: from the space)
    patience: int = 8  # default strategy: candidates in a row without gain before it stops
    seed: int = 0
    objective: str = "throughput"
    latency_budget: str | None = None  # e.g. "p99=20ms"
    min_throughput: float | None = None
    sku: str | None = None  # --objective cost: a VM size from perf's price table
    price_per_hour: float | None = None
    spot: bool = False
    budget_s: float | None = None
    max_measurements: int | None = None
    finalists: int = 2
    screen_window_ms: int = 500
    confirm_window_ms: int = 1000
    stability_percentage: float = 10.0
    max_trials: int = 10
    #: screening windows adapt too: at least 3, more until the last 3 agree, at most this many
    screen_max_windows: int = 6
    warmup_s: float = 0.5
    #: warm-up after a candidate is loaded (a GPU model's first batches are slow): at most this
    #: long, and over once two warm-up windows in a row agree (the model has settled)
    load_warmup_s: float = 2.0
    #: the settling warm-up's shortest window (it grows to 3x the latency seen); None: every
    #: warm-up lasts its full length
    warmup_settle_ms: int | None = 100
    #: the winner and the original config re-measured in turns at the end: at most this many
    #: rounds, at least two (both orders) unless the count is lower; it stops as soon as
    #: another round could not change the verdict
    check_rounds: int = 3
    noise_pct: float = 5.0
    input_data: str = "random"
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    timeout_s: float = 30.0
    cacert: str | None = None
    checkpoint: str | Path | None = None
    resume: bool = False
    startup_timeout_s: float = 180.0

    def validate(self) -> None:
        if self.url is None and self.repository is None:
            raise TuneError(
                "give a model repository (local server) or a URL", hint="tritonkit tune REPO MODEL"
            )
        if self.strategy not in STRATEGIES:
            raise TuneError(f"unknown strategy '{self.strategy}'", hint="use one of " + ", ".join(STRATEGIES))
        if self.concurrency is not None and self.request_rate is not None:
            raise TuneError(
                "give --concurrency or --request-rate, not both",
                hint="the production load is either closed (concurrency) or open (request rate)",
            )
        if self.concurrency is not None and (not self.concurrency or any(c < 1 for c in self.concurrency)):
            raise TuneError("--concurrency levels must be positive integers", hint="e.g. --concurrency 32")
        if self.request_rate is not None and (
            not self.request_rate or any(not r > 0 for r in self.request_rate)
        ):
            raise TuneError("--request-rate levels must be positive", hint="e.g. --request-rate 200")
        if self.workers < 0:
            raise TuneError("--workers must be 0 (in-process) or more")
        if self.trials is not None and self.trials < 1:
            raise TuneError("--trials must be at least 1")
        if self.patience < 1:
            raise TuneError("--patience must be at least 1")
        if self.protocol not in ("http", "grpc"):
            raise TuneError(f"unknown protocol '{self.protocol}'", hint="use http or grpc")
        if self.budget_s is not None and self.budget_s <= 0:
            raise TuneError("--budget must be positive")
        if self.max_measurements is not None and self.max_measurements < 2:
            raise TuneError("--max-measurements must be at least 2 (one screening, one confirmation)")
        self._validate_windows()
        if self.resume and self.checkpoint is None:
            raise TuneError("--resume needs a checkpoint file", hint="pass --checkpoint PATH")
        if self.min_throughput is not None and self.min_throughput <= 0:
            raise TuneError("--min-throughput must be positive")

    def _validate_windows(self) -> None:
        if self.screen_window_ms < 100 or self.confirm_window_ms < 100:
            raise TuneError("measurement windows must be at least 100 ms")
        if self.screen_max_windows < 3:
            raise TuneError("screening needs at least 3 windows (the stability rule compares 3)")
        if self.check_rounds < 0 or self.load_warmup_s < 0:
            raise TuneError("--check-rounds and --load-warmup must not be negative")

    @property
    def production_loads(self) -> tuple[float, ...]:
        levels = self.request_rate if self.request_rate is not None else self.concurrency
        return tuple(sorted({float(x) for x in levels})) if levels else ()

    @property
    def load_mode(self) -> str:
        return "request_rate" if self.request_rate is not None else "concurrency"

    def objective_spec(self) -> Objective:
        from tritonkit.perf.stream_metrics import StreamLimit, is_stream_budget, parse_stream_budget

        limits: tuple[StreamLimit, ...] = ()
        if self.latency_budget and is_stream_budget(self.latency_budget):
            limits = parse_stream_budget(self.latency_budget)  # ttft_p99=200ms,itl_p99=40ms
            budget = None
        else:
            budget = parse_budget(self.latency_budget) if self.latency_budget else None
        stat = budget.stat if budget else "p99"
        if self.objective == "ttft":  # the TTFT objective's statistic: the TTFT limit's, or p99
            stat = next((lim.stat for lim in limits if lim.metric == "ttft"), "p99")
        price = self.price_per_hour
        if self.objective == "cost" and price is None and self.sku:
            sku = find_sku(self.sku)
            price = sku.spot if self.spot and sku.spot is not None else sku.pay_as_you_go
        return Objective(
            kind=self.objective,
            latency_stat=stat,
            budget=budget,
            stream_limits=limits,
            min_throughput=self.min_throughput,
            usd_per_hour=price,
        )

    def to_record(self, command: str) -> dict[str, Any]:
        """What a result records of these settings (and the command line that gave them)."""
        return {
            "command": command,
            "strategy": self.strategy,
            "concurrency": list(self.concurrency) if self.concurrency else None,
            "request_rate": list(self.request_rate) if self.request_rate else None,
            "workers": self.workers,
            "trials": self.trials,
            "patience": self.patience,
            "seed": self.seed,
            "screen_window_ms": self.screen_window_ms,
            "confirm_window_ms": self.confirm_window_ms,
            "stability_percentage": self.stability_percentage,
            "max_trials": self.max_trials,
            "warmup_s": self.warmup_s,
            "screen_max_windows": self.screen_max_windows,
            "load_warmup_s": self.load_warmup_s,
            "warmup_settle_ms": self.warmup_settle_ms,
            "check_rounds": self.check_rounds,
            "finalists": self.finalists,
            "max_measurements": self.max_measurements,
            "budget_s": self.budget_s,
            "input_data": self.input_data,
            "protocol": self.protocol,
            "model_config_name": self.model_config_name,
        }
