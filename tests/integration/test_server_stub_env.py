"""The real launcher refuses a Python stage whose stub environment has numpy 2, before serving.

Measured without the guard (issue #33): with numpy 2 first on the server's PATH, tritonserver
2.51 said ready and every request answered "output tensor shape does not match size of
output". The environment here is a real venv whose numpy is a stand-in reporting 2.1.0 (real
numpy 2 would need the network); the launcher reads only its version.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.integration._server_repo import write_tiny_repository
from tests.unit.test_server_stub_env import make_env
from tritonkit.errors import StubEnvironmentError
from tritonkit.server import LocalTritonServer

pytestmark = pytest.mark.integration


def test_local_server_refuses_to_start_when_the_stub_python_has_numpy_2(tmp_path: Path) -> None:
    repo = write_tiny_repository(tmp_path / "repo", models=("py_add",))
    env = make_env(tmp_path / "numpy2-env", "2.1.0")
    server = LocalTritonServer(
        repo, model_config_name="cpu", env={"PATH": f"{env / 'bin'}:{os.environ.get('PATH', '')}"}
    )
    with pytest.raises(StubEnvironmentError) as caught:
        server.start()
    message = str(caught.value)
    assert "numpy 2.1.0" in message and "models py_add" in message and str(env / "bin" / "python3") in message
    assert f"{env / 'bin' / 'pip'} install 'numpy>=1.24,<2'" in (caught.value.hint or "")
    assert not server.running and server.pid is None  # refused before any tritonserver ran
    server.stop()
