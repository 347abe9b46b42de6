"""The settings of an AKS deployment (`tritonkit deploy --target aks`), their offline checks, and the
names, labels and PromQL expressions every rendered object shares.

Nothing here touches a cluster: :mod:`tritonkit.deploy.aks.render` turns these options into plain
objects, :mod:`tritonkit.deploy.aks.helm` into a chart, :mod:`tritonkit.deploy.aks` applies them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tritonkit.deploy.aks.trtllm import TrtllmModels
from tritonkit.deploy.aks.vllm import REPOSITORY_COPY_IMAGE
from tritonkit.deploy.checks import k8s_label_problems, k8s_name_problems, raise_if
from tritonkit.errors import DeployValidationError

if TYPE_CHECKING:
    from tritonkit.deploy.aks.vllm import VllmModels

DEFAULT_IMAGE = "nvcr.io/nvidia/tritonserver:24.10-py3"
HTTP_PORT, GRPC_PORT, METRICS_PORT = 8000, 8001, 8002
#: the healer sidecar's /healthz (``tritonkit heal --port``), for its own container's probes
HEAL_PORT = 8003
#: seconds between two liveness (and startup) probes of Triton's container
PROBE_PERIOD_S = 10
#: A high UID/GID no host user has (the NGC images' triton-server user is 1000, which a node may
#: share with a real account); Triton needs no passwd entry, only HOME and its writable mounts.
TRITON_UID = 10001
#: Where mounted Secrets appear in tritonkit's containers (credentials are files, never env vars).
SECRETS_DIR = "/var/run/secrets/tritonkit"
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
#: Label AKS sets on nodes of GPU node pools.
DEFAULT_GPU_NODE_SELECTOR = ("kubernetes.azure.com/accelerator", "nvidia")
DEVICE_PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"
#: NVIDIA's DCGM exporter (the image its own kubernetes manifest pins for DCGM 4.1.3).
DCGM_EXPORTER_IMAGE = "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.3-ubuntu22.04"
DCGM_PORT = 9400
# Admin APIs only: clients (the tritonkit client included) need health, metadata, model-config
# and inference without the admin key.
RESTRICTED_APIS = "model-repository,shared-memory,statistics,trace,logging"
RESTRICTED_HEADER = "triton-admin-key"
QUEUE_METRIC = "triton_queue_time_us"

MONITORING_TARGETS = ("azure-managed-prometheus", "prometheus-operator", "none")
AUTOSCALERS = ("keda", "hpa", "none")
HPA_METRICS = ("queue", "cpu")
#: The API group of the ServiceMonitor/PodMonitor each monitoring target reads (Azure Monitor's
#: managed Prometheus ignores monitoring.coreos.com objects by design, and the reverse).
MONITOR_GROUP = {
    "azure-managed-prometheus": "azmonitoring.coreos.com",
    "prometheus-operator": "monitoring.coreos.com",
}
#: Where the scraper runs (the NetworkPolicy lets it reach the metrics port): Azure's ama-metrics
#: pods run in kube-system.
MANAGED_PROMETHEUS_NAMESPACE = "kube-system"

#: A Kubernetes quantity (4, 500m, 16Gi) and an http(s) URL, as the options take them; the Helm
#: chart's values schema (:mod:`tritonkit.deploy.aks.helm`) holds its values to the same patterns.
QUANTITY_PATTERN = r"^[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti|k|M|G|T)?$"
# https://<workspace>-<hash>.<region>.prometheus.monitor.azure.com (sovereign clouds differ in suffix)
HTTP_URL_PATTERN = r"^https?://[A-Za-z0-9.-]+(:[0-9]+)?(/[^\s]*)?$"

_AS_URI = re.compile(r"^as://(?P<account>[^/]+)/(?P<container>[^/]+)(?P<path>/.*)?$")
_PVC_URI = re.compile(r"^pvc://(?P<claim>[^/]+)(?P<path>/.*)?$")
_STORAGE_ACCOUNT = re.compile(r"^[a-z0-9]{3,24}$")
_CONTAINER = re.compile(r"^[a-z0-9](?!.*--)[a-z0-9-]{1,61}[a-z0-9]$")
_QUANTITY = re.compile(QUANTITY_PATTERN)
_HTTP_URL = re.compile(HTTP_URL_PATTERN)
_GUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def parse_node_selector(text: str) -> tuple[str, str] | None:
    """``KEY=VALUE`` -> (KEY, VALUE); ``none`` -> None (no node selector)."""
    if text.lower() == "none":
        return None
    key, sep, value = text.partition("=")
    if not sep:
        raise DeployValidationError(f"--node-selector {text!r} is not KEY=VALUE or none")
    return key, value


@dataclass(frozen=True)
class AksOptions:
    """Everything `tritonkit deploy --target aks` takes (see docs/deploy.md)."""

    repository: Path
    model_repository: str
    name: str = "triton"
    namespace: str = "triton"
    image: str = DEFAULT_IMAGE
    replicas: int = 1
    gpu_count: int = 1
    gpu_node_selector: tuple[str, str] | None = DEFAULT_GPU_NODE_SELECTOR
    gpu_toleration: bool = True
    storage_secret: str = "triton-storage"
    workload_identity_client_id: str | None = None
    strict_readiness: bool = True
    exit_timeout_secs: int = 30
    restricted_api_secret: str | None = None
    # requests = limits: the pod's QoS class is Guaranteed (no CPU throttling surprises, evicted last).
    cpu_request: str = "4"
    cpu_limit: str = "4"
    memory_request: str = "16Gi"
    memory_limit: str = "16Gi"
    shm_size: str = "1Gi"
    tmp_size: str = "20Gi"
    service_type: str = "ClusterIP"
    monitoring: str = "azure-managed-prometheus"
    autoscaler: str = "keda"
    hpa_metric: str = "queue"
    prometheus_query_endpoint: str | None = None
    keda_identity_client_id: str | None = None
    min_replicas: int | None = None
    max_replicas: int = 4
    cpu_target_percent: int = 70
    queue_time_target_us: int = 50_000
    monitoring_namespace: str = "monitoring"
    prometheus_release: str = "kube-prometheus-stack"
    device_plugin: bool = True
    dcgm_exporter: bool = True
    #: image reference -> "sha256:..." digest: a pinned image is written as IMAGE@DIGEST and pulled
    #: IfNotPresent; an unpinned one is pulled Always (the tag may move).
    image_digests: dict[str, str] = field(default_factory=dict)
    #: namespaces (besides the deployment's own) whose pods may call Triton's HTTP/gRPC ports
    #: (a gateway, a front); with a ClusterIP Service nothing else may.
    ingress_namespaces: tuple[str, ...] = ()
    network_policy: bool = True
    pod_disruption_budget: bool = True
    #: spread replicas across zones (topologySpreadConstraints) when there can be more than one
    zone_spread: bool = True
    #: The longest a decoupled (streaming) request may run; sizes the drain time and LB idle timeout.
    max_stream_seconds: int = 600
    #: "manifests" (plain YAML in apply order) or "helm" (a chart; --dry-run only).
    output_format: str = "manifests"
    labels: dict[str, str] = field(default_factory=dict)
    rollout_timeout_s: float = 900.0
    request_timeout_s: float = 30.0
    context: str | None = None
    smoke_url: str | None = None
    smoke_test: bool = True
    #: the repository's vLLM stages, found by AksDeployer.check() (None: it has none)
    vllm: VllmModels | None = None
    #: the init container copying an as:// repository to the vLLM stages' serving root
    repository_copy_image: str = REPOSITORY_COPY_IMAGE
    #: KEDA adds a replica per this many requests waiting inside the vLLM engines (vllm:* metrics)
    vllm_waiting_target: int = 8
    #: The repository's TensorRT-LLM models (set by AksDeployer from the repository).
    trtllm: TrtllmModels | None = None
    #: the OpenAI front as a container beside Triton (``tritonkit openai``): its port (None: none),
    #: an image with tritonkit[openai] installed, the Secret holding its API keys file (``keys``)
    openai_port: int | None = None
    openai_image: str | None = None
    openai_api_key_secret: str | None = None
    openai_cpu: str = "1"
    openai_memory: str = "1Gi"
    #: ``tritonkit heal`` beside Triton (reloads a model whose engine died): an image with tritonkit
    #: installed; None: the front's image when there is a front, else no healer
    heal_image: str | None = None
    #: models besides the LLM stages the healer probes with a request of its own (``tritonkit heal
    #: --probe-model``): a Python stage's dead stub is seen in an idle pod (Triton 2.51 keeps it READY)
    heal_probe_models: tuple[str, ...] = ()
    #: Triton's container is restarted after its readiness failed this many probes in a row,
    #: ``PROBE_PERIOD_S`` apart: longer than the slowest model reload (its engine's start) plus the
    #: healer's backoff, so a restart happens only where a reload did not help
    liveness_failure_threshold: int = 30
    #: startup: download and first load of every model may take this many probes
    startup_failure_threshold: int = 90

    @property
    def serving_root(self) -> str | None:
        """Where the repository's LLM stages expect it (their configs name files by absolute
        paths under it); None: Triton may read the repository wherever it is."""
        if self.vllm is not None:
            return self.vllm.serving_root
        if self.trtllm is not None and self.trtllm.serving_roots:
            return self.trtllm.serving_roots[0]
        return None

    @property
    def effective_min_replicas(self) -> int:
        return self.min_replicas if self.min_replicas is not None else self.replicas

    @property
    def monitor_group(self) -> str | None:
        """The API group of this target's ServiceMonitor/PodMonitor; None without monitoring."""
        return MONITOR_GROUP.get(self.monitoring)

    @property
    def query_endpoint(self) -> str | None:
        """The Prometheus HTTP API the autoscaler queries (in-cluster for prometheus-operator)."""
        if self.prometheus_query_endpoint:
            return self.prometheus_query_endpoint.rstrip("/")
        if self.monitoring == "prometheus-operator":
            return f"http://{self.prometheus_release}-prometheus.{self.monitoring_namespace}.svc:9090"
        return None

    @property
    def healer_image(self) -> str | None:
        """The image the healer sidecar runs (None: no healer)."""
        if self.heal_image:
            return self.heal_image
        return self.openai_image if self.openai_port is not None and self.openai_image else None

    def image_ref(self, image: str) -> str:
        """``image`` as the manifests name it: with its digest when the options pin it."""
        digest = self.image_digests.get(image)
        return f"{image}@{digest}" if digest else image

    def pull_policy(self, image: str) -> str:
        """IfNotPresent for a digest (it cannot move), Always for a tag (it can)."""
        return "IfNotPresent" if image in self.image_digests else "Always"

    def images(self) -> tuple[str, ...]:
        """Every image the rendered objects use (before pinning)."""
        out = [self.image]
        if self.device_plugin:
            out.append(DEVICE_PLUGIN_IMAGE)
        if self.dcgm_exporter and self.gpu_count > 0 and self.monitor_group is not None:
            out.append(DCGM_EXPORTER_IMAGE)
        if self.serving_root is not None:
            out.append(self.repository_copy_image)
        if self.openai_port is not None and self.openai_image:
            out.append(self.openai_image)
        if self.healer_image is not None and self.healer_image not in out:
            out.append(self.healer_image)
        return tuple(out)

    @property
    def max_pods(self) -> int:
        """The most replicas this deployment can have (the autoscaler's maximum with one)."""
        return (
            self.replicas
            if self.autoscaler == "none"
            else max(self.max_replicas, self.effective_min_replicas)
        )

    def labels_all(self) -> dict[str, str]:
        return {
            "app.kubernetes.io/name": "triton",
            "app.kubernetes.io/instance": self.name,
            "app.kubernetes.io/managed-by": "tritonkit",
            **self.labels,
        }

    def selector(self) -> dict[str, str]:
        return {"app.kubernetes.io/name": "triton", "app.kubernetes.io/instance": self.name}

    def meta(self, name: str | None = None, **extra: Any) -> dict[str, Any]:
        return {"name": name or self.name, "namespace": self.namespace, "labels": self.labels_all(), **extra}

    def series_selector(self) -> str:
        """PromQL label matchers for this deployment's Triton series (the monitor adds `service`)."""
        return f'namespace="{self.namespace}",service="{self.name}"'

    def queue_expr(self, *, by: str = "", window: str = "1m") -> str:
        """Average time a request waited in Triton's queue (us): two counters, each through rate()."""
        sel = self.series_selector()
        group = f" by ({by})" if by else ""
        return (
            f"sum{group} (rate(nv_inference_queue_duration_us{{{sel}}}[{window}]))"
            f" / clamp_min(sum{group} (rate(nv_inference_request_success{{{sel}}}[{window}])), 1e-9)"
        )

    def failure_ratio_expr(self, *, window: str = "5m") -> str:
        sel = self.series_selector()
        return (
            f"sum(rate(nv_inference_request_failure{{{sel}}}[{window}]))"
            f" / clamp_min(sum(rate(nv_inference_request_failure{{{sel}}}[{window}]))"
            f" + sum(rate(nv_inference_request_success{{{sel}}}[{window}])), 1e-9)"
        )


@dataclass(frozen=True)
class ModelRepositoryUri:
    """A parsed ``--model-repository``: Azure Blob (as://) or a PersistentVolumeClaim (pvc://)."""

    scheme: str
    triton_path: str
    claim: str | None = None
    sub_path: str = ""


def parse_model_repository(uri: str) -> ModelRepositoryUri:
    """Parse ``as://account/container/path`` or ``pvc://claim/path``; DeployValidationError otherwise."""
    m = _AS_URI.match(uri)
    if m:
        problems = []
        if not _STORAGE_ACCOUNT.match(m["account"]):
            problems.append(f"storage account {m['account']!r} must be 3-24 lowercase letters and digits")
        if not _CONTAINER.match(m["container"]):
            problems.append(
                f"blob container {m['container']!r} must be 3-63 lowercase letters, digits and single "
                "hyphens, starting and ending with a letter or digit"
            )
        raise_if(problems, f"--model-repository {uri} is not a valid Azure Blob location")
        return ModelRepositoryUri(scheme="as", triton_path=uri.rstrip("/"))
    m = _PVC_URI.match(uri)
    if m:
        raise_if(
            k8s_name_problems("PersistentVolumeClaim", m["claim"], max_len=253), f"--model-repository {uri}"
        )
        sub = (m["path"] or "").strip("/")
        if ".." in sub.split("/"):
            raise DeployValidationError(f"--model-repository {uri}: the path must not contain '..'")
        return ModelRepositoryUri(
            scheme="pvc", triton_path="/models" + (f"/{sub}" if sub else ""), claim=m["claim"], sub_path=sub
        )
    raise DeployValidationError(
        f"--model-repository {uri!r} is neither as://ACCOUNT/CONTAINER/PATH nor pvc://CLAIM/PATH",
        hint="upload the repository to Azure Blob (az storage blob upload-batch) and pass its as:// "
        "location, or put it on a PersistentVolumeClaim and pass pvc://CLAIM/PATH",
    )


def option_problems(o: AksOptions) -> list[str]:
    """Every problem with the settings themselves (no repository, no network)."""
    problems: list[str] = []
    problems += k8s_name_problems("namespace", o.namespace)
    problems += k8s_name_problems("--monitoring-namespace", o.monitoring_namespace)
    problems += k8s_label_problems({"release": o.prometheus_release})
    # The Deployment's pods get "<name>-<hash>-<hash>" names; keep room for them.
    problems += k8s_name_problems("deployment", o.name, max_len=47)
    problems += k8s_label_problems(o.labels_all())
    for secret in (o.storage_secret, o.restricted_api_secret):
        if secret is not None:
            problems += k8s_name_problems("secret", secret, max_len=253)
    if o.replicas < 1:
        problems.append(f"--replicas must be >= 1, got {o.replicas}")
    if o.gpu_count < 0:
        problems.append(f"--gpu-count must be >= 0, got {o.gpu_count}")
    if o.exit_timeout_secs < 0:
        problems.append(f"--exit-timeout-secs must be >= 0, got {o.exit_timeout_secs}")
    if o.max_stream_seconds < 1:
        problems.append(f"--max-stream-seconds must be >= 1, got {o.max_stream_seconds}")
    for flag, value in (
        ("--cpu-request", o.cpu_request),
        ("--cpu-limit", o.cpu_limit),
        ("--memory-request", o.memory_request),
        ("--memory-limit", o.memory_limit),
        ("--shm-size", o.shm_size),
        ("--tmp-size", o.tmp_size),
    ):
        if not _QUANTITY.match(value):
            problems.append(f"{flag} {value!r} is not a Kubernetes quantity (e.g. 2, 500m, 8Gi)")
    problems += _qos_problems(o)
    problems += image_digest_problems(o)
    for ns in o.ingress_namespaces:
        problems += k8s_name_problems("--allow-from-namespace", ns)
    problems += _monitoring_problems(o)
    if o.service_type not in ("ClusterIP", "LoadBalancer", "NodePort"):
        problems.append(f"--service-type must be ClusterIP, LoadBalancer or NodePort, got {o.service_type!r}")
    if o.output_format not in ("manifests", "helm"):
        problems.append(f"--format must be manifests or helm, got {o.output_format!r}")
    if not o.image or any(c.isspace() for c in o.image):
        problems.append(f"--image {o.image!r} is not an image reference")
    problems += _openai_problems(o)
    problems += _probe_problems(o)
    return problems


def _probe_problems(o: AksOptions) -> list[str]:
    """The probes' thresholds and the healer's image."""
    problems = [
        f"{flag} {value}: at least 1 probe"
        for flag, value in (
            ("--liveness-failure-threshold", o.liveness_failure_threshold),
            ("--startup-failure-threshold", o.startup_failure_threshold),
        )
        if value < 1
    ]
    if o.heal_image is not None and (not o.heal_image or any(c.isspace() for c in o.heal_image)):
        problems.append(f"--heal-image {o.heal_image!r} is not an image reference")
    if o.healer_image is not None and o.openai_port == HEAL_PORT:
        problems.append(f"--openai-port {HEAL_PORT}: the healer's port; choose another")
    if o.heal_probe_models and o.healer_image is None:
        problems.append("--heal-probe-model needs the healer: give --heal-image (or deploy the OpenAI front)")
    return problems


def _openai_problems(o: AksOptions) -> list[str]:
    """The OpenAI front's settings: a free port, an image that has it, a valid Secret name."""
    if o.openai_port is None:
        flags = (("--openai-image", o.openai_image), ("--openai-api-key-secret", o.openai_api_key_secret))
        given = [flag for flag, value in flags if value]
        return [f"{', '.join(given)} without --openai-port: the front needs its port"] if given else []
    problems: list[str] = []
    if not 1 <= o.openai_port <= 65535 or o.openai_port in (HTTP_PORT, GRPC_PORT, METRICS_PORT):
        problems.append(f"--openai-port {o.openai_port}: a port (1-65535) other than Triton's 8000-8002")
    if not o.openai_image or any(c.isspace() for c in o.openai_image):
        problems.append(
            "--openai-port needs --openai-image: an image with tritonkit[openai] installed "
            "(tritonkit runs the front; Triton's image has no tritonkit)"
        )
    if o.openai_api_key_secret is not None:
        problems += k8s_name_problems("--openai-api-key-secret", o.openai_api_key_secret, max_len=253)
    for flag, value in (("--openai-cpu", o.openai_cpu), ("--openai-memory", o.openai_memory)):
        if not _QUANTITY.match(value):
            problems.append(f"{flag} {value!r} is not a Kubernetes quantity (e.g. 1, 500m, 1Gi)")
    return problems


def _monitoring_problems(o: AksOptions) -> list[str]:
    problems: list[str] = []
    if o.monitoring not in MONITORING_TARGETS:
        problems.append(f"--monitoring must be {', '.join(MONITORING_TARGETS)}; got {o.monitoring!r}")
        return problems
    if o.autoscaler not in AUTOSCALERS:
        problems.append(f"--autoscaler must be keda, hpa or none, got {o.autoscaler!r}")
        return problems
    if o.hpa_metric not in HPA_METRICS:
        problems.append(f"--hpa-metric must be queue or cpu, got {o.hpa_metric!r}")
    if o.autoscaler != "none" and o.max_replicas < o.effective_min_replicas:
        problems.append(f"--max-replicas {o.max_replicas} is below the minimum {o.effective_min_replicas}")
    if o.prometheus_query_endpoint is not None and not _HTTP_URL.match(o.prometheus_query_endpoint):
        problems.append(f"--prometheus-query-endpoint {o.prometheus_query_endpoint!r} is not an http(s) URL")
    if o.keda_identity_client_id is not None and not _GUID.match(o.keda_identity_client_id):
        problems.append(f"--keda-identity-client-id {o.keda_identity_client_id!r} is not a client id (GUID)")
    if o.autoscaler == "keda":
        if o.monitoring == "none":
            problems.append(
                "--autoscaler keda scales on Triton's queue time, which needs a Prometheus: "
                "choose --monitoring azure-managed-prometheus or prometheus-operator"
            )
        elif o.query_endpoint is None:
            problems.append(
                "--autoscaler keda with azure-managed-prometheus needs --prometheus-query-endpoint: the "
                "Azure Monitor workspace's query endpoint (az monitor account show -n WORKSPACE -g RG "
                "--query metrics.prometheusQueryEndpoint), or choose --autoscaler hpa --hpa-metric cpu"
            )
        elif o.monitoring == "azure-managed-prometheus" and not o.query_endpoint.startswith("https://"):
            problems.append("Azure Monitor's query endpoint is https://...prometheus.monitor.azure.com")
    if o.autoscaler == "hpa" and o.hpa_metric == "queue" and o.monitoring != "prometheus-operator":
        problems.append(
            "--autoscaler hpa --hpa-metric queue reads the queue time through prometheus-adapter from an "
            "in-cluster Prometheus: use --monitoring prometheus-operator, or --autoscaler keda for Azure "
            "managed Prometheus, or --hpa-metric cpu"
        )
    return problems


def parse_image_digest(text: str) -> tuple[str, str]:
    """``IMAGE=sha256:...`` -> (IMAGE, digest); DeployValidationError on bad syntax."""
    image, sep, digest = text.rpartition("=")
    if not sep or not image or not _DIGEST.match(digest):
        raise DeployValidationError(
            f"--image-digest {text!r} is not IMAGE=sha256:<64 hex digits>",
            hint="read the digest with `docker buildx imagetools inspect IMAGE` (or your registry) and pass "
            "--image-digest nvcr.io/nvidia/tritonserver:24.10-py3=sha256:...",
        )
    return image, digest


def read_image_lock(path: Path) -> dict[str, str]:
    """A lock file of image -> digest (JSON or YAML mapping), checked like --image-digest."""
    import yaml

    try:
        doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise DeployValidationError(f"cannot read the image lock file {path}: {exc}") from exc
    if not isinstance(doc, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in doc.items()
    ):
        raise DeployValidationError(
            f"{path} is not a mapping of image -> digest",
            hint='e.g. {"nvcr.io/nvidia/tritonserver:24.10-py3": "sha256:..."}',
        )
    return dict(parse_image_digest(f"{k}={v}") for k, v in doc.items())


def image_digest_problems(o: AksOptions) -> list[str]:
    """A pin must name an image this deployment uses (a typo would silently leave it unpinned)."""
    used = set(o.images())
    return [
        f"--image-digest {image}: the deployment uses no such image (it uses {', '.join(sorted(used))})"
        for image in sorted(o.image_digests)
        if image not in used
    ] + [
        f"--image-digest {image}: {d!r} is not sha256:<64 hex digits>"
        for image, d in sorted(o.image_digests.items())
        if not _DIGEST.match(d)
    ]


def unpinned_warning(o: AksOptions) -> str | None:
    """One line naming the images pulled by tag, and how to pin them; None when all are pinned."""
    loose = [image for image in o.images() if image not in o.image_digests]
    if not loose:
        return None
    return (
        f"{len(loose)} image(s) are pulled by tag, not pinned by digest ({', '.join(loose)}): pin each with "
        "--image-digest IMAGE=sha256:... or --image-lock FILE (image -> digest)"
    )


_UNITS = {
    "": 1,
    "m": 0.001,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}


def quantity(value: str) -> float:
    """A Kubernetes quantity's value (``500m`` -> 0.5, ``1Gi`` -> 1073741824)."""
    match = _QUANTITY.match(value)
    if not match:
        raise DeployValidationError(f"{value!r} is not a Kubernetes quantity")
    return float(value[: match.start(2)] if match.group(2) else value) * _UNITS[match.group(2) or ""]


def _qos_problems(o: AksOptions) -> list[str]:
    """requests = limits for CPU and memory: the Guaranteed QoS class latency-critical serving wants."""
    problems: list[str] = []
    for what, request, limit in (
        ("cpu", o.cpu_request, o.cpu_limit),
        ("memory", o.memory_request, o.memory_limit),
    ):
        if _QUANTITY.match(request) and _QUANTITY.match(limit) and quantity(request) != quantity(limit):
            problems.append(
                f"--{what}-request {request} differs from --{what}-limit {limit}: tritonkit keeps them equal "
                f"(Guaranteed QoS: the pod is neither throttled below its limit nor evicted first); pass "
                f"one value, --{what}-request alone sets both"
            )
    return problems
