"""Parsing Python source files with :mod:`ast`, safely beside the garbage collector.

On CPython 3.11 before 3.11.8, ``ast.parse`` keeps its recursion counter in module-wide state
(python/cpython#106905). If the cyclic garbage collector runs a finalizer in the middle of a parse
and that finalizer formats a traceback (3.11's :mod:`traceback` finds its ``^^^`` carets with
``ast.parse``: asyncio's "exception was never retrieved" logging does this), the outer parse ends
with ``SystemError: AST constructor recursion depth mismatch``. A build ran into it in CI: the
validator parsed a model's ``model.py`` while the GC collected an earlier test's event-loop
garbage. :func:`parse_source` pauses the cyclic collector for the parse (reference counting still frees
everything it can), so no finalizer of a cycle runs inside it.
"""

from __future__ import annotations

import ast
import gc

__all__ = ["parse_source"]


def parse_source(source: str | bytes, filename: str) -> ast.Module:
    """``ast.parse(source, filename=filename)`` with the cyclic GC paused (see the module)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(source, filename=filename)
    finally:
        if enabled:
            gc.enable()
