"""Azure ML deployer: pre-validation rules, entities and CLI v2 YAML, and the create/update call
sequence through the real azure-ai-ml SDK.

No Azure is reachable from the test machines, so the SDK's HTTP transport is answered by
:class:`ReplayTransport`, an azure-core ``HttpTransport`` replaying the recorded responses in
``tests/fixtures/azure/``: the only fake here. Everything above the transport (entity -> REST
conversion, upload listing, blob upload, pollers, error types) is the real SDK.
"""

from __future__ import annotations

import io
import json
import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import urllib3
from azure.core.credentials import AccessToken
from azure.core.exceptions import ClientAuthenticationError
from azure.core.pipeline.transport import HttpTransport, RequestsTransportResponse

from tritonkit.deploy.aml import (
    AmlDeployer,
    AmlOptions,
    aml_layout_problems,
    check_yaml,
    parse_traffic,
    sdk_validate,
    traffic_problems,
    triton_base_url,
)
from tritonkit.deploy.base import write_artifacts
from tritonkit.deploy.checks import ModelSummary, max_concurrent_requests
from tritonkit.errors import AzureError, DeployValidationError

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "azure"
SUB = "00000000-0000-0000-0000-000000000000"
KEY = json.loads((FIXTURES / "online_endpoint_keys.json").read_text())["primaryKey"]
STORAGE_KEY = json.loads((FIXTURES / "datastore_list_secrets.json").read_text())["key"]

ADDER_CONFIG = """name: "adder"
backend: "python"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 4 ] } ]
dynamic_batching { preferred_batch_size: [ 4, 8 ] max_queue_delay_microseconds: 100 }
instance_group [ { kind: KIND_CPU count: 2 } ]
"""
ADDER_MODEL = """import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", (x + 1).astype(np.float32))]))
        return out
"""


def write_repo(root: Path) -> Path:
    """A one-model Triton repository (Python backend, dynamic batching, 2 CPU instances)."""
    (root / "adder" / "1").mkdir(parents=True)
    (root / "adder" / "config.pbtxt").write_text(ADDER_CONFIG)
    (root / "adder" / "1" / "model.py").write_text(ADDER_MODEL)
    return root


ENSEMBLE_CONFIG = """name: "pipeline"
platform: "ensemble"
max_batch_size: 8
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]
ensemble_scheduling {
  step [ {
    model_name: "adder" model_version: -1
    input_map { key: "X" value: "IN" } output_map { key: "Y" value: "OUT" }
  } ]
}
"""


def add_ensemble(root: Path) -> Path:
    """An ensemble over ``adder`` with the empty version directory Triton wants."""
    (root / "pipeline" / "1").mkdir(parents=True)
    (root / "pipeline" / "config.pbtxt").write_text(ENSEMBLE_CONFIG)
    return root


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    return write_repo(tmp_path / "model_repository")


def options(repo: Path, tmp_path: Path, **kw: Any) -> AmlOptions:
    base: dict[str, Any] = dict(
        repository=repo,
        endpoint="ep-one",
        deployment="blue",
        instance_type="Standard_NC4as_T4_v3",
        subscription_id=SUB,
        resource_group="rg-tritonkit",
        workspace="ws-tritonkit",
        output_dir=tmp_path / "deploy" / "aml",
        retry_total=0,
        smoke_test=False,
        wait_timeout_s=30,
    )
    base.update(kw)
    return AmlOptions(**base)


# --------------------------------------------------------------------------- replay transport


class ReplayTransport(HttpTransport):  # type: ignore[misc]
    """Answers each request from the first route whose method and URL pattern match.

    A route holds a list of (status, fixture file or None, headers); each match consumes one,
    the last one repeats. Every request is recorded for the assertions. A request with no route
    gets a 404 naming it, which the SDK turns into ResourceNotFoundError.
    """

    def __init__(
        self, routes: list[tuple[str, str, list[tuple[int, str | bytes | None, dict[str, str]]]]]
    ) -> None:
        self.routes = [(m, re.compile(p), list(r)) for m, p, r in routes]
        self.requests: list[tuple[str, str, Any]] = []

    def __enter__(self) -> ReplayTransport:
        return self

    def __exit__(self, *args: object) -> None:
        return None

    def open(self) -> None:
        return None

    def close(self) -> None:
        return None

    def send(self, request: Any, **kwargs: Any) -> Any:
        body = request.body if request.body is not None else getattr(request, "data", None)
        if isinstance(body, bytes):
            body = body.decode("utf-8", "replace")
        self.requests.append((request.method, request.url, body))
        for method, pattern, responses in self.routes:
            if method == request.method and pattern.search(request.url):
                status, fixture, headers = responses.pop(0) if len(responses) > 1 else responses[0]
                if isinstance(fixture, bytes):
                    content = fixture
                else:
                    content = (FIXTURES / fixture).read_bytes() if fixture else b""
                break
        else:
            status, headers = 404, {}
            content = json.dumps(
                {"error": {"code": "NotFound", "message": f"no recorded response for {request.method}"}}
            ).encode()
        hdrs = {"Content-Type": "application/json", "x-ms-request-id": "test", **headers}
        raw = requests.Response()
        raw.status_code = status
        raw.reason = "OK" if status < 400 else "Error"
        raw.url = request.url
        raw.headers.update(hdrs)
        raw.raw = urllib3.HTTPResponse(
            body=io.BytesIO(content), preload_content=False, status=status, headers=hdrs
        )
        from azure.core.pipeline.transport._requests_basic import _is_rest

        if _is_rest(request):
            from azure.core.rest._requests_basic import RestRequestsTransportResponse

            response = RestRequestsTransportResponse(request=request, internal_response=raw)
            response.read()
            return response
        return RequestsTransportResponse(request, raw)

    def find(self, method: str, pattern: str) -> list[tuple[str, str, Any]]:
        return [r for r in self.requests if r[0] == method and re.search(pattern, r[1])]


BLOB_HEADERS = {"ETag": '"0x8DC1"', "Last-Modified": "Sat, 21 Nov 2026 21:00:00 GMT"}


def azure_routes(*, endpoint_exists: bool = False) -> list[Any]:
    """The recorded conversation for registering a model and creating endpoint + deployment."""
    endpoint_get: list[Any] = [(200, "online_endpoint_put.json", {})]
    if not endpoint_exists:
        endpoint_get.insert(0, (404, "online_endpoint_not_found.json", {}))
    return [
        ("GET", r"/models/[^/]+/versions\?", [(200, "model_versions_list_empty.json", {})]),
        ("GET", r"/datastores/workspaceblobstore\?", [(200, "datastore_get.json", {})]),
        ("POST", r"/datastores/workspaceblobstore/listSecrets", [(200, "datastore_list_secrets.json", {})]),
        ("HEAD", r"\.blob\.core\.windows\.net/", [(404, None, {})]),
        ("PUT", r"\.blob\.core\.windows\.net/.*comp=metadata", [(200, None, BLOB_HEADERS)]),
        ("PUT", r"\.blob\.core\.windows\.net/", [(201, None, BLOB_HEADERS)]),
        ("PUT", r"/models/ep-one-triton/versions/1\?", [(200, "model_version_put.json", {})]),
        ("GET", r"/workspaces/ws-tritonkit\?", [(200, "workspace_get.json", {})]),
        ("GET", r"/onlineEndpoints/ep-one/deployments\?", [(200, "online_deployments_list.json", {})]),
        ("GET", r"/onlineEndpoints/ep-one\?", endpoint_get),
        ("PUT", r"/onlineEndpoints/ep-one/deployments/blue\?", [(200, "online_deployment_put.json", {})]),
        ("PUT", r"/onlineEndpoints/ep-one\?", [(200, "online_endpoint_put.json", {})]),
        ("POST", r"/onlineEndpoints/ep-one/listKeys", [(200, "online_endpoint_keys.json", {})]),
    ]


class StaticCredential:
    """A TokenCredential with a fixed token: no Entra ID is reachable here (test-only fake)."""

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken("arm-token-for-tests", int(time.time()) + 3600)


class RefusingCredential:
    """A credential that cannot sign in, as DefaultAzureCredential without `az login` does."""

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        raise ClientAuthenticationError("DefaultAzureCredential failed to retrieve a token")


@pytest.fixture()
def replay(monkeypatch: pytest.MonkeyPatch) -> Iterator[ReplayTransport]:
    transport = ReplayTransport(azure_routes())
    # The SDK's blob upload builds its own storage client without a transport argument; route its
    # default transport to the same replay.
    import azure.storage.blob._shared.base_client as blob_base

    monkeypatch.setattr(blob_base, "RequestsTransport", lambda **_: transport)
    yield transport


def deployer(opts: AmlOptions, transport: ReplayTransport, credential: Any = None) -> AmlDeployer:
    return AmlDeployer(options=opts, credential=credential or StaticCredential(), transport=transport)


# --------------------------------------------------------------------------- pre-validation


@pytest.mark.parametrize(
    ("field", "value", "fragment"),
    [
        ("endpoint", "ab", "3-32 characters"),
        ("endpoint", "1endpoint", "letter first"),
        ("endpoint", "my_endpoint", "letters, digits and hyphens"),
        ("endpoint", "endpoint-", "ends with a hyphen"),
        ("endpoint", "e" * 33, "3-32 characters"),
        ("deployment", "b", "3-32 characters"),
        ("deployment", "blue.green", "letters, digits and hyphens"),
        ("instance_count", 0, "--instance-count must be >= 1"),
        ("auth_mode", "password", "--auth-mode must be one of"),
        ("request_timeout_ms", 200_000, "--request-timeout-ms"),
        ("max_concurrent_requests", 0, "--max-concurrent-requests"),
        ("traffic", {"blue": 90, "green": 20}, "add up to 100"),
    ],
)
def test_aml_check_settings_raises_when_a_rule_is_broken(
    repo: Path, tmp_path: Path, field: str, value: Any, fragment: str
) -> None:
    opts = options(repo, tmp_path, **{field: value})
    with pytest.raises(DeployValidationError) as info:
        AmlDeployer(options=opts).check_settings()
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("endpoint", "abc"),
        ("endpoint", "A" + "b-1" * 10 + "z"),
        ("deployment", "green-2"),
        ("instance_count", 3),
        ("auth_mode", "aml_token"),
        ("auth_mode", "aad_token"),
        ("traffic", {"blue": 90, "green": 10}),
        ("traffic", {"blue": 0}),
        ("request_timeout_ms", 180_000),
    ],
)
def test_aml_check_settings_passes_when_settings_are_valid(
    repo: Path, tmp_path: Path, field: str, value: Any
) -> None:
    AmlDeployer(options=options(repo, tmp_path, **{field: value})).check_settings()


def test_parse_traffic_reads_blue_green_when_given_name_percent_pairs() -> None:
    assert parse_traffic("blue=90, green=10") == {"blue": 90, "green": 10}
    assert traffic_problems({"blue": 90, "green": 10}) == []


@pytest.mark.parametrize("text", ["blue", "blue=ninety", "", "blue=-5"])
def test_parse_traffic_raises_when_syntax_is_wrong(text: str) -> None:
    with pytest.raises(DeployValidationError):
        parse_traffic(text)


def test_aml_layout_passes_when_repository_has_config_and_numeric_versions(repo: Path) -> None:
    problems, warnings = aml_layout_problems(repo)
    assert problems == [] and warnings == []


def test_aml_layout_fails_when_amlignore_hides_config(repo: Path) -> None:
    (repo / ".amlignore").write_text("*.pbtxt\n")
    problems, _ = aml_layout_problems(repo)
    assert any("adder/config.pbtxt is excluded from the upload by .amlignore" in p for p in problems)


def test_aml_layout_fails_when_gitignore_hides_model_file(repo: Path) -> None:
    (repo / ".gitignore").write_text("*.py\n")
    problems, _ = aml_layout_problems(repo)
    assert any("adder/1/model.py excluded from the upload by .gitignore" in p for p in problems)


def test_aml_layout_fails_when_gitignore_ignores_generated_repository(repo: Path) -> None:
    (repo / ".gitignore").write_text("*\n!.gitignore\n!README.md\n")
    problems, _ = aml_layout_problems(repo)
    assert any("adder/config.pbtxt is excluded from the upload by .gitignore" in p for p in problems)
    (repo / ".amlignore").write_text("README.md\n")  # takes precedence over .gitignore
    assert aml_layout_problems(repo)[0] == []


def test_aml_layout_warns_when_ignore_file_hides_some_version_files(repo: Path) -> None:
    (repo / ".amlignore").write_text("*.log\n")
    (repo / "adder" / "1" / "debug.log").write_text("x\n")
    problems, warnings = aml_layout_problems(repo)
    assert problems == []
    assert any("adder/1/debug.log excluded from the upload by .amlignore" in w for w in warnings)


def test_aml_layout_prefers_amlignore_when_both_ignore_files_exist(repo: Path) -> None:
    (repo / ".gitignore").write_text("*.py\n")
    (repo / ".amlignore").write_text("*.log\n")
    assert aml_layout_problems(repo)[0] == []


def test_aml_layout_fails_when_config_is_missing(repo: Path) -> None:
    (repo / "adder" / "config.pbtxt").unlink()
    problems, _ = aml_layout_problems(repo)
    assert any("adder/ has no config.pbtxt" in p for p in problems)


def test_aml_layout_fails_when_no_numeric_version(repo: Path) -> None:
    (repo / "adder" / "1").rename(repo / "adder" / "v1")
    problems, warnings = aml_layout_problems(repo)
    assert any("no numeric version directory" in p for p in problems)
    assert any("adder/v1/ is not a numeric version directory" in w for w in warnings)


def test_aml_layout_fails_when_version_has_leading_zero(repo: Path) -> None:
    (repo / "adder" / "1").rename(repo / "adder" / "01")
    problems, _ = aml_layout_problems(repo)
    assert any("must not start with 0" in p for p in problems)


# --------------------------------------------------------------------------- sizing and entities

ADDER = ModelSummary(
    name="adder",
    is_ensemble=False,
    max_batch_size=8,
    preferred_batch_sizes=(4, 8),
    instance_count=2,
    uses_gpu=False,
)


def test_max_concurrent_requests_follows_batching_when_models_batch() -> None:
    nobatch = ModelSummary(
        name="n",
        is_ensemble=False,
        max_batch_size=0,
        preferred_batch_sizes=(),
        instance_count=1,
        uses_gpu=False,
    )
    ens = ModelSummary(
        name="e",
        is_ensemble=True,
        max_batch_size=64,
        preferred_batch_sizes=(),
        instance_count=50,
        uses_gpu=False,
    )
    assert max_concurrent_requests([ADDER]) == 2 * 8 * 2
    assert max_concurrent_requests([nobatch]) == 2  # never Azure ML's default of 1
    assert max_concurrent_requests([nobatch, ADDER, ens]) == 32  # ensembles do not count
    big = ModelSummary(
        name="b",
        is_ensemble=False,
        max_batch_size=512,
        preferred_batch_sizes=(),
        instance_count=4,
        uses_gpu=True,
    )
    assert max_concurrent_requests([big]) == 1000


def test_aml_entities_carry_sized_request_settings_when_built(repo: Path, tmp_path: Path) -> None:
    model, endpoint, deployment = AmlDeployer(options=options(repo, tmp_path)).entities([ADDER])
    assert model.type == "triton_model" and Path(model.path) == repo.resolve()
    assert endpoint.auth_mode == "key"
    assert deployment.request_settings.max_concurrent_requests_per_instance == 32
    assert deployment.request_settings.request_timeout_ms == 90_000
    assert deployment.scale_settings.type == "default"
    assert deployment.liveness_probe.initial_delay == 120
    rest = deployment._to_rest_object(location="westeurope")
    assert rest.properties.request_settings.max_concurrent_requests_per_instance == 32
    assert rest.sku.capacity == 1


def test_sdk_validate_raises_when_sdk_rejects_the_deployment(repo: Path, tmp_path: Path) -> None:
    _model, endpoint, deployment = AmlDeployer(options=options(repo, tmp_path)).entities([ADDER])
    deployment.request_settings.request_timeout_ms = "soon"  # the SDK's own conversion refuses it
    with pytest.raises(DeployValidationError, match="SDK rejects"):
        sdk_validate(endpoint, deployment)


def test_sdk_validate_passes_when_entities_are_valid(repo: Path, tmp_path: Path) -> None:
    _model, endpoint, deployment = AmlDeployer(options=options(repo, tmp_path)).entities([ADDER])
    sdk_validate(endpoint, deployment)


def test_aml_yaml_loads_with_sdk_loaders_when_written(repo: Path, tmp_path: Path) -> None:
    import azure.ai.ml as ml

    d = AmlDeployer(options=options(repo, tmp_path, traffic={"blue": 100}))
    plan = d.plan()
    out = tmp_path / "deploy" / "aml"
    write_artifacts(plan, out)
    assert sorted(p.name for p in out.iterdir()) == ["deployment.yml", "endpoint.yml", "model.yml"]
    model = ml.load_model(out / "model.yml")
    assert model.type == "triton_model"
    assert Path(str(model.path)).resolve() == repo.resolve()  # the loader resolves it from the file
    raw = (out / "model.yml").read_text()
    assert "path: ../../model_repository" in raw
    endpoint = ml.load_online_endpoint(out / "endpoint.yml")
    assert endpoint.name == "ep-one" and endpoint.auth_mode == "key"
    dep = ml.load_online_deployment(out / "deployment.yml")
    assert dep.request_settings.max_concurrent_requests_per_instance == 32
    assert dep.model == "ep-one-triton:1"  # the loader drops the azureml: prefix
    assert dep.instance_type == "Standard_NC4as_T4_v3" and dep.instance_count == 1
    assert dep.readiness_probe.failure_threshold == 60


def test_check_yaml_raises_when_yaml_breaks_the_schema(repo: Path, tmp_path: Path) -> None:
    d = AmlDeployer(options=options(repo, tmp_path))
    import yaml

    texts = {name: yaml.safe_dump(doc) for name, doc in d.documents([ADDER]).items()}
    texts["deployment.yml"] = texts["deployment.yml"].replace("instance_count: 1", "instance_count: many")
    with pytest.raises(DeployValidationError, match="deployment.yml"):
        check_yaml(texts, relative_origin=tmp_path / "deploy" / "aml", repository=repo)


def test_aml_plan_raises_before_network_when_repository_is_invalid(tmp_path: Path) -> None:
    bad = write_repo(tmp_path / "bad")
    (bad / "adder" / "config.pbtxt").write_text('name: "adder"\nbackend: "python"\nmax_batch_size: -3\n')
    transport = ReplayTransport([])
    d = deployer(options(bad, tmp_path), transport)
    with pytest.raises(DeployValidationError, match="failed validation"):
        d.apply(d.plan())
    assert transport.requests == []


def test_triton_base_url_strips_score_when_scoring_uri_given() -> None:
    assert triton_base_url("https://e.westeurope.inference.ml.azure.com/score") == (
        "https://e.westeurope.inference.ml.azure.com"
    )


# --------------------------------------------------------------------------- call sequence


def test_aml_apply_sends_create_sequence_when_endpoint_is_new(
    repo: Path,
    tmp_path: Path,
    replay: ReplayTransport,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    d = deployer(options(repo, tmp_path, traffic={"blue": 100}), replay)
    steps: list[str] = []
    result = d.apply(d.plan(), progress=steps.append)

    calls = [
        (m, re.sub(r"\?.*", "", u).split("/ws-tritonkit")[-1])
        for m, u, _ in replay.requests
        if "management.azure.com" in u
    ]
    order = [c for c in calls if c[0] in ("PUT", "POST")]
    assert order == [
        ("POST", "/datastores/workspaceblobstore/listSecrets"),
        ("PUT", "/models/ep-one-triton/versions/1"),
        ("PUT", "/onlineEndpoints/ep-one"),
        ("PUT", "/onlineEndpoints/ep-one/deployments/blue"),
        ("PUT", "/onlineEndpoints/ep-one"),
    ]
    # the repository itself was uploaded to the workspace's blob store
    uploaded = {
        u.split("/LocalUpload/")[1].split("/", 1)[1]
        for m, u, _ in replay.find("PUT", r"blob\.core")
        if "comp=" not in u
    }
    assert uploaded == {"model_repository/adder/config.pbtxt", "model_repository/adder/1/model.py"}

    model_body = json.loads(replay.find("PUT", r"/models/ep-one-triton/versions/1")[0][2])
    assert model_body["properties"]["modelType"] == "triton_model"
    endpoint_body = json.loads(replay.find("PUT", r"/onlineEndpoints/ep-one\?")[0][2])
    assert endpoint_body["properties"]["authMode"] == "Key"
    assert endpoint_body["location"] == "westeurope"
    dep_body = json.loads(replay.find("PUT", r"/deployments/blue\?")[0][2])
    props = dep_body["properties"]
    assert props["requestSettings"]["maxConcurrentRequestsPerInstance"] == 32
    assert props["requestSettings"]["requestTimeout"] == "PT1M30S"
    assert props["instanceType"] == "Standard_NC4as_T4_v3"
    assert props["endpointComputeType"] == "Managed"
    assert props["scaleSettings"]["scaleType"] == "Default"
    assert props["livenessProbe"]["initialDelay"] == "PT2M"
    assert props["model"].endswith("/models/ep-one-triton/versions/1")
    assert dep_body["sku"]["capacity"] == 1
    traffic_body = json.loads(replay.find("PUT", r"/onlineEndpoints/ep-one\?")[-1][2])
    assert traffic_body["properties"]["traffic"] == {"blue": 100}

    assert result.scoring_uri == "https://ep-one.westeurope.inference.ml.azure.com"
    assert any("traffic set: blue=100" in s for s in steps)
    out, err = capsys.readouterr()
    for secret in (KEY, STORAGE_KEY):
        assert secret not in caplog.text and secret not in out and secret not in err
        assert secret not in repr(result)


def test_aml_apply_uploads_placeholder_when_ensemble_version_dir_is_empty(
    repo: Path, tmp_path: Path, replay: ReplayTransport
) -> None:
    add_ensemble(repo)
    (repo / ".amlignore").write_text("*.log\n")
    (repo / "adder" / "1" / "debug.log").write_text("not uploaded\n")
    d = deployer(options(repo, tmp_path), replay)
    plan = d.plan()
    assert any("pipeline/1/ is empty" in w for w in plan.warnings)
    d.apply(plan)
    uploaded = {
        u.split("/LocalUpload/")[1].split("/", 1)[1]
        for _m, u, _b in replay.find("PUT", r"blob\.core")
        if "comp=" not in u
    }
    assert uploaded == {
        "model_repository/adder/config.pbtxt",
        "model_repository/adder/1/model.py",
        "model_repository/pipeline/config.pbtxt",
        "model_repository/pipeline/1/.tritonkit-keep",
        "model_repository/.amlignore",
    }
    assert not (repo / "pipeline" / "1" / ".tritonkit-keep").exists()  # the user's tree is untouched


@pytest.mark.parametrize(("mode", "rest"), [("aml_token", "AMLToken"), ("aad_token", "AADToken")])
def test_aml_apply_sends_auth_mode_when_token_auth_is_chosen(
    repo: Path, tmp_path: Path, replay: ReplayTransport, mode: str, rest: str
) -> None:
    d = deployer(options(repo, tmp_path, auth_mode=mode), replay)
    d.apply(d.plan())
    body = json.loads(replay.find("PUT", r"/onlineEndpoints/ep-one\?")[0][2])
    assert body["properties"]["authMode"] == rest


def test_aml_status_reports_provisioning_state_when_deployment_exists(
    repo: Path, tmp_path: Path, replay: ReplayTransport
) -> None:
    replay.routes.insert(
        0,
        (
            "GET",
            re.compile(r"/onlineEndpoints/ep-one/deployments/blue\?"),
            [(200, "online_deployment_put.json", {})],
        ),
    )
    replay.routes.insert(
        0, ("GET", re.compile(r"/onlineEndpoints/ep-one\?"), [(200, "online_endpoint_traffic.json", {})])
    )
    d = deployer(options(repo, tmp_path), replay)
    status = d.status()
    details = dict(status.details)
    assert status.ready is True
    assert details["provisioning state"] == "Succeeded"
    assert details["traffic"] == "blue=100"
    assert details["scoring uri"] == "https://ep-one.westeurope.inference.ml.azure.com"
    # the client was built with explicit timeouts and a bounded retry
    kwargs = d.ml_client()._kwargs
    assert kwargs["connection_timeout"] == 10.0 and kwargs["read_timeout"] == 120.0
    assert kwargs["retry_total"] == 0  # options() sets 0; the default is 3


def test_aml_apply_leaves_traffic_alone_when_not_asked(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    transport = ReplayTransport(azure_routes(endpoint_exists=True))
    import azure.storage.blob._shared.base_client as blob_base

    monkeypatch.setattr(blob_base, "RequestsTransport", lambda **_: transport)
    d = deployer(options(repo, tmp_path, deployment="blue"), transport)
    d.apply(d.plan())
    # existing endpoint, no --traffic: only the deployment is created; the endpoint is not updated
    assert transport.find("PUT", r"/onlineEndpoints/ep-one\?") == []
    assert len(transport.find("PUT", r"/deployments/blue\?")) == 1


def test_aml_apply_raises_azure_error_when_credential_is_refused(
    repo: Path, tmp_path: Path, replay: ReplayTransport
) -> None:
    d = deployer(options(repo, tmp_path), replay, credential=RefusingCredential())
    with pytest.raises(AzureError, match="refused the credential") as info:
        d.apply(d.plan())
    assert "az login" in (info.value.hint or "")


def test_aml_apply_raises_azure_error_when_workspace_is_missing(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    transport = ReplayTransport([])  # every call: 404, as for a workspace that does not exist
    import azure.storage.blob._shared.base_client as blob_base

    monkeypatch.setattr(blob_base, "RequestsTransport", lambda **_: transport)
    d = deployer(options(repo, tmp_path), transport)
    with pytest.raises(AzureError, match="not found") as info:
        d.apply(d.plan())
    assert "--workspace" in (info.value.hint or "")


def test_aml_apply_raises_quota_error_when_azure_refuses_capacity(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    routes = azure_routes()
    routes.insert(0, ("PUT", r"/deployments/blue\?", [(400, "online_deployment_quota_error.json", {})]))
    transport = ReplayTransport(routes)
    import azure.storage.blob._shared.base_client as blob_base

    monkeypatch.setattr(blob_base, "RequestsTransport", lambda **_: transport)
    d = deployer(options(repo, tmp_path), transport)
    with pytest.raises(AzureError, match="not enough quota") as info:
        d.apply(d.plan())
    assert "--instance-type" in (info.value.hint or "")


def test_aml_apply_raises_before_network_when_workspace_is_not_named(repo: Path, tmp_path: Path) -> None:
    transport = ReplayTransport([])
    d = deployer(options(repo, tmp_path, workspace=None), transport)
    with pytest.raises(DeployValidationError, match="not fully named"):
        d.apply(d.plan())
    assert transport.requests == []


@pytest.mark.integration
def test_aml_apply_smoke_tests_each_ensemble_when_endpoint_answers(
    example_repository: Path,
    example_server: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The recorded endpoint's scoring URI points at a real local tritonserver serving the example
    repository, so the smoke test (key fetched with listKeys, readiness, one inference per
    ensemble with generated inputs) runs for real through the tritonkit client."""
    caplog.set_level(logging.DEBUG)
    endpoint = json.loads((FIXTURES / "online_endpoint_put.json").read_text())
    endpoint["properties"]["scoringUri"] = f"{example_server.http_url}/score"
    routes = [r for r in azure_routes() if r[1] != r"/onlineEndpoints/ep-one\?" or r[0] != "GET"]
    routes.insert(
        0,
        (
            "GET",
            r"/onlineEndpoints/ep-one\?",
            [
                (404, "online_endpoint_not_found.json", {}),
                (200, json.dumps(endpoint).encode(), {}),
            ],
        ),
    )
    transport = ReplayTransport(routes)
    import azure.storage.blob._shared.base_client as blob_base

    monkeypatch.setattr(blob_base, "RequestsTransport", lambda **_: transport)
    d = deployer(options(example_repository, tmp_path, smoke_test=True, traffic={"blue": 100}), transport)
    result = d.apply(d.plan())

    assert result.scoring_uri == example_server.http_url
    checks = {r.check: r for r in result.smoke}
    assert set(checks) == {"server ready", "infer arr_coc", "infer vlm_ensemble"}
    assert all(r.ok for r in result.smoke), result.smoke
    assert transport.find("POST", r"/onlineEndpoints/ep-one/listKeys")
    out, err = capsys.readouterr()
    assert KEY not in caplog.text and KEY not in out and KEY not in err and KEY not in repr(result)


# --------------------------------------------------------------------------- decoupled models

DECOUPLED = "model_transaction_policy { decoupled: true }\n"


def test_aml_plan_refuses_decoupled_model_before_any_request(repo: Path, tmp_path: Path) -> None:
    (repo / "adder" / "config.pbtxt").write_text(ADDER_CONFIG + DECOUPLED)
    transport = ReplayTransport([])
    d = deployer(options(repo, tmp_path), transport)
    with pytest.raises(DeployValidationError) as info:
        d.plan()  # what --dry-run runs: nothing is written either
    message = str(info.value)
    assert "model 'adder' is decoupled" in message
    assert "/v2/models/adder/infer" in message and "501" in message
    assert "--target aks" in (info.value.hint or "")
    assert transport.requests == []
    assert not (tmp_path / "deploy" / "aml").exists()


def test_aml_plan_refuses_ensemble_made_decoupled_by_its_step_whatever_its_config_says(
    repo: Path, tmp_path: Path
) -> None:
    (repo / "adder" / "config.pbtxt").write_text(ADDER_CONFIG + DECOUPLED)
    add_ensemble(repo)
    config = repo / "pipeline" / "config.pbtxt"
    config.write_text(config.read_text() + "model_transaction_policy { decoupled: false }\n")
    with pytest.raises(DeployValidationError) as info:
        AmlDeployer(options=options(repo, tmp_path)).plan()
    assert "ensemble 'pipeline' is decoupled because its step 'adder' is" in str(info.value)
    problems = info.value.problems
    assert len(problems) == 2 and any(p.startswith("model 'adder' is decoupled") for p in problems)


def test_aml_plan_accepts_ensemble_that_only_claims_to_be_decoupled(repo: Path, tmp_path: Path) -> None:
    """Triton sets such an ensemble back to decoupled: false, so /infer serves it."""
    add_ensemble(repo)
    config = repo / "pipeline" / "config.pbtxt"
    config.write_text(config.read_text() + DECOUPLED)
    plan = AmlDeployer(options=options(repo, tmp_path)).plan()
    assert "pipeline" in dict(plan.summary)["models"]


@pytest.mark.parametrize(
    ("generation_s", "timeout_ms", "fragment"),
    [
        (60.0, 90_000, None),
        (72.0, 90_000, None),  # 72 s x 1.25 = 90 s: just fits
        (80.0, 90_000, "raise it to at least 100000"),
        (150.0, 180_000, "more than Azure ML's 180000 ms limit"),
        (0.0, 90_000, "must be positive"),
    ],
)
def test_aml_check_settings_checks_request_timeout_against_longest_generation(
    repo: Path, tmp_path: Path, generation_s: float, timeout_ms: int, fragment: str | None
) -> None:
    opts = options(repo, tmp_path, generation_s=generation_s, request_timeout_ms=timeout_ms)
    if fragment is None:
        AmlDeployer(options=opts).check_settings()
        return
    with pytest.raises(DeployValidationError) as info:
        AmlDeployer(options=opts).check_settings()
    assert fragment in str(info.value) and "nothing was sent to Azure" in str(info.value)
