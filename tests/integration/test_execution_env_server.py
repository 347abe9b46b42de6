"""A real tritonserver loads a Python model through its packed environment (a local twin).

The model imports ``tkpacked``, a wheel written by this test that exists only in the packed
environment, never in the venv that runs the server; it also reports whether ``typer`` (which the
venv has) is visible, proving the stub does not see the venv's packages.
"""

from __future__ import annotations

import importlib.util
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.http as httpclient

from tests._wheels import write_wheel
from tritonkit.repository import build_spec

pytestmark = pytest.mark.integration

MODEL = textwrap.dedent(
    """
    import importlib.util

    import numpy as np
    import tkpacked
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            leaked = importlib.util.find_spec("typer") is not None
            out = []
            for request in requests:
                x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
                y = np.array([tkpacked.OFFSET + float(x[0]), float(leaked)], dtype=np.float32)
                out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", y)]))
            return out
    """
)


def test_server_loads_python_model_through_its_packed_env_when_import_is_only_packed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, triton_server_factory: Callable[..., Any]
) -> None:
    assert importlib.util.find_spec("tkpacked") is None  # not satisfiable from this venv
    wheels = tmp_path / "wheels"
    write_wheel(wheels, "tkpacked", "1.0", "py3-none-any", {"tkpacked/__init__.py": "OFFSET = 40.0\n"})
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))  # numpy for the local twin still comes from PyPI
    (tmp_path / "model.py").write_text(MODEL)
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        textwrap.dedent(
            """
            name: packed
            target: "24.10"
            models:
              - name: packed
                backend: python
                source: model.py
                requirements: [tkpacked]
                max_batch_size: 0
                inputs: [{name: X, data_type: FP32, dims: [1]}]
                outputs: [{name: Y, data_type: FP32, dims: [2]}]
                instance_group: [{kind: KIND_CPU, count: 1}]
            """
        )
    )
    repo = tmp_path / "repo"
    build_spec(spec, repo)
    server = triton_server_factory(repo, model_config_name=None)
    (twin,) = server.python_env_twins
    assert twin.model == "packed" and twin.target_python == "3.10" and twin.requirements == ("tkpacked",)

    client = httpclient.InferenceServerClient(server.http_address)
    x = httpclient.InferInput("X", [1], "FP32")
    x.set_data_from_numpy(np.array([2.0], dtype=np.float32))
    y = client.infer("packed", [x]).as_numpy("Y")
    assert y is not None
    assert y.tolist() == [42.0, 0.0]  # 40 from the packed wheel; the venv's typer was not visible
    # The user's repository still points at the production archive; only the server's shadow differs.
    assert "$$TRITON_MODEL_DIRECTORY/pyenv-py3.10-" in (repo / "packed" / "config.pbtxt").read_text()
