"""Thin adapters over the four tritonclient clients (HTTP, gRPC; sync, asyncio) behind one shape.

They do no retries and no error mapping (``_client`` does both, once); they only translate
arguments, normalise JSON shapes (gRPC's as_json stringifies int64) and, for HTTP, keep the
server's ``Retry-After`` on the exception so the retry loop can honour it.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from numpy.typing import NDArray

from tritonkit.client._errors import RETRY_AFTER_ATTR
from tritonkit.client._inputs import PreparedInput
from tritonkit.client.connection import grpc_client, grpc_metadata, http_client_tls
from tritonkit.client.endpoint import Endpoint
from tritonkit.client.retry import parse_retry_after

Headers = Mapping[str, str]
Inputs = Sequence[PreparedInput]
Outputs = dict[str, NDArray[Any]]


def _refused(request_uri: str, status: int) -> bool:
    """Whether an HTTP answer is an error; Triton answers "not ready" with 400: that is a False."""
    return status != 200 and not ("v2/health" in request_uri and status == 400)


def _with_retry_after(error: Exception, retry_after: str | None) -> Exception:
    setattr(error, RETRY_AFTER_ATTR, parse_retry_after(retry_after))
    return error


def _module(protocol: str, aio: bool) -> Any:
    """The tritonclient module for ``protocol``, sync or asyncio."""
    if protocol == "grpc":
        if aio:
            import tritonclient.grpc.aio as grpc_aio

            return grpc_aio
        import tritonclient.grpc as grpc_sync

        return grpc_sync
    if aio:
        import tritonclient.http.aio as http_aio

        return http_aio
    import tritonclient.http as http_sync

    return http_sync


def _grpc_headers(headers: Headers | None) -> dict[str, str] | None:
    return grpc_metadata(headers) if headers else None


def _ints(value: Any, key: str = "") -> Any:
    """gRPC's as_json writes int64 as strings; give statistics the ints HTTP returns."""
    if isinstance(value, dict):
        return {k: _ints(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_ints(v, key) for v in value]
    if isinstance(value, str) and key not in ("name", "version") and value.isdigit():
        return int(value)
    return value


def _shape_to_int(meta: dict[str, Any]) -> dict[str, Any]:
    for key in ("inputs", "outputs"):
        for item in meta.get(key, []):
            item["shape"] = [int(d) for d in item.get("shape", [])]
    return meta


class _TransportBase:
    """What the sync and async transports share: settings, and the per-call pieces that do not
    depend on whether the call is awaited (each flavour only sends, and awaits or not)."""

    aio: ClassVar[bool]  # tritonclient's asyncio flavour (the subclass says)

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        connect_timeout: float,
        request_timeout: float,
        cacert: str | Path | None,
        insecure: bool,
    ) -> None:
        self.endpoint = endpoint
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self.cacert = str(cacert) if cacert is not None else None
        self.insecure = insecure
        self.grpc = endpoint.protocol == "grpc"
        self.mod = _module(endpoint.protocol, self.aio)
        self._outputs_cache: dict[tuple[str, ...], list[Any]] = {}
        self._call_kw = self._timeout()
        self._setup()

    def _setup(self) -> None:
        """The flavour's own state: its clients (subclasses)."""
        raise NotImplementedError

    def _requested(self, outputs: Sequence[str]) -> list[Any]:
        # InferRequestedOutput objects are read-only once built: reuse them across calls.
        key = tuple(outputs)
        cached = self._outputs_cache.get(key)
        if cached is None:
            cached = self._outputs_cache[key] = [self.mod.InferRequestedOutput(n) for n in key]
        return cached

    def _timeout(self) -> dict[str, Any]:
        return {"client_timeout": self.request_timeout} if self.grpc else {}

    def _hdrs(self, headers: Headers | None) -> Any:
        return _grpc_headers(headers) if self.grpc else (dict(headers) if headers else None)

    def _infer_args(
        self,
        model: str,
        inputs: Sequence[PreparedInput],
        version: str,
        outputs: Sequence[str],
        headers: Headers | None,
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The arguments of tritonclient's ``infer`` (the same for its sync and aio clients)."""
        requested = self._requested(outputs)
        kw = {"model_version": version, "outputs": requested or None, "headers": self._hdrs(headers)}
        return (model, self._tensors(inputs)), {**kw, **self._call_kw}

    def _query_kw(
        self, headers: Headers | None, version: str | None = None, *, as_json: bool = False
    ) -> dict[str, Any]:
        """Keyword arguments of a metadata / config / readiness / statistics call (``as_json``:
        ask gRPC for JSON, which HTTP returns anyway)."""
        kw: dict[str, Any] = {"headers": self._hdrs(headers), **self._timeout()}
        if version is not None:
            kw["model_version"] = version
        if as_json and self.grpc:
            kw["as_json"] = True
        return kw

    @staticmethod
    def _numpy(result: Any, outputs: Sequence[str]) -> Outputs:
        return {name: result.as_numpy(name) for name in outputs}

    def _config_of(self, cfg: Any) -> dict[str, Any]:
        cfg = dict(cfg)
        return dict(cfg.get("config", cfg)) if self.grpc else cfg

    def _stats_of(self, stats: Any) -> dict[str, Any]:
        return dict(_ints(stats)) if self.grpc else dict(stats)

    def _tls(self) -> dict[str, Any]:
        return http_client_tls(
            ssl_on=self.endpoint.ssl, cacert=self.cacert, insecure=self.insecure, aio=self.aio
        )

    def _new_grpc(self) -> Any:
        return grpc_client(self.endpoint.address, ssl_on=self.endpoint.ssl, cacert=self.cacert, aio=self.aio)

    def _tensors(self, inputs: Sequence[PreparedInput]) -> list[Any]:
        tensors = []
        for p in inputs:
            t = self.mod.InferInput(p.name, list(p.array.shape), p.datatype)
            t.set_data_from_numpy(p.array)
            tensors.append(t)
        return tensors


class SyncTransport(_TransportBase):
    """tritonclient.http / tritonclient.grpc, one underlying client per thread.

    tritonclient's HTTP client is not thread-safe (gevent); a client per thread makes this
    transport safe to share across threads and lets batch chunks go out concurrently.
    """

    aio = False

    def _setup(self) -> None:
        self._local = threading.local()
        self._all: list[Any] = []
        self._lock = threading.Lock()

    # -- clients ---------------------------------------------------------------------------
    def _new_http(self) -> Any:
        from tritonclient.http._utils import _get_error

        class _Client(self.mod.InferenceServerClient):  # type: ignore[misc,name-defined]
            def _post(self, request_uri: str, request_body: Any, headers: Any, query_params: Any) -> Any:
                response = super()._post(request_uri, request_body, headers, query_params)
                if _refused(request_uri, response.status_code):
                    raise _with_retry_after(_get_error(response), response.get("retry-after"))
                return response

            def _get(self, request_uri: str, headers: Any, query_params: Any) -> Any:
                response = super()._get(request_uri, headers, query_params)
                if _refused(request_uri, response.status_code):
                    raise _with_retry_after(_get_error(response), response.get("retry-after"))
                return response

        return _Client(
            self.endpoint.client_url,
            concurrency=1,
            connection_timeout=self.connect_timeout,
            network_timeout=self.request_timeout,
            **self._tls(),
        )

    def client(self) -> Any:
        client = getattr(self._local, "client", None)
        if client is None:
            client = self._new_grpc() if self.grpc else self._new_http()
            self._local.client = client
            with self._lock:
                self._all.append(client)
        return client

    def reset(self) -> None:
        """Drop this thread's client (its connection may be dead after a server restart)."""
        client = getattr(self._local, "client", None)
        if client is not None:
            self._local.client = None
            with self._lock:
                if client in self._all:
                    self._all.remove(client)
            try:
                client.close()
            except Exception:  # noqa: BLE001 - closing a broken connection may fail; nothing to do
                pass

    def close(self) -> None:
        with self._lock:
            clients, self._all = self._all, []
        for c in clients:
            try:
                c.close()
            except Exception:  # noqa: BLE001
                pass

    # -- calls -----------------------------------------------------------------------------
    def infer(
        self, model: str, inputs: Inputs, *, version: str, outputs: Sequence[str], headers: Headers | None
    ) -> Outputs:
        args, kw = self._infer_args(model, inputs, version, outputs, headers)
        return self._numpy(self.client().infer(*args, **kw), outputs)

    def metadata(self, model: str, version: str, headers: Headers | None) -> dict[str, Any]:
        meta = self.client().get_model_metadata(model, **self._query_kw(headers, version, as_json=True))
        return _shape_to_int(dict(meta))

    def config(self, model: str, version: str, headers: Headers | None) -> dict[str, Any]:
        cfg = self.client().get_model_config(model, **self._query_kw(headers, version, as_json=True))
        return self._config_of(cfg)

    def server_ready(self, headers: Headers | None) -> bool:
        return bool(self.client().is_server_ready(**self._query_kw(headers)))

    def model_ready(self, model: str, version: str, headers: Headers | None) -> bool:
        return bool(self.client().is_model_ready(model, **self._query_kw(headers, version)))

    def statistics(self, model: str, version: str, headers: Headers | None) -> dict[str, Any]:
        stats = self.client().get_inference_statistics(
            model_name=model, **self._query_kw(headers, version, as_json=True)
        )
        return self._stats_of(stats)


class AsyncTransport(_TransportBase):
    """tritonclient.http.aio / tritonclient.grpc.aio (one client; both are task-safe)."""

    aio = True
    conn_limit = 100  # HTTP connections the one aiohttp client may open

    def _setup(self) -> None:
        self._client: Any = None

    def _new(self) -> Any:
        if self.grpc:
            return self._new_grpc()
        get_error = self.mod._get_error

        class _Client(self.mod.InferenceServerClient):  # type: ignore[misc,name-defined]
            async def _post(
                self, request_uri: str, request_body: Any, headers: Any, query_params: Any
            ) -> Any:
                response = await super()._post(request_uri, request_body, headers, query_params)
                if _refused(request_uri, response.status):
                    raise _with_retry_after(await get_error(response), response.headers.get("Retry-After"))
                return response

            async def _get(self, request_uri: str, headers: Any, query_params: Any) -> Any:
                response = await super()._get(request_uri, headers, query_params)
                if _refused(request_uri, response.status):
                    raise _with_retry_after(await get_error(response), response.headers.get("Retry-After"))
                return response

        return _Client(
            self.endpoint.client_url,
            conn_limit=self.conn_limit,
            conn_timeout=self.request_timeout,
            **self._tls(),
        )

    def client(self) -> Any:
        if self._client is None:
            self._client = self._new()
        return self._client

    async def reset(self) -> None:
        # aiohttp and grpc.aio reconnect on their own; nothing to drop.
        return None

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()

    async def infer(
        self, model: str, inputs: Inputs, *, version: str, outputs: Sequence[str], headers: Headers | None
    ) -> Outputs:
        args, kw = self._infer_args(model, inputs, version, outputs, headers)
        return self._numpy(await self.client().infer(*args, **kw), outputs)

    async def metadata(self, model: str, version: str, headers: Headers | None) -> dict[str, Any]:
        meta = await self.client().get_model_metadata(model, **self._query_kw(headers, version, as_json=True))
        return _shape_to_int(dict(meta))

    async def config(self, model: str, version: str, headers: Headers | None) -> dict[str, Any]:
        cfg = await self.client().get_model_config(model, **self._query_kw(headers, version, as_json=True))
        return self._config_of(cfg)

    async def server_ready(self, headers: Headers | None) -> bool:
        return bool(await self.client().is_server_ready(**self._query_kw(headers)))

    async def model_ready(self, model: str, version: str, headers: Headers | None) -> bool:
        return bool(await self.client().is_model_ready(model, **self._query_kw(headers, version)))

    async def statistics(self, model: str, version: str, headers: Headers | None) -> dict[str, Any]:
        stats = await self.client().get_inference_statistics(
            model_name=model, **self._query_kw(headers, version, as_json=True)
        )
        return self._stats_of(stats)
