"""What the fault tests and benchmarks/chaos.py share: finding processes, and asking every layer.

A fault test kills a process (an engine, a stub, the server) and then waits on *state* (what
readiness answers, what a request gets back), never on a sleep; each probe here asks once.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.integration.test_server_local import processes_mentioning


def engine_core_pids(under: int | None = None) -> list[int]:
    """vLLM engine processes (their title is VLLM::EngineCore); with ``under``, only those that
    descend from that pid (a full run has other modules' servers and engines alive beside it)."""
    pids = processes_mentioning("EngineCore")
    return pids if under is None else [p for p in pids if descends_from(p, under)]


def descends_from(pid: int, ancestor: int) -> bool:
    while pid > 1:
        if pid == ancestor:
            return True
        try:  # the field after the state: the parent's pid
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            return False
    return False


def freeze(pids: list[int]) -> list[int]:
    """SIGSTOP every pid: the process stops where it is (a later SIGKILL still ends it)."""
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    return pids


def stub_pids(model: str) -> list[int]:
    """The Python backend stubs serving ``model`` (its instances are named ``<model>_<n>_<m>``)."""
    return [p for p in processes_mentioning("triton_python_backend_stub") if _instance_of(p, model)]


def _instance_of(pid: int, model: str) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return len(argv) > 8 and argv[8].decode(errors="replace").startswith(model + "_")


def tritonserver_pid(repository: Path) -> int:
    """The tritonserver serving ``repository`` (a shadow copy of it is named by the same path)."""
    servers = [
        p
        for p in processes_mentioning("--model-repository=")
        if Path(f"/proc/{p}/exe").exists() and _exe_name(p) == "tritonserver"
    ]
    # other modules' servers (module and session fixtures) may be running beside it in a full run
    own = [p for p in servers if p in processes_mentioning(f"--model-repository={repository}")]
    pids = own or servers
    assert len(pids) == 1, f"expected one tritonserver, found {pids}"
    return pids[0]


def _exe_name(pid: int) -> str:
    try:
        return Path(os.readlink(f"/proc/{pid}/exe")).name
    except OSError:
        return ""


def kill(pids: list[int]) -> float:
    """SIGKILL every pid (as the kernel's out-of-memory killer does); the monotonic time of the kill."""
    assert pids, "nothing to kill"
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    return time.monotonic()


def wait_for(condition: Callable[[], bool], timeout: float, period: float = 0.1) -> float | None:
    """Seconds until ``condition`` held (None: it never did within ``timeout``)."""
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        if condition():
            return time.monotonic() - began
        time.sleep(period)
    return None


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def status(url: str, timeout: float = 3.0) -> int:
    """The HTTP status of GET ``url`` (0: no answer)."""
    try:
        return httpx.get(url, timeout=timeout).status_code
    except httpx.HTTPError:
        return 0


@dataclass
class Sse:
    """One streamed completion through the front: its text pieces and how it ended."""

    pieces: list[str] = field(default_factory=list)
    error: dict[str, Any] | None = None
    done: bool = False
    status: int = 0


def stream_completion(
    base: str, body: dict[str, Any], *, on_piece: Callable[[Sse], None] | None = None
) -> Sse:
    """POST a streamed /v1/completions and read it to its end (pieces, an error event, [DONE])."""
    out = Sse()
    with httpx.stream("POST", f"{base}/completions", json={**body, "stream": True}, timeout=120) as reply:
        out.status = reply.status_code
        if reply.status_code != 200:
            reply.read()
            out.error = reply.json().get("error")
            return out
        for line in reply.iter_lines():
            if not line.startswith("data: "):
                continue
            data = line[len("data: ") :]
            if data == "[DONE]":
                out.done = True
                break
            event = json.loads(data)
            if "error" in event:
                out.error = event["error"]
                break
            out.pieces += [c.get("text", "") for c in event.get("choices", [])]
            if on_piece is not None:
                on_piece(out)
    return out


def triton_generate(
    grpc_address: str, model: str, prompt: str, sampling: dict[str, Any]
) -> tuple[str, str | None]:
    """One streamed request straight to a vLLM stage over gRPC: (text, the error message or None)."""
    import numpy as np
    import tritonclient.grpc as grpcclient

    def tensor(name: str, value: Any, datatype: str) -> Any:
        array = np.array([value], dtype=np.object_ if datatype == "BYTES" else bool)
        item = grpcclient.InferInput(name, [1], datatype)
        item.set_data_from_numpy(array)
        return item

    inputs = [
        tensor("text_input", prompt.encode(), "BYTES"),
        tensor("stream", True, "BOOL"),
        tensor("sampling_parameters", json.dumps(sampling).encode(), "BYTES"),
        tensor("exclude_input_in_output", True, "BOOL"),
    ]
    texts: list[str] = []
    errors: list[str] = []
    finished = __import__("threading").Event()

    def on_response(result: Any, error: Any) -> None:
        if error is not None:
            errors.append(str(error.message() if hasattr(error, "message") else error))
            finished.set()
            return
        response = result.get_response()
        output = result.as_numpy("text_output")
        if output is not None:
            texts.extend(v.decode("utf-8", "replace") for v in output.reshape(-1))
        if (
            response.parameters.get("triton_final_response")
            and response.parameters["triton_final_response"].bool_param
        ):
            finished.set()

    client = grpcclient.InferenceServerClient(grpc_address)
    try:
        client.start_stream(callback=on_response)
        client.async_stream_infer(model, inputs, enable_empty_final_response=True)
        finished.wait(60)
        client.stop_stream()
    except Exception as exc:  # noqa: BLE001 - a server that is gone: that is the answer
        return "", str(exc)
    finally:
        client.close()
    return "".join(texts), (
        errors[0] if errors else None if finished.is_set() else "no final response in 60 s"
    )
