"""A BLS typo on the real tritonserver 2.51: it loads and reports ready, then fails the first request.

That is why ``tritonkit validate`` checks the names BLS calls use (bls-model-unknown): Triton's
own load does not. Since Triton loads the model, the finding is a warning (``--strict`` makes it
an error). The same repository with the name fixed serves the request.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from tritonkit.client import TritonClient
from tritonkit.errors import TritonKitError
from tritonkit.repository import validate_repository
from tritonkit.server import LocalTritonServer

CONFIG = textwrap.dedent(
    """\
    name: "{name}"
    backend: "python"
    max_batch_size: 0
    input [{{ name: "X" data_type: TYPE_FP32 dims: [2] }}]
    output [{{ name: "Y" data_type: TYPE_FP32 dims: [2] }}]
    instance_group [{{ kind: KIND_CPU count: 1 }}]
    """
)
DOUBLE = textwrap.dedent(
    """\
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            out = []
            for request in requests:
                x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
                out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x * 2)]))
            return out
    """
)
FRONT = textwrap.dedent(
    """\
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            out = []
            for request in requests:
                x = pb_utils.get_input_tensor_by_name(request, "X")
                call = pb_utils.InferenceRequest(
                    model_name="{callee}", inputs=[x], requested_output_names=["Y"]
                )
                response = call.exec()
                if response.has_error():
                    out.append(pb_utils.InferenceResponse(error=response.error()))
                    continue
                y = pb_utils.get_output_tensor_by_name(response, "Y")
                out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", y.as_numpy())]))
            return out
    """
)


def write_repo(repo: Path, callee: str) -> None:
    for name, source in (("double", DOUBLE), ("front", FRONT.format(callee=callee))):
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(CONFIG.format(name=name))
        (repo / name / "1" / "model.py").write_text(source)


@pytest.mark.integration
def test_bls_typo_loads_on_triton_and_fails_only_at_the_first_request_while_validate_finds_it(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    write_repo(repo, "doubel")
    report = validate_repository(repo)
    [problem] = report.warnings
    assert (problem.code, problem.line) == ("bls-model-unknown", 8)
    assert report.valid and [p.code for p in report.strict().errors] == ["bls-model-unknown"]

    x = np.array([1.0, 2.0], dtype=np.float32)
    with LocalTritonServer(repo, startup_timeout=240) as server:
        assert {m["name"]: m.get("state") for m in server.repository_index()} == {
            "double": "READY",
            "front": "READY",
        }
        with TritonClient(server.http_url) as client:
            with pytest.raises(TritonKitError) as caught:
                client.infer("front", X=x)
            assert "doubel" in str(caught.value)

            # the fixed name serves
            (repo / "front" / "1" / "model.py").write_text(FRONT.format(callee="double"))
    assert validate_repository(repo).valid
    with LocalTritonServer(repo, startup_timeout=240) as server, TritonClient(server.http_url) as client:
        np.testing.assert_array_equal(client.infer("front", X=x)["Y"], x * 2)
