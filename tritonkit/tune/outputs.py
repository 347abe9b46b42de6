"""What a tuning run leaves behind: JSON, CSV, a Pareto plot, a report, and the winner's config
written back into the repository (as a variant, or applied)."""

from __future__ import annotations

import csv
import datetime as _dt
import html
import io
import json
import math
from pathlib import Path
from typing import Any

import yaml

from tritonkit.config import atomic_write_text, config_to_dict, dumps_config
from tritonkit.errors import RepositoryError, TuneError
from tritonkit.perf.results import atomic_write
from tritonkit.repository.spec import check_model_name
from tritonkit.tune.control import validate_candidate
from tritonkit.tune.objective import Measurement, level_label
from tritonkit.tune.runner import TuneResult
from tritonkit.tune.timing import TIME_COLUMNS, time_lines, time_rows

__all__ = [
    "apply_winner",
    "explain",
    "pareto_front",
    "per_load_rows",
    "plot_pareto",
    "table_rows",
    "variant_snippet",
    "write_csv",
    "write_json",
    "write_report",
    "write_variant",
]


def _ms(m: Measurement, stat: str) -> float | None:
    v = m.outcome.latency_us.get(stat)
    return None if v is None or not math.isfinite(v) else v / 1000.0


def _fmt(v: float | None, digits: int = 2) -> str:
    return "-" if v is None or not math.isfinite(v) else f"{v:.{digits}f}"


def _short(settings: dict[str, Any], single: str | None) -> str:
    parts = []
    for key, value in settings.items():
        if single and key.startswith(single + "."):
            key = key[len(single) + 1 :]
        parts.append(f"{key}={json.dumps(value)}")
    return " ".join(parts)


def write_json(result: TuneResult, path: str | Path) -> None:
    atomic_write(Path(path), json.dumps(result.to_dict(), indent=2) + "\n")


def write_csv(result: TuneResult, path: str | Path) -> None:
    keys = [d.key for d in result.space.dimensions]
    streaming = is_streaming(result)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(
        ["index", "phase", *keys, "concurrency", "throughput", "avg_ms", "p50_ms", "p90_ms", "p95_ms"]
        + ["p99_ms", "errors", "stable", "feasible", "violation", "wall_s"]
        + (list(_STREAM_FIGURES) if streaming else [])
    )
    for m in result.measurements:
        w.writerow(
            [m.index, m.phase, *(json.dumps(m.settings.get(k)) for k in keys), m.load]
            + [f"{m.outcome.throughput:.3f}"]
            + [_fmt(_ms(m, s), 3) for s in ("avg", "p50", "p90", "p95", "p99")]
            + [m.outcome.errors, m.outcome.stable, m.feasible, m.violation, f"{m.wall_s:.2f}"]
            + ([_fmt(m.outcome.metrics.get(k), 3) for k in _STREAM_FIGURES] if streaming else [])
        )
    atomic_write(Path(path), buf.getvalue())


TABLE_COLUMNS = ("#", "phase", "config", "conc", "infer/s", "p99 ms", "feasible")
#: a streaming (decoupled) model's candidates also show what its users wait for
STREAM_TABLE_COLUMNS = (
    *TABLE_COLUMNS[:-1],
    "tokens/s",
    "TTFT p50 ms",
    "TTFT p99 ms",
    "ITL p99 ms",
    "feasible",
)
_STREAM_FIGURES = ("output_tokens_per_s", "ttft_p50_us", "ttft_p99_us", "itl_p99_us")


def is_streaming(result: TuneResult) -> bool:
    return any("output_tokens_per_s" in m.outcome.metrics for m in result.measurements)


def table_columns(result: TuneResult) -> tuple[str, ...]:
    return STREAM_TABLE_COLUMNS if is_streaming(result) else TABLE_COLUMNS


def _stream_cells(m: Measurement) -> list[str]:
    out = []
    for key in _STREAM_FIGURES:
        v = m.outcome.metrics.get(key)
        out.append(_fmt(v, 1) if key == "output_tokens_per_s" else _fmt(v / 1000 if v is not None else None))
    return out


def table_rows(result: TuneResult) -> list[list[str]]:
    streaming = is_streaming(result)
    single = result.model if {d.model for d in result.space.dimensions} == {result.model} else None
    rows = []
    for m in result.measurements:
        mark = "yes" if m.feasible else f"no ({m.violation})"
        if result.winner is not None and m is result.winner:
            mark = "WINNER"
        rows.append(
            [
                str(m.index),
                m.phase
                + (" (resumed)" if m.resumed else "")
                + (" (cut short)" if m.outcome.cut_short else ""),
                _short(dict(m.settings), single),
                level_label(m.load) + (" (client-bound)" if m.outcome.client_bound else ""),
                f"{m.outcome.throughput:.1f}",
                _fmt(_ms(m, "p99")),
                *(_stream_cells(m) if streaming else []),
                mark,
            ]
        )
    return rows


PER_LOAD_COLUMNS = ("load", "best config there", "infer/s", "p99 ms", "figures")


def per_load_rows(result: TuneResult) -> list[list[str]]:
    """The best feasible config measured at each load level (a low-load and a peak-load winner
    may differ; a level lists only the configs the search measured there). A level with a
    confirmed measurement shows the best confirmed one, so the winner's level names the winner
    with the figures the winner line gives; the last column says which kind each row is."""
    single = result.model if {d.model for d in result.space.dimensions} == {result.model} else None
    return [
        [
            level_label(level),
            _short(dict(m.settings), single),
            f"{m.outcome.throughput:.1f}",
            _fmt(_ms(m, "p99")),
            ("WINNER, " if m is result.winner else "")
            + ("confirmed" if m.phase == "confirm" else "screened"),
        ]
        for level, m in result.search.per_level
    ]


def _load_word(result: TuneResult) -> str:
    return "request rate" if result.space.load_mode == "request_rate" else "concurrency"


def pareto_front(measurements: list[Measurement]) -> list[Measurement]:
    """Feasible-or-not measurements no other beats on both throughput (up) and p99 (down)."""
    pts = [m for m in measurements if m.outcome.failed is None and _ms(m, "p99") is not None]
    front = []
    for m in pts:
        p99 = _ms(m, "p99") or 0.0
        dominated = any(
            o is not m
            and o.outcome.throughput >= m.outcome.throughput
            and (_ms(o, "p99") or 0.0) <= p99
            and (o.outcome.throughput > m.outcome.throughput or (_ms(o, "p99") or 0.0) < p99)
            for o in pts
        )
        if not dominated:
            front.append(m)
    return sorted(front, key=lambda m: m.outcome.throughput)


def plot_pareto(result: TuneResult, path: str | Path) -> None:
    """Throughput vs p99 of every measurement, the Pareto front, the budget and the winner."""
    from tritonkit.perf.plot import pyplot, save_figure

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 5))
    ms = [m for m in result.measurements if m.outcome.failed is None and _ms(m, "p99") is not None]
    for feasible, color, label in ((True, "#3d5a80", "feasible"), (False, "#c0c0c0", "infeasible")):
        sel = [m for m in ms if m.feasible == feasible]
        if sel:
            ax.scatter(
                [m.outcome.throughput for m in sel],
                [_ms(m, "p99") for m in sel],
                s=22,
                c=color,
                label=label,
                alpha=0.8,
            )
    front = pareto_front(ms)
    if front:
        ax.plot(
            [m.outcome.throughput for m in front],
            [_ms(m, "p99") for m in front],
            "--o",
            color="#ee6c4d",
            mfc="none",
            ms=10,
            label="Pareto front",
        )
    if result.objective.budget is not None and result.objective.budget.stat == "p99":
        ax.axhline(result.objective.budget.limit_us / 1000.0, color="#b00020", lw=1, label="p99 budget")
    if result.winner is not None:
        w = result.winner
        ax.scatter([w.outcome.throughput], [_ms(w, "p99")], marker="*", s=260, c="#f2a541", edgecolors="k")
        ax.annotate(
            "chosen", (w.outcome.throughput, _ms(w, "p99") or 0.0), xytext=(8, 8), textcoords="offset points"
        )
    ax.set_xlabel("throughput (infer/s)")
    ax.set_ylabel("p99 latency (ms)")
    ax.set_title(
        f"tritonkit tune {result.model}: {len(result.measurements)} measurements ({result.strategy})"
    )
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    save_figure(fig, Path(path))


def explain(result: TuneResult) -> list[str]:
    """Why the winner won, in sentences (the report's heart)."""
    o = result.objective
    lines = []
    goal = {
        "throughput": "highest throughput",
        "latency": f"lowest {o.latency_stat}",
        "cost": "lowest cost",
        "tokens_per_s": "highest output tokens/s",
        "ttft": f"lowest time to first token ({o.latency_stat})",
    }
    limits = [str(o.budget)] if o.budget else []
    limits += [str(lim) for lim in o.stream_limits]
    if o.min_throughput:
        limits.append(f"throughput >= {o.min_throughput:g} infer/s")
    lines.append(
        f"Objective: {goal[o.kind]}" + (f", subject to {' and '.join(limits)}" if limits else "") + "."
    )
    feasible = {m.signature for m in result.measurements if m.feasible}
    configs = {m.signature for m in result.measurements}
    refused = [m for m in result.measurements if m.outcome.failed]
    lines.append(
        f"{len(result.measurements)} measurements over {len(configs)} configs "
        f"({len(feasible)} feasible, {len({m.signature for m in refused})} refused), "
        f"{result.space.size} in the full grid; stopped: {result.search.stopped_by}; "
        f"{result.wall_s:.0f} s, {result.server_restarts} server restarts."
    )
    w = result.winner
    if w is None:
        closest = max(result.measurements, key=lambda m: m.score, default=None)
        lines.append("No feasible config: none met the constraints.")
        if closest is not None:
            lines.append(
                f"Closest: {_short(dict(closest.settings), None)} at {_load_word(result)} "
                f"{level_label(closest.load)} ({closest.violation})."
            )
        missed = [m for m in result.search.finalists if not m.feasible]
        if missed:
            lines.append(
                "The confirmation run of the best screened config(s) missed the constraints: "
                + "; ".join(f"{_short(dict(m.settings), None)}: {m.violation}" for m in missed)
                + ". NOT recommended: the screening numbers did not hold."
            )
        lines += _load_lines(result)
        return lines
    peak = result.search.production_loads
    if peak:
        lines.append(
            f"Recommended for the production load ({_load_word(result)} "
            + ", ".join(level_label(x) for x in peak)
            + f"): {_short(dict(w.settings), None)}; the separate confirmation run at "
            f"{level_label(peak[-1])} met the constraints "
            f"({w.outcome.throughput:.1f} infer/s, p99 {_fmt(_ms(w, 'p99'))} ms)."
        )
    lines.append(
        f"Winner: {_short(dict(w.settings), None)} at {_load_word(result)} {level_label(w.load)}: "
        f"{w.outcome.throughput:.1f} infer/s, p99 {_fmt(_ms(w, 'p99'))} ms"
        + (f", {w.value:.4f} USD per million" if o.kind == "cost" else "")
        + f" (confirmed with perf's stability rule: {_stability(w)})."
    )
    base = result.baseline()
    if base is not None:
        gain = (w.value / base.value - 1) * 100 if base.value else 0.0
        lines.append(
            f"The original config measured {base.value:.1f} {o.unit} (screening, {_load_word(result)} "
            f"{level_label(base.load)}): the winner is {gain:+.0f}% on the objective."
        )
    r = result.search.runner_up
    if r is not None:
        if result.search.within_noise:
            lines.append(
                f"Within noise: the runner-up ({_short(dict(r.settings), None)}, {r.value:.1f} {o.unit}) "
                f"is within the measured noise (>= {result.search.noise_pct:g}%) of the winner; "
                "either is a sound choice, prefer the cheaper one."
            )
        else:
            lines.append(
                f"Runner-up: {_short(dict(r.settings), None)} at {r.value:.1f} {o.unit}, "
                "beyond the measured noise."
            )
    if result.search.check is not None:
        lines.append(result.search.check.sentence())
    lines += time_lines(result.time_breakdown())
    lines += _load_lines(result)
    over = [m for m in result.measurements if not m.feasible and not m.outcome.failed]
    if over:
        lines.append(f"{len(over)} measurements missed a constraint (e.g. {over[0].violation}).")
    for m in refused[:3]:
        lines.append(f"Refused: {_short(dict(m.settings), None)}: {m.outcome.failed}")
    if result.restore_problems:
        lines.append("WARNING: original configs not restored: " + "; ".join(result.restore_problems))
    return lines


def _stability(m: Measurement) -> str:
    o = m.outcome
    windows = f" after {o.windows} windows of {o.window_ms} ms" if o.windows else ""
    return ("stable" if o.stable else f"NOT stable, spread {o.spread_pct:.0f}%") + windows


def _load_lines(result: TuneResult) -> list[str]:
    """Per-load winners that differ, and a load generator that ran out of CPU."""
    lines = []
    per = result.search.per_level
    if len({m.signature for _, m in per}) > 1:
        lo, hi = per[0], per[-1]
        lines.append(
            f"The best config depends on the load: at {_load_word(result)} {level_label(lo[0])} "
            f"{_short(dict(lo[1].settings), None)} ({lo[1].outcome.throughput:.1f} infer/s), at "
            f"{level_label(hi[0])} {_short(dict(hi[1].settings), None)} ({hi[1].outcome.throughput:.1f} "
            "infer/s); see the per-load table."
        )
    bound = result.search.client_bound
    if bound:
        levels = sorted({m.load for m in bound})
        workers = int(result.settings.get("workers", 0) or 0)
        lines.append(
            f"WARNING: the load generator saturated its CPU in {len(bound)} measurement(s) (at "
            f"{_load_word(result)} " + ", ".join(level_label(x) for x in levels) + f"; "
            f"{max(m.outcome.client_cpu for m in bound):.2f} cores): there the client, not the "
            f"server, set the throughput. Rerun with --workers {max(2, workers * 2)} or a client on "
            "another machine; no level was capped."
        )
    return lines


def write_report(result: TuneResult, path: str | Path, *, plot: str | None = None) -> None:
    """Markdown (``.md``) or HTML (``.html``) report: why the winner won, and every measurement."""
    p = Path(path)
    why = explain(result)
    rows = table_rows(result)
    if p.suffix.lower() in (".html", ".htm"):
        body = [f"<h1>tritonkit tune: {html.escape(result.model)}</h1>", "<h2>Why the winner won</h2><ul>"]
        body += [f"<li>{html.escape(x)}</li>" for x in why]
        body.append("</ul>")
        if plot:
            body.append(f'<img src="{html.escape(plot)}" alt="Pareto plot">')
        for title, cols, table in _extra_tables(result):
            body.append(f"<h2>{html.escape(title)}</h2><table border=1 cellpadding=3><tr>")
            body += [f"<th>{html.escape(c)}</th>" for c in cols]
            body.append("</tr>")
            for row in table:
                body.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>")
            body.append("</table>")
        body.append("<h2>Measurements</h2><table border=1 cellpadding=3><tr>")
        body += [f"<th>{html.escape(c)}</th>" for c in table_columns(result)]
        body.append("</tr>")
        for row in rows:
            body.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>")
        body.append("</table>")
        text = "<!doctype html><meta charset=utf-8><title>tritonkit tune</title>\n" + "\n".join(body) + "\n"
    else:
        out = [f"# tritonkit tune: {result.model}", "", "## Why the winner won", ""]
        out += [f"- {x}" for x in why]
        if plot:
            out += ["", f"![Pareto plot]({plot})"]
        for title, cols, table in _extra_tables(result):
            out += ["", f"## {title}", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
            out += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in table]
        columns = table_columns(result)
        out += ["", "## Measurements", "", "| " + " | ".join(columns) + " |"]
        out.append("|" + "---|" * len(columns))
        out += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in rows]
        text = "\n".join(out) + "\n"
    atomic_write(p, text)


PARETO_COLUMNS = ("config", "load", "infer/s", "p99 ms", "feasible")


def _extra_tables(result: TuneResult) -> list[tuple[str, tuple[str, ...], list[list[str]]]]:
    single = result.model if {d.model for d in result.space.dimensions} == {result.model} else None
    front = [
        [
            _short(dict(m.settings), single),
            level_label(m.load),
            f"{m.outcome.throughput:.1f}",
            _fmt(_ms(m, "p99")),
            "yes" if m.feasible else "no",
        ]
        for m in pareto_front(list(result.measurements))
    ]
    return [
        ("Best config per load", PER_LOAD_COLUMNS, per_load_rows(result)),
        ("Throughput vs p99: the Pareto front", PARETO_COLUMNS, front),
        ("Where the time went", TIME_COLUMNS, time_rows(result.time_breakdown())),
    ]


# --- writing the winner back ------------------------------------------------------------------


def _winner_texts(result: TuneResult) -> dict[str, str]:
    texts = {}
    for model, cfg in result.winner_configs().items():
        problems = validate_candidate(cfg, model_dir=None)
        if problems:  # never expected: every measured candidate passed the validator
            raise TuneError(f"the winning config of '{model}' fails validation: {problems[0].message}")
        texts[model] = dumps_config(cfg)
    return texts


def write_outputs(result: TuneResult, out_dir: Path) -> tuple[list[Path], str | None]:
    """Write tune.json, tune.csv, pareto.png, report.md and report.html into ``out_dir``.

    Returns the files written and, when the plot could not be drawn (the ``plot`` extra is
    missing, say), why: the results and reports are written without it rather than lost.
    """
    write_json(result, out_dir / "tune.json")
    write_csv(result, out_dir / "tune.csv")
    written = [out_dir / "tune.json", out_dir / "tune.csv"]
    plot_name: str | None = "pareto.png"
    plot_failure: str | None = None
    try:
        plot_pareto(result, out_dir / "pareto.png")
        written.append(out_dir / "pareto.png")
    except Exception as exc:  # noqa: BLE001 - a missing plot extra must not lose the results
        plot_name, plot_failure = None, str(exc)
    for report in ("report.md", "report.html"):
        write_report(result, out_dir / report, plot=plot_name)
        written.append(out_dir / report)
    return written, plot_failure


def write_variant(
    result: TuneResult, repository: str | Path, name: str, *, force: bool = False
) -> list[Path]:
    """Write the winner as ``MODEL/configs/NAME.pbtxt`` for every tuned model (atomic per file;
    all configs are validated before the first is written)."""
    check_model_name(name, where="--write-variant", what="variant name")
    repo = Path(repository)
    texts = _winner_texts(result)
    targets = {m: repo / m / "configs" / f"{name}.pbtxt" for m in texts}
    for model, target in targets.items():
        if not (repo / model).is_dir():
            raise RepositoryError(f"model directory {repo / model} does not exist")
        if target.exists() and not force:
            raise RepositoryError(
                f"{target} exists", hint="pick another --write-variant NAME, or pass --force to replace it"
            )
        problems = validate_candidate(result.winner_configs()[model], model_dir=repo / model)
        if problems:
            raise TuneError(f"{target}: the winner does not fit the model directory: {problems[0].message}")
    copies = _untuned_members(result, repo, name)
    for model, target in targets.items():
        target.parent.mkdir(exist_ok=True)
        atomic_write_text(target, texts[model])
    for source, target in copies:
        if not target.exists() or force:
            target.parent.mkdir(exist_ok=True)
            atomic_write_text(target, source.read_text(encoding="utf-8"))
    return [*targets.values(), *(t for _, t in copies)]


def _untuned_members(result: TuneResult, repo: Path, name: str) -> list[tuple[Path, Path]]:
    """For an ensemble: the composing models the space did not touch get NAME.pbtxt too (a copy
    of the config they were served with), so `--model-config-name NAME` picks the same set the
    run measured instead of falling back to their config.pbtxt (the GPU one, for the examples)."""
    from tritonkit.server import resolve_model_config_name

    top = repo / result.model / "config.pbtxt"
    if not top.is_file():
        return []
    from tritonkit.config import read_config

    cfg = read_config(top)
    if cfg.platform != "ensemble":
        return []
    served = resolve_model_config_name(result.settings.get("model_config_name", "auto"))
    out = []
    for step in cfg.ensemble_scheduling.step:
        member = str(step.model_name)
        if member in result.base_configs or not (repo / member).is_dir():
            continue
        source = repo / member / "config.pbtxt"
        if served and (repo / member / "configs" / f"{served}.pbtxt").is_file():
            source = repo / member / "configs" / f"{served}.pbtxt"
        if source.is_file():
            out.append((source, repo / member / "configs" / f"{name}.pbtxt"))
    return out


_SNIPPET_FIELDS = ("max_batch_size", "instance_group", "dynamic_batching")


def variant_snippet(result: TuneResult, name: str) -> str:
    """The spec ``variants:`` entries that rebuild the winner with ``tritonkit build``."""
    out = []
    for model, cfg in result.winner_configs().items():
        data = config_to_dict(cfg)
        fields = {k: data[k] for k in _SNIPPET_FIELDS if k in data}
        extra = {
            d.name: data[d.name]
            for d in result.space.dimensions
            if d.model == model
            and d.name in data
            and d.name not in fields
            and d.name != "max_batch_size"
            and d.name
            not in ("instance_count", "instance_kind", "preferred_batch_size", "max_queue_delay_microseconds")
        }
        if extra:
            fields["extra"] = extra
        for g in fields.get("instance_group", []):
            g.pop("name", None)
        block = yaml.safe_dump({"variants": {name: fields}}, sort_keys=False, default_flow_style=None)
        out.append(f"# models: - name: {model}\n" + block)
    return "\n".join(out)


def apply_winner(result: TuneResult, repository: str | Path, *, keep_as: str | None = None) -> list[Path]:
    """Write the winner over the file each tuned model's candidates were built on: its
    ``config.pbtxt``, or the variant the server picked (``configs/cpu.pbtxt`` on a CPU box, so
    what is served changes and the production config.pbtxt is not replaced by a CPU one). The old
    file is kept as ``configs/<keep_as>.pbtxt`` (default ``pre_tune_YYYYMMDDHHMMSS``)."""
    repo = Path(repository)
    texts = _winner_texts(result)
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d%H%M%S")
    keep = keep_as or f"pre_tune_{stamp}"
    check_model_name(keep, where="--apply", what="variant name")
    plan = []
    for model in texts:
        target = result.source_files.get(model, repo / model / "config.pbtxt")
        backup = repo / model / "configs" / f"{keep}.pbtxt"
        if backup.exists():
            raise RepositoryError(f"{backup} exists: refusing to overwrite a kept config")
        plan.append((model, Path(target), backup))
    for model, target, backup in plan:
        if target.is_file():
            backup.parent.mkdir(exist_ok=True)
            atomic_write_text(backup, target.read_text(encoding="utf-8"))
        atomic_write_text(target, texts[model])
    return [t for _, t, _ in plan]
