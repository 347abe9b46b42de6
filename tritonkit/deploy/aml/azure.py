"""The Azure boundary of the AML target: every Azure call goes through :func:`azure_call`, which
maps the SDK's and azure-core's errors to :class:`~tritonkit.errors.AzureError` once."""

from __future__ import annotations

from typing import Any

from tritonkit._extras import require
from tritonkit.deploy.aml.options import FEATURE
from tritonkit.errors import AzureError, TritonKitError


def get_or_none(get: Any, name: str) -> Any:
    core = require("azure.core.exceptions", feature=FEATURE)
    try:
        return get(name)
    except core.ResourceNotFoundError:
        return None


def azure_call(what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Run one Azure call, mapping the SDK's and azure-core's errors to AzureError (the one boundary)."""
    core = require("azure.core.exceptions", feature=FEATURE)
    ml = require("azure.ai.ml", feature=FEATURE)
    try:
        return fn(*args, **kwargs)
    except TritonKitError:
        raise
    except core.ClientAuthenticationError as exc:
        raise AzureError(
            f"{what} failed: Azure refused the credential ({first_line(exc)})",
            hint="sign in with `az login` (or set AZURE_CLIENT_ID/AZURE_TENANT_ID/AZURE_CLIENT_SECRET) "
            "and check your role on the workspace",
        ) from exc
    except core.ResourceNotFoundError as exc:
        raise AzureError(
            f"{what} failed: not found ({first_line(exc)})",
            hint="check --subscription, --resource-group and --workspace name an existing Azure ML workspace",
        ) from exc
    except core.HttpResponseError as exc:
        text = first_line(exc)
        code = str(getattr(getattr(exc, "error", None), "code", "") or "")
        if exc.status_code == 429 or "quota" in text.lower() or "quota" in code.lower():
            raise AzureError(
                f"{what} failed: not enough quota ({text})",
                hint="request quota for this VM family in the region, or pick another --instance-type / "
                "--instance-count",
            ) from exc
        raise AzureError(f"{what} failed: HTTP {exc.status_code} {text}") from exc
    except (core.ServiceRequestError, core.ServiceResponseError) as exc:
        raise AzureError(
            f"{what} failed: Azure is not reachable ({first_line(exc)})",
            hint="check the network/proxy; timeouts and retries are bounded (--timeout)",
        ) from exc
    except (ml.exceptions.ValidationException, ml.exceptions.MlException) as exc:
        raise AzureError(f"{what} failed: {getattr(exc, 'message', None) or exc}") from exc


def text_of(value: Any) -> str:
    """An SDK field that is a str in some versions and an enum in others."""
    return str(getattr(value, "value", value))


def first_line(exc: BaseException) -> str:
    text = getattr(exc, "message", None) or str(exc)
    return str(text).strip().splitlines()[0] if str(text).strip() else type(exc).__name__
