"""Structured outputs end to end: the official ``openai`` client, tritonkit's front, a real
tritonserver and the tiny random-weight vLLM engine. Its text is nonsense, which is the point: only
the engine's grammar can make every answer parse and validate against its schema.

One server for the module (the CI box has 2 cores): tiny_llm, the vlm_llm pipeline before it (its
``openai:`` mapping names a sampling input, so ``response_format`` reaches the engine through the
pipeline) and vlm_stream (a pipeline without one, which must refuse it). Every schema is asked
four ways of tiny_llm (chat and completions, streamed and not) and two of vlm_llm with an image
(chat, streamed and not), all at once, so the engine batches them.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from tests._examples import load_example
from tritonkit.client import TritonClient, llm_inputs
from tritonkit.errors import InferenceError
from tritonkit.openai_front import FrontServer, FrontSettings

openai = pytest.importorskip("openai")
jsonschema = pytest.importorskip("jsonschema")

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

demo = load_example("ensembles/demo.py")
reference = load_example("ensembles/reference.py")

LLM = "tiny_llm"
#: the LLM pipeline that hands the request's sampling to tiny_llm, and one that has no LLM stage
PIPELINE, FIXED = "vlm_llm", "vlm_stream"
#: vlm_llm's MAX_TOKENS_LIMIT
PIPELINE_MAX_TOKENS = 128
_S = {"type": "string", "maxLength": 8}
_ID = {"type": "integer", "minimum": 0, "maximum": 999}

#: 22 schemas: nested objects, arrays, enums, required and optional fields, bounded numbers
SCHEMAS: dict[str, dict[str, Any]] = {
    "person": {
        "type": "object",
        "properties": {"name": _S, "age": {"type": "integer", "minimum": 0, "maximum": 120}},
        "required": ["name", "age"],
    },
    "bounded_number": {
        "type": "object",
        "properties": {"score": {"type": "number", "minimum": -1, "maximum": 1}},
        "required": ["score"],
    },
    "enum": {
        "type": "object",
        "properties": {"colour": {"type": "string", "enum": ["red", "green", "blue"]}},
        "required": ["colour"],
    },
    "boolean": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
    "int_array": {
        "type": "object",
        "properties": {"ids": {"type": "array", "items": _ID, "minItems": 1, "maxItems": 4}},
        "required": ["ids"],
    },
    "nested": {
        "type": "object",
        "properties": {
            "user": {
                "type": "object",
                "properties": {"id": _ID, "tag": _S},
                "required": ["id", "tag"],
                "additionalProperties": False,
            }
        },
        "required": ["user"],
        "additionalProperties": False,
    },
    "array_of_objects": {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"sku": _S, "qty": {"type": "integer", "minimum": 1, "maximum": 9}},
                    "required": ["sku", "qty"],
                    "additionalProperties": False,
                },
                "minItems": 1,
                "maxItems": 3,
            }
        },
        "required": ["items"],
    },
    "closed": {
        "type": "object",
        "properties": {"a": _S, "b": _ID},
        "required": ["a", "b"],
        "additionalProperties": False,
    },
    "const": {
        "type": "object",
        "properties": {"version": {"const": 2}, "name": _S},
        "required": ["version", "name"],
    },
    "any_of": {
        "type": "object",
        "properties": {"value": {"anyOf": [_ID, {"type": "boolean"}]}},
        "required": ["value"],
    },
    "nullable": {
        "type": "object",
        "properties": {"note": {"type": ["string", "null"], "maxLength": 8}},
        "required": ["note"],
    },
    "int_enum": {
        "type": "object",
        "properties": {"level": {"type": "integer", "enum": [1, 2, 3]}},
        "required": ["level"],
    },
    "three_levels": {
        "type": "object",
        "properties": {
            "a": {
                "type": "object",
                "properties": {
                    "b": {
                        "type": "object",
                        "properties": {"c": _ID},
                        "required": ["c"],
                        "additionalProperties": False,
                    }
                },
                "required": ["b"],
                "additionalProperties": False,
            }
        },
        "required": ["a"],
        "additionalProperties": False,
    },
    "pattern": {
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"}},
        "required": ["code"],
    },
    "enum_array": {
        "type": "object",
        "properties": {
            "days": {
                "type": "array",
                "items": {"type": "string", "enum": ["mon", "tue", "wed"]},
                "minItems": 1,
                "maxItems": 3,
            }
        },
        "required": ["days"],
    },
    "many_required": {
        "type": "object",
        "properties": {
            "a": _ID,
            "b": _S,
            "c": {"type": "boolean"},
            "d": {"type": "number", "minimum": 0, "maximum": 10},
        },
        "required": ["a", "b", "c", "d"],
        "additionalProperties": False,
    },
    "string_bounds": {
        "type": "object",
        "properties": {"word": {"type": "string", "minLength": 3, "maxLength": 5}},
        "required": ["word"],
    },
    "refs": {
        "type": "object",
        "$defs": {"point": {"type": "object", "properties": {"x": _ID, "y": _ID}, "required": ["x", "y"]}},
        "properties": {"start": {"$ref": "#/$defs/point"}, "end": {"$ref": "#/$defs/point"}},
        "required": ["start", "end"],
    },
    "negative_range": {
        "type": "object",
        "properties": {"t": {"type": "integer", "minimum": -40, "maximum": -10}},
        "required": ["t"],
    },
    "matrix": {
        "type": "object",
        "properties": {
            "rows": {
                "type": "array",
                "items": {
                    "type": "array",
                    "items": {"type": "integer", "minimum": 0, "maximum": 9},
                    "minItems": 2,
                    "maxItems": 2,
                },
                "minItems": 2,
                "maxItems": 2,
            }
        },
        "required": ["rows"],
    },
    "object_with_enum_and_array": {
        "type": "object",
        "properties": {
            "status": {"enum": ["open", "closed"]},
            "labels": {"type": "array", "items": _S, "maxItems": 2},
            "owner": {"type": "object", "properties": {"id": _ID}, "required": ["id"]},
        },
        "required": ["status", "labels", "owner"],
    },
    "exclusive_bounds": {
        "type": "object",
        "properties": {"p": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 5}},
        "required": ["p"],
    },
}


#: a schema whose pattern xgrammar cannot compile
UNCOMPILABLE = {
    "type": "object",
    "properties": {"a": {"type": "string", "pattern": "(unclosed"}},
    "required": ["a"],
}


@pytest.fixture(scope="module")
def front(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from tritonkit.repository import build_spec
    from tritonkit.server import LocalTritonServer

    python = demo.llm_python()
    if python is None:
        pytest.skip("the llm venv is missing: make llm-venv")
    demo.make_tiny_llm(python, quiet=True)
    repository = tmp_path_factory.mktemp("openai-structured") / "model_repository"
    for spec in ("tiny_llm.yaml", "vlm.yaml", "vlm_llm.yaml", "vlm_stream.yaml"):
        build_spec(demo.HERE / spec, repository, force=True)
    with LocalTritonServer(repository) as server:
        # answers stream over Triton's HTTP generate_stream, as serve --openai-port runs the front
        urls = {"triton_url": server.grpc_url, "stream_url": server.http_url}
        settings = FrontSettings(**urls, repository=repository)
        with FrontServer(settings) as app:
            yield {"server": server, "url": app.url + "/v1"}


def _format(name: str) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": name, "schema": SCHEMAS[name], "strict": True}}


def _image_message(text: str) -> list[dict[str, Any]]:
    url = "data:image/png;base64," + base64.b64encode(bytes(reference.sample_bytes())).decode()
    parts = [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": url}}]
    return [{"role": "user", "content": parts}]


async def _ask(client: Any, name: str, *, way: str, stream: bool) -> tuple[str, str]:
    """One answer's (text, finish_reason) for schema ``name``; ``way``: ``chat`` or
    ``completions`` of tiny_llm, or ``pipeline`` (a chat with an image to vlm_llm)."""
    common: dict[str, Any] = {
        "model": PIPELINE if way == "pipeline" else LLM,
        "max_tokens": PIPELINE_MAX_TOKENS if way == "pipeline" else 160,
        "temperature": 1.0,
        "seed": 7,
        "response_format": _format(name),
    }
    if way != "completions":
        if way == "pipeline":
            messages = _image_message(f"Describe this image as JSON of the schema {name}.")
        else:
            messages = [{"role": "user", "content": f"Give me a {name} as JSON."}]
        if not stream:
            answer = await client.chat.completions.create(messages=messages, **common)
            return answer.choices[0].message.content, answer.choices[0].finish_reason
        pieces, reason = [], ""
        async for chunk in await client.chat.completions.create(messages=messages, stream=True, **common):
            for choice in chunk.choices:
                pieces.append(choice.delta.content or "")
                reason = choice.finish_reason or reason
        return "".join(pieces), reason
    # response_format is not in the completions signature of the client: sent as an extra field
    fmt = common.pop("response_format")
    prompt = f"A {name} in JSON:"
    if not stream:
        answer = await client.completions.create(prompt=prompt, extra_body={"response_format": fmt}, **common)
        return answer.choices[0].text, answer.choices[0].finish_reason
    pieces, reason = [], ""
    async for chunk in await client.completions.create(
        prompt=prompt, stream=True, extra_body={"response_format": fmt}, **common
    ):
        for choice in chunk.choices:
            pieces.append(choice.text or "")
            reason = choice.finish_reason or reason
    return "".join(pieces), reason


def test_every_answer_to_a_json_schema_parses_and_validates_on_the_stage_and_through_the_pipeline(
    front: dict[str, Any],
) -> None:
    ways = [
        (name, way, stream)
        for name in SCHEMAS
        for way in ("chat", "completions", "pipeline")
        for stream in (False, True)
    ]

    async def run() -> list[tuple[str, str] | BaseException]:
        client = openai.AsyncOpenAI(base_url=front["url"], api_key="none", max_retries=0, timeout=600)
        async with client:
            return await asyncio.gather(
                *(_ask(client, name, way=way, stream=stream) for name, way, stream in ways),
                return_exceptions=True,
            )

    answers = asyncio.run(run())
    failures = []
    for (name, way, stream), answer in zip(ways, answers, strict=True):
        where = f"{name} ({way}, {'streamed' if stream else 'unary'})"
        if isinstance(answer, BaseException):
            failures.append(f"{where}: {answer!r}")
            continue
        text, reason = answer
        # tiny_llm's engine allows no free whitespace (STRUCTURED_OUTPUTS_CONFIG), so every
        # answer to these bounded schemas ends within max_tokens: a cut one is a failure too
        try:
            assert reason == "stop", f"finish_reason {reason!r}"
            jsonschema.validate(json.loads(text), SCHEMAS[name])
        except (AssertionError, ValueError, jsonschema.ValidationError) as exc:
            failures.append(f"{where}: finish {reason}, {text!r}: {str(exc)[:200]}")
    assert len(SCHEMAS) >= 20 and len(ways) == 6 * len(SCHEMAS)
    assert not failures, f"{len(failures)}/{len(ways)} answers invalid:\n" + "\n".join(failures)


def test_a_pipeline_without_a_sampling_input_refuses_response_format_naming_it(front: dict[str, Any]) -> None:
    client = openai.OpenAI(base_url=front["url"], api_key="none", max_retries=0, timeout=600)
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model=FIXED, messages=_image_message("Describe."), response_format=_format("person"), max_tokens=8
        )
    error = caught.value.body
    assert error["param"] == "response_format" and error["code"] == "unsupported_parameter", error
    assert "sampling_parameters_input" in error["message"], error  # never free text instead
    free = client.chat.completions.create(model=FIXED, messages=_image_message("Describe."), max_tokens=8)
    assert free.choices[0].message.content  # the same pipeline answers without it


def test_a_schema_the_engine_cannot_compile_through_the_pipeline_is_a_400_with_its_reason(
    front: dict[str, Any],
) -> None:
    client = openai.OpenAI(base_url=front["url"], api_key="none", max_retries=0, timeout=600)
    bad = UNCOMPILABLE
    for stream in (False, True):
        with pytest.raises(openai.BadRequestError) as caught:
            answer = client.chat.completions.create(
                model=PIPELINE,
                messages=_image_message("x"),
                response_format={"type": "json_schema", "json_schema": {"name": "bad", "schema": bad}},
                max_tokens=8,
                stream=stream,
            )
            if stream:
                list(answer)
        assert "parenthesis is not closed" in str(caught.value), caught.value  # the engine's own reason
    good = client.chat.completions.create(model=PIPELINE, messages=_image_message("Describe."), max_tokens=4)
    assert good.choices[0].finish_reason in ("stop", "length")


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b"{not json", "is not JSON"),
        (b'"a string"', "must be a JSON object"),
        (b'{"max_tokens": 4000}', "may not set max_tokens"),
        (b'{"n": 64, "best_of": 64}', "not best_of, n"),
        (b'{"temperature": "hot"}', "temperature"),  # the vLLM stage's own check, relayed
    ],
    ids=["malformed", "not-an-object", "max-tokens", "unknown-keys", "bad-value"],
)
def test_the_pipeline_refuses_untrusted_sampling_as_invalid_argument_and_serves_on(
    front: dict[str, Any], raw: bytes, words: str
) -> None:
    inputs = {
        "RAW_IMAGE": reference.sample_bytes(),
        "TEXT_QUERY": np.array([b"Describe the image."], dtype=np.object_),
        "MAX_TOKENS": np.array([4], dtype=np.int32),
    }
    with TritonClient(front["server"].grpc_url, protocol="grpc", request_timeout=300) as client:
        bad = {**inputs, "SAMPLING_PARAMETERS": np.array([raw], dtype=np.object_)}
        with pytest.raises(InferenceError) as caught:
            list(client.stream(PIPELINE, bad))
        # the request's fault (INVALID_ARG, a bare message), not the front's failure ("stream failed")
        message = caught.value.message
        assert words in message and "stream failed" not in message, message
        good = "".join(
            r.text("GENERATED_TEXT") for r in client.stream(PIPELINE, inputs) if "GENERATED_TEXT" in r.outputs
        )
    assert good  # the front's stub is alive: the next request is answered


def test_demo_describes_the_image_as_json_of_its_schema(
    front: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    client = openai.OpenAI(base_url=front["url"], api_key="none", max_retries=0, timeout=600)
    url = "data:image/png;base64," + base64.b64encode(bytes(reference.sample_bytes())).decode()
    document = demo.describe_as_json(client, url)
    jsonschema.validate(document, demo.IMAGE_SCHEMA)
    assert "valid against the schema: yes" in capsys.readouterr().out


def test_json_object_answers_are_json_objects(front: dict[str, Any]) -> None:
    client = openai.OpenAI(base_url=front["url"], api_key="none", max_retries=0, timeout=600)
    answer = client.chat.completions.create(
        model=LLM,
        messages=[{"role": "user", "content": "JSON please"}],
        response_format={"type": "json_object"},
        max_tokens=200,
        seed=3,
    )
    choice = answer.choices[0]
    # "any object" bounds no string, so the random model may not close it within max_tokens
    if choice.finish_reason == "stop":
        assert isinstance(json.loads(choice.message.content), dict), choice.message.content
    else:
        assert choice.message.content.lstrip().startswith("{"), choice.message.content


def test_a_schema_the_engine_cannot_compile_is_a_400_with_its_reason_and_the_engine_serves_on(
    front: dict[str, Any],
) -> None:
    client = openai.OpenAI(base_url=front["url"], api_key="none", max_retries=0, timeout=600)
    bad = UNCOMPILABLE
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model=LLM,
            messages=[{"role": "user", "content": "x"}],
            response_format={"type": "json_schema", "json_schema": {"name": "bad", "schema": bad}},
            max_tokens=8,
        )
    assert "parenthesis is not closed" in str(caught.value), caught.value  # the engine's own reason
    good = client.completions.create(model=LLM, prompt="And then", max_tokens=2)
    assert good.choices[0].text


@pytest.mark.parametrize(
    ("structured", "check"),
    [
        ({"choice": ["yes", "no", "maybe"]}, lambda text: text in ("yes", "no", "maybe")),
        (
            {"regex": "[a-z]{3}-[0-9]{2}"},
            lambda text: len(text) == 6 and text[3] == "-" and text[4:].isdigit(),
        ),
        ({"grammar": 'root ::= "ab" | "cd"'}, lambda text: text in ("ab", "cd")),
    ],
)
def test_the_backend_holds_answers_to_a_choice_a_regex_and_a_grammar(
    front: dict[str, Any], structured: dict[str, Any], check: Any
) -> None:
    sampling = {"max_tokens": 16, "temperature": 1.0, "seed": 1, "structured_outputs": json.dumps(structured)}
    with TritonClient(front["server"].grpc_url, protocol="grpc", request_timeout=300) as client:
        for seed in range(3):
            request = llm_inputs("Say:", sampling={**sampling, "seed": seed}, exclude_input_in_output=True)
            text = "".join(
                r.text("text_output") for r in client.stream(LLM, request) if "text_output" in r.outputs
            )
            assert check(text), (structured, text)


def test_the_backend_refuses_a_malformed_structured_outputs_as_invalid_argument(
    front: dict[str, Any],
) -> None:
    sampling = {"max_tokens": 4, "structured_outputs": {"choice": []}}
    with TritonClient(front["server"].grpc_url, protocol="grpc", request_timeout=300) as client:
        with pytest.raises(InferenceError) as caught:
            list(client.stream(LLM, llm_inputs("x", sampling=sampling, exclude_input_in_output=True)))
    assert "non-empty array of strings" in str(caught.value)
