"""`tritonkit validate` (being written; see the issue that owns it)."""

from __future__ import annotations

from tritonkit.errors import TritonKitError

HELP = "validate (not available yet)"


def command() -> None:
    raise TritonKitError("'tritonkit validate' is not available in this build yet")
