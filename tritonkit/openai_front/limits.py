"""What one request may ask of the front: sizes, counts and time (untrusted traffic)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Limits"]


@dataclass(frozen=True, kw_only=True)
class Limits:
    """Per-request limits; a request past one gets a 4xx for itself only."""

    #: request body, bytes (413 past it; images arrive base64-encoded inside it)
    max_body_bytes: int = 16 * 1024 * 1024
    #: messages in one chat request
    max_messages: int = 128
    #: characters of the prompt text (all messages together, before the template)
    max_prompt_chars: int = 65536
    #: images in one request, bytes of one image (decoded) and its pixels (width x height)
    max_images: int = 4
    max_image_bytes: int = 8 * 1024 * 1024
    max_image_pixels: int = 16 * 1024 * 1024
    #: choices per request (``n``)
    max_n: int = 8
    #: ``max_tokens`` sent to an LLM stage when the request gives none (vLLM's own default is 16)
    default_max_tokens: int = 256
    #: seconds one request may take, from the first byte sent to Triton to the last received
    request_timeout: float = 300.0
    #: seconds a stream that has sent pieces may go without the next before the front ends it
    #: (a server-error event, the request cancelled in Triton, counted as stalled); per model in
    #: ``stream_idle_timeouts``
    stream_idle_timeout: float = 60.0
    stream_idle_timeouts: tuple[tuple[str, float], ...] = field(default=())

    def idle_timeout(self, model: str) -> float:
        """The idle limit of ``model``'s streams (never past ``request_timeout``)."""
        limit = dict(self.stream_idle_timeouts).get(model, self.stream_idle_timeout)
        return min(limit, self.request_timeout)
