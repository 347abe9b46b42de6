"""`--engine docker`: the NGC tritonserver image. Skips when no Docker engine answers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

from tests.integration._server_repo import write_tiny_repository
from tritonkit.server.docker import DockerTritonServer, docker_available

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not docker_available(), reason="no Docker engine answers on this machine"),
]


def test_docker_server_answers_when_docker_runs(tmp_path: Path) -> None:
    repo = write_tiny_repository(tmp_path / "repo", models=("py_add",))
    with DockerTritonServer(repo, startup_timeout=600) as server:
        client = httpclient.InferenceServerClient(server.http_address)
        x = httpclient.InferInput("X", [1, 4], "FP32")
        x.set_data_from_numpy(np.zeros((1, 4), np.float32))
        np.testing.assert_array_equal(client.infer("py_add", [x]).as_numpy("Y"), np.ones((1, 4)))
        client.close()
