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

from tritonkit.cli._options import signature_with
from tritonkit.client import auth as client_auth
from tritonkit.client.auth import AuthProvider
from tritonkit.errors import ClientError

KeyEnv = Annotated[str | None, typer.Option("--key-env", help="Env var holding a key, sent as Bearer.")]
AmlEndpoint = Annotated[
    str | None,
    typer.Option("--aml-endpoint", help="Azure ML endpoint name: fetch its aml_token/key with azure-ai-ml."),
]
Subscription = Annotated[
    str | None, typer.Option("--subscription", help="Azure subscription id (--aml-endpoint).")
]
ResourceGroup = Annotated[
    str | None, typer.Option("--resource-group", help="Resource group (--aml-endpoint).")
]
Workspace = Annotated[str | None, typer.Option("--workspace", help="Azure ML workspace (--aml-endpoint).")]
EntraId = Annotated[bool, typer.Option("--entra-id", help="Send an Entra ID token (DefaultAzureCredential).")]
RestrictedHeaders = Annotated[
    list[str],
    typer.Option(
        "--restricted-header", help="HEADER=ENVVAR: Triton restricted-API header, value from ENVVAR."
    ),
]
Deployment = Annotated[str | None, typer.Option("--deployment", help="azureml-model-deployment to target.")]
CaCert = Annotated[Path | None, typer.Option("--cacert", help="PEM CA bundle to verify the server with.")]


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


#: the credential options, as (parameter name, Annotated type, default): build_auth's keywords
_AUTH_OPTIONS: tuple[tuple[str, Any, Any], ...] = (
    ("key_env", KeyEnv, None),
    ("aml_endpoint", AmlEndpoint, None),
    ("subscription", Subscription, None),
    ("resource_group", ResourceGroup, None),
    ("workspace", Workspace, None),
    ("entra", EntraId, False),
    ("restricted", RestrictedHeaders, []),
    ("deployment", Deployment, None),
)


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
    signature = signature_with(
        command, (*_AUTH_OPTIONS, ("cacert", CaCert, None)), replacing=("auth", "cacert")
    )

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        options = {name: kwargs.pop(name) for name, _, _ in _AUTH_OPTIONS}
        options["entra"] = bool(options["entra"])
        options["restricted"] = list(options["restricted"] or [])
        auth = None if elsewhere is not None and elsewhere(kwargs) else build_auth(**options)
        command(*args, auth=auth, **kwargs)

    wrapper.__signature__ = signature  # type: ignore[attr-defined]
    return wrapper
