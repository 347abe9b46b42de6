"""`tritonkit deploy --target aml|aks`: check a repository offline, then deploy it (or --dry-run)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from tritonkit.cli import render
from tritonkit.errors import DeployError, DeployValidationError

HELP = (
    "Deploy a model repository to an Azure ML managed online endpoint (--target aml) or to AKS "
    "(--target aks). Every check that needs no network runs first; --dry-run writes the Azure ML "
    "CLI v2 YAML or the Kubernetes manifests instead of deploying."
)

DEFAULT_OUT = {"aml": Path("deploy/aml"), "aks": Path("deploy/aks")}


def command(
    repository: Path = typer.Argument(..., help="The model repository to deploy (validated first)."),
    target: str = typer.Option(..., "--target", help="aml (Azure ML managed online endpoint) or aks."),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Write the deployment files to -o DIR instead of deploying."
    ),
    output: Path | None = typer.Option(
        None,
        "-o",
        "--output",
        help="Where --dry-run writes (default deploy/aml, deploy/aks; deploy/aks-chart with --format helm).",
    ),
    timeout: float | None = typer.Option(
        None, "--timeout", help="Seconds to wait for the deployment (aml 1800, aks 900)."
    ),
    no_smoke_test: bool = typer.Option(False, "--no-smoke-test", help="Skip the smoke test after deploying."),
    status: bool = typer.Option(
        False, "--status", help="Only report the live state of an existing deployment (no changes)."
    ),
    # --- Azure ML
    endpoint: str | None = typer.Option(None, "--endpoint", help="[aml] Online endpoint name."),
    deployment: str | None = typer.Option(None, "--deployment", help="[aml] Deployment name, e.g. blue."),
    instance_type: str | None = typer.Option(
        None, "--instance-type", help="[aml] VM SKU, e.g. Standard_NC4as_T4_v3."
    ),
    instance_count: int = typer.Option(1, "--instance-count", help="[aml] Instances (>= 1)."),
    auth_mode: str = typer.Option("key", "--auth-mode", help="[aml] key, aml_token or aad_token."),
    traffic: str | None = typer.Option(
        None, "--traffic", help="[aml] Traffic split, e.g. blue=90,green=10 (default: unchanged)."
    ),
    subscription: str | None = typer.Option(
        None, "--subscription", envvar="AZURE_SUBSCRIPTION_ID", help="[aml] Azure subscription id."
    ),
    resource_group: str | None = typer.Option(
        None, "--resource-group", envvar="AZURE_RESOURCE_GROUP", help="[aml] Resource group."
    ),
    workspace: str | None = typer.Option(
        None, "--workspace", envvar="AZUREML_WORKSPACE_NAME", help="[aml] Azure ML workspace."
    ),
    model_name: str | None = typer.Option(
        None, "--model-name", help="[aml] Registered model name (default <endpoint>-triton)."
    ),
    model_version: str = typer.Option("1", "--model-version", help="[aml] Registered model version."),
    max_concurrent_requests: int | None = typer.Option(
        None,
        "--max-concurrent-requests",
        help="[aml] max_concurrent_requests_per_instance (default: derived from the batching).",
    ),
    request_timeout_ms: int = typer.Option(
        90_000, "--request-timeout-ms", help="[aml] Request timeout in ms (<= 180000)."
    ),
    generation_s: float | None = typer.Option(
        None,
        "--generation-s",
        help="[aml] The longest one answer takes (s), e.g. a full-length generation measured with "
        "`tritonkit perf`: refused when it cannot fit the request timeout.",
    ),
    # --- AKS
    model_repository: str | None = typer.Option(
        None,
        "--model-repository",
        help="[aks] Where Triton reads the repository: as://ACCOUNT/CONTAINER/PATH or pvc://CLAIM/PATH.",
    ),
    namespace: str = typer.Option("triton", "--namespace", help="[aks] Namespace."),
    name: str = typer.Option("triton", "--name", help="[aks] Deployment/Service name."),
    image: str | None = typer.Option(None, "--image", help="[aks] Triton image (default NGC 24.10)."),
    replicas: int = typer.Option(1, "--replicas", help="[aks] Replicas (HPA minimum by default)."),
    gpu_count: int = typer.Option(1, "--gpu-count", help="[aks] nvidia.com/gpu per pod (0: CPU only)."),
    node_selector: str = typer.Option(
        "kubernetes.azure.com/accelerator=nvidia",
        "--node-selector",
        help="[aks] KEY=VALUE of the GPU node pool, or 'none'.",
    ),
    no_gpu_toleration: bool = typer.Option(
        False, "--no-gpu-toleration", help="[aks] Leave out the sku=gpu:NoSchedule toleration."
    ),
    storage_secret: str = typer.Option(
        "triton-storage",
        "--storage-secret",
        help="[aks] Secret with AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY for as:// repositories.",
    ),
    workload_identity_client_id: str | None = typer.Option(
        None,
        "--workload-identity-client-id",
        help="[aks] Use Azure workload identity (this client id) instead of the storage Secret.",
    ),
    strict_readiness: bool = typer.Option(
        True, "--strict-readiness/--no-strict-readiness", help="[aks] Triton's --strict-readiness."
    ),
    exit_timeout_secs: int = typer.Option(
        30, "--exit-timeout-secs", help="[aks] Triton's drain time; grace period is 10 s longer."
    ),
    restricted_api_secret: str | None = typer.Option(
        None,
        "--restricted-api-secret",
        help="[aks] Secret (key 'key') guarding Triton's admin APIs (header triton-admin-key).",
    ),
    cpu_request: str = typer.Option("2", "--cpu-request", help="[aks] CPU request."),
    cpu_limit: str = typer.Option("4", "--cpu-limit", help="[aks] CPU limit."),
    memory_request: str = typer.Option("8Gi", "--memory-request", help="[aks] Memory request."),
    memory_limit: str = typer.Option("16Gi", "--memory-limit", help="[aks] Memory limit."),
    shm_size: str = typer.Option("1Gi", "--shm-size", help="[aks] /dev/shm size (memory emptyDir)."),
    tmp_size: str = typer.Option(
        "20Gi", "--tmp-size", help="[aks] /tmp emptyDir size (Triton downloads as:// repositories there)."
    ),
    monitoring: str = typer.Option(
        "azure-managed-prometheus",
        "--monitoring",
        help="[aks] azure-managed-prometheus (azmonitoring.coreos.com monitors, Azure rule groups), "
        "prometheus-operator (monitoring.coreos.com monitors, PrometheusRule) or none.",
    ),
    autoscaler: str = typer.Option(
        "keda",
        "--autoscaler",
        help="[aks] keda (ScaledObject on queue time per request), hpa (autoscaling/v2) or none.",
    ),
    hpa_metric: str = typer.Option(
        "queue", "--hpa-metric", help="[aks] --autoscaler hpa: queue (prometheus-adapter) or cpu."
    ),
    prometheus_query_endpoint: str | None = typer.Option(
        None,
        "--prometheus-query-endpoint",
        help="[aks] Prometheus HTTP API KEDA queries: the Azure Monitor workspace's query endpoint "
        "(default for prometheus-operator: the in-cluster kube-prometheus-stack).",
    ),
    monitoring_namespace: str = typer.Option(
        "monitoring", "--monitoring-namespace", help="[aks] prometheus-operator: Prometheus's namespace."
    ),
    prometheus_release: str = typer.Option(
        "kube-prometheus-stack",
        "--prometheus-release",
        help="[aks] prometheus-operator: the kube-prometheus-stack release (its `release` label).",
    ),
    keda_identity_client_id: str | None = typer.Option(
        None,
        "--keda-identity-client-id",
        help="[aks] Client id of the identity KEDA's workload identity uses (default: KEDA's own).",
    ),
    min_replicas: int | None = typer.Option(None, "--min-replicas", help="[aks] Autoscaler minimum."),
    max_replicas: int = typer.Option(4, "--max-replicas", help="[aks] Autoscaler maximum."),
    cpu_target: int = typer.Option(70, "--cpu-target", help="[aks] --hpa-metric cpu: target utilisation %."),
    queue_time_target_us: int = typer.Option(
        50_000, "--queue-time-target-us", help="[aks] Target average queue time per request (us)."
    ),
    no_dcgm_exporter: bool = typer.Option(
        False, "--no-dcgm-exporter", help="[aks] Leave out the DCGM exporter (GPU metrics) and its monitor."
    ),
    max_stream_seconds: int = typer.Option(
        600,
        "--max-stream-seconds",
        help="[aks] Longest streaming (decoupled) request: drain time and load-balancer idle timeout.",
    ),
    output_format: str = typer.Option(
        "manifests", "--format", help="[aks] --dry-run output: manifests (plain YAML) or helm (a chart)."
    ),
    service_type: str = typer.Option(
        "ClusterIP", "--service-type", help="[aks] ClusterIP, LoadBalancer or NodePort."
    ),
    no_device_plugin: bool = typer.Option(
        False, "--no-device-plugin", help="[aks] Leave out the NVIDIA device plugin DaemonSet."
    ),
    context: str | None = typer.Option(None, "--context", help="[aks] kubeconfig context."),
    smoke_url: str | None = typer.Option(
        None,
        "--smoke-url",
        help="[aks] Triton URL for the smoke test (default: LoadBalancer address, else a port-forward).",
    ),
) -> None:
    if target not in DEFAULT_OUT:
        raise DeployValidationError(f"--target must be aml or aks, got {target!r}")
    deployer: Any
    if target == "aml":
        from tritonkit.deploy.aml import AmlDeployer, AmlOptions, parse_traffic

        if not endpoint or not deployment or not instance_type:
            given = (
                ("--endpoint", endpoint),
                ("--deployment", deployment),
                ("--instance-type", instance_type),
            )
            missing = ", ".join(flag for flag, value in given if not value)
            raise DeployValidationError(f"--target aml needs {missing}")
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
    else:
        from tritonkit.deploy.aks import DEFAULT_IMAGE, AksDeployer, AksOptions

        if not model_repository:
            raise DeployValidationError(
                "--target aks needs --model-repository (as://ACCOUNT/CONTAINER/PATH or pvc://CLAIM/PATH)"
            )
        selector: tuple[str, str] | None = None
        if node_selector.lower() != "none":
            key, sep, value = node_selector.partition("=")
            if not sep:
                raise DeployValidationError(f"--node-selector {node_selector!r} is not KEY=VALUE or none")
            selector = (key, value)
        deployer = AksDeployer(
            options=AksOptions(
                repository=repository,
                model_repository=model_repository,
                name=name,
                namespace=namespace,
                image=image or DEFAULT_IMAGE,
                replicas=replicas,
                gpu_count=gpu_count,
                gpu_node_selector=selector,
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
    if status:
        state = deployer.status()
        render.table(f"{state.target} status", ["", ""], state.details)
        render.info("ready" if state.ready else "not ready")
        return
    default_out = (
        Path("deploy/aks-chart") if target == "aks" and output_format == "helm" else DEFAULT_OUT[target]
    )
    _run(deployer, dry_run=dry_run, out=output or default_out)


def _run(deployer: Any, *, dry_run: bool, out: Path) -> None:
    from tritonkit.deploy.base import write_artifacts

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
