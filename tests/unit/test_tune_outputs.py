"""Tuning outputs from a run over a synthetic surface (fake measurer: no server needed here;
the real-server path is covered in tests/integration/test_tune_server.py)."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest

from tritonkit.config import read_config
from tritonkit.errors import RepositoryError, TuneError
from tritonkit.perf.cost import LatencyBudget
from tritonkit.repository import validate_repository
from tritonkit.tune.checkpoint import checkpoint_header as _checkpoint_header
from tritonkit.tune.checkpoint import read_checkpoint as _read_checkpoint
from tritonkit.tune.objective import Objective
from tritonkit.tune.outputs import (
    apply_winner,
    explain,
    pareto_front,
    table_rows,
    variant_snippet,
    write_csv,
    write_json,
    write_outputs,
    write_report,
    write_variant,
)
from tritonkit.tune.runner import TuneResult
from tritonkit.tune.space import Dimension, Space
from tritonkit.tune.strategy import search

from .test_tune_space import DENSENET

M = "densenet_onnx"


class _Fake:
    """Throughput grows with instances and batching; p99 with concurrency."""

    def measure(self, settings, concurrency, *, confirm, bar=None):  # type: ignore[no-untyped-def]
        from tritonkit.tune.objective import Outcome

        k = settings[M]
        thr = 50.0 * k["instance_count"] * (1.3 if k["dynamic_batching"] else 1.0) * min(concurrency, 4) / 4
        lat = concurrency / thr * 1e6
        return Outcome(throughput=thr, latency_us={"avg": lat, "p99": lat * 1.4})


def _result(objective: Objective | None = None) -> TuneResult:
    space = Space(
        target=M,
        dimensions=(Dimension(M, "instance_count", (1, 2)), Dimension(M, "dynamic_batching", (False, True))),
        loads=(1, 4),
    )
    obj = objective or Objective()
    found = search(space, obj, _Fake(), strategy="grid")
    return TuneResult(
        model=M,
        url="http://127.0.0.1:8000",
        strategy="grid",
        objective=obj,
        space=space,
        search=found,
        base_configs={M: DENSENET},
        original_configs={M: DENSENET},
        wall_s=1.0,
        server_restarts=0,
        config_loads=4,
        restore_problems=(),
        started_at="2026-01-01T00:00:00+00:00",
        settings={},
    )


def _repo(tmp_path: Path) -> Path:
    from tritonkit.repository import build_spec

    repo = tmp_path / "repo"
    build_spec(Path(__file__).resolve().parents[2] / "ensembles" / "densenet.yaml", repo)
    return repo


def test_report_json_csv_and_table_cover_every_measurement(tmp_path: Path) -> None:
    r = _result()
    write_json(r, tmp_path / "t.json")
    write_csv(r, tmp_path / "t.csv")
    data = json.loads((tmp_path / "t.json").read_text())
    rows = list(csv.DictReader((tmp_path / "t.csv").open()))
    assert len(rows) == len(data["measurements"]) == len(table_rows(r)) == len(r.measurements)
    assert data["winner"]["settings"] == {f"{M}.instance_count": 2, f"{M}.dynamic_batching": True}
    assert any(row[-1] == "WINNER" for row in table_rows(r))


def test_report_says_why_the_winner_won_in_markdown_and_html(tmp_path: Path) -> None:
    r = _result()
    write_report(r, tmp_path / "r.md", plot="p.png")
    write_report(r, tmp_path / "r.html")
    md = (tmp_path / "r.md").read_text()
    assert "Why the winner won" in md and "Winner:" in md and "![Pareto plot](p.png)" in md
    assert "<h2>Why the winner won</h2>" in (tmp_path / "r.html").read_text()


def test_report_says_no_feasible_config_when_the_budget_is_unmeetable() -> None:
    r = _result(Objective(budget=LatencyBudget(stat="p99", limit_us=1.0)))
    assert r.winner is None
    assert any("No feasible config" in line for line in explain(r))
    with pytest.raises(TuneError, match="no feasible config"):
        r.winner_configs()


def test_pareto_front_keeps_only_undominated_points() -> None:
    r = _result()
    front = pareto_front(list(r.measurements))
    for m in front:
        assert not any(
            o.outcome.throughput > m.outcome.throughput
            and o.outcome.latency_us["p99"] < m.outcome.latency_us["p99"]
            for o in r.measurements
        )


def test_write_variant_writes_a_valid_servable_config_and_refuses_to_overwrite(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    r = _result()
    [path] = write_variant(r, repo, "tuned")
    assert path == repo / M / "configs" / "tuned.pbtxt"
    cfg = read_config(path)
    assert cfg.instance_group[0].count == 2 and cfg.HasField("dynamic_batching")
    assert validate_repository(repo, config_name="tuned").valid
    with pytest.raises(RepositoryError, match="exists"):
        write_variant(r, repo, "tuned")
    snippet = variant_snippet(r, "tuned")
    assert "variants:" in snippet and "tuned:" in snippet and "count: 2" in snippet


def test_apply_winner_keeps_the_old_config_as_a_variant(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    old = (repo / M / "config.pbtxt").read_text()
    [path] = apply_winner(_result(), repo, keep_as="before")
    assert (repo / M / "configs" / "before.pbtxt").read_text() == old
    assert read_config(path).instance_group[0].count == 2


def test_checkpoint_of_another_run_is_refused(tmp_path: Path) -> None:
    from tritonkit.tune.runner import TuneSettings

    r = _result()
    ckpt = tmp_path / "c.jsonl"
    header = _checkpoint_header(TuneSettings(model=M, repository=tmp_path), r.space, r.objective)
    ckpt.write_text(json.dumps(header) + "\n" + '{"type": "measurement"\n')
    assert _read_checkpoint(ckpt, header) == []  # a line cut by a crash is dropped
    other = dict(header, strategy="grid")
    with pytest.raises(TuneError, match="different run"):
        _read_checkpoint(ckpt, other)


def test_tune_cli_names_an_unknown_model_and_the_models_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tritonkit.cli.app import main

    repo = _repo(tmp_path)
    with pytest.raises(SystemExit) as done:
        main(["tune", str(repo), "nosuch", "--out", str(tmp_path / "out"), "--quiet"])
    assert done.value.code == 1
    err = capsys.readouterr().err
    assert "model 'nosuch' is not in" in err and "densenet_onnx" in err and "Traceback" not in err


def test_tune_cli_refuses_a_target_that_is_neither_a_repository_nor_a_url(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tritonkit.cli.app import main

    with pytest.raises(SystemExit) as done:
        main(["tune", str(tmp_path / "missing"), "m", "--quiet"])
    assert done.value.code == 1
    assert "neither a model repository directory nor an endpoint URL" in capsys.readouterr().err


def test_write_variant_of_an_ensemble_covers_every_composing_model(tmp_path: Path) -> None:
    from tritonkit.repository import build_spec
    from tritonkit.tune.objective import Outcome

    repo = tmp_path / "repo"
    build_spec(Path(__file__).resolve().parents[2] / "ensembles" / "arr_coc.yaml", repo)
    base = {"texture_array": read_config(repo / "texture_array" / "configs" / "cpu.pbtxt")}
    space = Space(
        target="arr_coc", dimensions=(Dimension("texture_array", "instance_count", (1, 2)),), loads=(1,)
    )

    class Ensemble:
        def measure(self, settings, concurrency, *, confirm, bar=None):  # type: ignore[no-untyped-def]
            thr = 10.0 * settings["texture_array"]["instance_count"]
            return Outcome(throughput=thr, latency_us={"p99": 1e6 / thr})

    found = search(space, Objective(), Ensemble(), strategy="grid")
    r = TuneResult(
        model="arr_coc",
        url="",
        strategy="grid",
        objective=Objective(),
        space=space,
        search=found,
        base_configs=base,
        original_configs=base,
        wall_s=0.0,
        server_restarts=0,
        config_loads=0,
        restore_problems=(),
        started_at="",
        settings={"model_config_name": "cpu"},
    )
    written = write_variant(r, repo, "tuned")
    assert read_config(repo / "texture_array" / "configs" / "tuned.pbtxt").instance_group[0].count == 2
    members = {p.parent.parent.name for p in written}
    assert {"texture_array", "propositional_scorer", "query_encoder"} <= members
    # the copies are the cpu variants the run was served with
    assert (repo / "query_encoder" / "configs" / "tuned.pbtxt").read_text() == (
        repo / "query_encoder" / "configs" / "cpu.pbtxt"
    ).read_text()
    assert validate_repository(repo, config_name="tuned").valid


def test_apply_winner_replaces_the_variant_the_run_was_served_with_not_config_pbtxt(tmp_path: Path) -> None:
    from dataclasses import replace

    repo = _repo(tmp_path)
    production = (repo / M / "config.pbtxt").read_text()
    cpu = repo / M / "configs" / "cpu.pbtxt"
    old_cpu = cpu.read_text()
    r = replace(_result(), source_files={M: cpu})
    assert apply_winner(r, repo, keep_as="before") == [cpu]
    assert (repo / M / "config.pbtxt").read_text() == production
    assert (repo / M / "configs" / "before.pbtxt").read_text() == old_cpu
    assert read_config(cpu).instance_group[0].count == 2
    assert validate_repository(repo).valid


def test_write_outputs_writes_results_plot_and_reports_into_the_directory(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")  # the plot extra; the core venv tests the case below
    written, plot_failure = write_outputs(_result(), tmp_path)
    assert plot_failure is None
    names = {p.name for p in written}
    assert names == {"tune.json", "tune.csv", "pareto.png", "report.md", "report.html"}
    assert all(p.is_file() for p in written)
    assert "pareto.png" in (tmp_path / "report.md").read_text()


def test_write_outputs_without_matplotlib_writes_the_rest_and_names_the_plot_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what a core install without [plot] sees
    written, plot_failure = write_outputs(_result(), tmp_path)
    assert plot_failure is not None and "pip install 'tritonkit[plot]'" in plot_failure
    assert {p.name for p in written} == {"tune.json", "tune.csv", "report.md", "report.html"}
    assert all(p.is_file() for p in written)
    assert not (tmp_path / "pareto.png").exists()
