"""Tables and reports (markdown or HTML, with the plot) of benchmark runs."""

from __future__ import annotations

import base64
import html
import tempfile
from collections.abc import Callable
from pathlib import Path

from tritonkit.errors import PerfError
from tritonkit.perf.compare import Comparison
from tritonkit.perf.results import CostEstimate, PerfRun, StepResult, TokenCost, atomic_write
from tritonkit.perf.stage_report import STAGE_COLUMNS, stage_rows
from tritonkit.perf.stats import LatencySummary
from tritonkit.perf.stream_metrics import StreamSummary
from tritonkit.perf.worker_load import shortfall

STEP_COLUMNS = (
    "level",
    "infer/s",
    "avg ms",
    "p50 ms",
    "p90 ms",
    "p95 ms",
    "p99 ms",
    "max ms",
    "errors",
    "queue ms",
    "infer ms",
    "batch",
    "cpu us/req",
    "stable",
)
COMPARE_COLUMNS = (
    "level",
    "A infer/s",
    "B infer/s",
    "B/A",
    "A p99 ms",
    "B p99 ms",
    "B/A p99",
    "A batch",
    "B batch",
)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value / 1000:.2f}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def step_row(s: StepResult) -> list[str]:
    errors = ", ".join(f"{k}: {v}" for k, v in sorted(s.errors.items())) or "0"
    return [
        s.level_label,
        f"{s.throughput:.1f}",
        _ms(s.latency_us("avg")),
        _ms(s.latency_us("p50")),
        _ms(s.latency_us("p90")),
        _ms(s.latency_us("p95")),
        _ms(s.latency_us("p99")),
        _ms(s.latency_us("max")),
        errors,
        _ms(s.server.queue_us) if s.server else "-",
        _ms(s.server.compute_infer_us) if s.server else "-",
        f"{s.server.avg_batch_size:.2f}" if s.server else "-",
        f"{s.client_cpu_us_per_request:.0f}",
        "yes" if s.stable else "NO",
    ]


def step_rows(run: PerfRun) -> list[list[str]]:
    return [step_row(s) for s in run.steps]


#: two narrower tables for terminals: what the client saw, and where the server spent the time
CLIENT_COLUMNS = ("level", "infer/s", "avg", "p50", "p90", "p99", "max", "errors", "stable")
SERVER_COLUMNS = ("level", "queue", "input", "infer", "output", "network", "batch", "cpu us/req")


def client_rows(run: PerfRun) -> list[list[str]]:
    return [
        [
            s.level_label,
            f"{s.throughput:.1f}",
            *(_ms(s.latency_us(k)) for k in ("avg", "p50", "p90", "p99", "max")),
            str(s.error_count),
            "yes" if s.stable else "NO",
        ]
        for s in run.steps
    ]


def server_rows(run: PerfRun) -> list[list[str]]:
    rows = []
    for s in run.steps:
        srv = s.server
        times = (
            [
                _ms(srv.queue_us),
                _ms(srv.compute_input_us),
                _ms(srv.compute_infer_us),
                _ms(srv.compute_output_us),
            ]
            if srv
            else ["-"] * 4
        )
        rows.append(
            [
                s.level_label,
                *times,
                _ms(s.network_us()),
                f"{srv.avg_batch_size:.2f}" if srv else "-",
                f"{s.client_cpu_us_per_request:.0f}",
            ]
        )
    return rows


def compare_rows(cmp: Comparison) -> list[list[str]]:
    rows = []
    for c in cmp.steps:
        rows.append(
            [
                f"{c.level:g}",
                f"{c.a.throughput:.1f}" if c.a else "-",
                f"{c.b.throughput:.1f}" if c.b else "-",
                _ratio(c.throughput_ratio),
                _ms(c.a.latency_us("p99")) if c.a else "-",
                _ms(c.b.latency_us("p99")) if c.b else "-",
                _ratio(c.latency_ratio("p99")),
                f"{c.a.server.avg_batch_size:.2f}" if c.a and c.a.server else "-",
                f"{c.b.server.avg_batch_size:.2f}" if c.b and c.b.server else "-",
            ]
        )
    return rows


#: streamed runs: what a user of a generative model waits for, per step (times in ms)
STREAM_COLUMNS = (
    "level",
    "req/s",
    "tokens/s",
    "TTFT p50",
    "TTFT p99",
    "ITL p50",
    "ITL p99",
    "latency p50",
    "tokens/req",
    "final tail p50",
    "goodput req/s",
    "cpu us/resp",
    "server tok/s",
)
STREAM_COMPARE_COLUMNS = (
    "level",
    "A tokens/s",
    "B tokens/s",
    "B/A",
    "A TTFT p50",
    "B TTFT p50",
    "A ITL p50",
    "B ITL p50",
    "B/A TTFT p99",
)


def is_stream_run(run: PerfRun) -> bool:
    return any(s.stream is not None for s in run.steps)


def _stream_step_rows(
    run: PerfRun, columns: int, cells: Callable[[StepResult, StreamSummary], list[str]]
) -> list[list[str]]:
    """One row per step: its level, then ``cells`` of its streaming figures ("-" for a step that
    has none)."""
    return [
        [s.level_label, *(cells(s, s.stream) if s.stream is not None else ["-"] * (columns - 1))]
        for s in run.steps
    ]


def stream_rows(run: PerfRun) -> list[list[str]]:
    def cells(s: StepResult, st: StreamSummary) -> list[str]:
        return [
            f"{st.requests_per_s:.1f}",
            f"{st.output_tokens_per_s:.1f}",
            _ms(st.get("ttft", "p50")),
            _ms(st.get("ttft", "p99")),
            _ms(st.get("itl", "p50")),
            _ms(st.get("itl", "p99")),
            _ms(s.latency_us("p50")),
            f"{st.output_tokens.avg_us:.1f}" if st.output_tokens else "-",
            _ms(st.final_tail.p50_us) if st.final_tail else "-",
            f"{st.goodput.requests_per_s:.1f}" if st.goodput else "-",
            f"{st.client_cpu_us_per_response:.0f}",
            # the server's own count over the same windows (an OpenAI front's token counter)
            "-" if st.server_output_tokens_per_s is None else f"{st.server_output_tokens_per_s:.1f}",
        ]

    return _stream_step_rows(run, len(STREAM_COLUMNS), cells)


#: the achieved shape of an LLM load, per step (token counts per request)
LLM_COLUMNS = (
    "level",
    "in tok avg",
    "in tok std",
    "in tok min-max",
    "out asked avg",
    "out tok avg",
    "out tok std",
    "out tok min-max",
    "length misses",
)


def is_llm_run(run: PerfRun) -> bool:
    """Whether a streamed run knows its prompts' or asked output lengths (LLM load)."""
    return any(
        s.stream is not None
        and (s.stream.input_tokens is not None or s.stream.asked_output_tokens is not None)
        for s in run.steps
    )


def llm_rows(run: PerfRun) -> list[list[str]]:
    def spread(summary: LatencySummary | None) -> list[str]:
        if summary is None:
            return ["-", "-", "-"]
        return [
            f"{summary.avg_us:.1f}",
            f"{summary.std_us:.1f}",
            f"{summary.min_us:.0f}-{summary.max_us:.0f}",
        ]

    def cells(s: StepResult, st: StreamSummary) -> list[str]:
        asked = st.asked_output_tokens
        return [
            *spread(st.input_tokens),
            f"{asked.avg_us:.1f}" if asked else "-",
            *spread(st.output_tokens),
            f"{st.output_length_misses}" if asked else "-",
        ]

    return _stream_step_rows(run, len(LLM_COLUMNS), cells)


def output_length_note(run: PerfRun) -> str | None:
    """Steps where requests got another number of output tokens than they asked for."""
    bad = [
        f"level {s.level_label}: {s.stream.output_length_misses} of {s.stream.asked_output_tokens.count} "
        f"(mean error {s.stream.output_length_error_avg:+.2f} tokens)"
        for s in run.steps
        if s.stream is not None and s.stream.asked_output_tokens is not None and s.stream.output_length_misses
    ]
    if not bad:
        return None
    return (
        "requests got another number of output tokens than they asked for: "
        + "; ".join(bad)
        + " (a model that is not a vLLM stage may not honour exact lengths; counts by tokenizer or "
        "by responses are not the engine's)"
    )


def stream_compare_rows(cmp: Comparison) -> list[list[str]]:
    def tok(s: StepResult | None) -> float | None:
        return s.stream.output_tokens_per_s if s and s.stream else None

    def fig(s: StepResult | None, metric: str, stat: str) -> float | None:
        return s.stream.get(metric, stat) if s and s.stream else None

    rows = []
    for c in cmp.steps:
        ta, tb = tok(c.a), tok(c.b)
        pa, pb = fig(c.a, "ttft", "p99"), fig(c.b, "ttft", "p99")
        rows.append(
            [
                f"{c.level:g}",
                "-" if ta is None else f"{ta:.1f}",
                "-" if tb is None else f"{tb:.1f}",
                _ratio(tb / ta if ta and tb is not None else None),
                _ms(fig(c.a, "ttft", "p50")),
                _ms(fig(c.b, "ttft", "p50")),
                _ms(fig(c.a, "itl", "p50")),
                _ms(fig(c.b, "itl", "p50")),
                _ratio(pb / pa if pa and pb is not None else None),
            ]
        )
    return rows


def client_bound_note(run: PerfRun) -> str | None:
    """Steps the load generator, not the server, may have limited (its CPU saturated, or
    request-rate sends that left late)."""
    notes = []
    for s in run.steps:
        why = []
        if s.stream is not None and s.stream.client_bound:
            if s.stream.client is not None and s.stream.client.reason:
                why.append(s.stream.client.reason)
            else:
                why.append(f"client CPU {s.stream.client_cpu_share * 100:.0f}% of a core per process")
        if s.delayed_requests:
            why.append(f"{s.delayed_requests} sends left late")
        if why:
            notes.append(f"level {s.level_label} ({', '.join(why)})")
    if not notes:
        return None
    return (
        "the load generator, not the server, may limit "
        + "; ".join(notes)
        + ": add --workers N (processes), or measure from a second machine"
    )


def shortfall_note(run: PerfRun) -> str | None:
    """Load workers (--workers/--kube) that fell behind their share: named, never averaged in."""
    notes = [f"level {s.level_label}: {why}" for s in run.steps if (why := shortfall(s.load_workers))]
    if not notes:
        return None
    return (
        "shortfall: " + "; ".join(notes) + ": those steps' load was lighter than asked; "
        "add workers (--workers N, --kube N) or give them more CPU"
    )


def worker_lines(run: PerfRun) -> list[str]:
    """Each load worker's share, requests, CPU and clock offset, step by step (--workers/--kube)."""
    lines = []
    for s in run.steps:
        for w in s.load_workers:
            lines.append(
                f"level {s.level_label}, worker {w.name}: share {w.share:g}, {w.requests} requests, "
                f"CPU {w.cpu_share * 100:.0f}%, clock offset {w.clock_offset_us / 1000:+.3f} ms "
                f"(+-{w.clock_error_us / 1000:.3f})"
            )
    return lines


def unstable_note(run: PerfRun) -> str | None:
    bad = [s.level_label for s in run.steps if not s.stable]
    if not bad:
        return None
    return (
        f"steps {', '.join(bad)} never stabilised (their last windows differ by more than the "
        "stability percentage): treat their numbers as indicative only"
    )


def cost_lines(cost: CostEstimate) -> list[str]:
    lines = [f"VM size {cost.sku} ({cost.pricing}): ${cost.usd_per_hour:.4f}/hour per replica"]
    if cost.step_level is None or cost.usd_per_million is None:
        lines.append(cost.note)
    else:
        lines.append(
            f"best step meeting {cost.budget}: level {cost.step_level:g} at {cost.throughput:.1f} infer/s "
            f"-> ${cost.usd_per_million:.4f} per million inferences"
        )
        if cost.usd_per_million_output_tokens is not None:
            lines.append(
                f"the same step at {cost.output_tokens_per_s:.1f} output tokens/s -> "
                f"${cost.usd_per_million_output_tokens:.4f} per million output tokens"
            )
        if cost.note:
            lines.append(cost.note)
    lines += [_level_cost_line(level) for level in cost.levels]
    if cost.price_date or cost.price_source:
        lines.append(f"price as of {cost.price_date or '?'} from {cost.price_source}")
    return lines


def _level_cost_line(level: TokenCost) -> str:
    def price(value: float | None) -> str:
        return "-" if value is None else f"${value:.4f}"

    verdict = "within budget" if level.meets_budget else "over budget or unstable"
    return (
        f"level {level.label}: per million tokens {price(level.usd_per_million_input_tokens)} input, "
        f"{price(level.usd_per_million_output_tokens)} output, {price(level.usd_per_million_tokens)} "
        f"all ({level.output_tokens_per_s:.1f} output tokens/s; {verdict})"
    )


def _md_table(columns: tuple[str, ...], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def _html_table(columns: tuple[str, ...], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def composed_note(run: PerfRun) -> str | None:
    """What a composed run measured (an LLM-decoder pipeline's two steps, not its front door);
    None for a run that called its model itself."""
    composed = run.settings.get("composed")
    if not isinstance(composed, dict):
        return None
    return (
        f"composed: each request asked {run.model}'s prompt model '{composed.get('prompt_model')}' "
        f"(unary), then streamed its LLM stage '{composed.get('llm_model')}' straight from Triton, "
        "timed as one request from the prompt call (TTFT, latency and tokens: the stage's pieces; "
        "server side: the stage's); --no-compose measures the front door"
    )


def render_markdown(run: PerfRun, *, plot_file: str | None) -> str:
    composed = composed_note(run)
    parts = [
        f"# tritonkit perf: {run.model}",
        "",
        f"- endpoint: `{run.url}` ({run.protocol}), mode: {run.mode}, started {run.started_at}",
        f"- command: `{run.command}`" if run.command else "",
        f"- {composed}" if composed else "",
        f"- latencies in milliseconds; stability: last 3 windows within "
        f"+-{run.settings.get('stability_percentage', 10)}% on throughput and latency",
        "",
        _md_table(STEP_COLUMNS, step_rows(run)),
        "",
    ]
    if is_stream_run(run):
        parts += [
            "## Streaming (times in ms; tokens: " + _counting(run) + ")",
            "",
            _md_table(STREAM_COLUMNS, stream_rows(run)),
            "",
        ]
    if any(step.stages for step in run.steps):
        parts += ["## Stages (ms per stage request)", "", _md_table(STAGE_COLUMNS, stage_rows(run)), ""]
    if is_llm_run(run):
        parts += ["## LLM load: tokens per request", "", _md_table(LLM_COLUMNS, llm_rows(run)), ""]
    for note in (unstable_note(run), client_bound_note(run), shortfall_note(run), output_length_note(run)):
        if note:
            parts += [f"**Warning:** {note}.", ""]
    if worker_lines(run):
        parts += ["## Load workers", ""] + [f"- {line}" for line in worker_lines(run)] + [""]
    if run.cost:
        parts += ["## Cost", ""] + [f"- {line}" for line in cost_lines(run.cost)] + [""]
    if plot_file:
        parts += [f"![throughput vs latency]({plot_file})", ""]
    return "\n".join(p for p in parts if p is not None)


def _counting(run: PerfRun) -> str:
    for s in run.steps:
        if s.stream is not None:
            how = s.stream.token_counting
            if how == "responses":
                return "one response = one token"
            if how == "engine":
                return "the engine's own counts (num_output_tokens)"
            return f"counted by {how.split(':', 1)[-1]}"
    return ""


def render_html(run: PerfRun, *, png: bytes | None) -> str:
    note = "; ".join(n for n in (unstable_note(run), client_bound_note(run), shortfall_note(run)) if n)
    stream = ""
    if is_stream_run(run):
        stream = f"<h2>Streaming</h2><p>times in ms; tokens: {html.escape(_counting(run))}</p>" + _html_table(
            STREAM_COLUMNS, stream_rows(run)
        )
    if any(step.stages for step in run.steps):
        stream += "<h2>Stages (ms per stage request)</h2>" + _html_table(STAGE_COLUMNS, stage_rows(run))
    cost = ""
    if run.cost:
        cost = (
            "<h2>Cost</h2><ul>"
            + "".join(f"<li>{html.escape(x)}</li>" for x in cost_lines(run.cost))
            + "</ul>"
        )
    img = ""
    if png:
        img = (
            f'<img alt="throughput vs latency" src="data:image/png;base64,{base64.b64encode(png).decode()}">'
        )
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>tritonkit perf: {html.escape(run.model)}</title>"
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}img{max-width:100%}</style>"
        f"</head><body><h1>tritonkit perf: {html.escape(run.model)}</h1>"
        f"<p>endpoint <code>{html.escape(run.url)}</code> ({run.protocol}), mode {run.mode}, "
        f"started {html.escape(run.started_at)}; latencies in ms</p>"
        + (f"<p><code>{html.escape(run.command)}</code></p>" if run.command else "")
        + (f"<p>{html.escape(composed)}</p>" if (composed := composed_note(run)) else "")
        + _html_table(STEP_COLUMNS, step_rows(run))
        + stream
        + (f"<p><strong>Warning:</strong> {html.escape(note)}.</p>" if note else "")
        + cost
        + img
        + "</body></html>\n"
    )


def write_report(run: PerfRun, path: Path) -> list[Path]:
    """Write a .md report (plot saved beside it as <name>.png) or a self-contained .html one."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".md", ".html", ".htm"):
        raise PerfError(f"--report {path}: use a .md or .html file name")
    from tritonkit.perf.plot import plot_run

    if suffix == ".md":
        png_path = path.with_suffix(".png")
        plot_run(run, png_path)
        atomic_write(path, render_markdown(run, plot_file=png_path.name))
        return [path, png_path]
    with tempfile.TemporaryDirectory() as tmp:
        tmp_png = Path(tmp) / "plot.png"
        plot_run(run, tmp_png)
        png = tmp_png.read_bytes()
    atomic_write(path, render_html(run, png=png))
    return [path]


def render_compare_markdown(cmp: Comparison, *, plot_file: str | None) -> str:
    parts = [
        f"# {cmp.b_label} vs {cmp.a_label}",
        "",
        f"- A = {cmp.a_label}: {cmp.a.model} at {cmp.a.url}",
        f"- B = {cmp.b_label}: {cmp.b.model} at {cmp.b.url}",
        "",
        _md_table(COMPARE_COLUMNS, compare_rows(cmp)),
        "",
    ]
    if is_stream_run(cmp.a) and is_stream_run(cmp.b):
        parts += ["## Streaming (ms)", "", _md_table(STREAM_COMPARE_COLUMNS, stream_compare_rows(cmp)), ""]
    if plot_file:
        parts += [f"![comparison]({plot_file})", ""]
    return "\n".join(parts)


def write_outputs(
    run: PerfRun,
    *,
    json_out: Path | None = None,
    csv_out: Path | None = None,
    plot: Path | None = None,
    report: Path | None = None,
) -> list[Path]:
    """Write the files `tritonkit perf` was asked for (JSON, CSV, PNG plot, report); the paths."""
    from tritonkit.perf.results import write_csv, write_json

    written: list[Path] = []
    for path, write in ((json_out, write_json), (csv_out, write_csv)):
        if path:
            write(run, path)
            written.append(path)
    if plot:
        from tritonkit.perf.plot import plot_run

        plot_run(run, plot)
        written.append(plot)
    if report:
        written += write_report(run, report)
    return written
