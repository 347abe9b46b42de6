"""A Python stage's stub and the tritonserver itself killed under `tritonkit serve --openai-port`.

Measured on Triton 2.51 first (what serve heals):

- a Python stage whose stub process is killed stays READY and answers every request
  ``Stub process '<instance>' is not healthy`` (HTTP 500) for good: serve's healer sees the stub
  gone, unloads the model (readiness false) and loads it again;
- a tritonserver killed takes the models with it: the front answers 503 (Retry-After) and
  ``/health/ready`` 503 while it is away; serve starts it again on the same ports and the front,
  never restarted, answers right again.

Each test waits on state (readiness, a right answer), never on a sleep; every answer seen in
between must be a server error (5xx), never a client error.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path

import httpx
import pytest

from tests.integration._faults import free_port, kill, status, stub_pids, tritonserver_pid, wait_for
from tests.integration.test_openai_serve_cli import _repository
from tests.integration.test_server_cli import ServeProcess

pytestmark = pytest.mark.integration

WORDS = "one two three"


def _ask(base: str) -> tuple[int, str]:
    """One streamed chat completion through the front, read whole: (status, text or error type)."""
    body = {"model": "echo_stream", "messages": [{"role": "user", "content": WORDS}], "stream": True}
    try:
        with httpx.stream("POST", f"{base}/chat/completions", json=body, timeout=30) as reply:
            if reply.status_code != 200:
                reply.read()
                retry = reply.headers.get("retry-after")
                kind = reply.json()["error"]["type"]
                return (
                    reply.status_code,
                    kind if reply.status_code != 503 or retry else kind + " (no Retry-After)",
                )
            text = []
            for line in reply.iter_lines():
                if line.startswith("data: {"):
                    event = httpx.Response(200, content=line[6:]).json()
                    if "error" in event:
                        return 599, str(event["error"]["type"])  # failed after its first byte
                    text += [c["delta"].get("content") or "" for c in event["choices"]]
            return 200, "".join(text)
    except httpx.HTTPError as exc:
        return 0, type(exc).__name__


def _triton(http: str) -> tuple[int, str]:
    """One request straight to Triton's HTTP /infer of the unary pipeline."""
    body = {"inputs": [{"name": "TEXT", "shape": [1], "datatype": "BYTES", "data": ["hi"]}]}
    try:
        reply = httpx.post(f"{http}/v2/models/echo_unary/infer", json=body, timeout=30)
    except httpx.HTTPError as exc:
        return 0, type(exc).__name__
    if reply.status_code != 200:
        return reply.status_code, reply.text
    return 200, str(reply.json()["outputs"][0]["data"][0])


@pytest.fixture
def served(tmp_path: Path):  # type: ignore[no-untyped-def]
    repo = _repository(tmp_path / "repo")
    serve = ServeProcess(str(repo), "--openai-port", "0")
    try:
        base = serve.wait_for(r"OpenAI\s+(http://127\.0\.0\.1:\d+/v1)").group(1)
        http = serve.wait_for(r"HTTP\s+(http://127\.0\.0\.1:\d+)").group(1)
        serve.wait_for("serving; press Ctrl-C")
        assert _ask(base) == (200, WORDS + " ") and _triton(http) == (200, "echo: hi")
        yield serve, repo, base, http
        assert serve.stop(signal.SIGINT) == 0, serve.output
    finally:
        serve.kill()


def _until_right(base: str, http: str, seen: list[tuple[int, str]]) -> bool:
    front, triton = _ask(base), _triton(http)
    seen += [front, triton]
    return front == (200, WORDS + " ") and triton == (200, "echo: hi")


def test_serve_reloads_a_python_stage_whose_stub_was_killed(served) -> None:  # type: ignore[no-untyped-def]
    serve, _, base, http = served
    (stub,) = stub_pids("echo_unary")
    kill([stub])
    serve.wait_for(rf"model 'echo_unary': its Python stub process {stub} died")
    seen: list[tuple[int, str]] = []
    assert wait_for(lambda: _until_right(base, http, seen), 120) is not None, seen
    serve.wait_for(r"model 'echo_unary': ready again after")
    assert stub_pids("echo_unary") and stub not in stub_pids("echo_unary")
    # straight to Triton, a model being reloaded is Triton's own 404 "no available versions"
    client_errors = [s for s in seen if 400 <= s[0] < 500 and "no available versions" not in s[1]]
    assert not client_errors, seen
    assert status(f"{http}/v2/health/ready") == 200


def test_serve_restarts_a_killed_tritonserver_and_the_front_recovers_by_itself(served) -> None:  # type: ignore[no-untyped-def]
    serve, repo, base, http = served
    ready = base.removesuffix("/v1") + "/health/ready"
    kill([tritonserver_pid(repo)])
    assert wait_for(lambda: status(ready) == 503, 60) is not None  # that it came, not how fast
    seen: list[tuple[int, str]] = [_ask(base)]  # 503 server_error, or right if Triton is back already
    assert seen[0] in ((503, "server_error"), (200, WORDS + " ")), seen
    serve.wait_for("tritonserver is serving again", timeout=120)
    assert wait_for(lambda: _until_right(base, http, seen), 60) is not None, seen
    # the front's readiness covers every model it served: the others may still be loading
    assert wait_for(lambda: status(ready) == 200, 60) is not None
    assert not [s for s in seen if 400 <= s[0] < 500], seen
    assert re.search(r"restart 1 of \d", serve.output)


def test_a_standalone_front_answers_503_while_triton_is_away_and_recovers_without_a_restart(
    tmp_path: Path,
) -> None:
    """`tritonkit openai` before a Triton that stops and starts again on the same ports (as the AKS
    pod's front does when Triton's container restarts): not ready and 503 + Retry-After meanwhile,
    right answers once Triton is back, the front never restarted."""
    import subprocess
    import sys

    repo = _repository(tmp_path / "repo")
    ports = {kind: free_port() for kind in ("http", "grpc", "metrics")}
    flags = [f"--{kind}-port={port}" for kind, port in ports.items()]
    serve = ServeProcess(str(repo), "--no-heal", *flags)
    front_port = free_port()
    base = f"http://127.0.0.1:{front_port}/v1"
    ready = f"http://127.0.0.1:{front_port}/health/ready"
    front = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tritonkit",
            "openai",
            f"grpc://127.0.0.1:{ports['grpc']}",
            "--port",
            str(front_port),
        ]
    )
    again = None
    try:
        serve.wait_for("serving; press Ctrl-C")
        assert wait_for(lambda: status(ready) == 200 or front.poll() is not None, 60) is not None
        assert _ask(base) == (200, WORDS + " ")
        assert serve.stop(signal.SIGINT) == 0, serve.output
        assert wait_for(lambda: status(ready) == 503, 60) is not None
        assert _ask(base) == (503, "server_error")  # with Retry-After (_ask says when it is missing)
        again = ServeProcess(str(repo), "--no-heal", *flags)
        again.wait_for("serving; press Ctrl-C")
        assert wait_for(lambda: status(ready) == 200, 60) is not None
        assert wait_for(lambda: _ask(base) == (200, WORDS + " "), 30) is not None
        assert front.poll() is None  # the same front process throughout
        assert again.stop(signal.SIGINT) == 0, again.output
    finally:
        front.send_signal(signal.SIGTERM)
        front.wait(timeout=60)
        serve.kill()
        if again is not None:
            again.kill()
