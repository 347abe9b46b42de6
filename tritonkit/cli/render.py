"""The one place that prints: rich consoles and shared renderers for the CLI.

Text from users and files (model and file names, messages, config values) reaches the terminal
literally: the consoles read neither markup nor emoji codes (``config.pbtxt:100:`` is a line
number, not 💯), and the one styled prefix of errors and warnings escapes what follows it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from tritonkit.errors import TritonKitError

console = Console(highlight=False, soft_wrap=True, markup=False, emoji=False)
err_console = Console(stderr=True, highlight=False, soft_wrap=True, markup=False, emoji=False)


def error(exc: TritonKitError) -> None:
    """Render a TritonKitError as 'error: message' plus its hint, without a traceback."""
    err_console.print(f"[bold red]error:[/] {escape(exc.message)}", markup=True, highlight=False)
    if exc.hint:
        err_console.print(f"  [dim]hint:[/] {escape(exc.hint)}", markup=True, highlight=False)


def warn(message: str) -> None:
    err_console.print(f"[yellow]warning:[/] {escape(message)}", markup=True, highlight=False)


def info(message: str) -> None:
    console.print(message, markup=False, highlight=False)


def print_json(data: Any) -> None:
    """Plain JSON on stdout (no colours), so it can be piped."""
    console.file.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    console.file.flush()


def table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    t = Table(title=Text(title) if title is not None else None, show_lines=False)
    for col in columns:
        t.add_column(Text(col))
    for row in rows:
        t.add_row(*(Text(str(v)) for v in row))
    console.print(t)


def piece(text: str) -> None:
    """A streamed text piece, inline and at once (no newline, flushed)."""
    console.file.write(text)
    console.file.flush()


def json_line(data: Any) -> None:
    """One compact JSON object per line (a stream of responses that can be piped)."""
    console.file.write(json.dumps(data, separators=(",", ":"), default=str) + "\n")
    console.file.flush()


def note(message: str) -> None:
    """A side remark on stderr (timings), so stdout stays the data."""
    err_console.print(message, markup=False, highlight=False)
