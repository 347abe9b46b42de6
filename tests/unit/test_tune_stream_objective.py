"""Tune's streaming objectives and constraints on synthetic outcomes."""

from __future__ import annotations

import math

from tritonkit.perf.stream_metrics import parse_stream_budget
from tritonkit.tune.objective import Objective, Outcome


def _outcome(tokens: float, ttft_p99_us: float, itl_p99_us: float) -> Outcome:
    return Outcome(
        throughput=10.0,
        latency_us={"p99": 80_000.0},
        metrics={"output_tokens_per_s": tokens, "ttft_p99_us": ttft_p99_us, "itl_p99_us": itl_p99_us},
    )


def test_tokens_per_s_objective_prefers_more_tokens_among_configs_meeting_the_stream_limits() -> None:
    obj = Objective(kind="tokens_per_s", stream_limits=parse_stream_budget("ttft_p99=200ms,itl_p99=40ms"))
    fast = obj.evaluate(_outcome(900.0, 150_000.0, 30_000.0))
    slow = obj.evaluate(_outcome(500.0, 100_000.0, 20_000.0))
    assert fast[0] and slow[0] and fast[2] > slow[2]
    assert obj.value(_outcome(900.0, 1.0, 1.0)) == 900.0 and obj.unit == "tokens/s"


def test_stream_limits_make_a_config_infeasible_and_say_which_limit_it_missed() -> None:
    obj = Objective(kind="tokens_per_s", stream_limits=parse_stream_budget("ttft_p99=200ms,itl_p99=40ms"))
    feasible, why, score = obj.evaluate(_outcome(2000.0, 250_000.0, 30_000.0))
    assert not feasible and "ttft p99 250.00 ms > ttft_p99<=200ms" in why and score < 0
    feasible, why, _ = obj.evaluate(_outcome(2000.0, 100_000.0, 45_000.0))
    assert not feasible and "itl p99" in why


def test_ttft_objective_prefers_the_lower_ttft_and_refuses_outcomes_without_stream_figures() -> None:
    obj = Objective(kind="ttft", latency_stat="p99")
    a = obj.evaluate(_outcome(100.0, 50_000.0, 1.0))
    b = obj.evaluate(_outcome(100.0, 30_000.0, 1.0))
    assert a[0] and b[0] and b[2] > a[2]
    unary = Outcome(throughput=10.0, latency_us={"p99": 1.0})
    feasible, why, _ = obj.evaluate(unary)
    assert not feasible and "decoupled" in why
    assert math.isinf(obj.value(unary))
