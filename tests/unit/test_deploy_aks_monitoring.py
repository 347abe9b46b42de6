"""AKS monitoring, autoscaling, GPU metrics, dashboard and streaming fit, as each target runs them.

PromQL is parsed with ``promql-parser`` (a port of Prometheus' own grammar), not matched as text:
every expression tritonkit renders must parse, name only Triton metrics that exist (the list is
checked against a real tritonserver's /metrics in tests/integration/test_deploy_aks_metrics.py),
and read counters only through rate().
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import promql_parser
import pytest

from tests.unit.test_deploy_aks import MODELS, QUERY_ENDPOINT, aks, by_kind, write_repo
from tritonkit.deploy.aks import crd_schemas
from tritonkit.deploy.aks.options import AksOptions, option_problems, parse_model_repository
from tritonkit.deploy.aks.render import (
    BUILTIN_GROUPS,
    DASHBOARD_FILE,
    RULE_GROUPS_FILE,
    Rendered,
    api_group,
)
from tritonkit.deploy.checks import ModelSummary, validate_for_deploy
from tritonkit.errors import DeployValidationError

#: Triton's counters (TYPE counter on its /metrics) that tritonkit's expressions read.
TRITON_COUNTERS = {
    "nv_inference_request_success",
    "nv_inference_request_failure",
    "nv_inference_count",
    "nv_inference_exec_count",
    "nv_inference_request_duration_us",
    "nv_inference_queue_duration_us",
    "nv_inference_compute_input_duration_us",
    "nv_inference_compute_infer_duration_us",
    "nv_inference_compute_output_duration_us",
}
#: DCGM exporter gauges (DCGM field reference: utilisation in %, framebuffer in MiB).
DCGM_GAUGES = {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED"}
RATE_FUNCTIONS = {"rate", "irate", "increase"}

STREAMING = [
    ModelSummary(
        name="generator",
        is_ensemble=False,
        max_batch_size=0,
        preferred_batch_sizes=(),
        instance_count=1,
        uses_gpu=True,
        decoupled=True,
    ),
    ModelSummary(
        name="vlm_stream",
        is_ensemble=True,
        max_batch_size=0,
        preferred_batch_sizes=(),
        instance_count=1,
        uses_gpu=False,
        decoupled=True,
    ),
]

COMBOS = [
    {"monitoring": "azure-managed-prometheus", "autoscaler": "keda"},
    {"monitoring": "azure-managed-prometheus", "autoscaler": "hpa", "hpa_metric": "cpu"},
    {"monitoring": "azure-managed-prometheus", "autoscaler": "none"},
    {"monitoring": "prometheus-operator", "autoscaler": "keda", "prometheus_query_endpoint": None},
    {"monitoring": "prometheus-operator", "autoscaler": "hpa", "hpa_metric": "queue"},
    {"monitoring": "prometheus-operator", "autoscaler": "none"},
    {"monitoring": "none", "autoscaler": "hpa", "hpa_metric": "cpu"},
    {"monitoring": "none", "autoscaler": "none"},
]


def _id(combo: dict[str, Any]) -> str:
    return f"{combo['monitoring']}+{combo['autoscaler']}"


def rendered(models: list[ModelSummary] | None = None, **kw: Any) -> Rendered:
    d = aks(**kw)
    assert option_problems(d.options) == []
    return d.rendered(parse_model_repository(d.options.model_repository), models or MODELS)


def objects(r: Rendered) -> list[dict[str, Any]]:
    return r.objects()


# --------------------------------------------------------------------------- PromQL


def metric_uses(expr: str) -> list[tuple[str, bool]]:
    """(metric name, read inside rate()/increase()) for every selector of a PromQL expression."""
    found: list[tuple[str, bool]] = []

    def visit(node: Any, in_rate: bool) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            found.append((str(node.name), in_rate))
        elif isinstance(node, promql_parser.MatrixSelector):
            visit(node.vector_selector, in_rate)
        elif isinstance(node, promql_parser.Call):
            inner = in_rate or node.func.name in RATE_FUNCTIONS
            for arg in node.args:
                visit(arg, inner)
        elif isinstance(node, promql_parser.BinaryExpr):
            visit(node.lhs, in_rate)
            visit(node.rhs, in_rate)
        elif isinstance(node, promql_parser.AggregateExpr):
            visit(node.expr, in_rate)
        elif isinstance(node, (promql_parser.ParenExpr, promql_parser.UnaryExpr, promql_parser.SubqueryExpr)):
            visit(node.expr, in_rate)

    # Grafana's interval variable is not PromQL; any duration stands in for it.
    visit(promql_parser.parse(expr.replace("$__rate_interval", "5m").replace("$__range", "1h")), False)
    return found


def all_expressions(r: Rendered) -> list[str]:
    """Every PromQL expression in the objects and files (KEDA, rules, ARM rule groups, dashboard)."""
    exprs: list[str] = []
    for doc in r.objects():
        if doc["kind"] == "ScaledObject":
            exprs += [t["metadata"]["query"] for t in doc["spec"]["triggers"]]
        if doc["kind"] == "PrometheusRule":
            exprs += [rule["expr"] for g in doc["spec"]["groups"] for rule in g["rules"]]
    if RULE_GROUPS_FILE in r.files:
        for res in r.files[RULE_GROUPS_FILE]["resources"]:
            exprs += [rule["expression"] for rule in res["properties"]["rules"]]
    if DASHBOARD_FILE in r.files:
        exprs += [t["expr"] for p in r.files[DASHBOARD_FILE]["panels"] for t in p["targets"]]
    return exprs


@pytest.mark.parametrize("combo", COMBOS, ids=_id)
def test_expressions_read_counters_only_through_rate_when_rendered(combo: dict[str, Any]) -> None:
    r = rendered(**combo)
    exprs = all_expressions(r)
    if combo["monitoring"] != "none":
        assert exprs
    for expr in exprs:
        for name, in_rate in metric_uses(expr):
            assert name in TRITON_COUNTERS | DCGM_GAUGES, (
                f"{name} is no metric Triton or DCGM exports ({expr})"
            )
            if name in TRITON_COUNTERS:
                assert in_rate, f"counter {name} read without rate(): {expr}"
            else:
                assert not in_rate, f"gauge {name} inside rate(): {expr}"


def test_metric_uses_flags_a_bare_counter_when_rate_is_missing() -> None:
    assert metric_uses("sum(nv_inference_request_success) / sum(rate(nv_inference_count[1m]))") == [
        ("nv_inference_request_success", False),
        ("nv_inference_count", True),
    ]


# --------------------------------------------------------------------------- API groups


@pytest.mark.parametrize("combo", COMBOS, ids=_id)
def test_output_holds_only_api_groups_the_target_has_when_rendered(combo: dict[str, Any]) -> None:
    groups = {api_group(doc) for doc in objects(rendered(**combo))}  # rendered() also schema-checks
    allowed = set(BUILTIN_GROUPS)
    if combo["monitoring"] == "azure-managed-prometheus":
        allowed.add("azmonitoring.coreos.com")
    if combo["monitoring"] == "prometheus-operator":
        allowed.add("monitoring.coreos.com")
    if combo["autoscaler"] == "keda":
        allowed.add("keda.sh")
    assert groups <= allowed, groups - allowed


def test_managed_prometheus_gets_no_prometheus_rule_but_an_azure_rule_group() -> None:
    r = rendered()
    kinds = {(api_group(d), d["kind"]) for d in r.objects()}
    assert ("azmonitoring.coreos.com", "ServiceMonitor") in kinds
    assert ("azmonitoring.coreos.com", "PodMonitor") in kinds  # the DCGM exporter's
    assert not any(kind == "PrometheusRule" for _, kind in kinds)
    assert not any(group == "monitoring.coreos.com" for group, _ in kinds)
    template = r.files[RULE_GROUPS_FILE]
    assert crd_schemas.rule_groups_problems(template) == []
    (group,) = template["resources"]
    assert group["type"] == "Microsoft.AlertsManagement/prometheusRuleGroups"
    props = group["properties"]
    assert props["scopes"] == ["[parameters('azureMonitorWorkspaceResourceId')]"]
    assert props["clusterName"] == "[parameters('clusterName')]"
    alerts = {rule["alert"]: rule for rule in props["rules"] if "alert" in rule}
    assert set(alerts) == {"TritonQueueTimeHigh", "TritonInferenceFailures"}
    assert (
        alerts["TritonQueueTimeHigh"]["for"] == "PT10M"
        and 0 <= alerts["TritonQueueTimeHigh"]["severity"] <= 4
    )
    assert [rule["record"] for rule in props["rules"] if "record" in rule] == ["triton_queue_time_us:avg1m"]


def test_prometheus_operator_keeps_the_same_rules_as_a_prometheus_rule() -> None:
    managed = rendered().files[RULE_GROUPS_FILE]["resources"][0]["properties"]["rules"]
    operator = by_kind(rendered(monitoring="prometheus-operator", prometheus_query_endpoint=None).manifests)
    (group,) = operator["PrometheusRule"]["spec"]["groups"]
    assert [(r.get("record"), r.get("alert"), r["expr"]) for r in group["rules"]] == [
        (r.get("record"), r.get("alert"), r["expression"]) for r in managed
    ]
    assert operator["PrometheusRule"]["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert operator["ServiceMonitor"]["apiVersion"] == "monitoring.coreos.com/v1"
    assert (
        RULE_GROUPS_FILE
        not in rendered(monitoring="prometheus-operator", prometheus_query_endpoint=None).files
    )


def test_rendered_refuses_an_object_of_a_group_the_target_lacks(monkeypatch: pytest.MonkeyPatch) -> None:
    from tritonkit.deploy.aks import deployer as aks_module

    real = aks_module.render

    def with_stray(*args: Any) -> Rendered:
        out = real(*args)
        rule = {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "PrometheusRule",
            "metadata": {},
            "spec": {},
        }
        out.manifests["99-stray.yaml"] = [rule]
        return out

    monkeypatch.setattr(aks_module, "render", with_stray)
    with pytest.raises(DeployValidationError, match="API group --monitoring azure-managed-prometheus"):
        rendered()


def test_metrics_port_admits_the_scraper_of_each_target() -> None:
    def scraper(**kw: Any) -> str:
        policy = by_kind(rendered(**kw).manifests)["NetworkPolicy"]
        rule = policy["spec"]["ingress"][1]
        return str(rule["from"][0]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"])

    assert scraper() == "kube-system"  # Azure's ama-metrics pods
    assert scraper(monitoring="prometheus-operator", prometheus_query_endpoint=None) == "monitoring"


# --------------------------------------------------------------------------- KEDA


def test_keda_scales_on_queue_time_per_request_through_workload_identity() -> None:
    kinds = by_kind(
        rendered(keda_identity_client_id="66666666-6666-6666-6666-666666666666", max_replicas=8).manifests
    )
    scaled, auth = kinds["ScaledObject"], kinds["TriggerAuthentication"]
    assert scaled["apiVersion"] == auth["apiVersion"] == "keda.sh/v1alpha1"
    spec = scaled["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "triton"}
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (1, 8)
    (trigger,) = spec["triggers"]
    assert trigger["type"] == "prometheus" and trigger["metricType"] == "Value"
    assert trigger["metadata"]["serverAddress"] == QUERY_ENDPOINT
    assert trigger["metadata"]["threshold"] == "50000"
    assert trigger["authenticationRef"] == {"name": auth["metadata"]["name"]}
    uses = dict(metric_uses(trigger["metadata"]["query"]))
    assert uses == {"nv_inference_queue_duration_us": True, "nv_inference_request_success": True}
    assert auth["spec"] == {
        "podIdentity": {"provider": "azure-workload", "identityId": "66666666-6666-6666-6666-666666666666"}
    }
    assert "HorizontalPodAutoscaler" not in kinds


def test_keda_reads_in_cluster_prometheus_without_auth_when_prometheus_operator() -> None:
    kinds = by_kind(rendered(monitoring="prometheus-operator", prometheus_query_endpoint=None).manifests)
    (trigger,) = kinds["ScaledObject"]["spec"]["triggers"]
    assert (
        trigger["metadata"]["serverAddress"] == "http://kube-prometheus-stack-prometheus.monitoring.svc:9090"
    )
    assert "authenticationRef" not in trigger and "TriggerAuthentication" not in kinds


def test_keda_query_selects_only_this_deployment_when_rendered() -> None:
    kinds = by_kind(rendered(namespace="ml", name="triton-b").manifests)
    query = kinds["ScaledObject"]["spec"]["triggers"][0]["metadata"]["query"]
    expr = promql_parser.parse(query)
    assert 'namespace="ml"' in expr.prettify() and 'service="triton-b"' in expr.prettify()


# --------------------------------------------------------------------------- GPU metrics, dashboard


def test_dcgm_exporter_runs_on_gpu_nodes_and_maps_gpus_to_pods() -> None:
    r = rendered()
    exporter, policy, monitor = r.manifests["03-dcgm-exporter.yaml"]
    assert policy["kind"] == "NetworkPolicy" and policy["spec"]["egress"] == []
    pod = exporter["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"kubernetes.azure.com/accelerator": "nvidia"}
    assert {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"} in pod["tolerations"]
    (c,) = pod["containers"]
    assert {"name": "DCGM_EXPORTER_KUBERNETES", "value": "true"} in c["env"]
    # the one host path is read-only; /tmp is the exporter's emptyDir (its root filesystem is read-only)
    assert {m["mountPath"]: m.get("readOnly", False) for m in c["volumeMounts"]} == {
        "/var/lib/kubelet/pod-resources": True,
        "/tmp": False,
    }
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert "checkov.io/skip1" in exporter["metadata"]["annotations"]  # host access stated on the object
    assert monitor["kind"] == "PodMonitor" and monitor["apiVersion"] == "azmonitoring.coreos.com/v1"
    assert (
        monitor["spec"]["selector"]["matchLabels"].items()
        <= exporter["spec"]["template"]["metadata"]["labels"].items()
    )
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["honorLabels"] is True and endpoint["port"] == c["ports"][0]["name"]


@pytest.mark.parametrize(
    "kw",
    [{"gpu_count": 0}, {"dcgm_exporter": False}, {"monitoring": "none", "autoscaler": "none"}],
    ids=["cpu-only", "no-dcgm-exporter", "no-monitoring"],
)
def test_dcgm_exporter_is_left_out_when_nothing_needs_it(kw: dict[str, Any]) -> None:
    r = rendered(**kw)
    assert "03-dcgm-exporter.yaml" not in r.manifests
    assert not any(d["kind"] == "PodMonitor" for d in r.objects())


def test_dashboard_imports_with_a_datasource_variable_when_rendered() -> None:
    board = rendered().files[DASHBOARD_FILE]
    json.dumps(board)  # plain JSON
    (ds_input,) = board["__inputs"]
    assert ds_input["type"] == "datasource" and ds_input["pluginId"] == "prometheus"
    (variable,) = board["templating"]["list"]
    assert variable["type"] == "datasource" and variable["query"] == "prometheus"
    assert board["uid"] is None
    datasources = [p["datasource"] for p in board["panels"]] + [
        t["datasource"] for p in board["panels"] for t in p["targets"]
    ]
    assert all(ds == {"type": "prometheus", "uid": "${datasource}"} for ds in datasources)
    metrics = {name for p in board["panels"] for t in p["targets"] for name, _ in metric_uses(t["expr"])}
    # queue and compute time per request, request rate, batch size, GPU utilisation and memory
    assert {
        "nv_inference_queue_duration_us",
        "nv_inference_compute_infer_duration_us",
        "nv_inference_request_success",
        "nv_inference_exec_count",
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_USED",
    } <= metrics


def test_dashboard_and_rule_group_are_written_beside_the_manifests(tmp_path: Path) -> None:
    plan = aks(repository=write_repo(tmp_path / "repo")).plan()
    names = {a.filename for a in plan.artifacts}
    assert {RULE_GROUPS_FILE, DASHBOARD_FILE} <= names
    # kubectl apply -f DIR reads only the top level: the JSON files sit in sub-directories.
    assert all("/" not in n for n in names if n.endswith(".yaml"))
    assert json.loads(next(a.text for a in plan.artifacts if a.filename == RULE_GROUPS_FILE))["resources"]


# --------------------------------------------------------------------------- streaming (decoupled)


def _http_paths(doc: Any) -> list[str]:
    if isinstance(doc, dict):
        own = [str(doc["httpGet"]["path"])] if "httpGet" in doc else []
        return own + [p for v in doc.values() for p in _http_paths(v)]
    if isinstance(doc, list):
        return [p for v in doc for p in _http_paths(v)]
    return []


def test_streaming_repository_drains_long_streams_and_serves_grpc() -> None:
    r = rendered(models=MODELS + STREAMING, max_stream_seconds=900, service_type="LoadBalancer")
    kinds = by_kind(r.manifests)
    pod = kinds["Deployment"]["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert "--exit-timeout-secs=900" in c["args"]
    assert pod["terminationGracePeriodSeconds"] > 900
    ports = {p["name"]: p for p in kinds["Service"]["spec"]["ports"]}
    assert ports["grpc"]["port"] == 8001 and ports["grpc"]["appProtocol"] == "kubernetes.io/h2c"
    annotations = kinds["Service"]["metadata"]["annotations"]
    assert annotations["service.beta.kubernetes.io/azure-load-balancer-tcp-idle-timeout"] == "15"
    assert r.decoupled == ("generator", "vlm_stream")
    paths = _http_paths(kinds["Deployment"])
    assert paths and all(p.startswith("/v2/health/") for p in paths)  # never /infer: 501 when decoupled


def test_unary_repository_keeps_the_short_drain_and_default_idle_timeout() -> None:
    kinds = by_kind(rendered(service_type="LoadBalancer").manifests)
    assert (
        "--exit-timeout-secs=30" in kinds["Deployment"]["spec"]["template"]["spec"]["containers"][0]["args"]
    )
    assert "annotations" not in kinds["Service"]["metadata"]


def test_lb_idle_timeout_stays_in_azure_bounds_when_streams_are_extreme() -> None:
    from tritonkit.deploy.aks.monitoring import lb_idle_timeout_minutes

    def minutes(seconds: int) -> int:
        return lb_idle_timeout_minutes(
            AksOptions(repository=Path("x"), model_repository="pvc://m", max_stream_seconds=seconds)
        )

    assert (minutes(30), minutes(601), minutes(86_400)) == (4, 11, 100)


DECOUPLED_GEN = """name: "gen"
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "PROMPT" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""
PIPE = """name: "pipe"
platform: "ensemble"
max_batch_size: 0
input [ { name: "PROMPT" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] } ]
ensemble_scheduling { step [ {
  model_name: "gen" model_version: -1
  input_map { key: "PROMPT" value: "PROMPT" }
  output_map { key: "TEXT" value: "TEXT" }
} ] }
"""


def test_plan_marks_a_decoupled_model_and_its_ensemble_as_streaming(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "gen" / "1").mkdir(parents=True)
    (repo / "gen" / "config.pbtxt").write_text(DECOUPLED_GEN)
    (repo / "gen" / "1" / "model.py").write_text("class TritonPythonModel:\n    pass\n")
    (repo / "pipe" / "1").mkdir(parents=True)
    (repo / "pipe" / "config.pbtxt").write_text(PIPE)
    models = {m.name: m for m in validate_for_deploy(repo)}
    assert models["gen"].decoupled and models["pipe"].decoupled  # Triton serves the ensemble decoupled
    plan = aks(repository=repo, gpu_count=0).plan()
    assert dict(plan.summary)["streaming (decoupled)"] == "gen, pipe"
    assert any("generate_stream" in w for w in plan.warnings)
