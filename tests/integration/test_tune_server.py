"""`tritonkit tune` against a real local tritonserver: tiny spaces, short windows (seconds)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tritonkit.cli.app import main
from tritonkit.config import config_to_dict
from tritonkit.errors import TuneError
from tritonkit.repository import build_spec
from tritonkit.tune import Dimension, Measurement, Space, TuneSettings, tune
from tritonkit.tune.control import ModelControl

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
MODEL = "densenet_onnx"
QUICK: dict[str, Any] = {
    "screen_window_ms": 200,
    "confirm_window_ms": 200,
    "max_trials": 3,
    "warmup_s": 0.1,
}


@pytest.fixture(scope="module")
def densenet_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("tune") / "repo"
    build_spec(ROOT / "ensembles" / "densenet.yaml", repo)
    return repo


@pytest.fixture(scope="module")
def explicit_server(densenet_repo: Path, triton_server_factory: Callable[..., Any]) -> Any:
    return triton_server_factory(
        densenet_repo, extra_args=["--model-control-mode=explicit", f"--load-model={MODEL}"]
    )


def _space(*dims: Dimension, concurrency: tuple[int, ...] = (2,)) -> Space:
    return Space(target=MODEL, dimensions=dims, loads=concurrency)


def _instances(server: Any) -> list[Any]:
    control = ModelControl(server.http_url)
    try:
        return list(config_to_dict(control.config(MODEL))["instance_group"])
    finally:
        control.close()


def test_tune_applies_candidates_through_the_load_api_and_restores_the_original(explicit_server: Any) -> None:
    before = _instances(explicit_server)
    pid = explicit_server.pid
    result = tune(
        TuneSettings(
            model=MODEL,
            url=explicit_server.http_url,
            repository=explicit_server.repository,
            space=_space(Dimension(MODEL, "instance_count", (1, 2))),
            strategy="grid",
            **QUICK,
        )
    )
    screened = [m for m in result.measurements if m.phase == "screen"]
    assert {m.settings[f"{MODEL}.instance_count"] for m in screened} == {1, 2}
    assert all(m.outcome.throughput > 0 and m.feasible for m in screened)
    assert result.winner is not None and result.winner.phase == "confirm"
    assert result.restore_problems == ()
    assert result.config_loads >= 2
    assert _instances(explicit_server) == before
    assert explicit_server.pid == pid and explicit_server.running


def test_tune_records_a_refused_candidate_and_keeps_serving_the_previous_config(explicit_server: Any) -> None:
    """KIND_GPU passes the static validator (it is legal) but this CPU-only server refuses it."""
    before = _instances(explicit_server)
    result = tune(
        TuneSettings(
            model=MODEL,
            url=explicit_server.http_url,
            repository=explicit_server.repository,
            space=_space(Dimension(MODEL, "instance_kind", ("KIND_CPU", "KIND_GPU"))),
            strategy="grid",
            **QUICK,
        )
    )
    refused = [m for m in result.measurements if m.outcome.failed]
    assert refused and all(m.settings[f"{MODEL}.instance_kind"] == "KIND_GPU" for m in refused)
    assert result.winner is not None and result.winner.settings[f"{MODEL}.instance_kind"] == "KIND_CPU"
    assert _instances(explicit_server) == before


def test_tune_restores_the_original_config_when_interrupted(explicit_server: Any) -> None:
    before = _instances(explicit_server)

    def interrupt(m: Measurement) -> None:
        if m.settings[f"{MODEL}.instance_count"] == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        tune(
            TuneSettings(
                model=MODEL,
                url=explicit_server.http_url,
                space=_space(Dimension(MODEL, "instance_count", (2, 1))),
                strategy="grid",
                **QUICK,
            ),
            progress=interrupt,
        )
    assert _instances(explicit_server) == before


def test_tune_says_an_endpoint_without_model_control_cannot_be_tuned(example_server: Any) -> None:
    with pytest.raises(TuneError, match="does not allow loading models"):
        tune(
            TuneSettings(
                model=MODEL,
                url=example_server.http_url,
                space=_space(Dimension(MODEL, "instance_count", (2,))),
                **QUICK,
            )
        )


def test_tune_cli_starts_a_local_server_writes_outputs_and_a_servable_variant(
    densenet_repo: Path, tmp_path: Path, triton_server_factory: Callable[..., Any], capsys: Any
) -> None:
    space = tmp_path / "space.yaml"
    space.write_text("defaults: false\nconcurrency: [2]\ndimensions:\n  instance_count: [1, 2]\n")
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as done:
        main(
            ["tune", str(densenet_repo), MODEL, "--space", str(space), "--out", str(out), "--quiet"]
            + [
                "--screen-window",
                "200ms",
                "--confirm-window",
                "200ms",
                "--max-trials",
                "3",
                "--warmup",
                "100ms",
            ]
            + ["--write-variant", "tuned", "--strategy", "grid"]
        )
    assert done.value.code in (0, None)
    printed = capsys.readouterr().out
    assert "variants:" in printed and "--model-config-name tuned" in printed
    data = json.loads((out / "tune.json").read_text())
    assert data["server_restarts"] == 0 and data["winner"] is not None
    assert (out / "tune.csv").read_text().count("\n") == len(data["measurements"]) + 1
    assert (out / "pareto.png").stat().st_size > 0
    assert "Why the winner won" in (out / "report.md").read_text()
    # where the time went: the real server's start, loads, warm-ups and windows, per phase
    spent = data["time_breakdown"]
    assert spent["server_start_s"] > 0 and spent["total_s"] == data["wall_s"]
    screen = next(p for p in spent["phases"] if p["phase"] == "screen")
    assert screen["measurements"] == sum(1 for m in data["measurements"] if m["phase"] == "screen")
    assert screen["load_s"] > 0 and screen["windows_s"] > 0 and screen["warmup_s"] > 0
    assert "Where the time went" in (out / "report.md").read_text() and "where the time went" in printed
    lines = (out / "checkpoint.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["type"] == "header" and len(lines) == len(data["measurements"]) + 1
    variant = densenet_repo / MODEL / "configs" / "tuned.pbtxt"
    assert variant.is_file()
    with pytest.raises(SystemExit) as validated:
        main(["validate", str(densenet_repo)])
    assert validated.value.code in (0, None)
    served = triton_server_factory(densenet_repo, model_config_name="tuned")
    control = ModelControl(served.http_url)
    try:
        applied = config_to_dict(control.config(MODEL))
    finally:
        control.close()
        served.stop()
    winner_count = data["winner"]["settings"][f"{MODEL}.instance_count"]
    assert applied["instance_group"][0]["count"] == winner_count


def test_tune_over_grpc_loads_the_override_and_restores(explicit_server: Any) -> None:
    before = _instances(explicit_server)
    result = tune(
        TuneSettings(
            model=MODEL,
            url=explicit_server.grpc_url,
            protocol="grpc",
            space=_space(Dimension(MODEL, "instance_count", (2,))),
            finalists=1,
            **QUICK,
        )
    )
    assert result.winner is not None and result.winner.settings[f"{MODEL}.instance_count"] == 2
    assert result.restore_problems == ()
    assert _instances(explicit_server) == before


def test_tune_of_an_ensemble_overrides_a_composing_model_and_measures_at_the_ensemble(
    example_repository: Path, triton_server_factory: Callable[..., Any], tmp_path: Path
) -> None:
    """Triton 2.51 keeps the ensemble READY while a composing model is reloaded with an override."""
    import numpy as np

    from tritonkit.perf.inputs import encode_image_png

    image = tmp_path / "image.png"
    image.write_bytes(
        encode_image_png(np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8))
    )
    server = triton_server_factory(
        example_repository, extra_args=["--model-control-mode=explicit", "--load-model=arr_coc"]
    )
    try:
        result = tune(
            TuneSettings(
                model="arr_coc",
                url=server.http_url,
                repository=example_repository,
                space=Space(
                    target="arr_coc",
                    dimensions=(Dimension("texture_array", "instance_count", (2,)),),
                    loads=(1,),
                ),
                input_data=str(image),
                finalists=1,
                **QUICK,
            )
        )
        assert result.winner is not None, [(m.phase, m.violation) for m in result.measurements]
        assert result.winner.outcome.throughput > 0
        assert result.winner.outcome.errors == 0 and result.restore_problems == ()
        control = ModelControl(server.http_url)
        try:
            assert control.is_ready("arr_coc")
            assert config_to_dict(control.config("texture_array"))["instance_group"][0]["count"] == 1
        finally:
            control.close()
    finally:
        server.stop()


def test_tune_resumes_from_its_checkpoint_without_measuring_again(
    explicit_server: Any, tmp_path: Path
) -> None:
    ckpt = tmp_path / "checkpoint.jsonl"
    settings = TuneSettings(
        model=MODEL,
        url=explicit_server.http_url,
        space=_space(Dimension(MODEL, "instance_count", (1, 2)), concurrency=(1, 2)),
        strategy="grid",
        checkpoint=ckpt,
        finalists=1,
        **QUICK,
    )
    from dataclasses import replace

    first = tune(replace(settings, max_measurements=3))
    screened = [m for m in first.measurements if m.phase == "screen"]
    assert first.search.stopped_by == "max-measurements" and len(screened) == 2
    second = tune(replace(settings, resume=True))
    assert [m.resumed for m in second.measurements if m.phase == "screen"] == [True, True, False, False]
    lines = ckpt.read_text().splitlines()
    assert len(lines) == 1 + len(first.measurements) + second.search.new_measurements


def test_tune_cli_at_a_production_concurrency_range_reports_the_answer_per_load(
    explicit_server: Any, tmp_path: Path, capsys: Any
) -> None:
    """The default (optuna) strategy judged at the peak of --concurrency 1:2, on the real server."""
    pytest.importorskip("optuna")
    space = tmp_path / "space.yaml"
    space.write_text("defaults: false\ndimensions:\n  instance_count: [1, 2]\n")
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as done:
        main(
            ["tune", explicit_server.http_url, MODEL, "--repository", str(explicit_server.repository)]
            + ["--space", str(space), "--out", str(out), "--quiet", "--concurrency", "1:2"]
            + ["--screen-window", "200ms", "--confirm-window", "200ms", "--max-trials", "3"]
            + ["--warmup", "100ms", "--latency-budget", "p99=30s"]
        )
    assert done.value.code in (0, None)
    data = json.loads((out / "tune.json").read_text())
    assert data["production_levels"] == [1.0, 2.0] and data["strategy"] == "default"
    assert {m["concurrency"] for m in data["measurements"]} <= {1.0, 2.0}
    assert data["winner"]["phase"] == "confirm" and data["winner"]["concurrency"] == 2.0
    assert data["recommended"]["meets_constraints_in_confirmation"] is True
    assert [row["level"] for row in data["per_level"]] == [1.0, 2.0]
    report = (out / "report.md").read_text()
    assert "Recommended for the production load (concurrency 1, 2)" in report
    assert "## Best config per load" in report and "Pareto front" in report
    assert data["server_restarts"] == 0 and data["restore_problems"] == []


def test_tune_at_a_production_request_rate_sends_that_rate(explicit_server: Any) -> None:
    result = tune(
        TuneSettings(
            model=MODEL,
            url=explicit_server.http_url,
            repository=explicit_server.repository,
            space=_space(Dimension(MODEL, "instance_count", (1,))),
            strategy="grid",
            request_rate=(8.0,),
            **QUICK,
        )
    )
    assert result.space.load_mode == "request_rate"
    assert result.winner is not None and result.winner.load == 8.0
    # an open-loop load the server keeps up with completes at the rate sent
    assert 5.0 <= result.winner.outcome.throughput <= 11.0
