"""Cost arithmetic, latency budgets and the shipped price table."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.unit.test_perf_results import make_run, make_step
from tritonkit.errors import PerfError
from tritonkit.perf.cost import best_step, estimate_cost, find_sku, load_prices, parse_budget, usd_per_million
from tritonkit.perf.report import cost_lines
from tritonkit.perf.results import PerfRun


def test_usd_per_million_is_hourly_price_over_hourly_inferences_when_throughput_positive() -> None:
    # $3.60/h at 1000 inferences/s = 3.6M inferences/h -> $1 per million
    assert usd_per_million(3.6, 1000.0) == pytest.approx(1.0)
    assert usd_per_million(0.526, 250.0) == pytest.approx(0.526 / (250 * 3600) * 1e6)


def test_usd_per_million_raises_when_throughput_is_zero() -> None:
    with pytest.raises(PerfError):
        usd_per_million(1.0, 0.0)


@pytest.mark.parametrize(
    ("text", "stat", "limit_us"),
    [
        ("p99=50ms", "p99", 50_000),
        ("p95<=20", "p95", 20_000),
        ("avg=800us", "avg", 800),
        ("P50 = 1s", "p50", 1e6),
    ],
)
def test_parse_budget_reads_stat_and_limit_when_well_formed(text: str, stat: str, limit_us: float) -> None:
    budget = parse_budget(text)
    assert (budget.stat, budget.limit_us) == (stat, limit_us)


@pytest.mark.parametrize("text", ["p98=5ms", "p99", "p99=fast", "p99=0ms"])
def test_parse_budget_raises_when_malformed(text: str) -> None:
    with pytest.raises(PerfError):
        parse_budget(text)


def _run_with(steps: list[tuple[float, float, bool, dict[str, int]]]) -> PerfRun:
    made = []
    for level, latency_ms, stable, errors in steps:
        made.append(
            dataclasses.replace(make_step(level, latency_ms=latency_ms, stable=stable), errors=errors)
        )
    return dataclasses.replace(make_run(), steps=tuple(made))


def test_best_step_skips_unstable_erroring_and_over_budget_steps_when_choosing() -> None:
    run = _run_with(
        [
            (1, 5, True, {}),
            (4, 10, True, {}),
            (8, 12, False, {}),
            (16, 20, True, {"timeout": 1}),
            (32, 80, True, {}),
        ]
    )
    budget = parse_budget("p99=30ms")
    chosen = best_step(run, budget)
    assert chosen is not None and chosen.level == 4  # 8 unstable, 16 had errors, 32 over budget
    assert best_step(run, parse_budget("p99=1ms")) is None


def test_estimate_cost_prices_best_step_from_table_when_sku_given() -> None:
    run = _run_with([(1, 5, True, {}), (4, 10, True, {})])
    cost = estimate_cost(run, sku="Standard_NC4as_T4_v3", budget=parse_budget("p99=30ms"))
    price = find_sku("Standard_NC4as_T4_v3")
    assert cost.pricing == "pay-as-you-go"
    assert cost.usd_per_hour == price.pay_as_you_go
    assert cost.step_level == 4 and cost.throughput == 400.0
    assert cost.usd_per_million == pytest.approx(price.pay_as_you_go / (400 * 3600) * 1e6)
    assert cost.price_date == price.date and cost.price_source == price.source


def test_estimate_cost_uses_spot_price_when_spot_requested() -> None:
    run = _run_with([(2, 5, True, {})])
    cost = estimate_cost(run, sku="nc4as_t4_v3", budget=None, spot=True)
    assert cost.pricing == "spot"
    assert cost.usd_per_hour == find_sku("Standard_NC4as_T4_v3").spot
    assert "evicted" in cost.note


def test_estimate_cost_uses_given_price_when_price_overrides_table() -> None:
    run = _run_with([(2, 5, True, {})])
    cost = estimate_cost(run, sku="Standard_D4s_v5", budget=None, price=1.8)
    assert cost.usd_per_hour == 1.8 and cost.pricing == "--price"
    assert cost.usd_per_million == pytest.approx(1.8 / (200 * 3600) * 1e6)


def test_estimate_cost_says_nothing_to_price_when_no_step_meets_budget() -> None:
    run = _run_with([(2, 50, True, {})])
    cost = estimate_cost(run, sku="Standard_D4s_v5", budget=parse_budget("p99=1ms"))
    assert cost.step_level is None and cost.usd_per_million is None
    assert "p99<=1ms" in cost.note


def test_find_sku_raises_with_known_names_when_sku_unknown() -> None:
    with pytest.raises(PerfError, match="unknown VM size") as info:
        find_sku("Standard_Imaginary_v9")
    assert "Standard_NC4as_T4_v3" in str(info.value.hint)


def test_price_table_has_gpu_and_cpu_skus_with_date_and_source_when_loaded() -> None:
    prices = load_prices()
    for required in (
        "Standard_NC4as_T4_v3",
        "Standard_NC6s_v3",
        "Standard_NC24ads_A100_v4",
        "Standard_D4s_v5",
    ):
        assert required in prices
    assert any(name.startswith("Standard_NV") for name in prices)
    kinds = {p.kind for p in prices.values()}
    assert kinds == {"gpu", "cpu"}
    for p in prices.values():
        assert p.pay_as_you_go > 0
        assert p.spot is None or 0 < p.spot < p.pay_as_you_go
        assert len(p.date) == 10 and p.source.startswith("https://")


def _stream_step(level: float, tokens_per_s: float, meets: bool) -> object:
    from tritonkit.perf.stream_metrics import Goodput, summarize_stream

    summary = summarize_stream(
        [(1000, 500, 4, 4, -1, 8, 4, -1, 0, 0)], [2000], duration_s=1.0, client_cpu_s=0.0
    )
    summary = dataclasses.replace(
        summary,
        output_tokens_per_s=tokens_per_s,
        goodput=Goodput("ttft_p99<=1ms", 1.0, tokens_per_s, 1, meets),
    )
    return dataclasses.replace(make_step(level, latency_ms=2), stream=summary)


def test_a_streamed_run_is_priced_per_million_output_tokens_on_its_best_step_within_budget() -> None:
    run = dataclasses.replace(
        make_run(),
        steps=(_stream_step(1, 100.0, True), _stream_step(4, 360.0, True), _stream_step(8, 900.0, False)),
    )
    cost = estimate_cost(run, sku=None, budget=None, price=3.6)
    assert cost.step_level == 4  # the 900 tokens/s step misses the streaming budget
    assert cost.output_tokens_per_s == 360.0
    # $3.60/h at 360 tokens/s = 1.296M tokens/h -> $2.78 per million
    assert cost.usd_per_million_output_tokens == pytest.approx(3.6 / (360 * 3600) * 1e6)
    again = type(cost).from_dict(cost.to_dict())
    assert again.usd_per_million_output_tokens == cost.usd_per_million_output_tokens


def test_a_priced_stream_run_gives_input_output_and_all_token_prices_at_every_level() -> None:
    run = dataclasses.replace(
        make_run(),
        steps=(_stream_step(1, 100.0, True), _stream_step(4, 360.0, True), _stream_step(8, 900.0, False)),
    )
    cost = estimate_cost(run, sku=None, budget=None, price=3.6)
    assert [level.label for level in cost.levels] == [s.level_label for s in run.steps]
    assert [level.meets_budget for level in cost.levels] == [True, True, False]
    for level, step in zip(cost.levels, run.steps, strict=True):
        assert step.stream is not None
        inputs = 8 * step.stream.requests_per_s  # 8 prompt tokens a request
        assert level.input_tokens_per_s == pytest.approx(inputs)
        assert level.usd_per_million_input_tokens == pytest.approx(usd_per_million(3.6, inputs))
        assert level.usd_per_million_output_tokens == pytest.approx(
            usd_per_million(3.6, level.output_tokens_per_s)
        )
        assert level.usd_per_million_tokens == pytest.approx(
            usd_per_million(3.6, inputs + level.output_tokens_per_s)
        )
    # more tokens a second on the same replica: cheaper tokens
    assert cost.levels[1].usd_per_million_output_tokens < cost.levels[0].usd_per_million_output_tokens
    again = type(cost).from_dict(cost.to_dict())
    assert again.levels == cost.levels
    lines = cost_lines(cost)
    assert any(line.startswith("level 4: per million tokens $") and "within budget" in line for line in lines)
    assert any(line.startswith("level 8:") and "over budget" in line for line in lines)


def test_a_priced_stream_run_plots_its_cost_per_million_tokens(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from tritonkit.perf.plot import plot_run

    run = dataclasses.replace(make_run(), steps=(_stream_step(1, 100.0, True), _stream_step(4, 360.0, True)))
    run = run.with_cost(estimate_cost(run, sku="Standard_NC24ads_A100_v4", budget=None))
    plot_run(run, tmp_path / "cost.png")
    assert (tmp_path / "cost.png").stat().st_size > 10_000
