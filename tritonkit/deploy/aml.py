"""Deploy a Triton model repository to an Azure ML managed online endpoint (no-code Triton).

Azure ML serves a model registered with ``type: triton_model`` with its own Triton image; the
registered path must be the repository root (``<root>/<model>/config.pbtxt``,
``<root>/<model>/<n>/...``). ``plan()`` runs every check that needs no network (validator,
upload layout under the SDK's own ``.amlignore``/``.gitignore`` rules, names, settings, the
SDK's entity -> REST conversion and its YAML loaders); ``apply()`` registers the model, creates
or updates the endpoint and the deployment, sets traffic, waits and smoke-tests.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import math
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tritonkit._extras import require
from tritonkit.deploy.base import Artifact, DeployPlan, DeployResult, DeployStatus, Progress, SmokeResult
from tritonkit.deploy.checks import (
    AML_TRITON_IMAGE,
    custom_image_problems,
    ModelSummary,
    aml_name_problems,
    ensembles,
    max_concurrent_requests,
    raise_if,
    validate_for_deploy,
)
from tritonkit.errors import AzureError, DeployValidationError, TritonKitError
from tritonkit.repository.trtllm_stage import trtllm_models

logger = logging.getLogger(__name__)

FEATURE = "tritonkit deploy --target aml"
AUTH_MODES = ("key", "aml_token", "aad_token")
#: Azure ML's upper bound for request_timeout_ms.
MAX_REQUEST_TIMEOUT_MS = 180_000
#: request_timeout_ms covers the queue and the network as well as the answer (Azure ML deprecated
#: max_queue_wait for managed endpoints: "increase request_timeout_ms to account for any
#: networking/queue delays", OnlineRequestSettings), so a generation gets this much headroom.
GENERATION_HEADROOM = 1.25
SCHEMA = "https://azuremlschemas.azureedge.net/latest/{}.schema.json"


@dataclass(frozen=True)
class ProbeOptions:
    """Azure ML probe settings (seconds); Triton's no-code image probes its /v2/health endpoints."""

    initial_delay: int
    period: int = 10
    timeout: int = 2
    failure_threshold: int = 30
    success_threshold: int = 1


@dataclass(frozen=True)
class AmlOptions:
    """Everything `tritonkit deploy --target aml` takes (see the README's deploy section)."""

    repository: Path
    endpoint: str
    deployment: str
    instance_type: str
    instance_count: int = 1
    auth_mode: str = "key"
    traffic: dict[str, int] | None = None
    subscription_id: str | None = None
    resource_group: str | None = None
    workspace: str | None = None
    model_name: str | None = None
    model_version: str = "1"
    max_concurrent_requests: int | None = None
    request_timeout_ms: int = 90_000
    #: the longest one answer takes (s); checked against request_timeout_ms when given
    generation_s: float | None = None
    liveness_probe: ProbeOptions = ProbeOptions(initial_delay=120)
    readiness_probe: ProbeOptions = ProbeOptions(initial_delay=10, period=10, failure_threshold=60)
    output_dir: Path = Path("deploy/aml")
    description: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    wait_timeout_s: float = 1800.0
    connection_timeout_s: float = 10.0
    read_timeout_s: float = 120.0
    retry_total: int = 3
    smoke_test: bool = True

    @property
    def registered_model_name(self) -> str:
        return self.model_name or f"{self.endpoint}-triton"


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
        o = self.options
        problems = aml_name_problems("endpoint", o.endpoint) + aml_name_problems("deployment", o.deployment)
        if o.instance_count < 1:
            problems.append(f"--instance-count must be >= 1, got {o.instance_count}")
        if not o.instance_type.strip():
            problems.append("--instance-type is empty (e.g. Standard_NC4as_T4_v3)")
        if o.auth_mode not in AUTH_MODES:
            problems.append(f"--auth-mode must be one of {', '.join(AUTH_MODES)}, got {o.auth_mode!r}")
        if not 1 <= o.request_timeout_ms <= MAX_REQUEST_TIMEOUT_MS:
            problems.append(
                f"--request-timeout-ms must be 1..{MAX_REQUEST_TIMEOUT_MS}, got {o.request_timeout_ms}"
            )
        problems += generation_problems(o.generation_s, o.request_timeout_ms)
        if o.max_concurrent_requests is not None and o.max_concurrent_requests < 1:
            problems.append(f"--max-concurrent-requests must be >= 1, got {o.max_concurrent_requests}")
        if o.traffic is not None:
            problems += traffic_problems(o.traffic)
        if o.wait_timeout_s <= 0:
            problems.append("--timeout must be positive")
        raise_if(problems, "the Azure ML deployment settings are not valid; nothing was sent to Azure")

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
        ents = require("azure.ai.ml.entities", feature=FEATURE)
        o = self.options
        tags = {"created-by": "tritonkit", **o.tags}
        model = ents.Model(
            name=o.registered_model_name,
            version=o.model_version,
            path=str(Path(o.repository).resolve()),
            type="triton_model",
            description=o.description or f"Triton model repository ({', '.join(m.name for m in models)})",
            tags=tags,
        )
        endpoint = ents.ManagedOnlineEndpoint(name=o.endpoint, auth_mode=o.auth_mode, tags=tags)
        deployment = ents.ManagedOnlineDeployment(
            name=o.deployment,
            endpoint_name=o.endpoint,
            model=f"azureml:{o.registered_model_name}:{o.model_version}",
            instance_type=o.instance_type,
            instance_count=o.instance_count,
            request_settings=ents.OnlineRequestSettings(
                max_concurrent_requests_per_instance=self.concurrency(models),
                request_timeout_ms=o.request_timeout_ms,
            ),
            liveness_probe=_probe(ents, o.liveness_probe),
            readiness_probe=_probe(ents, o.readiness_probe),
            scale_settings=ents.DefaultScaleSettings(),
            tags=tags,
        )
        return model, endpoint, deployment

    def documents(self, models: list[ModelSummary]) -> dict[str, dict[str, Any]]:
        """Azure ML CLI v2 YAML documents (model.yml, endpoint.yml, deployment.yml) as dicts."""
        o = self.options
        out_dir = Path(o.output_dir).resolve()
        rel = Path(os.path.relpath(Path(o.repository).resolve(), out_dir)).as_posix()
        tags = {"created-by": "tritonkit", **o.tags}
        return {
            "model.yml": {
                "$schema": SCHEMA.format("model"),
                "name": o.registered_model_name,
                "version": o.model_version,
                "type": "triton_model",
                "path": rel,
                "description": o.description
                or f"Triton model repository ({', '.join(m.name for m in models)})",
                "tags": tags,
            },
            "endpoint.yml": {
                "$schema": SCHEMA.format("managedOnlineEndpoint"),
                "name": o.endpoint,
                "auth_mode": o.auth_mode,
                "tags": tags,
            },
            "deployment.yml": {
                "$schema": SCHEMA.format("managedOnlineDeployment"),
                "name": o.deployment,
                "endpoint_name": o.endpoint,
                "model": f"azureml:{o.registered_model_name}:{o.model_version}",
                "instance_type": o.instance_type,
                "instance_count": o.instance_count,
                "request_settings": {
                    "max_concurrent_requests_per_instance": self.concurrency(models),
                    "request_timeout_ms": o.request_timeout_ms,
                },
                "liveness_probe": _probe_doc(o.liveness_probe),
                "readiness_probe": _probe_doc(o.readiness_probe),
                "scale_settings": {"type": "default"},
                "tags": tags,
            },
        }

    def plan(self) -> DeployPlan:
        models = self.check()
        o = self.options
        docs = self.documents(models)
        texts = {name: _yaml(name, doc) for name, doc in docs.items()}
        check_yaml(texts, relative_origin=Path(o.output_dir).resolve(), repository=Path(o.repository))
        _problems, warnings = aml_layout_problems(o.repository)
        warnings += trtllm_warnings(Path(o.repository))
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
            ("traffic", _traffic_text(o.traffic) if o.traffic is not None else "unchanged"),
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
            "looking up the endpoint", _get_or_none, client.online_endpoints.get, o.endpoint
        )
        if existing is not None and existing.auth_mode and _text(existing.auth_mode).lower() != o.auth_mode:
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
            say(f"traffic set: {_traffic_text(o.traffic)}")
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
                ("traffic", _traffic_text(dict(current.traffic or {})) or "none"),
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
        state = _text(dep.provisioning_state or "unknown")
        return DeployStatus(
            target=self.target,
            ready=state.lower() == "succeeded",
            details=(
                ("provisioning state", state),
                ("instances", f"{dep.instance_count} x {dep.instance_type}"),
                ("traffic", _traffic_text(dict(ep.traffic or {})) or "none"),
                ("scoring uri", triton_base_url(str(ep.scoring_uri or ""))),
            ),
        )


# --------------------------------------------------------------------------- helpers


def decoupled_problems(models: list[ModelSummary]) -> list[str]:
    """What will not work for each decoupled model on an Azure ML managed online endpoint.

    Azure ML documents Triton no-code deployments as called over HTTP on the scoring URI's
    ``/v2/models/<model>/infer`` ("Deploy a model with Triton": the test uses tritonclient.http;
    online endpoints "return predictions under the HTTP protocol", concept-endpoints-online):
    no gRPC port and no streamed answer are documented, and every request is cut at
    request_timeout_ms (180 s at most). Triton 2.51 answers /infer for a decoupled model with 501
    (measured: tests/integration/test_decoupled_triton.py), so such an endpoint could only fail.
    """
    problems: list[str] = []
    for m in (m for m in models if m.decoupled):
        what = (
            f"ensemble '{m.name}' is decoupled because its step '{m.decoupled_via}' is (whatever its "
            "own config says)"
            if m.is_ensemble
            else f"model '{m.name}' is decoupled"
        )
        problem = (
            f"{what}: Azure ML routes only HTTP POST /v2/models/{m.name}/infer to Triton, which answers "
            "it with 501 for a decoupled model; the gRPC stream and generate_stream it needs are not "
            "served there"
        )
        if m.backend == "vllm":
            problem += (
                " (a vLLM stage is always decoupled, and Azure ML's Triton image has no vllm backend): "
                "deploy it with `tritonkit deploy --target aks`, which runs NVIDIA's -vllm-python-py3 image"
            )
        problems.append(problem)
    return problems


def trtllm_warnings(repository: Path) -> list[str]:
    """What tritonkit cannot check offline about unary TensorRT-LLM models on Azure ML.

    (Decoupled ones are refused with every other decoupled model.)
    """
    models = trtllm_models(repository)
    if not models:
        return []
    return [
        f"TensorRT-LLM models {', '.join(models)}: Azure ML's no-code Triton image is documented for "
        "TensorFlow, ONNX Runtime, PyTorch and TensorRT models, not for the tensorrtllm backend (NVIDIA "
        "ships it in the -trtllm-python-py3 image), and it mounts the repository in its own model "
        "directory, not at the serving_root (/models) the engine and tokenizer paths name; tritonkit "
        "cannot check either before deploying: `tritonkit deploy --target aks` runs NVIDIA's image "
        "with the repository at /models"
    ]


def generation_problems(generation_s: float | None, request_timeout_ms: int) -> list[str]:
    """A unary answer of ``generation_s`` seconds must fit the request timeout, with headroom."""
    if generation_s is None:
        return []
    if generation_s <= 0:
        return [f"--generation-s must be positive, got {generation_s}"]
    need_ms = math.ceil(generation_s * 1000 * GENERATION_HEADROOM)
    if need_ms > MAX_REQUEST_TIMEOUT_MS:
        return [
            f"an answer taking {generation_s:g} s needs a request timeout of {need_ms} ms (with "
            f"{GENERATION_HEADROOM:g}x headroom for queueing and network), more than Azure ML's "
            f"{MAX_REQUEST_TIMEOUT_MS} ms limit: cap the generation (fewer tokens), or stream it from "
            "AKS (`tritonkit deploy --target aks`), where pieces arrive as they are made"
        ]
    if need_ms > request_timeout_ms:
        return [
            f"an answer taking {generation_s:g} s would be cut off by --request-timeout-ms "
            f"{request_timeout_ms}: raise it to at least {need_ms} (at most {MAX_REQUEST_TIMEOUT_MS})"
        ]
    return []


def _probe(ents: Any, p: ProbeOptions) -> Any:
    return ents.ProbeSettings(
        initial_delay=p.initial_delay,
        period=p.period,
        timeout=p.timeout,
        failure_threshold=p.failure_threshold,
        success_threshold=p.success_threshold,
    )


def _probe_doc(p: ProbeOptions) -> dict[str, int]:
    return {
        "initial_delay": p.initial_delay,
        "period": p.period,
        "timeout": p.timeout,
        "failure_threshold": p.failure_threshold,
        "success_threshold": p.success_threshold,
    }


def parse_traffic(text: str) -> dict[str, int]:
    """``blue=90,green=10`` -> {"blue": 90, "green": 10}; DeployValidationError on bad syntax."""
    out: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, sep, value = part.partition("=")
        if not sep or not value.strip().isdigit():
            raise DeployValidationError(
                f"--traffic {text!r}: {part!r} is not NAME=PERCENT",
                hint="e.g. --traffic blue=90,green=10",
            )
        out[name.strip()] = int(value)
    if not out:
        raise DeployValidationError("--traffic is empty", hint="e.g. --traffic blue=90,green=10")
    return out


def traffic_problems(traffic: dict[str, int]) -> list[str]:
    problems: list[str] = []
    for name, pct in traffic.items():
        problems += aml_name_problems("deployment", name)
        if not 0 <= pct <= 100:
            problems.append(f"traffic for {name!r} must be 0..100, got {pct}")
    total = sum(traffic.values())
    if total not in (0, 100):
        problems.append(f"traffic percentages must add up to 100 (or all be 0), got {total}")
    return problems


def _traffic_text(traffic: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(traffic.items()))


def triton_base_url(scoring_uri: str) -> str:
    """The Triton base URL of an endpoint: its scoring URI without the trailing ``/score``."""
    uri = scoring_uri.rstrip("/")
    return uri[: -len("/score")] if uri.endswith("/score") else uri


def aml_layout_problems(repository: Path) -> tuple[list[str], list[str]]:
    """(problems, warnings) with the files Azure ML would upload from ``repository``.

    Uses the SDK's own upload listing (``.amlignore``, else ``.gitignore``, at the repository
    root, gitignore syntax), so a ``config.pbtxt`` or a model file hidden by those rules is
    caught before an upload that would produce an endpoint Triton cannot start.
    """
    assets = require("azure.ai.ml._utils._asset_utils", feature=FEATURE)
    root = Path(repository).resolve()
    ignore = assets.get_ignore_file(root)
    uploaded = {
        Path(remote).as_posix()
        for _local, remote in assets.get_upload_files_from_folder(root, prefix="", ignore_file=ignore)
    }
    source = f" by {Path(str(ignore.path)).name}" if ignore.exists() else ""
    problems: list[str] = []
    warnings: list[str] = []
    model_dirs = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    ensembles_here = _ensemble_names(root)
    if not model_dirs:
        problems.append(f"{root} has no model directories (<root>/<model>/config.pbtxt)")
    for mdir in model_dirs:
        name = mdir.name
        if f"{name}/config.pbtxt" not in uploaded:
            if (mdir / "config.pbtxt").is_file():
                problems.append(f"{name}/config.pbtxt is excluded from the upload{source}")
            else:
                problems.append(f"{name}/ has no config.pbtxt (Azure ML's Triton needs <model>/config.pbtxt)")
        versions = [d for d in mdir.iterdir() if d.is_dir() and d.name.isdigit()]
        for other in sorted(d.name for d in mdir.iterdir() if d.is_dir() and not d.name.isdigit()):
            if other != "configs":
                warnings.append(f"{name}/{other}/ is not a numeric version directory; Triton ignores it")
        for v in versions:
            if v.name != str(int(v.name)):
                problems.append(
                    f"{name}/{v.name}/: version directories must not start with 0 (Triton skips them)"
                )
        if not versions:
            problems.append(f"{name}/ has no numeric version directory (<model>/1/...)")
        for v in versions:
            local = [p for p in v.rglob("*") if p.is_file()]
            sent = [p for p in local if p.relative_to(root).as_posix() in uploaded]
            if local and len(sent) < len(local):
                hidden = sorted(p.relative_to(root).as_posix() for p in local if p not in sent)
                listing = ", ".join(hidden[:5]) + (f" and {len(hidden) - 5} more" if len(hidden) > 5 else "")
                if sent:
                    # Maybe on purpose (logs, caches); Triton fails later if the model needed them.
                    warnings.append(f"{listing} excluded from the upload{source}")
                else:
                    problems.append(
                        f"{listing} excluded from the upload{source}: {name}/{v.name}/ arrives empty"
                    )
            elif not local and name not in ensembles_here:
                problems.append(f"{name}/{v.name}/ is empty: Triton finds no model file to load")
            elif not local:
                warnings.append(
                    f"{name}/{v.name}/ is empty and blob storage keeps no empty directories: tritonkit "
                    f"uploads it with a placeholder file; before `az ml model create -f model.yml` "
                    f"add one yourself (touch {name}/{v.name}/.keep)"
                )
    return problems, warnings


def empty_version_dirs(root: Path) -> list[Path]:
    """Numeric version directories without any file (ensembles have them)."""
    return sorted(
        v
        for v in Path(root).glob("*/*")
        if v.is_dir()
        and v.name.isdigit()
        and not v.parent.name.startswith(".")
        and not any(p.is_file() for p in v.rglob("*"))
    )


PLACEHOLDER = ".tritonkit-keep"


@contextlib.contextmanager
def staged_repository(root: Path) -> Iterator[Path]:
    """``root`` as Azure ML should receive it: a mirror of symlinks to its files plus a placeholder
    in every empty version directory (blob storage drops empty directories, and Triton needs an
    ensemble's ``1/``). The user's repository is not touched; the mirror is removed afterwards."""
    root = Path(root).resolve()
    empty = empty_version_dirs(root)
    if not empty:
        yield root
        return
    with tempfile.TemporaryDirectory(prefix="tritonkit-aml-") as tmp:
        mirror = Path(tmp) / root.name
        for dirpath, _dirnames, filenames in os.walk(root):
            rel = Path(dirpath).relative_to(root)
            (mirror / rel).mkdir(parents=True, exist_ok=True)
            for fname in filenames:
                if rel == Path(".") and fname in (".amlignore", ".gitignore"):
                    # The SDK resolves the ignore file's path: a symlink would anchor its
                    # patterns at the original root instead of the mirror.
                    shutil.copy2(Path(dirpath) / fname, mirror / fname)
                else:
                    os.symlink(Path(dirpath) / fname, mirror / rel / fname)
        for v in empty:
            (mirror / v.relative_to(root) / PLACEHOLDER).write_text(
                "Keeps this Triton version directory in Azure ML's upload.\n", encoding="utf-8"
            )
        yield mirror


def _ensemble_names(root: Path) -> set[str]:
    """Ensembles legitimately have an empty version directory."""
    names: set[str] = set()
    for cfg in root.glob("*/config.pbtxt"):
        try:
            text = cfg.read_text(encoding="utf-8")
        except OSError:
            continue
        if 'platform: "ensemble"' in text or "platform: 'ensemble'" in text:
            names.add(cfg.parent.name)
    return names


def sdk_validate(endpoint: Any, deployment: Any) -> None:
    """The SDK's own entity -> REST validation, which it otherwise runs only after calling Azure."""
    ml = require("azure.ai.ml", feature=FEATURE)
    problems: list[str] = []
    # Any region will do: the location is only copied into the REST body.
    for what, entity, method, kwargs in (
        ("endpoint", endpoint, "_to_rest_online_endpoint", {"location": "westeurope"}),
        ("deployment", deployment, "_to_rest_object", {"location": "westeurope"}),
    ):
        try:
            getattr(entity, method)(**kwargs)
        except (ml.exceptions.ValidationException, ml.exceptions.MlException, ValueError, TypeError) as exc:
            problems.append(f"{what}: {getattr(exc, 'message', None) or exc}")
    raise_if(problems, "the Azure ML SDK rejects this deployment")


def check_yaml(texts: dict[str, str], *, relative_origin: Path, repository: Path) -> None:
    """Load the rendered YAML with the SDK's loaders (the schemas `az ml` uses) and compare back."""
    ml = require("azure.ai.ml", feature=FEATURE)
    from marshmallow.exceptions import ValidationError as SchemaError

    origin = str(relative_origin / "x.yml")
    problems: list[str] = []
    loaded: dict[str, Any] = {}
    for name, loader in (
        ("model.yml", ml.load_model),
        ("endpoint.yml", ml.load_online_endpoint),
        ("deployment.yml", ml.load_online_deployment),
    ):
        try:
            loaded[name] = loader(source=io.StringIO(texts[name]), relative_origin=origin)
        except SchemaError as exc:
            problems.append(f"{name}: {json.dumps(exc.messages, default=str)}")
        except (ml.exceptions.ValidationException, ml.exceptions.MlException, ValueError) as exc:
            problems.append(f"{name}: {_first_line(exc)}")
    raise_if(problems, "the generated Azure ML YAML does not load with the SDK")
    model = loaded["model.yml"]
    resolved = (relative_origin / str(model.path)).resolve()
    if resolved != Path(repository).resolve():
        problems.append(f"model.yml path resolves to {resolved}, not the repository {repository}")
    if str(model.type) != "triton_model":
        problems.append(f"model.yml loads with type {model.type!r}, not triton_model")
    dep = loaded["deployment.yml"]
    if dep.request_settings is None or (dep.request_settings.max_concurrent_requests_per_instance or 1) <= 1:
        problems.append("deployment.yml has no max_concurrent_requests_per_instance above 1")
    raise_if(problems, "the generated Azure ML YAML does not say what was planned")


def _yaml(name: str, doc: dict[str, Any]) -> str:
    header = f"# Generated by `tritonkit deploy --target aml --dry-run`. Apply with: az ml {_az(name)}\n"
    return header + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)


def _az(name: str) -> str:
    return {
        "model.yml": "model create -f model.yml",
        "endpoint.yml": "online-endpoint create -f endpoint.yml",
        "deployment.yml": "online-deployment create -f deployment.yml",
    }[name]


def _get_or_none(get: Any, name: str) -> Any:
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
            f"{what} failed: Azure refused the credential ({_first_line(exc)})",
            hint="sign in with `az login` (or set AZURE_CLIENT_ID/AZURE_TENANT_ID/AZURE_CLIENT_SECRET) "
            "and check your role on the workspace",
        ) from exc
    except core.ResourceNotFoundError as exc:
        raise AzureError(
            f"{what} failed: not found ({_first_line(exc)})",
            hint="check --subscription, --resource-group and --workspace name an existing Azure ML workspace",
        ) from exc
    except core.HttpResponseError as exc:
        text = _first_line(exc)
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
            f"{what} failed: Azure is not reachable ({_first_line(exc)})",
            hint="check the network/proxy; timeouts and retries are bounded (--timeout)",
        ) from exc
    except (ml.exceptions.ValidationException, ml.exceptions.MlException) as exc:
        raise AzureError(f"{what} failed: {getattr(exc, 'message', None) or exc}") from exc


def _text(value: Any) -> str:
    """An SDK field that is a str in some versions and an enum in others."""
    return str(getattr(value, "value", value))


def _first_line(exc: BaseException) -> str:
    text = getattr(exc, "message", None) or str(exc)
    return str(text).strip().splitlines()[0] if str(text).strip() else type(exc).__name__
