"""`tritonkit infer` (being written; see the issue that owns it)."""

from __future__ import annotations

from tritonkit.errors import TritonKitError

HELP = "infer (not available yet)"


def command() -> None:
    raise TritonKitError("'tritonkit infer' is not available in this build yet")
