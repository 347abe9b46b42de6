"""Shared-memory regions of the Python backend: named per server, removed when it is gone.

Every Python-backend model instance (ours included: the onnxruntime backend is Python-based)
talks to its stub through a region in /dev/shm. Triton removes them on a clean stop, but a killed
server leaves them behind, and on a small /dev/shm (64 MiB in a default Docker container) the
leftovers soon stop new servers from starting. So each launch gets a unique region prefix naming
the launching process; its regions are removed after the server exits, and regions of launchers
that died without cleaning up are swept at the next start.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import uuid
from pathlib import Path

from tritonkit._processes import pid_alive

logger = logging.getLogger(__name__)

SHM_DIR = Path("/dev/shm")
_PREFIX = "tritonkit_"
_OWNED = re.compile(rf"^{_PREFIX}(?P<pid>\d+)_(?P<tag>[0-9a-f]+)_")

#: backends in tritonkit's backend directory that run on the Python backend's stub
PYTHON_BASED_BACKENDS = ("python", "onnxruntime")


def new_prefix() -> str:
    """A region prefix unique to one launch by this process."""
    return f"{_PREFIX}{os.getpid()}_{uuid.uuid4().hex[:8]}_"


def backend_config_args(prefix: str) -> list[str]:
    return [
        f"--backend-config={backend},shm-region-prefix-name={prefix}" for backend in PYTHON_BASED_BACKENDS
    ]


def remove_regions(prefix: str, shm_dir: Path = SHM_DIR) -> int:
    """Unlink every region named ``prefix*``; returns how many were removed."""
    removed = 0
    if not shm_dir.is_dir():
        return 0
    for path in shm_dir.glob(f"{prefix}*"):
        with contextlib.suppress(FileNotFoundError, PermissionError):
            path.unlink()
            removed += 1
    return removed


def _prefixes_in_use() -> set[str]:
    """Region prefixes named on a live process's command line (stubs carry their region name)."""
    used: set[str] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        for arg in cmdline.split("\0"):
            match = _OWNED.match(arg) or _OWNED.search(arg)
            if match:
                used.add(match.group(0))
    return used


def sweep_stale_regions(shm_dir: Path = SHM_DIR) -> int:
    """Remove regions left by tritonkit launchers that died; never touches live servers' regions."""
    if not shm_dir.is_dir():
        return 0
    stale: dict[str, list[Path]] = {}
    for path in shm_dir.iterdir():
        match = _OWNED.match(path.name)
        if match and not pid_alive(int(match.group("pid"))):
            stale.setdefault(match.group(0), []).append(path)
    if not stale:
        return 0
    in_use = _prefixes_in_use()
    removed = 0
    for prefix, paths in stale.items():
        if prefix in in_use:
            continue  # an orphaned server still runs on them
        for path in paths:
            with contextlib.suppress(FileNotFoundError, PermissionError):
                path.unlink()
                removed += 1
    if removed:
        logger.info("removed %d shared-memory regions left by dead tritonkit servers", removed)
    return removed
