"""Pluggable credentials for Triton endpoints: Azure ML keys and tokens, Entra ID, restricted API.

Every provider answers ``headers()`` (and ``await aheaders()``) with the request headers it
adds, and ``describe()`` with a line that names the *kind and source* of the credential (for
error messages: "which credential was refused, and how to fix it"), never the secret itself.
Secret values live in :class:`Secret`, whose ``repr``/``str`` are redacted, so they cannot leak
through logs, reprs or exception text by accident.

gRPC sends headers as metadata; Triton's restricted-protocol check there reads the metadata key
``triton-grpc-protocol-<key>``. Providers that care about the protocol implement
``for_protocol(protocol)``; the client calls it through :func:`for_protocol`.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from tritonkit._extras import require
from tritonkit.errors import AuthenticationError

__all__ = [
    "AML_SCOPE",
    "DEPLOYMENT_HEADER",
    "GRPC_RESTRICTED_PREFIX",
    "AmlTokenAuth",
    "AuthProvider",
    "CombinedAuth",
    "DeploymentRouting",
    "EntraIdAuth",
    "KeyAuth",
    "RestrictedApiAuth",
    "Secret",
    "for_protocol",
]

logger = logging.getLogger(__name__)

#: Entra ID scope of Azure ML online endpoints (auth_mode ``aad_token``).
AML_SCOPE = "https://ml.azure.com/.default"
#: Header Azure ML managed endpoints route on to reach one deployment.
DEPLOYMENT_HEADER = "azureml-model-deployment"
#: Triton's gRPC restricted-protocol check reads this metadata key prefix + the configured key.
GRPC_RESTRICTED_PREFIX = "triton-grpc-protocol-"
#: Refresh tokens this long before they expire (seconds).
DEFAULT_REFRESH_MARGIN = 300.0

REDACTED = "***"


class Secret:
    """A secret string that never shows itself in ``repr``, ``str`` or f-strings.

    Call :meth:`reveal` at the one place that sends it.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return f"Secret('{REDACTED}')"

    def __str__(self) -> str:
        return REDACTED

    def __format__(self, spec: str) -> str:
        return REDACTED

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __bool__(self) -> bool:
        return bool(self._value)

    def __reduce__(self) -> Any:
        # Pickling would write the secret somewhere we do not control.
        raise TypeError("Secret values cannot be pickled")


@runtime_checkable
class AuthProvider(Protocol):
    """What the client needs from a credential."""

    def headers(self) -> Mapping[str, str]:
        """Headers to add to the next request (refreshing tokens first when needed)."""
        ...

    async def aheaders(self) -> Mapping[str, str]:
        """Async variant of :meth:`headers` (never blocks the event loop)."""
        ...

    def describe(self) -> str:
        """Names the credential kind and source, never the secret."""
        ...


def for_protocol(auth: AuthProvider, protocol: str) -> AuthProvider:
    """The provider adapted to ``protocol`` ("http" or "grpc"), when it cares about the difference."""
    adapt = getattr(auth, "for_protocol", None)
    if callable(adapt):
        adapted = adapt(protocol)
        if isinstance(adapted, AuthProvider):
            return adapted
    return auth


def secrets_of(auth: AuthProvider | None) -> list[str]:
    """The secret strings a provider currently holds (for redacting foreign error text)."""
    if auth is None:
        return []
    collect = getattr(auth, "_secret_values", None)
    if callable(collect):
        return [s for s in collect() if s]
    return []


def redact(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every secret replaced by ``***``."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, REDACTED)
    return text


def _as_secret(value: str | Secret) -> Secret:
    return value if isinstance(value, Secret) else Secret(value)


# ---------------------------------------------------------------------------------------------
# Static keys


class _StaticSecretAuth:
    """What KeyAuth and RestrictedApiAuth share: one secret (given, or read from an environment
    variable on every request) sent as one header; nothing to await."""

    def _current(self) -> Secret:  # pragma: no cover - overridden
        raise NotImplementedError

    def headers(self) -> Mapping[str, str]:  # pragma: no cover - overridden
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - overridden
        raise NotImplementedError

    async def aheaders(self) -> Mapping[str, str]:
        return self.headers()

    def _secret_values(self) -> list[str]:
        try:
            return [self._current().reveal()]
        except AuthenticationError:
            return []

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.describe()})"


class KeyAuth(_StaticSecretAuth):
    """A static key sent as ``Authorization: Bearer <key>`` (Azure ML ``key`` auth mode).

    Give the key itself (``KeyAuth("...")``) or the environment variable that holds it
    (``KeyAuth(env="AML_KEY")``); an env var is read on every request, so rotating the key in the
    environment takes effect without a new client. ``header``/``scheme`` adapt it to gateways that
    want e.g. ``api-key: <key>`` (``scheme=""``).
    """

    def __init__(
        self,
        key: str | Secret | None = None,
        *,
        env: str | None = None,
        header: str = "Authorization",
        scheme: str = "Bearer",
    ) -> None:
        if (key is None) == (env is None):
            raise AuthenticationError(
                "KeyAuth needs exactly one of a key value or an environment variable name",
                hint="use KeyAuth('<key>') or KeyAuth(env='MY_ENDPOINT_KEY')",
            )
        self._key = _as_secret(key) if key is not None else None
        self.env = env
        self.header = header
        self.scheme = scheme
        if env is not None:
            self._read_env()  # fail early and clearly when the variable is missing

    @classmethod
    def from_env(cls, env: str, **kwargs: Any) -> KeyAuth:
        return cls(env=env, **kwargs)

    def _read_env(self) -> Secret:
        value = os.environ.get(self.env or "", "")
        if not value:
            raise AuthenticationError(
                f"environment variable {self.env} is not set or empty; it should hold the endpoint key",
                hint=f"export {self.env}=<key> "
                "(Azure ML: az ml online-endpoint get-credentials -n <endpoint>)",
            )
        return Secret(value)

    def _current(self) -> Secret:
        return self._key if self._key is not None else self._read_env()

    def headers(self) -> Mapping[str, str]:
        key = self._current().reveal()
        return {self.header: f"{self.scheme} {key}" if self.scheme else key}

    def describe(self) -> str:
        source = f"environment variable {self.env}" if self.env else "a key given in code"
        sent = f"{self.header}: {self.scheme} <key>" if self.scheme else f"{self.header}: <key>"
        return f"static key from {source} (sent as '{sent}')"


# ---------------------------------------------------------------------------------------------
# Expiring tokens


@dataclass(frozen=True)
class _Token:
    value: Secret
    expires_on: float  # epoch seconds; 0 = never
    refresh_after: float = 0.0  # epoch seconds; 0 = use the margin


class _RefreshingToken:
    """Shared machinery: cache a token, refresh it before it expires, thread- and task-safe."""

    kind = "token"

    def __init__(self, *, refresh_margin: float, clock: Callable[[], float]) -> None:
        self.refresh_margin = refresh_margin
        self._clock = clock
        self._token: _Token | None = None
        self._lock = threading.Lock()
        self.fetch_count = 0

    def _fetch(self) -> _Token:  # pragma: no cover - abstract
        raise NotImplementedError

    async def _afetch(self) -> _Token:
        return await asyncio.to_thread(self._fetch)

    def _fresh(self) -> bool:
        tok = self._token
        if tok is None:
            return False
        now = self._clock()
        if tok.refresh_after and now >= tok.refresh_after:
            return False
        return not (tok.expires_on and now >= tok.expires_on - self.refresh_margin)

    def _store(self, token: _Token) -> _Token:
        self._token = token
        self.fetch_count += 1
        logger.debug("fetched a new %s (expires_on=%s)", self.kind, token.expires_on)
        return token

    def token(self) -> Secret:
        with self._lock:
            tok = self._token
            if tok is None or not self._fresh():
                tok = self._store(self._guarded(self._fetch))
            return tok.value

    async def atoken(self) -> Secret:
        tok = self._token
        if tok is None or not self._fresh():
            fetched = await self._aguarded()
            with self._lock:
                tok = self._store(fetched)
        return tok.value

    def _guarded(self, fetch: Callable[[], _Token]) -> _Token:
        try:
            return fetch()
        except AuthenticationError:
            raise
        except Exception as exc:  # foreign SDK errors are mapped here, once
            raise self._fetch_failed(exc) from exc

    async def _aguarded(self) -> _Token:
        try:
            return await self._afetch()
        except AuthenticationError:
            raise
        except Exception as exc:
            raise self._fetch_failed(exc) from exc

    def _fetch_failed(self, exc: Exception) -> AuthenticationError:
        return AuthenticationError(
            f"could not obtain a {self.kind} for {self.describe()}: {type(exc).__name__}: "
            f"{redact(str(exc), self._secret_values())}",
            hint=self._fix_hint(),
        )

    def _fix_hint(self) -> str:
        return "sign in with `az login` (or set AZURE_CLIENT_ID/AZURE_TENANT_ID/AZURE_CLIENT_SECRET)"

    def headers(self) -> Mapping[str, str]:
        return {"Authorization": f"Bearer {self.token().reveal()}"}

    async def aheaders(self) -> Mapping[str, str]:
        return {"Authorization": f"Bearer {(await self.atoken()).reveal()}"}

    def describe(self) -> str:  # pragma: no cover - overridden
        return self.kind

    def _secret_values(self) -> list[str]:
        return [self._token.value.reveal()] if self._token is not None else []

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.describe()})"


class _AzureCredentialToken(_RefreshingToken):
    """A token fetched with an azure-core credential, by default ``DefaultAzureCredential()``
    (made on first use: azure-identity is imported only then)."""

    def __init__(self, credential: Any | None, *, refresh_margin: float, clock: Callable[[], float]) -> None:
        super().__init__(refresh_margin=refresh_margin, clock=clock)
        self._credential = credential

    def _azure_credential(self, feature: str) -> Any:
        if self._credential is None:
            identity = require("azure.identity", feature=feature)
            self._credential = identity.DefaultAzureCredential()
        return self._credential


class EntraIdAuth(_AzureCredentialToken):
    """An Entra ID (Azure AD) bearer token from an azure-identity credential (``aad_token`` mode).

    ``credential`` is anything with azure-core's ``get_token(*scopes) -> AccessToken`` (sync or
    async); by default ``azure.identity.DefaultAzureCredential()`` (extra ``aml``). Tokens are cached
    and refreshed ``refresh_margin`` seconds before they expire.
    """

    kind = "Entra ID token"

    def __init__(
        self,
        credential: Any | None = None,
        *,
        scope: str = AML_SCOPE,
        refresh_margin: float = DEFAULT_REFRESH_MARGIN,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(credential, refresh_margin=refresh_margin, clock=clock)
        self.scope = scope

    def _cred(self) -> Any:
        return self._azure_credential("Entra ID authentication")

    def _fetch(self) -> _Token:
        result = self._cred().get_token(self.scope)
        if inspect.isawaitable(result):
            raise AuthenticationError(
                f"{type(self._credential).__name__} is an async credential; use AsyncTritonClient",
                hint="pass a sync credential (azure.identity) to TritonClient",
            )
        return _Token(Secret(result.token), float(result.expires_on))

    async def _afetch(self) -> _Token:
        cred = self._cred()
        if inspect.iscoroutinefunction(getattr(cred, "get_token", None)):
            result = await cred.get_token(self.scope)
            return _Token(Secret(result.token), float(result.expires_on))
        return await asyncio.to_thread(self._fetch)

    def describe(self) -> str:
        name = type(self._credential).__name__ if self._credential is not None else "DefaultAzureCredential"
        return f"Entra ID token from {name} for scope {self.scope}"


class AmlTokenAuth(_AzureCredentialToken):
    """An Azure ML endpoint token (``aml_token`` auth mode), fetched with the azure-ai-ml SDK.

    Calls ``MLClient.online_endpoints.get_keys(endpoint)`` and refreshes at the token's
    ``refresh_after_time_utc`` or ``refresh_margin`` seconds before ``expiry_time_utc``, whichever
    comes first. Works for ``key`` mode endpoints too (uses the primary key, which never expires).
    Pass an ``ml_client`` or the workspace coordinates (``subscription_id``, ``resource_group``,
    ``workspace``; extra ``aml``).
    """

    kind = "Azure ML endpoint token"

    def __init__(
        self,
        endpoint: str,
        *,
        ml_client: Any | None = None,
        subscription_id: str | None = None,
        resource_group: str | None = None,
        workspace: str | None = None,
        credential: Any | None = None,
        refresh_margin: float = DEFAULT_REFRESH_MARGIN,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(credential, refresh_margin=refresh_margin, clock=clock)
        self.endpoint = endpoint
        self._ml_client = ml_client
        self._workspace = (subscription_id, resource_group, workspace)
        if ml_client is None and not all(self._workspace):
            raise AuthenticationError(
                f"AmlTokenAuth for endpoint '{endpoint}' needs an ml_client or "
                "subscription_id, resource_group and workspace",
                hint="pass ml_client=MLClient(...) or the three workspace coordinates",
            )

    def _client(self) -> Any:
        if self._ml_client is None:
            ml = require("azure.ai.ml", feature="Azure ML aml_token authentication")
            cred = self._azure_credential("Azure ML aml_token authentication")
            sub, rg, ws = self._workspace
            self._ml_client = ml.MLClient(cred, sub, rg, ws)
        return self._ml_client

    def _fetch(self) -> _Token:
        keys = self._client().online_endpoints.get_keys(self.endpoint)
        access = getattr(keys, "access_token", None)
        if access:
            return _Token(
                Secret(str(access)),
                float(getattr(keys, "expiry_time_utc", 0) or 0),
                float(getattr(keys, "refresh_after_time_utc", 0) or 0),
            )
        primary = getattr(keys, "primary_key", None)
        if primary:
            return _Token(Secret(str(primary)), 0.0)
        raise AuthenticationError(
            f"Azure ML returned no token or key for endpoint '{self.endpoint}'",
            hint="check the endpoint's auth_mode (key, aml_token or aad_token) and your role on it",
        )

    def _fix_hint(self) -> str:
        return (
            f"check that endpoint '{self.endpoint}' exists and your identity may read its keys "
            "(`az ml online-endpoint get-credentials -n ...`); sign in with `az login`"
        )

    def describe(self) -> str:
        return (
            f"Azure ML token for endpoint '{self.endpoint}' (fetched with MLClient.online_endpoints.get_keys)"
        )


# ---------------------------------------------------------------------------------------------
# Triton restricted API, deployment routing, combinations


class RestrictedApiAuth(_StaticSecretAuth):
    """Triton's restricted-API header (``--http-restricted-api=API:KEY=VALUE``).

    Over gRPC the same credential goes as metadata ``triton-grpc-protocol-<key>``
    (``--grpc-restricted-protocol=PROTOCOL:KEY=VALUE``); the client adapts it automatically.
    """

    def __init__(
        self,
        key: str,
        value: str | Secret | None = None,
        *,
        env: str | None = None,
        protocol: str = "http",
    ) -> None:
        if (value is None) == (env is None):
            raise AuthenticationError(
                f"RestrictedApiAuth for header '{key}' needs exactly one of a value or an env var",
                hint="use RestrictedApiAuth('admin-key', env='TRITON_ADMIN_KEY')",
            )
        self.key = key
        self.env = env
        self.protocol = protocol
        self._value = _as_secret(value) if value is not None else None
        if env is not None:
            self._current()

    def _current(self) -> Secret:
        if self._value is not None:
            return self._value
        value = os.environ.get(self.env or "", "")
        if not value:
            raise AuthenticationError(
                f"environment variable {self.env} is not set or empty; it should hold the value of "
                f"Triton's restricted-API header '{self.key}'",
                hint=f"export {self.env}=<value given to --http-restricted-api / --grpc-restricted-protocol>",
            )
        return Secret(value)

    @property
    def header_name(self) -> str:
        return f"{GRPC_RESTRICTED_PREFIX}{self.key}" if self.protocol == "grpc" else self.key

    def for_protocol(self, protocol: str) -> RestrictedApiAuth:
        if protocol == self.protocol:
            return self
        clone = RestrictedApiAuth.__new__(RestrictedApiAuth)
        clone.key, clone.env, clone.protocol, clone._value = self.key, self.env, protocol, self._value
        return clone

    def headers(self) -> Mapping[str, str]:
        return {self.header_name: self._current().reveal()}

    def describe(self) -> str:
        source = f"environment variable {self.env}" if self.env else "a value given in code"
        return f"Triton restricted-API header '{self.header_name}' from {source}"


@dataclass(frozen=True)
class DeploymentRouting:
    """The ``azureml-model-deployment`` header: send traffic to one Azure ML deployment."""

    deployment: str

    def headers(self) -> Mapping[str, str]:
        return {DEPLOYMENT_HEADER: self.deployment}

    async def aheaders(self) -> Mapping[str, str]:
        return self.headers()

    def describe(self) -> str:
        return f"routing to deployment '{self.deployment}' ({DEPLOYMENT_HEADER} header)"


@dataclass(frozen=True)
class CombinedAuth:
    """Several providers at once (e.g. a gateway key plus a restricted-API header)."""

    providers: tuple[AuthProvider, ...] = field(default_factory=tuple)

    def __init__(self, *providers: AuthProvider) -> None:
        object.__setattr__(self, "providers", tuple(providers))

    def headers(self) -> Mapping[str, str]:
        merged: dict[str, str] = {}
        for p in self.providers:
            merged.update(p.headers())
        return merged

    async def aheaders(self) -> Mapping[str, str]:
        merged: dict[str, str] = {}
        for p in self.providers:
            merged.update(await p.aheaders())
        return merged

    def describe(self) -> str:
        return " + ".join(p.describe() for p in self.providers) or "no credential"

    def for_protocol(self, protocol: str) -> CombinedAuth:
        return CombinedAuth(*(for_protocol(p, protocol) for p in self.providers))

    def _secret_values(self) -> list[str]:
        out: list[str] = []
        for p in self.providers:
            out.extend(secrets_of(p))
        return out

    def __repr__(self) -> str:
        return f"CombinedAuth({self.describe()})"
