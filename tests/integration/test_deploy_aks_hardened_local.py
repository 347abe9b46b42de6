"""The hardened AKS pod spec, run where this box allows: `tritonkit serve` on a real tritonserver as
the pod's non-root UID/GID, with a read-only root filesystem, the model repository read-only, and
only the pod's declared writable mounts writable (``/tmp``, a memory-backed ``/dev/shm``).

The namespace is tests/integration/_hardened.py's (benchmarks/hardened_local.py runs the vLLM
stage in the same one): ``unshare -m`` re-mounts ``/`` read-only, binds the repository read-only
at ``/mnt/models``, a directory of the test's onto ``/tmp`` (so what was written there can be read
afterwards) and a fresh tmpfs onto ``/dev/shm``; ``setpriv`` drops to UID/GID 10001 with no
capabilities and no-new-privs. It needs root (to mount) and util-linux; without them it is skipped.

Not the pod itself: no container runtime, seccomp profile or cgroup limits here, and the Triton
binary is pytriton's build, not NVIDIA's image (docs/deploy.md says what only a cluster shows).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

from tests.integration._hardened import (
    MODELS,
    can_run,
    checkout_reachable,
    hardened_serve,
    make_read_only_repository,
    make_writable_tmp,
    mount_options,
)
from tests.integration._server_repo import write_tiny_repository
from tritonkit.deploy.aks.options import TRITON_UID

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not can_run(),
        reason="needs root and util-linux (unshare, setpriv) to build the read-only mount namespace",
    ),
    pytest.mark.skipif(
        not checkout_reachable(),
        reason="the checkout lies in a directory others cannot enter (mode 0700, e.g. made by "
        "mktemp -d): the pod's UID could not run its venv; clone it where others may enter",
    ),
]


def test_tritonserver_serves_a_python_model_when_run_as_the_hardened_pod_user(tmp_path: Path) -> None:
    repo = write_tiny_repository(tmp_path / "repo", models=("py_add",))
    make_read_only_repository(repo)
    writable = make_writable_tmp(tmp_path / "writable-tmp")
    with hardened_serve(repo, writable) as serve:
        assert serve.wait_serving(180), serve.output()

        client = httpclient.InferenceServerClient(serve.address("HTTP"))
        x = np.arange(4, dtype=np.float32).reshape(1, 4)
        inp = httpclient.InferInput("X", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        result = client.infer("py_add", [inp])
        np.testing.assert_array_equal(result.as_numpy("Y"), x + 1)

        tree = serve.tree()
        names = {name for name, _uid in tree.values()}
        assert "tritonserver" in names and any(n.startswith("triton_python") for n in names), tree
        assert {uid for _name, uid in tree.values()} == {TRITON_UID}, tree

        mounts = mount_options(serve.process.pid)
        assert mounts["/"].split(",")[0] == "ro" and mounts[MODELS].split(",")[0] == "ro", mounts
        assert mounts["/tmp"].split(",")[0] == "rw" and mounts["/dev/shm"].split(",")[0] == "rw", mounts
    assert serve.process.returncode == 0, serve.output()
    # Everything written lies in the writable mounts (the rest is read-only): tritonkit's local
    # launcher caches the CPU backends under $HOME/.cache (an image ships them) and the Python
    # backend makes its environment directory /tmp/python_env_*: why the pod needs a writable /tmp.
    expected = re.compile(r"^(\.cache|python_env_\w+)$")
    unexpected = [p.name for p in writable.iterdir() if not expected.match(p.name)]
    assert unexpected == [], unexpected
