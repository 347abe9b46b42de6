"""Server-sent events as OpenAI streams them: ``data: <json>`` events, then ``data: [DONE]``.

Standard framing (one ``data:`` line per event, a blank line after it), so any SSE reader, the
official clients and ``tritonkit perf`` alike, splits the stream the same way.

A stream's chunks share everything but the choice's index and its piece of text:
:class:`ChunkTemplate` encodes that shared part once per stream and each piece's text alone
(the same bytes :func:`event` gives for the whole chunk: the per-token cost is one string escape).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from json.encoder import encode_basestring
from typing import Any

__all__ = ["DONE", "MEDIA_TYPE", "ChunkTemplate", "event"]

MEDIA_TYPE = "text/event-stream"
DONE = b"data: [DONE]\n\n"
_SEPARATORS = (",", ":")


def _json(value: Any) -> str:
    return json.dumps(value, separators=_SEPARATORS, ensure_ascii=False)


def event(payload: Mapping[str, Any]) -> bytes:
    """One event holding ``payload`` as compact JSON (never a raw newline inside: JSON escapes them)."""
    return b"data: " + _json(payload).encode("utf-8") + b"\n\n"


class ChunkTemplate:
    """The chunks of one streamed answer (``head``: its id, object, created, model and
    system_fingerprint, in that order), byte for byte what :func:`event` makes of
    ``{**head, "choices": [choice], "usage": None}`` (``usage`` only with ``usage_slot``)."""

    def __init__(self, head: Mapping[str, Any], *, chat: bool, usage_slot: bool) -> None:
        self.head = {**head, "object": "chat.completion.chunk" if chat else "text_completion"}
        self.chat = chat
        self.usage_slot = usage_slot
        self._slot: dict[str, Any] = {"usage": None} if usage_slot else {}
        encoded = _json(self.head)
        self._prefix = ("data: " + encoded[:-1] + ',"choices":[{"index":').encode("utf-8")
        self._suffix = (
            ("}}]" if chat else "}]") + (',"usage":null}' if usage_slot else "}") + "\n\n"
        ).encode()
        self._piece = b',"logprobs":null,"finish_reason":null,' + (
            b'"delta":{"content":' if chat else b'"text":'
        )
        self._first = self._prefix + b"0" + self._piece  # choice 0's, before its text

    def first_text(self, text: str) -> bytes:
        """:meth:`text` of choice 0 (the relay's hot path: one escape, one join)."""
        return b"".join((self._first, encode_basestring(text).encode("utf-8"), self._suffix))

    def _event(self, choice: dict[str, Any]) -> bytes:
        return event({**self.head, "choices": [choice], **self._slot})

    def text(self, index: int, text: str) -> bytes:
        """A piece of text without log-probabilities (the hot path: one escape, three joins)."""
        return b"".join(
            (
                self._prefix,
                str(index).encode(),
                self._piece,
                encode_basestring(text).encode("utf-8"),
                self._suffix,
            )
        )

    def delta(self, index: int, text: str, logprobs: Any) -> bytes:
        """A piece of text with its log-probabilities."""
        choice: dict[str, Any] = {"index": index, "logprobs": logprobs, "finish_reason": None}
        choice.update({"delta": {"content": text}} if self.chat else {"text": text})
        return self._event(choice)

    def opening(self, index: int, content: str | None = "") -> bytes:
        """A chat choice's first chunk: the assistant's role, no content yet (None: an answer
        that may be tool calls only)."""
        opening = {"role": "assistant", "content": content}
        return self._event({"index": index, "delta": opening, "logprobs": None, "finish_reason": None})

    def fields(self, index: int, delta: Mapping[str, Any]) -> bytes:
        """A chat piece that is not plain text: ``{"content": ...}`` or ``{"tool_calls": [...]}``."""
        return self._event({"index": index, "delta": dict(delta), "logprobs": None, "finish_reason": None})

    def echo(self, index: int, text: str) -> bytes:
        """A completion choice's echoed prompt."""
        return self._event({"index": index, "text": text, "logprobs": None, "finish_reason": None})

    def finish(self, index: int, reason: str) -> bytes:
        """A choice's last chunk: why it ended."""
        choice: dict[str, Any] = {"index": index, "logprobs": None, "finish_reason": reason}
        if self.chat:
            choice["delta"] = {}
        else:
            choice["text"] = ""
        return self._event(choice)

    def usage(self, usage: Mapping[str, int] | None) -> bytes:
        """The usage chunk after every choice ended (``stream_options.include_usage``)."""
        return event({**self.head, "choices": [], "usage": usage})
