"""``grid``: every distinct config at every concurrency level (the ground truth)."""

from __future__ import annotations

from tritonkit.tune.strategies.base import Search

__all__ = ["grid"]


def grid(search: Search) -> None:
    for point in search.space.points():
        for level in search.levels:
            search.measure(point, level)
