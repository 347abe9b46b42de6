"""Function tools in a chat request: ``tools``, ``tool_choice``, and the tool turns of a conversation.

``tools`` go to the model's chat template as ``tools=`` (the Hugging Face convention: a list of
``{"type": "function", "function": {"name", "description", "parameters"}}``). ``tool_choice``:

- ``none``: the tools are not offered to the template and the answer is not parsed;
- ``auto`` (the default with tools): the model's text is parsed by the model family's parser
  (:mod:`tritonkit.openai_front.tool_parsers`);
- ``required`` and a named function: enforced by the engine's structured output. A named
  function's answer is its arguments, held to its ``parameters`` schema; ``required`` is a JSON
  array of ``{"name": <const>, "parameters": <that tool's schema>}`` (``anyOf`` over the tools,
  one item when ``parallel_tool_calls`` is false), so every call names a known tool and its
  arguments validate.

Every wrong field is a 400 naming it (checked here, before a model is asked).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tritonkit.openai_front.errors import OpenAIError

__all__ = ["Function", "Tools", "assistant_tool_calls", "check_tool_turns", "parse_tools"]

#: OpenAI's rule for a function's name
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_CHOICES = ("none", "auto", "required")
_TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")
#: keywords whose value is one schema / a list of schemas / a map of schemas
_ONE = ("items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else")
_MANY = ("anyOf", "oneOf", "allOf", "prefixItems")
_MAP = ("properties", "$defs", "definitions", "patternProperties")
#: the most tools one request may offer (OpenAI's own limit)
MAX_TOOLS = 128


def _bad(message: str, param: str, code: str = "invalid_value") -> OpenAIError:
    return OpenAIError(message, status=400, param=param, code=code)


@dataclass(frozen=True)
class Function:
    """One function tool as the request gave it."""

    name: str
    parameters: Mapping[str, Any]
    description: str | None = None

    def template_entry(self) -> dict[str, Any]:
        """The tool as Hugging Face chat templates take it."""
        function: dict[str, Any] = {"name": self.name}
        if self.description is not None:
            function["description"] = self.description
        function["parameters"] = dict(self.parameters)
        return {"type": "function", "function": function}


@dataclass(frozen=True)
class Tools:
    """A request's tools and how the model may use them."""

    functions: tuple[Function, ...]
    #: "none", "auto", "required" or "function" (the named one, in ``name``)
    choice: str = "auto"
    name: str | None = None
    parallel: bool = True

    @property
    def offered(self) -> bool:
        """True when the template is given the tools (every choice but ``none``)."""
        return self.choice != "none"

    @property
    def enforced(self) -> bool:
        """True when structured output holds the answer to the tools' schemas."""
        return self.choice in ("required", "function")

    def function(self, name: str) -> Function | None:
        return next((f for f in self.functions if f.name == name), None)

    def template_tools(self) -> list[dict[str, Any]] | None:
        return [f.template_entry() for f in self.functions] if self.offered else None

    def schema(self) -> dict[str, Any] | None:
        """The JSON schema the engine holds the answer to (None: not enforced)."""
        if self.choice == "function" and self.name is not None:
            chosen = self.function(self.name)
            return None if chosen is None else _closed(chosen.parameters)
        if self.choice != "required":
            return None
        calls = [
            {
                "type": "object",
                "properties": {"name": {"const": f.name}, "parameters": _closed(f.parameters)},
                "required": ["name", "parameters"],
                "additionalProperties": False,
            }
            for f in self.functions
        ]
        schema: dict[str, Any] = {"type": "array", "minItems": 1, "items": {"anyOf": calls}}
        if not self.parallel:
            schema["maxItems"] = 1
        return schema


def _closed(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """A function's parameters as an object schema (a function without any takes ``{}``)."""
    schema = dict(parameters)
    if not schema or schema == {"type": "object"}:
        return {"type": "object", "properties": {}, "additionalProperties": False}
    return schema


def _check_keywords(schema: Mapping[str, Any], where: str) -> None:
    """The keywords that hold no schema: ``type``, ``required``, ``enum``."""
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind is not None else []
    if not all(isinstance(k, str) and k in _TYPES for k in kinds) or kind == []:
        raise _bad(f"'{where}.type' must be one of {', '.join(_TYPES)} (or a list of them)", f"{where}.type")
    required = schema.get("required")
    names = isinstance(required, list) and all(isinstance(r, str) for r in required)
    if required is not None and not names:
        raise _bad(f"'{where}.required' must be an array of property names", f"{where}.required")
    enum = schema.get("enum")
    if enum is not None and not (isinstance(enum, list) and enum):
        raise _bad(f"'{where}.enum' must be a non-empty array", f"{where}.enum")


def _check_schema(schema: Any, where: str, depth: int = 0) -> None:
    """The shape of a JSON schema (keyword types), so a broken one is this request's 400 naming
    the keyword; what the engine cannot compile is its 400, with its reason."""
    if isinstance(schema, bool):
        return
    if not isinstance(schema, Mapping):
        raise _bad(f"'{where}' must be a JSON schema (an object)", where, "invalid_type")
    if depth > 32:
        raise _bad(f"'{where}' nests deeper than 32 levels", where)
    _check_keywords(schema, where)
    inner: list[tuple[Any, str]] = [(schema[k], f"{where}.{k}") for k in _ONE if k in schema]
    for key in (k for k in _MANY if k in schema):
        items = schema[key]
        if not isinstance(items, list) or not items:
            raise _bad(f"'{where}.{key}' must be a non-empty array of schemas", f"{where}.{key}")
        inner += [(item, f"{where}.{key}[{i}]") for i, item in enumerate(items)]
    for key in (k for k in _MAP if k in schema):
        entries = schema[key]
        if not isinstance(entries, Mapping):
            raise _bad(f"'{where}.{key}' must be an object of schemas", f"{where}.{key}", "invalid_type")
        inner += [(item, f"{where}.{key}.{name}") for name, item in entries.items()]
    for item, at in inner:
        _check_schema(item, at, depth + 1)


def _function(item: Any, where: str) -> Function:
    if not isinstance(item, Mapping) or item.get("type") != "function":
        raise _bad(f'\'{where}\' must be a {{"type": "function", "function": {{...}}}} tool', where)
    spec = item.get("function")
    if not isinstance(spec, Mapping):
        raise _bad(f"'{where}.function' must be an object with a 'name'", f"{where}.function", "invalid_type")
    name = spec.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise _bad(f"'{where}.function.name' must be 1-64 letters, digits, _ or -", f"{where}.function.name")
    description = spec.get("description")
    if description is not None and not isinstance(description, str):
        raise _bad(f"'{where}.function.description' must be a string", f"{where}.function.description")
    parameters = spec.get("parameters")
    if parameters is None:
        parameters = {}
    _check_schema(parameters, f"{where}.function.parameters")
    if not isinstance(parameters, Mapping) or parameters.get("type", "object") != "object":
        raise _bad(
            f"'{where}.function.parameters' must be an object schema (type: object)",
            f"{where}.function.parameters",
        )
    strict = spec.get("strict")
    if strict is not None and not isinstance(strict, bool):
        raise _bad(
            f"'{where}.function.strict' must be true or false", f"{where}.function.strict", "invalid_type"
        )
    return Function(name, parameters, description)


def _choice(value: Any, functions: Sequence[Function]) -> tuple[str, str | None]:
    if value is None:
        return "auto", None
    if isinstance(value, str):
        if value not in _CHOICES:
            raise _bad(
                f"'tool_choice' must be none, auto, required or a named function, got {value!r}",
                "tool_choice",
            )
        return value, None
    spec = value.get("function") if isinstance(value, Mapping) and value.get("type") == "function" else None
    name = spec.get("name") if isinstance(spec, Mapping) else None
    if not isinstance(name, str):
        raise _bad(
            '\'tool_choice\' must be a string or {"type": "function", "function": {"name": ...}}',
            "tool_choice",
            "invalid_type",
        )
    if not any(f.name == name for f in functions):
        raise _bad(
            f"'tool_choice' names the function {name!r}, which is not in 'tools'", "tool_choice.function.name"
        )
    return "function", name


def parse_tools(body: Mapping[str, Any], *, response_format: bool) -> Tools | None:
    """``tools``, ``tool_choice`` and ``parallel_tool_calls`` of a chat body, checked; None when
    the request gives no tools."""
    raw = body.get("tools")
    choice = body.get("tool_choice")
    parallel = body.get("parallel_tool_calls")
    if parallel is not None and not isinstance(parallel, bool):
        raise _bad("'parallel_tool_calls' must be true or false", "parallel_tool_calls", "invalid_type")
    if raw is None or raw == []:
        if choice is not None and choice != "none":
            raise _bad("'tool_choice' needs 'tools'", "tool_choice")
        return None
    if not isinstance(raw, list):
        raise _bad("'tools' must be an array of function tools", "tools", "invalid_type")
    if len(raw) > MAX_TOOLS:
        raise _bad(f"{len(raw)} tools; this server takes at most {MAX_TOOLS}", "tools")
    functions = tuple(_function(item, f"tools[{i}]") for i, item in enumerate(raw))
    names = [f.name for f in functions]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise _bad(f"'tools' names {', '.join(twice)} more than once", "tools")
    mode, name = _choice(choice, functions)
    tools = Tools(functions, mode, name, parallel is not False)
    if tools.enforced and response_format:
        raise _bad(
            "'tool_choice' required or a named function fixes the answer's format; "
            "it cannot be combined with 'response_format'",
            "tool_choice",
        )
    return tools


def assistant_tool_calls(value: Any, where: str) -> tuple[dict[str, Any], ...]:
    """An assistant message's ``tool_calls``, checked, as chat templates take them (``arguments``
    an object when it is JSON, as Hugging Face templates expect)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise _bad(f"'{where}' must be an array of tool calls", where, "invalid_type")
    calls = []
    for i, call in enumerate(value):
        at = f"{where}[{i}]"
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping) or call.get("type", "function") != "function":
            raise _bad(f'\'{at}\' must be {{"id", "type": "function", "function": {{...}}}}', at)
        call_id, name, arguments = call.get("id"), function.get("name"), function.get("arguments")
        if not isinstance(call_id, str) or not call_id:
            raise _bad(f"'{at}.id' must be a string", f"{at}.id", "invalid_type")
        if not isinstance(name, str) or not name:
            raise _bad(f"'{at}.function.name' must be a string", f"{at}.function.name", "invalid_type")
        if not isinstance(arguments, str):
            raise _bad(
                f"'{at}.function.arguments' must be a JSON string", f"{at}.function.arguments", "invalid_type"
            )
        try:
            parsed: Any = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            parsed = arguments
        calls.append({"id": call_id, "type": "function", "function": {"name": name, "arguments": parsed}})
    return tuple(calls)


def check_tool_turns(roles: Sequence[str], ids: Sequence[str | None], calls: Sequence[Sequence[str]]) -> None:
    """Each ``tool`` message answers a call of the assistant message before it (by its
    ``tool_call_id``), as OpenAI requires. ``calls[i]``: the ids of message i's tool calls."""
    open_ids: set[str] = set()
    for i, (role, call_id) in enumerate(zip(roles, ids, strict=True)):
        if role == "assistant":
            open_ids = set(calls[i])
        elif role == "tool":
            where = f"messages[{i}].tool_call_id"
            if call_id is None:
                raise _bad(f"'{where}' is required in a tool message", where, "missing_required_parameter")
            if call_id not in open_ids:
                raise _bad(
                    f"'{where}' ({call_id!r}) answers no tool call of the assistant message before it",
                    where,
                )
        else:
            open_ids = set()
