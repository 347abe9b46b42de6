"""Retry policy: exponential backoff with jitter, honouring Retry-After.

Only transient failures are retried (429, 502, 503, 504, gRPC UNAVAILABLE, connection refused or
reset); every other failure is raised at once. The decision of *what* is transient lives in
``tritonkit.client._errors``; this module only decides *when* to try again.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["NO_RETRY", "RETRY_STATUSES", "RetryPolicy"]

#: HTTP statuses worth retrying (gateways and Azure ML answer these while scaling or restarting).
RETRY_STATUSES: frozenset[int] = frozenset({429, 502, 503, 504})


#: the jitter's own generator: drawing from the ``random`` module would move the global state
#: the caller's program (a seeded simulation, Hypothesis) relies on, from whatever thread retries
_JITTER = random.Random()


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to wait between attempts.

    ``max_attempts`` counts the first try (1 = never retry). The n-th retry waits
    ``min(max_delay, base_delay * 2**n)`` scaled by a random factor in ``[1 - jitter, 1]``
    ("equal jitter" at 0.5), so clients that failed together do not retry together. A
    ``Retry-After`` from the server replaces the computed delay, capped at ``max_retry_after``.
    """

    max_attempts: int = 5
    base_delay: float = 0.25
    max_delay: float = 8.0
    jitter: float = 0.5
    max_retry_after: float = 60.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("RetryPolicy.max_attempts must be >= 1")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError("RetryPolicy.jitter must be within [0, 1]")
        if self.base_delay < 0 or self.max_delay < 0:
            raise ValueError("RetryPolicy delays must be >= 0")

    def delay(
        self,
        retry: int,
        *,
        retry_after: float | None = None,
        rand: Callable[[], float] | None = None,
    ) -> float:
        """Seconds to wait before retry number ``retry`` (0 = the first retry)."""
        if retry_after is not None and retry_after >= 0:
            return min(retry_after, self.max_retry_after)
        ceiling = min(self.max_delay, self.base_delay * (2.0**retry))
        return ceiling * (1.0 - self.jitter * (rand or _JITTER.random)())


#: Try once, never retry.
NO_RETRY = RetryPolicy(max_attempts=1)


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime
    from time import time

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time())
