"""What every tritonkit-started server shares: its addresses and the probes tritonkit sends it.

``LocalTritonServer`` (a process) and ``DockerTritonServer`` (a container) differ in how they
start and stop, not in how they are reached or asked about their models.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

from tritonkit.errors import ServerError
from tritonkit.server._logs import restricted_headers

if TYPE_CHECKING:
    pass  # typing.Unpack from Python 3.11; only annotations use it

#: probes of our own server must not go through an HTTP(S)_PROXY from the environment
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))

_S = TypeVar("_S", bound="TritonServerBase")


class ServingOptions(TypedDict, total=False):
    """The serving options every launcher takes, as keyword arguments of its constructor.

    ``http_port``/``grpc_port``/``metrics_port``: fixed ports (None: free ones, chosen at the first
    start); ``model_config_name``: Triton's ``--model-config-name`` ("auto", the default: ``cpu``
    without a GPU, else each model's config.pbtxt); ``http_restricted_api`` /
    ``grpc_restricted_protocol``: Triton's restricted-API specs (``"model-repository:KEY=VALUE"``).
    """

    http_port: int | None
    grpc_port: int | None
    metrics_port: int | None
    model_config_name: str | None
    http_restricted_api: str | Sequence[str]
    grpc_restricted_protocol: str | Sequence[str]


class TritonServerBase:
    """Ports once chosen, the URLs built from them, and Triton's health and index probes."""

    _ports: dict[str, int]
    _requested_ports: dict[str, int | None]
    _probe_headers: Mapping[str, str]
    _secrets: list[str]
    model_config_name: str | None
    _http_restricted: Sequence[str]
    _grpc_restricted: Sequence[str]

    def _take_serving_options(
        self, options: ServingOptions, resolve_config_name: Callable[[str | None], str | None]
    ) -> None:
        """Keep ``options`` (a TypeError for a keyword no launcher takes, as a signature would)."""
        unknown = sorted(set(options) - set(ServingOptions.__annotations__))
        if unknown:
            raise TypeError(
                f"{type(self).__name__}() got unexpected keyword argument(s): {', '.join(unknown)}"
            )
        self._requested_ports = {
            "http": options.get("http_port"),
            "grpc": options.get("grpc_port"),
            "metrics": options.get("metrics_port"),
        }
        self.model_config_name = resolve_config_name(options.get("model_config_name", "auto"))
        self._http_restricted = _as_list(options.get("http_restricted_api", ()))
        self._grpc_restricted = _as_list(options.get("grpc_restricted_protocol", ()))
        self._probe_headers = restricted_headers(self._http_restricted)
        self._secrets = [*self._probe_headers.values(), *restricted_headers(self._grpc_restricted).values()]

    def _serving_flags(self) -> list[str]:
        """The tritonserver flags every launcher writes alike: the config variant to load and the
        restricted-API specs (they hold secrets: never log them unredacted)."""
        args = [f"--model-config-name={self.model_config_name}"] if self.model_config_name else []
        args += [f"--http-restricted-api={spec}" for spec in self._http_restricted]
        args += [f"--grpc-restricted-protocol={spec}" for spec in self._grpc_restricted]
        return args

    def _client_host(self) -> str:
        """The host part of the addresses clients use (IPv6 bracketed)."""
        raise NotImplementedError

    def start(self: _S) -> _S:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self: _S) -> _S:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- addresses ------------------------------------------------------------------------

    def _port(self, kind: str) -> int:
        if kind not in self._ports:
            raise ServerError(f"the server has no {kind} port yet: call start() first")
        return self._ports[kind]

    @property
    def http_port(self) -> int:
        return self._port("http")

    @property
    def grpc_port(self) -> int:
        return self._port("grpc")

    @property
    def metrics_port(self) -> int:
        return self._port("metrics")

    @property
    def http_address(self) -> str:
        return f"{self._client_host()}:{self.http_port}"

    @property
    def grpc_address(self) -> str:
        return f"{self._client_host()}:{self.grpc_port}"

    @property
    def http_url(self) -> str:
        return f"http://{self.http_address}"

    @property
    def grpc_url(self) -> str:
        return f"grpc://{self.grpc_address}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self._client_host()}:{self.metrics_port}/metrics"

    # -- probes ---------------------------------------------------------------------------

    def _request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        request = urllib.request.Request(
            f"{self.http_url}{path}", data=body, method=method, headers=dict(self._probe_headers)
        )
        try:
            with NO_PROXY.open(request, timeout=5) as response:
                return int(response.status), response.read()
        except urllib.error.HTTPError as exc:
            return int(exc.code), exc.read()

    def repository_index(self) -> list[dict[str, Any]]:
        """Triton's ``/v2/repository/index``: every model with its version, state and reason."""
        status, body = self._request("POST", "/v2/repository/index", b"{}")
        if status != 200:
            raise ServerError(
                f"the server refused the repository index (HTTP {status})",
                hint="the model-repository API may be restricted; pass its header",
            )
        entries = json.loads(body or b"[]")
        return [dict(e) for e in entries]

    def control_grpc(self) -> tuple[str, Mapping[str, str]] | None:
        """Where model control goes over gRPC (address, the restricted protocol's headers), or
        None: over HTTP (no gRPC port known)."""
        if "grpc" not in getattr(self, "_ports", {}):
            return None
        return self.grpc_address, restricted_headers(self._grpc_restricted)

    def control_model(self, action: str, model: str, *, timeout: float) -> tuple[int, str]:
        """Load or unload ``model``: Triton's status (200: done) and words.

        ``timeout`` covers the whole call: a load answers only once the model is loaded. Over
        gRPC where the server has it: Triton 2.51's HTTP load holds every HTTP request to the
        server until the model is loaded (measured: 16 kept-alive connections' ``/v2/health/live``
        waited the whole 12.4 s load of a slow Python model), so a load over HTTP would hold
        the OpenAI front's streams and every HTTP client through an engine's start; over gRPC the
        HTTP port keeps answering.
        """
        grpc = self.control_grpc()
        if grpc is not None:
            return _grpc_control(action, model, *grpc, timeout=timeout)
        path = f"/v2/repository/models/{urllib.parse.quote(model, safe='')}/{action}"
        request = urllib.request.Request(
            f"{self.http_url}{path}", data=b"{}", method="POST", headers=dict(self._probe_headers)
        )
        try:
            with NO_PROXY.open(request, timeout=timeout) as response:
                return int(response.status), response.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as exc:
            return int(exc.code), exc.read().decode("utf-8", "replace")

    def is_ready(self) -> bool:
        try:
            status, _ = self._request("GET", "/v2/health/ready")
        except (OSError, urllib.error.URLError):
            return False
        return status == 200


def _grpc_control(
    action: str, model: str, address: str, headers: Mapping[str, str], *, timeout: float
) -> tuple[int, str]:
    """``control_model`` over gRPC: 200 and no words when done, else 500 and Triton's refusal."""
    from tritonkit.client.control import ControlCallError, ModelControl

    control = ModelControl(address, protocol="grpc", headers=headers, timeout_s=timeout)
    try:
        if action == "load":
            control.load_model(model, timeout_s=timeout)
        elif action == "unload":
            control.unload_model(model)
        else:
            raise ServerError(f"model control has no action {action!r}", hint="use load or unload")
    except ControlCallError as exc:
        return 500, f"gRPC {exc.refusal.code or 'error'}: {exc.refusal.reason}"
    finally:
        control.close()
    return 200, ""


def _as_list(value: str | Sequence[str]) -> list[str]:
    if isinstance(value, str):
        return [value] if value else []
    return [v for v in value if v]
