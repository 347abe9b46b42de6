"""The one place tritonkit opens connections to Triton: TLS, credentials and headers.

Every gRPC channel (grpc, grpc.aio), tritonclient client (HTTP/gRPC, sync/asyncio), httpx client
and raw TLS socket the client package and perf's raw senders use gets its trust store,
certificate checks and header spelling here, so a private CA or an ``insecure`` test gateway
behaves the same on every path. Addresses are tritonclient's ``host:port`` (HTTP: plus any path
prefix); this module does not parse URLs (``endpoint`` does).
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tritonkit.errors import ClientError

__all__ = [
    "GRPC_OPTIONS",
    "close_channels",
    "grpc_channel",
    "grpc_channels",
    "grpc_client",
    "grpc_metadata",
    "http_client_tls",
    "httpx_verify",
    "root_certificates",
    "tls_context",
]

#: The message limits of tritonclient's own channels (2 GiB - 1).
GRPC_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.max_send_message_length", 2**31 - 1),
    ("grpc.max_receive_message_length", 2**31 - 1),
)


def tls_context(cacert: str | None = None, *, insecure: bool = False) -> ssl.SSLContext:
    """The TLS context every tritonkit connection uses: the system trust store, or ``cacert``.

    ``insecure`` turns certificate and host-name checks off (a test gateway's self-signed
    certificate); it is never the default.
    """
    context = ssl.create_default_context(cafile=cacert)
    if insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def httpx_verify(cacert: str | None, *, insecure: bool = False) -> ssl.SSLContext | bool:
    """httpx's ``verify=``: off when ``insecure``, the CA's context with ``cacert``, else the
    system trust store (True)."""
    if insecure:
        return False
    if cacert:
        return tls_context(cacert)
    return True


def http_client_tls(*, ssl_on: bool, cacert: str | None, insecure: bool, aio: bool) -> dict[str, Any]:
    """The TLS keyword arguments of tritonclient's HTTP client (``aio``: ``tritonclient.http.aio``).

    The gevent client takes a CA file and an ``insecure`` flag; the aiohttp one an SSLContext.
    """
    if aio:
        return {"ssl": ssl_on, "ssl_context": tls_context(cacert, insecure=insecure) if ssl_on else None}
    options = {"ca_certs": cacert} if ssl_on and cacert else None
    return {"ssl": ssl_on, "ssl_options": options, "insecure": insecure}


def root_certificates(cacert: str | None) -> bytes | None:
    """The PEM bytes gRPC wants for a private CA (None: the system trust store)."""
    if not cacert:
        return None
    try:
        return Path(cacert).read_bytes()
    except OSError as exc:
        raise ClientError(
            f"CA certificate file {cacert} cannot be read: {exc}",
            hint="pass the PEM file of your CA (CLI: --cacert FILE)",
        ) from exc


def _grpc_credentials(ssl_on: bool, cacert: str | None) -> Any:
    import grpc

    return grpc.ssl_channel_credentials(root_certificates=root_certificates(cacert)) if ssl_on else None


def _open_channel(address: str, creds: Any, *, aio: bool, options: tuple[tuple[str, int], ...]) -> Any:
    import grpc

    factory = grpc.aio if aio else grpc
    if creds is None:
        return factory.insecure_channel(address, options=list(options))
    return factory.secure_channel(address, creds, options=list(options))


def grpc_channel(
    address: str,
    *,
    ssl_on: bool,
    cacert: str | None = None,
    aio: bool = False,
    options: tuple[tuple[str, int], ...] = GRPC_OPTIONS,
) -> Any:
    """A grpc (``aio``: grpc.aio) channel to ``address``, over TLS with ``cacert`` when ``ssl_on``."""
    return _open_channel(address, _grpc_credentials(ssl_on, cacert), aio=aio, options=options)


def grpc_channels(address: str, *, ssl_on: bool, cacert: str | None, count: int) -> list[Any]:
    """``count`` grpc.aio channels to ``address``, each its own HTTP/2 connection.

    For load: one connection for all requests serializes them through one transport; measured
    +15-20% saturated throughput with a connection per worker (hence a local subchannel pool).
    """
    creds = _grpc_credentials(ssl_on, cacert)
    options = (*GRPC_OPTIONS, ("grpc.use_local_subchannel_pool", 1))
    return [_open_channel(address, creds, aio=True, options=options) for _ in range(max(1, count))]


async def close_channels(channels: list[Any]) -> None:
    """Close grpc.aio channels; one that is already broken may fail to close, which is fine."""
    for channel in channels:
        with contextlib.suppress(Exception):
            await channel.close()


def grpc_client(address: str, *, ssl_on: bool, cacert: str | None, aio: bool) -> Any:
    """tritonclient's gRPC ``InferenceServerClient`` (``aio``: the asyncio one)."""
    if aio:
        import tritonclient.grpc.aio as mod
    else:
        import tritonclient.grpc as mod
    root = cacert if ssl_on else None  # tritonclient opens the file itself
    return mod.InferenceServerClient(address, ssl=ssl_on, root_certificates=root)


def grpc_metadata(headers: Mapping[str, str]) -> dict[str, str]:
    """Headers as gRPC metadata: keys lower-cased (HTTP/2 requires it; Triton matches them so).

    tritonclient passes metadata keys through as given, so every gRPC call goes through here.
    """
    return {k.lower(): v for k, v in headers.items()}
