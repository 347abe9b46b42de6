"""The OpenAI front's share of the hostile soak (``benchmarks/hostile.py --openai-pipelines``).

The front (``tritonkit.openai_front.FrontServer``, with an API key) stands before the soak's
server; its steps (protocol ``openai``) send raw HTTP with httpx, one client per worker, no
client-side checks:

- good: a unary and a streamed answer (``max_tokens`` 8, greedy), and streamed clients that
  vanish after 3 chunks. tiny_llm through ``/v1/completions``; the pipelines (vlm_llm,
  arr_coc_llm) through ``/v1/chat/completions`` with the sample image as a ``data:`` URL. A good
  answer is right when it equals that request's unary answer asked alone before the soak (the
  front's answer equals the pipeline's own over gRPC: tests/integration/test_openai_front.py); a
  vanished client's chunks must begin it;
- bad, each refused with a 4xx in OpenAI's error shape, streamed or not: JSON that does not parse,
  a body that is not an object, wrong types (messages as a string, max_tokens as a string), an
  unknown model, bad base64, bytes that are no image, an image sent to the LLM stage, a prompt
  past the front's limit, a prompt past the engine's context, MAX_TOKENS past the pipeline's
  limit, no key and a wrong key.

After each step the front must be idle (``tritonkit_openai_requests_active`` back to 0) as the
engine and the pipelines are (their ``tritonkit_generation_active`` gauges, checked by
hostile.py).
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

KEY = "sk-hostile-soak"
PROTOCOL = "openai"
LLM = "tiny_llm"
SAMPLE = Path(__file__).resolve().parent.parent / "ensembles" / "assets" / "sample.png"
QUERIES = {"vlm_llm": "Describe the image.", "arr_coc_llm": "Where is the sun?"}
MAX_TOKENS, VANISH_AFTER = 8, 3
TIMEOUT_S = 60.0


@dataclass(frozen=True)
class FrontCase:
    """One request to the front; ``expected`` None: it must be refused with a 4xx."""

    kind: str
    path: str
    body: bytes
    stream: bool = False
    expected: str | None = None
    stop_after: int | None = None
    key: str | None = KEY
    good: bool = False


def _image_url(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode()


def _message(text: str, url: str | None) -> list[dict[str, Any]]:
    if url is None:
        return [{"role": "user", "content": text}]
    parts = [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": url}}]
    return [{"role": "user", "content": parts}]


def front_cases(model: str) -> tuple[list[FrontCase], list[FrontCase]]:
    """(good cases without their answers yet, bad cases) for one model behind the front."""
    chat = model != LLM
    path = "/v1/chat/completions" if chat else "/v1/completions"
    image = _image_url(SAMPLE.read_bytes())

    def body(**fields: Any) -> dict[str, Any]:
        base: dict[str, Any] = {"model": model, "max_tokens": MAX_TOKENS, "temperature": 0}
        if chat:
            base["messages"] = _message(QUERIES[model], image)
        else:
            base["prompt"] = "The image shows"
        return {**base, **fields}

    def case(kind: str, fields: dict[str, Any] | bytes, *, stream: bool = False, **more: Any) -> FrontCase:
        raw = fields if isinstance(fields, bytes) else json.dumps({**fields, "stream": stream}).encode()
        return FrontCase(kind, path, raw, stream=stream, **more)

    good = [
        case("unary", body(), good=True),
        case("streamed", body(), stream=True, good=True),
        case("vanishing", body(), stream=True, stop_after=VANISH_AFTER, good=True),
    ]
    bad_bodies: list[tuple[str, dict[str, Any] | bytes]] = [
        ("bad JSON", b'{"model": "' + model.encode() + b'", "messages": ['),
        ("not an object", b"[1, 2, 3]"),
        ("max_tokens as a string", body(max_tokens="eight")),
        ("unknown model", body(model="no_such_model")),
        (
            "prompt past the front's limit",
            body(**({"messages": _message("z" * 70_000, None)} if chat else {"prompt": "z" * 70_000})),
        ),  # fmt: skip
    ]
    if chat:
        bad_bodies += [
            ("messages as a string", body(messages="Describe the image.")),
            ("bad base64", body(messages=_message("q", "data:image/png;base64,!!!not-base64!!!"))),
            ("non-image bytes", body(messages=_message("q", _image_url(b"no image here at all")))),
            ("MAX_TOKENS past the pipeline's limit", body(max_tokens=500)),
        ]
    else:
        bad_bodies += [
            ("prompt as a number", body(prompt=42)),
            ("prompt past the engine's context", body(prompt="word " * 9000)),
        ]
    bad = [case(kind, fields, stream=s) for kind, fields in bad_bodies for s in (False, True)]
    bad += [
        case("no key", body(), key=None),
        case("wrong key", body(), stream=True, key="sk-wrong"),
    ]
    if not chat:  # an image to the LLM stage (it takes text only): on the chat route
        image_to_llm = {"model": model, "messages": _message("q", image), "max_tokens": MAX_TOKENS}
        bad.append(
            FrontCase("image to the LLM stage", "/v1/chat/completions", json.dumps(image_to_llm).encode())
        )
    return good, bad


def _headers(case: FrontCase) -> dict[str, str]:
    headers = {"content-type": "application/json"}
    if case.key is not None:
        headers["authorization"] = f"Bearer {case.key}"
    return headers


def _text(payload: dict[str, Any]) -> str:
    parts = []
    for choice in payload.get("choices") or ():
        delta = choice.get("delta")
        message = choice.get("message")
        if isinstance(delta, dict):
            parts.append(delta.get("content") or "")
        elif isinstance(message, dict):
            parts.append(message.get("content") or "")
        else:
            parts.append(choice.get("text") or "")
    return "".join(parts)


def _refused(reply: Any) -> str:
    """'4xx' when the reply is a 4xx in OpenAI's error shape, else what it was."""
    try:
        error = reply.json().get("error")
    except ValueError:
        error = None
    if 400 <= reply.status_code < 500 and isinstance(error, dict) and {"message", "type"} <= set(error):
        return "4xx"
    return f"HTTP {reply.status_code}"


def send(client: Any, url: str, case: FrontCase) -> tuple[str, bool]:
    """(outcome, answered correctly) of one request: 'ok', '4xx' or what else happened."""
    try:
        if not case.stream:
            reply = client.post(url + case.path, content=case.body, headers=_headers(case))
            if reply.status_code != 200:
                return _refused(reply), False
            return "ok", case.expected is not None and _text(reply.json()) == case.expected
        with client.stream("POST", url + case.path, content=case.body, headers=_headers(case)) as reply:
            if reply.status_code != 200:
                reply.read()
                return _refused(reply), False
            pieces, done = [], False
            for line in reply.iter_lines():
                if not line.startswith("data: "):
                    continue
                if line == "data: [DONE]":
                    done = True
                    break
                event = json.loads(line[6:])
                if "error" in event:
                    return f"stream error: {str(event['error'])[:60]}", False
                text = _text(event)
                if text:
                    pieces.append(text)
                if case.stop_after is not None and len(pieces) >= case.stop_after:
                    break  # the client vanishes: leaving the block closes the connection
    except Exception as exc:  # the connection broke (a crashed front or server shows up here)
        return f"no answer ({type(exc).__name__})", False
    joined = "".join(pieces)
    if case.expected is None:
        return "ok", False
    if case.stop_after is not None and not done:
        return "ok", len(pieces) >= case.stop_after and case.expected.startswith(joined)
    return "ok", done and joined == case.expected


def with_answers(url: str, good: list[FrontCase]) -> list[FrontCase]:
    """The good cases, each with the unary answer its request gets alone (before the soak)."""
    import httpx

    with httpx.Client(timeout=TIMEOUT_S) as client:
        unary = next(c for c in good if not c.stream)
        reply = client.post(url + unary.path, content=unary.body, headers=_headers(unary))
        if reply.status_code != 200:
            raise RuntimeError(f"the front did not answer a good request alone: {reply.text[:200]}")
        answer = _text(reply.json())
    return [replace(c, expected=answer) for c in good]


def sender(url: str) -> tuple[Any, Any]:
    """(send one case, close) for one worker: an httpx client of its own."""
    import httpx

    client = httpx.Client(timeout=TIMEOUT_S)
    return (lambda case: send(client, url, case)), client.close


def front_active(url: str, deadline_s: float = 60.0) -> float | None:
    """Requests the front still holds (its ``tritonkit_openai_requests_active``), once it settles."""
    import httpx

    deadline = time.monotonic() + deadline_s
    while True:
        try:
            text = httpx.get(url + "/metrics", timeout=10).text
        except httpx.HTTPError:
            return None
        active = sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("tritonkit_openai_requests_active")
        )
        if active == 0 or time.monotonic() > deadline:
            return active
        time.sleep(0.1)
