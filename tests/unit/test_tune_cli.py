"""`tritonkit tune`'s load flags: how a production load is written on the command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonkit.cli.app import main


def test_tune_cli_refuses_both_load_kinds_cleanly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(
            ["tune", str(tmp_path), "m", "--concurrency", "8", "--request-rate", "10", "--quiet"]
            + ["--out", str(tmp_path / "out")]
        )
    assert done.value.code == 1
    out = capsys.readouterr()
    assert "not both" in out.out + out.err and "Traceback" not in out.out + out.err
