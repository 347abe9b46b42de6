"""Request bodies: every wrong field is a 400 naming it; the sampling sent to vLLM."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tritonkit.openai_front import Limits, OpenAIError
from tritonkit.openai_front.requests import Message, conversation_text, parse_chat, parse_completion

LIMITS = Limits(max_messages=3, max_prompt_chars=50, max_images=1, max_n=4)
USER = [{"role": "user", "content": "hi"}]


def _chat(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "messages": USER, **fields}


def test_parse_chat_reads_sampling_as_vllm_names_it() -> None:
    req = parse_chat(
        _chat(
            max_completion_tokens=8,
            temperature=0,
            top_p=0.5,
            seed=7,
            stop="END",
            presence_penalty=1,
            frequency_penalty=-1,
            n=2,
            logprobs=True,
            top_logprobs=3,
        ),
        LIMITS,
    )
    assert req.n == 2 and req.logprobs
    assert req.sampling.vllm(default_max_tokens=99, choice=1) == {
        "max_tokens": 8,
        "temperature": 0.0,
        "top_p": 0.5,
        "presence_penalty": 1.0,
        "frequency_penalty": -1.0,
        "logprobs": 3,
        "seed": 8,
        "stop": ["END"],
    }


SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


@pytest.mark.parametrize(
    ("response_format", "structured"),
    [
        (None, None),
        ({"type": "text"}, None),
        ({"type": "json_object"}, {"json_object": True}),
        (
            {"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA, "strict": True}},
            {"json": SCHEMA},
        ),
        ({"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA}}, {"json": SCHEMA}),
    ],
)
def test_response_format_becomes_vllms_structured_outputs_as_a_json_string(
    response_format: Any, structured: Any
) -> None:
    for parse, body in (
        (parse_chat, _chat(response_format=response_format)),
        (parse_completion, {"model": "m", "prompt": "x", "response_format": response_format}),
    ):
        sampling = parse(body, LIMITS).sampling
        assert sampling.structured == structured
        sent = sampling.vllm(default_max_tokens=9).get("structured_outputs")
        assert (json.loads(sent) if sent is not None else None) == structured
        assert ("response_format" in sampling.generation_options) == (structured is not None)


def test_parse_chat_forwards_vllms_extensions_and_lets_max_completion_tokens_win() -> None:
    sampling = parse_chat(
        _chat(
            max_tokens=3,
            max_completion_tokens=6,
            min_tokens=2,
            ignore_eos=True,
            stop_token_ids=[5, 9],
            logit_bias={"17": -100, "3": 2.5},
        ),
        LIMITS,
    ).sampling
    assert sampling.vllm(default_max_tokens=99) == {
        "max_tokens": 6,
        "min_tokens": 2,
        "ignore_eos": True,
        "stop_token_ids": [5, 9],
        "logit_bias": {"17": -100.0, "3": 2.5},
    }
    assert sampling.generation_options == ["min_tokens", "ignore_eos", "stop_token_ids", "logit_bias"]


def test_parse_chat_uses_the_default_max_tokens_when_none_is_given() -> None:
    assert parse_chat(_chat(), LIMITS).sampling.vllm(default_max_tokens=99) == {"max_tokens": 99}
    assert parse_chat(_chat(max_tokens=5), LIMITS).sampling.max_tokens == 5


def test_parse_chat_reads_text_and_image_parts() -> None:
    content = [
        {"type": "text", "text": "a"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}},
        {"type": "text", "text": "b"},
    ]
    req = parse_chat(_chat(messages=[{"role": "user", "content": content}]), LIMITS)
    (message,) = req.messages
    assert message.text == "a\nb" and [i.param for i in message.images] == [
        "messages[0].content[1].image_url"
    ]


@pytest.mark.parametrize(
    ("body", "param", "words"),
    [
        ([1, 2], None, "must be a JSON object"),
        ({"messages": USER}, "model", "'model' is required"),
        (_chat(messages=[]), "messages", "non-empty array"),
        (_chat(messages=[{"role": "robot", "content": "x"}]), "messages[0].role", "must be one of"),
        (_chat(messages=[{"role": "user", "content": 5}]), "messages[0].content", "string or an array"),
        (
            _chat(messages=[{"role": "user", "content": [{"type": "audio"}]}]),
            "messages[0].content[0]",
            "part",
        ),
        (_chat(messages=USER * 4), "messages", "at most 3"),
        (_chat(messages=[{"role": "user", "content": "x" * 51}]), "messages", "at most 50"),
        (_chat(temperature="hot"), "temperature", "must be a number"),
        (_chat(temperature=3), "temperature", "between 0 and 2"),
        (_chat(temperature=True), "temperature", "must be a number"),
        (_chat(max_tokens=0), "max_tokens", "at least 1"),
        (_chat(max_tokens=1.5), "max_tokens", "an integer"),
        (_chat(min_tokens=-1), "min_tokens", "at least 0"),
        (_chat(min_tokens=5, max_tokens=4), "min_tokens", "more than the max_tokens"),
        (_chat(ignore_eos=123), "ignore_eos", "true or false"),
        (_chat(stop_token_ids=[1, -2]), "stop_token_ids", "token ids"),
        (_chat(stop_token_ids="1"), "stop_token_ids", "token ids"),
        (_chat(logit_bias={"a": 1}), "logit_bias", "keys must be token ids"),
        (_chat(logit_bias={"5": 101}), "logit_bias", "between -100 and 100"),
        (_chat(logit_bias=[1]), "logit_bias", "an object"),
        (_chat(response_format={"type": "xml"}), "response_format", "one of text, json_object, json_schema"),
        (_chat(response_format="json"), "response_format", "an object"),
        (
            _chat(response_format={"type": "json_schema"}),
            "response_format.json_schema",
            "'name' and 'schema'",
        ),
        (
            _chat(response_format={"type": "json_schema", "json_schema": {"name": "a b", "schema": {}}}),
            "response_format.json_schema.name",
            "1-64 letters",
        ),
        (
            _chat(response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": []}}),
            "response_format.json_schema.schema",
            "a JSON schema",
        ),
        (
            _chat(
                response_format={
                    "type": "json_schema",
                    "json_schema": {"name": "a", "schema": {}, "strict": 1},
                }
            ),
            "response_format.json_schema.strict",
            "true or false",
        ),
        (_chat(n=5), "n", "between 1 and 4"),
        (_chat(stop=["a", ""]), "stop", "'stop'"),
        (_chat(stream="yes"), "stream", "true or false"),
        (_chat(stream_options={"include_usage": True}), "stream_options", "only allowed with stream"),
        (_chat(functions=[{"name": "f"}]), "functions", "not supported"),
        (_chat(top_logprobs=2), "top_logprobs", "needs 'logprobs'"),
        (
            _chat(
                messages=[
                    {"role": "assistant", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}
                ]
            ),
            "messages[0].content",
            "only user messages",
        ),
    ],
)
def test_parse_chat_refuses_a_wrong_field_with_400_naming_it(
    body: Any, param: str | None, words: str
) -> None:
    with pytest.raises(OpenAIError) as caught:
        parse_chat(body, LIMITS)
    error = caught.value
    assert error.status == 400 and error.param == param and words in error.message, error.body()
    assert set(error.body()["error"]) == {"message", "type", "param", "code"}


def test_parse_completion_takes_one_text_prompt_and_echo() -> None:
    req = parse_completion(
        {
            "model": "m",
            "prompt": ["Once"],
            "echo": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
        LIMITS,
    )
    assert req.prompt == "Once" and req.echo and req.stream and req.include_usage
    # best_of equal to n asks nothing more than n does
    assert parse_completion({"model": "m", "prompt": "x", "n": 2, "best_of": 2}, LIMITS).n == 2


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"model": "m", "prompt": [1, 2, 3]}, "token arrays"),
        ({"model": "m", "prompt": ["a", "b"]}, "one prompt per request"),
        ({"model": "m", "prompt": "  "}, "is empty"),
        ({"model": "m", "prompt": "x" * 51}, "at most 50"),
        ({"model": "m", "prompt": "x", "logprobs": 6}, "between 0 and 5"),
        ({"model": "m", "prompt": "x", "logprobs": 1, "echo": True}, "'echo' with 'logprobs'"),
        ({"model": "m", "prompt": "x", "best_of": 2}, "'best_of' (2) must equal 'n' (1)"),
        ({"model": "m", "prompt": "x", "n": 2, "best_of": 1}, "'best_of' (1) must equal 'n' (2)"),
        ({"model": "m", "prompt": "x", "best_of": 0}, "at least 1"),
    ],
)
def test_parse_completion_refuses_what_it_cannot_carry(body: dict[str, Any], words: str) -> None:
    with pytest.raises(OpenAIError) as caught:
        parse_completion(body, LIMITS)
    assert caught.value.status == 400 and words in caught.value.message


def test_conversation_text_is_one_user_message_verbatim_else_role_lines() -> None:
    assert conversation_text([Message("user", "Describe the image.")]) == "Describe the image."
    turns = [
        Message("system", "Be brief."),
        Message("user", "Hi"),
        Message("assistant", "Hello"),
        Message("user", "Why?"),
    ]
    assert conversation_text(turns) == "system: Be brief.\nuser: Hi\nassistant: Hello\nuser: Why?"


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"seed": 1}, "seed"),
        ({"min_tokens": 1}, "min_tokens"),
        ({"ignore_eos": False}, "ignore_eos"),
        ({"stop_token_ids": [2]}, "stop_token_ids"),
        ({"logit_bias": {"2": 1}}, "logit_bias"),
    ],
)
def test_a_pipeline_refuses_what_only_an_llm_stage_honours_with_400_naming_the_field(
    fields: dict[str, Any], param: str
) -> None:
    from tritonkit.openai_front.generate import check_ask
    from tritonkit.openai_front.mapping import LlmEngine, PipelineMapping
    from tritonkit.openai_front.models import Target
    from tritonkit.signature import ModelSignature

    signature = ModelSignature(name="p", version="", max_batch_size=0, inputs=(), outputs=())
    sampling = parse_chat(_chat(**fields), LIMITS).sampling
    pipeline = Target("p", signature, 0, pipeline=PipelineMapping(text_input="T", text_output="O"))
    with pytest.raises(OpenAIError) as caught:
        check_ask(pipeline, sampling, 0, chat=True)
    assert caught.value.status == 400 and caught.value.param == param and param in caught.value.message
    assert "sampling_parameters_input" in caught.value.message  # what the pipeline would need
    stage = Target("s", signature, 0, engine=LlmEngine(token_counts=True, logprobs=False, finish_reason=True))
    check_ask(stage, sampling, 0, chat=False)  # an LLM stage takes them all
    mapped = PipelineMapping(text_input="T", text_output="O", sampling_parameters_input="S")
    check_ask(Target("q", signature, 0, pipeline=mapped), sampling, 0, chat=True)  # handed on


def test_a_pipeline_with_a_sampling_input_gets_vllms_parameters_less_max_tokens_and_no_logprobs() -> None:
    from tritonkit.openai_front.generate import check_ask
    from tritonkit.openai_front.mapping import PipelineMapping
    from tritonkit.openai_front.models import Target
    from tritonkit.signature import ModelSignature

    fmt = {"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA}}
    sampling = parse_chat(
        _chat(max_tokens=9, temperature=0.5, seed=4, stop=["}"], response_format=fmt, min_tokens=1), LIMITS
    ).sampling
    sent = sampling.pipeline(choice=2)
    assert sent == {
        "temperature": 0.5,
        "seed": 6,
        "stop": ["}"],
        "min_tokens": 1,
        "structured_outputs": json.dumps({"json": SCHEMA}),
    }
    assert parse_chat(_chat(max_tokens=9), LIMITS).sampling.pipeline() == {}  # nothing to hand on
    signature = ModelSignature(name="p", version="", max_batch_size=0, inputs=(), outputs=())
    mapped = PipelineMapping(text_input="T", text_output="O", sampling_parameters_input="S")
    with pytest.raises(OpenAIError) as caught:
        check_ask(
            Target("p", signature, 0, pipeline=mapped),
            parse_chat(_chat(logprobs=True), LIMITS).sampling,
            0,
            chat=True,
        )
    assert caught.value.status == 400 and caught.value.param == "logprobs"


def test_json_safe_strings_says_bounded_strings_as_a_pattern_without_control_characters() -> None:
    import re

    from tritonkit.openai_front.requests import json_safe_strings

    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "maxLength": 8},
            "b": {"type": "string", "minLength": 3, "maxLength": 5},
            "c": {"type": "string", "pattern": "^x+$", "maxLength": 3},
            "d": {"type": "array", "items": {"type": "string", "minLength": 2}},
            "e": {"type": "string"},
            "type": {"type": "string", "enum": ["p", "q"], "maxLength": 1},
        },
    }
    safe = json_safe_strings(schema)
    props = safe["properties"]
    assert props["a"] == {"type": "string", "pattern": '^[^\\x00-\\x1f"\\\\]{0,8}$'}
    assert props["b"]["pattern"].endswith("{3,5}$") and "minLength" not in props["b"]
    assert props["d"]["items"]["pattern"].endswith("{2,}$")
    assert props["c"] == schema["properties"]["c"] and props["e"] == {"type": "string"}
    assert props["type"] == schema["properties"]["type"]
    pattern = re.compile(props["b"]["pattern"])
    assert pattern.search("abcd") and not pattern.search("ab") and not pattern.search("a\x18c")
    assert not pattern.search('a"c') and not pattern.search("abcdef")
    assert schema["properties"]["a"] == {"type": "string", "maxLength": 8}  # not changed


def test_json_safe_strings_splits_a_bounded_string_of_several_types_so_the_string_gets_its_pattern() -> None:
    from tritonkit.openai_front.requests import json_safe_strings

    jsonschema = pytest.importorskip("jsonschema")
    nullable = {"type": ["string", "null"], "maxLength": 8, "description": "a note"}
    safe = json_safe_strings(nullable)
    assert safe == {
        "anyOf": [
            {"type": "string", "description": "a note", "pattern": '^[^\\x00-\\x1f"\\\\]{0,8}$'},
            {"type": "null", "description": "a note"},
        ]
    }
    for ok in ("abc", None):
        jsonschema.validate(ok, safe)
    for bad in ("a\x0fb", "x" * 9, 3):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, safe)
    many = json_safe_strings({"type": ["string", "integer", "null"], "minLength": 1})
    assert many["anyOf"][1] == {"type": ["integer", "null"]}
    shaped = {"type": ["string", "null"], "maxLength": 3, "enum": ["a", None]}
    assert json_safe_strings(shaped) == shaped  # an enum says what the string holds already
