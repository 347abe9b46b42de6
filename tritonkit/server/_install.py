"""Where the tritonserver binary lives, and the backend directory tritonkit prepares for it.

The binary comes from the ``nvidia-pytriton`` wheel. Its own backend directory holds only the
Python backend, and its stubs sit elsewhere; Triton refuses symlinked backend libraries
("backend library name escapes backend directory"), so tritonkit builds its own directory of
COPIES in a cache: ``python/`` (the backend library, its utils and the stub for the running
Python) and ``onnxruntime/model.py`` (a Python-based backend, so ``onnxruntime_onnx`` configs
load unchanged). Installed packages are never modified.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from tritonkit.errors import MissingExtraError, ServerError
from tritonkit.triton_side import BACKENDS_DIR

logger = logging.getLogger(__name__)

FEATURE = "tritonkit serve"

#: Python-based backends shipped with tritonkit (package data), by backend name.
BACKENDS_SOURCE = BACKENDS_DIR

_PYTHON_BACKEND_FILES = ("libtriton_python.so", "triton_python_backend_utils.py")
_STUB = "triton_python_backend_stub"


@dataclass(frozen=True)
class TritonInstallation:
    """The pieces of the ``nvidia-pytriton`` wheel that running tritonserver needs."""

    binary: Path
    libs: Path
    python_backend: Path
    stubs: Path
    caches: Path
    version: str

    def stub_for(self, python_version: str) -> Path:
        """The Python backend stub built for ``python_version`` ("3.11")."""
        return self.stubs / python_version / _STUB


def find_installation() -> TritonInstallation:
    """Locate tritonserver inside the installed ``pytriton`` package.

    Raises MissingExtraError (extra ``server``) when pytriton is not installed and ServerError
    when the package lacks a piece.
    """
    package_dir = _pytriton_dir()
    root = package_dir / "tritonserver"
    install = TritonInstallation(
        binary=root / "bin" / "tritonserver",
        libs=package_dir.parent / "nvidia_pytriton.libs",
        python_backend=root / "backends" / "python",
        stubs=root / "python_backend_stubs",
        caches=root / "caches",
        version=_distribution_version("nvidia-pytriton"),
    )
    missing = [
        str(path)
        for path in (install.binary, install.libs, install.python_backend, install.stubs)
        if not path.exists()
    ]
    if missing:
        raise ServerError(
            f"the nvidia-pytriton installation is incomplete: missing {', '.join(missing)}",
            hint="reinstall it: pip install --force-reinstall 'tritonkit[server]'",
        )
    return install


def _pytriton_dir() -> Path:
    """The installed ``pytriton`` package's directory, found without importing it.

    Importing pytriton runs its whole client stack (pyzmq, its proxy): only its files are needed
    here, and an offline install from wheels may lack those dependencies (seen on a GPU box).
    """
    try:
        spec = importlib.util.find_spec("pytriton")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtraError(package="nvidia-pytriton", extra="server", feature=FEATURE)
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def _distribution_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "unknown"


def running_python_version() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def default_cache_root() -> Path:
    """``$XDG_CACHE_HOME/tritonkit`` (``~/.cache/tritonkit`` when unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tritonkit"


def backend_directory_key(install: TritonInstallation, python_version: str) -> str:
    """Identifies one backend directory: pytriton version, Python version, our backend files."""
    digest = hashlib.sha256()
    for path in sorted(BACKENDS_SOURCE.rglob("*.py")):
        digest.update(str(path.relative_to(BACKENDS_SOURCE)).encode())
        digest.update(path.read_bytes())
    for name in _PYTHON_BACKEND_FILES:
        digest.update(name.encode())
        digest.update(str((install.python_backend / name).stat().st_size).encode())
    return f"pytriton{install.version}-py{python_version}-{digest.hexdigest()[:12]}"


def prepare_backend_directory(
    install: TritonInstallation | None = None,
    *,
    cache_root: Path | None = None,
    python_version: str | None = None,
) -> Path:
    """Return a ready backend directory for ``--backend-directory``, building it if needed.

    Built in a temporary sibling and renamed into place, so concurrent processes never see a
    half-written directory; when two race, the loser discards its copy and uses the winner's.
    """
    install = install or find_installation()
    python_version = python_version or running_python_version()
    stub = install.stub_for(python_version)
    if not stub.is_file():
        available = sorted(p.name for p in install.stubs.iterdir() if (p / _STUB).is_file())
        raise ServerError(
            f"nvidia-pytriton {install.version} ships no Python backend stub for Python "
            f"{python_version} (it has: {', '.join(available) or 'none'})",
            hint="run tritonkit from a Python version listed above",
        )
    root = (cache_root or default_cache_root()) / "backends"
    target = root / backend_directory_key(install, python_version)
    if _is_complete(target):
        return target
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=root))
    try:
        python_dir = staging / "python"
        python_dir.mkdir()
        for name in _PYTHON_BACKEND_FILES:
            shutil.copy2(install.python_backend / name, python_dir / name)
        shutil.copy2(stub, python_dir / _STUB)
        for backend in sorted(p for p in BACKENDS_SOURCE.iterdir() if (p / "model.py").is_file()):
            shutil.copytree(
                backend, staging / backend.name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
            )
        (staging / ".complete").write_text(f"{install.version} {python_version}\n")
        try:
            staging.rename(target)
        except OSError:
            # Another process renamed its copy first (target exists and is not empty).
            if not _is_complete(target):
                raise
    except OSError as exc:
        raise ServerError(
            f"could not prepare the Triton backend directory {target}: {exc}",
            hint="check that the cache directory is writable, or set XDG_CACHE_HOME",
        ) from exc
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    logger.debug("prepared backend directory %s", target)
    return target


def _is_complete(directory: Path) -> bool:
    return (directory / ".complete").is_file() and (directory / "python" / _STUB).is_file()
