"""Worker processes on this machine (``perf --workers N``): the pods' entrypoint, run locally.

Each is ``python -m tritonkit.perf.worker --connect 127.0.0.1:PORT``: the same program and the
same TCP protocol a ``--kube`` pod runs, so the local case tests the cluster's path. Their
stderr goes to a file (a pipe nobody reads would block a chatty worker once full) and is
attached to any error about them.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["LocalWorkers"]

#: the directory holding this tritonkit package (tritonkit/perf/local_workers.py -> ..)
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


class LocalWorkers:
    """``count`` worker processes connecting to ``host:port``; ``close()`` ends them."""

    def __init__(self, *, count: int, host: str, port: int) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="tritonkit-workers-")
        env = dict(os.environ)
        # the child imports the same tritonkit as this process, installed or from a checkout
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH", "")) if p)
        self.procs: list[subprocess.Popen[bytes]] = []
        self._logs: list[Path] = []
        for i in range(count):
            log = Path(self._dir.name) / f"worker-{i}.log"
            self._logs.append(log)
            with open(log, "wb") as err:
                self.procs.append(
                    subprocess.Popen(
                        [
                            sys.executable,
                            "-m",
                            "tritonkit.perf.worker",
                            "--connect",
                            f"{host}:{port}",
                            "--name",
                            f"local-{i}",
                        ],
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=err,
                        env=env,
                    )
                )

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def exited(self) -> str:
        """'' while all run; else which exited, with the tail of its stderr."""
        for i, proc in enumerate(self.procs):
            code = proc.poll()
            if code is not None:
                return (
                    f"worker process local-{i} (pid {proc.pid}) exited with status {code}: {self.log_tail(i)}"
                )
        return ""

    def log_tail(self, index: int, chars: int = 2000) -> str:
        with contextlib.suppress(OSError):
            text = self._logs[index].read_text(errors="replace").strip()
            return text[-chars:] or "(no output)"
        return "(no output)"

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        self.procs = []
        self._dir.cleanup()
