"""`tritonkit serve` as users run it: a foreground process stopped by SIGINT or SIGTERM."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests.integration._server_repo import write_tiny_repository
from tests.integration.test_server_local import processes_mentioning, wait_until

pytestmark = pytest.mark.integration

SECRET = "s3cr3t-value-never-printed"


class ServeProcess:
    """`python -m tritonkit serve ...` with its output collected by a reader thread."""

    def __init__(self, *args: str, verb: str = "serve") -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tritonkit", verb, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_for(self, pattern: str, timeout: float = 120) -> re.Match[str]:
        found: list[re.Match[str]] = []

        def seen() -> bool:
            match = re.search(pattern, self.output)
            if match:
                found.append(match)
            return bool(match) or self.process.poll() is not None

        wait_until(seen, timeout)
        assert found, f"never printed {pattern!r}; output:\n{self.output}"
        return found[0]

    def stop(self, sig: int) -> int:
        self.process.send_signal(sig)
        code = self.process.wait(timeout=60)
        self._reader.join(timeout=5)
        return code

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_serve_cli_serves_then_stops_cleanly_when_signalled(tmp_path: Path, sig: int) -> None:
    repo = write_tiny_repository(tmp_path / "repo", models=("onnx_plain",))
    serve = ServeProcess(str(repo), f"--http-restricted-api=model-repository:admin-key={SECRET}")
    try:
        http_url = serve.wait_for(r"HTTP\s+http://(127\.0\.0\.1:\d+)").group(1)
        grpc_url = serve.wait_for(r"gRPC\s+grpc://(127\.0\.0\.1:\d+)").group(1)
        serve.wait_for(r"onnx_plain\s.*READY")
        serve.wait_for("serving; press Ctrl-C")
        x = np.ones((2, 4), np.float32)
        http = httpclient.InferenceServerClient(http_url)
        grpc = grpcclient.InferenceServerClient(grpc_url)
        try:
            inp = httpclient.InferInput("X", [2, 4], "FP32")
            inp.set_data_from_numpy(x)
            np.testing.assert_array_equal(http.infer("onnx_plain", [inp]).as_numpy("Y"), x * 2)
            ginp = grpcclient.InferInput("X", [2, 4], "FP32")
            ginp.set_data_from_numpy(x)
            np.testing.assert_array_equal(grpc.infer("onnx_plain", [ginp]).as_numpy("Y"), x * 2)
        finally:
            http.close()
            grpc.close()
        code = serve.stop(sig)
    finally:
        serve.kill()
    assert code == 0, serve.output
    assert f"tritonserver stopped ({signal.Signals(sig).name})" in serve.output
    assert SECRET not in serve.output
    assert wait_until(lambda: not processes_mentioning(str(repo)), 10), "tritonserver left behind"


def test_serve_cli_exits_1_naming_the_model_when_a_model_fails_to_load(tmp_path: Path) -> None:
    repo = write_tiny_repository(tmp_path / "repo", models=("broken",))
    result = subprocess.run(
        [sys.executable, "-m", "tritonkit", "serve", str(repo)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 1
    assert "Triton failed to load model 'broken'" in result.stderr
    assert "this model is broken on purpose" in result.stderr
    assert "Traceback (most recent call last)" not in result.stderr
    assert not processes_mentioning(str(repo))


ENSEMBLE_FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "validator" / "base"


def _refused_ensemble(repo: Path, name: str, *, max_batch_size: int, first_version: str) -> None:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "config.pbtxt").write_text(
        f'name: "{name}"\nplatform: "ensemble"\nmax_batch_size: {max_batch_size}\n'
        'input { name: "IN" data_type: TYPE_FP32 dims: [4] }\n'
        'output { name: "OUT" data_type: TYPE_FP32 dims: [4] }\n'
        "ensemble_scheduling {\n"
        f'  step {{ model_name: "onnx_m" {first_version} input_map {{ key: "x" value: "IN" }} '
        'output_map { key: "y" value: "mid" } }\n'
        '  step { model_name: "py_m" model_version: -1 input_map { key: "INPUT0" value: "mid" } '
        'output_map { key: "OUTPUT0" value: "OUT" } }\n}\n'
    )


def test_serve_cli_exits_1_naming_every_refused_ensemble_when_several_fail_their_checks(
    tmp_path: Path,
) -> None:
    """Triton refuses these before loading (no state in the index): one step asks for version 0
    (model_version unset), the other ensemble allows a larger batch than its member."""
    repo = tmp_path / "repo"
    for member in ("onnx_m", "py_m"):
        shutil.copytree(ENSEMBLE_FIXTURES / member, repo / member)
    _refused_ensemble(repo, "ens_version0", max_batch_size=8, first_version="")
    _refused_ensemble(repo, "ens_too_big", max_batch_size=16, first_version="model_version: -1")
    result = subprocess.run(
        [sys.executable, "-m", "tritonkit", "serve", str(repo), "--model-config-name", ""],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "'ens_version0' depends on 'onnx_m' whose required version 0 is not loaded" in result.stderr
    assert "ensemble ens_too_big allows maximum batch size 16" in result.stderr
    assert "Traceback (most recent call last)" not in result.stderr
    assert not processes_mentioning(str(repo))
