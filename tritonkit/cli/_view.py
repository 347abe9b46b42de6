"""Prints a library-built view (tables and notes) through :mod:`tritonkit.cli.render`."""

from __future__ import annotations

from tritonkit.cli import render
from tritonkit.perf.view import Table, View


def show(view: View) -> None:
    """Each block as render draws it: tables, then notes (warnings on stderr)."""
    for block in view:
        if isinstance(block, Table):
            render.table(block.title, block.columns, block.rows)
        elif block.warn:
            render.warn(block.text)
        else:
            render.info(block.text)
