"""`tritonkit deploy aml|aks REPOSITORY`: check a repository offline, then deploy it (or --dry-run).

One sub-command per target, each typed against the :class:`~tritonkit.deploy.base.Deployer`
protocol; the options both share are declared once. `tritonkit deploy REPOSITORY --target aml|aks`
(the older spelling) is kept as an alias: the group rewrites it to the sub-command before parsing,
so both spellings take exactly the same options.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from tritonkit.cli import render
from tritonkit.deploy.base import Deployer
from tritonkit.errors import DeployError, DeployValidationError

HELP = (
    "Deploy a model repository to an Azure ML managed online endpoint (`deploy aml`) or to AKS "
    "(`deploy aks`). Every check that needs no network runs first; --dry-run writes the Azure ML "
    "CLI v2 YAML or the Kubernetes manifests instead of deploying. `deploy REPOSITORY --target "
    "aml|aks` is an alias of the sub-commands."
)
AML_HELP = "Deploy to an Azure ML managed online endpoint (--dry-run: write its CLI v2 YAML)."
AKS_HELP = "Deploy to AKS (--dry-run: write the Kubernetes manifests, or a Helm chart)."

DEFAULT_OUT = {"aml": Path("deploy/aml"), "aks": Path("deploy/aks")}
TARGETS = tuple(DEFAULT_OUT)


def alias_target(args: Sequence[str]) -> list[str]:
    """``REPO --target aks ...`` -> ``aks REPO ...`` (the alias); other argument lists unchanged."""
    out = list(args)
    if out and out[0] in TARGETS:
        return out
    for i, arg in enumerate(out):
        if arg == "--target" or arg.startswith("--target="):
            value = arg.partition("=")[2] if "=" in arg else (out[i + 1] if i + 1 < len(out) else "")
            rest = out[:i] + out[i + (1 if "=" in arg else 2) :]
            if value not in TARGETS:
                raise DeployValidationError(
                    f"--target must be aml or aks, got {value!r}", hint="tritonkit deploy aml|aks REPO ..."
                )
            return [value, *rest]
    return out


class _TargetAliasGroup(TyperGroup):
    """The `deploy` group; reads the `--target` alias before Click parses the arguments."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:  # ctx: Typer's click Context
        return super().parse_args(ctx, alias_target(args))


app = typer.Typer(
    cls=_TargetAliasGroup,
    help=HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

# --- the options every target takes (declared once)
Repository = Annotated[Path, typer.Argument(help="The model repository to deploy (validated first).")]
DryRun = Annotated[
    bool, typer.Option("--dry-run", help="Write the deployment files to -o DIR instead of deploying.")
]
Output = Annotated[
    Path | None,
    typer.Option(
        "-o",
        "--output",
        help="Where --dry-run writes (default deploy/aml, deploy/aks; deploy/aks-chart with --format helm).",
    ),
]
Timeout = Annotated[
    float | None, typer.Option("--timeout", help="Seconds to wait for the deployment (aml 1800, aks 900).")
]
NoSmokeTest = Annotated[bool, typer.Option("--no-smoke-test", help="Skip the smoke test after deploying.")]
StatusOnly = Annotated[
    bool, typer.Option("--status", help="Only report the live state of an existing deployment (no changes).")
]


@app.command("aml", help=AML_HELP)
def aml(
    repository: Repository,
    dry_run: DryRun = False,
    output: Output = None,
    timeout: Timeout = None,
    no_smoke_test: NoSmokeTest = False,
    status: StatusOnly = False,
    endpoint: str | None = typer.Option(None, "--endpoint", help="Online endpoint name."),
    deployment: str | None = typer.Option(None, "--deployment", help="Deployment name, e.g. blue."),
    instance_type: str | None = typer.Option(
        None, "--instance-type", help="VM SKU, e.g. Standard_NC4as_T4_v3."
    ),
    instance_count: int = typer.Option(1, "--instance-count", help="Instances (>= 1)."),
    auth_mode: str = typer.Option("key", "--auth-mode", help="key, aml_token or aad_token."),
    traffic: str | None = typer.Option(
        None, "--traffic", help="Traffic split, e.g. blue=90,green=10 (default: unchanged)."
    ),
    subscription: str | None = typer.Option(
        None, "--subscription", envvar="AZURE_SUBSCRIPTION_ID", help="Azure subscription id."
    ),
    resource_group: str | None = typer.Option(
        None, "--resource-group", envvar="AZURE_RESOURCE_GROUP", help="Resource group."
    ),
    workspace: str | None = typer.Option(
        None, "--workspace", envvar="AZUREML_WORKSPACE_NAME", help="Azure ML workspace."
    ),
    model_name: str | None = typer.Option(
        None, "--model-name", help="Registered model name (default <endpoint>-triton)."
    ),
    model_version: str = typer.Option("1", "--model-version", help="Registered model version."),
    max_concurrent_requests: int | None = typer.Option(
        None,
        "--max-concurrent-requests",
        help="max_concurrent_requests_per_instance (default: derived from the batching).",
    ),
    request_timeout_ms: int = typer.Option(
        90_000, "--request-timeout-ms", help="Request timeout in ms (<= 180000)."
    ),
    generation_s: float | None = typer.Option(
        None,
        "--generation-s",
        help="The longest one answer takes (s), e.g. a full-length generation measured with "
        "`tritonkit perf`: refused when it cannot fit the request timeout.",
    ),
) -> None:
    from tritonkit.deploy.aml import AmlDeployer, AmlOptions, parse_traffic

    given = (("--endpoint", endpoint), ("--deployment", deployment), ("--instance-type", instance_type))
    missing = ", ".join(flag for flag, value in given if not value)
    if not endpoint or not deployment or not instance_type:
        raise DeployValidationError(f"deploy aml needs {missing}")
    deployer = AmlDeployer(
        options=AmlOptions(
            repository=repository,
            endpoint=endpoint,
            deployment=deployment,
            instance_type=instance_type,
            instance_count=instance_count,
            auth_mode=auth_mode,
            traffic=parse_traffic(traffic) if traffic is not None else None,
            subscription_id=subscription,
            resource_group=resource_group,
            workspace=workspace,
            model_name=model_name,
            model_version=model_version,
            max_concurrent_requests=max_concurrent_requests,
            request_timeout_ms=request_timeout_ms,
            generation_s=generation_s,
            output_dir=output or DEFAULT_OUT["aml"],
            wait_timeout_s=timeout or 1800.0,
            smoke_test=not no_smoke_test,
        )
    )
    run(deployer, status=status, dry_run=dry_run, out=output or DEFAULT_OUT["aml"])


@app.command("aks", help=AKS_HELP)
def aks(
    repository: Repository,
    dry_run: DryRun = False,
    output: Output = None,
    timeout: Timeout = None,
    no_smoke_test: NoSmokeTest = False,
    status: StatusOnly = False,
    model_repository: str | None = typer.Option(
        None,
        "--model-repository",
        help="Where Triton reads the repository: as://ACCOUNT/CONTAINER/PATH or pvc://CLAIM/PATH.",
    ),
    namespace: str = typer.Option("triton", "--namespace", help="Namespace."),
    name: str = typer.Option("triton", "--name", help="Deployment/Service name."),
    image: str | None = typer.Option(None, "--image", help="Image (default: build's `image:`, else 24.10)."),
    replicas: int = typer.Option(1, "--replicas", help="Replicas (HPA minimum by default)."),
    gpu_count: int = typer.Option(1, "--gpu-count", help="nvidia.com/gpu per pod (0: CPU only)."),
    node_selector: str = typer.Option(
        "kubernetes.azure.com/accelerator=nvidia",
        "--node-selector",
        help="KEY=VALUE of the GPU node pool, or 'none'.",
    ),
    no_gpu_toleration: bool = typer.Option(
        False, "--no-gpu-toleration", help="Leave out the sku=gpu:NoSchedule toleration."
    ),
    storage_secret: str = typer.Option(
        "triton-storage",
        "--storage-secret",
        help="Secret with AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY for as:// repositories.",
    ),
    workload_identity_client_id: str | None = typer.Option(
        None,
        "--workload-identity-client-id",
        help="Use Azure workload identity (this client id) instead of the storage Secret.",
    ),
    strict_readiness: bool = typer.Option(
        True, "--strict-readiness/--no-strict-readiness", help="Triton's --strict-readiness."
    ),
    exit_timeout_secs: int = typer.Option(
        30, "--exit-timeout-secs", help="Triton's drain time; grace period is 10 s longer."
    ),
    restricted_api_secret: str | None = typer.Option(
        None,
        "--restricted-api-secret",
        help="Secret (key 'key') guarding Triton's admin APIs (header triton-admin-key).",
    ),
    cpu_request: str = typer.Option("2", "--cpu-request", help="CPU request."),
    cpu_limit: str = typer.Option("4", "--cpu-limit", help="CPU limit."),
    memory_request: str = typer.Option("8Gi", "--memory-request", help="Memory request."),
    memory_limit: str = typer.Option("16Gi", "--memory-limit", help="Memory limit."),
    shm_size: str = typer.Option("1Gi", "--shm-size", help="/dev/shm size (memory emptyDir)."),
    tmp_size: str = typer.Option(
        "20Gi", "--tmp-size", help="/tmp emptyDir size (Triton downloads as:// repositories there)."
    ),
    monitoring: str = typer.Option(
        "azure-managed-prometheus",
        "--monitoring",
        help="azure-managed-prometheus (azmonitoring.coreos.com monitors, Azure rule groups), "
        "prometheus-operator (monitoring.coreos.com monitors, PrometheusRule) or none.",
    ),
    autoscaler: str = typer.Option(
        "keda",
        "--autoscaler",
        help="keda (ScaledObject on queue time per request), hpa (autoscaling/v2) or none.",
    ),
    hpa_metric: str = typer.Option(
        "queue", "--hpa-metric", help="--autoscaler hpa: queue (prometheus-adapter) or cpu."
    ),
    prometheus_query_endpoint: str | None = typer.Option(
        None,
        "--prometheus-query-endpoint",
        help="Prometheus HTTP API KEDA queries: the Azure Monitor workspace's query endpoint "
        "(default for prometheus-operator: the in-cluster kube-prometheus-stack).",
    ),
    monitoring_namespace: str = typer.Option(
        "monitoring", "--monitoring-namespace", help="prometheus-operator: Prometheus's namespace."
    ),
    prometheus_release: str = typer.Option(
        "kube-prometheus-stack",
        "--prometheus-release",
        help="prometheus-operator: the kube-prometheus-stack release (its `release` label).",
    ),
    keda_identity_client_id: str | None = typer.Option(
        None,
        "--keda-identity-client-id",
        help="Client id of the identity KEDA's workload identity uses (default: KEDA's own).",
    ),
    min_replicas: int | None = typer.Option(None, "--min-replicas", help="Autoscaler minimum."),
    max_replicas: int = typer.Option(4, "--max-replicas", help="Autoscaler maximum."),
    cpu_target: int = typer.Option(70, "--cpu-target", help="--hpa-metric cpu: target utilisation %."),
    queue_time_target_us: int = typer.Option(
        50_000, "--queue-time-target-us", help="Target average queue time per request (us)."
    ),
    no_dcgm_exporter: bool = typer.Option(
        False, "--no-dcgm-exporter", help="Leave out the DCGM exporter (GPU metrics) and its monitor."
    ),
    max_stream_seconds: int = typer.Option(
        600,
        "--max-stream-seconds",
        help="Longest streaming (decoupled) request: drain time and load-balancer idle timeout.",
    ),
    output_format: str = typer.Option(
        "manifests", "--format", help="--dry-run output: manifests (plain YAML) or helm (a chart)."
    ),
    service_type: str = typer.Option(
        "ClusterIP", "--service-type", help="ClusterIP, LoadBalancer or NodePort."
    ),
    no_device_plugin: bool = typer.Option(
        False, "--no-device-plugin", help="Leave out the NVIDIA device plugin DaemonSet."
    ),
    context: str | None = typer.Option(None, "--context", help="kubeconfig context."),
    smoke_url: str | None = typer.Option(
        None,
        "--smoke-url",
        help="Triton URL for the smoke test (default: LoadBalancer address, else a port-forward).",
    ),
) -> None:
    from tritonkit.deploy.aks import DEFAULT_IMAGE, AksDeployer, AksOptions
    from tritonkit.deploy.aks_options import parse_node_selector

    if not model_repository:
        raise DeployValidationError(
            "deploy aks needs --model-repository (as://ACCOUNT/CONTAINER/PATH or pvc://CLAIM/PATH)"
        )
    deployer = AksDeployer(
        options=AksOptions(
            repository=repository,
            model_repository=model_repository,
            name=name,
            namespace=namespace,
            image=image or DEFAULT_IMAGE,
            replicas=replicas,
            gpu_count=gpu_count,
            gpu_node_selector=parse_node_selector(node_selector),
            gpu_toleration=not no_gpu_toleration,
            storage_secret=storage_secret,
            workload_identity_client_id=workload_identity_client_id,
            strict_readiness=strict_readiness,
            exit_timeout_secs=exit_timeout_secs,
            restricted_api_secret=restricted_api_secret,
            cpu_request=cpu_request,
            cpu_limit=cpu_limit,
            memory_request=memory_request,
            memory_limit=memory_limit,
            shm_size=shm_size,
            tmp_size=tmp_size,
            service_type=service_type,
            monitoring=monitoring,
            autoscaler=autoscaler,
            hpa_metric=hpa_metric,
            prometheus_query_endpoint=prometheus_query_endpoint,
            keda_identity_client_id=keda_identity_client_id,
            monitoring_namespace=monitoring_namespace,
            prometheus_release=prometheus_release,
            dcgm_exporter=not no_dcgm_exporter,
            max_stream_seconds=max_stream_seconds,
            output_format=output_format,
            min_replicas=min_replicas,
            max_replicas=max_replicas,
            cpu_target_percent=cpu_target,
            queue_time_target_us=queue_time_target_us,
            device_plugin=not no_device_plugin,
            rollout_timeout_s=timeout or 900.0,
            context=context,
            smoke_url=smoke_url,
            smoke_test=not no_smoke_test,
        )
    )
    default_out = Path("deploy/aks-chart") if output_format == "helm" else DEFAULT_OUT["aks"]
    run(deployer, status=status, dry_run=dry_run, out=output or default_out)


def run(deployer: Deployer, *, status: bool, dry_run: bool, out: Path) -> None:
    """Report the status, write the plan (--dry-run), or apply it and show the smoke test."""
    from tritonkit.deploy.base import write_artifacts

    if status:
        state = deployer.status()
        render.table(f"{state.target} status", ["", ""], state.details)
        render.info("ready" if state.ready else "not ready")
        return
    plan = deployer.plan()
    for warning in plan.warnings:
        render.warn(warning)
    render.table(f"{plan.target} deployment plan", ["setting", "value"], plan.summary)
    if dry_run:
        written = write_artifacts(plan, out)
        for path in written:
            render.info(f"wrote {path}")
        render.info(f"dry run: nothing was deployed ({len(written)} files in {out})")
        return
    result = deployer.apply(plan, progress=render.info)
    if result.summary:
        render.table(None, ["", ""], result.summary)
    if result.scoring_uri:
        render.info(f"scoring URI: {result.scoring_uri}")
    failed = [s for s in result.smoke if not s.ok]
    for step in result.smoke:
        render.info(f"smoke test: {step.check}: {'ok' if step.ok else 'FAILED'} {step.detail}".rstrip())
    if failed:
        raise DeployError(
            f"deployed, but the smoke test failed: {', '.join(s.check for s in failed)}",
            hint="look at the endpoint's logs (az ml online-deployment get-logs / kubectl logs)",
        )
