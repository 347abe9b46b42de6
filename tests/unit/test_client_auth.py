"""Auth providers: headers, token refresh, redaction of secrets everywhere."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import pytest

from tritonkit.client import (
    AmlTokenAuth,
    CombinedAuth,
    DeploymentRouting,
    EntraIdAuth,
    KeyAuth,
    RestrictedApiAuth,
    Secret,
    TritonClient,
)
from tritonkit.client.auth import AML_SCOPE, AuthProvider, for_protocol
from tritonkit.errors import AuthenticationError

SECRET = "sk-live-5f3a9c1e77d04b"


@dataclass
class AccessToken:
    token: str
    expires_on: int


class FakeCredential:
    """A FAKE azure-core TokenCredential (no Entra ID is reachable here): get_token(*scopes) ->
    AccessToken, handing out token-1, token-2... that expire ``lifetime`` seconds after ``clock``."""

    def __init__(self, clock: list[float], lifetime: int = 3600, fail: Exception | None = None) -> None:
        self.clock = clock
        self.lifetime = lifetime
        self.fail = fail
        self.calls: list[tuple[str, ...]] = []

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        self.calls.append(scopes)
        if self.fail is not None:
            raise self.fail
        return AccessToken(f"token-{len(self.calls)}", int(self.clock[0]) + self.lifetime)


class AsyncFakeCredential(FakeCredential):
    """A FAKE async credential (azure.identity.aio shape): ``await get_token(scope)``."""

    async def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:  # type: ignore[override]
        return FakeCredential.get_token(self, *scopes)


@dataclass
class EndpointAuthToken:
    access_token: str
    expiry_time_utc: float
    refresh_after_time_utc: float


class FakeMLClient:
    """A FAKE azure.ai.ml.MLClient (no Azure here): online_endpoints.get_keys(name) returns tokens
    shaped like azure-ai-ml's EndpointAuthToken."""

    def __init__(self, clock: list[float]) -> None:
        self.clock = clock
        self.names: list[str] = []
        self.online_endpoints = self

    def get_keys(self, name: str) -> EndpointAuthToken:
        self.names.append(name)
        now = self.clock[0]
        return EndpointAuthToken(f"aml-{len(self.names)}", now + 3600, now + 1800)


def test_key_auth_sends_bearer_key_when_given_a_value() -> None:
    assert KeyAuth(SECRET).headers() == {"Authorization": f"Bearer {SECRET}"}
    assert KeyAuth(SECRET, header="api-key", scheme="").headers() == {"api-key": SECRET}


def test_key_auth_reads_env_on_each_request_when_key_rotates(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TK_KEY", "first-key-000")
    auth = KeyAuth(env="TK_KEY")
    assert auth.headers()["Authorization"] == "Bearer first-key-000"
    monkeypatch.setenv("TK_KEY", "second-key-111")
    assert auth.headers()["Authorization"] == "Bearer second-key-111"
    assert "TK_KEY" in auth.describe()


def test_key_auth_raises_with_fix_when_env_var_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TK_MISSING", raising=False)
    with pytest.raises(AuthenticationError, match="TK_MISSING") as info:
        KeyAuth(env="TK_MISSING")
    assert info.value.hint and "export TK_MISSING" in info.value.hint


def test_key_auth_raises_when_given_both_or_neither_source() -> None:
    with pytest.raises(AuthenticationError):
        KeyAuth()
    with pytest.raises(AuthenticationError):
        KeyAuth(SECRET, env="X")


def test_secret_is_redacted_when_shown_in_repr_str_format_logs_and_errors(
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = Secret(SECRET)
    auth = KeyAuth(secret)
    restricted = RestrictedApiAuth("admin-key", SECRET)
    client = TritonClient("https://gw.example.com", auth=CombinedAuth(auth, restricted))
    texts = [
        repr(secret),
        str(secret),
        f"{secret}",
        f"{secret!r}",
        repr(auth),
        auth.describe(),
        repr(restricted),
        restricted.describe(),
        repr(client),
    ]
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("tritonkit.test").info("auth=%s secret=%s client=%r", auth, secret, client)
    texts += [r.getMessage() for r in caplog.records]
    for text in texts:
        assert SECRET not in text, text
    assert secret.reveal() == SECRET
    with pytest.raises(TypeError):
        import pickle

        pickle.dumps(secret)


def test_entra_id_auth_reuses_token_until_margin_then_refreshes_when_near_expiry() -> None:
    clock = [1_000_000.0]
    cred = FakeCredential(clock, lifetime=3600)
    auth = EntraIdAuth(cred, refresh_margin=300, clock=lambda: clock[0])
    assert auth.headers() == {"Authorization": "Bearer token-1"}
    clock[0] += 3000  # 600 s left: still fresh
    assert auth.headers() == {"Authorization": "Bearer token-1"}
    clock[0] += 301  # 299 s left: inside the margin
    assert auth.headers() == {"Authorization": "Bearer token-2"}
    assert cred.calls == [(AML_SCOPE,), (AML_SCOPE,)]
    assert "FakeCredential" in auth.describe() and "token-" not in repr(auth)


async def test_entra_id_auth_awaits_async_credential_when_used_from_asyncio() -> None:
    clock = [50.0]
    cred = AsyncFakeCredential(clock, lifetime=10)
    auth = EntraIdAuth(cred, scope="api://x/.default", refresh_margin=5, clock=lambda: clock[0])
    assert await auth.aheaders() == {"Authorization": "Bearer token-1"}
    assert await auth.aheaders() == {"Authorization": "Bearer token-1"}
    clock[0] += 6
    assert await auth.aheaders() == {"Authorization": "Bearer token-2"}
    assert cred.calls == [("api://x/.default",), ("api://x/.default",)]


def test_entra_id_auth_raises_authentication_error_with_hint_when_sdk_raises() -> None:
    cred = FakeCredential([0.0], fail=RuntimeError("AADSTS700016 application not found"))
    auth = EntraIdAuth(cred)
    with pytest.raises(AuthenticationError) as info:
        auth.headers()
    assert "AADSTS700016" in str(info.value)
    assert info.value.hint and "az login" in info.value.hint


def test_aml_token_auth_refreshes_when_refresh_after_time_passes() -> None:
    clock = [10_000.0]
    ml = FakeMLClient(clock)
    auth = AmlTokenAuth("my-endpoint", ml_client=ml, clock=lambda: clock[0])
    assert auth.headers() == {"Authorization": "Bearer aml-1"}
    clock[0] += 1799
    assert auth.headers() == {"Authorization": "Bearer aml-1"}
    clock[0] += 2  # past refresh_after_time_utc, long before expiry
    assert auth.headers() == {"Authorization": "Bearer aml-2"}
    assert ml.names == ["my-endpoint", "my-endpoint"]
    assert "my-endpoint" in auth.describe()


def test_aml_token_auth_raises_when_neither_client_nor_workspace_given() -> None:
    with pytest.raises(AuthenticationError, match="workspace"):
        AmlTokenAuth("ep")


def test_restricted_api_auth_uses_grpc_metadata_key_when_protocol_is_grpc() -> None:
    auth = RestrictedApiAuth("admin-key", SECRET)
    assert auth.headers() == {"admin-key": SECRET}
    assert for_protocol(auth, "grpc").headers() == {"triton-grpc-protocol-admin-key": SECRET}
    combined = CombinedAuth(KeyAuth("k-1234"), auth, DeploymentRouting("blue"))
    assert dict(for_protocol(combined, "grpc").headers()) == {
        "Authorization": "Bearer k-1234",
        "triton-grpc-protocol-admin-key": SECRET,
        "azureml-model-deployment": "blue",
    }
    assert "blue" in combined.describe() and SECRET not in combined.describe()


def test_providers_satisfy_auth_provider_protocol_when_checked_at_runtime() -> None:
    for provider in (
        KeyAuth("k-1234"),
        RestrictedApiAuth("k", "v"),
        DeploymentRouting("d"),
        CombinedAuth(),
        EntraIdAuth(FakeCredential([0.0])),
    ):
        assert isinstance(provider, AuthProvider)
