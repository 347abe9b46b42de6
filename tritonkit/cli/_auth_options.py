"""The credential options `tritonkit infer`, `perf` and `tune` share, and the auth they build.

Declared once as Annotated types so both verbs spell, document and interpret them alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tritonkit.client.auth import (
    AmlTokenAuth,
    AuthProvider,
    CombinedAuth,
    DeploymentRouting,
    EntraIdAuth,
    KeyAuth,
    RestrictedApiAuth,
)
from tritonkit.errors import ClientError

KeyEnv = Annotated[
    str | None, typer.Option("--key-env", help="Env var holding a key, sent as Bearer.")
]
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
EntraId = Annotated[
    bool, typer.Option("--entra-id", help="Send an Entra ID token (DefaultAzureCredential).")
]
RestrictedHeaders = Annotated[
    list[str],
    typer.Option(
        "--restricted-header", help="HEADER=ENVVAR: Triton restricted-API header, value from ENVVAR."
    ),
]
Deployment = Annotated[
    str | None, typer.Option("--deployment", help="azureml-model-deployment to target.")
]
CaCert = Annotated[
    Path | None, typer.Option("--cacert", help="PEM CA bundle to verify the server with.")
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
        providers.append(KeyAuth(env=key_env))
    if aml_endpoint:
        providers.append(
            AmlTokenAuth(
                aml_endpoint, subscription_id=subscription, resource_group=resource_group, workspace=workspace
            )
        )
    if entra:
        providers.append(EntraIdAuth())
    for item in restricted:
        header, env = split_pair(item, "--restricted-header")
        providers.append(RestrictedApiAuth(header, env=env))
    if deployment:
        providers.append(DeploymentRouting(deployment))
    if not providers:
        return None
    return providers[0] if len(providers) == 1 else CombinedAuth(*providers)
