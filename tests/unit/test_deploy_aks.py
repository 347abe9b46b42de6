"""AKS deployer: manifests checked against the Kubernetes OpenAPI schemas and our custom-resource
schemas, security and probe settings, name/label/URI rules before anything is applied, and the
"no cluster" path.

Built-in objects are validated with ``kubernetes-validate`` (the upstream OpenAPI schemas, strict:
unknown fields fail) for the newest Kubernetes it ships and for 1.31. Custom resources
(ServiceMonitor, PodMonitor, PrometheusRule, ScaledObject, TriggerAuthentication) are checked
against ``tritonkit.deploy.aks.crd_schemas``, written from each project's API reference; a kind without
a schema fails.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_validate.utils import latest_version

from tritonkit.deploy.aks import (
    DEFAULT_IMAGE,
    QUEUE_METRIC,
    AksDeployer,
    AksOptions,
    crd_schemas,
    parse_model_repository,
)
from tritonkit.deploy.aks.options import option_problems
from tritonkit.deploy.base import write_artifacts
from tritonkit.deploy.checks import ModelSummary, k8s_label_problems
from tritonkit.errors import DeployValidationError, KubernetesError

K8S_VERSIONS = (latest_version(), "1.31.0")
QUERY_ENDPOINT = "https://tritonkit-amw-a1b2.westeurope.prometheus.monitor.azure.com"
MODELS = [
    ModelSummary(
        name="densenet_onnx",
        is_ensemble=False,
        max_batch_size=8,
        preferred_batch_sizes=(4, 8),
        instance_count=1,
        uses_gpu=True,
    ),
    ModelSummary(
        name="vlm_ensemble",
        is_ensemble=True,
        max_batch_size=0,
        preferred_batch_sizes=(),
        instance_count=1,
        uses_gpu=False,
    ),
]
ADDER_CONFIG = """name: "adder"
backend: "python"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 4 ] } ]
dynamic_batching { preferred_batch_size: [ 4, 8 ] }
instance_group [ { kind: KIND_GPU count: 1 } ]
"""


def validate_manifest(doc: dict[str, Any], version: str) -> None:
    """Kubernetes' OpenAPI schema for built-in kinds, our schemas for custom resources; raises
    DeployValidationError listing the problems."""
    crd_schemas.check_objects([doc], version=version)


def write_repo(root: Path) -> Path:
    (root / "adder" / "1").mkdir(parents=True)
    (root / "adder" / "config.pbtxt").write_text(ADDER_CONFIG)
    (root / "adder" / "1" / "model.py").write_text("class TritonPythonModel:\n    pass\n")
    return root


def aks(**kw: Any) -> AksDeployer:
    base: dict[str, Any] = dict(
        repository=Path("unused"),
        model_repository="as://acct01/models/triton",
        prometheus_query_endpoint=QUERY_ENDPOINT,
    )
    base.update(kw)
    return AksDeployer(options=AksOptions(**base))


def render(**kw: Any) -> dict[str, list[dict[str, Any]]]:
    d = aks(**kw)
    return d.manifests(parse_model_repository(d.options.model_repository), MODELS)


def by_kind(manifests: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    return {doc["kind"]: doc for docs in manifests.values() for doc in docs}


VARIANTS = {
    "default": {},
    "operator-queue-hpa": {
        "monitoring": "prometheus-operator",
        "autoscaler": "hpa",
        "restricted_api_secret": "triton-admin",
    },
    "operator-keda": {"monitoring": "prometheus-operator", "prometheus_query_endpoint": None},
    "pvc-no-autoscaler": {
        "model_repository": "pvc://triton-models/repo/v1",
        "autoscaler": "none",
        "gpu_count": 2,
        "replicas": 3,
    },
    "workload-identity": {
        "workload_identity_client_id": "55555555-5555-5555-5555-555555555555",
        "keda_identity_client_id": "66666666-6666-6666-6666-666666666666",
        "service_type": "LoadBalancer",
    },
    "no-monitoring-cpu-hpa": {"monitoring": "none", "autoscaler": "hpa", "hpa_metric": "cpu"},
    "openai-front": {
        "openai_port": 9000,
        "openai_image": "myacr.azurecr.io/tritonkit-openai:0.1",
        "openai_api_key_secret": "openai-keys",
        "restricted_api_secret": "triton-admin",
    },
    "healer-only": {
        "heal_image": "myacr.azurecr.io/tritonkit:0.1",
        "heal_probe_models": ("adder",),
        "restricted_api_secret": "triton-admin",
        "liveness_failure_threshold": 60,
    },
}


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("variant", list(VARIANTS.values()), ids=list(VARIANTS))
def test_aks_manifests_match_kubernetes_schemas_when_rendered(variant: dict[str, Any], version: str) -> None:
    assert option_problems(aks(**variant).options) == []
    manifests = render(**variant)
    assert manifests
    for docs in manifests.values():
        for doc in docs:
            validate_manifest(doc, version)


def test_crd_check_fails_when_service_monitor_field_is_misspelt() -> None:
    monitor = by_kind(render())["ServiceMonitor"]
    monitor["spec"]["endpoints"][0]["intervall"] = "15s"
    with pytest.raises(DeployValidationError, match="intervall"):
        validate_manifest(monitor, latest_version())


def test_crd_check_fails_when_a_kind_has_no_schema() -> None:
    """Azure's managed Prometheus has no PrometheusRule: such an object must never pass quietly."""
    rule = by_kind(render(monitoring="prometheus-operator", autoscaler="hpa"))["PrometheusRule"]
    rule["apiVersion"] = "azmonitoring.coreos.com/v1"
    with pytest.raises(DeployValidationError, match="no schema for this kind"):
        validate_manifest(rule, latest_version())


def test_crd_check_fails_when_keda_trigger_metadata_is_not_a_string() -> None:
    scaled = by_kind(render())["ScaledObject"]
    scaled["spec"]["triggers"][0]["metadata"]["threshold"] = 50000
    with pytest.raises(DeployValidationError, match="threshold"):
        validate_manifest(scaled, latest_version())


def test_schema_check_fails_when_deployment_field_is_wrong() -> None:
    dep = by_kind(render())["Deployment"]
    dep["spec"]["template"]["spec"]["containers"][0]["resources"]["limit"] = {"cpu": "1"}
    with pytest.raises(DeployValidationError, match="limit"):
        validate_manifest(dep, latest_version())


def test_aks_deployment_is_locked_down_when_rendered() -> None:
    dep = by_kind(render(restricted_api_secret="triton-admin"))["Deployment"]
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    sc = c["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["runAsUser"] != 0
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["automountServiceAccountToken"] is False
    # read-only root: every place Triton writes is an emptyDir; /dev/shm lives in memory
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts["/dev/shm"]]["emptyDir"]["medium"] == "Memory"
    assert "emptyDir" in volumes[mounts["/tmp"]]
    # secrets only by reference, as mounted files (never env vars: CKV_K8S_35)
    env = {e["name"]: e for e in c["env"]}
    assert list(env) == ["HOME"]
    assert volumes["storage-credentials"]["secret"]["secretName"] == "triton-storage"
    assert volumes["admin-key"]["secret"]["secretName"] == "triton-admin"
    assert mounts["/var/run/secrets/tritonkit/storage"] == "storage-credentials"
    assert mounts["/var/run/secrets/tritonkit/admin"] == "admin-key"
    shell, flag, script, arg0 = c["command"]
    assert (shell, flag, arg0) == ("/bin/sh", "-c", "tritonserver")
    assert 'AZURE_STORAGE_KEY="$(cat /var/run/secrets/tritonkit/storage/AZURE_STORAGE_KEY)"' in script
    assert 'ADMIN_KEY="$(cat /var/run/secrets/tritonkit/admin/key)"' in script
    assert 'exec tritonserver "$@" --http-restricted-api=' in script
    restricted = [a for a in script.split() if a.startswith("--http-restricted-api=")]
    assert restricted and restricted[0].endswith(':triton-admin-key="$ADMIN_KEY"')
    apis = restricted[0].split("=", 1)[1].split(":")[0].split(",")
    assert "model-repository" in apis
    assert not {"health", "metadata", "model-config", "inference"} & set(apis)  # probes and clients stay open
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert c["resources"]["requests"]["cpu"] and c["resources"]["limits"]["memory"]
    # Guaranteed QoS, a high UID, and nothing the hardening check objects to
    assert c["resources"]["requests"] == c["resources"]["limits"]
    assert sc["runAsUser"] >= 10_000 and pod["securityContext"]["fsGroup"] >= 10_000
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}


def test_aks_deployment_probes_health_endpoints_when_rendered() -> None:
    dep = by_kind(render(exit_timeout_secs=45))["Deployment"]
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["startupProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert c["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert c["startupProbe"]["failureThreshold"] * c["startupProbe"]["periodSeconds"] >= 600
    assert sorted(p["containerPort"] for p in c["ports"]) == [8000, 8001, 8002]
    assert "--strict-readiness=true" in c["args"]
    assert "--exit-timeout-secs=45" in c["args"]
    assert pod["terminationGracePeriodSeconds"] > 45
    assert "--model-repository=as://acct01/models/triton" in c["args"]
    assert c["image"] == DEFAULT_IMAGE


def _window(probe: dict[str, Any]) -> int:
    return int(probe["failureThreshold"]) * int(probe["periodSeconds"])


def test_aks_probes_see_a_model_that_went_down_and_restart_only_after_a_reload_would_have_healed() -> None:
    """Readiness (every model ready) drops the pod within 10 s; liveness asks the same endpoint
    but restarts Triton only after readiness stayed false longer than a reload takes."""
    pod = by_kind(render())["Deployment"]["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["livenessProbe"]["httpGet"]["path"] == "/v2/health/ready"  # live stays 200 with a dead engine
    assert _window(c["readinessProbe"]) <= 10
    assert _window(c["livenessProbe"]) == 300 >= 10 * _window(c["readinessProbe"])
    # explicit model control: a model unloaded after its engine died can be loaded again
    assert "--model-control-mode=explicit" in c["args"] and "--load-model=*" in c["args"]
    assert not any(a.startswith("--model-control-mode=none") for a in c["args"])
    longer = by_kind(render(liveness_failure_threshold=60, startup_failure_threshold=120))["Deployment"]
    (c,) = longer["spec"]["template"]["spec"]["containers"]
    assert _window(c["livenessProbe"]) == 600 and _window(c["startupProbe"]) == 1200


def test_aks_problems_name_probe_thresholds_below_one() -> None:
    problems = option_problems(aks(liveness_failure_threshold=0, heal_image="a b").options)
    assert any("--liveness-failure-threshold 0" in p for p in problems)
    assert any("--heal-image 'a b'" in p for p in problems)


def test_aks_pods_land_on_gpu_pool_when_rendered() -> None:
    kinds = by_kind(render())
    pod = kinds["Deployment"]["spec"]["template"]["spec"]
    assert {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"} in pod["tolerations"]
    assert pod["nodeSelector"] == {"kubernetes.azure.com/accelerator": "nvidia"}
    plugin = kinds["DaemonSet"]
    assert plugin["metadata"]["namespace"] == "kube-system"
    assert any(t.get("key") == "sku" for t in plugin["spec"]["template"]["spec"]["tolerations"])


def test_aks_pvc_repository_mounts_claim_read_only_when_pvc_uri() -> None:
    dep = by_kind(render(model_repository="pvc://triton-models/repo/v1"))["Deployment"]
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert "--model-repository=/models/repo/v1" in c["args"]
    claim = [v for v in pod["volumes"] if "persistentVolumeClaim" in v][0]
    assert claim["persistentVolumeClaim"] == {"claimName": "triton-models", "readOnly": True}
    assert not any(e["name"].startswith("AZURE_STORAGE") for e in c["env"])


def test_aks_queue_hpa_reads_recorded_metric_when_hpa_queue() -> None:
    kinds = by_kind(render(monitoring="prometheus-operator", autoscaler="hpa", queue_time_target_us=20000))
    hpa = kinds["HorizontalPodAutoscaler"]
    assert hpa["apiVersion"] == "autoscaling/v2"
    metric = hpa["spec"]["metrics"][0]["pods"]
    assert metric["metric"]["name"] == QUEUE_METRIC and metric["target"]["averageValue"] == "20000"
    rule = kinds["PrometheusRule"]["spec"]["groups"][0]["rules"][0]
    assert rule["record"] == f"{QUEUE_METRIC}:avg1m" and "nv_inference_queue_duration_us" in rule["expr"]
    adapter = yaml.safe_load(kinds["ConfigMap"]["data"]["config.yaml"])
    assert adapter["rules"][0]["name"]["as"] == QUEUE_METRIC


def test_aks_cpu_hpa_targets_utilisation_when_hpa_cpu() -> None:
    kinds = by_kind(render(autoscaler="hpa", hpa_metric="cpu", replicas=2, max_replicas=6))
    spec = kinds["HorizontalPodAutoscaler"]["spec"]
    assert spec["minReplicas"] == 2 and spec["maxReplicas"] == 6
    assert spec["metrics"][0]["resource"]["target"] == {"type": "Utilization", "averageUtilization": 70}
    assert "PrometheusRule" not in kinds and "ScaledObject" not in kinds


@pytest.mark.parametrize(
    ("kw", "fragment"),
    [
        ({"namespace": "Triton"}, "namespace name 'Triton'"),
        ({"name": "triton_server"}, "deployment name"),
        ({"name": "t" * 48}, "at most 47"),
        ({"replicas": 0}, "--replicas must be >= 1"),
        ({"labels": {"team": "ml ops"}}, "label team="),
        ({"labels": {"-bad/key": "x"}}, "label key"),
        ({"cpu_limit": "four"}, "--cpu-limit"),
        ({"autoscaler": "memory"}, "--autoscaler must be"),
        ({"monitoring": "grafana-cloud"}, "--monitoring must be"),
        ({"autoscaler": "hpa", "hpa_metric": "gpu"}, "--hpa-metric must be"),
        ({"replicas": 5, "max_replicas": 2}, "--max-replicas"),
        ({"prometheus_query_endpoint": None}, "needs --prometheus-query-endpoint"),
        ({"prometheus_query_endpoint": "workspace.prometheus"}, "is not an http(s) URL"),
        ({"prometheus_query_endpoint": "http://plain.example:9090"}, "https://"),
        ({"monitoring": "none"}, "needs a Prometheus"),
        ({"autoscaler": "hpa"}, "--monitoring prometheus-operator"),
        ({"keda_identity_client_id": "keda"}, "not a client id"),
        ({"max_stream_seconds": 0}, "--max-stream-seconds"),
        ({"output_format": "kustomize"}, "--format must be"),
        ({"restricted_api_secret": "Admin_Key"}, "secret name"),
        ({"model_repository": "https://acct.blob.core.windows.net/models"}, "neither as://"),
        ({"model_repository": "as://Acct/models"}, "storage account"),
        ({"model_repository": "as://acct01/m"}, "blob container"),
        ({"model_repository": "pvc://claim/../etc"}, "'..'"),
    ],
)
def test_aks_check_raises_before_apply_when_a_rule_is_broken(kw: dict[str, Any], fragment: str) -> None:
    with pytest.raises(DeployValidationError) as info:
        aks(**kw).check()
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    "kw",
    [
        {"namespace": "ml-serving", "name": "triton-a"},
        {"labels": {"example.com/team": "ml.ops_1"}},
        {"model_repository": "pvc://triton-models"},
        {"autoscaler": "none", "replicas": 4, "max_replicas": 1},
        {"monitoring": "prometheus-operator", "prometheus_query_endpoint": None},
    ],
)
def test_aks_check_passes_when_settings_are_valid(kw: dict[str, Any], tmp_path: Path) -> None:
    repo = write_repo(tmp_path / "repo")
    uri, models = aks(repository=repo, **kw).check()
    assert [m.name for m in models] == ["adder"]
    assert uri.scheme in ("as", "pvc")


def test_k8s_label_problems_pass_when_labels_are_valid() -> None:
    assert k8s_label_problems({"app.kubernetes.io/name": "triton", "tier": ""}) == []


def test_aks_plan_writes_every_manifest_when_dry_run(tmp_path: Path) -> None:
    repo = write_repo(tmp_path / "repo")
    plan = aks(repository=repo, monitoring="prometheus-operator", autoscaler="hpa").plan()
    out = tmp_path / "deploy" / "aks"
    (out.parent).mkdir(parents=True)
    write_artifacts(plan, out)
    names = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert names == sorted(a.filename for a in plan.artifacts)
    for path in out.glob("*.yaml"):
        for doc in yaml.safe_load_all(path.read_text()):
            validate_manifest(doc, latest_version())


def test_aks_plan_raises_when_repository_fails_validation(tmp_path: Path) -> None:
    repo = write_repo(tmp_path / "repo")
    (repo / "adder" / "config.pbtxt").write_text('name: "adder"\nbackend: "python"\nmax_batch_size: -3\n')
    with pytest.raises(DeployValidationError, match="failed validation"):
        aks(repository=repo).plan()


def test_aks_apply_raises_kubernetes_error_when_no_kubeconfig(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = write_repo(tmp_path / "repo")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing-kubeconfig"))
    monkeypatch.setenv("HOME", str(tmp_path))
    d = aks(repository=repo)
    with pytest.raises(KubernetesError, match="no Kubernetes cluster configured") as info:
        d.apply(d.plan())
    assert "az aks get-credentials" in (info.value.hint or "")


def test_aks_apply_raises_kubernetes_error_when_api_server_refuses(tmp_path: Path) -> None:
    """A real kubernetes ApiClient pointed at a closed local port: connection refused."""
    from kubernetes import client

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = client.Configuration()
    cfg.host = f"http://127.0.0.1:{port}"
    cfg.retries = 0
    repo = write_repo(tmp_path / "repo")
    d = AksDeployer(
        options=AksOptions(
            repository=repo,
            model_repository="as://acct01/models/triton",
            prometheus_query_endpoint=QUERY_ENDPOINT,
        ),
        api_client=client.ApiClient(cfg),
    )
    with pytest.raises(KubernetesError, match="not reachable") as info:
        d.apply(d.plan())
    assert "kubectl cluster-info" in (info.value.hint or "")
