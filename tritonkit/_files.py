"""Atomic file writes: a temporary sibling, then a rename, so readers never see half a file."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

__all__ = ["atomic_write_bytes"]


def _umask() -> int:
    """The process umask, read without changing it where Linux tells it (threads may be running)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary sibling and ``os.replace``.

    The result has the permissions a plain ``open(path, "w")`` would give it: the mode of the
    file it replaces, else ``0o666`` less the umask. (``mkstemp`` creates ``0o600`` files: a
    config.pbtxt written that way is unreadable to a tritonserver running as another user.)
    """
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        mode = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=str(path.parent or "."))
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            os.fchmod(fh.fileno(), mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
