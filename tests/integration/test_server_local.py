"""LocalTritonServer against the real tritonserver binary, with a repository the tests write."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests.integration._server_repo import write_tiny_repository
from tritonkit.errors import ModelLoadError
from tritonkit.server import LocalTritonServer, _shm, gpu_present

pytestmark = pytest.mark.integration


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def processes_mentioning(text: str) -> list[int]:
    """PIDs of live processes whose command line contains ``text``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline and pid_alive(int(entry.name)):
            pids.append(int(entry.name))
    return pids


def wait_until(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


@pytest.fixture(scope="module")
def tiny_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_repository(tmp_path_factory.mktemp("tiny") / "repo")


@pytest.fixture(scope="module")
def tiny_server(tiny_repository: Path, triton_server_factory: Callable[..., Any]) -> Any:
    """Served with "auto" (which picks configs/cpu.pbtxt here); with a GPU present, "cpu" is named
    explicitly: the GPU config's TensorRT accelerator needs a native backend the wheel lacks."""
    return triton_server_factory(tiny_repository, model_config_name="cpu" if gpu_present() else "auto")


def mix_inputs(module: Any, x: np.ndarray, text: list[bytes], r: np.ndarray) -> list[Any]:
    batch = x.shape[0]
    inputs = [
        module.InferInput("X", [batch, 4], "FP32"),
        module.InferInput("T", [batch, 1], "BYTES"),
        module.InferInput("R", [batch, 4], "FP32"),
    ]
    inputs[0].set_data_from_numpy(x)
    inputs[1].set_data_from_numpy(np.array(text, dtype=np.object_).reshape(batch, 1))
    inputs[2].set_data_from_numpy(r)
    return inputs


def test_local_server_answers_over_http_when_models_are_python_and_onnx(tiny_server: Any) -> None:
    client = httpclient.InferenceServerClient(tiny_server.http_address)
    try:
        assert client.is_model_ready("py_add") and client.is_model_ready("onnx_mix")
        x = np.arange(8, dtype=np.float32).reshape(2, 4)
        add = httpclient.InferInput("X", [2, 4], "FP32")
        add.set_data_from_numpy(x)
        np.testing.assert_array_equal(client.infer("py_add", [add]).as_numpy("Y"), x + 1)

        r = np.arange(8, dtype=np.float32).reshape(2, 4)
        result = client.infer("onnx_mix", mix_inputs(httpclient, x, [b"hello", "ünï".encode()], r))
        np.testing.assert_array_equal(result.as_numpy("Y"), x * 2)
        assert result.as_numpy("T_OUT").reshape(-1).tolist() == [b"hello", "ünï".encode()]
        np.testing.assert_array_equal(result.as_numpy("R_SUM"), r.reshape(2, 2, 2).sum(axis=2))
    finally:
        client.close()


def test_local_server_answers_over_grpc_when_models_are_python_and_onnx(tiny_server: Any) -> None:
    client = grpcclient.InferenceServerClient(tiny_server.grpc_address)
    try:
        x = np.full((1, 4), 3.0, dtype=np.float32)
        add = grpcclient.InferInput("X", [1, 4], "FP32")
        add.set_data_from_numpy(x)
        np.testing.assert_array_equal(client.infer("py_add", [add]).as_numpy("Y"), x + 1)
        result = client.infer(
            "onnx_mix",
            mix_inputs(grpcclient, x, [b"q"], np.ones((1, 4), np.float32)),
            outputs=[grpcclient.InferRequestedOutput("Y")],
        )
        np.testing.assert_array_equal(result.as_numpy("Y"), x * 2)
        assert result.as_numpy("T_OUT") is None  # only the requested output comes back
    finally:
        client.close()


def test_local_server_loads_the_cpu_variant_when_no_gpu_is_present(tiny_server: Any) -> None:
    if gpu_present():
        pytest.skip("a GPU is present: 'auto' keeps each model's config.pbtxt")
    assert tiny_server.model_config_name == "cpu"
    client = httpclient.InferenceServerClient(tiny_server.http_address)
    try:
        mix = client.get_model_config("onnx_mix")
        plain = client.get_model_config("py_add")  # has no configs/cpu.pbtxt: config.pbtxt is used
    finally:
        client.close()
    assert [g["kind"] for g in mix["instance_group"]] == ["KIND_CPU"]
    assert not mix["optimization"].get("execution_accelerators", {}).get("gpu_execution_accelerator")
    assert plain["instance_group"][0]["kind"] == "KIND_CPU"


def test_onnxruntime_backend_batches_requests_together_when_they_arrive_concurrently(
    tiny_server: Any,
) -> None:
    """The dynamic batcher's requests run as one onnxruntime call and split back correctly."""
    client = httpclient.InferenceServerClient(tiny_server.http_address, concurrency=12)
    try:
        before = client.get_inference_statistics("onnx_mix")["model_stats"][0]
        sizes = [1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3]
        requests = [
            (np.full((n, 4), i, np.float32), [f"r{i}-{j}".encode() for j in range(n)])
            for i, n in enumerate(sizes)
        ]
        pending = [client.async_infer("onnx_mix", mix_inputs(httpclient, x, text, x)) for x, text in requests]
        results = [p.get_result() for p in pending]
        for (x, text), result in zip(requests, results, strict=True):
            np.testing.assert_array_equal(result.as_numpy("Y"), x * 2)
            assert result.as_numpy("T_OUT").reshape(-1).tolist() == text
        after = client.get_inference_statistics("onnx_mix")["model_stats"][0]
    finally:
        client.close()
    inferences = after["inference_count"] - before["inference_count"]
    executions = after["execution_count"] - before["execution_count"]
    assert inferences == sum(sizes)
    assert executions < len(sizes), f"{len(sizes)} requests ran in {executions} executions: no batching"


def test_local_server_raises_model_load_error_naming_the_model_when_one_is_broken(
    tmp_path: Path,
) -> None:
    repo = write_tiny_repository(tmp_path / "repo", models=("py_add", "broken"))
    server = LocalTritonServer(repo)
    with pytest.raises(ModelLoadError) as caught:
        server.start()
    assert caught.value.model == "broken"
    assert "this model is broken on purpose" in caught.value.reason
    assert "broken" in str(caught.value)
    assert not server.running
    assert wait_until(lambda: not processes_mentioning(str(repo)), 10)
    assert "failed to load 'broken'" in server.logs()


def test_local_server_names_models_rejected_before_loading_when_an_ensemble_lacks_a_member(
    tmp_path: Path,
) -> None:
    """Triton rejects these while resolving the repository: they never reach its model index."""
    repo = write_tiny_repository(tmp_path / "repo", models=("py_add",))
    (repo / "ens" / "1").mkdir(parents=True)
    (repo / "ens" / "config.pbtxt").write_text(
        textwrap.dedent(
            """\
            name: "ens"
            platform: "ensemble"
            max_batch_size: 0
            input { name: "IN" data_type: TYPE_FP32 dims: [4] }
            output { name: "OUT" data_type: TYPE_FP32 dims: [4] }
            ensemble_scheduling {
              step {
                model_name: "not_in_repo"
                model_version: -1
                input_map { key: "X" value: "IN" }
                output_map { key: "Y" value: "OUT" }
              }
            }
            """
        )
    )
    (repo / "nover").mkdir()
    (repo / "nover" / "config.pbtxt").write_text('name: "nover"\nbackend: "python"\n')
    server = LocalTritonServer(repo, startup_timeout=60)
    # a start that waited for readiness that could never come would end in a ServerError at the
    # startup timeout ("never became ready"), not in the refused models' ModelLoadError
    with pytest.raises(ModelLoadError) as caught:
        server.start()
    failures = caught.value.failures  # type: ignore[attr-defined]
    assert "not_in_repo" in failures["ens"]
    assert "at least one version" in failures["nover"]
    assert not server.running


def test_local_server_keeps_its_ports_when_restarted(tmp_path: Path) -> None:
    repo = write_tiny_repository(tmp_path / "repo", models=("onnx_plain", "onnx_auto"))
    with LocalTritonServer(repo) as server:
        urls = (server.http_url, server.grpc_url, server.metrics_url)
        first_pid = server.pid
        server.restart()
        assert (server.http_url, server.grpc_url, server.metrics_url) == urls
        assert server.pid != first_pid
        client = httpclient.InferenceServerClient(server.http_address)
        try:
            x = httpclient.InferInput("X", [2, 4], "FP32")
            x.set_data_from_numpy(np.ones((2, 4), np.float32))
            np.testing.assert_array_equal(client.infer("onnx_plain", [x]).as_numpy("Y"), np.full((2, 4), 2.0))
            # A config naming no tensors is completed from the ONNX graph, as Triton's own backend does.
            auto = client.get_model_config("onnx_auto")
            inputs = [(t["name"], t["data_type"], t["dims"]) for t in auto["input"]]
            assert inputs == [("X", "TYPE_FP32", [2, 4])]
            assert [(t["name"], t["dims"]) for t in auto["output"]] == [("Y", [2, 4])]
            np.testing.assert_array_equal(client.infer("onnx_auto", [x]).as_numpy("Y"), np.full((2, 4), 2.0))
        finally:
            client.close()
        assert server.logs().count("Started HTTPService") == 2
    assert not server.running
    assert wait_until(lambda: not processes_mentioning(str(repo)), 10)


def test_local_server_dies_when_its_parent_is_killed(tmp_path: Path) -> None:
    repo = write_tiny_repository(tmp_path / "repo", models=("onnx_plain",))
    parent_code = textwrap.dedent(
        f"""
        import sys, time
        from tritonkit.server import LocalTritonServer, _shm, gpu_present
        server = LocalTritonServer({str(repo)!r}).start()
        print(server.pid, flush=True)
        time.sleep(600)
        """
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", parent_code], stdout=subprocess.PIPE, text=True, cwd=os.getcwd()
    )
    try:
        assert parent.stdout is not None
        server_pid = int(parent.stdout.readline())
        assert pid_alive(server_pid)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
    assert wait_until(lambda: not pid_alive(server_pid), 15), "tritonserver outlived its parent"
    assert wait_until(lambda: not processes_mentioning(str(repo)), 15)
    # Nobody stopped it cleanly: its shared-memory regions are swept by the next start's sweep.
    regions = f"tritonkit_{parent.pid}_"
    left = [p.name for p in _shm.SHM_DIR.glob(f"{regions}*")]
    _shm.sweep_stale_regions()
    assert not list(_shm.SHM_DIR.glob(f"{regions}*")), f"left in /dev/shm: {left}"
