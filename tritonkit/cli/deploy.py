"""`tritonkit deploy aml|aks REPOSITORY`: check a repository offline, then deploy it (or --dry-run).

One sub-command per target, each typed against the :class:`~tritonkit.deploy.base.Deployer`
protocol; the options both share are declared once. `tritonkit deploy REPOSITORY --target aml|aks`
(the older spelling) is kept as an alias: the group rewrites it to the sub-command before parsing,
so both spellings take exactly the same options.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from tritonkit.cli import render
from tritonkit.cli._options import OptionRow, option, with_options
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
_REPOSITORY_FORMS = "as://ACCOUNT/CONTAINER/PATH or pvc://CLAIM/PATH"


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

#: Builds a target's deployer from its repository, the shared options it reads and its own (by
#: row name); returns it and where --dry-run writes unless -o says.
MakeDeployer = Callable[..., tuple[Deployer, Path]]


def _target(name: str, help: str, rows: Sequence[OptionRow]) -> Callable[[MakeDeployer], MakeDeployer]:
    """Register ``deploy NAME``: the options every target takes, then the target's own ``rows``,
    which the decorated function turns into the target's deployer; the rest is shared."""

    def register(make: MakeDeployer) -> MakeDeployer:
        @app.command(name, help=help)
        @with_options(rows)
        def command(
            repository: Repository,
            dry_run: DryRun = False,
            output: Output = None,
            timeout: Timeout = None,
            no_smoke_test: NoSmokeTest = False,
            status: StatusOnly = False,
            **given: Any,
        ) -> None:
            deployer, default_out = make(
                repository, output=output, timeout=timeout, smoke_test=not no_smoke_test, **given
            )
            run(deployer, status=status, dry_run=dry_run, out=output or default_out)

        return make

    return register


#: The Azure ML options; each row's name is the AmlOptions field it sets.
_AML_OPTIONS = (
    option("endpoint", str | None, None, "--endpoint", help="Online endpoint name."),
    option("deployment", str | None, None, "--deployment", help="Deployment name, e.g. blue."),
    option("instance_type", str | None, None, "--instance-type", help="VM SKU, e.g. Standard_NC4as_T4_v3."),
    option("instance_count", int, 1, "--instance-count", help="Instances (>= 1)."),
    option("auth_mode", str, "key", "--auth-mode", help="key, aml_token or aad_token."),
    option(
        "traffic",
        str | None,
        None,
        "--traffic",
        help="Traffic split, e.g. blue=90,green=10 (default: unchanged).",
    ),
    option(
        "subscription_id",
        str | None,
        None,
        "--subscription",
        envvar="AZURE_SUBSCRIPTION_ID",
        help="Azure subscription id.",
    ),
    option(
        "resource_group",
        str | None,
        None,
        "--resource-group",
        envvar="AZURE_RESOURCE_GROUP",
        help="Resource group.",
    ),
    option(
        "workspace",
        str | None,
        None,
        "--workspace",
        envvar="AZUREML_WORKSPACE_NAME",
        help="Azure ML workspace.",
    ),
    option(
        "model_name",
        str | None,
        None,
        "--model-name",
        help="Registered model name (default <endpoint>-triton).",
    ),
    option("model_version", str, "1", "--model-version", help="Registered model version."),
    option(
        "max_concurrent_requests",
        int | None,
        None,
        "--max-concurrent-requests",
        help="max_concurrent_requests_per_instance (default: derived from the batching).",
    ),
    option(
        "request_timeout_ms", int, 90_000, "--request-timeout-ms", help="Request timeout in ms (<= 180000)."
    ),
    option(
        "generation_s",
        float | None,
        None,
        "--generation-s",
        help="The longest one answer takes (s), e.g. a full-length generation measured with "
        "`tritonkit perf`: refused when it cannot fit the request timeout.",
    ),
)


@_target("aml", AML_HELP, _AML_OPTIONS)
def aml(
    repository: Path, *, output: Path | None, timeout: float | None, smoke_test: bool, **given: Any
) -> tuple[Deployer, Path]:
    from tritonkit.deploy.aml import AmlDeployer, AmlOptions, parse_traffic

    required = (
        ("--endpoint", "endpoint"),
        ("--deployment", "deployment"),
        ("--instance-type", "instance_type"),
    )
    missing = ", ".join(flag for flag, name in required if not given[name])
    if missing:
        raise DeployValidationError(f"deploy aml needs {missing}")
    if given["traffic"] is not None:
        given["traffic"] = parse_traffic(given["traffic"])
    options = AmlOptions(
        repository=repository,
        output_dir=output or DEFAULT_OUT["aml"],
        wait_timeout_s=timeout or 1800.0,
        smoke_test=smoke_test,
        **given,
    )
    return AmlDeployer(options=options), DEFAULT_OUT["aml"]


#: The AKS options. A row named like an AksOptions field sets it, ``no_X`` (a --no-X flag) turns
#: the field X off, and :func:`_aks_fields` reads the others.
_AKS_OPTIONS = (
    option(
        "model_repository",
        str | None,
        None,
        "--model-repository",
        help=f"Where Triton reads the repository: {_REPOSITORY_FORMS}.",
    ),
    option("namespace", str, "triton", "--namespace", help="Namespace."),
    option("name", str, "triton", "--name", help="Deployment/Service name."),
    option(
        "image",
        str | None,
        None,
        "--image",
        help="Triton image (default: the spec's `image:` recorded by build, else NGC 24.10).",
    ),
    option("replicas", int, 1, "--replicas", help="Replicas (HPA minimum by default)."),
    option("gpu_count", int, 1, "--gpu-count", help="nvidia.com/gpu per pod (0: CPU only)."),
    option(
        "node_selector",
        str,
        "kubernetes.azure.com/accelerator=nvidia",
        "--node-selector",
        help="KEY=VALUE of the GPU node pool, or 'none'.",
    ),
    option(
        "no_gpu_toleration",
        bool,
        False,
        "--no-gpu-toleration",
        help="Leave out the sku=gpu:NoSchedule toleration.",
    ),
    option(
        "storage_secret",
        str,
        "triton-storage",
        "--storage-secret",
        help="Secret with AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY for as:// repositories.",
    ),
    option(
        "workload_identity_client_id",
        str | None,
        None,
        "--workload-identity-client-id",
        help="Use Azure workload identity (this client id) instead of the storage Secret.",
    ),
    option(
        "strict_readiness",
        bool,
        True,
        "--strict-readiness/--no-strict-readiness",
        help="Triton's --strict-readiness.",
    ),
    option(
        "exit_timeout_secs",
        int,
        30,
        "--exit-timeout-secs",
        help="Triton's drain time; grace period is 10 s longer.",
    ),
    option(
        "restricted_api_secret",
        str | None,
        None,
        "--restricted-api-secret",
        help="Secret (key 'key') guarding Triton's admin APIs (header triton-admin-key).",
    ),
    option("cpu_request", str, "4", "--cpu-request", help="CPU request (and limit: Guaranteed QoS)."),
    option(
        "cpu_limit",
        str | None,
        None,
        "--cpu-limit",
        help="CPU limit (default and only accepted value: the request).",
    ),
    option(
        "memory_request", str, "16Gi", "--memory-request", help="Memory request (and limit: Guaranteed QoS)."
    ),
    option(
        "memory_limit",
        str | None,
        None,
        "--memory-limit",
        help="Memory limit (default and only accepted value: the request).",
    ),
    option("shm_size", str, "1Gi", "--shm-size", help="/dev/shm size (memory emptyDir)."),
    option(
        "tmp_size",
        str,
        "20Gi",
        "--tmp-size",
        help="/tmp emptyDir size (Triton downloads as:// repositories there).",
    ),
    option(
        "monitoring",
        str,
        "azure-managed-prometheus",
        "--monitoring",
        help="azure-managed-prometheus (azmonitoring.coreos.com monitors, Azure rule groups), "
        "prometheus-operator (monitoring.coreos.com monitors, PrometheusRule) or none.",
    ),
    option(
        "autoscaler",
        str,
        "keda",
        "--autoscaler",
        help="keda (ScaledObject on queue time per request), hpa (autoscaling/v2) or none.",
    ),
    option(
        "hpa_metric",
        str,
        "queue",
        "--hpa-metric",
        help="--autoscaler hpa: queue (prometheus-adapter) or cpu.",
    ),
    option(
        "prometheus_query_endpoint",
        str | None,
        None,
        "--prometheus-query-endpoint",
        help="Prometheus HTTP API KEDA queries: the Azure Monitor workspace's query endpoint "
        "(default for prometheus-operator: the in-cluster kube-prometheus-stack).",
    ),
    option(
        "monitoring_namespace",
        str,
        "monitoring",
        "--monitoring-namespace",
        help="prometheus-operator: Prometheus's namespace.",
    ),
    option(
        "prometheus_release",
        str,
        "kube-prometheus-stack",
        "--prometheus-release",
        help="prometheus-operator: the kube-prometheus-stack release (its `release` label).",
    ),
    option(
        "keda_identity_client_id",
        str | None,
        None,
        "--keda-identity-client-id",
        help="Client id of the identity KEDA's workload identity uses (default: KEDA's own).",
    ),
    option("min_replicas", int | None, None, "--min-replicas", help="Autoscaler minimum."),
    option("max_replicas", int, 4, "--max-replicas", help="Autoscaler maximum."),
    option("cpu_target_percent", int, 70, "--cpu-target", help="--hpa-metric cpu: target utilisation %."),
    option(
        "queue_time_target_us",
        int,
        50_000,
        "--queue-time-target-us",
        help="Target average queue time per request (us).",
    ),
    option(
        "no_dcgm_exporter",
        bool,
        False,
        "--no-dcgm-exporter",
        help="Leave out the DCGM exporter (GPU metrics) and its monitor.",
    ),
    option(
        "max_stream_seconds",
        int,
        600,
        "--max-stream-seconds",
        help="Longest streaming (decoupled) request: drain time and load-balancer idle timeout.",
    ),
    option(
        "output_format",
        str,
        "manifests",
        "--format",
        help="--dry-run output: manifests (plain YAML) or helm (a chart).",
    ),
    option("service_type", str, "ClusterIP", "--service-type", help="ClusterIP, LoadBalancer or NodePort."),
    option(
        "no_device_plugin",
        bool,
        False,
        "--no-device-plugin",
        help="Leave out the NVIDIA device plugin DaemonSet.",
    ),
    option(
        "image_digest",
        list[str] | None,
        None,
        "--image-digest",
        help="IMAGE=sha256:... (repeatable): pin IMAGE by digest (pulled IfNotPresent; unpinned: Always).",
    ),
    option(
        "image_lock",
        Path | None,
        None,
        "--image-lock",
        help="JSON/YAML file of image -> sha256 digest (like --image-digest).",
    ),
    option(
        "allow_from_namespace",
        list[str] | None,
        None,
        "--allow-from-namespace",
        help="Namespace whose pods may call Triton's HTTP/gRPC ports besides its own (repeatable).",
    ),
    option(
        "no_network_policy",
        bool,
        False,
        "--no-network-policy",
        help="Leave out the Triton pods' NetworkPolicy.",
    ),
    option(
        "no_pod_disruption_budget",
        bool,
        False,
        "--no-pod-disruption-budget",
        help="Leave out the PodDisruptionBudget.",
    ),
    option(
        "no_zone_spread",
        bool,
        False,
        "--no-zone-spread",
        help="Do not spread replicas across availability zones.",
    ),
    option("context", str | None, None, "--context", help="kubeconfig context."),
    option(
        "smoke_url",
        str | None,
        None,
        "--smoke-url",
        help="Triton URL for the smoke test (default: LoadBalancer address, else a port-forward).",
    ),
    option(
        "openai_port",
        int | None,
        None,
        "--openai-port",
        help="Add the OpenAI front (tritonkit openai) as a container beside Triton, on this port "
        "(Service port 'openai', probes on /health/ready, its /metrics scraped); needs --openai-image.",
    ),
    option(
        "openai_image",
        str | None,
        None,
        "--openai-image",
        help="The front's image (with tritonkit[openai] installed).",
    ),
    option(
        "openai_api_key_secret",
        str | None,
        None,
        "--openai-api-key-secret",
        help="Secret whose 'keys' file holds the front's API keys (one a line), mounted as a file.",
    ),
    option(
        "heal_image",
        str | None,
        None,
        "--heal-image",
        help="Image with tritonkit installed that runs `tritonkit heal` beside Triton (reloads a model "
        "whose engine died); default: --openai-image when the front is deployed, else no healer.",
    ),
    option(
        "liveness_failure_threshold",
        int,
        30,
        "--liveness-failure-threshold",
        help="Restart Triton's container once readiness failed this many probes 10 s apart; keep it "
        "above the slowest model reload (engine start) plus the healer's backoff.",
    ),
    option(
        "startup_failure_threshold",
        int,
        90,
        "--startup-failure-threshold",
        help="Probes 10 s apart the first download and load of every model may take.",
    ),
)


@_target("aks", AKS_HELP, _AKS_OPTIONS)
def aks(
    repository: Path, *, output: Path | None, timeout: float | None, smoke_test: bool, **given: Any
) -> tuple[Deployer, Path]:
    from tritonkit.deploy.aks import AksDeployer, AksOptions

    if not given["model_repository"]:
        raise DeployValidationError(f"deploy aks needs --model-repository ({_REPOSITORY_FORMS})")
    options = AksOptions(
        repository=repository, rollout_timeout_s=timeout or 900.0, smoke_test=smoke_test, **_aks_fields(given)
    )
    chart = given["output_format"] == "helm"
    return AksDeployer(options=options), Path("deploy/aks-chart") if chart else DEFAULT_OUT["aks"]


def _aks_fields(given: dict[str, Any]) -> dict[str, Any]:
    """The AksOptions fields the AKS options ask for (see _AKS_OPTIONS)."""
    from tritonkit.deploy.aks import DEFAULT_IMAGE
    from tritonkit.deploy.aks.options import parse_node_selector

    fields = {name: value for name, value in given.items() if not name.startswith("no_")}
    fields |= {name.removeprefix("no_"): not value for name, value in given.items() if name.startswith("no_")}
    node_selector, namespaces = fields.pop("node_selector"), fields.pop("allow_from_namespace")
    image_lock, image_digest = fields.pop("image_lock"), fields.pop("image_digest")
    return fields | {
        "image": fields["image"] or DEFAULT_IMAGE,
        "gpu_node_selector": parse_node_selector(node_selector),
        "cpu_limit": fields["cpu_limit"] or fields["cpu_request"],
        "memory_limit": fields["memory_limit"] or fields["memory_request"],
        "image_digests": _image_digests(image_lock, image_digest),
        "ingress_namespaces": tuple(namespaces or ()),
    }


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
