"""LocalTritonServer: a real tritonserver process, started, watched and stopped from Python."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tritonkit.errors import ModelLoadError, RepositoryError, ServerError
from tritonkit.server import _execution_env_twin, _logs, _shm, _stub_env, _vllm
from tritonkit.server._base import ServingOptions, TritonServerBase
from tritonkit.server._install import (
    TritonInstallation,
    find_installation,
    prepare_backend_directory,
    running_python_version,
)
from tritonkit.server._trtllm import refuse_unservable_trtllm

if TYPE_CHECKING:
    from typing_extensions import Unpack

logger = logging.getLogger(__name__)

DEFAULT_STARTUP_TIMEOUT = 180.0
DEFAULT_STOP_GRACE = 20.0
#: Triton waits this long for open client connections and in-flight requests on SIGINT (its own
#: default, 30 s, makes every stop slow while any client keeps a keep-alive connection).
DEFAULT_EXIT_TIMEOUT_SECS = 5
_PORT_ATTEMPTS = 4
_PR_SET_PDEATHSIG = 1


def gpu_present() -> bool:
    """True when an NVIDIA GPU is visible: a /dev/nvidia<N> device or a working ``nvidia-smi``.

    ``CUDA_VISIBLE_DEVICES`` set to "" or "-1" hides every GPU, as it does for CUDA itself.
    """
    if os.environ.get("CUDA_VISIBLE_DEVICES", "unset").strip() in ("", "-1"):
        return False
    if any(p.name[len("nvidia") :].isdigit() for p in Path("/dev").glob("nvidia[0-9]*")):
        return True
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    try:
        result = subprocess.run([smi, "-L"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0 and b"GPU" in result.stdout


def resolve_model_config_name(name: str | None) -> str | None:
    """``"auto"`` -> ``"cpu"`` without a GPU, else None (each model's config.pbtxt)."""
    if name == "auto":
        return None if gpu_present() else "cpu"
    return name or None


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS reports free right now (another process may still take it: callers retry)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _connect_host(host: str) -> str:
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        return "::1"
    return host


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _load_libc() -> Any:
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:  # pragma: no cover - not glibc/Linux
        return None


# Loaded once here, not in the child: dlopen between fork and exec can deadlock in a
# multi-threaded parent.
_LIBC = _load_libc()


def _die_with_parent_of(parent_pid: int) -> Callable[[], None] | None:
    """A preexec_fn asking the kernel to SIGKILL the server when the thread that started it dies."""
    if _LIBC is None or not hasattr(_LIBC, "prctl"):
        return None  # pragma: no cover

    def preexec() -> None:  # pragma: no cover - runs in the child between fork and exec
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


#: servers started by this process, stopped at interpreter exit (a safety net behind stop())
_RUNNING: weakref.WeakSet[LocalTritonServer] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:  # pragma: no cover - runs at interpreter exit
    for server in list(_RUNNING):
        with contextlib.suppress(Exception):
            server._kill()


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _port_in_use(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


class LocalTritonServer(TritonServerBase):
    """A real ``tritonserver`` from the ``nvidia-pytriton`` wheel, serving ``repository``.

    Use as a context manager (or ``start()``/``stop()``). Ports are chosen (or picked free) at
    the first start and kept by ``restart()``. Every model in the repository is loaded at
    start-up; a model Triton refuses raises ModelLoadError with Triton's own reason.
    """

    def __init__(
        self,
        repository: str | Path,
        *,
        host: str = "127.0.0.1",
        strict_readiness: bool | None = None,
        exit_timeout_secs: int | None = DEFAULT_EXIT_TIMEOUT_SECS,
        log_verbose: int = 0,
        extra_args: Sequence[str] = (),
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
        stop_grace: float = DEFAULT_STOP_GRACE,
        log_file: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        installation: TritonInstallation | None = None,
        backend_directory: str | Path | None = None,
        llm_env: str | Path | None = None,
        on_progress: Callable[[str], None] | None = None,
        **serving: Unpack[ServingOptions],
    ) -> None:
        self.repository = Path(repository).resolve()
        self.host = host
        self._ports: dict[str, int] = {}
        self._take_serving_options(serving, resolve_model_config_name)
        self._strict_readiness = strict_readiness
        self._exit_timeout_secs = exit_timeout_secs
        self._log_verbose = log_verbose
        self.extra_args = tuple(extra_args)
        self.startup_timeout = startup_timeout
        self.stop_grace = stop_grace
        self._log_path_requested = Path(log_file) if log_file is not None else None
        self._env_extra = dict(env or {})
        self._installation = installation
        self._backend_directory = Path(backend_directory) if backend_directory is not None else None
        self._process: subprocess.Popen[bytes] | None = None
        self._log_handle: Any = None
        self._log_path: Path | None = None
        self._tmpdir: Path | None = None
        self._past_logs: list[str] = []
        self._shm_prefix: str | None = None
        self._ipc_dir: Path | None = None
        self._shadow_dir: Path | None = None
        self._served_repository: Path | None = None
        #: models served through a local twin of their packed Python environment (see _execution_env_twin)
        self.python_env_twins: list[_execution_env_twin.TwinNote] = []
        self._llm_env_requested = llm_env
        #: the venv running the vLLM stages' engines, when the repository has any (see _vllm)
        self.llm_env: _vllm.LlmEnv | None = None
        #: called with each start-up progress line a backend logs (the vLLM engines' start)
        self._on_progress = on_progress
        self._log_offset = 0

    # -- addresses ------------------------------------------------------------------------

    def _client_host(self) -> str:
        return _bracket(_connect_host(self.host))

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        ports = ", ".join(f"{k}={v}" for k, v in self._ports.items())
        return f"LocalTritonServer({str(self.repository)!r}, {state}{', ' + ports if ports else ''})"

    # -- command line ---------------------------------------------------------------------

    def command(self, backend_directory: Path, installation: TritonInstallation) -> list[str]:
        """The tritonserver command line (holds restricted-API secrets: never log it unredacted)."""
        args = [
            str(installation.binary),
            f"--model-repository={self._served_repository or self.repository}",
            f"--backend-directory={backend_directory}",
            f"--cache-directory={installation.caches}",
            f"--http-address={self.host}",
            f"--http-port={self._ports['http']}",
            f"--grpc-address={self.host}",
            f"--grpc-port={self._ports['grpc']}",
            f"--metrics-address={self.host}",
            f"--metrics-port={self._ports['metrics']}",
            # Report every broken model (through the repository index) instead of exiting on the first.
            "--exit-on-error=false",
            f"--log-verbose={self._log_verbose}",
        ]
        args += self._serving_flags()
        if self._strict_readiness is not None:
            args.append(f"--strict-readiness={str(self._strict_readiness).lower()}")
        if self._exit_timeout_secs is not None:
            args.append(f"--exit-timeout-secs={self._exit_timeout_secs}")
        if self._shm_prefix:
            args += _shm.backend_config_args(self._shm_prefix)
        args += self.extra_args
        return args

    def environment(self, installation: TritonInstallation) -> dict[str, str]:
        """The server's environment: the wheel's libraries, this Python's bin first on PATH."""
        env = dict(os.environ)
        libs = str(installation.libs)
        env["LD_LIBRARY_PATH"] = f"{libs}:{env['LD_LIBRARY_PATH']}" if env.get("LD_LIBRARY_PATH") else libs
        # The stub loads the first libpython3.X.so the loader finds: make it the one of the Python
        # whose standard library the stub's venv uses (another patch release fails on symbols).
        python_libs = _vllm.python_library_dirs(self.llm_env)
        if python_libs:
            env["LD_LIBRARY_PATH"] = ":".join([libs, *python_libs, *env["LD_LIBRARY_PATH"].split(":")[1:]])
        # The Python backend stub runs `python` modules (numpy, the model's imports) from PATH.
        bin_dir = str(Path(sys.executable).parent)
        env["PATH"] = f"{bin_dir}:{env['PATH']}" if env.get("PATH") else bin_dir
        env.update(_vllm.utf8_locale(env))
        env.update(self._env_extra)
        return env

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> LocalTritonServer:
        """Start the server and wait until it answers; raise ModelLoadError for a refused model."""
        if self.running:
            return self
        if not self.repository.is_dir():
            raise RepositoryError(
                f"model repository not found: {self.repository}",
                hint="build one with `tritonkit build SPEC -o DIR` or pass an existing directory",
            )
        refuse_unservable_trtllm(self.repository, gpu=gpu_present(), image=None)
        installation = self._installation or find_installation()
        backend_directory = self._backend_directory or prepare_backend_directory(installation)
        self._prepare_python_envs()
        self._refuse_unusable_stub_envs(installation)
        self._check_chosen_ports()
        _shm.sweep_stale_regions()
        # Triton binds its ports only after loading every model, so a clash costs a full start:
        # retry with fresh free ports when they were ours to pick; a user's port clash is final.
        own_ports = all(port is None for port in self._requested_ports.values())
        restarting = bool(self._ports)  # restart() keeps the ports it had, even on a clash
        attempts = _PORT_ATTEMPTS if own_ports or restarting else 1
        for attempt in range(1, attempts + 1):
            self._choose_ports()
            try:
                self._launch(installation, backend_directory)
                self._wait_until_ready()
                return self
            except _AddressInUseError as clash:
                self._kill()
                if attempt == attempts:
                    raise ServerError(
                        f"tritonserver could not bind its ports: {clash.detail}",
                        log_tail=clash.log_tail,
                        hint="choose other --http-port/--grpc-port/--metrics-port values",
                    ) from None
                logger.info("port clash (attempt %d), retrying", attempt)
                if not restarting:
                    self._ports.clear()
                time.sleep(0.5 * attempt)
            except BaseException:
                self.stop()
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _prepare_python_envs(self) -> None:
        """Serve packed environments through local twins (a shadow repository) when needed.

        vLLM stages run in the ``llm`` venv (see _vllm): their configs get it as environment.
        """
        self._drop_shadow()
        vllm_configs = _vllm.vllm_config_files(self.repository)
        environments: dict[Path, str] = {}
        if vllm_configs:
            self.llm_env = _vllm.find_llm_env(self._llm_env_requested)
            environments = _vllm.env_rewrites(vllm_configs, self.llm_env)
            if self.startup_timeout == DEFAULT_STARTUP_TIMEOUT:
                self.startup_timeout = _vllm.VLLM_STARTUP_TIMEOUT
            if self._exit_timeout_secs == DEFAULT_EXIT_TIMEOUT_SECS:
                # vLLM gives its worker 5 s to exit: Triton must wait that long for finalize().
                self._exit_timeout_secs = _vllm.VLLM_EXIT_TIMEOUT_SECS
                self.stop_grace = max(self.stop_grace, _vllm.VLLM_EXIT_TIMEOUT_SECS + 15.0)
            logger.info("vLLM stages %s run in %s", ", ".join(sorted(vllm_configs)), self.llm_env.path)
        self._shadow_dir = Path(tempfile.mkdtemp(prefix="tritonkit-shadow-"))
        try:
            served, self.python_env_twins = _execution_env_twin.shadow_repository(
                self.repository, self._shadow_dir, environments=environments
            )
        except BaseException:
            self._drop_shadow()
            raise
        self._served_repository = served if served != self.repository else None
        if self._served_repository is None:
            self._drop_shadow()

    def _refuse_unusable_stub_envs(self, installation: TritonInstallation) -> None:
        """numpy 2 or a mismatched Python in a Python stage's environment: refuse (see _stub_env)."""
        try:
            _stub_env.refuse_unusable_environments(
                self._served_repository or self.repository,
                self.environment(installation),
                stub_python=running_python_version(),
                stubs=sorted(p.parent.name for p in installation.stubs.glob("*/triton_python_backend_stub")),
                model_config_name=self.model_config_name,
            )
        except BaseException:
            self._drop_shadow()
            raise

    def _drop_shadow(self) -> None:
        if self._shadow_dir is not None:
            shutil.rmtree(self._shadow_dir, ignore_errors=True)
            self._shadow_dir = None
        self._served_repository = None

    def _check_chosen_ports(self) -> None:
        for kind, port in self._requested_ports.items():
            if port is not None and _port_in_use(self.host, port):
                raise ServerError(
                    f"{kind} port {port} on {self.host} is already in use",
                    hint=f"stop what uses it, or choose another --{kind}-port (or omit it for a free one)",
                )

    def _choose_ports(self) -> None:
        if self._ports:
            return  # restart, or a retry with the user's own ports: keep them
        taken: set[int] = set()
        for kind in ("http", "grpc", "metrics"):
            port = self._requested_ports[kind]
            while port is None or port in taken:
                port = free_port(_connect_host(self.host))
            taken.add(port)
            self._ports[kind] = port

    def _launch(self, installation: TritonInstallation, backend_directory: Path) -> None:
        if self._log_path_requested is not None:
            self._log_path = self._log_path_requested
            self._log_path.parent.mkdir(parents=True, exist_ok=True)
        else:
            if self._tmpdir is None:
                self._tmpdir = Path(tempfile.mkdtemp(prefix="tritonkit-server-"))
            self._log_path = self._tmpdir / "tritonserver.log"
        self._log_handle = open(self._log_path, "wb")  # noqa: SIM115 - closed in _kill/stop
        self._log_offset = 0
        self._shm_prefix = _shm.new_prefix()
        args = self.command(backend_directory, installation)
        env = self.environment(installation)
        self._ipc_dir = _vllm.private_socket_folder(env)  # removed by _kill
        logger.info("starting %s", " ".join(_logs.redact_args(args)))
        try:
            self._process = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=self._log_handle,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=str(self.repository),
                # Own process group: a terminal's Ctrl-C reaches us, and we stop the server in order.
                # Own session too: with Linux's autogroup scheduling, the server then has a CPU
                # share of its own. In the caller's session, two CPU hogs beside it on 2 cores
                # stalled 4 of 4 vLLM streams for good (docs/known-issues.md).
                start_new_session=True,
                # PDEATHSIG fires when the *thread* that forked exits: only tie the server to the
                # main thread; servers started from other threads rely on stop() and atexit.
                preexec_fn=_die_with_parent_of(os.getpid()) if _on_main_thread() else None,
            )
            _RUNNING.add(self)
        except OSError as exc:
            self._kill()  # closes the log, removes what this start made
            raise ServerError(f"could not run {installation.binary}: {exc}") from exc

    def _current_log(self) -> str:
        if self._log_path is None or not self._log_path.exists():
            return ""
        text = self._log_path.read_text(encoding="utf-8", errors="replace")
        return _logs.redact_text(text, self._secrets)

    def logs(self) -> str:
        """Everything the server printed, across restarts (secrets redacted)."""
        return "".join(self._past_logs) + (self._current_log() if self._process is not None else "")

    def _wait_until_ready(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + self.startup_timeout
        delay = 0.1
        while True:
            code = self._process.poll()
            if code is not None:
                self._raise_for_exit(code)
            try:
                status, _ = self._request("GET", "/v2/health/live")
            except (OSError, urllib.error.URLError):
                status = 0
            if status == 200:
                break
            self._report_progress()
            if time.monotonic() > deadline:
                raise ServerError(
                    f"tritonserver did not answer within {self.startup_timeout:.0f}s",
                    log_tail=_logs.log_tail(self._current_log()),
                    hint="raise startup_timeout, or check the log for a model that hangs while loading",
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 1.0)
        self._report_progress()
        # HTTP answers only after the initial loads finished: every model is now READY or not.
        self._raise_for_failed_models()
        while not self.is_ready():
            if self._process.poll() is not None:
                self._raise_for_exit(self._process.returncode)
            if time.monotonic() > deadline:
                raise ServerError(
                    "tritonserver is live but never became ready",
                    log_tail=_logs.log_tail(self._current_log()),
                )
            time.sleep(0.2)

    def _report_progress(self) -> None:
        """Hand the backends' new start-up progress lines (the vLLM engines) to ``on_progress``."""
        if self._on_progress is None or self._log_path is None:
            return
        try:
            with open(self._log_path, "rb") as handle:
                handle.seek(self._log_offset)
                chunk = handle.read()
        except OSError:
            return
        complete = chunk.rfind(b"\n") + 1
        self._log_offset += complete
        for raw in chunk[:complete].splitlines():
            line = _logs.redact_text(raw.decode("utf-8", errors="replace"), self._secrets)
            message = _logs.backend_message(line, (_vllm.PROGRESS_MARKER, _logs.ONNX_PROVIDER_MARKER))
            if message is not None:
                self._on_progress(message)

    def _raise_for_failed_models(self) -> None:
        log = self._current_log()
        try:
            from_index = _logs.failures_from_index(
                self.repository_index(), unloaded_is_failure=not self._loads_on_demand()
            )
        except (OSError, urllib.error.URLError, ValueError, ServerError):
            from_index = {}
        failures = _logs.merge_failures(_logs.parse_load_failures(log), from_index)
        if failures:
            raise _model_load_error(failures, _logs.log_tail(log))

    def _loads_on_demand(self) -> bool:
        """True when --model-control-mode=explicit was passed: unloaded models are then fine."""
        args = list(self.extra_args)
        for i, arg in enumerate(args):
            value = arg.partition("=")[2] if "=" in arg else (args[i + 1] if i + 1 < len(args) else "")
            if arg.startswith("--model-control-mode") and value == "explicit":
                return True
        return False

    def _raise_for_exit(self, code: int) -> None:
        time.sleep(0.1)
        log = self._current_log()
        tail = _logs.log_tail(log)
        failures = _logs.parse_load_failures(log)
        if failures:
            raise _model_load_error(failures, tail)
        clash = _logs.address_in_use(log)
        if clash:
            raise _AddressInUseError(clash, tail)
        raise ServerError(f"tritonserver exited with code {code} while starting", log_tail=tail)

    def stop(self) -> None:
        """SIGINT, then SIGKILL (the whole process group) after ``stop_grace`` seconds."""
        process = self._process
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=self.stop_grace)
            except subprocess.TimeoutExpired:
                logger.warning("tritonserver did not stop within %.0fs; killing it", self.stop_grace)
        self._kill()
        self._drop_shadow()

    def _kill(self) -> None:
        process = self._process
        if process is not None:
            # Python backend stubs share the server's process group; take any stragglers with it.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)
            self._past_logs.append(self._current_log())
            self._process = None
            _RUNNING.discard(self)
        if self._shm_prefix is not None:
            # Triton removes its regions on a clean stop; after a kill they would stay in /dev/shm.
            _shm.remove_regions(self._shm_prefix)
            self._shm_prefix = None
        if self._ipc_dir is not None:
            shutil.rmtree(self._ipc_dir, ignore_errors=True)
            self._ipc_dir = None
        if self._log_handle is not None:
            self._log_handle.close()
            self._log_handle = None
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None
            self._log_path = None

    def restart(self) -> LocalTritonServer:
        """Stop and start again on the same ports."""
        self.stop()
        return self.start()


class _AddressInUseError(Exception):
    def __init__(self, detail: str, log_tail: str) -> None:
        super().__init__(detail)
        self.detail = detail
        self.log_tail = log_tail


def _model_load_error(failures: Mapping[str, str], tail: str) -> ModelLoadError:
    model, reason = next(iter(failures.items()))
    others = [f"\n  also failed: '{name}': {why}" for name, why in failures.items() if name != model]
    reason = reason + "".join(others)
    error = ModelLoadError(model, reason, log_tail=tail)
    error.failures = dict(failures)  # type: ignore[attr-defined]
    return error
