"""`tritonkit heal URL`'s loop against a fake Triton over real HTTP (no tritonserver).

The real server with a killed stub and an unloaded model: tests/integration/test_faults_heal_sidecar.py.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tritonkit.server._remote_heal import RemoteTriton, find_tritonserver, run_healer


class FakeTriton:
    """Health, the repository index and load/unload; every request's admin header is recorded."""

    def __init__(self) -> None:
        self.states = {"llm": "READY"}
        self.live = True
        self.headers: list[str | None] = []
        self.loads: list[str] = []
        #: the engine behind "llm" died: its generate answers as tritonkit's vllm backend does then
        self.engine_dead = False
        self.probes = 0
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _send(self, code: int, body: Any = None) -> None:
                data = json.dumps(body if body is not None else {}).encode()
                self.send_response(code)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                ready = all(s == "READY" for s in fake.states.values())
                if self.path == "/v2/health/live":
                    self._send(200 if fake.live else 503)
                elif self.path == "/v2/health/ready":
                    self._send(200 if fake.live and ready else 503)
                else:
                    text = {"data_type": "TYPE_STRING", "dims": [1]}
                    self._send(
                        200,
                        {
                            "name": self.path.split("/")[3],
                            "platform": "python",
                            "input": [{"name": "text_input", **text}],
                            "output": [{"name": "text_output", **text}],
                        },
                    )

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("content-length") or 0))
                fake.headers.append(self.headers.get("triton-admin-key"))
                if self.path.endswith("/generate"):
                    fake.probes += 1
                    if fake.engine_dead:
                        why = "model 'llm' is unavailable: its vLLM engine died (process gone)"
                        self._send(400, {"error": why})  # generate says 400 for every model error
                    else:
                        self._send(200, {"text_output": "pong"})
                    return
                if self.path == "/v2/repository/index":
                    self._send(200, [{"name": n, "version": "1", "state": s} for n, s in fake.states.items()])
                    return
                model, action = self.path.split("/")[4:6]
                if action == "load":
                    fake.loads.append(model)
                    fake.engine_dead = False
                fake.states[model] = "READY" if action == "load" else "UNAVAILABLE"
                self._send(200)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                return

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def fake() -> Iterator[FakeTriton]:
    triton = FakeTriton()
    yield triton
    triton.server.shutdown()


def wait_for(condition: Callable[[], bool], timeout: float) -> float | None:
    """Seconds until ``condition`` held, or None."""
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        if condition():
            return time.monotonic() - began
        time.sleep(0.02)
    return None


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_heal_reloads_a_model_unloaded_behind_its_back_sending_the_admin_header(fake: FakeTriton) -> None:
    server = RemoteTriton(fake.url, headers={"triton-admin-key": "k3y"}, find_pid=lambda port: None)
    stop = threading.Event()
    lines: list[str] = []
    port = _free_port()
    thread = threading.Thread(
        target=run_healer,
        args=(server, stop),
        kwargs={"say": lines.append, "warn": lines.append, "port": port, "period": 0.05},
        daemon=True,
    )
    thread.start()
    try:
        assert wait_for(lambda: any("healing the models" in line for line in lines), 10) is not None
        assert "processes are not visible" in lines[0]
        assert httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200
        assert httpx.get(f"http://127.0.0.1:{port}/other").status_code == 404
        fake.states["llm"] = "UNAVAILABLE"  # NVIDIA's vllm backend unloaded it: its engine failed
        assert wait_for(lambda: fake.loads == ["llm"] and fake.states["llm"] == "READY", 10) is not None
        assert any("model 'llm' is down (UNAVAILABLE)" in line for line in lines)
        assert set(fake.headers) == {"k3y"}  # every repository call carried the admin key
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()


def test_heal_probe_sees_a_dead_engine_with_no_request_in_flight_and_reloads_it(fake: FakeTriton) -> None:
    """What NVIDIA's vllm backend leaves unseen until a request comes: the model READY, its engine
    dead. The healer's own one-token probe is refused, so it reloads the model itself."""
    server = RemoteTriton(fake.url, find_pid=lambda port: None)
    stop = threading.Event()
    lines: list[str] = []
    kwargs = {"say": lines.append, "warn": lines.append, "period": 0.05, "probe_period": 0.05}
    thread = threading.Thread(target=run_healer, args=(server, stop), kwargs=kwargs, daemon=True)
    thread.start()
    try:
        assert wait_for(lambda: fake.probes >= 2, 10) is not None  # probed, and alive: nothing done
        assert fake.loads == []
        fake.engine_dead = True
        assert wait_for(lambda: fake.loads == ["llm"], 10) is not None
        assert any(
            "model 'llm': the healer's probe was refused (model 'llm' is unavailable: its vLLM engine died"
            in line
            for line in lines
        ), lines
        probes = fake.probes
        assert wait_for(lambda: fake.probes > probes, 10) is not None  # probed again once back
        assert fake.loads == ["llm"]  # alive again: no second reload
    finally:
        stop.set()
        thread.join(10)


def test_heal_looks_anew_after_the_server_went_away_and_came_back(fake: FakeTriton) -> None:
    server = RemoteTriton(fake.url, find_pid=lambda port: None)
    stop = threading.Event()
    lines: list[str] = []
    kwargs = {"say": lines.append, "warn": lines.append, "period": 0.05}
    thread = threading.Thread(target=run_healer, args=(server, stop), kwargs=kwargs, daemon=True)
    thread.start()
    try:
        assert wait_for(lambda: sum("healing the models" in line for line in lines) == 1, 10) is not None
        fake.live = False
        assert wait_for(lambda: any("went away" in line for line in lines), 10) is not None
        fake.live = True
        assert wait_for(lambda: sum("healing the models" in line for line in lines) == 2, 10) is not None
        assert fake.loads == []  # a restarted server loaded its models itself
    finally:
        stop.set()
        thread.join(10)


def _proc(root: Path, pid: int, argv: list[str]) -> None:
    (root / str(pid)).mkdir()
    (root / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")


def test_find_tritonserver_picks_the_one_serving_the_port_when_several_run(tmp_path: Path) -> None:
    assert find_tritonserver(8000, proc=tmp_path) is None
    _proc(tmp_path, 10, ["/opt/tritonserver/bin/tritonserver", "--http-port=8000"])
    _proc(tmp_path, 11, ["python3", "tritonserver.py"])
    (tmp_path / "self").mkdir()
    assert find_tritonserver(None, proc=tmp_path) == 10
    _proc(tmp_path, 12, ["tritonserver", "--http-port=9000"])
    assert find_tritonserver(None, proc=tmp_path) is None  # two, and no port to tell them apart
    assert find_tritonserver(9000, proc=tmp_path) == 12


def test_remote_triton_loads_over_grpc_where_given_with_the_same_admin_header() -> None:
    """An HTTP load holds every HTTP request to Triton 2.51 until it ends: the healer loads over
    gRPC where it knows the port (the AKS container passes --grpc 127.0.0.1:8001)."""
    headers = {"triton-admin-key": "k3y"}
    assert RemoteTriton("http://127.0.0.1:8000", headers=headers).control_grpc() is None
    over_grpc = RemoteTriton("http://127.0.0.1:8000", headers=headers, grpc_address="127.0.0.1:8001")
    assert over_grpc.control_grpc() == ("127.0.0.1:8001", headers)
