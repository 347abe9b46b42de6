"""The hardened AKS pod spec, run where this box allows: `tritonkit serve` on a real tritonserver as
the pod's non-root UID/GID, with a read-only root filesystem, the model repository read-only, and
only the pod's declared writable mounts writable (``/tmp``, a memory-backed ``/dev/shm``).

A private mount namespace (``unshare -m``, so nothing changes for the rest of the box) re-mounts
``/`` read-only, binds the repository read-only at ``/mnt/models``, a directory of the test's onto
``/tmp`` (so what was written there can be read afterwards) and a fresh tmpfs onto ``/dev/shm``;
``setpriv`` then drops to UID/GID 10001 with no capabilities and no-new-privs. It needs root (to
mount) and util-linux; without them it is skipped.

Not the pod itself: no container runtime, seccomp profile or cgroup limits here, and the Triton
binary is pytriton's build, not NVIDIA's image (docs/deploy.md says what only a cluster shows).
The box's Python lives under ``/root`` (mode 0700): the namespace shows the UID that interpreter
directory only, read-only, as an image's would be.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

from tests.integration._server_repo import write_tiny_repository
from tests.integration.test_server_local import wait_until
from tritonkit.deploy.aks.options import TRITON_UID

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        os.geteuid() != 0 or not (shutil.which("unshare") and shutil.which("setpriv")),
        reason="needs root and util-linux (unshare, setpriv) to build the read-only mount namespace",
    ),
]

ROOT = Path(__file__).resolve().parents[2]
MODELS = "/mnt/models"

# $1 repository, $2 directory shown as /tmp, $3 interpreter root to expose under a 0700 parent ("" if
# none); then the command. Mount order matters: sources under /tmp are bound before /tmp is replaced.
NAMESPACE_SCRIPT = r"""
set -eu
REPO=$1; WRITABLE=$2; INTERP=$3; shift 3
mount -t tmpfs -o size=1m,mode=755 tritonkit-mnt /mnt
mkdir /mnt/models /mnt/interp
mount --bind "$REPO" /mnt/models
mount -o remount,bind,ro /mnt/models
if [ -n "$INTERP" ]; then
  PARENT=$(dirname "$INTERP")
  mount --bind "$INTERP" /mnt/interp
  mount -t tmpfs -o size=1m,mode=711 tritonkit-parent "$PARENT"
  mkdir "$INTERP"
  mount --bind /mnt/interp "$INTERP"
  mount -o remount,bind,ro "$INTERP"
  mount -o remount,ro "$PARENT"
fi
mount --bind "$WRITABLE" /tmp
mount -o remount,bind,ro /
mount -o remount,ro /mnt
mount -t tmpfs -o size=512m,mode=1777 tritonkit-shm /dev/shm
cd /tmp
exec setpriv --reuid=$UID_GID --regid=$UID_GID --clear-groups --inh-caps=-all --no-new-privs \
  env -i HOME=/tmp PATH=/usr/bin:/bin PYTHONPATH="$WORKTREE" "$@"
"""


def hidden_interpreter_root() -> str:
    """The interpreter's top directory below a parent others cannot enter (/root/.pyenv here); ""
    when every directory on its path is open."""
    real = Path(os.path.realpath(sys.executable))
    for parent in reversed(real.parents):
        if parent != Path("/") and not parent.stat().st_mode & 0o001:
            return str(parent / real.relative_to(parent).parts[0])
    return ""


def process_tree(pid: int) -> list[int]:
    out = [pid]
    for task in Path(f"/proc/{pid}/task").iterdir():
        children = (task / "children").read_text().split()
        for child in children:
            out += process_tree(int(child))
    return out


def uid_of(pid: int) -> tuple[str, int]:
    status = Path(f"/proc/{pid}/status").read_text()
    name = re.search(r"^Name:\s+(\S+)", status, re.M)
    uid = re.search(r"^Uid:\s+(\d+)", status, re.M)
    assert name and uid
    return name.group(1), int(uid.group(1))


def mount_options(pid: int) -> dict[str, str]:
    """Mount point -> its per-mount options, as the process sees them."""
    out: dict[str, str] = {}
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        fields = line.split()
        out[fields[4]] = fields[5]
    return out


def test_tritonserver_serves_a_python_model_when_run_as_the_hardened_pod_user(tmp_path: Path) -> None:
    repo = write_tiny_repository(tmp_path / "repo", models=("py_add",))
    for path in [repo, *repo.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)  # readable, owned by root: not the UID's to change
    writable = tmp_path / "writable-tmp"
    writable.mkdir()
    os.chown(writable, TRITON_UID, TRITON_UID)
    writable.chmod(0o700)
    env = {**os.environ, "UID_GID": str(TRITON_UID), "WORKTREE": str(ROOT)}
    cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c", NAMESPACE_SCRIPT, "namespace"]
    cmd += [str(repo), str(writable), hidden_interpreter_root()]
    cmd += [sys.executable, "-m", "tritonkit", "serve", MODELS]
    # unshare, sh, setpriv and env each exec the next: the process is tritonkit serve itself.
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or ()), daemon=True)
    reader.start()
    try:
        started = wait_until(lambda: "serving;" in "".join(lines) or proc.poll() is not None, 180)
        assert started, "".join(lines)
        output = "".join(lines)
        match = re.search(r"HTTP\s+http://(127\.0\.0\.1:\d+)", output)
        assert match and proc.poll() is None, output

        client = httpclient.InferenceServerClient(match.group(1))
        x = np.arange(4, dtype=np.float32).reshape(1, 4)
        inp = httpclient.InferInput("X", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        result = client.infer("py_add", [inp])
        np.testing.assert_array_equal(result.as_numpy("Y"), x + 1)

        tree = {pid: uid_of(pid) for pid in process_tree(proc.pid)}
        names = {name for name, _uid in tree.values()}
        assert "tritonserver" in names and any(n.startswith("triton_python") for n in names), tree
        assert {uid for _name, uid in tree.values()} == {TRITON_UID}, tree

        mounts = mount_options(proc.pid)
        assert mounts["/"].split(",")[0] == "ro" and mounts[MODELS].split(",")[0] == "ro", mounts
        assert mounts["/tmp"].split(",")[0] == "rw" and mounts["/dev/shm"].split(",")[0] == "rw", mounts
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=120)
        reader.join(timeout=5)
    assert code == 0, "".join(lines)
    # Everything written lies in the writable mounts (the rest is read-only): tritonkit's local
    # launcher caches the CPU backends under $HOME/.cache (an image ships them) and the Python
    # backend makes its environment directory /tmp/python_env_*: why the pod needs a writable /tmp.
    expected = re.compile(r"^(\.cache|python_env_\w+)$")
    unexpected = [p.name for p in writable.iterdir() if not expected.match(p.name)]
    assert unexpected == [], unexpected
