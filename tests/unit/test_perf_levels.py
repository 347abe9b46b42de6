"""The load grammar `tritonkit perf` and `tritonkit tune` share: levels and durations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tritonkit.cli.app import main
from tritonkit.errors import LoadError, PerfError, TuneError
from tritonkit.perf.levels import parse_duration, parse_levels


@pytest.mark.parametrize(
    ("text", "levels"),
    [
        ("32", (32.0,)),
        ("1,4,16", (1.0, 4.0, 16.0)),
        ("1:64", (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)),
        ("1:10", (1.0, 2.0, 4.0, 8.0, 10.0)),
        ("8:48", (8.0, 16.0, 32.0, 48.0)),
        ("5:5", (5.0,)),
        ("4:16:4", (4.0, 8.0, 12.0, 16.0)),
        ("1:64:8", (1.0, 9.0, 17.0, 25.0, 33.0, 41.0, 49.0, 57.0)),
    ],
)
def test_parse_levels_expands_one_a_list_doubling_and_steps_when_well_formed(
    text: str, levels: tuple[float, ...]
) -> None:
    assert parse_levels(text) == levels


def test_parse_levels_keeps_fractional_rates_when_mode_is_request_rate() -> None:
    assert parse_levels("0.5,2.5", mode="request_rate") == (0.5, 2.5)
    assert parse_levels("12.5", mode="request_rate") == (12.5,)


@pytest.mark.parametrize("text", ["", "abc", "a,b", "0", "-4", "8:4", "64:8", "1:2:3:4", "1.5", "2.5"])
def test_parse_levels_raises_a_perf_and_tune_error_naming_the_option_when_malformed(text: str) -> None:
    with pytest.raises(LoadError) as err:
        parse_levels(text)
    assert isinstance(err.value, PerfError) and isinstance(err.value, TuneError)
    assert "--concurrency" in err.value.message


def test_parse_levels_names_the_request_rate_option_when_mode_is_request_rate() -> None:
    with pytest.raises(LoadError, match="--request-rate"):
        parse_levels("fast", mode="request_rate")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("2", 2.0), ("2s", 2.0), ("500ms", 0.5), ("0", 0.0), ("10m", 600.0), ("1h", 3600.0), (" 90S ", 90.0)],
)
def test_parse_duration_reads_ms_s_m_h_when_well_formed(text: str, seconds: float) -> None:
    assert parse_duration(text, "--warmup") == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["soon", "-1s", "ms", "nan"])
def test_parse_duration_raises_naming_the_option_when_malformed(text: str) -> None:
    with pytest.raises(LoadError, match="--budget"):
        parse_duration(text, "--budget")


class _CapturedError(Exception):
    """Stops a command once it has built its settings (no server runs in a unit test)."""


def test_perf_and_tune_clis_read_the_same_levels_when_given_a_stepped_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--concurrency 1:64:8` means the same levels to both commands.

    The library entry points are replaced by stand-ins that record their settings and stop, so the
    test reads exactly what each CLI built from the flag without starting a server.
    """
    seen: dict[str, Any] = {}

    def fake_run_perf(settings: Any, **_: Any) -> Any:
        seen["perf"] = settings
        raise _CapturedError

    def fake_tune(settings: Any, **_: Any) -> Any:
        seen["tune"] = settings
        raise _CapturedError

    monkeypatch.setattr("tritonkit.cli.perf.benchmark", fake_run_perf)
    monkeypatch.setattr("tritonkit.cli.tune.tune_to_files", fake_tune)
    with pytest.raises(_CapturedError):
        main(["perf", "http://127.0.0.1:1", "m", "--concurrency", "1:64:8", "--quiet"])
    with pytest.raises(_CapturedError):
        main(["tune", str(tmp_path), "m", "--concurrency", "1:64:8", "--quiet", "--out", str(tmp_path / "o")])
    expected = (1, 9, 17, 25, 33, 41, 49, 57)
    assert seen["perf"].levels == expected
    assert seen["tune"].concurrency == expected
    assert seen["tune"].budget_s is None


def test_tune_cli_reads_a_budget_in_minutes_and_a_fractional_rate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As above, a stand-in for `tune` records the settings the CLI built."""
    seen: dict[str, Any] = {}

    def fake_tune(settings: Any, **_: Any) -> Any:
        seen["tune"] = settings
        raise _CapturedError

    monkeypatch.setattr("tritonkit.cli.tune.tune_to_files", fake_tune)
    with pytest.raises(_CapturedError):
        main(
            ["tune", str(tmp_path), "m", "--request-rate", "2.5,10", "--budget", "2m", "--quiet"]
            + ["--out", str(tmp_path / "o")]
        )
    assert seen["tune"].request_rate == (2.5, 10.0)
    assert seen["tune"].budget_s == 120.0


@pytest.mark.parametrize("command", ["perf", "tune"])
def test_clis_refuse_a_malformed_load_cleanly_in_both_commands(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = "http://127.0.0.1:1" if command == "perf" else str(tmp_path)
    with pytest.raises(SystemExit) as done:
        out_dir = ["--out", str(tmp_path / "o")] if command == "tune" else []
        main([command, target, "m", "--concurrency", "8:x", "--quiet", *out_dir])
    assert done.value.code == 1
    out = capsys.readouterr()
    text = out.out + out.err
    assert "--concurrency" in text and "Traceback" not in text
