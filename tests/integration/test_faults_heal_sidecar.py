"""`tritonkit heal URL` beside a tritonserver it did not start: the AKS pod's healer sidecar, run here.

The server is `tritonkit serve --no-heal` with explicit model control and the model-repository API
restricted (as on AKS); the healer gets the admin key through ``--restricted-header`` from its
environment. What it must do, each waited for on state:

- a model unloaded behind its back (what NVIDIA's vllm backend does once its engine failed the
  health check) is loaded again, and Triton answers right;
- a Python stage whose stub was killed (its processes are visible here, as in a pod that shares
  its process namespace) is reloaded;
- its ``/healthz`` answers 200 while it runs; SIGTERM ends it with 0;
- where it cannot see Triton's processes (``--no-watch-processes``: a pod that does not share its
  process namespace), its own probe sees the dead stub through Triton's API, with no user's
  request in flight, and it reloads the model.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import httpx
import pytest

from tests.integration._faults import free_port, kill, status, stub_pids, wait_for
from tests.integration.test_faults_python import _triton
from tests.integration.test_openai_serve_cli import _repository
from tests.integration.test_server_cli import ServeProcess

pytestmark = pytest.mark.integration

ADMIN = "heal-sidecar-admin-key"


def _state(http: str, model: str) -> str:
    reply = httpx.post(f"{http}/v2/repository/index", json={}, headers={"triton-admin-key": ADMIN}, timeout=5)
    return next((e.get("state", "") for e in reply.json() if e["name"] == model), "gone")


def test_heal_reloads_an_unloaded_model_and_a_dead_stub_of_a_server_it_did_not_start(tmp_path: Path) -> None:
    repo = _repository(tmp_path / "repo")
    serve = ServeProcess(
        str(repo),
        "--no-heal",
        "--server-arg=--model-control-mode=explicit",
        "--server-arg=--load-model=*",
        f"--http-restricted-api=model-repository:triton-admin-key={ADMIN}",
    )
    heal = None
    try:
        http = serve.wait_for(r"HTTP\s+(http://127\.0\.0\.1:\d+)").group(1)
        metrics = serve.wait_for(r"metrics\s+(http://127\.0\.0\.1:\d+/metrics)").group(1)
        grpc = serve.wait_for(r"gRPC\s+grpc://(127\.0\.0\.1:\d+)").group(1)
        serve.wait_for("serving; press Ctrl-C")
        port = free_port()
        os.environ["TK_TEST_ADMIN"] = ADMIN
        heal = ServeProcess(
            http,
            "--metrics-url",
            metrics,
            "--grpc",  # loads go over gRPC: an HTTP load holds Triton's HTTP port until it ends
            grpc,
            "--port",
            str(port),
            "--restricted-header",
            "triton-admin-key=TK_TEST_ADMIN",
            verb="heal",
        )
        heal.wait_for(r"healing the models of .*Python stubs watched")
        assert status(f"http://127.0.0.1:{port}/healthz") == 200
        assert ADMIN not in heal.output

        # what NVIDIA's vllm backend does to itself once its engine failed: unload
        gone = httpx.post(
            f"{http}/v2/repository/models/echo_unary/unload",
            json={},
            headers={"triton-admin-key": ADMIN},
            timeout=30,
        )
        assert gone.status_code == 200, gone.text
        heal.wait_for(r"model 'echo_unary' is down")
        assert wait_for(
            lambda: _state(http, "echo_unary") == "READY" and _triton(http) == (200, "echo: hi"), 60
        )
        heal.wait_for(r"model 'echo_unary': ready again after")

        (stub,) = stub_pids("echo_unary")
        kill([stub])
        heal.wait_for(rf"model 'echo_unary': its Python stub process {stub} died")
        assert wait_for(lambda: _triton(http) == (200, "echo: hi"), 60) is not None
        assert stub not in stub_pids("echo_unary")
        assert status(f"http://127.0.0.1:{port}/healthz") == 200
        assert heal.stop(signal.SIGTERM) == 0, heal.output
        assert serve.stop(signal.SIGINT) == 0, serve.output
    finally:
        if heal is not None:
            heal.kill()
        serve.kill()


def test_heal_probe_sees_a_dead_stub_through_the_api_alone_with_no_request_in_flight(tmp_path: Path) -> None:
    repo = _repository(tmp_path / "repo")
    serve = ServeProcess(
        str(repo), "--no-heal", "--server-arg=--model-control-mode=explicit", "--server-arg=--load-model=*"
    )
    heal = None
    try:
        http = serve.wait_for(r"HTTP\s+(http://127\.0\.0\.1:\d+)").group(1)
        serve.wait_for("serving; press Ctrl-C")
        heal = ServeProcess(
            http, "--no-watch-processes", "--probe-model", "echo_unary", "--probe-period", "1", verb="heal"
        )
        heal.wait_for(r"healing the models of .*its processes are not visible here")
        (stub,) = stub_pids("echo_unary")
        kill([stub])  # nobody sends a request from here: only the healer's probe asks
        heal.wait_for(r"model 'echo_unary': the healer's probe was refused \(Stub process .* is not healthy")
        heal.wait_for(r"model 'echo_unary': ready again after")
        assert "its Python stub process" not in heal.output  # seen by the probe, not in /proc
        assert wait_for(lambda: _triton(http) == (200, "echo: hi"), 60) is not None
        assert stub not in stub_pids("echo_unary")
        assert heal.stop(signal.SIGTERM) == 0, heal.output
        assert serve.stop(signal.SIGINT) == 0, serve.output
    finally:
        if heal is not None:
            heal.kill()
        serve.kill()
