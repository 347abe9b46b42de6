"""`tritonkit build` (being written; see the issue that owns it)."""

from __future__ import annotations

from tritonkit.errors import TritonKitError

HELP = "build (not available yet)"


def command() -> None:
    raise TritonKitError("'tritonkit build' is not available in this build yet")
