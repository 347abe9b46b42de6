"""Tools in the front: request checks (400 naming the field), the enforced schemas, the parsers
built from each family's documented output format, and streamed tool-call deltas as the official
``openai`` client's stream state accumulates them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests._examples import load_example
from tritonkit.openai_front import ChatTemplate, Limits, OpenAIError
from tritonkit.openai_front.requests import parse_chat, parse_completion
from tritonkit.openai_front.sse import ChunkTemplate
from tritonkit.openai_front.tool_parsers import (
    ToolStream,
    check_served,
    detect_parser,
    parse_calls,
    shape_answer,
)
from tritonkit.openai_front.tools import Tools

LIMITS = Limits()
USER = [{"role": "user", "content": "Weather in Paris?"}]
WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 20},
        "unit": {"type": "string", "enum": ["c", "f"]},
    },
    "required": ["city", "unit"],
    "additionalProperties": False,
}
TIME = {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]}


def _tool(name: str, parameters: Any = None) -> dict[str, Any]:
    function: dict[str, Any] = {"name": name, "description": f"{name} tool"}
    if parameters is not None:
        function["parameters"] = parameters
    return {"type": "function", "function": function}


TOOLS = [_tool("get_weather", WEATHER), _tool("get_time", TIME)]


def _chat(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "messages": USER, "tools": TOOLS, **fields}


# -- requests ------------------------------------------------------------------------------
def test_tools_default_to_auto_and_are_offered_to_the_template_as_hugging_face_takes_them() -> None:
    request = parse_chat(_chat(), LIMITS)
    assert request.tools is not None and request.tools.choice == "auto"
    assert request.sampling.structured is None  # auto: the model's text is parsed, not held
    offered = request.tools.template_tools()
    assert offered is not None
    assert offered[0] == {
        "type": "function",
        "function": {"name": "get_weather", "description": "get_weather tool", "parameters": WEATHER},
    }
    none = parse_chat(_chat(tool_choice="none"), LIMITS)
    assert none.tools is not None and none.tools.template_tools() is None and not none.tools.enforced


def test_a_named_function_is_held_to_its_parameters_schema() -> None:
    request = parse_chat(_chat(tool_choice={"type": "function", "function": {"name": "get_time"}}), LIMITS)
    assert request.tools is not None and request.tools.choice == "function"
    assert request.sampling.structured == {"json": TIME}
    sent = request.sampling.vllm(default_max_tokens=8)
    assert json.loads(sent["structured_outputs"]) == {"json": TIME}


def test_required_is_an_array_of_calls_any_of_the_tools_each_name_a_const() -> None:
    request = parse_chat(_chat(tool_choice="required", parallel_tool_calls=False), LIMITS)
    structured = request.sampling.structured
    assert structured is not None
    schema = structured["json"]
    assert schema["type"] == "array" and schema["minItems"] == 1 and schema["maxItems"] == 1
    options = schema["items"]["anyOf"]
    assert [o["properties"]["name"] for o in options] == [{"const": "get_weather"}, {"const": "get_time"}]
    # the bounded string is said as a pattern without control characters (json_safe_strings)
    city = options[0]["properties"]["parameters"]["properties"]["city"]
    assert "maxLength" not in city and city["pattern"].endswith("{0,20}$")
    assert options[1]["properties"]["parameters"] == TIME
    parallel = parse_chat(_chat(tool_choice="required"), LIMITS).sampling.structured
    assert parallel is not None and "maxItems" not in parallel["json"]


def test_a_function_without_parameters_takes_an_empty_object() -> None:
    request = parse_chat(
        _chat(tools=[_tool("ping")], tool_choice={"type": "function", "function": {"name": "ping"}}), LIMITS
    )
    assert request.sampling.structured == {
        "json": {"type": "object", "properties": {}, "additionalProperties": False}
    }


@pytest.mark.parametrize(
    ("fields", "param", "words"),
    [
        ({"tools": {"a": 1}}, "tools", "array of function tools"),
        ({"tools": [{"type": "retrieval"}]}, "tools[0]", '"type": "function"'),
        ({"tools": [{"type": "function", "function": {"name": "a b"}}]}, "tools[0].function.name", "1-64"),
        ({"tools": [_tool("a", [])]}, "tools[0].function.parameters", "JSON schema"),
        ({"tools": [_tool("a", {"type": "string"})]}, "tools[0].function.parameters", "object schema"),
        ({"tools": [_tool("a", {"type": "objekt"})]}, "tools[0].function.parameters.type", "one of"),
        (
            {"tools": [_tool("a", {"type": "object", "properties": {"x": {"type": 3}}})]},
            "tools[0].function.parameters.properties.x.type",
            "one of",
        ),
        (
            {"tools": [_tool("a", {"type": "object", "required": "x"})]},
            "tools[0].function.parameters.required",
            "property names",
        ),
        (
            {"tools": [_tool("a", {"type": "object", "properties": {"x": {"anyOf": []}}})]},
            "tools[0].function.parameters.properties.x.anyOf",
            "non-empty array",
        ),
        ({"tools": [_tool("a"), _tool("a")]}, "tools", "more than once"),
        ({"tool_choice": "always"}, "tool_choice", "none, auto, required"),
        ({"tool_choice": {"type": "function"}}, "tool_choice", "a string or"),
        (
            {"tool_choice": {"type": "function", "function": {"name": "nope"}}},
            "tool_choice.function.name",
            "not in 'tools'",
        ),
        ({"tools": None, "tool_choice": "required"}, "tool_choice", "needs 'tools'"),
        ({"parallel_tool_calls": "yes"}, "parallel_tool_calls", "true or false"),
        (
            {"tool_choice": "required", "response_format": {"type": "json_object"}},
            "tool_choice",
            "response_format",
        ),
        ({"logprobs": True}, "logprobs", "not returned with 'tools'"),
    ],
)
def test_bad_tools_are_a_400_naming_the_field(fields: dict[str, Any], param: str, words: str) -> None:
    with pytest.raises(OpenAIError) as caught:
        parse_chat(_chat(**fields), LIMITS)
    error = caught.value
    assert error.status == 400 and error.param == param and words in error.message, error.body()


def test_completions_refuse_tools_naming_the_field() -> None:
    with pytest.raises(OpenAIError) as caught:
        parse_completion({"model": "m", "prompt": "x", "tools": TOOLS}, LIMITS)
    assert caught.value.status == 400 and caught.value.param == "tools"


CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
}
TURNS = [
    *USER,
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "call_1", "content": "22 C"},
]


def test_a_tool_turn_carries_its_calls_and_answers_to_the_template() -> None:
    messages = parse_chat(_chat(messages=TURNS), LIMITS).messages
    assert messages[1].tool_calls == (
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
        },
    )
    assert messages[2].tool_call_id == "call_1" and messages[2].text == "22 C"


@pytest.mark.parametrize(
    ("messages", "param", "words"),
    [
        ([*USER, {"role": "tool", "content": "x"}], "messages[1].tool_call_id", "required"),
        (
            [*TURNS[:2], {"role": "tool", "tool_call_id": "call_9", "content": "x"}],
            "messages[2].tool_call_id",
            "answers no tool call",
        ),
        (
            [
                *USER,
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {}}}],
                },
            ],
            "messages[1].tool_calls[0].function.arguments",
            "JSON string",
        ),
        ([*USER, {"role": "assistant", "tool_calls": {"id": "c"}}], "messages[1].tool_calls", "array"),
    ],
)
def test_bad_tool_turns_are_a_400_naming_the_field(messages: Any, param: str, words: str) -> None:
    with pytest.raises(OpenAIError) as caught:
        parse_chat(_chat(messages=messages), LIMITS)
    assert caught.value.param == param and words in caught.value.message, caught.value.body()


def test_the_tiny_models_template_renders_tools_calls_and_answers_in_the_hermes_form() -> None:
    tiny = load_example("ensembles/llm/tiny_llm.py")
    template = ChatTemplate(tiny.CHAT_TEMPLATE, bos_token="<s>", eos_token="</s>")
    assert template.takes_tools and template.tool_parser == "hermes"
    request = parse_chat(_chat(messages=TURNS), LIMITS)
    assert request.tools is not None
    prompt = template.render(request.messages, request.tools.template_tools())
    assert prompt.startswith("<s><|system|>\n") and '"name": "get_weather"' in prompt
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call></s>' in prompt
    assert "<|tool|>\n<tool_response>\n22 C\n</tool_response></s>\n<|assistant|>\n" in prompt
    # without tools the prompt is what it always was
    plain = template.render(parse_chat({"model": "m", "messages": USER}, LIMITS).messages)
    assert plain == "<s><|user|>\nWeather in Paris?</s>\n<|assistant|>\n"


def test_detect_parser_reads_the_templates_tool_format() -> None:
    assert detect_parser("{{ '<tool_call>' }}") == "hermes"
    assert detect_parser("{{- '<|python_tag|>' }}{{ tools }}") == "llama3_json"
    assert detect_parser("{{ messages }}") is None


# -- who may take tools --------------------------------------------------------------------
def _served(tools: Tools, **fields: Any) -> None:
    given: dict[str, Any] = {
        "model": "m",
        "llm_stage": True,
        "template_takes_tools": True,
        "parser": "hermes",
    }
    check_served(tools, **{**given, **fields})


def test_a_pipeline_or_a_template_without_tools_or_auto_without_a_parser_refuse_tools() -> None:
    auto = parse_chat(_chat(), LIMITS).tools
    required = parse_chat(_chat(tool_choice="required"), LIMITS).tools
    assert auto is not None and required is not None
    for tools, fields, param in [
        (auto, {"llm_stage": False}, "tools"),
        (required, {"llm_stage": False}, "tools"),
        (auto, {"template_takes_tools": False}, "tools"),
        (auto, {"parser": None}, "tool_choice"),
    ]:
        with pytest.raises(OpenAIError) as caught:
            _served(tools, **fields)
        assert caught.value.status == 400 and caught.value.param == param, (fields, caught.value.body())
    _served(required, parser=None)  # enforced: no parser needed


# -- parsers: the families' documented formats ---------------------------------------------
HERMES_ONE = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}\n</tool_call>'
HERMES_TWO = (
    "Let me check.\n"
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}\n</tool_call>\n'
    '<tool_call>\n{"name": "get_time", "arguments": {"zone": "CET"}}\n</tool_call>'
)


def test_hermes_parser_reads_one_or_several_calls_and_the_text_before_them() -> None:
    content, calls = parse_calls("hermes", HERMES_ONE)
    assert content is None and [(c.name, json.loads(c.arguments)) for c in calls] == [
        ("get_weather", {"city": "Paris", "unit": "c"})
    ]
    content, calls = parse_calls("hermes", HERMES_TWO)
    assert content == "Let me check." and [c.name for c in calls] == ["get_weather", "get_time"]
    assert all(c.id.startswith("call_") for c in calls) and calls[0].id != calls[1].id
    # the last call left unclosed at the end of the answer still counts
    _, calls = parse_calls("hermes", '<tool_call>\n{"name": "get_time", "arguments": {"zone": "UTC"}}\n')
    assert [c.name for c in calls] == ["get_time"]


@pytest.mark.parametrize(
    "text",
    [
        "Just text, no call.",
        "<tool_call>\n{not json}\n</tool_call>",
        '<tool_call>\n{"arguments": {}}\n</tool_call>',
        '<tool_call>\n{"name": "f", "arguments": [1]}\n</tool_call>',
        '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call> and then some prose',
    ],
)
def test_hermes_text_that_is_not_calls_stays_text(text: str) -> None:
    assert parse_calls("hermes", text) == (text, [])


def test_llama3_json_parser_reads_the_json_call_form() -> None:
    content, calls = parse_calls("llama3_json", '{"name": "get_time", "parameters": {"zone": "CET"}}')
    assert content is None and [(c.name, json.loads(c.arguments)) for c in calls] == [
        ("get_time", {"zone": "CET"})
    ]
    _, calls = parse_calls(
        "llama3_json",
        '<|python_tag|>{"name": "get_time", "parameters": {"zone": "CET"}}; '
        '{"name": "get_weather", "parameters": {"city": "Oslo", "unit": "c"}}',
    )
    assert [c.name for c in calls] == ["get_time", "get_weather"]
    for text in ("The time is noon.", '{"name": "f"} trailing', '{"nom": "f", "parameters": {}}'):
        assert parse_calls("llama3_json", text) == (text, []), text


def test_shape_answer_reads_enforced_answers_and_keeps_a_cut_one_as_text() -> None:
    named = parse_chat(
        _chat(tool_choice={"type": "function", "function": {"name": "get_time"}}), LIMITS
    ).tools
    content, calls, reason = shape_answer(named, None, '{"zone": "CET"}', "stop")
    assert (
        content is None
        and reason == "tool_calls"
        and [(c.name, c.arguments) for c in calls] == [("get_time", '{"zone": "CET"}')]
    )
    required = parse_chat(_chat(tool_choice="required"), LIMITS).tools
    text = '[{"name": "get_time", "parameters": {"zone": "UTC"}}, {"name": "get_weather", "parameters": {}}]'
    _, calls, reason = shape_answer(required, None, text, "stop")
    assert [c.name for c in calls] == ["get_time", "get_weather"] and reason == "tool_calls"
    assert shape_answer(required, None, '[{"name": "get_ti', "length") == ('[{"name": "get_ti', [], "length")
    auto = parse_chat(_chat(), LIMITS).tools
    assert shape_answer(auto, "hermes", "plain", "stop") == ("plain", [], "stop")
    assert shape_answer(None, None, HERMES_ONE, "stop") == (HERMES_ONE, [], "stop")


# -- streamed deltas, as the official client accumulates them ------------------------------
def _streamed(tools: Tools | None, parser: str | None, pieces: list[str], reason: str = "stop") -> Any:
    """The final message the official client's ChatCompletionStreamState makes of our chunks."""
    from openai.lib.streaming.chat import ChatCompletionStreamState
    from openai.types.chat import ChatCompletionChunk

    assert tools is not None
    chunks = ChunkTemplate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "m",
            "system_fingerprint": None,
        },
        chat=True,
        usage_slot=False,
    )
    stream = ToolStream(tools, parser)
    events = [chunks.opening(0, None)]
    for piece in pieces:
        events += [chunks.fields(0, d) for d in stream.feed(piece)]
    deltas, finish = stream.end(reason)
    events += [chunks.fields(0, d) for d in deltas]
    events.append(chunks.finish(0, finish))
    state = ChatCompletionStreamState()
    for raw in events:
        payload = json.loads(raw.decode().removeprefix("data: "))
        state.handle_chunk(ChatCompletionChunk.model_validate(payload))
    if finish == "length":  # the client's final completion refuses a cut answer: its snapshot
        return state.current_completion_snapshot.choices[0]
    return state.get_final_completion().choices[0]


def _pieces(text: str, size: int = 3) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


@pytest.mark.parametrize("size", [1, 3, 7, 1000])
def test_streamed_hermes_calls_accumulate_as_the_unary_answer(size: int) -> None:
    tools = parse_chat(_chat(), LIMITS).tools
    choice = _streamed(tools, "hermes", _pieces(HERMES_TWO, size))
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content.strip() == "Let me check."
    calls = choice.message.tool_calls
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("get_weather", {"city": "Paris", "unit": "c"}),
        ("get_time", {"zone": "CET"}),
    ]
    assert all(c.id.startswith("call_") and c.type == "function" for c in calls)


def test_streamed_text_without_calls_is_all_content_even_a_partial_marker() -> None:
    tools = parse_chat(_chat(), LIMITS).tools
    text = "Paris is sunny <tool_ but no call"
    choice = _streamed(tools, "hermes", _pieces(text, 2))
    assert choice.message.content == text and not choice.message.tool_calls and choice.finish_reason == "stop"


def test_streamed_llama3_json_call_and_plain_text() -> None:
    tools = parse_chat(_chat(), LIMITS).tools
    call = '<|python_tag|>{"name": "get_time", "parameters": {"zone": "CET"}}'
    choice = _streamed(tools, "llama3_json", _pieces(call, 2))
    assert [c.function.name for c in choice.message.tool_calls] == ["get_time"] and not choice.message.content
    choice = _streamed(tools, "llama3_json", _pieces("  Noon, I think.", 2))
    assert choice.message.content == "  Noon, I think." and not choice.message.tool_calls


def test_streamed_named_function_sends_its_arguments_in_pieces() -> None:
    tools = parse_chat(
        _chat(tool_choice={"type": "function", "function": {"name": "get_time"}}), LIMITS
    ).tools
    assert tools is not None
    stream = ToolStream(tools, None)
    first, second = stream.feed('{"zone"'), stream.feed(': "CET"}')
    assert first[0]["tool_calls"][0]["function"] == {"name": "get_time", "arguments": '{"zone"'}
    assert second == [{"tool_calls": [{"index": 0, "function": {"arguments": ': "CET"}'}}]}]
    choice = _streamed(tools, None, ['{"zone"', ': "CET"}'])
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    assert json.loads(choice.message.tool_calls[0].function.arguments) == {"zone": "CET"}


def test_streamed_required_calls_come_whole_at_the_end_and_a_cut_answer_as_text() -> None:
    tools = parse_chat(_chat(tool_choice="required"), LIMITS).tools
    text = '[{"name": "get_time", "parameters": {"zone": "UTC"}}]'
    choice = _streamed(tools, None, _pieces(text, 4))
    assert [(c.function.name, c.function.arguments) for c in choice.message.tool_calls] == [
        ("get_time", '{"zone": "UTC"}')
    ]
    cut = _streamed(tools, None, ['[{"name": "get_'], reason="length")
    assert cut.finish_reason == "length" and cut.message.content == '[{"name": "get_'


def test_tool_parser_option_names_a_known_parser_per_model() -> None:
    from tritonkit.cli.openai import front_settings
    from tritonkit.errors import ConfigError

    common: dict[str, Any] = {
        "protocol": "grpc",
        "auth": None,
        "cacert": None,
        "api_key_file": None,
        "chat_templates": [],
        "image_url_prefixes": [],
        "repository": None,
        "models": [],
    }
    settings = front_settings("grpc://x:1", **common, tool_parsers=["llama=llama3_json", "qwen=hermes"])
    assert settings.tool_parsers == {"llama": "llama3_json", "qwen": "hermes"}
    with pytest.raises(ConfigError, match="unknown tool parser 'mistral'"):
        front_settings("grpc://x:1", **common, tool_parsers=["m=mistral"])
