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


def test_the_healer_probes_the_models_named_with_heal_probe_model_and_only_those_the_repository_has(
    tmp_path: Path,
) -> None:
    """A Python stage's dead stub stays READY in Triton 2.51; the healer sees it in an idle pod only
    by probing that model (issue #53): deploy aks passes the names on as `heal --probe-model`."""
    import pytest

    from tests.unit.test_deploy_aks import write_repo
    from tritonkit.cli.heal import command as heal
    from tritonkit.errors import DeployValidationError

    healer = _containers(**HEAL, heal_probe_models=("adder", "vlm_prompt"))["tritonkit-heal"]
    args = healer["args"]
    assert [args[i + 1] for i, a in enumerate(args) if a == "--probe-model"] == ["adder", "vlm_prompt"]
    assert "--probe-model" not in _containers(**HEAL)["tritonkit-heal"]["args"]
    # the args are the heal command's own (every option they pass exists there)
    names = {name for p in typer_params(heal) for name in p}
    assert {a for a in args if a.startswith("--")} <= names
    assert option_problems(aks(heal_probe_models=("adder",)).options) == [
        "--heal-probe-model needs the healer: give --heal-image (or deploy the OpenAI front)"
    ]
    repo = write_repo(tmp_path / "repo")
    _, models = aks(repository=repo, **HEAL, heal_probe_models=("adder",)).check()
    assert [m.name for m in models] == ["adder"]
    with pytest.raises(DeployValidationError) as refused:
        aks(repository=repo, **HEAL, heal_probe_models=("adder", "nope")).check()
    assert [p.split(":")[0] for p in refused.value.problems] == ["--heal-probe-model nope"]


def typer_params(command: Any) -> list[tuple[str, ...]]:
    """The option names of a Typer command function (its parameters' defaults)."""
    import inspect

    return [
        tuple(p.default.param_decls or ()) for p in inspect.signature(command).parameters.values()
        if hasattr(p.default, "param_decls")
    ]  # fmt: skip
