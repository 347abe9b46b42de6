"""The committed dry-run artifacts in deploy/ load with the Azure ML SDK, match the Kubernetes
schemas, and still say what a fresh dry run of the example pipelines says.

When the example specs change (batching, instance groups, models), regenerate deploy/ with the
commands in deploy/README.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from kubernetes_validate.utils import latest_version

from tests.unit.test_deploy_aks import validate_manifest
from tests.unit.test_deploy_helm import helm
from tritonkit.deploy.aks import AksDeployer, AksOptions, crd_schemas
from tritonkit.deploy.aml import AmlDeployer, AmlOptions

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
#: The flags deploy/README.md regenerates deploy/aks and deploy/aks-chart with.
AKS_FLAGS: dict[str, Any] = {
    "model_repository": "as://tritonkitmodels/models/triton",
    "prometheus_query_endpoint": "https://tritonkit-amw-a1b2.westeurope.prometheus.monitor.azure.com",
    "restricted_api_secret": "triton-admin",
}


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def test_committed_aml_yaml_loads_with_sdk_when_read() -> None:
    import azure.ai.ml as ml

    model = ml.load_model(DEPLOY / "aml" / "model.yml")
    assert model.type == "triton_model"
    assert Path(str(model.path)) == (ROOT / "model_repository").resolve()
    endpoint = ml.load_online_endpoint(DEPLOY / "aml" / "endpoint.yml")
    assert endpoint.auth_mode == "key"
    dep = ml.load_online_deployment(DEPLOY / "aml" / "deployment.yml")
    assert dep.endpoint_name == endpoint.name
    assert dep.model == f"{model.name}:{model.version}"
    assert dep.request_settings.max_concurrent_requests_per_instance > 1


def test_committed_aks_manifests_match_kubernetes_schemas_when_read() -> None:
    files = sorted((DEPLOY / "aks").glob("*.yaml"))
    assert files
    for path in files:
        for doc in _docs(path):
            validate_manifest(doc, latest_version())
            assert "AZURE_STORAGE_KEY" not in str(doc.get("data", "")), "a secret value in a manifest"
    template = json.loads((DEPLOY / "aks" / "azure" / "prometheus-rule-groups.json").read_text())
    assert crd_schemas.rule_groups_problems(template) == []


def test_committed_chart_lints_and_templates_to_the_committed_manifests_when_read() -> None:
    chart = DEPLOY / "aks-chart"
    lint = helm("lint", "--strict", str(chart))
    assert lint.returncode == 0, lint.stdout + lint.stderr
    done = helm("template", "release", str(chart))
    assert done.returncode == 0, done.stderr
    templated = [d for d in yaml.safe_load_all(done.stdout) if d]
    plain = [d for path in sorted((DEPLOY / "aks").glob("*.yaml")) for d in _docs(path)]

    def key(doc: dict[str, Any]) -> tuple[str, str, str]:
        return (doc["kind"], doc["metadata"].get("namespace", ""), doc["metadata"]["name"])

    assert sorted(templated, key=key) == sorted(plain, key=key)


def test_committed_artifacts_match_fresh_dry_run_when_example_repository_is_built(
    example_repository: Path, tmp_path: Path
) -> None:
    aml = AmlDeployer(
        options=AmlOptions(
            repository=example_repository,
            endpoint="tritonkit-demo",
            deployment="blue",
            instance_type="Standard_NC4as_T4_v3",
            output_dir=tmp_path / "aml",
        )
    )
    for artifact in aml.plan().artifacts:
        fresh = yaml.safe_load(artifact.text)
        committed = yaml.safe_load((DEPLOY / "aml" / artifact.filename).read_text())
        fresh.pop("path", None)
        committed.pop("path", None)
        assert fresh == committed, f"deploy/aml/{artifact.filename} is stale: regenerate (deploy/README.md)"
    for out, fmt in (("aks", "manifests"), ("aks-chart", "helm")):
        plan = AksDeployer(
            options=AksOptions(repository=example_repository, output_format=fmt, **AKS_FLAGS)
        ).plan()
        committed = DEPLOY / out
        assert sorted(a.filename for a in plan.artifacts) == sorted(
            str(p.relative_to(committed)) for p in committed.rglob("*") if p.is_file()
        )
        for artifact in plan.artifacts:
            assert artifact.text == (committed / artifact.filename).read_text(), (
                f"deploy/{out}/{artifact.filename} is stale: regenerate (deploy/README.md)"
            )
