"""A benchmark from start to files: run, price, show, write. What `tritonkit perf` does, as one
library call (the CLI parses options, calls this, and prints the views it is handed).

Views are handed to ``show`` as soon as they are known (the tables before any file is written,
each "wrote" line after its file), so a failing write, a missing plot extra say, still leaves
the measurements on screen.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from tritonkit.client.auth import AuthProvider
from tritonkit.errors import PerfError
from tritonkit.perf.compare import Comparison, compare
from tritonkit.perf.cost import LatencyBudget, estimate_cost
from tritonkit.perf.report import is_stream_run, write_outputs
from tritonkit.perf.results import PerfRun, atomic_write, read_json
from tritonkit.perf.runner import run_perf
from tritonkit.perf.settings import PerfSettings, ProgressCallback
from tritonkit.perf.view import View, compare_view, run_view

__all__ = ["Outputs", "Pricing", "Show", "benchmark", "compare_runs", "present"]

#: where views go (the CLI prints them; a caller may collect them)
Show = Callable[[View], None]


@dataclass(frozen=True, kw_only=True)
class Outputs:
    """The files asked for (None: not written)."""

    json: Path | None = None
    csv: Path | None = None
    plot: Path | None = None
    report: Path | None = None


@dataclass(frozen=True, kw_only=True)
class Pricing:
    """How to price the best step: a VM size from the table or an hourly price."""

    sku: str | None = None
    price: float | None = None
    spot: bool = False
    budget: LatencyBudget | None = None


def _wrote(show: Show, path: Path) -> None:
    show(View.lines([f"wrote {path}"]))


def benchmark(
    settings: PerfSettings,
    *,
    show: Show,
    auth: AuthProvider | None = None,
    headers: Mapping[str, str] | None = None,
    progress: ProgressCallback | None = None,
    command: str = "",
    pricing: Pricing | None = None,
    outputs: Outputs | None = None,
) -> PerfRun:
    """Run ``settings``, price it (with ``pricing``), show it, write ``outputs``; the run."""
    run = run_perf(settings, auth=auth, headers=headers, progress=progress, command=command)
    return present(run, show=show, pricing=pricing, outputs=outputs)


def present(
    run: PerfRun, *, show: Show, pricing: Pricing | None = None, outputs: Outputs | None = None
) -> PerfRun:
    """Price a finished run (with ``pricing``), show it, write ``outputs``: what a run measured
    here and one collected from a cluster (``perf --kube``) both go through."""
    if pricing is not None:
        p = pricing
        run = run.with_cost(estimate_cost(run, sku=p.sku, budget=p.budget, spot=p.spot, price=p.price))
    show(run_view(run))
    out = outputs or Outputs()
    for path in write_outputs(run, json_out=out.json, csv_out=out.csv, plot=out.plot, report=out.report):
        _wrote(show, path)
    if out.plot and any(step.stages for step in run.steps):
        from tritonkit.perf.stage_report import plot_stages

        # a pipeline's stacked per-stage plot, beside the plot (NAME-stages.png)
        stacked = out.plot.with_name(f"{out.plot.stem}-stages{out.plot.suffix or '.png'}")
        plot_stages(run, stacked)
        _wrote(show, stacked)
    return run


def compare_runs(a_path: Path, b_path: Path, *, show: Show, outputs: Outputs | None = None) -> Comparison:
    """Compare two saved runs (B against A), show it and write ``outputs`` (JSON, plot, report)."""
    out = outputs or Outputs()
    a, b = read_json(a_path), read_json(b_path)
    cmp = compare(a, b, a_label=a_path.stem, b_label=b_path.stem)
    show(compare_view(cmp, streaming=is_stream_run(a) and is_stream_run(b)))
    if out.json:
        atomic_write(out.json, json.dumps(cmp.to_dict(), indent=2) + "\n")
        _wrote(show, out.json)
    if not (out.plot or out.report):
        return cmp
    from tritonkit.perf.plot import plot_comparison

    png = out.plot or (out.report.with_suffix(".png") if out.report else None)
    if png:
        plot_comparison(cmp, png)
        _wrote(show, png)
    if out.report:
        if out.report.suffix.lower() != ".md":
            raise PerfError("--report with --compare writes markdown: use a .md file name")
        from tritonkit.perf.report import render_compare_markdown

        rel = png.name if png and png.parent == out.report.parent else (str(png) if png else None)
        atomic_write(out.report, render_compare_markdown(cmp, plot_file=rel))
        _wrote(show, out.report)
    return cmp
