"""The credential options `tritonkit infer`, `perf` and `tune` share, and the auth they build.

Declared once, here: :func:`with_auth_options` adds the nine options (key, Azure ML token,
Entra ID, restricted-API headers, deployment routing, CA bundle) to a command and hands it the
:class:`AuthProvider` they ask for as ``auth=`` and the CA bundle as ``cacert=``, so the three
verbs spell, document and interpret them alike.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, overload

import typer

from tritonkit.cli._options import OptionRow, option, signature_with
from tritonkit.client import auth as client_auth
from tritonkit.client.auth import AuthProvider
from tritonkit.errors import ClientError

#: ``heal`` takes this one alone (the restricted-API header of the server it reloads models on).
RestrictedHeaders = Annotated[
    list[str],
    typer.Option(
        "--restricted-header", help="HEADER=ENVVAR: Triton restricted-API header, value from ENVVAR."
    ),
]


def split_pair(text: str, option: str) -> tuple[str, str]:
    """``NAME=VALUE`` -> (NAME, VALUE), or a clear error naming the option."""
    name, eq, value = text.partition("=")
    if not eq or not name:
        raise ClientError(
            f"{option} expects NAME=VALUE, got {text!r}", hint=f"e.g. {option} INPUT0=[[1,2,3,4]]"
        )
    return name, value


def build_auth(
    *,
    key_env: str | None,
    aml_endpoint: str | None,
    subscription: str | None,
    resource_group: str | None,
    workspace: str | None,
    entra: bool,
    restricted: list[str],
    deployment: str | None = None,
) -> AuthProvider | None:
    """The auth provider the credential options ask for (combined when several), or None.

    ``deployment`` adds Azure ML deployment routing (``--deployment``, the same in infer, perf
    and tune).
    """
    providers: list[AuthProvider] = []
    if key_env:
        providers.append(client_auth.KeyAuth(env=key_env))
    if aml_endpoint:
        providers.append(
            client_auth.AmlTokenAuth(
                aml_endpoint, subscription_id=subscription, resource_group=resource_group, workspace=workspace
            )
        )
    if entra:
        providers.append(client_auth.EntraIdAuth())
    for item in restricted:
        header, env = split_pair(item, "--restricted-header")
        providers.append(client_auth.RestrictedApiAuth(header, env=env))
    if deployment:
        providers.append(client_auth.DeploymentRouting(deployment))
    if not providers:
        return None
    return providers[0] if len(providers) == 1 else client_auth.CombinedAuth(*providers)


#: the credential options (rows of an option table): build_auth's keywords
_AUTH_OPTIONS: tuple[OptionRow, ...] = (
    option("--key-env", str | None, None, help="Env var holding a key, sent as Bearer."),
    option(
        "--aml-endpoint",
        str | None,
        None,
        help="Azure ML endpoint name: fetch its aml_token/key with azure-ai-ml.",
    ),
    option("--subscription", str | None, None, help="Azure subscription id (--aml-endpoint)."),
    option("--resource-group", str | None, None, help="Resource group (--aml-endpoint)."),
    option("--workspace", str | None, None, help="Azure ML workspace (--aml-endpoint)."),
    option("--entra-id", bool, False, help="Send an Entra ID token (DefaultAzureCredential).", name="entra"),
    ("restricted", RestrictedHeaders, []),
    option("--deployment", str | None, None, help="azureml-model-deployment to target."),
)
_CACERT = option("--cacert", Path | None, None, help="PEM CA bundle to verify the server with.")


@overload
def with_auth_options(command: Callable[..., None]) -> Callable[..., None]: ...


@overload
def with_auth_options(
    *, elsewhere: Callable[[dict[str, Any]], bool]
) -> Callable[[Callable[..., None]], Callable[..., None]]: ...


def with_auth_options(
    command: Callable[..., None] | None = None,
    *,
    elsewhere: Callable[[dict[str, Any]], bool] | None = None,
) -> Any:
    """Give a Typer ``command`` the credential options and call it with ``auth=`` and ``cacert=``.

    ``command`` declares ``auth: AuthProvider | None`` and ``cacert: Path | None`` (keyword
    parameters); the options replace them in the signature Typer reads. ``elsewhere(kwargs)``
    true: the command runs somewhere else that reads the credentials itself (``perf --kube``), so
    ``auth`` is None and nothing is read here. Used bare (``@with_auth_options``) or with
    ``elsewhere`` (``@with_auth_options(elsewhere=...)``).
    """
    if command is None:
        return functools.partial(with_auth_options, elsewhere=elsewhere)
    signature = signature_with(command, (*_AUTH_OPTIONS, _CACERT), replacing=("auth", "cacert"))

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        options = {name: kwargs.pop(name) for name, _, _ in _AUTH_OPTIONS}
        options["entra"] = bool(options["entra"])
        options["restricted"] = list(options["restricted"] or [])
        auth = None if elsewhere is not None and elsewhere(kwargs) else build_auth(**options)
        command(*args, auth=auth, **kwargs)

    wrapper.__signature__ = signature  # type: ignore[attr-defined]
    return wrapper
