"""Whether a process id is alive: one answer for the server's shared-memory sweep and the front's
worker metrics (a leaf: the standard library only)."""

from __future__ import annotations

import os

__all__ = ["pid_alive"]


def pid_alive(pid: int) -> bool:
    """True while process ``pid`` exists (also one of another user's); False for ``pid`` <= 0."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
