"""`tritonkit serve` (being written; see the issue that owns it)."""

from __future__ import annotations

from tritonkit.errors import TritonKitError

HELP = "serve (not available yet)"


def command() -> None:
    raise TritonKitError("'tritonkit serve' is not available in this build yet")
