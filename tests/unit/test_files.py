"""Atomic writes keep the permissions a plain write would give (mkstemp alone makes 0600 files)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tritonkit._files import atomic_write_bytes
from tritonkit.config import ModelConfigSpec, write_config


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_new_file_gets_0644_under_umask_022_when_written_atomically(tmp_path: Path, umask_022: None) -> None:
    target = tmp_path / "a.txt"
    atomic_write_bytes(target, b"x")
    assert target.read_bytes() == b"x"
    assert _mode(target) == 0o644


def test_replaced_file_keeps_its_mode_when_rewritten(tmp_path: Path, umask_022: None) -> None:
    target = tmp_path / "a.txt"
    target.write_text("old")
    target.chmod(0o640)
    atomic_write_bytes(target, b"new")
    assert target.read_text() == "new"
    assert _mode(target) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]  # no temporary left behind


def test_config_pbtxt_is_readable_by_a_server_running_as_another_user(
    tmp_path: Path, umask_022: None
) -> None:
    config = ModelConfigSpec(name="m", backend="python").to_proto()
    path = write_config(config, tmp_path / "m" / "config.pbtxt")
    assert _mode(path) & stat.S_IROTH


def test_failed_write_leaves_the_old_file_and_no_temporary_when_the_data_cannot_be_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "a.txt"
    target.write_text("old")

    def boom(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="No space"):
        atomic_write_bytes(target, b"new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]
