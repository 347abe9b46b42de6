"""`tritonkit tune`'s load flags: how a production load is written on the command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonkit.cli.app import main
from tritonkit.cli.tune import parse_levels
from tritonkit.errors import TuneError


@pytest.mark.parametrize(
    ("text", "levels"),
    [
        ("32", (32.0,)),
        ("8,16,32", (8.0, 16.0, 32.0)),
        ("8:64", (8.0, 16.0, 32.0, 64.0)),
        ("8:48", (8.0, 16.0, 32.0, 48.0)),
        ("5:5", (5.0,)),
    ],
)
def test_parse_levels_reads_one_level_a_list_or_a_range(text: str, levels: tuple[float, ...]) -> None:
    assert parse_levels(text, "--concurrency", integral=True) == levels


def test_parse_levels_keeps_fractional_request_rates() -> None:
    assert parse_levels("12.5", "--request-rate", integral=False) == (12.5,)


@pytest.mark.parametrize("text", ["abc", "0", "-4", "64:8", "2.5", ""])
def test_parse_levels_refuses_what_is_not_a_load_and_shows_the_forms(text: str) -> None:
    with pytest.raises(TuneError) as err:
        parse_levels(text, "--concurrency", integral=True)
    assert "--concurrency" in err.value.message


def test_tune_cli_refuses_both_load_kinds_cleanly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(
            ["tune", str(tmp_path), "m", "--concurrency", "8", "--request-rate", "10", "--quiet"]
            + ["--out", str(tmp_path / "out")]
        )
    assert done.value.code == 1
    out = capsys.readouterr()
    assert "not both" in out.out + out.err and "Traceback" not in out.out + out.err
