"""The one place connections get their TLS settings (tritonkit.client.connection)."""

import ssl
from pathlib import Path

import pytest

from tritonkit.client import connection
from tritonkit.client.endpoint import grpc_metadata, tls_context
from tritonkit.errors import ClientError


def test_endpoint_names_are_the_connection_functions() -> None:
    assert tls_context is connection.tls_context
    assert grpc_metadata is connection.grpc_metadata


def test_httpx_verify_is_off_only_when_insecure_and_uses_the_system_store_without_a_ca() -> None:
    assert connection.httpx_verify(None, insecure=True) is False
    assert connection.httpx_verify(None) is True
    # with a CA file: a verifying context (the system's own CA bundle stands in for a private one)
    cafile = ssl.get_default_verify_paths().cafile
    if cafile is None:
        pytest.skip("no system CA file to stand in for a private CA")
    context = connection.httpx_verify(cafile)
    assert isinstance(context, ssl.SSLContext) and context.verify_mode == ssl.CERT_REQUIRED


def test_http_client_tls_gives_each_tritonclient_flavour_its_own_arguments() -> None:
    sync = connection.http_client_tls(ssl_on=True, cacert="/ca.pem", insecure=False, aio=False)
    assert sync == {"ssl": True, "ssl_options": {"ca_certs": "/ca.pem"}, "insecure": False}
    plain = connection.http_client_tls(ssl_on=False, cacert="/ca.pem", insecure=False, aio=True)
    assert plain == {"ssl": False, "ssl_context": None}
    loose = connection.http_client_tls(ssl_on=True, cacert=None, insecure=True, aio=True)
    assert loose["ssl_context"].verify_mode == ssl.CERT_NONE


def test_root_certificates_reads_the_pem_and_names_a_missing_file(tmp_path: Path) -> None:
    pem = tmp_path / "ca.pem"
    pem.write_bytes(b"-----BEGIN CERTIFICATE-----\n")
    assert connection.root_certificates(str(pem)) == pem.read_bytes()
    assert connection.root_certificates(None) is None
    with pytest.raises(ClientError, match="ca-missing.pem cannot be read"):
        connection.root_certificates(str(tmp_path / "ca-missing.pem"))


def test_grpc_channels_opens_one_connection_each_and_closes_them() -> None:
    import asyncio

    async def run() -> int:
        channels = connection.grpc_channels("127.0.0.1:1", ssl_on=False, cacert=None, count=3)
        await connection.close_channels(channels)
        return len(channels)

    assert asyncio.run(run()) == 3
