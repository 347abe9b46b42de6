"""Tool calls end to end: the official ``openai`` client (sync, async, streamed), tritonkit's
front, a real tritonserver and the tiny random-weight vLLM engine, whose chat template speaks the
Hermes tool format.

Its text is nonsense, which is the point: with ``tool_choice`` ``required`` or a named function
only the engine's structured output can make every call name a known tool with arguments that
validate against that tool's schema (the ``jsonschema`` package checks each).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.integration.test_openai_structured import LLM, front

openai = pytest.importorskip("openai")
jsonschema = pytest.importorskip("jsonschema")

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

__all__ = ["front"]  # the module-scoped server of the structured-output tests, one per module

_WORD = {"type": "string", "maxLength": 10}
SCHEMAS: dict[str, dict[str, Any]] = {
    "get_weather": {
        "type": "object",
        "properties": {"city": _WORD, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"],
        "additionalProperties": False,
    },
    "add": {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "minimum": -100, "maximum": 100},
            "b": {"type": "number", "minimum": 0, "maximum": 1},
        },
        "required": ["a", "b"],
        "additionalProperties": False,
    },
    "tag_items": {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"enum": ["red", "green"]}, "minItems": 1, "maxItems": 3},
            "urgent": {"type": "boolean"},
        },
        "required": ["tags", "urgent"],
        "additionalProperties": False,
    },
}
#: strict: the official client's stream helper parses only strict tools' arguments
TOOLS = [
    {
        "type": "function",
        "function": {"name": name, "description": f"The {name} tool.", "parameters": schema, "strict": True},
    }
    for name, schema in SCHEMAS.items()
]
USER = [{"role": "user", "content": "Use a tool, please."}]
COMMON: dict[str, Any] = {"model": LLM, "tools": TOOLS, "max_tokens": 160, "temperature": 1.0}


def _named(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name}}


async def _ask(client: Any, choice: Any, seed: int, *, stream: bool) -> tuple[list[tuple[str, str]], str]:
    """One answer's calls as (name, arguments) and its finish_reason."""
    fields = {**COMMON, "messages": USER, "tool_choice": choice, "seed": seed, "parallel_tool_calls": False}
    if not stream:
        answer = await client.chat.completions.create(**fields)
        message = answer.choices[0].message
        if message.tool_calls:
            assert message.content is None, message
        calls = [(c.function.name, c.function.arguments) for c in message.tool_calls or []]
        return calls, answer.choices[0].finish_reason
    # the official stream helper: its ChatCompletionStreamState accumulates the tool-call deltas
    # (and parses each call's arguments as JSON when they are done)
    async with client.chat.completions.stream(**fields) as events:
        try:
            async for _ in events:
                pass
        except openai.LengthFinishReasonError:  # the helper refuses a cut answer: counted as cut
            return [], "length"
        snapshot = events.current_completion_snapshot.choices[0]
    calls = [(c.function.name, c.function.arguments) for c in snapshot.message.tool_calls or []]
    return calls, snapshot.finish_reason or ""


def test_required_and_named_tool_calls_validate_against_the_tools_schemas_streamed_and_not(
    front: dict[str, Any],
) -> None:
    choices: list[Any] = ["required", *(_named(name) for name in SCHEMAS)]
    ways = [(choice, seed, stream) for choice in choices for seed in range(3) for stream in (False, True)]

    async def run() -> list[Any]:
        client = openai.AsyncOpenAI(base_url=front["url"], api_key="none", max_retries=0, timeout=600)
        async with client:
            return await asyncio.gather(
                *(_ask(client, choice, seed, stream=stream) for choice, seed, stream in ways),
                return_exceptions=True,
            )

    answers = asyncio.run(run())
    failures, cut, valid = [], [], 0
    for (choice, seed, stream), answer in zip(ways, answers, strict=True):
        where = f"{choice} seed {seed} ({'streamed' if stream else 'unary'})"
        if isinstance(answer, BaseException):
            failures.append(f"{where}: {answer!r}")
            continue
        calls, reason = answer
        if reason == "length":  # cut at max_tokens: arguments incomplete (no free whitespace: none)
            cut.append(where)
            continue
        if reason != "tool_calls" or len(calls) != 1:
            failures.append(f"{where}: finish {reason}, calls {calls}")
            continue
        name, arguments = calls[0]
        if isinstance(choice, dict) and name != choice["function"]["name"]:
            failures.append(f"{where}: called {name}")
            continue
        try:
            jsonschema.validate(json.loads(arguments), SCHEMAS[name])
            valid += 1
        except (KeyError, ValueError, jsonschema.ValidationError) as exc:
            failures.append(f"{where}: {name}({arguments!r}): {str(exc)[:200]}")
    assert len(ways) == 24
    print(f"tool calls: {valid} valid, {len(cut)} cut at max_tokens, {len(failures)} invalid of {len(ways)}")
    # every answer finishes as one call to a known tool whose arguments validate: 100% (tiny_llm's
    # STRUCTURED_OUTPUTS_CONFIG allows the grammar no free whitespace, so none runs into max_tokens)
    assert not failures, f"{len(failures)}/{len(ways)} answers invalid:\n" + "\n".join(failures)
    assert not cut, f"{len(cut)}/{len(ways)} cut at max_tokens: {cut}"
    assert valid == len(ways)


def test_a_two_turn_tool_conversation_through_the_official_client(front: dict[str, Any]) -> None:
    client = openai.OpenAI(base_url=front["url"], api_key="none", max_retries=0, timeout=600)
    first = client.chat.completions.create(
        **COMMON, messages=USER, tool_choice=_named("add"), seed=1, parallel_tool_calls=False
    )
    message = first.choices[0].message
    assert first.choices[0].finish_reason == "tool_calls", first
    (call,) = message.tool_calls
    assert call.id.startswith("call_") and call.type == "function" and call.function.name == "add"
    result = sum(json.loads(call.function.arguments).values())
    turns = [
        *USER,
        message.model_dump(exclude_none=True),  # the assistant's calls, as the client hands them back
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"sum": result})},
    ]
    second = client.chat.completions.create(**COMMON, messages=turns, tool_choice="auto", seed=2)
    answer = second.choices[0]
    assert answer.finish_reason in ("stop", "length", "tool_calls"), answer
    assert answer.message.content or answer.message.tool_calls  # nonsense, but an answer
    # the same turns with tool_choice none: plain text, no calls
    third = client.chat.completions.create(
        **{**COMMON, "max_tokens": 8}, messages=turns, tool_choice="none", seed=2
    )
    assert third.choices[0].message.tool_calls is None and third.choices[0].message.content


def test_auto_streams_content_or_calls_through_the_official_stream_helper(front: dict[str, Any]) -> None:
    client = openai.OpenAI(base_url=front["url"], api_key="none", max_retries=0, timeout=600)
    with client.chat.completions.stream(**{**COMMON, "max_tokens": 24}, messages=USER, seed=5) as events:
        try:
            for _ in events:
                pass
        except openai.LengthFinishReasonError:  # the helper refuses a cut answer; its snapshot stays
            pass
        snapshot = events.current_completion_snapshot.choices[0]
    assert snapshot.finish_reason in ("stop", "length", "tool_calls")
    if snapshot.finish_reason == "tool_calls":
        assert snapshot.message.tool_calls
    else:  # the random model wrote no whole <tool_call>: all of it is content
        assert snapshot.message.content and not snapshot.message.tool_calls


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"tool_choice": _named("nope")}, "tool_choice.function.name"),
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": 1}}}]}, "tools"),
        ({"tools": None, "tool_choice": "required"}, "tool_choice"),
    ],
)
def test_bad_tools_are_a_400_naming_the_field_through_the_server(
    front: dict[str, Any], fields: dict[str, Any], param: str
) -> None:
    client = openai.OpenAI(base_url=front["url"], api_key="none", max_retries=0, timeout=600)
    body = {**COMMON, "messages": USER, **fields}
    if body["tools"] is None:
        del body["tools"]
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(**body)
    assert caught.value.body["param"].startswith(param), caught.value.body
