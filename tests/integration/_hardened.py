"""`tritonkit serve` as the hardened AKS pod runs it, where this box allows (shared by
tests/integration/test_deploy_aks_hardened_local.py and benchmarks/hardened_local.py).

A private mount namespace (``unshare -m``, so nothing changes for the rest of the box) re-mounts
``/`` read-only, binds the repository read-only at ``/mnt/models``, a directory of the caller's
onto ``/tmp`` (so what was written there can be read afterwards) and a fresh tmpfs onto
``/dev/shm``; ``setpriv`` then drops to the pod's UID/GID with no capabilities and no-new-privs,
and ``env -i`` leaves only ``HOME=/tmp``, ``PATH``, ``PYTHONPATH`` and what the caller names (the
pod's ``env:``). It needs root (to mount) and util-linux.

Not the pod itself: no container runtime, seccomp profile or cgroup limits here, and the Triton
binary is pytriton's build, not NVIDIA's image. The box's Python lives under ``/root`` (mode
0700): the namespace shows the UID that interpreter directory only, read-only, as an image's
would be.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.integration.test_server_local import wait_until
from tritonkit.deploy.aks.options import TRITON_UID

ROOT = Path(__file__).resolve().parents[2]
#: where the namespace shows the model repository (read-only)
MODELS = "/mnt/models"

# $1 repository, $2 directory shown as /tmp, $3 interpreter root to expose under a 0700 parent ("" if
# none); then the command. Mount order matters: sources under /tmp are bound before /tmp is replaced
# ($WORKTREE, the checkout, too: its venv runs tritonkit).
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
# A checkout under /tmp (CI may clone there) would vanish under the pod's /tmp: keep it, read-only.
case "$WORKTREE/" in
  /tmp/*) mkdir /mnt/worktree; mount --bind "$WORKTREE" /mnt/worktree ;;
esac
mount --bind "$WRITABLE" /tmp
if [ -d /mnt/worktree ]; then
  mkdir -p "$WORKTREE"
  mount --bind /mnt/worktree "$WORKTREE"
  mount -o remount,bind,ro "$WORKTREE"
fi
mount -o remount,bind,ro /
mount -o remount,ro /mnt
mount -t tmpfs -o size=512m,mode=1777 tritonkit-shm /dev/shm
cd /tmp
exec setpriv --reuid=$UID_GID --regid=$UID_GID --clear-groups --inh-caps=-all --no-new-privs \
  env -i HOME=/tmp PATH=/usr/bin:/bin PYTHONPATH="$WORKTREE" "$@"
"""


def can_run() -> bool:
    """Root and util-linux's unshare and setpriv: what building the namespace takes."""
    return os.geteuid() == 0 and bool(shutil.which("unshare") and shutil.which("setpriv"))


def checkout_reachable() -> bool:
    """Others may enter the checkout and every directory above it: UID 10001 runs its venv's
    Python. A clone made with ``mktemp -d`` (mode 0700) is not, and the namespace does not change
    that."""
    return all(p.stat().st_mode & 0o001 for p in (ROOT, *ROOT.parents) if p != Path("/"))


def hidden_interpreter_root(python: str = sys.executable) -> str:
    """The interpreter's top directory below a parent others cannot enter (/root/.pyenv here); ""
    when every directory on its path is open."""
    real = Path(os.path.realpath(python))
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
    """The process's name and real UID."""
    status = Path(f"/proc/{pid}/status").read_text()
    name = re.search(r"^Name:\s+(\S+)", status, re.M)
    uid = re.search(r"^Uid:\s+(\d+)", status, re.M)
    if not (name and uid):
        raise ValueError(f"/proc/{pid}/status has no Name or Uid line")
    return name.group(1), int(uid.group(1))


def mount_options(pid: int) -> dict[str, str]:
    """Mount point -> its per-mount options, as the process sees them."""
    out: dict[str, str] = {}
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        fields = line.split()
        out[fields[4]] = fields[5]
    return out


def make_read_only_repository(repo: Path) -> None:
    """Readable by everyone, owned by root: not the pod UID's to change."""
    for path in [repo, *repo.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)


def make_writable_tmp(path: Path) -> Path:
    """The directory shown as /tmp: the pod UID's own, like the emptyDir the pod mounts there."""
    path.mkdir(parents=True, exist_ok=True)
    os.chown(path, TRITON_UID, TRITON_UID)
    path.chmod(0o700)
    return path


@dataclass
class HardenedServe:
    """A running `tritonkit serve` in the namespace: its process and what it printed so far."""

    process: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)

    def output(self) -> str:
        return "".join(self.lines)

    def address(self, protocol: str) -> str:
        """host:port of ``HTTP`` or ``gRPC`` as serve printed it."""
        scheme = "http" if protocol == "HTTP" else "grpc"
        match = re.search(rf"{protocol}\s+{scheme}://(127\.0\.0\.1:\d+)", self.output())
        if match is None:
            raise ValueError(f"serve printed no {protocol} address:\n{self.output()}")
        return match.group(1)

    def wait_serving(self, timeout: float) -> bool:
        """Until serve says it serves (True) or exits or the time is up (False)."""
        wait_until(lambda: "serving;" in self.output() or self.process.poll() is not None, timeout)
        return "serving;" in self.output() and self.process.poll() is None

    def tree(self) -> dict[int, tuple[str, int]]:
        """Every process serve started, pid -> (name, UID)."""
        return {pid: uid_of(pid) for pid in process_tree(self.process.pid)}


@contextmanager
def hardened_serve(
    repo: Path,
    writable: Path,
    *,
    env: Mapping[str, str] | None = None,
    interpreters: Sequence[str] = (sys.executable,),
    serve_args: Sequence[str] = (),
    stop_timeout: float = 120,
) -> Iterator[HardenedServe]:
    """`tritonkit serve /mnt/models` as the pod's UID in the namespace; stopped with SIGINT on exit.

    ``env`` is the pod's container ``env:`` beyond ``HOME=/tmp``; ``interpreters`` the Pythons
    whose hidden top directory (under /root here) the UID must see read-only: they must share one.
    """
    roots = {hidden_interpreter_root(p) for p in interpreters}
    if len(roots) != 1:
        raise ValueError(f"the interpreters {list(interpreters)} live under different hidden roots {roots}")
    namespace_env = {**os.environ, "UID_GID": str(TRITON_UID), "WORKTREE": str(ROOT)}
    cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c", NAMESPACE_SCRIPT, "namespace"]
    cmd += [str(repo), str(writable), roots.pop()]
    if env:
        cmd += ["env", *(f"{k}={v}" for k, v in env.items())]
    cmd += [sys.executable, "-m", "tritonkit", "serve", MODELS, *serve_args]
    # unshare, sh, setpriv and env each exec the next: the process is tritonkit serve itself.
    proc = subprocess.Popen(
        cmd, env=namespace_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    serve = HardenedServe(proc)
    reader = threading.Thread(target=lambda: serve.lines.extend(proc.stdout or ()), daemon=True)
    reader.start()
    try:
        yield serve
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=stop_timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
        reader.join(timeout=5)
        _remove_worktree_mount_point(writable)


def _remove_worktree_mount_point(writable: Path) -> None:
    """The empty directories the namespace made in ``writable`` to show a checkout under /tmp."""
    if not ROOT.is_relative_to("/tmp"):
        return
    point = writable / ROOT.relative_to("/tmp")
    while point != writable and point.is_dir() and not any(point.iterdir()):
        point.rmdir()
        point = point.parent
