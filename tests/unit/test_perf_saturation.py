"""The client check: when a streamed figure is the client's, it says so and by how much."""

from __future__ import annotations

import asyncio
import sys
import time

import pytest

from tritonkit.perf.saturation import ClientCheck, LagProbe, check_client, cpu_wait_ns

MS = 1_000_000


def test_kernel_stamped_steps_with_a_prompt_reader_are_not_client_bound() -> None:
    check = check_client(
        delays_ns=[2 * MS] * 50,
        lags_ns=[3 * MS] * 50,
        cpu_wait_s=0.5,
        cpu_share=0.3,
        duration_s=3.0,
        ttft_p50_us=20_000,
    )
    assert check.stamping == "kernel" and not check.bound and check.bias_us == 0.0
    assert check.client_delay is not None and check.client_delay.p50_us == 2000


def test_read_stamped_steps_with_a_late_event_loop_are_client_bound_by_the_lag() -> None:
    check = check_client(
        delays_ns=[], lags_ns=[3 * MS] * 50, cpu_wait_s=0.9, cpu_share=0.4, duration_s=3.0, ttft_p50_us=20_000
    )
    assert check.stamping == "read" and check.bound
    assert check.bias_us == pytest.approx(3000)
    assert "3.00 ms (15%) high" in check.reason
    assert "waited for a CPU 30%" in check.reason and "plain HTTP" in check.reason


def test_a_small_lag_against_a_long_ttft_is_not_flagged() -> None:
    check = check_client(
        delays_ns=[],
        lags_ns=[200_000] * 10,
        cpu_wait_s=None,
        cpu_share=0.2,
        duration_s=3.0,
        ttft_p50_us=40_000,
    )
    assert not check.bound and check.reason == ""


def test_merged_first_responses_flag_ttft_by_up_to_one_itl() -> None:
    check = check_client(
        delays_ns=[30 * MS] * 10,
        shared_share=0.5,
        first_shared_share=0.4,
        itl_p50_us=5000,
        lags_ns=[],
        cpu_wait_s=None,
        cpu_share=0.2,
        duration_s=3.0,
        ttft_p50_us=20_000,
    )
    assert check.bound and "40% of requests" in check.reason and "5.00 ms" in check.reason


def test_a_saturated_load_generator_is_flagged_whatever_the_stamps() -> None:
    check = check_client(
        delays_ns=[MS], lags_ns=[], cpu_wait_s=None, cpu_share=0.95, duration_s=1.0, ttft_p50_us=1000
    )
    assert check.bound and "95% of a core" in check.reason


def test_client_check_round_trips_through_json() -> None:
    check = check_client(
        delays_ns=[], lags_ns=[MS, 2 * MS], cpu_wait_s=0.1, cpu_share=0.1, duration_s=1.0, ttft_p50_us=1000
    )
    assert ClientCheck.from_dict(check.to_dict()) == check


def test_lag_probe_sees_a_blocked_event_loop() -> None:
    async def main() -> list[int]:
        probe = LagProbe()
        probe.start()
        await asyncio.sleep(0.01)
        time.sleep(0.05)  # the loop is busy: the probe's timer fires ~50 ms late
        await asyncio.sleep(0.01)
        await probe.stop()
        return probe.take()

    lags = asyncio.run(main())
    assert max(lags) > 30 * MS


@pytest.mark.skipif(sys.platform != "linux", reason="schedstat is Linux's")
def test_cpu_wait_is_read_from_this_process_threads() -> None:
    first = cpu_wait_ns()
    assert first is not None and first >= 0
    second = cpu_wait_ns()
    assert second is not None and second >= first


def test_a_client_that_sends_late_is_flagged_with_the_load_it_held() -> None:
    kwargs = {"delays_ns": [MS], "lags_ns": [], "cpu_wait_s": None, "cpu_share": 0.1, "ttft_p50_us": 20_000}
    # 16 asked; requests were in flight 10 s of a 1 s window in total: 10 held on average
    short = check_client(**kwargs, duration_s=1.0, asked_concurrency=16, busy_ns=10 * 10**9)  # type: ignore[arg-type]
    assert short.bound and short.held_concurrency == pytest.approx(10)
    assert "only 10.0 of 16" in short.reason
    full = check_client(**kwargs, duration_s=1.0, asked_concurrency=16, busy_ns=15_500 * MS)  # type: ignore[arg-type]
    assert not full.bound
