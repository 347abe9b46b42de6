"""tritonkit._timeouts: a timed wait that never swallows its caller's cancellation."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tritonkit import _timeouts

Within = Callable[[Awaitable[Any], float], Awaitable[Any]]
IMPLEMENTATIONS = [
    pytest.param(_timeouts.within, id="within"),
    pytest.param(_timeouts._within_by_task, id="python-3.10"),
]


async def _finished() -> bool:
    return True


def _not_stopped(wait: Within, loops: int = 700) -> int:
    """How many of ``loops`` watch loops kept running after being cancelled, each awaiting a check
    that finishes at once (the front's readiness watch against a quick server)."""

    async def watch() -> None:
        while True:
            await wait(_finished(), 5.0)
            await asyncio.sleep(0)

    async def main() -> int:
        kept_running = 0
        for i in range(loops):
            task = asyncio.ensure_future(watch())
            for _ in range(1 + i % 7):  # cancel at each point of the loop in turn
                await asyncio.sleep(0)
            task.cancel()
            for _ in range(50):  # a task that takes its cancellation ends within a few loop turns
                if task.done():
                    break
                await asyncio.sleep(0)
            if not task.done():
                kept_running += 1
                while not task.done():  # cancelled until it stops, so the next loop starts clean
                    task.cancel()
                    await asyncio.sleep(0)
        return kept_running

    return asyncio.run(main())


@pytest.mark.parametrize("wait", IMPLEMENTATIONS)
def test_within_stops_every_cancelled_watch_when_its_check_has_just_finished(wait: Within) -> None:
    assert _not_stopped(wait) == 0


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="asyncio.wait_for is fixed from Python 3.12")
def test_wait_for_keeps_cancelled_watches_running_on_this_python() -> None:
    """Why tritonkit bans asyncio.wait_for (ruff TID251): the loop above loses cancellations."""
    assert _not_stopped(asyncio.wait_for) > 0  # noqa: TID251


@pytest.mark.parametrize("wait", IMPLEMENTATIONS)
def test_within_returns_the_result_or_times_out_with_the_work_cancelled(wait: Within) -> None:
    cancelled: list[bool] = []

    async def main() -> Any:
        assert await wait(_finished(), 1.0) is True
        with pytest.raises(asyncio.TimeoutError):
            await wait(_until_cancelled(cancelled), 0.01)
        assert cancelled == [True]
        with pytest.raises(KeyError):  # the work's own error comes through as it is
            await wait(_raises(KeyError("x")), 1.0)

    asyncio.run(main())


async def _raises(exc: BaseException) -> None:
    raise exc


async def _until_cancelled(cancelled: list[bool]) -> None:
    """Work that never ends by itself; notes its cancellation."""
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        cancelled.append(True)
        raise


@pytest.mark.parametrize("wait", IMPLEMENTATIONS)
def test_within_passes_on_its_callers_cancellation_and_cancels_the_work(wait: Within) -> None:
    cancelled: list[bool] = []

    async def main() -> None:
        task = asyncio.ensure_future(wait(_until_cancelled(cancelled), 30.0))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0)
        assert cancelled == [True]

    asyncio.run(main())
