"""The local server's twin of a packed environment, and the shadow repository that points at it.

pip runs for real, offline, against wheels the tests write (the image's numpy included).
"""

from __future__ import annotations

import sys
import tarfile
from pathlib import Path

import pytest

from tests._wheels import write_tag_probe_wheels, write_wheel
from tests.unit.test_repository_execution_env import write_spec
from tritonkit.config import read_config
from tritonkit.repository import build_spec
from tritonkit.repository.execution_env import TARGETS, read_metadata
from tritonkit.server._execution_env_twin import shadow_repository

LOCAL = f"cp{sys.version_info.major}{sys.version_info.minor}"


@pytest.fixture()
def built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    wheels = tmp_path / "wheels"
    write_tag_probe_wheels(wheels)
    pin = TARGETS["24.10"].numpy
    write_wheel(wheels, "numpy", pin, f"{LOCAL}-{LOCAL}-manylinux2014_x86_64", {"numpy/__init__.py": ""})
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv("TRITONKIT_CACHE_DIR", str(tmp_path / "cache"))
    repo = tmp_path / "repo"
    build_spec(write_spec(tmp_path), repo)
    return repo


def test_shadow_repository_points_configs_at_a_local_twin_when_env_is_for_another_python(
    built: Path, tmp_path: Path
) -> None:
    original = (built / "probe" / "config.pbtxt").read_bytes()
    served, (note,) = shadow_repository(built, tmp_path / "shadow")
    assert served != built and (note.target_python, note.requirements) == ("3.10", ("tkprobe",))
    for cfg in (served / "probe" / "config.pbtxt", served / "probe" / "configs" / "cpu.pbtxt"):
        assert read_config(cfg).parameters["EXECUTION_ENV_PATH"].string_value == str(note.twin)
    assert (served / "probe" / "1").resolve() == (built / "probe" / "1").resolve()
    assert (built / "probe" / "config.pbtxt").read_bytes() == original  # the user's repo is untouched
    meta = read_metadata(note.twin)
    assert meta is not None and meta["python"] == f"{sys.version_info.major}.{sys.version_info.minor}"
    with tarfile.open(note.twin) as tar:
        names = tar.getnames()
        site = f"lib/python{meta['python']}/site-packages"
        init = tar.extractfile(f"{site}/tkprobe/__init__.py")
        assert init is not None and LOCAL in init.read().decode()
        assert f"{site}/numpy/__init__.py" in names  # the image's numpy, packed for the twin only
        cfg = tar.extractfile("pyvenv.cfg")
        assert cfg is not None and b"include-system-site-packages = false" in cfg.read()


def test_shadow_repository_is_the_repository_itself_when_no_model_has_a_packed_env(tmp_path: Path) -> None:
    (tmp_path / "repo" / "m" / "1").mkdir(parents=True)
    (tmp_path / "repo" / "m" / "config.pbtxt").write_text('name: "m"\nbackend: "python"\n')
    assert shadow_repository(tmp_path / "repo", tmp_path / "shadow") == (tmp_path / "repo", [])
