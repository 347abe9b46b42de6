"""Optional: the same server surface, run from an NGC ``tritonserver`` image with Docker.

For users who have Docker (and a GPU): the image carries every native backend (TensorRT,
onnxruntime with CUDA), so the repository's GPU configs run as in production. Needs the extra
``docker`` (testcontainers) and a running Docker engine.
"""

from __future__ import annotations

import importlib
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tritonkit._extras import require
from tritonkit.errors import RepositoryError, ServerError
from tritonkit.server import _logs
from tritonkit.server._base import ServingOptions, TritonServerBase
from tritonkit.server._local import (
    DEFAULT_EXIT_TIMEOUT_SECS,
    DEFAULT_STARTUP_TIMEOUT,
    _model_load_error,
    free_port,
    gpu_present,
    resolve_model_config_name,
)
from tritonkit.server._trtllm import refuse_unservable_trtllm

if TYPE_CHECKING:
    from typing_extensions import Unpack

logger = logging.getLogger(__name__)

#: Triton 2.51, the release the nvidia-pytriton wheel ships.
DEFAULT_IMAGE = "nvcr.io/nvidia/tritonserver:24.10-py3"
_CONTAINER_REPOSITORY = "/models"
_PORTS = {"http": 8000, "grpc": 8001, "metrics": 8002}


def docker_available() -> bool:
    """True when the ``docker`` extra is installed and a Docker engine answers."""
    try:
        require("testcontainers", feature="tritonkit serve --engine docker")
        docker = importlib.import_module("docker")  # installed with testcontainers
        client = docker.from_env(timeout=3)
        client.ping()
    except Exception:  # noqa: BLE001 - any failure means "no usable engine"
        return False
    return True


class DockerTritonServer(TritonServerBase):
    """tritonserver in a container; ports published on 127.0.0.1 (fixed ones, or free ones)."""

    def __init__(
        self,
        repository: str | Path,
        *,
        image: str = DEFAULT_IMAGE,
        extra_args: Sequence[str] = (),
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
        gpus: bool | None = None,
        **serving: Unpack[ServingOptions],
    ) -> None:
        self.repository = Path(repository).resolve()
        self.image = image
        self._take_serving_options(serving, resolve_model_config_name)
        self.extra_args = tuple(extra_args)
        self.startup_timeout = startup_timeout
        self.gpus = gpu_present() if gpus is None else gpus
        self._container: Any = None
        self._ports: dict[str, int] = {}
        self._host = "127.0.0.1"
        self._last_logs = ""

    def command(self) -> list[str]:
        args = [
            "tritonserver",
            f"--model-repository={_CONTAINER_REPOSITORY}",
            "--exit-on-error=false",
            f"--exit-timeout-secs={DEFAULT_EXIT_TIMEOUT_SECS}",
        ]
        args += self._serving_flags()
        return args + list(self.extra_args)

    def _client_host(self) -> str:
        return self._host

    @property
    def running(self) -> bool:
        if self._container is None:
            return False
        try:
            self._container.get_wrapped_container().reload()
            return bool(self._container.get_wrapped_container().status == "running")
        except Exception:  # noqa: BLE001 - the engine went away
            return False

    def start(self) -> DockerTritonServer:
        if not self.repository.is_dir():
            raise RepositoryError(f"model repository not found: {self.repository}")
        refuse_unservable_trtllm(self.repository, gpu=self.gpus, image=self.image)
        container_mod = require("testcontainers.core.container", feature="tritonkit serve --engine docker")
        container = container_mod.DockerContainer(self.image)
        container.with_volume_mapping(str(self.repository), _CONTAINER_REPOSITORY, "ro")
        for kind, inner in _PORTS.items():
            # Chosen once, kept by restart(); a clash surfaces as the engine's "port is allocated".
            self._ports[kind] = self._ports.get(kind) or self._requested_ports[kind] or free_port(self._host)
            container.with_bind_ports(inner, (self._host, self._ports[kind]))
        container.with_command(self.command())
        if self.gpus:
            types = importlib.import_module("docker.types")  # installed with testcontainers
            container.with_kwargs(device_requests=[types.DeviceRequest(count=-1, capabilities=[["gpu"]])])
        try:
            container.start()
        except Exception as exc:  # noqa: BLE001 - docker SDK errors have no common base worth naming
            raise ServerError(
                f"could not start the {self.image} container: {exc}",
                hint="is Docker running, and can it pull the image (docker login nvcr.io)?",
            ) from exc
        self._container = container
        try:
            self._wait_until_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while True:
            if not self.running:
                raise ServerError("the tritonserver container exited while starting", log_tail=self.logs())
            try:
                if self._request("GET", "/v2/health/live")[0] == 200:
                    break
            except (OSError, urllib.error.URLError):
                pass
            if time.monotonic() > deadline:
                raise ServerError(
                    f"the tritonserver container did not answer within {self.startup_timeout:.0f}s",
                    log_tail=_logs.log_tail(self.logs()),
                )
            time.sleep(1.0)
        failures = _logs.failures_from_index(self.repository_index())
        if failures:
            from_log = _logs.parse_load_failures(self.logs())
            failures.update({m: r for m, r in from_log.items() if m in failures})
            raise _model_load_error(failures, _logs.log_tail(self.logs()))

    def logs(self) -> str:
        if self._container is None:
            return self._last_logs
        try:
            out, err = self._container.get_logs()
        except Exception:  # noqa: BLE001 - the container is gone
            return self._last_logs
        return _logs.redact_text((out + err).decode("utf-8", "replace"), self._secrets)

    def stop(self) -> None:
        if self._container is None:
            return
        self._last_logs = self.logs()
        try:
            self._container.stop()
        except Exception as exc:  # noqa: BLE001
            logger.warning("could not stop the tritonserver container: %s", exc)
        self._container = None

    def restart(self) -> DockerTritonServer:
        self.stop()
        return self.start()
