"""The validator's decoupled rules agree with a real tritonserver 2.51, verdict and wording.

Triton's QA cases (L0_model_config ``invalid_decoupled_branching``, ``_2``) and the shapes of
tests/integration/_decoupled_corpus.py are served for real: the models Triton refuses must be the
ones the validator reports, with the model Triton's message names; for every legal ensemble the
validator's "decoupled" must be what the server's own config endpoint says; and the call paths
the validator's messages name are checked with plain tritonclient (501 on HTTP /infer,
UNIMPLEMENTED on unary gRPC, responses over the gRPC stream).
"""

from __future__ import annotations

import json
import queue
import re
import shutil
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.integration import _decoupled_corpus as dc
from tests.integration._verdict_corpus import ready_models
from tritonkit.config import read_config
from tritonkit.errors import ModelLoadError
from tritonkit.repository import build_spec, validate_repository
from tritonkit.server import LocalTritonServer

pytestmark = pytest.mark.integration

BASE = Path(__file__).resolve().parent.parent / "fixtures" / "validator" / "base"
_TRITON_BRANCHING = re.compile(
    r"in ensemble (?P<ensemble>\S+), step of model '(?P<model>[^']+)' receives inputs originated "
    r"from different decoupled models"
)


def _repository(root: Path, *groups: dict[str, Any]) -> Path:
    repo = root / "repo"
    shutil.copytree(BASE, repo)
    for group in groups:
        for write in group.values():
            write(repo)
    return repo


SPEC = """name: streaming
models:
  - name: spec_stream
    source: spec_stream.py
    decoupled: true
    max_batch_size: 8
    inputs: [{name: INPUT0, data_type: FP32, dims: [4]}]
    outputs: [{name: OUTPUT0, data_type: FP32, dims: [4]}]
  - name: spec_pipe
    platform: ensemble
    max_batch_size: 8
    inputs: [{name: IN, data_type: FP32, dims: [4]}]
    outputs: [{name: OUT, data_type: FP32, dims: [4]}]
    steps: [{model: spec_stream, inputs: {INPUT0: IN}, outputs: {OUTPUT0: OUT}}]
"""


@pytest.fixture(scope="module")
def legal_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalTritonServer]:
    """The legal corpus, plus a spec using ``decoupled: true`` built by ``build_spec``."""
    root = tmp_path_factory.mktemp("decoupled")
    repo = _repository(root, dc.LEGAL)
    (root / "spec_stream.py").write_text(dc.STREAM_MODEL.replace("OUTPUTS", "['OUTPUT0']"))
    (root / "streaming.yaml").write_text(SPEC)
    build_spec(root / "streaming.yaml", repo)
    with LocalTritonServer(repo, model_config_name=None, startup_timeout=300) as server:
        yield server


def test_validator_refuses_what_triton_refuses_when_decoupled_streams_meet(tmp_path: Path) -> None:
    repo = _repository(tmp_path, dc.LEGAL, dc.BROKEN)
    report = validate_repository(repo)
    server = LocalTritonServer(repo, model_config_name=None, startup_timeout=300)
    try:
        with pytest.raises(ModelLoadError):
            server.start()
    finally:
        server.stop()
    log = server.logs()
    models = {p.name for p in repo.iterdir() if p.is_dir()}
    refused = models - ready_models(log)
    assert refused == set(dc.BROKEN), (sorted(refused ^ set(dc.BROKEN)), log[-4000:])
    assert {p.model for p in report.errors} == refused, [str(p) for p in report.errors]

    said = {m["ensemble"]: m.group(0) for m in _TRITON_BRANCHING.finditer(log)}
    ours = {p.model: p.message for p in report.errors if p.code == "ensemble-decoupled-branching"}
    assert set(said) == set(ours) and len(said) >= 8
    for ensemble, sentence in said.items():
        assert sentence in ours[ensemble]  # the same step named, in Triton's own words
    for ensemble, expected in dc.QA_EXPECTED.items():
        assert said[ensemble] == expected  # Triton's QA `expected` file, reproduced here
    cache = {p.model for p in report.errors if p.code == "response-cache-unsupported"}
    assert cache == {"dec_response_cache", "dens_response_cache"}
    for model in cache:
        assert f"Response Cache does not currently support model {model} with 'decoupled'" in log


def _served_config(server: LocalTritonServer, model: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{server.http_url}/v2/models/{model}/config", timeout=10) as resp:
        config: dict[str, Any] = json.load(resp)
    return config


def test_validator_says_ensemble_is_decoupled_exactly_when_triton_serves_it_so(
    legal_server: LocalTritonServer,
) -> None:
    report = validate_repository(legal_server.repository)
    assert report.valid, [str(p) for p in report.errors]
    said = {p.model for p in report.problems if p.code == "ensemble-decoupled"}
    ignored = {p.model for p in report.problems if p.code == "ensemble-decoupled-ignored"}
    ensembles = [
        p.name for p in legal_server.repository.iterdir()
        if (p / "config.pbtxt").is_file() and read_config(p / "config.pbtxt").platform == "ensemble"
    ]  # fmt: skip
    served = {
        name: bool(_served_config(legal_server, name).get("model_transaction_policy", {}).get("decoupled"))
        for name in ensembles
    }
    assert set(served.values()) == {True, False}  # the corpus holds both kinds
    assert said == {name for name, flag in served.items() if flag}
    own = {name: read_config(legal_server.repository / name / "config.pbtxt") for name in ensembles}
    declared = {n for n, cfg in own.items() if cfg.model_transaction_policy.decoupled}
    assert ignored == {n for n, flag in served.items() if not flag} & declared
    assert ignored  # dens_config_true_unary: Triton set its decoupled: true back to false


@pytest.mark.parametrize(
    ("model", "tensor"), [("dec_stream", "INPUT0"), ("dens_config_false", "IN"), ("spec_pipe", "IN")]
)
def test_decoupled_model_is_refused_on_unary_paths_and_served_over_grpc_stream(
    legal_server: LocalTritonServer, model: str, tensor: str
) -> None:
    """The call paths the validator's decoupled messages name, checked with plain tritonclient."""
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException

    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    http = httpclient.InferenceServerClient(legal_server.http_url.split("://", 1)[-1])
    h_in = httpclient.InferInput(tensor, [1, 4], "FP32")
    h_in.set_data_from_numpy(x)
    with pytest.raises(InferenceServerException) as http_refusal:
        http.infer(model, [h_in])
    assert http_refusal.value.status() == "501"

    grpc = grpcclient.InferenceServerClient(legal_server.grpc_url.split("://", 1)[-1])
    g_in = grpcclient.InferInput(tensor, [1, 4], "FP32")
    g_in.set_data_from_numpy(x)
    with pytest.raises(InferenceServerException) as grpc_refusal:
        grpc.infer(model, [g_in])
    assert grpc_refusal.value.status() == "StatusCode.UNIMPLEMENTED"

    answers: queue.Queue[Any] = queue.Queue()
    grpc.start_stream(callback=lambda result, error: answers.put(error or result))
    try:
        grpc.async_stream_infer(model, [g_in], enable_empty_final_response=True)
        pieces = []
        while True:
            answer = answers.get(timeout=30)
            assert not isinstance(answer, InferenceServerException), answer
            if answer.get_response().parameters["triton_final_response"].bool_param:
                break
            pieces.append(answer.as_numpy("OUT" if tensor == "IN" else "OUTPUT0"))
    finally:
        grpc.stop_stream()
    assert len(pieces) == 2 and all(np.array_equal(p, x) for p in pieces)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_perf_streams_an_ensemble_served_decoupled_whatever_its_config_says(
    legal_server: LocalTritonServer, protocol: str
) -> None:
    from tritonkit.errors import PerfError
    from tritonkit.perf import PerfSettings, run_perf

    url = legal_server.http_url if protocol == "http" else legal_server.grpc_url
    quick: dict[str, Any] = {"levels": (1,), "requests_per_window": 4, "max_trials": 3, "warmup_s": 0.1}
    # the ensemble's own config says unary; Triton serves it decoupled: perf streams it
    run = run_perf(PerfSettings(url=url, model="dens_config_false", protocol=protocol, **quick))
    (step,) = run.steps
    assert run.settings["stream"] is True and step.error_count == 0 and step.requests >= 4
    assert step.stream is not None and step.stream.ttft is not None
    with pytest.raises(PerfError, match="'dens_config_false' is decoupled"):
        run_perf(PerfSettings(url=url, model="dens_config_false", protocol=protocol, stream=False, **quick))
    # an ensemble that only claims to be decoupled is served unary: measured unary, every request good
    run = run_perf(PerfSettings(url=url, model="dens_config_true_unary", protocol=protocol, **quick))
    assert run.settings["stream"] is False
    assert run.steps[0].error_count == 0 and run.steps[0].requests >= 4


def test_validator_warns_exactly_where_a_decoupled_python_model_fails_its_requests(
    legal_server: LocalTritonServer,
) -> None:
    import tritonclient.grpc as grpcclient

    report = validate_repository(legal_server.repository)
    warned = {p.model for p in report.warnings if p.code == "python-decoupled-returns"}
    assert warned == {"dec_returns_responses"}
    grpc = grpcclient.InferenceServerClient(legal_server.grpc_url.split("://", 1)[-1])
    x = grpcclient.InferInput("INPUT0", [1, 4], "FP32")
    x.set_data_from_numpy(np.zeros((1, 4), np.float32))
    answers: queue.Queue[Any] = queue.Queue()
    grpc.start_stream(callback=lambda result, error: answers.put(error or result))
    try:
        grpc.async_stream_infer("dec_returns_responses", [x])
        answer = answers.get(timeout=30)
    finally:
        grpc.stop_stream()
    assert "execute function must return None" in str(answer)
