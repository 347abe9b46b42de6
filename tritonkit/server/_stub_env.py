"""Refuse to serve Python stages into a Python environment the 2.51 backend stub cannot use.

Every Python stage (``backend: "python"`` and the Python-based backends tritonkit ships, whose
``model.py`` runs in the same stub) runs inside ``triton_python_backend_stub``. The stub ignores
``PYTHONPATH``: its embedded Python takes its packages from the ``python3`` first on the PATH the
server hands it, or from the venv a model names as ``EXECUTION_ENV_PATH`` (Triton sources its
``bin/activate``: the vLLM stages' engine venv, see _vllm). Three things in that environment
break every request while the server still says ready, so they are refused before it starts:

- numpy 2 (or none): the stub's pybind11 2.10 reads numpy 1's array layout. Measured: infer
  answered "output tensor shape does not match size of output" (CPU) and "cannot reshape array
  of size 0 into shape (1,1000)" (GPU box);
- a Python other than the one the stub was built for (nvidia-pytriton ships one stub per minor
  version; the server runs the one of the Python tritonkit runs in);
- no ``libpython3.X.so.1.0`` the loader can find (the stub links it by that name).

Each environment is probed once per start by running its ``python3`` (bounded by a timeout).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from tritonkit.config import read_config
from tritonkit.errors import ConfigParseError, StubEnvironmentError
from tritonkit.server._install import BACKENDS_SOURCE

logger = logging.getLogger(__name__)

#: seconds one probe may take (importing numpy on a busy 2-core box takes a few)
PROBE_TIMEOUT = 60.0
#: the Python backend parameter naming a model's environment (a directory or a packed archive)
ENV_PARAMETER = "EXECUTION_ENV_PATH"
_MODEL_DIR_VAR = "$$TRITON_MODEL_DIRECTORY"
#: what the stub's PATH python3 stands for in messages
DEFAULT_ENV = "the server's PATH"
_FIRST_BAD_NUMPY_MAJOR = 2  # pre-releases of 2.0 included
_SYSTEM_LIB_DIRS = ("/lib", "/usr/lib", "/lib64", "/usr/lib64", "/usr/local/lib")

_PROBE = """
import json, sys, sysconfig
try:
    import numpy
    numpy_version = str(numpy.__version__)
except Exception:
    numpy_version = None
print(json.dumps({
    "python": "%d.%d" % sys.version_info[:2],
    "prefix": sys.prefix,
    "numpy": numpy_version,
    "libdir": sysconfig.get_config_var("LIBDIR") or "",
    "soname": sysconfig.get_config_var("INSTSONAME") or "",
}))
"""


@dataclass(frozen=True)
class StubEnvironment:
    """What the probe found in one environment's ``python3``."""

    python3: Path
    python: str  # "3.11"
    prefix: str
    numpy: str | None
    libdir: str = ""
    soname: str = ""

    def own_library(self) -> Path | None:
        """This Python's shared libpython, when it has one."""
        if self.libdir and ".so" in self.soname:
            path = Path(self.libdir) / self.soname
            return path if path.is_file() else None
        return None


def python_backends() -> frozenset[str]:
    """Backend names whose models run in the Python backend stub."""
    shipped = {p.name for p in BACKENDS_SOURCE.iterdir() if (p / "model.py").is_file()}
    return frozenset({"python", *shipped})


def stage_environments(repository: Path, *, model_config_name: str | None = None) -> dict[str, list[str]]:
    """Environment -> the Python stages that run in it ("" is the PATH's ``python3``).

    An environment is a directory (a venv); packed ``.tar.gz`` environments are left out: the
    build pins their numpy to the image's.
    """
    backends = python_backends()
    found: dict[str, list[str]] = {}
    for model_dir in sorted(p for p in repository.iterdir() if p.is_dir() and not p.name.startswith(".")):
        cfg_path = model_dir / "config.pbtxt"
        if model_config_name and (model_dir / "configs" / f"{model_config_name}.pbtxt").is_file():
            cfg_path = model_dir / "configs" / f"{model_config_name}.pbtxt"
        if not cfg_path.is_file():
            continue
        try:
            cfg = read_config(cfg_path)
        except ConfigParseError:
            continue  # Triton reports it
        backend = cfg.backend or ("onnxruntime" if cfg.platform == "onnxruntime_onnx" else "")
        if backend not in backends:
            continue
        env = ""
        if ENV_PARAMETER in cfg.parameters:
            env = cfg.parameters[ENV_PARAMETER].string_value.replace(_MODEL_DIR_VAR, str(model_dir))
            if not Path(env).is_dir():
                continue
        found.setdefault(env, []).append(model_dir.name)
    return found


def probe(
    python3: Path, environment: Mapping[str, str], *, timeout: float = PROBE_TIMEOUT
) -> StubEnvironment | None:
    """Run ``python3`` once and read its version, numpy and libpython; None when it timed out."""
    env = {k: v for k, v in environment.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    try:
        result = subprocess.run(
            [str(python3), "-c", _PROBE], capture_output=True, env=env, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        logger.warning(
            "%s did not answer within %.0fs; its numpy and Python are not checked", python3, timeout
        )
        return None
    except OSError as exc:
        raise StubEnvironmentError(
            f"the Python backend stub's interpreter {python3} cannot run: {exc}",
            hint="repair or recreate that environment",
        ) from exc
    try:
        data = json.loads(result.stdout.decode(errors="replace").strip().splitlines()[-1])
    except (IndexError, ValueError):
        err = result.stderr.decode(errors="replace").strip()[-500:] or "no output"
        raise StubEnvironmentError(
            f"{python3} could not report its Python and numpy (exit {result.returncode}): {err}",
            hint="repair or recreate that environment",
        ) from None
    return StubEnvironment(
        python3=python3,
        python=str(data["python"]),
        prefix=str(data["prefix"]),
        numpy=data.get("numpy"),
        libdir=str(data.get("libdir") or ""),
        soname=str(data.get("soname") or ""),
    )


def find_library(name: str, search_path: Iterable[str]) -> Path | None:
    """Where the dynamic loader would find ``name``: the given directories, ld.so.cache, system dirs."""
    for directory in search_path:
        if directory and (Path(directory) / name).exists():
            return Path(directory) / name
    ldconfig = shutil.which("ldconfig") or shutil.which("ldconfig", path="/sbin:/usr/sbin")
    if ldconfig:
        try:
            out = subprocess.run([ldconfig, "-p"], capture_output=True, timeout=10, check=False).stdout
        except (OSError, subprocess.TimeoutExpired):
            out = b""
        for line in out.decode(errors="replace").splitlines():
            if line.strip().startswith(name + " ") and "=>" in line:
                return Path(line.split("=>", 1)[1].strip())
    for directory in _SYSTEM_LIB_DIRS:
        if (Path(directory) / name).exists():
            return Path(directory) / name
    return None


def problems(
    found: StubEnvironment, *, stub_python: str, stubs: Sequence[str], library: Path | None
) -> list[tuple[str, str]]:
    """(what is wrong, what to do) for one probed environment; empty when the stub can use it."""
    pip = f"{found.python3.parent / 'pip'} install 'numpy>=1.24,<2'"
    wrong: list[tuple[str, str]] = []
    if found.python != stub_python:
        has = f"nvidia-pytriton has a stub for {found.python}" if found.python in stubs else (
            f"nvidia-pytriton has no stub for Python {found.python} (it has {', '.join(stubs) or 'none'})"
        )
        wrong.append((
            f"its python3 is Python {found.python}, but the server runs the stub built for Python "
            f"{stub_python} (the Python tritonkit runs in); {has}",
            f"use an environment made from Python {stub_python}, or run tritonkit itself from a "
            f"Python {found.python} venv" if found.python in stubs else
            f"use an environment made from Python {stub_python}",
        ))
    if found.numpy is None:
        wrong.append(("it has no numpy (the stub imports it for every tensor)", pip))
    else:
        try:
            too_new = Version(found.numpy).major >= _FIRST_BAD_NUMPY_MAJOR
        except InvalidVersion:
            too_new = False
        if too_new:
            wrong.append((
                f"it has numpy {found.numpy}; the 2.51 stub (pybind11 2.10) reads numpy 1's array "
                "layout, so every tensor comes out wrong while the server says ready",
                f"{pip} (GPU images and torch installs bring numpy 2), or point at another environment",
            ))
    if library is None:
        own = found.own_library()
        wrong.append((
            f"the stub links libpython{stub_python}.so.1.0 and the loader finds none",
            f"put {own.parent} on LD_LIBRARY_PATH" if own is not None else
            f"use a Python {stub_python} built with --enable-shared "
            "(pyenv: PYTHON_CONFIGURE_OPTS=--enable-shared)",
        ))
    return wrong


def refuse_unusable_environments(
    repository: Path,
    environment: Mapping[str, str],
    *,
    stub_python: str,
    stubs: Sequence[str],
    model_config_name: str | None = None,
    timeout: float = PROBE_TIMEOUT,
) -> None:
    """Raise StubEnvironmentError when a Python stage's environment would serve broken answers."""
    envs = stage_environments(repository, model_config_name=model_config_name)
    if not envs:
        return
    library_name = f"libpython{stub_python}.so.1.0"
    library = find_library(library_name, environment.get("LD_LIBRARY_PATH", "").split(os.pathsep))
    messages: list[str] = []
    hints: list[str] = []
    for env, models in envs.items():
        if env:
            python3: Path | None = Path(env) / "bin" / "python3"
            where = env
        else:
            located = shutil.which("python3", path=environment.get("PATH", ""))
            python3 = Path(located) if located else None
            where = f"{located} (first python3 on {DEFAULT_ENV})"
        if python3 is None or not python3.exists():
            logger.debug("no python3 for the Python stages %s; not probed", models)
            continue
        found = probe(python3, environment, timeout=timeout)
        if found is None:
            continue
        own = found.own_library()
        if library is not None and own is not None and library.resolve() != own.resolve():
            logger.warning(
                "the stub for %s loads %s, not %s (the library of %s's Python): extension modules "
                "may fail with undefined symbols", ", ".join(models), library, own, python3,
            )
        for what, fix in problems(found, stub_python=stub_python, stubs=stubs, library=library):
            messages.append(f"{what} [environment {where}; models {', '.join(models)}]")
            if fix not in hints:
                hints.append(fix)
    if messages:
        raise StubEnvironmentError(
            "the Python backend stub cannot use its Python environment: " + "; ".join(messages),
            hint="; ".join(hints),
        )
