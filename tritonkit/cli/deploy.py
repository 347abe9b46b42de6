"""`tritonkit deploy` (being written; see the issue that owns it)."""

from __future__ import annotations

from tritonkit.errors import TritonKitError

HELP = "deploy (not available yet)"


def command() -> None:
    raise TritonKitError("'tritonkit deploy' is not available in this build yet")
