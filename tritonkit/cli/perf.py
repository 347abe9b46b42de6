"""`tritonkit perf` (being written; see the issue that owns it)."""

from __future__ import annotations

from tritonkit.errors import TritonKitError

HELP = "perf (not available yet)"


def command() -> None:
    raise TritonKitError("'tritonkit perf' is not available in this build yet")
