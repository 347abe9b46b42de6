"""Plots of benchmark runs (matplotlib, Agg backend, imported lazily: extra ``plot``)."""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tritonkit._extras import require
from tritonkit.perf.compare import Comparison
from tritonkit.perf.results import PerfRun, atomic_write

_BREAKDOWN = (
    ("queue", "queue", "#f2a541"),
    ("compute input", "compute_input", "#7fb7be"),
    ("compute infer", "compute_infer", "#3d5a80"),
    ("compute output", "compute_output", "#98c1d9"),
)


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (files only, no display); needs the plot extra."""
    mpl = require("matplotlib", feature="perf plots")
    mpl.use("Agg")
    return require("matplotlib.pyplot", feature="perf plots")


def save_figure(fig: Any, path: Path) -> None:
    """Write ``fig`` to ``path`` as a PNG, atomically, and close it."""
    plt = pyplot()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    atomic_write(Path(path), buf.getvalue())


def _latency_curve(ax: Any, run: PerfRun, label: str, color: str | None = None) -> None:
    steps = [s for s in run.steps if s.latency is not None]
    if not steps:
        return
    x = [s.throughput for s in steps]
    p50 = [s.latency_us("p50") / 1000 for s in steps]  # type: ignore[operator]
    p99 = [s.latency_us("p99") / 1000 for s in steps]  # type: ignore[operator]
    line = ax.plot(x, p50, marker="o", label=f"{label} p50", color=color)[0]
    c = line.get_color()
    ax.plot(x, p99, marker="^", linestyle="--", label=f"{label} p99", color=c)
    ax.fill_between(x, p50, p99, color=c, alpha=0.15)
    for s, xi, yi in zip(steps, x, p99, strict=True):
        tag = s.level_label + ("" if s.stable else " (unstable)")
        ax.annotate(tag, (xi, yi), textcoords="offset points", xytext=(3, 4), fontsize=7, color=c)


def _distribution(ax: Any, run: PerfRun, metric: str, color: str) -> None:
    """One metric's distribution per step: min..max line, p50..p99 bar, avg and p90/p95 ticks."""
    xs, labels = [], []
    for i, s in enumerate(run.steps):
        summary = None
        if s.stream is not None:
            summary = s.stream.ttft if metric == "ttft" else s.stream.itl
        labels.append(s.level_label)
        if summary is None:
            continue
        xs.append(i)
        ms = {k: summary.get(k) / 1000 for k in ("min", "p50", "p90", "p95", "p99", "max", "avg")}
        ax.vlines(i, ms["min"], ms["max"], color=color, linewidth=1)
        ax.bar(i, ms["p99"] - ms["p50"], bottom=ms["p50"], width=0.5, color=color, alpha=0.35)
        ax.hlines([ms["p50"]], i - 0.25, i + 0.25, color=color, linewidth=2)
        ax.hlines([ms["p90"], ms["p95"]], i - 0.18, i + 0.18, color=color, linewidth=0.8, linestyle=":")
        ax.plot([i], [ms["avg"]], marker="x", color="black", markersize=5)
    ax.set_xticks(list(range(len(run.steps))), labels)
    ax.set_xlabel("concurrency" if run.mode == "concurrency" else "request rate")
    ax.set_ylabel(f"{metric.upper()} (ms)")
    ax.set_title(f"{metric.upper()}: p50-p99 box, min-max line, x = avg")
    ax.grid(alpha=0.3, axis="y")


def _token_lengths(ax: Any, run: PerfRun) -> None:
    """An LLM load's achieved lengths per step: prompt and output tokens (avg +- std, min-max),
    the asked output length as a tick."""
    for i, s in enumerate(run.steps):
        st = s.stream
        if st is None:
            continue
        for off, summary, color in ((-0.15, st.input_tokens, "#2a9d8f"), (0.15, st.output_tokens, "#e76f51")):
            if summary is None:
                continue
            ax.vlines(i + off, summary.min_us, summary.max_us, color=color, linewidth=1)
            ax.errorbar(i + off, summary.avg_us, yerr=summary.std_us, fmt="o", color=color, capsize=3)
        if st.asked_output_tokens is not None:
            ax.hlines(st.asked_output_tokens.avg_us, i + 0.03, i + 0.27, color="black", linewidth=1.5)
    ax.plot([], [], "o", color="#2a9d8f", label="prompt tokens")
    ax.plot([], [], "o", color="#e76f51", label="output tokens")
    ax.plot([], [], "-", color="black", label="output asked (avg)")
    ax.set_xticks(list(range(len(run.steps))), [s.level_label for s in run.steps])
    ax.set_xlabel("concurrency" if run.mode == "concurrency" else "request rate")
    ax.set_ylabel("tokens per request")
    ax.set_title("achieved lengths: avg +- std, min-max line")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, axis="y")


def _token_costs(ax: Any, run: PerfRun) -> None:
    """Dollars per million tokens at each load level (``perf --sku``): input, output and all
    tokens; levels over the latency budget (or unstable) hollow, so the cheapest usable one shows."""
    levels = run.cost.levels if run.cost is not None else ()
    x = list(range(len(levels)))
    for attr, label, color in (
        ("usd_per_million_input_tokens", "input", "#2a9d8f"),
        ("usd_per_million_output_tokens", "output", "#e76f51"),
        ("usd_per_million_tokens", "all tokens", "#264653"),
    ):
        values = [getattr(level, attr) for level in levels]
        points = [(xi, v) for xi, v in zip(x, values, strict=True) if v is not None]
        if not points:
            continue
        ax.plot([p[0] for p in points], [p[1] for p in points], color=color, label=label, linewidth=1)
        for (xi, v), level in zip(
            points, [lv for lv, v in zip(levels, values, strict=True) if v is not None], strict=True
        ):
            ax.plot(xi, v, "o", color=color, fillstyle="full" if level.meets_budget else "none")
    ax.set_xticks(x, [level.label for level in levels])
    ax.set_xlabel("concurrency" if run.mode == "concurrency" else "request rate")
    ax.set_ylabel("USD per million tokens")
    ax.set_yscale("log")
    sku = run.cost.sku if run.cost is not None else ""
    ax.set_title(f"cost on {sku} (hollow: over budget)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, which="both")


def plot_stream_run(run: PerfRun, path: Path, *, title: str | None = None) -> None:
    """A streamed run: TTFT and ITL distributions per step, output tokens/s against TTFT; an LLM
    load's achieved lengths and, when priced (``--sku``/``--price``), its cost per million tokens."""
    plt = pyplot()
    llm = any(
        s.stream is not None
        and (s.stream.input_tokens is not None or s.stream.asked_output_tokens is not None)
        for s in run.steps
    )
    priced = run.cost is not None and bool(run.cost.levels)
    panels = 3 + llm + priced
    fig, axes = plt.subplots(1, panels, figsize=(5.3 * panels, 4.8))
    ax1, ax2, ax3 = axes[:3]
    if llm:
        _token_lengths(axes[3], run)
    if priced:
        _token_costs(axes[-1], run)
    _distribution(ax1, run, "ttft", "#3d5a80")
    _distribution(ax2, run, "itl", "#ee6c4d")
    steps = [s for s in run.steps if s.stream is not None and s.stream.ttft is not None]
    x = [s.stream.output_tokens_per_s for s in steps if s.stream]
    p50 = [s.stream.get("ttft", "p50") or 0.0 for s in steps if s.stream]
    p99 = [s.stream.get("ttft", "p99") or 0.0 for s in steps if s.stream]
    ax3.plot(x, [v / 1000 for v in p50], marker="o", label="TTFT p50", color="#3d5a80")
    ax3.plot(x, [v / 1000 for v in p99], marker="^", linestyle="--", label="TTFT p99", color="#3d5a80")
    for s, xi, yi in zip(steps, x, p99, strict=True):
        tag = s.level_label + ("" if s.stable else " (unstable)")
        ax3.annotate(tag, (xi, yi / 1000), textcoords="offset points", xytext=(3, 4), fontsize=7)
    ax3.set_xlabel("output tokens/s")
    ax3.set_ylabel("TTFT (ms)")
    ax3.set_title("output tokens/s vs TTFT across the sweep")
    ax3.grid(alpha=0.3)
    ax3.legend(fontsize=8)
    fig.suptitle(title or f"tritonkit perf --stream: {run.model} ({run.protocol})")
    save_figure(fig, path)


def plot_run(run: PerfRun, path: Path, *, title: str | None = None) -> None:
    """Throughput vs latency (p50..p99 band) and the server-side time breakdown per step
    (a streamed run: its TTFT/ITL distributions and tokens/s vs TTFT instead)."""
    if any(s.stream is not None for s in run.steps):
        plot_stream_run(run, path, title=title)
        return
    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.8))
    _latency_curve(ax1, run, run.model)
    ax1.set_xlabel("throughput (inferences/s)")
    ax1.set_ylabel("latency (ms)")
    what = "concurrency" if run.mode == "concurrency" else "request rate"
    ax1.set_title(f"throughput vs latency (labels: {what})")
    ax1.grid(alpha=0.3)
    ax1.legend(fontsize=8)

    labels = [s.level_label for s in run.steps]
    bottom = [0.0] * len(run.steps)
    xs = range(len(run.steps))
    for name, attr, color in _BREAKDOWN:
        vals = [getattr(s.server, f"{attr}_us") / 1000 if s.server else 0.0 for s in run.steps]
        ax2.bar(xs, vals, bottom=bottom, label=name, color=color)
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    net = [s.network_us() / 1000 for s in run.steps]
    ax2.bar(xs, net, bottom=bottom, label="network + client", color="#cccccc")
    for i, s in enumerate(run.steps):
        if s.server is not None:
            top = bottom[i] + net[i]
            ax2.annotate(f"b={s.server.avg_batch_size:.1f}", (i, top), ha="center", va="bottom", fontsize=7)
    ax2.set_xticks(list(xs), labels)
    ax2.set_xlabel(what)
    ax2.set_ylabel("average time per request (ms)")
    ax2.set_title("where the time goes (b = avg executed batch size)")
    ax2.legend(fontsize=8)
    fig.suptitle(title or f"tritonkit perf: {run.model} ({run.protocol})")
    save_figure(fig, path)


def plot_runs(runs: Mapping[str, PerfRun], path: Path, *, title: str) -> None:
    """Several runs on one figure: throughput vs level and latency vs throughput."""
    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.8))
    for label, run in runs.items():
        ax1.plot([s.level for s in run.steps], [s.throughput for s in run.steps], marker="o", label=label)
        _latency_curve(ax2, run, label)
    ax1.set_xscale("log", base=2)
    ax1.set_xlabel("concurrency")
    ax1.set_ylabel("throughput (inferences/s)")
    ax1.grid(alpha=0.3)
    ax1.legend(fontsize=8)
    ax2.set_xlabel("throughput (inferences/s)")
    ax2.set_ylabel("latency (ms)")
    ax2.set_yscale("log")
    ax2.grid(alpha=0.3)
    ax2.legend(fontsize=7)
    fig.suptitle(title)
    save_figure(fig, path)


def plot_comparison(cmp: Comparison, path: Path) -> None:
    """Two runs side by side: throughput per step with the B/A ratio, and their latency curves."""
    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.8))
    labels = [f"{s.level:g}" for s in cmp.steps]
    xs = list(range(len(cmp.steps)))
    width = 0.38
    ax1.bar(
        [x - width / 2 for x in xs],
        [s.a.throughput if s.a else 0 for s in cmp.steps],
        width,
        label=cmp.a_label,
    )
    ax1.bar(
        [x + width / 2 for x in xs],
        [s.b.throughput if s.b else 0 for s in cmp.steps],
        width,
        label=cmp.b_label,
    )
    ax1.set_xticks(xs, labels)
    ax1.set_xlabel("concurrency" if cmp.a.mode == "concurrency" else "request rate")
    ax1.set_ylabel("throughput (inferences/s)")
    ax1.legend(fontsize=8, loc="upper left")
    ratio_ax = ax1.twinx()
    ratios = [s.throughput_ratio for s in cmp.steps]
    ratio_ax.plot(xs, [r if r is not None else float("nan") for r in ratios], color="black", marker="D")
    ratio_ax.set_ylabel(f"throughput ratio {cmp.b_label} / {cmp.a_label}")
    ratio_ax.set_ylim(bottom=0)
    for x, r in zip(xs, ratios, strict=True):
        if r is not None:
            ratio_ax.annotate(
                f"{r:.2f}x", (x, r), textcoords="offset points", xytext=(0, 5), ha="center", fontsize=8
            )
    _latency_curve(ax2, cmp.a, cmp.a_label)
    _latency_curve(ax2, cmp.b, cmp.b_label)
    ax2.set_xlabel("throughput (inferences/s)")
    ax2.set_ylabel("latency (ms)")
    ax2.grid(alpha=0.3)
    ax2.legend(fontsize=8)
    fig.suptitle(f"{cmp.b_label} vs {cmp.a_label}")
    fig.subplots_adjust(wspace=0.4)
    save_figure(fig, path)
