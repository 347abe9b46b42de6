"""AKS deploys of TensorRT-LLM stages: the -trtllm-python-py3 image, GPUs per engine, /dev/shm, the
repository where the configs point, and scaling/alerts on the engines' own metrics.

Objects are checked by the deployer's own schema checks (Kubernetes OpenAPI via
kubernetes-validate, tritonkit's CRD schemas) and PromQL is parsed with promql-parser; engines
are stand-ins (no GPU here, see _trtllm_helpers).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import promql_parser
import pytest

from tritonkit.deploy.aks import AksDeployer, AksOptions
from tritonkit.deploy.aks.trtllm import KV_CACHE_METRIC, REQUEST_METRIC
from tritonkit.errors import DeployValidationError
from tritonkit.repository.builder import build_spec

from ._trtllm_helpers import fake_engine, stage_spec

QUERY_ENDPOINT = "https://tritonkit-amw-a1b2.westeurope.prometheus.monitor.azure.com"
TRTLLM_IMAGE = "nvcr.io/nvidia/tritonserver:24.10-trtllm-python-py3"


def _repo(tmp_path: Path, **stage: Any) -> Path:
    repo = tmp_path / "repo"
    build_spec(stage_spec(tmp_path, **stage), repo)
    return repo


def _aks(repo: Path, **kw: Any) -> AksDeployer:
    base: dict[str, Any] = {
        "repository": repo,
        "model_repository": "pvc://triton-models",
        "prometheus_query_endpoint": QUERY_ENDPOINT,
    }
    base.update(kw)
    return AksDeployer(options=AksOptions(**base))


def _objects(d: AksDeployer) -> list[dict[str, Any]]:
    uri, models = d.check()
    return d.rendered(uri, models).objects()


def test_default_image_becomes_the_trtllm_image_of_the_built_release(tmp_path: Path) -> None:
    d = _aks(_repo(tmp_path))
    assert d.options.image == TRTLLM_IMAGE
    plan = d.plan()
    assert any(TRTLLM_IMAGE in w for w in plan.warnings)
    assert not any("no model has a KIND_GPU" in w for w in plan.warnings)


def test_deployment_gets_the_image_gpu_limits_shm_and_the_repository_at_models(tmp_path: Path) -> None:
    fake_engine(tmp_path / "llm" / "engine", tp=2)
    d = _aks(_repo(tmp_path), gpu_count=2)
    deployment = next(o for o in _objects(d) if o["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["image"] == TRTLLM_IMAGE
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert {"name": "dshm", "mountPath": "/dev/shm"} in container["volumeMounts"]
    assert any(v.get("emptyDir", {}).get("medium") == "Memory" for v in pod["volumes"])
    assert any(m["mountPath"] == "/models" for m in container["volumeMounts"])
    assert "--model-repository=/models" in container["args"]


def test_keda_also_scales_on_requests_waiting_in_the_engines(tmp_path: Path) -> None:
    d = _aks(_repo(tmp_path))
    scaled = next(o for o in _objects(d) if o["kind"] == "ScaledObject")
    queries = [t["metadata"]["query"] for t in scaled["spec"]["triggers"]]
    assert len(queries) == 2 and REQUEST_METRIC in queries[1]
    for query in queries:
        promql_parser.parse(query)
    assert 'request_type="waiting"' in queries[1]
    assert scaled["spec"]["triggers"][1]["metricType"] == "AverageValue"


def test_rules_record_and_alert_on_the_engines_kv_cache(tmp_path: Path) -> None:
    d = _aks(_repo(tmp_path), monitoring="prometheus-operator", prometheus_query_endpoint=None)
    rule = next(o for o in _objects(d) if o["kind"] == "PrometheusRule")
    items = [r for g in rule["spec"]["groups"] for r in g["rules"]]
    kv = [r for r in items if KV_CACHE_METRIC in r["expr"]]
    assert any(r.get("alert") == "TritonTrtllmKvCacheFull" for r in kv)
    for r in items:
        promql_parser.parse(r["expr"])


def test_repository_without_trtllm_gets_no_engine_triggers(tmp_path: Path) -> None:
    repo = tmp_path / "empty"
    repo.mkdir()
    d = _aks(repo)
    assert d.options.trtllm is None


def test_explicit_image_without_the_backend_is_refused(tmp_path: Path) -> None:
    d = _aks(_repo(tmp_path), image="nvcr.io/nvidia/tritonserver:24.10-py3-sdk")
    assert d.options.image.endswith("-py3-sdk")  # an explicit image is kept, then judged
    with pytest.raises(DeployValidationError) as err:
        d.check()
    assert "trtllm-python-py3" in str(err.value)


def test_image_of_another_release_than_the_engines_is_refused(tmp_path: Path) -> None:
    d = _aks(_repo(tmp_path), image="nvcr.io/nvidia/tritonserver:24.09-trtllm-python-py3")
    with pytest.raises(DeployValidationError, match="built for 24.10"):
        d.check()


def test_fewer_gpus_than_the_engines_ranks_is_refused(tmp_path: Path) -> None:
    fake_engine(tmp_path / "llm" / "engine", tp=2, pp=2)
    d = _aks(_repo(tmp_path), gpu_count=2)
    with pytest.raises(DeployValidationError, match="--gpus 4"):
        d.check()


def test_as_repository_is_copied_to_the_serving_root_before_triton_starts(tmp_path: Path) -> None:
    d = _aks(_repo(tmp_path), model_repository="as://acct01/models/triton")
    deployment = next(o for o in _objects(d) if o["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (init,) = pod["initContainers"]
    assert {"name": "ROOT", "value": "/models"} in init["env"]
    assert "--model-repository=/models" in pod["containers"][0]["args"]


def test_pvc_sub_path_is_mounted_at_the_serving_root(tmp_path: Path) -> None:
    d = _aks(_repo(tmp_path), model_repository="pvc://triton-models/llm")
    container = next(o for o in _objects(d) if o["kind"] == "Deployment")["spec"]["template"]["spec"]
    mount = next(m for m in container["containers"][0]["volumeMounts"] if m["name"] == "model-repository")
    assert mount["mountPath"] == "/models" and mount["subPath"] == "llm"


def test_stages_built_for_different_serving_roots_are_refused(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    build_spec(stage_spec(tmp_path / "other", name="other", serving_root="/srv"), repo)
    d = _aks(repo)
    with pytest.raises(DeployValidationError, match="different serving roots"):
        d.check()


def test_dashboard_shows_the_engines_requests_and_kv_cache(tmp_path: Path) -> None:
    d = _aks(_repo(tmp_path))
    uri, models = d.check()
    panels = d.rendered(uri, models).files["grafana/triton-dashboard.json"]["panels"]
    exprs = [t["expr"] for p in panels for t in p["targets"]]
    assert any(REQUEST_METRIC in e and "waiting" in e for e in exprs)
    assert any(KV_CACHE_METRIC in e for e in exprs)
    for expr in exprs:
        promql_parser.parse(expr.replace("$__rate_interval", "5m"))
