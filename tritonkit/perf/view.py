"""What a terminal shows of a run or a comparison, built once by the library: tables and notes.

The CLI prints a :class:`View` as it is (``tritonkit.cli.render`` draws it); what goes in it,
in which order, with which titles, is decided here, next to the rows it is made of.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tritonkit.perf.compare import Comparison
from tritonkit.perf.report import (
    CLIENT_COLUMNS,
    COMPARE_COLUMNS,
    LLM_COLUMNS,
    SERVER_COLUMNS,
    STREAM_COLUMNS,
    STREAM_COMPARE_COLUMNS,
    client_bound_note,
    client_rows,
    compare_rows,
    composed_note,
    cost_lines,
    is_llm_run,
    is_stream_run,
    llm_rows,
    output_length_note,
    server_rows,
    shortfall_note,
    stream_compare_rows,
    stream_rows,
    unstable_note,
    worker_lines,
)
from tritonkit.perf.results import PerfRun
from tritonkit.perf.stage_report import STAGE_COLUMNS, per_pipeline_request, stage_rows
from tritonkit.perf.stages import bottleneck

__all__ = ["Note", "Table", "View", "compare_view", "run_view"]


@dataclass(frozen=True)
class Table:
    """A titled table: its column names and its rows, as text."""

    title: str | None
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    @classmethod
    def of(cls, title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> Table:
        return cls(title, tuple(columns), tuple(tuple(str(v) for v in row) for row in rows))


@dataclass(frozen=True)
class Note:
    """A line of text; ``warn``: something the reader should act on or doubt."""

    text: str
    warn: bool = False


@dataclass(frozen=True)
class View:
    """Tables and notes in the order they are read."""

    blocks: tuple[Table | Note, ...] = ()

    def __iter__(self) -> Iterator[Table | Note]:
        return iter(self.blocks)

    def __add__(self, other: View) -> View:
        return View(self.blocks + other.blocks)

    @classmethod
    def lines(cls, texts: Iterable[str], *, warn: bool = False) -> View:
        return cls(tuple(Note(t, warn) for t in texts))


def _stream_blocks(run: PerfRun) -> list[Table | Note]:
    counting = next(s.stream.token_counting for s in run.steps if s.stream is not None)
    how = "one response = one token" if counting == "responses" else counting
    out: list[Table | Note] = [
        Table.of(
            f"streaming, ms (latency: to the last response with outputs; tokens: {how})",
            STREAM_COLUMNS,
            stream_rows(run),
        )
    ]
    for step in run.steps:
        if step.stream is not None and step.stream.goodput is not None:
            g = step.stream.goodput
            verdict = "meets" if g.meets_budget else "MISSES"
            out.append(
                Note(
                    f"level {step.level_label}: goodput {g.requests_per_s:.1f} req/s, "
                    f"{g.output_tokens_per_s:.1f} tokens/s within {g.budget}; the step {verdict} it"
                )
            )
    return out


def _step_warnings(run: PerfRun) -> list[Table | Note]:
    out: list[Table | Note] = []
    for note in (unstable_note(run), client_bound_note(run), shortfall_note(run), output_length_note(run)):
        if note:
            out.append(Note(note, warn=True))
    out.extend(Note(line) for line in worker_lines(run))
    for step in run.steps:
        if step.error_count:
            kinds = ", ".join(f"{k} x{v}" for k, v in sorted(step.errors.items()))
            out.append(Note(f"level {step.level_label}: {step.error_count} failed requests ({kinds})", True))
        if step.server is None:
            missing = "no server-side statistics (statistics API unavailable)"
            out.append(Note(f"level {step.level_label}: {missing}", True))
    return out


def _stage_blocks(run: PerfRun) -> list[Table | Note]:
    if not any(step.stages for step in run.steps):
        return []
    out: list[Table | Note] = [
        Table.of(
            "stages, ms per stage request (per pipeline req: queue + compute per request of the pipeline)",
            STAGE_COLUMNS,
            stage_rows(run),
        )
    ]
    for step in run.steps:
        slowest = bottleneck(step.stages)
        if slowest is not None:
            out.append(
                Note(
                    f"level {step.level_label}: the most time goes to stage '{slowest.model}' "
                    f"({per_pipeline_request(step, slowest) / 1000:.2f} ms per pipeline request)"
                )
            )
    return out


def run_view(run: PerfRun) -> View:
    """A finished run: client and server tables, streaming and LLM figures, warnings, stages, cost."""
    what = "concurrency" if run.mode == "concurrency" else "request rate"
    blocks: list[Table | Note] = [
        Table.of(
            f"{run.model} @ {run.url} ({run.protocol}): client side, ms", CLIENT_COLUMNS, client_rows(run)
        ),
        Table.of(f"server side, ms per request (level = {what})", SERVER_COLUMNS, server_rows(run)),
    ]
    composed = composed_note(run)
    if composed:
        blocks.append(Note(composed))
    if is_stream_run(run):
        blocks += _stream_blocks(run)
    if is_llm_run(run):
        blocks.append(Table.of("LLM load: tokens per request", LLM_COLUMNS, llm_rows(run)))
    blocks += _step_warnings(run)
    blocks += _stage_blocks(run)
    if run.cost:
        blocks += [Note(line) for line in cost_lines(run.cost)]
    return View(tuple(blocks))


def compare_view(cmp: Comparison, *, streaming: bool) -> View:
    """Two runs side by side (``streaming``: both were streamed, so their stream figures too)."""
    blocks = [Table.of(f"{cmp.b_label} (B) vs {cmp.a_label} (A)", COMPARE_COLUMNS, compare_rows(cmp))]
    if streaming:
        blocks.append(Table.of("streaming, ms", STREAM_COMPARE_COLUMNS, stream_compare_rows(cmp)))
    return View(tuple(blocks))
