"""Deploying vLLM stages: NVIDIA's vLLM image, the repository at the serving root, engine metrics;
Azure ML refuses them and says what to use instead."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import promql_parser
import pytest

from tests.unit._vllm_helpers import vllm_spec
from tests.unit.test_deploy_aks_monitoring import metric_uses
from tests.unit.test_deploy_aml import ReplayTransport, deployer, options
from tritonkit.deploy.aks import AksDeployer, AksOptions
from tritonkit.deploy.aks.render import Rendered
from tritonkit.errors import DeployValidationError
from tritonkit.repository import build_spec

QUERY_ENDPOINT = "https://tritonkit-amw-a1b2.westeurope.prometheus.monitor.azure.com"
VLLM_GAUGES = {"vllm:num_requests_waiting", "vllm:gpu_cache_usage_perc"}


def vllm_repo(tmp_path: Path, body: str = "parameters: {REPORT_CUSTOM_METRICS: true}") -> Path:
    repo = tmp_path / "repo"
    build_spec(vllm_spec(tmp_path, body), repo)
    return repo


def planned(repo: Path, **kw: Any) -> tuple[AksDeployer, Rendered]:
    base: dict[str, Any] = dict(
        repository=repo,
        model_repository="as://acct01/models/triton",
        prometheus_query_endpoint=QUERY_ENDPOINT,
    )
    base.update(kw)
    d = AksDeployer(options=AksOptions(**base))
    uri, models = d.check()
    return d, d.rendered(uri, models)  # every object checked against its schema


def pod_spec(r: Rendered) -> dict[str, Any]:
    [dep] = [doc for doc in r.objects() if doc["kind"] == "Deployment"]
    spec: dict[str, Any] = dep["spec"]["template"]["spec"]
    return spec


def test_aks_runs_vllm_image_with_repository_copied_to_serving_root_when_repository_has_vllm_stage(
    tmp_path: Path,
) -> None:
    d, r = planned(vllm_repo(tmp_path))
    spec = pod_spec(r)
    [triton] = spec["containers"]
    assert triton["image"] == "nvcr.io/nvidia/tritonserver:24.10-vllm-python-py3"
    assert "--model-repository=/models" in triton["args"]
    assert triton["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert {"name": "model-repository", "mountPath": "/models", "readOnly": True} in triton["volumeMounts"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["dshm"]["emptyDir"]["medium"] == "Memory"
    assert "emptyDir" in volumes["model-repository"]
    [init] = spec["initContainers"]
    env = {e["name"]: e for e in init["env"]}
    assert env["ACCOUNT"]["value"] == "acct01" and env["CONTAINER"]["value"] == "models"
    assert env["PREFIX"]["value"] == "triton" and env["ROOT"]["value"] == "/models"
    assert "AZURE_STORAGE_KEY" not in env  # a mounted Secret file, never an env var
    secret_dir = "/var/run/secrets/tritonkit/storage"
    assert {"name": "storage-credentials", "mountPath": secret_dir, "readOnly": True} in init["volumeMounts"]
    assert volumes["storage-credentials"]["secret"]["secretName"] == "triton-storage"
    assert env["CREDENTIALS"]["value"] == "/var/run/secrets/tritonkit/storage"
    assert not any(e["name"].startswith("AZURE_STORAGE_") for e in triton["env"])
    assert init["securityContext"]["runAsNonRoot"] is True
    assert ("vLLM stages", "decoder (repository at /models)") in d.plan().summary


def test_aks_gives_vllm_engine_writable_home_and_tmp_when_root_filesystem_is_read_only(
    tmp_path: Path,
) -> None:
    """What the engine writes, found by benchmarks/hardened_local.py (results/hardened_local.json):
    its caches under $HOME/.cache (vllm, and on a GPU the compile caches), torch's
    /tmp/torchinductor_*, its ZMQ sockets in the temporary directory, and /dev/shm. HOME on the /tmp
    emptyDir puts all of it on the pod's writable mounts."""
    _, r = planned(vllm_repo(tmp_path))
    spec = pod_spec(r)
    [triton] = spec["containers"]
    assert triton["securityContext"]["readOnlyRootFilesystem"] is True
    assert {"name": "HOME", "value": "/tmp"} in triton["env"]
    writable = {m["mountPath"]: m["name"] for m in triton["volumeMounts"] if not m.get("readOnly")}
    assert set(writable) == {"/tmp", "/dev/shm"}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert "emptyDir" in volumes[writable["/tmp"]]
    assert volumes[writable["/dev/shm"]]["emptyDir"]["medium"] == "Memory"


def test_aks_uses_recorded_release_and_serving_root_when_build_named_them(tmp_path: Path) -> None:
    spec = vllm_spec(tmp_path, 'target: "25.10"')
    repo = tmp_path / "repo"
    build_spec(spec, repo, serving_root="/srv/llm")
    _, r = planned(repo, model_repository="pvc://models-claim/llm/v1")
    spec_ = pod_spec(r)
    [triton] = spec_["containers"]
    assert triton["image"] == "nvcr.io/nvidia/tritonserver:25.10-vllm-python-py3"
    assert "--model-repository=/srv/llm" in triton["args"]
    assert {"name": "model-repository", "mountPath": "/srv/llm", "readOnly": True, "subPath": "llm/v1"} in (
        triton["volumeMounts"]
    )
    assert "initContainers" not in spec_


@pytest.mark.parametrize(
    ("kw", "body", "fragment"),
    [
        ({"image": "nvcr.io/nvidia/tritonserver:25.01-py3"}, "", "has no vllm backend"),
        ({}, "engine: {tensor_parallel_size: 2}", "pass --gpu-count 2"),
        ({"gpu_count": 0}, "", "pass --gpu-count 1"),
        (
            {"image": "nvcr.io/nvidia/tritonserver:25.10-vllm-python-py3"},
            'target: "24.10"',
            "built for release",
        ),
    ],
)
def test_aks_check_refuses_vllm_stage_when_image_or_gpus_cannot_run_it(
    tmp_path: Path, kw: dict[str, Any], body: str, fragment: str
) -> None:
    with pytest.raises(DeployValidationError, match=fragment):
        planned(vllm_repo(tmp_path, body), **kw)


def test_aks_scales_on_engine_queue_when_stage_reports_vllm_metrics(tmp_path: Path) -> None:
    _, r = planned(vllm_repo(tmp_path))
    [scaled] = [doc for doc in r.objects() if doc["kind"] == "ScaledObject"]
    triggers = scaled["spec"]["triggers"]
    assert len(triggers) == 2
    engine = triggers[1]
    assert engine["metricType"] == "AverageValue" and engine["metadata"]["threshold"] == "8"
    assert engine["authenticationRef"] == triggers[0]["authenticationRef"]
    rules = r.files["azure/prometheus-rule-groups.json"]["resources"][0]["properties"]["rules"]
    kv = [rule for rule in rules if rule.get("alert") == "VllmKvCacheFull"]
    assert len(kv) == 1
    for expr in (engine["metadata"]["query"], kv[0]["expression"]):
        promql_parser.parse(expr)  # PromQL-valid
        for name, in_rate in metric_uses(expr):
            assert name in VLLM_GAUGES and not in_rate, expr
        assert 'model=~"decoder"' in expr


def test_aks_leaves_engine_metrics_out_and_warns_when_stage_does_not_report_them(tmp_path: Path) -> None:
    d, r = planned(vllm_repo(tmp_path, ""), monitoring="prometheus-operator", prometheus_query_endpoint=None)
    [scaled] = [doc for doc in r.objects() if doc["kind"] == "ScaledObject"]
    assert len(scaled["spec"]["triggers"]) == 1
    [rule] = [doc for doc in r.objects() if doc["kind"] == "PrometheusRule"]
    assert not any(x.get("alert") == "VllmKvCacheFull" for x in rule["spec"]["groups"][0]["rules"])
    assert any("REPORT_CUSTOM_METRICS" in w for w in d.plan().warnings)


def test_aks_escapes_dots_in_model_names_when_querying_engine_metrics() -> None:
    from tritonkit.deploy.aks.vllm import waiting_expr

    expr = waiting_expr('namespace="triton"', ("llm.v2", "other"))
    assert expr == 'sum(vllm:num_requests_waiting{namespace="triton",model=~"llm\\\\.v2|other"})'
    promql_parser.parse(expr)


def test_aks_plan_writes_manifests_that_pass_kubernetes_schemas_when_repository_has_vllm_stage(
    tmp_path: Path,
) -> None:
    d = AksDeployer(
        options=AksOptions(
            repository=vllm_repo(tmp_path),
            model_repository="as://acct01/models/triton",
            prometheus_query_endpoint=QUERY_ENDPOINT,
            workload_identity_client_id="55555555-5555-5555-5555-555555555555",
        )
    )
    plan = d.plan()  # renders and checks every object against Kubernetes' / the CRDs' schemas
    deployment = next(a for a in plan.artifacts if a.filename == "10-deployment.yaml")
    assert "copy-model-repository" in deployment.text and "AZURE_FEDERATED_TOKEN_FILE" in deployment.text


def test_aml_plan_refuses_vllm_stage_saying_why_and_what_to_use(tmp_path: Path) -> None:
    repo = vllm_repo(tmp_path)
    transport = ReplayTransport([])
    d = deployer(options(repo, tmp_path), transport)
    with pytest.raises(DeployValidationError) as info:
        d.plan()
    message = str(info.value)
    assert "model 'decoder' is decoupled" in message and "501" in message
    assert "vLLM stage is always decoupled" in message and "no vllm backend" in message
    assert "tritonkit deploy --target aks" in message and "-vllm-python-py3" in message
    assert transport.requests == []


def test_vllm_stage_summary_counts_as_gpu_model_when_kind_is_model(tmp_path: Path) -> None:
    from tritonkit.deploy.checks import validate_for_deploy

    [model] = validate_for_deploy(vllm_repo(tmp_path))
    assert model.backend == "vllm" and model.uses_gpu and model.decoupled
    assert json.loads((tmp_path / "repo" / "decoder" / "1" / "model.json").read_text())["model"].startswith(
        "/models/"
    )


def test_helm_chart_lints_and_templates_the_plain_manifests_when_repository_has_vllm_stage(
    tmp_path: Path,
) -> None:
    from tests.unit.test_deploy_helm import _key, helm, template
    from tritonkit.deploy.aks.helm import render_chart

    d, r = planned(vllm_repo(tmp_path))
    uri, models = d.check()
    chart = tmp_path / "chart"
    for name, text in render_chart(d.options, uri, models).items():
        (chart / name).parent.mkdir(parents=True, exist_ok=True)
        (chart / name).write_text(text)
    lint = helm("lint", "--strict", str(chart))
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert "[WARNING]" not in lint.stdout and "[ERROR]" not in lint.stdout
    assert sorted(template(chart), key=_key) == sorted(r.objects(), key=_key)


def test_dashboard_shows_engine_panels_with_counters_in_rate_when_stage_reports_vllm_metrics(
    tmp_path: Path,
) -> None:
    _, r = planned(vllm_repo(tmp_path))
    panels = r.files["grafana/triton-dashboard.json"]["panels"]
    engine = [p for p in panels if p["title"].startswith("vLLM")]
    assert len(engine) == 4
    counters = {"vllm:generation_tokens_total", "vllm:time_to_first_token_seconds_bucket"}
    for panel in engine:
        for target in panel["targets"]:
            expr = target["expr"].replace("$__rate_interval", "5m")
            promql_parser.parse(expr)
            for name, in_rate in metric_uses(expr):
                assert name in counters | VLLM_GAUGES | {"vllm:num_requests_running"}, expr
                assert in_rate == (name in counters), expr
    _, plain = planned(vllm_repo(tmp_path / "plain", ""))
    assert not [
        p for p in plain.files["grafana/triton-dashboard.json"]["panels"] if p["title"].startswith("vLLM")
    ]
