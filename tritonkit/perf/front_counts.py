"""The OpenAI front's own token counts, read from its ``/metrics`` between measurement windows.

``tritonkit perf --openai`` counts output tokens itself (the last chunk's ``usage``, else a
tokenizer or the chunks); the front also meters every answer it relays
(``tritonkit_openai_tokens_total{model, kind, key}``, the model's own counts). Reading that
counter before and after a step's reported windows gives the tokens per second *the server*
counted, which perf reports beside its own: two independent counts of the same stream. A server
without that counter (another OpenAI server, a gateway that hides ``/metrics``) gives none.

The exposition format is Prometheus' text format 0.0.4: ``name{label="value",...} number``
per line, label values escaped with ``\\``, ``\\"`` and ``\\n``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx

from tritonkit.client.connection import httpx_verify

__all__ = ["COMPLETION_COUNTER", "FrontCounts", "samples"]

#: the front's counter of tokens in and out, by model, kind and key id
COMPLETION_COUNTER = "tritonkit_openai_tokens_total"

_LINE = re.compile(r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+\S+)?$")
_LABEL = re.compile(r'\s*(?P<key>[A-Za-z_][A-Za-z0-9_]*)="(?P<value>(?:[^"\\]|\\.)*)"\s*,?')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


def _labels(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    pos = 0
    while pos < len(text):
        match = _LABEL.match(text, pos)
        if match is None:
            raise ValueError(f"malformed labels: {text!r}")
        value = re.sub(r"\\[\\\"n]", lambda m: _UNESCAPE[m.group(0)], match.group("value"))
        out[match.group("key")] = value
        pos = match.end()
    return out


def samples(text: str) -> Iterator[tuple[str, dict[str, str], float]]:
    """(metric name, labels, value) for every sample line of a text exposition; comments and
    lines that are not samples are skipped."""
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line)
        if match is None:
            continue
        try:
            labels = _labels(match.group("labels") or "")
            value = float(match.group("value"))
        except ValueError:
            continue
        yield match.group("name"), labels, value


class FrontCounts:
    """Reads the completion tokens the front at ``base_url`` has counted for ``model``, and
    keeps the readings of one step (:meth:`mark`). Without a ``base_url`` (a run against Triton)
    it reads nothing and every figure is None."""

    def __init__(
        self, base_url: str | None, model: str, *, cacert: str | None = None, timeout_s: float = 5.0
    ) -> None:
        self.url = base_url.rstrip("/") + "/metrics" if base_url else None
        self.model = model
        self.marks: list[float | None] = []
        self._client = httpx.AsyncClient(verify=httpx_verify(cacert), timeout=timeout_s) if self.url else None

    async def completion_tokens(self) -> float | None:
        """The counter summed over keys; None when the server does not expose it."""
        if self._client is None or self.url is None:
            return None
        try:
            response = await self._client.get(self.url)
        except httpx.HTTPError:
            return None
        if response.status_code != 200:
            return None
        found = [
            value
            for name, labels, value in samples(response.text)
            if name == COMPLETION_COUNTER
            and labels.get("model") == self.model
            and labels.get("kind") == "completion"
        ]
        # a front that has answered nothing yet for the model exposes the family without samples
        has_family = f"# TYPE {COMPLETION_COUNTER} counter" in response.text
        return sum(found) if found or has_family else None

    async def mark(self, *, first: bool = False) -> None:
        """Read the counter at a window's edge (``first``: the step's first edge, forgetting the
        last step's readings)."""
        if first:
            self.marks = []
        self.marks.append(await self.completion_tokens())

    def per_s(self, first: int, last: int, duration_s: float) -> float | None:
        """Tokens/s the server counted between edges ``first`` and ``last``; None if it did not."""
        marks = self.marks
        if len(marks) <= last or duration_s <= 0:
            return None
        start, end = marks[first], marks[last]
        return None if start is None or end is None else (end - start) / duration_s

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
