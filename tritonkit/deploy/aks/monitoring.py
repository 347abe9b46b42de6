"""Monitoring and autoscaling objects of an AKS deployment, in the form each target reads.

- ``azure-managed-prometheus``: ServiceMonitor/PodMonitor of ``azmonitoring.coreos.com/v1`` (the
  only group Azure Monitor's ama-metrics add-on reads), recording and alert rules as an ARM
  template of ``Microsoft.AlertsManagement/prometheusRuleGroups`` (rule groups are Azure resources,
  not cluster objects), KEDA reading the Azure Monitor workspace through workload identity.
- ``prometheus-operator``: the same monitors in ``monitoring.coreos.com/v1``, a PrometheusRule, and
  KEDA or the autoscaling/v2 HPA (prometheus-adapter) reading the in-cluster Prometheus.

Counters (``nv_inference_*_us``, ``nv_inference_request_*``, ``nv_inference_count``...) only ever
appear inside ``rate()``; gauges (DCGM's utilisation and framebuffer) are read as they are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import yaml

from tritonkit.deploy.aks import openai_front as front
from tritonkit.deploy.aks import trtllm as aks_trtllm
from tritonkit.deploy.aks import vllm as aks_vllm
from tritonkit.deploy.aks.node_agents import DCGM_LABELS
from tritonkit.deploy.aks.options import (
    QUEUE_METRIC,
    AksOptions,
)

#: Label limits Azure's managed Prometheus asks monitors to set so series are not dropped.
_AZURE_LABEL_LIMITS = {"labelLimit": 63, "labelNameLengthLimit": 511, "labelValueLengthLimit": 1023}
RULE_GROUP = "tritonkit-triton"
ARM_SCHEMA = "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#"
RULE_GROUP_API_VERSION = "2023-03-01"


def _monitor_meta(o: AksOptions, name: str, namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    if o.monitoring == "prometheus-operator":
        # kube-prometheus-stack selects monitors and rules by its release label.
        labels = {**labels, "release": o.prometheus_release}
    return {"name": name, "namespace": namespace, "labels": labels}


def service_monitor(o: AksOptions) -> dict[str, Any]:
    """Scrapes Triton's metrics port through the Service (series get namespace/service/pod labels)."""
    spec: dict[str, Any] = {
        "selector": {"matchLabels": o.selector()},
        "namespaceSelector": {"matchNames": [o.namespace]},
        "endpoints": [{"port": "metrics", "path": "/metrics", "interval": "15s"}],
    }
    if o.openai_port is not None:  # the OpenAI front's own metrics, scraped the same way
        spec["endpoints"].append(front.monitor_endpoint())
    if o.monitoring == "azure-managed-prometheus":
        spec = {**_AZURE_LABEL_LIMITS, **spec}
    return {
        "apiVersion": f"{o.monitor_group}/v1",
        "kind": "ServiceMonitor",
        "metadata": _monitor_meta(o, o.name, o.namespace, o.labels_all()),
        "spec": spec,
    }


def dcgm_pod_monitor(o: AksOptions) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "selector": {"matchLabels": {"app.kubernetes.io/name": "dcgm-exporter"}},
        "namespaceSelector": {"matchNames": ["kube-system"]},
        # honorLabels: the exporter's namespace/pod labels name the GPU's Triton pod, not itself.
        "podMetricsEndpoints": [
            {"port": "metrics", "path": "/metrics", "interval": "15s", "honorLabels": True}
        ],
    }
    if o.monitoring == "azure-managed-prometheus":
        spec = {**_AZURE_LABEL_LIMITS, **spec}
    return {
        "apiVersion": f"{o.monitor_group}/v1",
        "kind": "PodMonitor",
        "metadata": _monitor_meta(o, "dcgm-exporter", "kube-system", DCGM_LABELS),
        "spec": spec,
    }


# --------------------------------------------------------------------------- rules


@dataclass(frozen=True)
class Rule:
    """One recording or alert rule, written out in each target's form."""

    expr: str
    record: str | None = None
    alert: str | None = None
    for_minutes: int = 0
    severity: int = 3  # Azure Monitor: 0 critical .. 4 verbose
    annotations: dict[str, str] = field(default_factory=dict)


def rules(o: AksOptions) -> list[Rule]:
    return _triton_rules(o) + _vllm_rules(o) + (_trtllm_rules(o) if o.trtllm is not None else [])


def _alert(
    o: AksOptions, name: str, expr: str, *, minutes: int, severity: int, summary: str, description: str
) -> Rule:
    """An alert rule firing after ``minutes``; its summary names the deployment it watches."""
    return Rule(
        alert=name,
        expr=expr,
        for_minutes=minutes,
        severity=severity,
        annotations={"summary": f"Triton {o.namespace}/{o.name}: {summary}", "description": description},
    )


def _vllm_rules(o: AksOptions) -> list[Rule]:
    """NVIDIA's vLLM backend exports vllm:* gauges where a stage sets REPORT_CUSTOM_METRICS."""
    if o.vllm is None or not o.vllm.metrics:
        return []
    sel = o.series_selector()
    return [
        _alert(
            o,
            "VllmKvCacheFull",
            f"{aks_vllm.kv_cache_expr(sel, o.vllm.metrics)} > 0.95",
            minutes=10,
            severity=3,
            summary="a vLLM engine's KV cache is over 95% full",
            description="vllm:gpu_cache_usage_perc above 0.95 for 10 minutes: requests are preempted "
            "or queued; add replicas, or lower max_num_seqs / max_model_len.",
        )
    ]


def _trtllm_rules(o: AksOptions) -> list[Rule]:
    """The TensorRT-LLM engines' own gauges (nv_trt_llm_*: see deploy/aks_trtllm.py)."""
    sel = o.series_selector()
    limit = aks_trtllm.KV_CACHE_ALERT_FRACTION
    return [
        Rule(record=f"{aks_trtllm.REQUEST_METRIC}:waiting", expr=aks_trtllm.waiting_expr(sel)),
        Rule(record=f"{aks_trtllm.KV_CACHE_METRIC}:used_fraction", expr=aks_trtllm.kv_cache_expr(sel)),
        _alert(
            o,
            "TritonTrtllmKvCacheFull",
            f"{aks_trtllm.kv_cache_expr(sel)} > {limit}",
            minutes=10,
            severity=3,
            summary=f"a TensorRT-LLM engine's KV cache is over {limit:.0%} full",
            description="Used over max KV-cache blocks (nv_trt_llm_kv_cache_block_metrics) for 10 "
            "minutes: new requests wait in the engine; add replicas or raise "
            "kv_cache_free_gpu_mem_fraction.",
        ),
    ]


def _triton_rules(o: AksOptions) -> list[Rule]:
    return [
        Rule(record=f"{QUEUE_METRIC}:avg1m", expr=o.queue_expr(by="namespace, pod")),
        _alert(
            o,
            "TritonQueueTimeHigh",
            f"{o.queue_expr(window='5m')} > {o.queue_time_target_us}",
            minutes=10,
            severity=3,
            summary=f"requests wait longer than {o.queue_time_target_us} us in the queue",
            description="Average queue time per request has been above the target for 10 minutes: "
            "the autoscaler is at its maximum or cannot add GPU nodes.",
        ),
        _alert(
            o,
            "TritonInferenceFailures",
            f"{o.failure_ratio_expr()} > 0.05",
            minutes=5,
            severity=2,
            summary="more than 5% of inference requests fail",
            description="nv_inference_request_failure over all requests, 5-minute rate.",
        ),
    ]


def prometheus_rule(o: AksOptions) -> dict[str, Any]:
    """The rules as a prometheus-operator PrometheusRule."""
    out: list[dict[str, Any]] = []
    for r in rules(o):
        item: dict[str, Any] = {"record": r.record} if r.record else {"alert": r.alert}
        item["expr"] = r.expr
        if r.alert:
            item["for"] = f"{r.for_minutes}m"
            item["labels"] = {"severity": "critical" if r.severity <= 1 else "warning"}
            item["annotations"] = dict(r.annotations)
        out.append(item)
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": _monitor_meta(o, o.name, o.namespace, o.labels_all()),
        "spec": {"groups": [{"name": RULE_GROUP, "interval": "1m", "rules": out}]},
    }


def rule_groups_arm(o: AksOptions) -> dict[str, Any]:
    """The rules as an ARM template of one ``Microsoft.AlertsManagement/prometheusRuleGroups``.

    Deploy with ``az deployment group create -g RG -f prometheus-rule-groups.json -p
    azureMonitorWorkspaceResourceId=... clusterName=...`` (actionGroupResourceId optional).
    """
    out: list[dict[str, Any]] = []
    for r in rules(o):
        if r.record:
            out.append({"record": r.record, "expression": r.expr, "enabled": True})
            continue
        out.append(
            {
                "alert": r.alert,
                "expression": r.expr,
                "for": f"PT{r.for_minutes}M",
                "severity": r.severity,
                "enabled": True,
                "labels": {"namespace": o.namespace, "deployment": o.name},
                "annotations": dict(r.annotations),
                "resolveConfiguration": {"autoResolved": True, "timeToResolve": "PT10M"},
                "actions": "[if(empty(parameters('actionGroupResourceId')), createArray(), "
                "createArray(createObject('actionGroupId', parameters('actionGroupResourceId'))))]",
            }
        )
    return {
        "$schema": ARM_SCHEMA,
        "contentVersion": "1.0.0.0",
        "parameters": {
            "azureMonitorWorkspaceResourceId": {
                "type": "string",
                "metadata": {
                    "description": "Resource id of the Azure Monitor workspace the cluster writes to"
                },
            },
            "clusterName": {
                "type": "string",
                "metadata": {"description": "The AKS cluster's name: the rules read only its series"},
            },
            "location": {"type": "string", "defaultValue": "[resourceGroup().location]"},
            "actionGroupResourceId": {
                "type": "string",
                "defaultValue": "",
                "metadata": {"description": "Action group notified when an alert fires (empty: none)"},
            },
        },
        "resources": [
            {
                "type": "Microsoft.AlertsManagement/prometheusRuleGroups",
                "apiVersion": RULE_GROUP_API_VERSION,
                "name": f"{RULE_GROUP}-{o.namespace}-{o.name}",
                "location": "[parameters('location')]",
                "properties": {
                    "description": f"Triton {o.namespace}/{o.name}: queue time and failures (tritonkit)",
                    "scopes": ["[parameters('azureMonitorWorkspaceResourceId')]"],
                    "clusterName": "[parameters('clusterName')]",
                    "enabled": True,
                    "interval": "PT1M",
                    "rules": out,
                },
            }
        ],
    }


# --------------------------------------------------------------------------- autoscaling


def _behavior() -> dict[str, Any]:
    # GPU pods start slowly: scale down only after a stable window.
    return {
        "scaleDown": {
            "stabilizationWindowSeconds": 300,
            "policies": [{"type": "Pods", "value": 1, "periodSeconds": 120}],
        },
        "scaleUp": {
            "stabilizationWindowSeconds": 0,
            "policies": [{"type": "Pods", "value": 2, "periodSeconds": 60}],
        },
    }


def keda_objects(o: AksOptions) -> list[dict[str, Any]]:
    """A KEDA ScaledObject on the deployment's queue time per request (and, for Azure managed
    Prometheus, the TriggerAuthentication that gets its token through workload identity)."""
    trigger: dict[str, Any] = {
        "type": "prometheus",
        # Value, not AverageValue: the query is already a per-request average over all pods.
        "metricType": "Value",
        "metadata": {
            "serverAddress": str(o.query_endpoint),
            "query": o.queue_expr(window="2m"),
            "threshold": str(o.queue_time_target_us),
            "activationThreshold": "0",
            "ignoreNullValues": "true",
        },
    }
    out: list[dict[str, Any]] = []
    if o.monitoring == "azure-managed-prometheus":
        identity: dict[str, Any] = {"provider": "azure-workload"}
        if o.keda_identity_client_id:
            identity["identityId"] = o.keda_identity_client_id
        out.append(
            {
                "apiVersion": "keda.sh/v1alpha1",
                "kind": "TriggerAuthentication",
                "metadata": o.meta(f"{o.name}-prometheus"),
                "spec": {"podIdentity": identity},
            }
        )
        trigger["authenticationRef"] = {"name": f"{o.name}-prometheus"}
    out.append(
        {
            "apiVersion": "keda.sh/v1alpha1",
            "kind": "ScaledObject",
            "metadata": o.meta(),
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": o.name},
                "pollingInterval": 15,
                "cooldownPeriod": 300,
                "minReplicaCount": o.effective_min_replicas,
                "maxReplicaCount": o.max_replicas,
                "advanced": {"horizontalPodAutoscalerConfig": {"behavior": _behavior()}},
                "triggers": [trigger, *_vllm_triggers(o, trigger), *_trtllm_triggers(o, trigger)],
            },
        }
    )
    return out


def _vllm_triggers(o: AksOptions, queue: dict[str, Any]) -> list[dict[str, Any]]:
    """Scale on requests waiting inside the vLLM engines too (vllm:num_requests_waiting): with
    vLLM batching on its own, Triton's queue stays short while the engine's fills up."""
    if o.vllm is None or not o.vllm.metrics:
        return []
    trigger = {
        **queue,
        # AverageValue: KEDA divides the sum over pods by the replica count.
        "metricType": "AverageValue",
        "metadata": {
            **queue["metadata"],
            "query": aks_vllm.waiting_expr(o.series_selector(), o.vllm.metrics),
            "threshold": str(o.vllm_waiting_target),
        },
    }
    return [trigger]


def _trtllm_triggers(o: AksOptions, queue: dict[str, Any]) -> list[dict[str, Any]]:
    """Scale on the requests waiting inside the TensorRT-LLM engines too: their in-flight batcher
    queues requests itself, so Triton's own queue time stays near zero while the engines are full."""
    if o.trtllm is None:
        return []
    trigger = {**queue, "metricType": "AverageValue", "metadata": dict(queue["metadata"])}
    trigger["metadata"]["query"] = aks_trtllm.waiting_expr(o.series_selector())
    trigger["metadata"]["threshold"] = str(aks_trtllm.WAITING_TARGET)
    return [trigger]


def hpa(o: AksOptions) -> dict[str, Any]:
    """autoscaling/v2 HPA: CPU utilisation, or the queue time prometheus-adapter serves."""
    if o.hpa_metric == "cpu":
        metric: dict[str, Any] = {
            "type": "Resource",
            "resource": {
                "name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": o.cpu_target_percent},
            },
        }
    else:
        metric = {
            "type": "Pods",
            "pods": {
                "metric": {"name": QUEUE_METRIC},
                "target": {"type": "AverageValue", "averageValue": str(o.queue_time_target_us)},
            },
        }
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": o.meta(),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": o.name},
            "minReplicas": o.effective_min_replicas,
            "maxReplicas": o.max_replicas,
            "metrics": [metric],
            "behavior": _behavior(),
        },
    }


def adapter_config(o: AksOptions) -> dict[str, Any]:
    """prometheus-adapter rules exposing the recorded queue time as a custom pods metric."""
    config = {
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
            "name": f"{o.name}-prometheus-adapter-rules",
            "namespace": o.monitoring_namespace,
            "labels": o.labels_all(),
        },
        "data": {"config.yaml": yaml.safe_dump(config, sort_keys=False)},
    }


def lb_idle_timeout_minutes(o: AksOptions) -> int:
    """Azure Load Balancer's TCP idle timeout (4..100 minutes) covering the longest stream."""
    return min(max(math.ceil(o.max_stream_seconds / 60), 4), 100)
