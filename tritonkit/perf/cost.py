"""Cost: the best step that meets a latency budget, priced on an Azure VM size.

Prices come from ``prices.json`` shipped with the package (Azure GPU and CPU SKUs,
pay-as-you-go and spot, each with the date and source of its price), or from ``--price``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

from tritonkit.errors import PerfError
from tritonkit.perf.results import CostEstimate, PerfRun, StepResult, TokenCost

_BUDGET = re.compile(
    r"^\s*(avg|p50|p90|p95|p99|max)\s*(?:=|<=|<)\s*([0-9]*\.?[0-9]+)\s*(us|µs|ms|s)?\s*$", re.I
)
_UNIT_US = {"us": 1.0, "µs": 1.0, "ms": 1000.0, "s": 1_000_000.0}


@dataclass(frozen=True)
class LatencyBudget:
    """e.g. p99 <= 50 ms."""

    stat: str
    limit_us: float

    def __str__(self) -> str:
        if self.limit_us >= 1000:
            return f"{self.stat}<={self.limit_us / 1000:g}ms"
        return f"{self.stat}<={self.limit_us:g}us"

    def met_by(self, step: StepResult) -> bool:
        value = step.latency_us(self.stat)
        return value is not None and value <= self.limit_us


def parse_budget(text: str) -> LatencyBudget:
    """``p99=50ms``, ``p95<=20ms``, ``avg=800us`` (unit defaults to ms)."""
    m = _BUDGET.match(text)
    if not m:
        raise PerfError(
            f"--latency-budget '{text}' is not STAT=VALUE[us|ms|s]",
            hint="e.g. --latency-budget p99=50ms (STAT is avg, p50, p90, p95, p99 or max)",
        )
    stat, value, unit = m.group(1).lower(), float(m.group(2)), (m.group(3) or "ms").lower()
    if value <= 0:
        raise PerfError(f"--latency-budget '{text}': the limit must be positive")
    return LatencyBudget(stat=stat, limit_us=value * _UNIT_US[unit])


@dataclass(frozen=True)
class SkuPrice:
    sku: str
    kind: str
    gpu: str | None
    vcpus: int
    pay_as_you_go: float
    spot: float | None
    date: str
    source: str


def load_prices() -> dict[str, SkuPrice]:
    """The shipped price table, by SKU name."""
    raw = resources.files("tritonkit.perf").joinpath("prices.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(raw)
    out = {}
    for name, p in data["skus"].items():
        out[name] = SkuPrice(
            sku=name,
            kind=str(p["kind"]),
            gpu=p.get("gpu"),
            vcpus=int(p["vcpus"]),
            pay_as_you_go=float(p["pay_as_you_go"]),
            spot=None if p.get("spot") is None else float(p["spot"]),
            date=str(p["date"]),
            source=str(p["source"]),
        )
    return out


def find_sku(name: str, prices: dict[str, SkuPrice] | None = None) -> SkuPrice:
    """A SKU by name, case-insensitive, with or without the ``Standard_`` prefix."""
    prices = prices if prices is not None else load_prices()
    wanted = name.lower().removeprefix("standard_")
    for sku, price in prices.items():
        if sku.lower().removeprefix("standard_") == wanted:
            return price
    raise PerfError(
        f"unknown VM size '{name}' (not in tritonkit's price table)",
        hint="give its hourly price with --price USD_PER_HOUR, or one of: " + ", ".join(sorted(prices)),
    )


def usd_per_million(usd_per_hour: float, throughput: float) -> float:
    """Dollars per million inferences for one replica running at ``throughput`` inferences/s."""
    if throughput <= 0:
        raise PerfError("cannot price a step with zero throughput")
    return usd_per_hour / (throughput * 3600.0) * 1_000_000.0


def _per_million(usd_per_hour: float, per_s: float | None) -> float | None:
    return usd_per_million(usd_per_hour, per_s) if per_s is not None and per_s > 0 else None


def _usable(step: StepResult, budget: LatencyBudget | None) -> bool:
    """Stable, error-free, with throughput, within ``budget`` and the step's streaming budget."""
    ok = step.stable and step.error_count == 0 and step.throughput > 0
    ok = ok and (budget is None or budget.met_by(step))
    goodput = step.stream.goodput if step.stream is not None else None
    return ok and (goodput is None or goodput.meets_budget)


def token_costs(run: PerfRun, usd_per_hour: float, budget: LatencyBudget | None) -> tuple[TokenCost, ...]:
    """Dollars per million input, output and all tokens at each streamed step of ``run``.

    Input tokens/s are the step's requests/s times its mean prompt length (the engine's count
    where it returned one, else the load generator's); a step whose prompts were not counted has
    none.
    """
    out = []
    for step in run.steps:
        st = step.stream
        if st is None:
            continue
        prompt = st.input_tokens.avg_us if st.input_tokens is not None else None
        inputs = prompt * st.requests_per_s if prompt is not None else None
        both = (inputs or 0.0) + st.output_tokens_per_s
        out.append(
            TokenCost(
                level=step.level,
                label=step.level_label,
                stable=step.stable,
                meets_budget=_usable(step, budget),
                input_tokens_per_s=inputs,
                output_tokens_per_s=st.output_tokens_per_s,
                usd_per_million_input_tokens=_per_million(usd_per_hour, inputs),
                usd_per_million_output_tokens=_per_million(usd_per_hour, st.output_tokens_per_s),
                usd_per_million_tokens=_per_million(usd_per_hour, both),
            )
        )
    return tuple(out)


def best_step(run: PerfRun, budget: LatencyBudget | None) -> StepResult | None:
    """The highest-throughput step that is stable, error-free and within the budget.

    A streamed run: the step with the most output tokens/s whose streaming budget
    (``--latency-budget ttft_p99=...``) its percentiles meet, when one was given.
    """
    candidates = [s for s in run.steps if _usable(s, budget)]
    streamed = [s for s in candidates if s.stream is not None]
    if streamed:
        return max(streamed, key=lambda s: s.stream.output_tokens_per_s if s.stream else 0.0)
    return max(candidates, key=lambda s: s.throughput, default=None)


def estimate_cost(
    run: PerfRun,
    *,
    sku: str | None,
    budget: LatencyBudget | None,
    spot: bool = False,
    price: float | None = None,
) -> CostEstimate:
    """Price the best step that meets ``budget`` on ``sku`` (or at ``price`` dollars per hour)."""
    if sku is None and price is None:
        raise PerfError("cost needs a VM size (--sku) or a price (--price USD_PER_HOUR)")
    if price is not None and price <= 0:
        raise PerfError("--price must be a positive number of dollars per hour")
    note = ""
    if price is not None:
        usd, pricing, date, source = price, "--price", "", "given on the command line"
        name = sku or "custom"
    else:
        assert sku is not None  # narrowed above: one of sku/price is set
        p = find_sku(sku)
        name, date, source = p.sku, p.date, p.source
        if spot:
            if p.spot is None:
                raise PerfError(f"no spot price for {p.sku} in the table", hint="pass --price USD_PER_HOUR")
            usd, pricing = p.spot, "spot"
            note = "spot VMs can be evicted at any time; spot prices move daily"
        else:
            usd, pricing = p.pay_as_you_go, "pay-as-you-go"
    step = best_step(run, budget)
    budget_text = str(budget) if budget else "none"
    levels = token_costs(run, usd, budget)
    if step is None:
        why = f"meets {budget_text}" if budget else "is usable"
        return CostEstimate(
            sku=name,
            pricing=pricing,
            usd_per_hour=usd,
            budget=budget_text,
            step_level=None,
            throughput=0.0,
            usd_per_million=None,
            price_date=date,
            price_source=source,
            note=f"no stable, error-free step {why}; nothing to price",
            levels=levels,
        )
    tokens_per_s = step.stream.output_tokens_per_s if step.stream is not None else 0.0
    if step.stream is not None and step.stream.goodput is not None:
        budget_text = (
            step.stream.goodput.budget if budget is None else f"{budget_text},{step.stream.goodput.budget}"
        )
    return CostEstimate(
        output_tokens_per_s=tokens_per_s,
        usd_per_million_output_tokens=usd_per_million(usd, tokens_per_s) if tokens_per_s > 0 else None,
        sku=name,
        pricing=pricing,
        usd_per_hour=usd,
        budget=budget_text,
        step_level=step.level,
        throughput=step.throughput,
        usd_per_million=usd_per_million(usd, step.throughput),
        price_date=date,
        price_source=source,
        note=note,
        levels=levels,
    )
