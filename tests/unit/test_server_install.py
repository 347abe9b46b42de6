"""The backend directory tritonkit prepares next to the nvidia-pytriton binary (real wheel files)."""

from __future__ import annotations

import filecmp
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tritonkit.errors import MissingExtraError, ServerError
from tritonkit.server import find_installation, prepare_backend_directory
from tritonkit.server._install import BACKENDS_SOURCE, backend_directory_key, running_python_version

pytest.importorskip("pytriton")


def test_find_installation_locates_binary_libraries_and_stub_when_pytriton_is_installed() -> None:
    install = find_installation()
    assert install.binary.is_file() and install.binary.name == "tritonserver"
    assert install.libs.is_dir() and install.libs.name == "nvidia_pytriton.libs"
    assert (install.python_backend / "libtriton_python.so").is_file()
    assert install.stub_for(running_python_version()).is_file()
    assert install.version != "unknown"


def test_find_installation_names_the_server_extra_when_pytriton_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "pytriton", None)  # makes `import pytriton` raise ImportError
    with pytest.raises(MissingExtraError) as caught:
        find_installation()
    assert caught.value.extra == "server"
    assert "tritonkit[server]" in str(caught.value)


def test_find_installation_does_not_import_pytriton_whose_own_dependencies_are_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Seen on an offline GPU box: nvidia-pytriton installed from its wheel without pyzmq, whose
    # package __init__ imports it. Only the wheel's files are needed to run tritonserver.
    site = tmp_path / "site"
    package = site / "pytriton"
    (package / "tritonserver" / "bin").mkdir(parents=True)
    (package / "tritonserver" / "bin" / "tritonserver").write_bytes(b"")
    (package / "tritonserver" / "backends" / "python").mkdir(parents=True)
    (package / "tritonserver" / "python_backend_stubs").mkdir()
    (site / "nvidia_pytriton.libs").mkdir()
    (package / "__init__.py").write_text("import zmq  # pyzmq is not installed\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "pytriton", raising=False)
    install = find_installation()
    assert install.binary == (package / "tritonserver" / "bin" / "tritonserver").resolve()
    assert install.libs == (site / "nvidia_pytriton.libs").resolve()
    assert "pytriton" not in sys.modules


def test_prepare_backend_directory_copies_backends_when_the_cache_is_empty(tmp_path: Path) -> None:
    install = find_installation()
    directory = prepare_backend_directory(install, cache_root=tmp_path)
    assert directory.parent == tmp_path / "backends"
    for name in ("libtriton_python.so", "triton_python_backend_utils.py", "triton_python_backend_stub"):
        path = directory / "python" / name
        assert path.is_file() and not path.is_symlink(), name  # Triton refuses symlinked backends
    library = "libtriton_python.so"
    assert filecmp.cmp(directory / "python" / library, install.python_backend / library, shallow=False)
    assert filecmp.cmp(
        directory / "onnxruntime" / "model.py", BACKENDS_SOURCE / "onnxruntime" / "model.py", shallow=False
    )
    assert (directory / "python" / "triton_python_backend_stub").stat().st_mode & 0o111


def test_prepare_backend_directory_reuses_the_same_directory_when_called_again(tmp_path: Path) -> None:
    first = prepare_backend_directory(cache_root=tmp_path)
    stamp = (first / "python" / "libtriton_python.so").stat().st_mtime_ns
    second = prepare_backend_directory(cache_root=tmp_path)
    assert second == first
    assert (second / "python" / "libtriton_python.so").stat().st_mtime_ns == stamp
    assert sorted(p.name for p in (tmp_path / "backends").iterdir()) == [first.name]


def test_prepare_backend_directory_yields_one_complete_directory_when_callers_race(tmp_path: Path) -> None:
    barrier = threading.Barrier(4)

    def prepare() -> Path:
        barrier.wait()
        return prepare_backend_directory(cache_root=tmp_path)

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: prepare(), range(4)))
    assert len(set(results)) == 1
    assert sorted(p.name for p in (tmp_path / "backends").iterdir()) == [results[0].name]  # no staging left
    assert (results[0] / "python" / "triton_python_backend_stub").is_file()


def test_backend_directory_key_changes_when_the_python_version_differs() -> None:
    install = find_installation()
    key = backend_directory_key(install, "3.11")
    assert key != backend_directory_key(install, "3.12")
    assert install.version in key


def test_prepare_backend_directory_lists_available_stubs_when_the_python_version_has_none(
    tmp_path: Path,
) -> None:
    with pytest.raises(ServerError) as caught:
        prepare_backend_directory(cache_root=tmp_path, python_version="2.7")
    assert "Python 2.7" in str(caught.value)
    assert running_python_version() in str(caught.value)
    assert not (tmp_path / "backends").exists()
