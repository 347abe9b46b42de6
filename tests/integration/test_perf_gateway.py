"""tritonkit perf through a real Azure-ML-like TLS gateway (nginx): key auth, deployments, TLS."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration._gateway import THROTTLED, NginxGateway, find_nginx
from tritonkit.cli.app import main
from tritonkit.client.auth import CombinedAuth, DeploymentRouting, KeyAuth
from tritonkit.errors import AuthenticationError
from tritonkit.perf import PerfSettings, run_perf

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        find_nginx() is None, reason="nginx missing: run scripts/system-deps.sh (make test does)"
    ),
]

KEY = f"aml-key-{secrets.token_hex(12)}"
QUICK = {"measurement_interval_ms": 400, "max_trials": 3, "warmup_s": 0.2}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, example_server: Any) -> Iterator[NginxGateway]:
    with NginxGateway(
        tmp_path_factory.mktemp("perf_gateway"),
        {"blue": example_server.http_address},
        key=KEY,
        grpc_deployments={"blue": example_server.grpc_address},
    ) as gw:
        yield gw


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_perf_measures_through_tls_gateway_when_key_and_deployment_are_given(
    gateway: NginxGateway, protocol: str
) -> None:
    url = gateway.url + "/score" if protocol == "http" else gateway.grpc_url
    run = run_perf(
        PerfSettings(
            url=url,
            model="densenet_onnx",
            protocol=protocol,
            levels=(2,),
            cacert=str(gateway.ca_cert),
            **QUICK,  # type: ignore[arg-type]
        ),
        auth=CombinedAuth(KeyAuth(KEY), DeploymentRouting("blue")),
    )
    (step,) = run.steps
    assert step.requests > 0 and step.error_count == 0
    assert step.server is not None  # the statistics API answered through the gateway too
    assert KEY not in json.dumps(run.to_dict())  # the secret never reaches the results


def test_perf_raises_authentication_error_naming_the_credential_when_key_is_wrong(
    gateway: NginxGateway,
) -> None:
    with pytest.raises(AuthenticationError) as info:
        run_perf(
            PerfSettings(url=gateway.url, model="densenet_onnx", cacert=str(gateway.ca_cert), **QUICK),  # type: ignore[arg-type]
            auth=KeyAuth("not-the-key"),
        )
    assert "static key" in str(info.value) and "not-the-key" not in str(info.value)


def test_cli_benchmarks_an_azure_ml_like_endpoint_when_given_key_env_and_deployment(
    gateway: NginxGateway, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TK_PERF_KEY", KEY)
    out = tmp_path / "run.csv"
    argv = [
        "perf",
        gateway.url + "/score",
        "densenet_onnx",
        "--key-env",
        "TK_PERF_KEY",
        "--cacert",
        str(gateway.ca_cert),
    ]
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--deployment", "blue", "--concurrency", "1", "--measurement-interval", "300",
              "--max-trials", "3", "--warmup", "0", "-q", "--csv", str(out)])  # fmt: skip
    assert exc.value.code == 0
    rows = out.read_text().splitlines()
    assert len(rows) == 2 and float(rows[1].split(",")[1]) > 0
    assert KEY not in out.read_text()


def test_cli_exits_1_with_the_status_when_gateway_throttles_set_up_calls(
    gateway: NginxGateway, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TK_PERF_KEY", KEY)
    argv = [
        "perf",
        gateway.url,
        "densenet_onnx",
        "--key-env",
        "TK_PERF_KEY",
        "--cacert",
        str(gateway.ca_cert),
    ]
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--deployment", THROTTLED, "-q"])
    assert exc.value.code == 1
    err = capsys.readouterr().err
    assert "429" in err and KEY not in err
