"""Comparing two runs, reports and plots (real matplotlib, Agg backend)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tests.unit.test_perf_results import make_run, make_step
from tritonkit.cli.app import main
from tritonkit.errors import PerfError
from tritonkit.perf.compare import compare
from tritonkit.perf.cost import estimate_cost, parse_budget
from tritonkit.perf.plot import plot_comparison, plot_run
from tritonkit.perf.report import render_html, render_markdown, write_report
from tritonkit.perf.results import write_json

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _scaled(factor: float, levels: tuple[float, ...] = (1, 4, 16)):  # type: ignore[no-untyped-def]
    run = make_run(levels)
    steps = tuple(dataclasses.replace(s, throughput=s.throughput * factor) for s in run.steps)
    return dataclasses.replace(run, steps=steps)


def test_compare_gives_ratio_per_step_when_levels_match() -> None:
    cmp = compare(_scaled(1.0), _scaled(5.0))
    assert [c.level for c in cmp.steps] == [1, 4, 16]
    assert [c.throughput_ratio for c in cmp.steps] == pytest.approx([5.0, 5.0, 5.0])
    assert cmp.steps[0].latency_ratio("p99") == pytest.approx(1.0)


def test_compare_keeps_unpaired_steps_without_ratio_when_levels_differ() -> None:
    cmp = compare(_scaled(1.0, (1, 4)), _scaled(2.0, (4, 8)))
    assert [c.level for c in cmp.steps] == [1, 4, 8]
    assert cmp.steps[0].b is None and cmp.steps[0].throughput_ratio is None
    assert cmp.steps[1].throughput_ratio == pytest.approx(2.0)
    assert cmp.to_dict()["steps"][2]["a"] is None


def test_compare_raises_when_modes_differ() -> None:
    with pytest.raises(PerfError, match="cannot compare"):
        compare(make_run(), make_run((10,), mode="request_rate"))


def test_plots_are_png_files_when_written(tmp_path: Path) -> None:
    plot_run(make_run(), tmp_path / "run.png")
    plot_comparison(compare(_scaled(1.0), _scaled(3.0)), tmp_path / "cmp.png")
    for name in ("run.png", "cmp.png"):
        data = (tmp_path / name).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 10_000


def test_markdown_report_has_table_warning_cost_and_plot_when_written(tmp_path: Path) -> None:
    run = dataclasses.replace(make_run(), steps=(make_step(1), make_step(4, stable=False)))
    run = run.with_cost(estimate_cost(run, sku="Standard_D4s_v5", budget=parse_budget("p99=50ms")))
    written = write_report(run, tmp_path / "report.md")
    assert written == [tmp_path / "report.md", tmp_path / "report.png"]
    text = (tmp_path / "report.md").read_text()
    assert "| level | infer/s |" in text
    assert "never stabilised" in text and "steps 4" in text
    assert "Standard_D4s_v5" in text and "per million inferences" in text
    assert "![throughput vs latency](report.png)" in text
    assert (tmp_path / "report.png").read_bytes().startswith(PNG_MAGIC)


def test_html_report_embeds_plot_and_escapes_text_when_written(tmp_path: Path) -> None:
    run = dataclasses.replace(make_run(), model="<m&m>")
    write_report(run, tmp_path / "r.html")
    text = (tmp_path / "r.html").read_text()
    assert "data:image/png;base64," in text
    assert "&lt;m&amp;m&gt;" in text and "<m&m>" not in text
    assert render_html(run, png=None).count("<tr>") == 1 + len(run.steps)
    assert "![" not in render_markdown(run, plot_file=None)


def test_write_report_raises_when_suffix_is_unknown(tmp_path: Path) -> None:
    with pytest.raises(PerfError, match=r"\.md or \.html"):
        write_report(make_run(), tmp_path / "r.pdf")


def test_cli_compare_prints_ratios_and_writes_json_and_plot_when_given_two_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_json(_scaled(1.0), tmp_path / "off.json")
    write_json(_scaled(6.0), tmp_path / "on.json")
    args = ["perf", "--compare", str(tmp_path / "off.json"), str(tmp_path / "on.json")]
    with pytest.raises(SystemExit) as exc:  # typer's standalone mode exits 0 on success
        main([*args, "--json", str(tmp_path / "cmp.json"), "--plot", str(tmp_path / "cmp.png")])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "6.00x" in out
    data = json.loads((tmp_path / "cmp.json").read_text())
    assert [s["throughput_ratio"] for s in data["steps"]] == pytest.approx([6.0, 6.0, 6.0])
    assert (tmp_path / "cmp.png").read_bytes().startswith(PNG_MAGIC)


def test_cli_exits_1_with_message_when_compare_file_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["perf", "--compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    assert exc.value.code == 1
    assert "no such file" in capsys.readouterr().err
