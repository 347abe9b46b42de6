"""`deploy aks`: the healer beside Triton and the probes that see a model go down (issue #41).

Kubernetes schemas, the hardening check and `helm lint`/`helm template` run on these through the
VARIANTS of test_deploy_aks/test_deploy_helm ("healer-only", "openai-front").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.unit.test_deploy_aks import aks, by_kind, render
from tests.unit.test_deploy_helm import MODELS, template, write_chart
from tritonkit.deploy.aks.options import option_problems

HEAL = {"heal_image": "myacr.azurecr.io/tritonkit:0.1"}


def _containers(**kw: Any) -> dict[str, dict[str, Any]]:
    pod = by_kind(render(**kw))["Deployment"]["spec"]["template"]["spec"]
    return {c["name"]: c for c in pod["containers"]}


def test_the_healer_reloads_through_triton_on_localhost_with_its_own_probes() -> None:
    containers = _containers(**HEAL)
    assert list(containers) == ["tritonserver", "tritonkit-heal"]
    healer, triton = containers["tritonkit-heal"], containers["tritonserver"]
    assert healer["image"] == HEAL["heal_image"] and healer["command"] == ["tritonkit"]
    assert healer["args"][:2] == ["heal", "http://127.0.0.1:8000"]
    assert healer["args"][healer["args"].index("--port") + 1] == "8003"
    assert healer["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "heal"}
    assert healer["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "heal"}
    assert healer["securityContext"] == triton["securityContext"]
    assert healer["resources"]["requests"] == healer["resources"]["limits"]  # Guaranteed QoS kept


def test_the_healer_reads_the_admin_key_file_when_the_repository_api_is_restricted() -> None:
    healer = _containers(**HEAL, restricted_api_secret="triton-admin")["tritonkit-heal"]
    assert healer["command"][:2] == ["/bin/sh", "-c"]
    assert "cat /var/run/secrets/tritonkit/admin/key" in healer["command"][2]
    assert "triton-admin-key=TRITON_ADMIN_KEY" in healer["args"]
    assert {"name": "admin-key", "mountPath": "/var/run/secrets/tritonkit/admin", "readOnly": True} in healer[
        "volumeMounts"
    ]


def test_the_front_image_runs_the_healer_unless_another_is_named_and_none_runs_without_one() -> None:
    front = {"openai_port": 9000, "openai_image": "myacr.azurecr.io/tritonkit-openai:0.1"}
    assert _containers(**front)["tritonkit-heal"]["image"] == front["openai_image"]
    assert _containers(**front, **HEAL)["tritonkit-heal"]["image"] == HEAL["heal_image"]
    assert list(_containers()) == ["tritonserver"]  # no image with tritonkit: liveness alone restarts
    assert option_problems(aks(openai_port=8003, openai_image="x/y:1").options) == [
        "--openai-port 8003: the healer's port; choose another"
    ]


def test_helm_values_set_the_probe_windows(tmp_path: Path) -> None:
    chart, _ = write_chart(tmp_path, MODELS, **HEAL)
    values = (chart / "values.yaml").read_text()
    assert "livenessFailureThreshold: 30" in values and "# probes:" in values
    docs = template(
        chart,
        "--set",
        "probes.livenessFailureThreshold=60",
        "--set",
        "probes.startupFailureThreshold=120",
        "--set",
        "heal.image=myacr.azurecr.io/tritonkit:0.2",
    )
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    containers = {c["name"]: c for c in deployment["spec"]["template"]["spec"]["containers"]}
    assert containers["tritonserver"]["livenessProbe"]["failureThreshold"] == 60
    assert containers["tritonserver"]["startupProbe"]["failureThreshold"] == 120
    assert containers["tritonkit-heal"]["image"] == "myacr.azurecr.io/tritonkit:0.2"
