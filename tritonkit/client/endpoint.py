"""Turn what users paste (full URLs, Azure ML scoring URIs, bare host:port) into what tritonclient wants.

tritonclient takes ``host:port`` plus an ``ssl`` flag and rejects schemes; users have
``https://my-ep.westeurope.inference.ml.azure.com/score`` or ``grpc://127.0.0.1:8001``.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from tritonkit.client.connection import grpc_metadata, tls_context  # their home; kept importable here
from tritonkit.errors import ClientError

__all__ = ["DEFAULT_PORTS", "Endpoint", "grpc_metadata", "parse_url", "tls_context"]

PROTOCOLS = ("http", "grpc")
#: Port used when a URL has none: (protocol, ssl) -> port.
DEFAULT_PORTS: dict[tuple[str, bool], int] = {
    ("http", False): 8000,
    ("http", True): 443,
    ("grpc", False): 8001,
    ("grpc", True): 443,
}
_SCHEMES: dict[str, tuple[str | None, bool]] = {
    "http": ("http", False),
    "https": ("http", True),
    "grpc": ("grpc", False),
    "grpcs": ("grpc", True),
}
_SCHEME_PORTS = {"http": 80, "https": 443}
#: Azure ML scoring URIs end in /score; Triton's v2 routes live beside it, at the root.
_AML_SCORE_SUFFIX = "/score"


@dataclass(frozen=True)
class Endpoint:
    """Where to reach a Triton server, in tritonclient's terms."""

    host: str
    port: int
    ssl: bool
    protocol: str
    path_prefix: str = ""
    url: str = ""  # what the user gave, for messages

    @property
    def address(self) -> str:
        """``host:port`` (IPv6 hosts in brackets), as tritonclient wants it."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def client_url(self) -> str:
        """What to pass as tritonclient's ``url``: address plus any HTTP path prefix."""
        return self.address + self.path_prefix

    def __str__(self) -> str:
        scheme = {("http", False): "http", ("http", True): "https"}.get(
            (self.protocol, self.ssl), "grpcs" if self.ssl else "grpc"
        )
        return f"{scheme}://{self.address}{self.path_prefix}"


def parse_url(url: str, protocol: str = "http") -> Endpoint:
    """Parse ``url`` for ``protocol`` ("http" or "grpc").

    Accepts ``https://host/prefix``, ``http://host:port``, ``grpc://host:port``,
    ``grpcs://host``, Azure ML scoring URIs (``.../score`` is dropped) and bare ``host:port``
    or ``host`` (plain text, Triton's default port for the protocol).
    """
    if protocol not in PROTOCOLS:
        raise ClientError(f"unknown protocol '{protocol}'", hint="use protocol='http' or protocol='grpc'")
    text = url.strip()
    if not text:
        raise ClientError("empty endpoint URL", hint="give e.g. http://127.0.0.1:8000")
    has_scheme = "://" in text
    parts = urlsplit(text if has_scheme else f"//{text}")
    if "@" in parts.netloc:
        raise ClientError(
            "endpoint URLs must not carry credentials (user:password@host)",
            hint="pass the key through auth=KeyAuth(env=...) (CLI: --key-env VAR)",
        )
    scheme = parts.scheme.lower()
    if has_scheme and scheme not in _SCHEMES:
        raise ClientError(
            f"unsupported URL scheme '{scheme}' in {url!r}",
            hint="use http://, https://, grpc:// or grpcs:// (or a bare host:port)",
        )
    implied_protocol, ssl = _SCHEMES.get(scheme, (None, False))
    if implied_protocol is not None and implied_protocol != protocol and scheme in ("grpc", "grpcs"):
        raise ClientError(
            f"URL {url!r} is a gRPC URL but protocol is '{protocol}'",
            hint="pass protocol='grpc' (CLI: --protocol grpc) or an http(s):// URL",
        )
    try:
        host = parts.hostname
        port = parts.port
    except ValueError as exc:
        raise ClientError(f"invalid port in endpoint URL {url!r}", hint="ports are 1-65535") from exc
    if not host:
        raise ClientError(f"no host in endpoint URL {url!r}", hint="give e.g. https://host or host:port")
    if port is None:
        if protocol == "grpc":
            port = DEFAULT_PORTS[("grpc", ssl)]
        elif scheme in _SCHEME_PORTS:
            port = _SCHEME_PORTS[scheme]
        else:
            port = DEFAULT_PORTS[("http", ssl)]
    path = parts.path.rstrip("/")
    if path.endswith(_AML_SCORE_SUFFIX):
        path = path[: -len(_AML_SCORE_SUFFIX)]
    if path and protocol == "grpc":
        raise ClientError(
            f"gRPC endpoints cannot have a path ('{path}' in {url!r})",
            hint="give host:port only for gRPC, or use protocol='http'",
        )
    if parts.query or parts.fragment:
        raise ClientError(
            f"endpoint URL {url!r} has a query or fragment; Triton URLs have neither",
            hint="drop everything after '?' or '#'",
        )
    return Endpoint(host=host, port=port, ssl=ssl, protocol=protocol, path_prefix=path, url=url)
