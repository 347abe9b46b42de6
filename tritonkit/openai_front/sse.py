"""Server-sent events as OpenAI streams them: ``data: <json>`` events, then ``data: [DONE]``.

Standard framing (one ``data:`` line per event, a blank line after it), so any SSE reader, the
official clients and ``tritonkit perf`` alike, splits the stream the same way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["DONE", "MEDIA_TYPE", "event"]

MEDIA_TYPE = "text/event-stream"
DONE = b"data: [DONE]\n\n"


def event(payload: Mapping[str, Any]) -> bytes:
    """One event holding ``payload`` as compact JSON (never a raw newline inside: JSON escapes them)."""
    return (
        b"data: " + json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n\n"
    )
