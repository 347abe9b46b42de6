"""Deploy a Triton model repository to an Azure ML managed online endpoint (no-code Triton).

Azure ML serves a model registered with ``type: triton_model`` with its own Triton image; the
registered path must be the repository root (``<root>/<model>/config.pbtxt``,
``<root>/<model>/<n>/...``). ``plan()`` runs every check that needs no network (validator,
upload layout under the SDK's own ``.amlignore``/``.gitignore`` rules, names, settings, the
SDK's entity -> REST conversion and its YAML loaders); ``apply()`` registers the model, creates
or updates the endpoint and the deployment, sets traffic, waits and smoke-tests.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from tritonkit._extras import require
from tritonkit.deploy.aml import render
from tritonkit.deploy.aml.azure import azure_call, get_or_none, text_of
from tritonkit.deploy.aml.checks import (
    aml_layout_problems,
    backend_warnings,
    check_yaml,
    decoupled_problems,
    sdk_validate,
)
from tritonkit.deploy.aml.options import FEATURE, AmlOptions, settings_problems, traffic_text
from tritonkit.deploy.aml.upload import staged_repository
from tritonkit.deploy.base import Artifact, DeployPlan, DeployResult, DeployStatus, Progress, SmokeResult
from tritonkit.deploy.checks import (
    AML_TRITON_IMAGE,
    ModelSummary,
    custom_image_problems,
    ensembles,
    max_concurrent_requests,
    raise_if,
    validate_for_deploy,
)
from tritonkit.errors import AzureError

logger = logging.getLogger(__name__)


class AmlDeployer:
    """Deploys a model repository to an Azure ML managed online endpoint."""

    target = "aml"

    def __init__(self, *, options: AmlOptions, credential: Any | None = None, **client_kwargs: Any) -> None:
        """``credential``: an azure-core TokenCredential (default DefaultAzureCredential).

        ``client_kwargs`` go to MLClient (and so to azure-core's pipeline), e.g. ``transport``.
        """
        self.options = options
        self._credential = credential
        self._client_kwargs = client_kwargs
        self._ml_client: Any | None = None

    # ------------------------------------------------------------------ offline checks
    def check_settings(self) -> None:
        """Names, counts, auth mode, traffic and request settings; no file or network access."""
        raise_if(
            settings_problems(self.options),
            "the Azure ML deployment settings are not valid; nothing was sent to Azure",
        )

    def check(self) -> list[ModelSummary]:
        """Every offline check, in order: settings, repository validator, upload layout, SDK validation."""
        self.check_settings()
        raise_if(custom_image_problems(self.options.repository), "nothing was sent to Azure")
        models = validate_for_deploy(self.options.repository, target=AML_TRITON_IMAGE)
        raise_if(
            decoupled_problems(models),
            "Azure ML's managed online endpoint cannot serve decoupled (streaming) models; "
            "nothing was sent to Azure",
            hint="deploy the streaming models to AKS (`tritonkit deploy --target aks`: gRPC streaming and "
            "HTTP generate_stream), and to Azure ML a repository holding only unary models (e.g. "
            "vlm_ensemble and arr_coc, built without vlm_stream and arr_coc_stream)",
        )
        problems, _warnings = aml_layout_problems(self.options.repository)
        raise_if(
            problems,
            f"Azure ML would not serve {self.options.repository} as a Triton repository",
            hint="fix the layout; Azure ML applies the repository root's .amlignore, else its .gitignore "
            "(a .gitignore that ignores generated files hides the models: add a .amlignore, which takes "
            "precedence, listing only what Azure ML should skip)",
        )
        _model, endpoint, deployment = self.entities(models)
        sdk_validate(endpoint, deployment)
        return models

    def concurrency(self, models: list[ModelSummary]) -> int:
        o = self.options
        return (
            o.max_concurrent_requests
            if o.max_concurrent_requests is not None
            else max_concurrent_requests(models)
        )

    # ------------------------------------------------------------------ entities and YAML
    def entities(self, models: list[ModelSummary]) -> tuple[Any, Any, Any]:
        """The SDK entities: Model (triton_model), ManagedOnlineEndpoint, ManagedOnlineDeployment."""
        return render.entities(self.options, models, self.concurrency(models))

    def documents(self, models: list[ModelSummary]) -> dict[str, dict[str, Any]]:
        """Azure ML CLI v2 YAML documents (model.yml, endpoint.yml, deployment.yml) as dicts."""
        return render.documents(self.options, models, self.concurrency(models))

    def plan(self) -> DeployPlan:
        models = self.check()
        o = self.options
        docs = self.documents(models)
        texts = {name: render.yaml_text(name, doc) for name, doc in docs.items()}
        check_yaml(texts, relative_origin=Path(o.output_dir).resolve(), repository=Path(o.repository))
        _problems, warnings = aml_layout_problems(o.repository)
        warnings += backend_warnings(Path(o.repository))
        if o.traffic is None:
            warnings.append(
                f"deployment {o.deployment!r} gets no traffic; route to it with --traffic {o.deployment}=100 "
                "(or blue/green: --traffic blue=90,green=10)"
            )
        artifacts = tuple(
            Artifact(filename=name, text=text, description=f"Azure ML CLI v2 {name[:-4]} spec")
            for name, text in texts.items()
        )
        summary = (
            ("endpoint", o.endpoint),
            ("deployment", o.deployment),
            ("auth mode", o.auth_mode),
            ("model", f"{o.registered_model_name}:{o.model_version} (triton_model)"),
            ("instance", f"{o.instance_count} x {o.instance_type}"),
            ("max concurrent requests per instance", str(self.concurrency(models))),
            (
                "request timeout",
                f"{o.request_timeout_ms} ms"
                + (f" (longest answer {o.generation_s:g} s)" if o.generation_s is not None else ""),
            ),
            ("traffic", traffic_text(o.traffic) if o.traffic is not None else "unchanged"),
            ("models", ", ".join(m.name for m in models)),
        )
        return DeployPlan(
            target=self.target,
            repository=Path(o.repository),
            artifacts=artifacts,
            summary=summary,
            warnings=tuple(warnings),
        )

    # ------------------------------------------------------------------ network

    def ml_client(self) -> Any:
        """An MLClient with explicit connection/read timeouts and a bounded retry."""
        if self._ml_client is not None:
            return self._ml_client
        o = self.options
        missing = [
            flag
            for flag, value in (
                ("--subscription", o.subscription_id),
                ("--resource-group", o.resource_group),
                ("--workspace", o.workspace),
            )
            if not value
        ]
        raise_if(
            [f"{flag} is required to reach Azure ML" for flag in missing],
            "the Azure ML workspace is not fully named",
            hint="pass --subscription, --resource-group and --workspace "
            "(or set AZURE_SUBSCRIPTION_ID, AZURE_RESOURCE_GROUP, AZUREML_WORKSPACE_NAME), or use --dry-run",
        )
        ml = require("azure.ai.ml", feature=FEATURE)
        credential = self._credential
        if credential is None:
            identity = require("azure.identity", feature=FEATURE)
            credential = identity.DefaultAzureCredential()
            self._credential = credential
        kwargs: dict[str, Any] = {
            "connection_timeout": o.connection_timeout_s,
            "read_timeout": o.read_timeout_s,
            "retry_total": o.retry_total,
            "retry_backoff_factor": 1.0,
            "retry_backoff_max": 30,
            "show_progress": False,
            "enable_telemetry": False,
            **self._client_kwargs,
        }
        self._ml_client = ml.MLClient(credential, o.subscription_id, o.resource_group, o.workspace, **kwargs)
        return self._ml_client

    def apply(self, plan: DeployPlan, *, progress: Progress | None = None) -> DeployResult:
        say = progress or (lambda _msg: None)
        models = self.check()
        o = self.options
        client = self.ml_client()
        model, endpoint, deployment = self.entities(models)

        with staged_repository(Path(o.repository)) as upload_root:
            model.path = str(upload_root)
            registered = azure_call("registering the model", client.models.create_or_update, model)
        say(f"registered model {registered.name}:{registered.version}")
        deployment.model = registered.id or deployment.model

        existing = azure_call(
            "looking up the endpoint", get_or_none, client.online_endpoints.get, o.endpoint
        )
        if existing is not None and existing.auth_mode and text_of(existing.auth_mode).lower() != o.auth_mode:
            say(f"note: endpoint {o.endpoint} keeps its auth mode {existing.auth_mode} (it cannot change)")
        if existing is None or o.tags:
            if existing is not None:
                endpoint.traffic = existing.traffic
            self._wait(
                "creating/updating the endpoint",
                azure_call(
                    "creating/updating the endpoint", client.online_endpoints.begin_create_or_update, endpoint
                ),
            )
            say(f"endpoint {o.endpoint} ready")
        self._wait(
            "creating/updating the deployment",
            azure_call(
                "creating/updating the deployment",
                client.online_deployments.begin_create_or_update,
                deployment,
            ),
        )
        say(f"deployment {o.deployment} ready")
        current = azure_call("reading the endpoint", client.online_endpoints.get, o.endpoint)
        if o.traffic is not None:
            current.traffic = dict(o.traffic)
            self._wait(
                "setting traffic",
                azure_call("setting traffic", client.online_endpoints.begin_create_or_update, current),
            )
            say(f"traffic set: {traffic_text(o.traffic)}")
        scoring_uri = triton_base_url(str(current.scoring_uri or ""))
        smoke: tuple[SmokeResult, ...] = ()
        if o.smoke_test:
            from tritonkit.deploy.smoke import smoke_test

            smoke = tuple(
                smoke_test(
                    scoring_uri, models=ensembles(models) or [m.name for m in models], auth=self._auth()
                )
            )
        return DeployResult(
            target=self.target,
            scoring_uri=scoring_uri,
            summary=(
                ("endpoint", o.endpoint),
                ("deployment", o.deployment),
                ("traffic", traffic_text(dict(current.traffic or {})) or "none"),
            ),
            smoke=smoke,
        )

    def _auth(self) -> Any:
        """Credential for the smoke test, routed to this deployment (it may have no traffic yet)."""
        from tritonkit.client.auth import AmlTokenAuth, CombinedAuth, DeploymentRouting, EntraIdAuth

        primary: Any
        if self.options.auth_mode == "aad_token":
            primary = EntraIdAuth(self._credential)
        else:
            primary = AmlTokenAuth(self.options.endpoint, ml_client=self.ml_client())
        return CombinedAuth(primary, DeploymentRouting(self.options.deployment))

    def _wait(self, what: str, poller: Any) -> Any:
        """Wait for a long-running operation, at most ``wait_timeout_s``."""
        timeout = self.options.wait_timeout_s
        start = time.monotonic()
        result = azure_call(what, poller.result, timeout=timeout)
        if not poller.done():
            raise AzureError(
                f"{what} did not finish within {timeout:.0f}s (still {poller.status()})",
                hint="Azure keeps working on it: check `az ml online-deployment show`, then run again "
                "or raise --timeout",
            )
        logger.debug("%s took %.1fs", what, time.monotonic() - start)
        return result

    def status(self) -> DeployStatus:
        client = self.ml_client()
        o = self.options
        dep = azure_call("reading the deployment", client.online_deployments.get, o.deployment, o.endpoint)
        ep = azure_call("reading the endpoint", client.online_endpoints.get, o.endpoint)
        state = text_of(dep.provisioning_state or "unknown")
        return DeployStatus(
            target=self.target,
            ready=state.lower() == "succeeded",
            details=(
                ("provisioning state", state),
                ("instances", f"{dep.instance_count} x {dep.instance_type}"),
                ("traffic", traffic_text(dict(ep.traffic or {})) or "none"),
                ("scoring uri", triton_base_url(str(ep.scoring_uri or ""))),
            ),
        )


def triton_base_url(scoring_uri: str) -> str:
    """The Triton base URL of an endpoint: its scoring URI without the trailing ``/score``."""
    uri = scoring_uri.rstrip("/")
    return uri[: -len("/score")] if uri.endswith("/score") else uri
