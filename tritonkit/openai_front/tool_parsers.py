"""The model's answer as OpenAI's ``tool_calls``: parsers per model family, unary and streamed.

Parsers (``tool_choice: auto``), chosen per model by ``--tool-parser MODEL=NAME`` or found from
the model's chat template:

- ``hermes`` (Hermes 2 Pro, Qwen 2/2.5/3, and tritonkit's tiny model): each call is
  ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, any number of them; the text
  before the first is the message's content;
- ``llama3_json`` (Llama 3.1/3.2/3.3 JSON tool calling): the whole answer is
  ``{"name": ..., "parameters": {...}}`` (optionally after ``<|python_tag|>``; several separated
  by ``;``).

An answer that does not parse as calls is returned as text, as it came. With ``required`` or a
named function the engine's structured output already holds the answer to the schema
(:mod:`tritonkit.openai_front.tools`): it is read, not guessed.

Streamed, content goes out as it comes until a call may be starting (held back from a possible
``<tool_call>`` or, for ``llama3_json``, an answer that opens with ``{``); a named function's
arguments go out piece by piece; other calls go out whole when the answer ends, each as OpenAI's
deltas (the first with index, id, type and name; then the arguments).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from tritonkit.openai_front.errors import OpenAIError
from tritonkit.openai_front.tools import Tools

__all__ = [
    "PARSERS",
    "ToolCall",
    "ToolStream",
    "check_served",
    "detect_parser",
    "parse_calls",
    "shape_answer",
]

PARSERS = ("hermes", "llama3_json")
_OPEN, _CLOSE = "<tool_call>", "</tool_call>"
_PYTHON_TAG = "<|python_tag|>"


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str
    id: str = field(default_factory=lambda: f"call_{uuid.uuid4().hex[:24]}")

    def message_entry(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


def detect_parser(template_source: str) -> str | None:
    """The parser a chat template's own tool format calls for, or None when it shows none."""
    if _OPEN in template_source:
        return "hermes"
    if _PYTHON_TAG in template_source or '"parameters"' in template_source:
        return "llama3_json"
    return None


def _call(obj: Any, keys: tuple[str, ...]) -> ToolCall | None:
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    arguments: Any = next((obj[k] for k in keys if k in obj), {})
    if isinstance(arguments, str):  # some models write the arguments as a JSON string
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    if not isinstance(arguments, dict):
        return None
    return ToolCall(obj["name"], json.dumps(arguments, ensure_ascii=False))


def _hermes(text: str) -> tuple[str | None, list[ToolCall]]:
    start = text.find(_OPEN)
    if start < 0:
        return text, []
    calls = []
    rest = text[start:]
    while rest.startswith(_OPEN):
        end = rest.find(_CLOSE)
        body = rest[len(_OPEN) : end if end >= 0 else len(rest)]  # the last may end unclosed
        try:
            call = _call(json.loads(body), ("arguments", "parameters"))
        except ValueError:
            call = None
        if call is None:
            return text, []
        calls.append(call)
        rest = "" if end < 0 else rest[end + len(_CLOSE) :].lstrip()
    if rest.strip():  # text after the calls that is not a call: not a tool answer
        return text, []
    content = text[:start].strip()
    return content or None, calls


def _llama3_json(text: str) -> tuple[str | None, list[ToolCall]]:
    body = text.strip()
    if body.startswith(_PYTHON_TAG):
        body = body[len(_PYTHON_TAG) :].lstrip()
    if not body.startswith("{"):
        return text, []
    decoder = json.JSONDecoder()
    calls, at = [], 0
    while at < len(body):
        try:
            obj, at = decoder.raw_decode(body, at)
        except ValueError:
            return text, []
        call = _call(obj, ("parameters", "arguments"))
        if call is None:
            return text, []
        calls.append(call)
        while at < len(body) and (body[at].isspace() or body[at] == ";"):
            at += 1
    return None, calls


def parse_calls(parser: str, text: str) -> tuple[str | None, list[ToolCall]]:
    """(content, calls) of a model's answer in ``parser``'s format; no calls: (text, [])."""
    return _hermes(text) if parser == "hermes" else _llama3_json(text)


def _enforced(tools: Tools, text: str) -> list[ToolCall]:
    """The calls of an answer held to the tools' schema (none when it was cut short)."""
    try:
        value = json.loads(text)
    except ValueError:
        return []
    if tools.choice == "function" and tools.name is not None:
        return (
            [ToolCall(tools.name, json.dumps(value, ensure_ascii=False))] if isinstance(value, dict) else []
        )
    if not isinstance(value, list):
        return []
    calls = [_call(item, ("parameters",)) for item in value]
    return [c for c in calls if c is not None] if all(c is not None for c in calls) else []


def shape_answer(
    tools: Tools | None, parser: str | None, text: str, reason: str
) -> tuple[str | None, list[ToolCall], str]:
    """(content, tool calls, finish_reason) of a whole answer."""
    if tools is None or not tools.offered:
        return text, [], reason
    if tools.enforced:
        calls = _enforced(tools, text)
        if not calls:  # cut at max_tokens: the text as it came, finish_reason "length"
            return text, [], reason
        return None, calls, "tool_calls" if reason == "stop" else reason
    content, calls = parse_calls(parser or "hermes", text)
    return content, calls, ("tool_calls" if calls and reason == "stop" else reason)


def _header(index: int, call_id: str, name: str, arguments: str) -> dict[str, Any]:
    entry = {
        "index": index,
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }
    return {"tool_calls": [entry]}


def _arguments(index: int, piece: str) -> dict[str, Any]:
    return {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}


def _held_back(text: str, marker: str) -> int:
    """How many characters at the end of ``text`` could start ``marker``."""
    for size in range(min(len(marker) - 1, len(text)), 0, -1):
        if marker.startswith(text[-size:]):
            return size
    return 0


class ToolStream:
    """One streamed choice's text turned into OpenAI deltas (``{"content": ...}`` or
    ``{"tool_calls": [...]}``): :meth:`feed` per piece, :meth:`end` once."""

    def __init__(self, tools: Tools, parser: str | None) -> None:
        self.tools = tools
        self.parser = parser or "hermes"
        self._sent = 0  # characters of the text already sent as content
        self._text = ""
        self._holding = False  # a call may have started: the rest waits for the end
        self._named: ToolCall | None = None

    def feed(self, piece: str) -> list[dict[str, Any]]:
        if not piece:
            return []
        self._text += piece
        tools = self.tools
        if tools.choice == "function" and tools.name is not None:
            if self._named is None:
                self._named = ToolCall(tools.name, "")
                return [_header(0, self._named.id, tools.name, piece)]
            return [_arguments(0, piece)]
        if tools.enforced or self._holding:
            return []
        return self._content()

    def _content(self) -> list[dict[str, Any]]:
        """The text that cannot be part of a call, sent as content."""
        text = self._text
        if self.parser == "hermes":
            found = text.find(_OPEN, self._sent)
            if found >= 0:
                self._holding = True
                upto = found
            else:
                upto = len(text) - _held_back(text[self._sent :], _OPEN)
        else:  # llama3_json: an answer that opens with '{' (or the python tag) is held whole
            head = text.lstrip()
            if self._sent == 0 and (head.startswith(("{", _PYTHON_TAG))):
                self._holding = True
                return []
            if self._sent == 0 and _PYTHON_TAG.startswith(head):
                return []  # only whitespace so far, or what may be the tag: wait
            upto = len(text)
        if upto <= self._sent:
            return []
        piece, self._sent = text[self._sent : upto], upto
        return [{"content": piece}]

    def end(self, reason: str) -> tuple[list[dict[str, Any]], str]:
        """The deltas left when the answer ended, and the choice's finish_reason."""
        tools = self.tools
        if self._named is not None or (tools.choice == "function" and tools.name is not None):
            if self._named is None:  # no text at all: an empty call still has its header
                return [_header(0, ToolCall(str(tools.name), "").id, str(tools.name), "")], reason
            return [], "tool_calls" if reason == "stop" else reason
        if tools.enforced:
            calls = _enforced(tools, self._text)
            out = []
        else:
            rest = self._text[self._sent :]
            content, calls = parse_calls(self.parser, rest) if self._holding else (rest, [])
            out = [{"content": content}] if content else []
            if not calls:
                out = [{"content": rest}] if rest else []
        if tools.enforced and not calls:
            return ([{"content": self._text}] if self._text else []), reason
        for i, call in enumerate(calls):
            out.append(_header(i, call.id, call.name, ""))
            out.append(_arguments(i, call.arguments))
        return out, ("tool_calls" if calls and reason == "stop" else reason)


def check_served(
    tools: Tools, *, model: str, llm_stage: bool, template_takes_tools: bool, parser: str | None
) -> None:
    """Refuse tools a model cannot honour, with a 400 naming the field."""
    if not llm_stage:
        raise OpenAIError(
            f"model '{model}' is a pipeline that builds its own prompt; it does not take tools",
            param="tools",
            code="unsupported_parameter",
            hint="send tools to an LLM stage with a chat template that renders them",
        )
    if not tools.offered:
        return
    if not template_takes_tools:
        raise OpenAIError(
            f"the chat template of model '{model}' does not render tools",
            param="tools",
            code="tools_not_supported",
            hint=f"start the front with --chat-template {model}=FILE (a template that takes tools=)",
        )
    if tools.choice == "auto" and parser is None:
        raise OpenAIError(
            f"model '{model}' has no tool-call parser: tool_choice auto cannot read its calls",
            param="tool_choice",
            code="tool_parser_missing",
            hint=f"start the front with --tool-parser {model}={'|'.join(PARSERS)}, or ask for "
            "tool_choice required or a named function",
        )
