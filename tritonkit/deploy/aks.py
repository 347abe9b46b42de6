"""Deploy a Triton model repository to AKS: render manifests, server-side apply, wait, smoke-test.

The manifests are plain dicts (rendered to YAML) built from :class:`AksOptions`; ``plan()`` checks
names, labels, the model-repository URI and the repository itself before anything is applied.
Secrets (storage key, restricted-API key) are referenced by name through ``secretKeyRef``; their
values never appear in a manifest.
"""

from __future__ import annotations

import contextlib
import logging
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tritonkit._extras import require
from tritonkit.deploy.base import Artifact, DeployPlan, DeployResult, DeployStatus, Progress, SmokeResult
from tritonkit.deploy.checks import (
    ModelSummary,
    ensembles,
    image_target_for,
    k8s_label_problems,
    k8s_name_problems,
    packed_env_problems,
    raise_if,
    validate_for_deploy,
)
from tritonkit.deploy.smoke import smoke_test
from tritonkit.errors import DeployValidationError, KubernetesError

logger = logging.getLogger(__name__)

DEFAULT_IMAGE = "nvcr.io/nvidia/tritonserver:24.10-py3"
FIELD_MANAGER = "tritonkit"
HTTP_PORT, GRPC_PORT, METRICS_PORT = 8000, 8001, 8002
#: The triton-server user of the NGC images.
TRITON_UID = 1000
#: Label AKS sets on nodes of GPU node pools.
DEFAULT_GPU_NODE_SELECTOR = ("kubernetes.azure.com/accelerator", "nvidia")
DEVICE_PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"
# Admin APIs only: clients (the tritonkit client included) need health, metadata, model-config
# and inference without the admin key.
RESTRICTED_APIS = "model-repository,shared-memory,statistics,trace,logging"
RESTRICTED_HEADER = "triton-admin-key"
QUEUE_METRIC = "triton_queue_time_us"

_AS_URI = re.compile(r"^as://(?P<account>[^/]+)/(?P<container>[^/]+)(?P<path>/.*)?$")
_PVC_URI = re.compile(r"^pvc://(?P<claim>[^/]+)(?P<path>/.*)?$")
_STORAGE_ACCOUNT = re.compile(r"^[a-z0-9]{3,24}$")
_CONTAINER = re.compile(r"^[a-z0-9](?!.*--)[a-z0-9-]{1,61}[a-z0-9]$")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti|k|M|G|T)?$")


@dataclass(frozen=True)
class AksOptions:
    """Everything `tritonkit deploy --target aks` takes (see the README's deploy section)."""

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
    cpu_request: str = "2"
    cpu_limit: str = "4"
    memory_request: str = "8Gi"
    memory_limit: str = "16Gi"
    shm_size: str = "1Gi"
    tmp_size: str = "20Gi"
    service_type: str = "ClusterIP"
    hpa: str | None = "cpu"
    min_replicas: int | None = None
    max_replicas: int = 4
    cpu_target_percent: int = 70
    queue_time_target_us: int = 50_000
    monitoring_namespace: str = "monitoring"
    prometheus_release: str = "kube-prometheus-stack"
    device_plugin: bool = True
    labels: dict[str, str] = field(default_factory=dict)
    rollout_timeout_s: float = 900.0
    request_timeout_s: float = 30.0
    context: str | None = None
    smoke_url: str | None = None
    smoke_test: bool = True


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


class AksDeployer:
    """Deploys a model repository to AKS (or any Kubernetes with NVIDIA GPUs)."""

    target = "aks"

    def __init__(self, *, options: AksOptions, api_client: Any | None = None) -> None:
        self.options = options
        self._api_client = api_client

    # ------------------------------------------------------------------ plan

    def check(self) -> tuple[ModelRepositoryUri, list[ModelSummary]]:
        """Every offline check: options, names, labels, URI, then the repository validator."""
        o = self.options
        problems: list[str] = []
        problems += k8s_name_problems("namespace", o.namespace)
        # The Deployment's pods get "<name>-<hash>-<hash>" names; keep room for them.
        problems += k8s_name_problems("deployment", o.name, max_len=47)
        problems += k8s_label_problems(self.labels())
        for secret in (o.storage_secret, o.restricted_api_secret):
            if secret is not None:
                problems += k8s_name_problems("secret", secret, max_len=253)
        if o.replicas < 1:
            problems.append(f"--replicas must be >= 1, got {o.replicas}")
        if o.gpu_count < 0:
            problems.append(f"--gpu-count must be >= 0, got {o.gpu_count}")
        if o.exit_timeout_secs < 0:
            problems.append(f"--exit-timeout-secs must be >= 0, got {o.exit_timeout_secs}")
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
        if o.hpa not in (None, "cpu", "queue"):
            problems.append(f"--hpa must be cpu, queue or none, got {o.hpa!r}")
        if o.hpa is not None and o.max_replicas < self.min_replicas:
            problems.append(f"--max-replicas {o.max_replicas} is below the minimum {self.min_replicas}")
        if o.service_type not in ("ClusterIP", "LoadBalancer", "NodePort"):
            problems.append(
                f"--service-type must be ClusterIP, LoadBalancer or NodePort, got {o.service_type!r}"
            )
        if not o.image or any(c.isspace() for c in o.image):
            problems.append(f"--image {o.image!r} is not an image reference")
        raise_if(problems, "the AKS deployment settings are not valid; nothing was applied")
        uri = parse_model_repository(o.model_repository)
        models = validate_for_deploy(o.repository, target=image_target_for(o.image))
        raise_if(
            packed_env_problems(o.repository, o.image),
            "the image cannot run the repository's packed Python environments; nothing was applied",
        )
        return uri, models

    @property
    def min_replicas(self) -> int:
        return self.options.min_replicas if self.options.min_replicas is not None else self.options.replicas

    def labels(self) -> dict[str, str]:
        return {
            "app.kubernetes.io/name": "triton",
            "app.kubernetes.io/instance": self.options.name,
            "app.kubernetes.io/managed-by": "tritonkit",
            **self.options.labels,
        }

    def selector(self) -> dict[str, str]:
        return {"app.kubernetes.io/name": "triton", "app.kubernetes.io/instance": self.options.name}

    def plan(self) -> DeployPlan:
        uri, models = self.check()
        manifests = self.manifests(uri, models)
        artifacts = tuple(
            Artifact(filename=fname, text=_dump_all(docs), description=", ".join(d["kind"] for d in docs))
            for fname, docs in manifests.items()
        )
        o = self.options
        warnings: list[str] = []
        if o.gpu_count > 0 and not any(m.uses_gpu for m in models):
            warnings.append("the pods request GPUs but no model has a KIND_GPU/KIND_AUTO instance group")
        if uri.scheme == "as" and o.workload_identity_client_id is not None:
            warnings.append(
                "workload identity needs the identity to hold 'Storage Blob Data Reader' on the container"
            )
        summary = (
            ("namespace", o.namespace),
            ("deployment", o.name),
            ("image", o.image),
            ("model repository", uri.triton_path if uri.scheme == "as" else f"{o.model_repository}"),
            ("replicas", str(o.replicas)),
            ("gpus per pod", str(o.gpu_count)),
            ("autoscaling", o.hpa or "none"),
            ("models", ", ".join(m.name for m in models)),
        )
        return DeployPlan(
            target=self.target,
            repository=Path(o.repository),
            artifacts=artifacts,
            summary=summary,
            warnings=tuple(warnings),
        )

    # ------------------------------------------------------------------ manifests

    def manifests(
        self, uri: ModelRepositoryUri, models: list[ModelSummary]
    ) -> dict[str, list[dict[str, Any]]]:
        """File name -> Kubernetes objects, in apply order."""
        o = self.options
        out: dict[str, list[dict[str, Any]]] = {}
        if o.device_plugin:
            out["00-nvidia-device-plugin.yaml"] = [self._device_plugin()]
        out["01-namespace.yaml"] = [
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": o.namespace, "labels": self.labels()},
            }
        ]
        if o.workload_identity_client_id is not None:
            out["02-serviceaccount.yaml"] = [self._service_account()]
        out["10-deployment.yaml"] = [self._deployment(uri)]
        out["11-service.yaml"] = [self._service()]
        out["12-poddisruptionbudget.yaml"] = [self._pdb()]
        out["13-networkpolicy.yaml"] = [self._network_policy()]
        out["20-servicemonitor.yaml"] = [self._service_monitor()]
        if o.hpa == "cpu":
            out["21-hpa.yaml"] = [self._hpa_cpu()]
        elif o.hpa == "queue":
            out["21-hpa.yaml"] = [self._hpa_queue()]
            out["22-prometheusrule.yaml"] = [self._prometheus_rule()]
            out["23-prometheus-adapter-rules.yaml"] = [self._adapter_config()]
        return out

    def _meta(self, name: str | None = None, **extra: Any) -> dict[str, Any]:
        return {
            "name": name or self.options.name,
            "namespace": self.options.namespace,
            "labels": self.labels(),
            **extra,
        }

    def _triton_args(self, uri: ModelRepositoryUri) -> list[str]:
        o = self.options
        args = [
            f"--model-repository={uri.triton_path}",
            f"--strict-readiness={'true' if o.strict_readiness else 'false'}",
            f"--exit-timeout-secs={o.exit_timeout_secs}",
            f"--http-port={HTTP_PORT}",
            f"--grpc-port={GRPC_PORT}",
            f"--metrics-port={METRICS_PORT}",
            "--allow-metrics=true",
            "--model-control-mode=none",
            "--log-format=ISO8601",
        ]
        if o.restricted_api_secret is not None:
            # $(VAR) is expanded by the kubelet from the container's env (a secretKeyRef).
            restriction = f"{RESTRICTED_APIS}:{RESTRICTED_HEADER}=$(TRITON_RESTRICTED_API_KEY)"
            args += [f"--http-restricted-api={restriction}", f"--grpc-restricted-protocol={restriction}"]
        return args

    def _env(self, uri: ModelRepositoryUri) -> list[dict[str, Any]]:
        o = self.options
        env: list[dict[str, Any]] = [{"name": "HOME", "value": "/tmp"}]
        if uri.scheme == "as" and o.workload_identity_client_id is None:
            for key in ("AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY"):
                env.append(
                    {"name": key, "valueFrom": {"secretKeyRef": {"name": o.storage_secret, "key": key}}}
                )
        if o.restricted_api_secret is not None:
            env.append(
                {
                    "name": "TRITON_RESTRICTED_API_KEY",
                    "valueFrom": {"secretKeyRef": {"name": o.restricted_api_secret, "key": "key"}},
                }
            )
        return env

    def _deployment(self, uri: ModelRepositoryUri) -> dict[str, Any]:
        o = self.options
        resources: dict[str, Any] = {
            "requests": {"cpu": o.cpu_request, "memory": o.memory_request},
            "limits": {"cpu": o.cpu_limit, "memory": o.memory_limit},
        }
        if o.gpu_count > 0:
            resources["requests"]["nvidia.com/gpu"] = str(o.gpu_count)
            resources["limits"]["nvidia.com/gpu"] = str(o.gpu_count)
        mounts: list[dict[str, Any]] = [
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "tmp", "mountPath": "/tmp"},
        ]
        volumes: list[dict[str, Any]] = [
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": o.shm_size}},
            # Triton downloads an as:// repository to a temporary directory; Python models write here.
            {"name": "tmp", "emptyDir": {"sizeLimit": o.tmp_size}},
        ]
        if uri.scheme == "pvc":
            mounts.append({"name": "model-repository", "mountPath": "/models", "readOnly": True})
            volumes.append(
                {
                    "name": "model-repository",
                    "persistentVolumeClaim": {"claimName": uri.claim, "readOnly": True},
                }
            )
        http_probe = {"path": "/v2/health/ready", "port": "http"}
        container: dict[str, Any] = {
            "name": "tritonserver",
            "image": o.image,
            "imagePullPolicy": "IfNotPresent",
            "command": ["tritonserver"],
            "args": self._triton_args(uri),
            "env": self._env(uri),
            "ports": [
                {"name": "http", "containerPort": HTTP_PORT, "protocol": "TCP"},
                {"name": "grpc", "containerPort": GRPC_PORT, "protocol": "TCP"},
                {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"},
            ],
            # Model download and load can take minutes: the startup probe holds the others off.
            "startupProbe": {
                "httpGet": http_probe,
                "periodSeconds": 10,
                "timeoutSeconds": 5,
                "failureThreshold": 90,
            },
            "readinessProbe": {
                "httpGet": http_probe,
                "periodSeconds": 5,
                "timeoutSeconds": 3,
                "failureThreshold": 3,
                "successThreshold": 1,
            },
            "livenessProbe": {
                "httpGet": {"path": "/v2/health/live", "port": "http"},
                "periodSeconds": 10,
                "timeoutSeconds": 5,
                "failureThreshold": 3,
            },
            "resources": resources,
            "volumeMounts": mounts,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": TRITON_UID,
                "runAsGroup": TRITON_UID,
                "allowPrivilegeEscalation": False,
                "readOnlyRootFilesystem": True,
                "privileged": False,
                "capabilities": {"drop": ["ALL"]},
                "seccompProfile": {"type": "RuntimeDefault"},
            },
        }
        pod_labels = dict(self.labels())
        pod_spec: dict[str, Any] = {
            "containers": [container],
            "volumes": volumes,
            # Triton finishes in-flight requests for up to --exit-timeout-secs after SIGTERM.
            "terminationGracePeriodSeconds": o.exit_timeout_secs + 10,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": TRITON_UID,
                "runAsGroup": TRITON_UID,
                "fsGroup": TRITON_UID,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "automountServiceAccountToken": o.workload_identity_client_id is not None,
        }
        if o.workload_identity_client_id is not None:
            pod_spec["serviceAccountName"] = o.name
            pod_labels["azure.workload.identity/use"] = "true"
        if o.gpu_node_selector is not None:
            pod_spec["nodeSelector"] = {o.gpu_node_selector[0]: o.gpu_node_selector[1]}
        if o.gpu_toleration:
            pod_spec["tolerations"] = [
                {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
            ]
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": self._meta(),
            "spec": {
                "replicas": o.replicas,
                "revisionHistoryLimit": 3,
                "selector": {"matchLabels": self.selector()},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
                "template": {
                    "metadata": {
                        "labels": pod_labels,
                        "annotations": {
                            "prometheus.io/scrape": "true",
                            "prometheus.io/port": str(METRICS_PORT),
                        },
                    },
                    "spec": pod_spec,
                },
            },
        }

    def _service_account(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": self._meta(
                annotations={
                    "azure.workload.identity/client-id": str(self.options.workload_identity_client_id)
                }
            ),
        }

    def _service(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": self._meta(),
            "spec": {
                "type": self.options.service_type,
                "selector": self.selector(),
                "ports": [
                    {"name": "http", "port": HTTP_PORT, "targetPort": "http", "protocol": "TCP"},
                    {"name": "grpc", "port": GRPC_PORT, "targetPort": "grpc", "protocol": "TCP"},
                    {"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics", "protocol": "TCP"},
                ],
            },
        }

    def _pdb(self) -> dict[str, Any]:
        # maxUnavailable (not minAvailable) so a single-replica deployment never blocks node drains.
        return {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": self._meta(),
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": self.selector()}},
        }

    def _network_policy(self) -> dict[str, Any]:
        o = self.options
        return {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": self._meta(),
            "spec": {
                "podSelector": {"matchLabels": self.selector()},
                "policyTypes": ["Ingress", "Egress"],
                "ingress": [
                    {
                        "ports": [
                            {"protocol": "TCP", "port": HTTP_PORT},
                            {"protocol": "TCP", "port": GRPC_PORT},
                        ]
                    },
                    {
                        "from": [
                            {
                                "namespaceSelector": {
                                    "matchLabels": {"kubernetes.io/metadata.name": o.monitoring_namespace}
                                }
                            }
                        ],
                        "ports": [{"protocol": "TCP", "port": METRICS_PORT}],
                    },
                ],
                "egress": [
                    # DNS, and HTTPS to Azure Blob Storage / Entra ID for the model repository.
                    {"ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]},
                    {"ports": [{"protocol": "TCP", "port": 443}]},
                ],
            },
        }

    def _service_monitor(self) -> dict[str, Any]:
        return {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "ServiceMonitor",
            "metadata": self._meta(labels={**self.labels(), "release": self.options.prometheus_release}),
            "spec": {
                "selector": {"matchLabels": self.selector()},
                "namespaceSelector": {"matchNames": [self.options.namespace]},
                "endpoints": [{"port": "metrics", "path": "/metrics", "interval": "15s"}],
            },
        }

    def _hpa_base(self, metrics: list[dict[str, Any]]) -> dict[str, Any]:
        o = self.options
        return {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": self._meta(),
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": o.name},
                "minReplicas": self.min_replicas,
                "maxReplicas": o.max_replicas,
                "metrics": metrics,
                # GPU pods start slowly: scale down only after a stable window.
                "behavior": {
                    "scaleDown": {
                        "stabilizationWindowSeconds": 300,
                        "policies": [{"type": "Pods", "value": 1, "periodSeconds": 120}],
                    },
                    "scaleUp": {
                        "stabilizationWindowSeconds": 0,
                        "policies": [{"type": "Pods", "value": 2, "periodSeconds": 60}],
                    },
                },
            },
        }

    def _hpa_cpu(self) -> dict[str, Any]:
        return self._hpa_base(
            [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {
                            "type": "Utilization",
                            "averageUtilization": self.options.cpu_target_percent,
                        },
                    },
                }
            ]
        )

    def _hpa_queue(self) -> dict[str, Any]:
        return self._hpa_base(
            [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": QUEUE_METRIC},
                        "target": {
                            "type": "AverageValue",
                            "averageValue": str(self.options.queue_time_target_us),
                        },
                    },
                }
            ]
        )

    def _queue_expr(self) -> str:
        sel = f'namespace="{self.options.namespace}"'
        # Average time a request waited in Triton's queue over the last minute, per pod.
        return (
            f"sum by (namespace, pod) (rate(nv_inference_queue_duration_us{{{sel}}}[1m]))"
            f" / clamp_min(sum by (namespace, pod) (rate(nv_inference_request_success{{{sel}}}[1m])), 1e-9)"
        )

    def _prometheus_rule(self) -> dict[str, Any]:
        return {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "PrometheusRule",
            "metadata": self._meta(labels={**self.labels(), "release": self.options.prometheus_release}),
            "spec": {
                "groups": [
                    {
                        "name": "tritonkit-triton-queue",
                        "rules": [{"record": f"{QUEUE_METRIC}:avg1m", "expr": self._queue_expr()}],
                    }
                ]
            },
        }

    def _adapter_config(self) -> dict[str, Any]:
        """prometheus-adapter rules exposing the recorded queue time as a custom pods metric."""
        rules = {
            "rules": [
                {
                    "seriesQuery": f'{QUEUE_METRIC}:avg1m{{namespace!="",pod!=""}}',
                    "resources": {
                        "overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}
                    },
                    "name": {"matches": f"^{QUEUE_METRIC}:avg1m$", "as": QUEUE_METRIC},
                    "metricsQuery": "max by (<<.GroupBy>>) (<<.Series>>{<<.LabelMatchers>>})",
                }
            ]
        }
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": f"{self.options.name}-prometheus-adapter-rules",
                "namespace": self.options.monitoring_namespace,
                "labels": self.labels(),
            },
            "data": {"config.yaml": yaml.safe_dump(rules, sort_keys=False)},
        }

    def _device_plugin(self) -> dict[str, Any]:
        """The NVIDIA device plugin: advertises nvidia.com/gpu on GPU nodes (a cluster prerequisite)."""
        o = self.options
        labels = {
            "app.kubernetes.io/name": "nvidia-device-plugin",
            "app.kubernetes.io/managed-by": "tritonkit",
        }
        spec: dict[str, Any] = {
            "priorityClassName": "system-node-critical",
            "tolerations": [
                {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            ],
            "containers": [
                {
                    "name": "nvidia-device-plugin-ctr",
                    "image": DEVICE_PLUGIN_IMAGE,
                    "env": [{"name": "FAIL_ON_INIT_ERROR", "value": "false"}],
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                    "volumeMounts": [
                        {"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"}
                    ],
                }
            ],
            "volumes": [{"name": "device-plugin", "hostPath": {"path": "/var/lib/kubelet/device-plugins"}}],
        }
        if o.gpu_node_selector is not None:
            spec["nodeSelector"] = {o.gpu_node_selector[0]: o.gpu_node_selector[1]}
        return {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {
                "name": "nvidia-device-plugin-daemonset",
                "namespace": "kube-system",
                "labels": labels,
            },
            "spec": {
                "selector": {"matchLabels": {"app.kubernetes.io/name": "nvidia-device-plugin"}},
                "updateStrategy": {"type": "RollingUpdate"},
                "template": {"metadata": {"labels": labels}, "spec": spec},
            },
        }

    # ------------------------------------------------------------------ apply

    def _client(self) -> Any:
        if self._api_client is not None:
            return self._api_client
        k8s = require("kubernetes", feature="tritonkit deploy --target aks")
        try:
            configuration = k8s.client.Configuration()
            k8s.config.load_kube_config(context=self.options.context, client_configuration=configuration)
        except (k8s.config.ConfigException, OSError, TypeError) as exc:
            raise KubernetesError(
                f"no Kubernetes cluster configured: {exc}",
                hint="get credentials first (az aks get-credentials -g GROUP -n CLUSTER), or use --dry-run",
            ) from exc
        configuration.retries = 2
        self._api_client = k8s.client.ApiClient(configuration)
        return self._api_client

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run one Kubernetes call, mapping its errors to KubernetesError."""
        k8s = require("kubernetes", feature="tritonkit deploy --target aks")
        import urllib3.exceptions

        if kwargs.pop("_timeout", True):
            kwargs.setdefault("_request_timeout", (10.0, self.options.request_timeout_s))
        try:
            return fn(*args, **kwargs)
        except k8s.dynamic.exceptions.ResourceNotFoundError as exc:
            raise KubernetesError(
                f"{what} failed: the cluster does not serve this API ({exc})",
                hint="install the Prometheus Operator CRDs (kube-prometheus-stack) for "
                "ServiceMonitor/PrometheusRule, or check the cluster's Kubernetes version",
            ) from exc
        except k8s.client.exceptions.ApiException as exc:
            reason = _api_reason(exc)
            hint = None
            if exc.status in (401, 403):
                hint = "your kubeconfig identity lacks the rights for this; check `kubectl auth can-i`"
            elif exc.status == 404 and "the server could not find the requested resource" in reason.lower():
                hint = "the cluster lacks this API: install the Prometheus Operator CRDs, or use --hpa cpu"
            raise KubernetesError(f"{what} failed: HTTP {exc.status} {reason}", hint=hint) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise KubernetesError(
                f"{what} failed: the Kubernetes API server is not reachable ({type(exc).__name__}: {exc})",
                hint="check the cluster is running and your kubeconfig context (kubectl cluster-info)",
            ) from exc

    def apply(self, plan: DeployPlan, *, progress: Progress | None = None) -> DeployResult:
        say = progress or (lambda _msg: None)
        uri, models = self.check()
        client = self._client()
        k8s = require("kubernetes", feature="tritonkit deploy --target aks")
        dyn = self._call("discovering the cluster's APIs", k8s.dynamic.DynamicClient, client, _timeout=False)
        for fname, docs in self.manifests(uri, models).items():
            for doc in docs:
                kind, name = doc["kind"], doc["metadata"]["name"]
                resource = self._call(
                    f"looking up {doc['apiVersion']}/{kind}", _resource, dyn, doc, _timeout=False
                )
                self._call(
                    f"applying {kind} {name} ({fname})",
                    dyn.server_side_apply,
                    resource,
                    body=doc,
                    name=name,
                    namespace=doc["metadata"].get("namespace"),
                    field_manager=FIELD_MANAGER,
                    force_conflicts=True,
                )
                say(f"applied {kind} {name}")
        self.wait_for_rollout(progress=say)
        smoke_models = ensembles(models) or [m.name for m in models]
        url = self.options.smoke_url or self._service_url()
        smoke: tuple[SmokeResult, ...] = ()
        if not self.options.smoke_test:
            pass
        elif url is not None:
            smoke = tuple(smoke_test(url, models=smoke_models))
        else:
            pod = self._ready_pod()
            say(f"smoke test through a port-forward to pod {pod}")
            with self._port_forward(pod) as local_url:
                smoke = tuple(smoke_test(local_url, models=smoke_models))
        status = self.status()
        return DeployResult(target=self.target, scoring_uri=url, summary=status.details, smoke=smoke)

    def _ready_pod(self) -> str:
        k8s = require("kubernetes", feature="tritonkit deploy --target aks")
        core = k8s.client.CoreV1Api(self._client())
        selector = ",".join(f"{k}={v}" for k, v in self.selector().items())
        pods = self._call(
            "listing pods", core.list_namespaced_pod, self.options.namespace, label_selector=selector
        )
        for pod in pods.items:
            if any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or [])):
                return str(pod.metadata.name)
        raise KubernetesError(f"no ready Triton pod in namespace {self.options.namespace} to smoke-test")

    @contextlib.contextmanager
    def _port_forward(self, pod: str) -> Iterator[str]:
        """A local 127.0.0.1 port relayed to the pod's HTTP port (like kubectl port-forward)."""
        k8s = require("kubernetes", feature="tritonkit deploy --target aks")
        from kubernetes.stream import portforward

        core = k8s.client.CoreV1Api(self._client())
        namespace = self.options.namespace
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        listener.settimeout(0.5)
        stop = threading.Event()

        def pump(src: Any, dst: Any) -> None:
            try:
                while data := src.recv(65536):
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                for sock in (src, dst):
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)

        def serve() -> None:
            while not stop.is_set():
                try:
                    conn, _addr = listener.accept()
                except TimeoutError:
                    continue
                except OSError:
                    return
                try:
                    forward = portforward(
                        core.connect_get_namespaced_pod_portforward, pod, namespace, ports=str(HTTP_PORT)
                    )
                    remote = forward.socket(HTTP_PORT)
                except Exception as exc:  # noqa: BLE001 - one failed connection must not end the relay
                    logger.warning("port-forward to %s/%s failed: %s", namespace, pod, exc)
                    conn.close()
                    continue
                for a, b in ((conn, remote), (remote, conn)):
                    threading.Thread(target=pump, args=(a, b), daemon=True).start()

        thread = threading.Thread(target=serve, name="tritonkit-port-forward", daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{listener.getsockname()[1]}"
        finally:
            stop.set()
            listener.close()
            thread.join(timeout=2)

    def _service_url(self) -> str | None:
        k8s = require("kubernetes", feature="tritonkit deploy --target aks")
        core = k8s.client.CoreV1Api(self._client())
        svc = self._call(
            "reading the Service", core.read_namespaced_service, self.options.name, self.options.namespace
        )
        ingress = (svc.status.load_balancer.ingress or []) if svc.status and svc.status.load_balancer else []
        for entry in ingress:
            host = entry.ip or entry.hostname
            if host:
                return f"http://{host}:{HTTP_PORT}"
        return None

    def wait_for_rollout(self, *, progress: Progress | None = None) -> None:
        """Poll the Deployment until every replica is updated and available, or time out."""
        k8s = require("kubernetes", feature="tritonkit deploy --target aks")
        apps = k8s.client.AppsV1Api(self._client())
        o = self.options
        deadline = time.monotonic() + o.rollout_timeout_s
        while True:
            dep = self._call(
                "reading the Deployment", apps.read_namespaced_deployment_status, o.name, o.namespace
            )
            st, want = dep.status, dep.spec.replicas or 0
            done = (
                (st.observed_generation or 0) >= (dep.metadata.generation or 0)
                and (st.updated_replicas or 0) >= want
                and (st.available_replicas or 0) >= want
                and (st.replicas or 0) == want
            )
            if done:
                return
            if progress is not None:
                progress(f"waiting for rollout: {st.available_replicas or 0}/{want} replicas available")
            if time.monotonic() >= deadline:
                raise KubernetesError(
                    f"Deployment {o.namespace}/{o.name} was not ready after {o.rollout_timeout_s:.0f}s "
                    f"({st.available_replicas or 0}/{want} replicas available)",
                    hint=f"kubectl -n {o.namespace} describe pods -l app.kubernetes.io/instance={o.name} "
                    "(Pending: GPU quota, node selector or toleration; CrashLoop: kubectl logs)",
                )
            time.sleep(5)

    def status(self) -> DeployStatus:
        k8s = require("kubernetes", feature="tritonkit deploy --target aks")
        core = k8s.client.CoreV1Api(self._client())
        o = self.options
        selector = ",".join(f"{k}={v}" for k, v in self.selector().items())
        pods = self._call("listing pods", core.list_namespaced_pod, o.namespace, label_selector=selector)
        details: list[tuple[str, str]] = []
        ready_count = 0
        for pod in pods.items:
            conditions = {c.type: c.status for c in (pod.status.conditions or [])}
            ready = conditions.get("Ready") == "True"
            ready_count += ready
            details.append((pod.metadata.name, f"{pod.status.phase}, {'ready' if ready else 'not ready'}"))
        return DeployStatus(target=self.target, ready=ready_count >= o.replicas, details=tuple(details))


def _resource(dyn: Any, doc: dict[str, Any]) -> Any:
    return dyn.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])


def _api_reason(exc: Any) -> str:
    import json

    try:
        body = json.loads(exc.body)
        return str(body.get("message") or exc.reason)
    except (TypeError, ValueError):
        return str(exc.reason)


def _dump_all(docs: list[dict[str, Any]]) -> str:
    header = (
        "# Generated by `tritonkit deploy --target aks --dry-run`; secrets are referenced, never embedded.\n"
    )
    return header + yaml.dump_all(docs, Dumper=_NoAliasDumper, sort_keys=False, default_flow_style=False)


class _NoAliasDumper(yaml.SafeDumper):
    """Writes repeated sub-objects (the probes' httpGet) in full instead of as YAML anchors."""

    def ignore_aliases(self, data: Any) -> bool:
        return True
