"""The control client: Triton's model-management and introspection calls (metadata, config,
statistics, repository index, model load, readiness and liveness), over HTTP or gRPC.

Benchmarks (:mod:`tritonkit.perf`) read metadata and statistics through the asyncio flavour
while their load runs; tuning (:mod:`tritonkit.tune`) loads candidate configs through the
blocking one. Both share the endpoint, header and JSON handling here, and both turn any
failed call into one :class:`ControlCallError` that carries the server's answer as a
:class:`Refusal`, so callers word their own message from facts instead of reading
tritonclient's exceptions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tritonkit.client._errors import Refusal, read_refusal
from tritonkit.client.connection import grpc_client, http_client_tls
from tritonkit.client.endpoint import Endpoint, grpc_metadata, parse_url
from tritonkit.errors import ClientError

__all__ = ["AsyncModelControl", "ControlCallError", "ModelControl", "Refusal", "read_refusal"]


class ControlCallError(ClientError):
    """A control call failed; ``refusal`` holds what the server (or the socket) said."""

    def __init__(self, action: str, refusal: Refusal) -> None:
        super().__init__(
            f"{action} failed ({refusal.code or 'error'}): {refusal.reason}", status=refusal.code or None
        )
        self.action = action
        self.refusal = refusal


class _ControlBase:
    """What both flavours share: where to call, with which headers, how answers come back."""

    def __init__(
        self,
        url: str,
        *,
        protocol: str = "http",
        headers: Mapping[str, str] | None = None,
        cacert: str | None = None,
        timeout_s: float = 120.0,
    ) -> None:
        self.endpoint: Endpoint = parse_url(url, protocol)
        self.protocol = protocol
        self._headers: dict[str, str] = {}
        self.headers = dict(headers or {})
        self._client: Any = self._connect(cacert, timeout_s)

    def _connect(self, cacert: str | None, timeout_s: float) -> Any:
        """tritonclient's client of this flavour (``cacert``: the PEM bundle to verify TLS with)."""
        raise NotImplementedError

    def _grpc(self, cacert: str | None, *, aio: bool) -> Any:
        return grpc_client(self.endpoint.client_url, ssl_on=self.endpoint.ssl, cacert=cacert, aio=aio)

    def _tls(self, cacert: str | None, *, aio: bool) -> dict[str, Any]:
        return http_client_tls(ssl_on=self.endpoint.ssl, cacert=cacert, insecure=False, aio=aio)

    @property
    def headers(self) -> dict[str, str]:
        return self._headers

    @headers.setter
    def headers(self, value: Mapping[str, str]) -> None:
        # gRPC metadata keys must be lower case; HTTP headers go as given
        self._headers = grpc_metadata(dict(value)) if self.protocol == "grpc" else dict(value)

    def _json(self) -> dict[str, Any]:
        """tritonclient's gRPC answers are protobufs unless asked for JSON; HTTP's are JSON."""
        return {"headers": self._headers, **({"as_json": True} if self.protocol == "grpc" else {})}


class ModelControl(_ControlBase):
    """Blocking control calls (tuning loads candidates one at a time)."""

    def _connect(self, cacert: str | None, timeout_s: float) -> Any:
        if self.protocol == "grpc":
            return self._grpc(cacert, aio=False)
        import tritonclient.http as httpclient

        return httpclient.InferenceServerClient(
            url=self.endpoint.client_url,
            network_timeout=timeout_s,
            connection_timeout=timeout_s,
            **self._tls(cacert, aio=False),
        )

    def close(self) -> None:
        self._client.close()

    def model_config(self, model: str, version: str = "") -> dict[str, Any]:
        """The config the server applies to ``model`` now, as JSON."""
        try:
            return dict(self._client.get_model_config(model, version, **self._json()))
        except Exception as exc:
            raise ControlCallError(f"reading the config of '{model}'", read_refusal(exc)) from exc

    def repository_index(self) -> list[dict[str, Any]]:
        """The repository index: each model's name, version, state and reason."""
        try:
            index = self._client.get_model_repository_index(**self._json())
        except Exception as exc:
            raise ControlCallError("reading the repository index", read_refusal(exc)) from exc
        entries = index.get("models", []) if self.protocol == "grpc" else index
        return [dict(e) for e in entries]

    def load_model(
        self,
        model: str,
        config_json: str | None = None,
        *,
        files: Mapping[str, bytes] | None = None,
        timeout_s: float | None = None,
    ) -> None:
        """Load ``model`` (with ``config_json`` as an override and ``files``, when given); it
        returns once the model is loaded. ``timeout_s`` bounds the call (gRPC only; HTTP's is the
        client's network timeout)."""
        options: dict[str, Any] = {"headers": self._headers}
        if config_json is not None:
            options["config"] = config_json
        if files:
            options["files"] = dict(files)
        if timeout_s is not None and self.protocol == "grpc":
            options["client_timeout"] = timeout_s
        try:
            self._client.load_model(model, **options)
        except Exception as exc:
            raise ControlCallError(f"loading '{model}'", read_refusal(exc)) from exc

    def unload_model(self, model: str) -> None:
        """Ask Triton to unload ``model`` (it answers at once; the unload goes on in the server)."""
        try:
            self._client.unload_model(model, headers=self._headers)
        except Exception as exc:
            raise ControlCallError(f"unloading '{model}'", read_refusal(exc)) from exc

    def is_ready(self, model: str) -> bool:
        try:
            return bool(self._client.is_model_ready(model, headers=self._headers))
        except Exception:  # noqa: BLE001 - not answering means not ready
            return False


class AsyncModelControl(_ControlBase):
    """asyncio control calls, on a connection of their own (kept off a benchmark's load)."""

    def _connect(self, cacert: str | None, timeout_s: float) -> Any:
        if self.protocol == "grpc":
            return self._grpc(cacert, aio=True)
        import tritonclient.http.aio as http_aio

        return http_aio.InferenceServerClient(url=self.endpoint.client_url, **self._tls(cacert, aio=True))

    async def close(self) -> None:
        await self._client.close()

    async def metadata(self, model: str, version: str = "") -> tuple[dict[str, Any], dict[str, Any]]:
        """The model's metadata and its served config, as JSON."""
        try:
            meta = await self._client.get_model_metadata(model, version, **self._json())
            cfg = await self._client.get_model_config(model, version, **self._json())
        except Exception as exc:
            raise ControlCallError(f"reading metadata of model '{model}'", read_refusal(exc)) from exc
        return dict(meta), dict(cfg)

    async def statistics(self, model: str = "", version: str = "") -> dict[str, Any]:
        """Inference statistics of ``model`` (all models when empty), as JSON."""
        try:
            return dict(await self._client.get_inference_statistics(model, version, **self._json()))
        except Exception as exc:
            raise ControlCallError(
                f"reading statistics of '{model or 'all models'}'", read_refusal(exc)
            ) from exc

    async def is_live(self) -> bool:
        """Whether the server still answers its liveness probe (False when it cannot be reached)."""
        try:
            return bool(await self._client.is_server_live(headers=self._headers))
        except Exception:  # noqa: BLE001 - any failure to get an answer means "not live"
            return False
