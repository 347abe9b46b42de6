"""parse_url: what users paste -> what tritonclient wants."""

from __future__ import annotations

import pytest

from tritonkit.client.endpoint import grpc_metadata, parse_url, tls_context
from tritonkit.errors import ClientError


@pytest.mark.parametrize(
    ("url", "protocol", "address", "ssl", "prefix"),
    [
        (
            "https://my-ep.westeurope.inference.ml.azure.com/score",
            "http",
            "my-ep.westeurope.inference.ml.azure.com:443",
            True,
            "",
        ),
        ("https://gw.example.com/triton/", "http", "gw.example.com:443", True, "/triton"),
        ("http://10.0.0.4", "http", "10.0.0.4:80", False, ""),
        ("http://127.0.0.1:8000", "http", "127.0.0.1:8000", False, ""),
        ("127.0.0.1:8000", "http", "127.0.0.1:8000", False, ""),
        ("localhost", "http", "localhost:8000", False, ""),
        ("localhost", "grpc", "localhost:8001", False, ""),
        ("grpc://127.0.0.1:9001", "grpc", "127.0.0.1:9001", False, ""),
        ("grpcs://triton.example.com", "grpc", "triton.example.com:443", True, ""),
        ("http://[::1]:8000", "http", "[::1]:8000", False, ""),
    ],
)
def test_parse_url_gives_tritonclient_address_when_url_has_scheme_path_or_none(
    url: str, protocol: str, address: str, ssl: bool, prefix: str
) -> None:
    ep = parse_url(url, protocol)
    assert (ep.address, ep.ssl, ep.path_prefix) == (address, ssl, prefix)
    assert ep.client_url == address + prefix
    assert "://" not in ep.client_url


@pytest.mark.parametrize(
    ("url", "protocol", "words"),
    [
        ("ftp://host", "http", "scheme"),
        ("grpc://host:8001", "http", "gRPC URL"),
        ("https://host/prefix", "grpc", "cannot have a path"),
        ("http://user:pw@host", "http", "credentials"),
        ("http://host:99999", "http", "invalid port"),
        ("", "http", "empty"),
        ("host:8000", "websocket", "unknown protocol"),
        ("http://host/?a=1", "http", "query"),
    ],
)
def test_parse_url_raises_client_error_when_url_is_unusable(url: str, protocol: str, words: str) -> None:
    with pytest.raises(ClientError, match=words):
        parse_url(url, protocol)


@pytest.mark.parametrize(
    "url",
    ["https://user:hunter2-secret@host/score", "ftp://u:hunter2-secret@h", "http://u:hunter2-secret@h:99999"],
)
def test_parse_url_never_echoes_credentials_when_url_carries_them(url: str) -> None:
    with pytest.raises(ClientError) as info:
        parse_url(url, "http")
    assert "hunter2-secret" not in str(info.value)
    assert "credentials" in str(info.value)


def test_grpc_metadata_lower_cases_keys_and_keeps_values() -> None:
    assert grpc_metadata({"Authorization": "Bearer X", "azureml-model-deployment": "Blue"}) == {
        "authorization": "Bearer X",
        "azureml-model-deployment": "Blue",
    }


def test_tls_context_verifies_by_default_and_only_skips_checks_when_insecure() -> None:
    import ssl

    assert tls_context().verify_mode == ssl.CERT_REQUIRED and tls_context().check_hostname
    loose = tls_context(insecure=True)
    assert loose.verify_mode == ssl.CERT_NONE and not loose.check_hostname
