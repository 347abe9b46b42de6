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
from tritonkit.deploy.base import Deployer, DeployPlan
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


# --- the AKS options
AksModelRepository = Annotated[
    str | None,
    typer.Option(
        "--model-repository",
        help="Where Triton reads the repository: as://ACCOUNT/CONTAINER/PATH or pvc://CLAIM/PATH.",
    ),
]
AksNamespace = Annotated[str, typer.Option("--namespace", help="Namespace.")]
AksName = Annotated[str, typer.Option("--name", help="Deployment/Service name.")]
AksImage = Annotated[
    str | None,
    typer.Option(
        "--image", help="Triton image (default: the spec's `image:` recorded by build, else NGC 24.10)."
    ),
]
AksReplicas = Annotated[int, typer.Option("--replicas", help="Replicas (HPA minimum by default).")]
AksGpuCount = Annotated[int, typer.Option("--gpu-count", help="nvidia.com/gpu per pod (0: CPU only).")]
AksNodeSelector = Annotated[
    str, typer.Option("--node-selector", help="KEY=VALUE of the GPU node pool, or 'none'.")
]
AksNoGpuToleration = Annotated[
    bool, typer.Option("--no-gpu-toleration", help="Leave out the sku=gpu:NoSchedule toleration.")
]
AksStorageSecret = Annotated[
    str,
    typer.Option(
        "--storage-secret",
        help="Secret with AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY for as:// repositories.",
    ),
]
AksWorkloadIdentityClientId = Annotated[
    str | None,
    typer.Option(
        "--workload-identity-client-id",
        help="Use Azure workload identity (this client id) instead of the storage Secret.",
    ),
]
AksStrictReadiness = Annotated[
    bool, typer.Option("--strict-readiness/--no-strict-readiness", help="Triton's --strict-readiness.")
]
AksExitTimeoutSecs = Annotated[
    int, typer.Option("--exit-timeout-secs", help="Triton's drain time; grace period is 10 s longer.")
]
AksRestrictedApiSecret = Annotated[
    str | None,
    typer.Option(
        "--restricted-api-secret",
        help="Secret (key 'key') guarding Triton's admin APIs (header triton-admin-key).",
    ),
]
AksCpuRequest = Annotated[str, typer.Option("--cpu-request", help="CPU request (and limit: Guaranteed QoS).")]
AksCpuLimit = Annotated[
    str | None, typer.Option("--cpu-limit", help="CPU limit (default and only accepted value: the request).")
]
AksMemoryRequest = Annotated[
    str, typer.Option("--memory-request", help="Memory request (and limit: Guaranteed QoS).")
]
AksMemoryLimit = Annotated[
    str | None,
    typer.Option("--memory-limit", help="Memory limit (default and only accepted value: the request)."),
]
AksShmSize = Annotated[str, typer.Option("--shm-size", help="/dev/shm size (memory emptyDir).")]
AksTmpSize = Annotated[
    str, typer.Option("--tmp-size", help="/tmp emptyDir size (Triton downloads as:// repositories there).")
]
AksMonitoring = Annotated[
    str,
    typer.Option(
        "--monitoring",
        help="azure-managed-prometheus (azmonitoring.coreos.com monitors, Azure rule groups), "
        "prometheus-operator (monitoring.coreos.com monitors, PrometheusRule) or none.",
    ),
]
AksAutoscaler = Annotated[
    str,
    typer.Option(
        "--autoscaler", help="keda (ScaledObject on queue time per request), hpa (autoscaling/v2) or none."
    ),
]
AksHpaMetric = Annotated[
    str, typer.Option("--hpa-metric", help="--autoscaler hpa: queue (prometheus-adapter) or cpu.")
]
AksPrometheusQueryEndpoint = Annotated[
    str | None,
    typer.Option(
        "--prometheus-query-endpoint",
        help="Prometheus HTTP API KEDA queries: the Azure Monitor workspace's query endpoint "
        "(default for prometheus-operator: the in-cluster kube-prometheus-stack).",
    ),
]
AksMonitoringNamespace = Annotated[
    str, typer.Option("--monitoring-namespace", help="prometheus-operator: Prometheus's namespace.")
]
AksPrometheusRelease = Annotated[
    str,
    typer.Option(
        "--prometheus-release",
        help="prometheus-operator: the kube-prometheus-stack release (its `release` label).",
    ),
]
AksKedaIdentityClientId = Annotated[
    str | None,
    typer.Option(
        "--keda-identity-client-id",
        help="Client id of the identity KEDA's workload identity uses (default: KEDA's own).",
    ),
]
AksMinReplicas = Annotated[int | None, typer.Option("--min-replicas", help="Autoscaler minimum.")]
AksMaxReplicas = Annotated[int, typer.Option("--max-replicas", help="Autoscaler maximum.")]
AksCpuTarget = Annotated[int, typer.Option("--cpu-target", help="--hpa-metric cpu: target utilisation %.")]
AksQueueTimeTargetUs = Annotated[
    int, typer.Option("--queue-time-target-us", help="Target average queue time per request (us).")
]
AksNoDcgmExporter = Annotated[
    bool,
    typer.Option("--no-dcgm-exporter", help="Leave out the DCGM exporter (GPU metrics) and its monitor."),
]
AksMaxStreamSeconds = Annotated[
    int,
    typer.Option(
        "--max-stream-seconds",
        help="Longest streaming (decoupled) request: drain time and load-balancer idle timeout.",
    ),
]
AksOutputFormat = Annotated[
    str, typer.Option("--format", help="--dry-run output: manifests (plain YAML) or helm (a chart).")
]
AksServiceType = Annotated[str, typer.Option("--service-type", help="ClusterIP, LoadBalancer or NodePort.")]
AksImageDigest = Annotated[
    list[str] | None,
    typer.Option(
        "--image-digest",
        help="IMAGE=sha256:... (repeatable): pin IMAGE by digest (pulled IfNotPresent; unpinned: Always).",
    ),
]
AksImageLock = Annotated[
    Path | None,
    typer.Option("--image-lock", help="JSON/YAML file of image -> sha256 digest (like --image-digest)."),
]
AksAllowFromNamespace = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-from-namespace",
        help="Namespace whose pods may call Triton's HTTP/gRPC ports besides its own (repeatable).",
    ),
]
AksNoNetworkPolicy = Annotated[
    bool, typer.Option("--no-network-policy", help="Leave out the Triton pods' NetworkPolicy.")
]
AksNoPdb = Annotated[
    bool, typer.Option("--no-pod-disruption-budget", help="Leave out the PodDisruptionBudget.")
]
AksNoZoneSpread = Annotated[
    bool, typer.Option("--no-zone-spread", help="Do not spread replicas across availability zones.")
]
AksNoDevicePlugin = Annotated[
    bool, typer.Option("--no-device-plugin", help="Leave out the NVIDIA device plugin DaemonSet.")
]
AksContext = Annotated[str | None, typer.Option("--context", help="kubeconfig context.")]
AksSmokeUrl = Annotated[
    str | None,
    typer.Option(
        "--smoke-url",
        help="Triton URL for the smoke test (default: LoadBalancer address, else a port-forward).",
    ),
]
AksOpenAiPort = Annotated[
    int | None,
    typer.Option(
        "--openai-port",
        help="Add the OpenAI front (tritonkit openai) as a container beside Triton, on this port "
        "(Service port 'openai', probes on /health/ready, its /metrics scraped); needs --openai-image.",
    ),
]
AksOpenAiImage = Annotated[
    str | None, typer.Option("--openai-image", help="The front's image (with tritonkit[openai] installed).")
]
AksOpenAiKeySecret = Annotated[
    str | None,
    typer.Option(
        "--openai-api-key-secret",
        help="Secret whose 'keys' file holds the front's API keys (one a line), mounted as a file.",
    ),
]
AksHealImage = Annotated[
    str | None,
    typer.Option(
        "--heal-image",
        help="Image with tritonkit installed that runs `tritonkit heal` beside Triton (reloads a model "
        "whose engine died); default: --openai-image when the front is deployed, else no healer.",
    ),
]
AksLivenessFailureThreshold = Annotated[
    int,
    typer.Option(
        "--liveness-failure-threshold",
        help="Restart Triton's container once readiness failed this many probes 10 s apart; keep it "
        "above the slowest model reload (engine start) plus the healer's backoff.",
    ),
]
AksStartupFailureThreshold = Annotated[
    int,
    typer.Option(
        "--startup-failure-threshold",
        help="Probes 10 s apart the first download and load of every model may take.",
    ),
]


@app.command("aks", help=AKS_HELP)
def aks(
    repository: Repository,
    dry_run: DryRun = False,
    output: Output = None,
    timeout: Timeout = None,
    no_smoke_test: NoSmokeTest = False,
    status: StatusOnly = False,
    model_repository: AksModelRepository = None,
    namespace: AksNamespace = "triton",
    name: AksName = "triton",
    image: AksImage = None,
    replicas: AksReplicas = 1,
    gpu_count: AksGpuCount = 1,
    node_selector: AksNodeSelector = "kubernetes.azure.com/accelerator=nvidia",
    no_gpu_toleration: AksNoGpuToleration = False,
    storage_secret: AksStorageSecret = "triton-storage",
    workload_identity_client_id: AksWorkloadIdentityClientId = None,
    strict_readiness: AksStrictReadiness = True,
    exit_timeout_secs: AksExitTimeoutSecs = 30,
    restricted_api_secret: AksRestrictedApiSecret = None,
    cpu_request: AksCpuRequest = "4",
    cpu_limit: AksCpuLimit = None,
    memory_request: AksMemoryRequest = "16Gi",
    memory_limit: AksMemoryLimit = None,
    shm_size: AksShmSize = "1Gi",
    tmp_size: AksTmpSize = "20Gi",
    monitoring: AksMonitoring = "azure-managed-prometheus",
    autoscaler: AksAutoscaler = "keda",
    hpa_metric: AksHpaMetric = "queue",
    prometheus_query_endpoint: AksPrometheusQueryEndpoint = None,
    monitoring_namespace: AksMonitoringNamespace = "monitoring",
    prometheus_release: AksPrometheusRelease = "kube-prometheus-stack",
    keda_identity_client_id: AksKedaIdentityClientId = None,
    min_replicas: AksMinReplicas = None,
    max_replicas: AksMaxReplicas = 4,
    cpu_target: AksCpuTarget = 70,
    queue_time_target_us: AksQueueTimeTargetUs = 50_000,
    no_dcgm_exporter: AksNoDcgmExporter = False,
    max_stream_seconds: AksMaxStreamSeconds = 600,
    output_format: AksOutputFormat = "manifests",
    service_type: AksServiceType = "ClusterIP",
    no_device_plugin: AksNoDevicePlugin = False,
    image_digest: AksImageDigest = None,
    image_lock: AksImageLock = None,
    allow_from_namespace: AksAllowFromNamespace = None,
    no_network_policy: AksNoNetworkPolicy = False,
    no_pod_disruption_budget: AksNoPdb = False,
    no_zone_spread: AksNoZoneSpread = False,
    context: AksContext = None,
    smoke_url: AksSmokeUrl = None,
    openai_port: AksOpenAiPort = None,
    openai_image: AksOpenAiImage = None,
    openai_api_key_secret: AksOpenAiKeySecret = None,
    heal_image: AksHealImage = None,
    liveness_failure_threshold: AksLivenessFailureThreshold = 30,
    startup_failure_threshold: AksStartupFailureThreshold = 90,
) -> None:
    from tritonkit.deploy.aks import DEFAULT_IMAGE, AksDeployer, AksOptions
    from tritonkit.deploy.aks.options import parse_node_selector

    if not model_repository:
        raise DeployValidationError(f"deploy aks needs --model-repository ({_REPOSITORY_FORMS})")
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
            cpu_limit=cpu_limit or cpu_request,
            memory_request=memory_request,
            memory_limit=memory_limit or memory_request,
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
            image_digests=_image_digests(image_lock, image_digest),
            ingress_namespaces=tuple(allow_from_namespace or ()),
            network_policy=not no_network_policy,
            pod_disruption_budget=not no_pod_disruption_budget,
            zone_spread=not no_zone_spread,
            rollout_timeout_s=timeout or 900.0,
            context=context,
            smoke_url=smoke_url,
            smoke_test=not no_smoke_test,
            openai_port=openai_port,
            openai_image=openai_image,
            openai_api_key_secret=openai_api_key_secret,
            heal_image=heal_image,
            liveness_failure_threshold=liveness_failure_threshold,
            startup_failure_threshold=startup_failure_threshold,
        )
    )
    default_out = Path("deploy/aks-chart") if output_format == "helm" else DEFAULT_OUT["aks"]
    run(deployer, status=status, dry_run=dry_run, out=output or default_out)


_REPOSITORY_FORMS = "as://ACCOUNT/CONTAINER/PATH or pvc://CLAIM/PATH"


def _image_digests(image_lock: Path | None, image_digest: list[str] | None) -> dict[str, str]:
    """The image pins of --image-lock, then --image-digest (which wins)."""
    from tritonkit.deploy.aks.options import parse_image_digest, read_image_lock

    return {
        **(read_image_lock(image_lock) if image_lock is not None else {}),
        **dict(parse_image_digest(text) for text in image_digest or ()),
    }


def run(deployer: Deployer, *, status: bool, dry_run: bool, out: Path) -> None:
    """Render what the library's :func:`~tritonkit.deploy.base.run_deployer` did."""
    from tritonkit.deploy.base import run_deployer

    outcome = run_deployer(
        deployer, status=status, dry_run=dry_run, out=out, on_plan=_show_plan, progress=render.info
    )
    if outcome.status is not None:
        state = outcome.status
        render.table(f"{state.target} status", ["", ""], state.details)
        render.info("ready" if state.ready else "not ready")
        return
    if outcome.result is None:
        for path in outcome.written:
            render.info(f"wrote {path}")
        render.info(f"dry run: nothing was deployed ({len(outcome.written)} files in {out})")
        return
    result = outcome.result
    if result.summary:
        render.table(None, ["", ""], result.summary)
    if result.scoring_uri:
        render.info(f"scoring URI: {result.scoring_uri}")
    for step in result.smoke:
        render.info(f"smoke test: {step.check}: {'ok' if step.ok else 'FAILED'} {step.detail}".rstrip())
    if outcome.failed_smoke:
        raise DeployError(
            f"deployed, but the smoke test failed: {', '.join(s.check for s in outcome.failed_smoke)}",
            hint="look at the endpoint's logs (az ml online-deployment get-logs / kubectl logs)",
        )


def _show_plan(plan: DeployPlan) -> None:
    for warning in plan.warnings:
        render.warn(warning)
    render.table(f"{plan.target} deployment plan", ["setting", "value"], plan.summary)
