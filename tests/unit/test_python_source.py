"""parse_source: ast.parse that a finalizer formatting a traceback cannot break.

On CPython 3.11 before 3.11.8 (python/cpython#106905) a traceback formatted by a finalizer the
garbage collector runs in the middle of ``ast.parse`` (3.11's traceback module parses the source
line with ``ast`` to place its carets) ends the outer parse with ``SystemError: AST constructor
recursion depth mismatch``: a build in CI failed so. Here such finalizers are queued for the
collector before every parse, with a low collection threshold.
"""

from __future__ import annotations

import gc
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest

from tritonkit._python_source import parse_source

SOURCE = (Path(__file__).resolve().parents[2] / "tritonkit" / "openai_front" / "service.py").read_text()


def _fail() -> float:
    return 1 / 0


class _LogsATraceback:
    """Cyclic garbage whose finalizer formats a traceback, as asyncio's "exception was never
    retrieved" logging does."""

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        try:
            _fail()
        except ZeroDivisionError:
            traceback.format_exc()


@pytest.fixture
def eager_gc() -> Iterator[None]:
    before = gc.get_threshold()
    gc.set_threshold(50)
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.collect()


@pytest.mark.usefixtures("eager_gc")
def test_a_parse_is_whole_while_the_collector_has_finalizers_that_format_tracebacks() -> None:
    for _ in range(30):
        for _ in range(20):
            _LogsATraceback()
        tree = parse_source(SOURCE, "service.py")
        assert any(getattr(node, "name", "") == "Service" for node in tree.body)
    assert gc.isenabled()


def test_the_collector_is_left_as_it_was() -> None:
    gc.disable()
    try:
        parse_source("x = 1\n", "x.py")
        assert not gc.isenabled()
    finally:
        gc.enable()
    parse_source("x = 1\n", "x.py")
    assert gc.isenabled()
    with pytest.raises(SyntaxError):
        parse_source("def (:\n", "bad.py")
    assert gc.isenabled()
