"""Packed Python environments: target wheels, caching, atomic failures, secrets, EXECUTION_ENV_PATH.

pip runs for real, offline, against wheels the tests write (``PIP_NO_INDEX`` + ``PIP_FIND_LINKS``).
"""

from __future__ import annotations

import json
import os
import tarfile
import textwrap
from pathlib import Path

import pytest

from tests._wheels import write_tag_probe_wheels, write_wheel
from tritonkit.config import read_config
from tritonkit.errors import ModelImportError, RepositoryError, SpecError
from tritonkit.repository import build_spec
from tritonkit.repository.execution_env import (
    TARGETS,
    UNCONFIRMED_RELEASES,
    build_env,
    normalize_requirements,
    read_metadata,
    redact,
    resolve_target,
    target_recipe,
)
from tritonkit.repository.spec import load_spec

PROBE_MODEL = textwrap.dedent(
    """
    import json

    import numpy as np
    import tkprobe


    class TritonPythonModel:
        def execute(self, requests):
            return []
    """
)


@pytest.fixture()
def wheels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An offline package index (a --find-links directory) and a private cache directory."""
    directory = tmp_path / "wheels"
    write_tag_probe_wheels(directory)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(directory))
    monkeypatch.setenv("TRITONKIT_CACHE_DIR", str(tmp_path / "cache"))
    return directory


def write_spec(tmp_path: Path, *, requirements: str = "[tkprobe]", target: str = "24.10") -> Path:
    (tmp_path / "probe.py").write_text(PROBE_MODEL)
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        textwrap.dedent(
            f"""
            name: probe
            target: "{target}"
            models:
              - name: probe
                backend: python
                source: probe.py
                requirements: {requirements}
                max_batch_size: 0
                inputs: [{{name: X, data_type: FP32, dims: [1]}}]
                outputs: [{{name: Y, data_type: FP32, dims: [1]}}]
                variants:
                  cpu:
                    instance_group: [{{kind: KIND_CPU, count: 1}}]
                    parameters: {{OTHER: "1"}}
            """
        )
    )
    return spec


def archive_of(model_dir: Path) -> Path:
    (archive,) = model_dir.glob("pyenv-*.tar.gz")
    return archive


def members(archive: Path) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(archive) as tar:
        return {m.name: m for m in tar.getmembers()}


def read_member(archive: Path, name: str) -> str:
    with tarfile.open(archive) as tar:
        handle = tar.extractfile(name)
        assert handle is not None
        return handle.read().decode()


# ----------------------------------------------------------------------------- archives


@pytest.mark.parametrize(("release", "abi"), [("24.10", "cp310"), ("24.12", "cp312"), ("25.01", "cp312")])
def test_build_env_packs_the_targets_wheels_when_the_build_python_differs(
    wheels: Path, tmp_path: Path, release: str, abi: str
) -> None:
    env = build_env(target_recipe(("tkprobe",), TARGETS[release]), cache_dir=tmp_path / "c")
    python = TARGETS[release].python
    names = members(env.path)
    site = f"lib/python{python}/site-packages"
    assert (
        read_member(env.path, f"{site}/tkprobe/__init__.py") == f'TAG = "{abi}-{abi}-manylinux2014_x86_64"\n'
    )
    assert f"Tag: {abi}-{abi}-manylinux2014_x86_64" in read_member(
        env.path, f"{site}/tkprobe-1.0.dist-info/WHEEL"
    )
    # What Triton's stub launcher needs: bin/activate to source, and a venv for the image's python3.
    assert names["bin/python3"].issym() and names["bin/python3"].linkname == "/usr/bin/python3"
    assert "include-system-site-packages = true" in read_member(env.path, "pyvenv.cfg")
    assert "VIRTUAL_ENV/bin:$PATH" in read_member(env.path, "bin/activate")
    meta = read_metadata(env.path)
    assert meta is not None and meta["python"] == python and meta["modules"] == ["tkprobe"]


def test_build_env_reuses_the_cached_archive_when_requirements_are_unchanged(
    wheels: Path, tmp_path: Path
) -> None:
    recipe = target_recipe(normalize_requirements(["TKProbe"], where="t"), TARGETS["24.10"])
    first = build_env(recipe, cache_dir=tmp_path / "c")
    stamp = first.path.stat().st_mtime_ns
    again = build_env(target_recipe(("tkprobe",), TARGETS["24.10"]), cache_dir=tmp_path / "c")
    assert (first.cached, again.cached) == (False, True)
    assert again.path == first.path and again.path.stat().st_mtime_ns == stamp


def test_build_writes_env_once_and_links_it_when_rebuilt_unchanged(wheels: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path)
    repo = tmp_path / "repo"
    build_spec(spec, repo)
    archive = archive_of(repo / "probe")
    cfg = read_config(repo / "probe" / "config.pbtxt")
    assert cfg.parameters["EXECUTION_ENV_PATH"].string_value == f"$$TRITON_MODEL_DIRECTORY/{archive.name}"
    variant = read_config(repo / "probe" / "configs" / "cpu.pbtxt")
    assert variant.parameters["EXECUTION_ENV_PATH"].string_value == f"$$TRITON_MODEL_DIRECTORY/{archive.name}"
    assert variant.parameters["OTHER"].string_value == "1"
    cached = tmp_path / "cache" / "pyenvs" / archive.name
    build_spec(spec, repo, force=True)
    rebuilt = archive_of(repo / "probe")
    # A hard link to the cache: nothing new was copied or packed.
    assert rebuilt.stat().st_ino == cached.stat().st_ino
    assert len(list((tmp_path / "cache" / "pyenvs").glob("*.tar.gz"))) == 1


def test_build_fails_with_pips_reason_and_changes_nothing_when_a_requirement_cannot_resolve(
    wheels: Path, tmp_path: Path
) -> None:
    spec = write_spec(tmp_path)
    repo = tmp_path / "repo"
    build_spec(spec, repo)
    before = {p: p.read_bytes() for p in repo.rglob("*") if p.is_file()}
    write_spec(tmp_path, requirements="[tkprobe==9.9]")
    with pytest.raises(RepositoryError) as info:
        build_spec(spec, repo, force=True)
    assert "tkprobe==9.9" in info.value.message and "pip says" in info.value.message
    assert "No matching distribution" in info.value.message or "from versions" in info.value.message
    assert {p: p.read_bytes() for p in repo.rglob("*") if p.is_file()} == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tritonkit-tmp")] == []
    assert [p.name for p in (tmp_path / "cache" / "pyenvs").iterdir() if p.name.startswith(".build")] == []


def test_build_keeps_index_credentials_out_of_errors_and_repository_when_index_is_private(
    wheels: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "s3cr3t-t0ken"
    monkeypatch.delenv("PIP_NO_INDEX")
    monkeypatch.setenv("PIP_INDEX_URL", f"http://deploy:{secret}@127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "2")
    caplog.set_level("DEBUG")
    spec = write_spec(tmp_path, requirements="[tkprobe, tk-absent-package]")
    with pytest.raises(RepositoryError) as info:
        build_spec(spec, tmp_path / "repo")
    assert secret not in str(info.value) and secret not in caplog.text
    write_spec(tmp_path)  # resolvable from the find-links directory despite the dead index
    build_spec(spec, tmp_path / "repo")
    for path in (tmp_path / "repo").rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    assert secret not in json.dumps(read_metadata(archive_of(tmp_path / "repo" / "probe")))
    assert secret not in caplog.text


def test_redact_hides_user_and_password_when_urls_carry_them() -> None:
    text = "Looking in indexes: https://bob:hunter2@pkgs.example.com/simple and http://tok@x.io/s"
    assert redact(text) == "Looking in indexes: https://****@pkgs.example.com/simple and http://****@x.io/s"


# ----------------------------------------------------------------------------- spec


def test_normalize_requirements_gives_one_key_when_order_and_case_differ() -> None:
    a = normalize_requirements(["Pillow>=10", "tk_probe"], where="t")
    b = normalize_requirements(["tk-probe", "pillow >= 10"], where="t")
    assert a == b == ("pillow>=10", "tk-probe")
    assert target_recipe(a, TARGETS["24.10"]).key == target_recipe(b, TARGETS["24.10"]).key


@pytest.mark.parametrize(
    ("requirements", "fragment"),
    [
        ("pillow>=10", "must be a list"),
        ("['pillow>>10']", "is not valid"),
        ("['tk @ https://u:p@h/x.whl']", "points at a URL"),
        ("['pillow>=10', 'Pillow<9']", "required twice"),
    ],
)
def test_load_spec_refuses_requirements_when_they_are_malformed(
    tmp_path: Path, requirements: str, fragment: str
) -> None:
    with pytest.raises(SpecError, match=fragment) as info:
        load_spec(write_spec(tmp_path, requirements=requirements))
    assert ":p@" not in str(info.value)


def test_load_spec_refuses_target_when_release_is_unknown(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"(?s)unknown Triton release '19.01'.*24.10"):
        load_spec(write_spec(tmp_path, target="19.01"))


def test_load_spec_refuses_requirements_when_model_is_not_python(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "name: s\nmodels:\n  - {name: m, platform: onnxruntime_onnx, source: m.onnx, requirements: [x]}\n"
    )
    with pytest.raises(SpecError, match="only for Python-backend models"):
        load_spec(spec)


def test_load_spec_merges_spec_and_model_requirements_when_both_are_given(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, requirements="[tkprobe]")
    spec.write_text(
        spec.read_text().replace('target: "24.10"', 'target: "24.10"\nrequirements: [Pillow>=10]')
    )
    (entry,) = load_spec(spec).models
    assert entry.requirements == ("pillow>=10", "tkprobe") and entry.target == "24.10"


# ----------------------------------------------------------------------------- import check at build


def test_build_refuses_python_model_when_an_import_is_not_packed(wheels: Path, tmp_path: Path) -> None:
    write_wheel(wheels, "tkother", "1.0", "py3-none-any", {"tkother/__init__.py": ""})
    spec = write_spec(tmp_path, requirements="[tkother]")
    with pytest.raises(ModelImportError) as info:
        build_spec(spec, tmp_path / "repo")
    assert f"{tmp_path / 'probe.py'}:5:" in info.value.message and "'tkprobe'" in info.value.message
    assert "requirements" in (info.value.hint or "")
    assert not (tmp_path / "repo").exists()


def test_build_packs_no_numpy_when_a_requirement_depends_on_the_images_numpy(
    wheels: Path, tmp_path: Path
) -> None:
    """numpy is pinned to the image's version while resolving, then left to the image."""
    pin = TARGETS["24.10"].numpy
    write_wheel(wheels, "numpy", pin, "cp310-cp310-manylinux2014_x86_64", {"numpy/__init__.py": ""})
    write_wheel(wheels, "numpy", "2.1.0", "cp310-cp310-manylinux2014_x86_64", {"numpy/__init__.py": ""})
    (wheels / "tkneeds-1.0-py3-none-any.whl").unlink(missing_ok=True)
    wheel = write_wheel(wheels, "tkneeds", "1.0", "py3-none-any", {"tkneeds/__init__.py": ""})
    _add_requires(wheel, "numpy>=1.20")
    env = build_env(target_recipe(("tkneeds",), TARGETS["24.10"]), cache_dir=tmp_path / "c")
    names = members(env.path)
    assert not any("/numpy" in n for n in names)
    assert read_metadata(env.path)["modules"] == ["tkneeds"]  # type: ignore[index]


def _add_requires(wheel: Path, requirement: str) -> None:
    import zipfile

    tmp = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tmp, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename.endswith("METADATA"):
                data += f"Requires-Dist: {requirement}\n".encode()
            dst.writestr(item, data)
    os.replace(tmp, wheel)


# ----------------------------------------------------------------------------- the release table


def test_every_release_row_names_its_sources() -> None:
    for release, row in TARGETS.items():
        assert f"rel-{release.replace('.', '-')}.html" in row.source, release  # its release notes
        assert "compatibility.md" in row.source or "release_notes.html" in row.source, release
        assert "glibc" in row.source and "numpy" in row.source, release
        assert set(row.unconfirmed) <= {"triton", "numpy"}, release  # Python is never assumed


def test_release_24_12_is_ubuntu_24_04_with_python_3_12_as_its_release_notes_say() -> None:
    row = TARGETS["24.12"]
    assert (row.python, row.glibc, row.triton) == ("3.12", (2, 39), "2.53.0")
    assert "Ubuntu 24.04 including Python 3.12" in row.source


def test_release_rows_pair_each_python_with_its_ubuntus_glibc_and_number_triton_monthly() -> None:
    assert {(row.python, row.glibc) for row in TARGETS.values()} == {("3.10", (2, 35)), ("3.12", (2, 39))}
    assert [r for r, row in TARGETS.items() if row.python == "3.10"] == [
        "24.05", "24.06", "24.07", "24.08", "24.09", "24.10",
    ]  # fmt: skip
    for release, row in TARGETS.items():
        year, month = (int(x) for x in release.split("."))
        assert row.triton == f"2.{46 + (year - 24) * 12 + (month - 5)}.0", release
    assert max(TARGETS) >= "26.08"


def test_resolve_target_refuses_a_release_whose_python_the_sources_disagree_on() -> None:
    assert "24.11" in UNCONFIRMED_RELEASES and "24.11" not in TARGETS
    with pytest.raises(SpecError, match="not offered") as info:
        resolve_target("24.11", where="spec.yaml: target")
    assert "python3 --version" in (info.value.hint or "")
