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
    option("--endpoint", str | None, None, help="Online endpoint name."),
    option("--deployment", str | None, None, help="Deployment name, e.g. blue."),
    option("--instance-type", str | None, None, help="VM SKU, e.g. Standard_NC4as_T4_v3."),
    option("--instance-count", int, 1, help="Instances (>= 1)."),
    option("--auth-mode", str, "key", help="key, aml_token or aad_token."),
    option("--traffic", str | None, None, help="Traffic split, e.g. blue=90,green=10 (default: unchanged)."),
    option(
        "--subscription",
        str | None,
        None,
        envvar="AZURE_SUBSCRIPTION_ID",
        help="Azure subscription id.",
        name="subscription_id",
    ),
    option("--resource-group", str | None, None, envvar="AZURE_RESOURCE_GROUP", help="Resource group."),
    option("--workspace", str | None, None, envvar="AZUREML_WORKSPACE_NAME", help="Azure ML workspace."),
    option("--model-name", str | None, None, help="Registered model name (default <endpoint>-triton)."),
    option("--model-version", str, "1", help="Registered model version."),
    option(
        "--max-concurrent-requests",
        int | None,
        None,
        help="max_concurrent_requests_per_instance (default: derived from the batching).",
    ),
    option("--request-timeout-ms", int, 90_000, help="Request timeout in ms (<= 180000)."),
    option(
        "--generation-s",
        float | None,
        None,
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
        "--model-repository",
        str | None,
        None,
        help=f"Where Triton reads the repository: {_REPOSITORY_FORMS}.",
    ),
    option("--namespace", str, "triton", help="Namespace."),
    option("--name", str, "triton", help="Deployment/Service name."),
    option(
        "--image",
        str | None,
        None,
        help="Triton image (default: the spec's `image:` recorded by build, else NGC 24.10).",
    ),
    option("--replicas", int, 1, help="Replicas (HPA minimum by default)."),
    option("--gpu-count", int, 1, help="nvidia.com/gpu per pod (0: CPU only)."),
    option(
        "--node-selector",
        str,
        "kubernetes.azure.com/accelerator=nvidia",
        help="KEY=VALUE of the GPU node pool, or 'none'.",
    ),
    option("--no-gpu-toleration", bool, False, help="Leave out the sku=gpu:NoSchedule toleration."),
    option(
        "--storage-secret",
        str,
        "triton-storage",
        help="Secret with AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY for as:// repositories.",
    ),
    option(
        "--workload-identity-client-id",
        str | None,
        None,
        help="Use Azure workload identity (this client id) instead of the storage Secret.",
    ),
    option("--strict-readiness/--no-strict-readiness", bool, True, help="Triton's --strict-readiness."),
    option("--exit-timeout-secs", int, 30, help="Triton's drain time; grace period is 10 s longer."),
    option(
        "--restricted-api-secret",
        str | None,
        None,
        help="Secret (key 'key') guarding Triton's admin APIs (header triton-admin-key).",
    ),
    option("--cpu-request", str, "4", help="CPU request (and limit: Guaranteed QoS)."),
    option("--cpu-limit", str | None, None, help="CPU limit (default and only accepted value: the request)."),
    option("--memory-request", str, "16Gi", help="Memory request (and limit: Guaranteed QoS)."),
    option(
        "--memory-limit",
        str | None,
        None,
        help="Memory limit (default and only accepted value: the request).",
    ),
    option("--shm-size", str, "1Gi", help="/dev/shm size (memory emptyDir)."),
    option("--tmp-size", str, "20Gi", help="/tmp emptyDir size (Triton downloads as:// repositories there)."),
    option(
        "--monitoring",
        str,
        "azure-managed-prometheus",
        help="azure-managed-prometheus (azmonitoring.coreos.com monitors, Azure rule groups), "
        "prometheus-operator (monitoring.coreos.com monitors, PrometheusRule) or none.",
    ),
    option(
        "--autoscaler",
        str,
        "keda",
        help="keda (ScaledObject on queue time per request), hpa (autoscaling/v2) or none.",
    ),
    option("--hpa-metric", str, "queue", help="--autoscaler hpa: queue (prometheus-adapter) or cpu."),
    option(
        "--prometheus-query-endpoint",
        str | None,
        None,
        help="Prometheus HTTP API KEDA queries: the Azure Monitor workspace's query endpoint "
        "(default for prometheus-operator: the in-cluster kube-prometheus-stack).",
    ),
    option("--monitoring-namespace", str, "monitoring", help="prometheus-operator: Prometheus's namespace."),
    option(
        "--prometheus-release",
        str,
        "kube-prometheus-stack",
        help="prometheus-operator: the kube-prometheus-stack release (its `release` label).",
    ),
    option(
        "--keda-identity-client-id",
        str | None,
        None,
        help="Client id of the identity KEDA's workload identity uses (default: KEDA's own).",
    ),
    option("--min-replicas", int | None, None, help="Autoscaler minimum."),
    option("--max-replicas", int, 4, help="Autoscaler maximum."),
    option(
        "--cpu-target", int, 70, help="--hpa-metric cpu: target utilisation %.", name="cpu_target_percent"
    ),
    option("--queue-time-target-us", int, 50_000, help="Target average queue time per request (us)."),
    option(
        "--no-dcgm-exporter", bool, False, help="Leave out the DCGM exporter (GPU metrics) and its monitor."
    ),
    option(
        "--max-stream-seconds",
        int,
        600,
        help="Longest streaming (decoupled) request: drain time and load-balancer idle timeout.",
    ),
    option(
        "--format",
        str,
        "manifests",
        help="--dry-run output: manifests (plain YAML) or helm (a chart).",
        name="output_format",
    ),
    option("--service-type", str, "ClusterIP", help="ClusterIP, LoadBalancer or NodePort."),
    option("--no-device-plugin", bool, False, help="Leave out the NVIDIA device plugin DaemonSet."),
    option(
        "--image-digest",
        list[str] | None,
        None,
        help="IMAGE=sha256:... (repeatable): pin IMAGE by digest (pulled IfNotPresent; unpinned: Always).",
    ),
    option(
        "--image-lock",
        Path | None,
        None,
        help="JSON/YAML file of image -> sha256 digest (like --image-digest).",
    ),
    option(
        "--allow-from-namespace",
        list[str] | None,
        None,
        help="Namespace whose pods may call Triton's HTTP/gRPC ports besides its own (repeatable).",
    ),
    option("--no-network-policy", bool, False, help="Leave out the Triton pods' NetworkPolicy."),
    option("--no-pod-disruption-budget", bool, False, help="Leave out the PodDisruptionBudget."),
    option("--no-zone-spread", bool, False, help="Do not spread replicas across availability zones."),
    option("--context", str | None, None, help="kubeconfig context."),
    option(
        "--smoke-url",
        str | None,
        None,
        help="Triton URL for the smoke test (default: LoadBalancer address, else a port-forward).",
    ),
    option(
        "--openai-port",
        int | None,
        None,
        help="Add the OpenAI front (tritonkit openai) as a container beside Triton, on this port "
        "(Service port 'openai', probes on /health/ready, its /metrics scraped); needs --openai-image.",
    ),
    option("--openai-image", str | None, None, help="The front's image (with tritonkit[openai] installed)."),
    option(
        "--openai-api-key-secret",
        str | None,
        None,
        help="Secret whose 'keys' file holds the front's API keys (one a line), mounted as a file.",
    ),
    option(
        "--heal-image",
        str | None,
        None,
        help="Image with tritonkit installed that runs `tritonkit heal` beside Triton (reloads a model "
        "whose engine died); default: --openai-image when the front is deployed, else no healer.",
    ),
    option(
        "--heal-probe-model",
        list[str] | None,
        None,
        help="A model (besides the LLM stages) the healer sends a request of zeros every few seconds, "
        "so a Python stage's dead stub is seen and reloaded in an idle pod; repeatable. It runs the "
        "model's code: name models that take zeros.",
    ),
    option(
        "--liveness-failure-threshold",
        int,
        30,
        help="Restart Triton's container once readiness failed this many probes 10 s apart; keep it "
        "above the slowest model reload (engine start) plus the healer's backoff.",
    ),
    option(
        "--startup-failure-threshold",
        int,
        90,
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
    probes = fields.pop("heal_probe_model")
    return fields | {
        "heal_probe_models": tuple(probes or ()),
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
