"""Render an AKS deployment as plain objects: Kubernetes manifests (file name -> objects, in apply
order) and the non-Kubernetes files beside them (the Azure rule-group template, the dashboard).

Pure functions of :class:`AksOptions`, the parsed repository URI and the repository's model
summaries: no cluster, no network. ``deployer.py`` applies the same objects; ``helm.py`` templates them.
Secrets (storage key, restricted-API key) are referenced by name through ``secretKeyRef``; their
values never appear in an object.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from tritonkit.deploy.aks import hardening as hard
from tritonkit.deploy.aks import healer
from tritonkit.deploy.aks import monitoring as mon
from tritonkit.deploy.aks import node_agents as agents
from tritonkit.deploy.aks import openai_front as front
from tritonkit.deploy.aks import trtllm as aks_trtllm
from tritonkit.deploy.aks import vllm as aks_vllm
from tritonkit.deploy.aks.grafana import dashboard
from tritonkit.deploy.aks.options import (
    DCGM_PORT,
    GRPC_PORT,
    HTTP_PORT,
    MANAGED_PROMETHEUS_NAMESPACE,
    METRICS_PORT,
    PROBE_PERIOD_S,
    AksOptions,
    ModelRepositoryUri,
)
from tritonkit.deploy.checks import ModelSummary

#: Built-in API groups (validated with Kubernetes' own OpenAPI schemas); "" is the core group.
BUILTIN_GROUPS = frozenset({"", "apps", "policy", "networking.k8s.io", "autoscaling"})
KEDA_GROUP = "keda.sh"
RULE_GROUPS_FILE = "azure/prometheus-rule-groups.json"
DASHBOARD_FILE = "grafana/triton-dashboard.json"


@dataclass(frozen=True)
class Rendered:
    """What a deployment consists of: manifests by file (apply order) and other files by path."""

    manifests: dict[str, list[dict[str, Any]]]
    files: dict[str, dict[str, Any]]
    decoupled: tuple[str, ...] = ()

    def objects(self) -> list[dict[str, Any]]:
        return [doc for docs in self.manifests.values() for doc in docs]


def api_group(doc: dict[str, Any]) -> str:
    """The API group of an object ("" for the core group)."""
    version = str(doc.get("apiVersion", ""))
    return version.rpartition("/")[0]


def allowed_groups(o: AksOptions) -> frozenset[str]:
    """Every API group the chosen targets have: the built-ins, the monitor group, keda.sh."""
    groups = set(BUILTIN_GROUPS)
    if o.monitor_group is not None:
        groups.add(o.monitor_group)
    if o.autoscaler == "keda":
        groups.add(KEDA_GROUP)
    return frozenset(groups)


def render(o: AksOptions, uri: ModelRepositoryUri, models: Sequence[ModelSummary]) -> Rendered:
    """Every object and file of the deployment for these options."""
    decoupled = tuple(sorted(m.name for m in models if m.decoupled))
    # GPU metrics only where something scrapes them.
    gpu_metrics = o.dcgm_exporter and o.gpu_count > 0 and o.monitor_group is not None
    out: dict[str, list[dict[str, Any]]] = {}
    if o.device_plugin:
        out["00-nvidia-device-plugin.yaml"] = [
            agents.device_plugin(o),
            hard.node_agent_policy(
                "nvidia-device-plugin", {"app.kubernetes.io/name": "nvidia-device-plugin"}
            ),
        ]
    out["01-namespace.yaml"] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": o.namespace, "labels": o.labels_all()}}
    ]
    if o.workload_identity_client_id is not None:
        out["02-serviceaccount.yaml"] = [service_account(o)]
    if gpu_metrics:
        # The exporter and its monitor together: a chart value (or the GPU Operator) drops both.
        out["03-dcgm-exporter.yaml"] = [
            agents.dcgm_exporter(o),
            hard.node_agent_policy(
                "dcgm-exporter",
                {"app.kubernetes.io/name": "dcgm-exporter"},
                port=DCGM_PORT,
                scraper_namespace=scraper_namespace(o),
            ),
            mon.dcgm_pod_monitor(o),
        ]
    out["10-deployment.yaml"] = [deployment(o, uri, streaming=bool(decoupled))]
    out["11-service.yaml"] = [service(o, streaming=bool(decoupled))]
    if o.pod_disruption_budget:
        out["12-poddisruptionbudget.yaml"] = [pdb(o)]
    if o.network_policy:
        out["13-networkpolicy.yaml"] = [network_policy(o)]
    files: dict[str, dict[str, Any]] = {}
    if o.monitor_group is not None:
        out["20-servicemonitor.yaml"] = [mon.service_monitor(o)]
        files[DASHBOARD_FILE] = dashboard(o)
    if o.autoscaler == "keda":
        out["21-keda-scaledobject.yaml"] = mon.keda_objects(o)
    elif o.autoscaler == "hpa":
        out["21-hpa.yaml"] = [mon.hpa(o)]
    if o.monitoring == "prometheus-operator":
        out["22-prometheusrule.yaml"] = [mon.prometheus_rule(o)]
        if o.autoscaler == "hpa" and o.hpa_metric == "queue":
            out["23-prometheus-adapter-rules.yaml"] = [mon.adapter_config(o)]
    elif o.monitoring == "azure-managed-prometheus":
        files[RULE_GROUPS_FILE] = mon.rule_groups_arm(o)
    return Rendered(manifests=out, files=files, decoupled=decoupled)


def exit_timeout(o: AksOptions, *, streaming: bool) -> int:
    """Triton's drain time: a streaming repository waits for its longest stream to finish."""
    return max(o.exit_timeout_secs, o.max_stream_seconds) if streaming else o.exit_timeout_secs


def repository_path(o: AksOptions, uri: ModelRepositoryUri) -> str:
    """Where Triton reads the repository: the LLM stages' serving root when there are any."""
    return o.serving_root if o.serving_root is not None else uri.triton_path


def _models_volume_size(o: AksOptions) -> str:
    if o.vllm is not None:
        return aks_vllm.models_volume_size(o.vllm)
    if o.trtllm is not None:
        return aks_trtllm.models_volume_size(o.trtllm)
    return "1Gi"


def triton_args(o: AksOptions, uri: ModelRepositoryUri, *, streaming: bool) -> list[str]:
    args = [
        f"--model-repository={repository_path(o, uri)}",
        f"--strict-readiness={'true' if o.strict_readiness else 'false'}",
        f"--exit-timeout-secs={exit_timeout(o, streaming=streaming)}",
        f"--http-port={HTTP_PORT}",
        f"--grpc-port={GRPC_PORT}",
        f"--metrics-port={METRICS_PORT}",
        "--allow-metrics=true",
        # Explicit model control, every model loaded at start: a model whose engine died can be
        # loaded again (NVIDIA's vllm backend unloads it; the healer loads it) without a restart.
        "--model-control-mode=explicit",
        "--load-model=*",
        "--log-format=ISO8601",
    ]
    # The admin-key flags (--restricted-api-secret) are added by the launch shell, which reads the
    # key from its mounted Secret file (hardening.launch): the key never enters the pod spec.
    return args


def container_env(o: AksOptions, uri: ModelRepositoryUri) -> list[dict[str, Any]]:
    """Triton's environment: no credential (those are mounted files, see hardening.launch)."""
    # HOME on the writable /tmp: the root filesystem is read-only and the UID has no passwd entry.
    return [{"name": "HOME", "value": "/tmp"}]


def _probes(o: AksOptions) -> dict[str, Any]:
    """Triton's probes: all on its readiness (every model loaded and ready, --strict-readiness).

    Health endpoints only: a decoupled model answers HTTP /infer with 501, so no probe infers.
    Readiness takes the pod out of the Service within two probes (10 s) of a model going down.
    Liveness restarts the container only once readiness has been false for
    ``liveness_failure_threshold`` x 10 s: longer than a model's reload (the healer's, after an
    engine died) takes, so a restart comes only where a reload did not help. Triton's own
    /v2/health/live stays true through such a fault, and a hung server fails both.
    """
    ready = {"path": "/v2/health/ready", "port": "http"}
    return {
        # Model download and load can take minutes: the startup probe holds the others off.
        "startupProbe": {
            "httpGet": ready,
            "periodSeconds": PROBE_PERIOD_S,
            "timeoutSeconds": 5,
            "failureThreshold": o.startup_failure_threshold,
        },
        "readinessProbe": {
            "httpGet": ready,
            "periodSeconds": 5,
            "timeoutSeconds": 3,
            "failureThreshold": 2,
            "successThreshold": 1,
        },
        "livenessProbe": {
            "httpGet": ready,
            "periodSeconds": PROBE_PERIOD_S,
            "timeoutSeconds": 5,
            "failureThreshold": o.liveness_failure_threshold,
        },
    }


def _volumes(o: AksOptions, uri: ModelRepositoryUri) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    mounts: list[dict[str, Any]] = [
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    volumes: list[dict[str, Any]] = [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": o.shm_size}},
        # Triton downloads an as:// repository to a temporary directory; Python models write here.
        {"name": "tmp", "emptyDir": {"sizeLimit": o.tmp_size}},
    ]
    if hard.storage_key_used(o, uri):
        volumes.append(hard.secret_volume("storage-credentials", o.storage_secret))
    if o.restricted_api_secret is not None:
        mounts.append(hard.secret_mount("admin-key", hard.ADMIN_DIR))
        volumes.append(hard.secret_volume("admin-key", o.restricted_api_secret))
    if o.serving_root is not None:
        # LLM stages (vLLM, TensorRT-LLM) name files by absolute paths under the serving root: the repository
        # must be exactly there (copied by the init container, or the claim's sub-path mounted).
        mount: dict[str, Any] = {
            "name": "model-repository",
            "mountPath": o.serving_root,
            "readOnly": True,
        }
        if uri.scheme == "pvc":
            if uri.sub_path:
                mount["subPath"] = uri.sub_path
            volumes.append(
                {
                    "name": "model-repository",
                    "persistentVolumeClaim": {"claimName": uri.claim, "readOnly": True},
                }
            )
        else:
            volumes.append({"name": "model-repository", "emptyDir": {"sizeLimit": _models_volume_size(o)}})
        mounts.append(mount)
    elif uri.scheme == "pvc":
        mounts.append({"name": "model-repository", "mountPath": "/models", "readOnly": True})
        volumes.append(
            {"name": "model-repository", "persistentVolumeClaim": {"claimName": uri.claim, "readOnly": True}}
        )
    return mounts, volumes


def deployment(o: AksOptions, uri: ModelRepositoryUri, *, streaming: bool = False) -> dict[str, Any]:
    resources = hard.guaranteed(o.cpu_request, o.memory_request)
    resources["limits"] = {"cpu": o.cpu_limit, "memory": o.memory_limit}  # equal: option_problems
    if o.gpu_count > 0:
        resources["requests"]["nvidia.com/gpu"] = str(o.gpu_count)
        resources["limits"]["nvidia.com/gpu"] = str(o.gpu_count)
    mounts, volumes = _volumes(o, uri)
    env = container_env(o, uri)
    init: list[dict[str, Any]] = []
    copied = o.serving_root is not None and uri.scheme == "as"
    if copied:
        # Triton reads the local copy: the storage key stays with the init container.
        init.append(
            aks_vllm.copy_init_container(
                triton_path=uri.triton_path,
                serving_root=str(o.serving_root),
                env=list(env),
                security=hard.CONTAINER_SECURITY,
                image=o.image_ref(o.repository_copy_image),
                pull_policy=o.pull_policy(o.repository_copy_image),
                credentials=hard.STORAGE_DIR if hard.storage_key_used(o, uri) else None,
            )
        )
    storage_key = hard.storage_key_used(o, uri) and not copied
    if storage_key:
        mounts.append(hard.secret_mount("storage-credentials", hard.STORAGE_DIR))
    container: dict[str, Any] = {
        "name": "tritonserver",
        "image": o.image_ref(o.image),
        "imagePullPolicy": o.pull_policy(o.image),
        **hard.launch(o, storage_key=storage_key),
        "args": triton_args(o, uri, streaming=streaming),
        "env": env,
        "ports": [
            {"name": "http", "containerPort": HTTP_PORT, "protocol": "TCP"},
            {"name": "grpc", "containerPort": GRPC_PORT, "protocol": "TCP"},
            {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"},
        ],
        **_probes(o),
        "resources": resources,
        "volumeMounts": mounts,
        "securityContext": dict(hard.CONTAINER_SECURITY),
    }
    pod_labels = dict(o.labels_all())
    containers = [container]
    if o.openai_port is not None:
        containers.append(front.container(o))
        volumes += front.volumes(o)
    if o.healer_image is not None:
        containers.append(healer.container(o))
    pod_spec: dict[str, Any] = {
        **({"initContainers": init} if init else {}),
        "containers": containers,
        "volumes": volumes,
        # Triton finishes in-flight requests (streams included) for up to --exit-timeout-secs.
        "terminationGracePeriodSeconds": exit_timeout(o, streaming=streaming) + 10,
        "securityContext": dict(hard.POD_SECURITY),
        # The token only where a feature needs it: workload identity (the copy init container's az login).
        "automountServiceAccountToken": o.workload_identity_client_id is not None,
    }
    spread = hard.zone_spread(o)
    if spread:
        pod_spec["topologySpreadConstraints"] = spread
    if o.workload_identity_client_id is not None:
        pod_spec["serviceAccountName"] = o.name
        pod_labels["azure.workload.identity/use"] = "true"
    if o.gpu_node_selector is not None:
        pod_spec["nodeSelector"] = {o.gpu_node_selector[0]: o.gpu_node_selector[1]}
    if o.gpu_toleration:
        pod_spec["tolerations"] = [
            {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
        ]
    spec: dict[str, Any] = {
        "revisionHistoryLimit": 3,
        "selector": {"matchLabels": o.selector()},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
        "template": {
            "metadata": {
                "labels": pod_labels,
                "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": str(METRICS_PORT)},
            },
            "spec": pod_spec,
        },
    }
    if o.autoscaler == "none":
        spec = {"replicas": o.replicas, **spec}
    # With an autoscaler the Deployment leaves replicas out: a field tritonkit owned would be reset
    # to --replicas by every re-apply, undoing the autoscaler (it starts from --min-replicas).
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": o.meta(), "spec": spec}


def service_account(o: AksOptions) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": o.meta(
            annotations={"azure.workload.identity/client-id": str(o.workload_identity_client_id)}
        ),
    }


def service(o: AksOptions, *, streaming: bool = False) -> dict[str, Any]:
    """HTTP, gRPC (HTTP/2 cleartext: appProtocol kubernetes.io/h2c) and metrics."""
    meta = o.meta()
    if streaming and o.service_type == "LoadBalancer":
        # Azure Load Balancer drops a TCP flow idle for 4 minutes by default; a long stream's
        # silences (time to first piece, slow generations) must fit.
        meta["annotations"] = {
            "service.beta.kubernetes.io/azure-load-balancer-tcp-idle-timeout": str(
                mon.lb_idle_timeout_minutes(o)
            )
        }
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "type": o.service_type,
            "selector": o.selector(),
            "ports": [
                {
                    "name": "http",
                    "port": HTTP_PORT,
                    "targetPort": "http",
                    "protocol": "TCP",
                    "appProtocol": "http",
                },
                {
                    "name": "grpc",
                    "port": GRPC_PORT,
                    "targetPort": "grpc",
                    "protocol": "TCP",
                    "appProtocol": "kubernetes.io/h2c",
                },
                {
                    "name": "metrics",
                    "port": METRICS_PORT,
                    "targetPort": "metrics",
                    "protocol": "TCP",
                    "appProtocol": "http",
                },
                *([front.service_port(o)] if o.openai_port is not None else []),
            ],
        },
    }


def pdb(o: AksOptions) -> dict[str, Any]:
    # maxUnavailable (not minAvailable) so a single-replica deployment never blocks node drains.
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": o.meta(),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": o.selector()}},
    }


def scraper_namespace(o: AksOptions) -> str:
    """Where the Prometheus that scrapes the metrics ports runs."""
    managed = o.monitoring == "azure-managed-prometheus"
    return MANAGED_PROMETHEUS_NAMESPACE if managed else o.monitoring_namespace


def _serving_ingress(o: AksOptions) -> dict[str, Any]:
    """Who may call Triton's HTTP/gRPC ports: with a ClusterIP Service the deployment's own namespace
    (a gateway or front beside it) and the namespaces --allow-from-namespace names; a LoadBalancer or
    NodePort Service is called from outside the cluster, which no pod or namespace selector names."""
    ports = [HTTP_PORT, GRPC_PORT] + ([o.openai_port] if o.openai_port is not None else [])
    rule: dict[str, Any] = {"ports": [{"protocol": "TCP", "port": port} for port in ports]}
    if o.service_type == "ClusterIP":
        rule["from"] = [{"podSelector": {}}] + [
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}
            for ns in o.ingress_namespaces
        ]
    return rule


def network_policy(o: AksOptions) -> dict[str, Any]:
    scraper = scraper_namespace(o)
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": o.meta(),
        "spec": {
            "podSelector": {"matchLabels": o.selector()},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [
                _serving_ingress(o),
                {
                    "from": [
                        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": scraper}}}
                    ],
                    # the OpenAI front's /metrics is on its serving port
                    "ports": [
                        {"protocol": "TCP", "port": port}
                        for port in [METRICS_PORT] + ([o.openai_port] if o.openai_port is not None else [])
                    ],
                },
            ],
            "egress": [
                # DNS, and HTTPS to Azure Blob Storage / Entra ID for the model repository.
                {"ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]},
                {"ports": [{"protocol": "TCP", "port": 443}]},
            ],
        },
    }


# --------------------------------------------------------------------------- text


HEADER = "# Generated by `tritonkit deploy --target aks --dry-run`; secrets are referenced, never embedded.\n"


def dump_yaml(docs: Sequence[dict[str, Any]], *, header: str = HEADER) -> str:
    return header + yaml.dump_all(
        list(docs), Dumper=_NoAliasDumper, sort_keys=False, default_flow_style=False
    )


def dump_json(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


class _NoAliasDumper(yaml.SafeDumper):
    """Writes repeated sub-objects (the probes' httpGet) in full instead of as YAML anchors."""

    def ignore_aliases(self, data: Any) -> bool:
        return True
