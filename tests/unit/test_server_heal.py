"""serve's healer against a fake server: what it reloads, in which order, how often (no Triton).

What it does against the real tritonserver (a killed stub, a killed engine) is in
tests/integration/test_faults_python.py and test_faults_llm.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tritonkit.server._heal import Healer, model_of_instance, stub_processes


class FakeServer:
    """A repository index to edit and a log of the load/unload calls (load answers ``load_status``)."""

    pid = None  # a container: no stubs to look at
    running = True
    startup_timeout = 10.0

    def __init__(self, states: dict[str, str], ensembles: tuple[str, ...] = ()) -> None:
        self.states = dict(states)
        self.ensembles = ensembles
        self.calls: list[tuple[str, str]] = []
        self.load_status = 200

    def repository_index(self) -> list[dict[str, Any]]:
        return [{"name": n, "version": "1", "state": s} for n, s in self.states.items()]

    def control_model(self, action: str, model: str, *, timeout: float) -> tuple[int, str]:
        self.calls.append((action, model))
        if action == "load" and self.load_status == 200:
            self.states[model] = "READY"
            for ensemble in self.ensembles:
                self.states[ensemble] = "READY"
        return self.load_status, "" if self.load_status == 200 else "engine would not start"

    def _request(self, method: str, path: str) -> tuple[int, bytes]:
        name = path.split("/")[3]
        platform = "ensemble" if name in self.ensembles else "python"
        return 200, f'{{"name": "{name}", "platform": "{platform}"}}'.encode()


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _healer(server: FakeServer, clock: Clock, lines: list[str], **kwargs: Any) -> Healer:
    healer = Healer(server, say=lines.append, warn=lambda m: lines.append("WARN " + m), clock=clock, **kwargs)
    healer.baseline()
    return healer


def test_healer_reloads_the_composing_model_first_which_brings_its_ensemble_back() -> None:
    server = FakeServer({"llm": "READY", "pipeline": "READY"}, ensembles=("pipeline",))
    lines: list[str] = []
    healer = _healer(server, Clock(), lines)
    server.states.update(llm="UNAVAILABLE", pipeline="UNAVAILABLE")
    healer.poll()
    assert server.calls == [("load", "llm")]
    healer.poll()
    assert server.calls == [("load", "llm")] and server.states == {"llm": "READY", "pipeline": "READY"}
    assert any("model 'llm' is down" in line for line in lines)
    assert any("model 'llm': ready again" in line for line in lines)


def test_healer_leaves_models_that_are_loading_or_never_were_ready_alone() -> None:
    server = FakeServer({"a": "READY", "broken": "UNAVAILABLE"})
    healer = _healer(server, Clock(), [])
    server.states["a"] = "LOADING"
    healer.poll()
    assert server.calls == []


def test_healer_backs_off_after_a_failed_reload_and_gives_up_at_its_limit() -> None:
    server = FakeServer({"llm": "READY"})
    server.load_status = 400
    clock = Clock()
    lines: list[str] = []
    healer = _healer(server, clock, lines, max_reloads=3, window=600.0)
    server.states["llm"] = "UNAVAILABLE"
    healer.poll()
    healer.poll()  # within the 1 s backoff: no second try
    assert server.calls == [("load", "llm")]
    tries = [0.0]
    for step in (1.0, 2.0, 4.0, 8.0):
        clock.now += step
        healer.poll()
        tries.append(clock.now)
    assert server.calls == [("load", "llm")] * 3  # the limit: 3 reloads in the window
    assert any(line.startswith("WARN") and "giving up" in line for line in lines)
    assert any("next try in 2 s" in line for line in lines)


def test_healer_counts_only_reloads_inside_its_window() -> None:
    server = FakeServer({"llm": "READY"})
    clock = Clock()
    healer = _healer(server, clock, [], max_reloads=2, window=60.0)
    for _ in range(4):
        server.states["llm"] = "UNAVAILABLE"
        clock.now += 61.0
        healer.poll()
    assert server.calls == [("load", "llm")] * 4


def test_model_of_instance_takes_the_longest_model_name_the_instance_starts_with() -> None:
    models = {"echo", "echo_stream", "llm"}
    assert model_of_instance("echo_stream_0_0", models) == "echo_stream"
    assert model_of_instance("echo_0_1", models) == "echo"
    assert model_of_instance("other_0_0", models) is None


def test_stub_processes_lists_the_stubs_of_one_server_only(tmp_path: Path) -> None:
    def process(pid: int, argv: list[str], state: str = "S") -> None:
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
        (tmp_path / str(pid) / "stat").write_text(f"{pid} (x) {state} 1")

    stub = "/b/python/triton_python_backend_stub"
    process(10, [stub, "/r/a/1/model.py", "shm", "1", "1", "7", "/b", "3", "a_0_0", "DEFAULT", ""])
    process(
        11, [stub, "/r/b/1/model.py", "shm", "1", "1", "8", "/b", "3", "b_0_0", "DEFAULT", ""]
    )  # another server
    process(12, [stub, "/r/c/1/model.py", "shm", "1", "1", "7", "/b", "3", "c_0_0", "DEFAULT", ""], "Z")
    process(13, ["/usr/bin/python", "x"])
    assert stub_processes(7, tmp_path) == {10: "a_0_0"}


def test_dead_engines_reads_the_vllm_backends_alive_gauge_from_tritons_metrics() -> None:
    from tritonkit.server._heal import dead_engines

    text = (
        "# HELP tritonkit_engine_alive 1 while the vLLM engine runs, 0 after\n"
        "# TYPE tritonkit_engine_alive gauge\n"
        'tritonkit_engine_alive{instance="llm_0_0",model="llm"} 0\n'
        'tritonkit_engine_alive{instance="chat_0_0",model="chat"} 1\n'
        'tritonkit_generation_active{instance="x_0_0",model="x"} 0\n'
    )
    assert dead_engines(text) == {"llm"}
