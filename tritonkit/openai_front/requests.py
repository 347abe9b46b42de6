"""OpenAI request bodies, read and checked: every wrong field is a 400 that names it.

Only what the front carries is accepted; fields it cannot honour (``functions``, ``suffix``...)
are refused rather than ignored, so a client never trusts an answer the model was not asked for.
``response_format`` becomes vLLM's ``structured_outputs`` (the engine masks every token, so the
answer parses whatever the model's weights); so do ``tool_choice`` ``required`` and a named
function (:mod:`tritonkit.openai_front.tools`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tritonkit.openai_front.errors import OpenAIError
from tritonkit.openai_front.limits import Limits
from tritonkit.openai_front.tools import Tools, assistant_tool_calls, check_tool_turns, parse_tools

__all__ = [
    "ChatRequest",
    "CompletionRequest",
    "ImagePart",
    "Message",
    "Sampling",
    "conversation_text",
    "parse_chat",
    "parse_completion",
]

_ROLES = ("system", "developer", "user", "assistant", "tool")
_REFUSED = (
    "functions",
    "function_call",
    "audio",
    "prediction",
    "suffix",
)
#: OpenAI's rule for json_schema.name
_SCHEMA_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: token ids are non-negative and below any vocabulary's size
_MAX_TOKEN_ID = 2**31 - 1


@dataclass(frozen=True)
class Sampling:
    """The generation settings, as vLLM's SamplingParams names them."""

    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    #: top log-probabilities per token (0: the chosen token's only); None: none asked
    logprobs: int | None = None
    #: vLLM's extensions, as its own server takes them
    min_tokens: int | None = None
    ignore_eos: bool | None = None
    stop_token_ids: tuple[int, ...] = ()
    #: token id -> bias (-100..100)
    logit_bias: tuple[tuple[int, float], ...] = ()
    #: vLLM's StructuredOutputsParams (one constraint), from ``response_format``; None: free text
    structured: dict[str, Any] | None = None

    def vllm(self, *, default_max_tokens: int, choice: int = 0) -> dict[str, Any]:
        """The ``sampling_parameters`` JSON object of one choice (``seed`` + choice index)."""
        out: dict[str, Any] = {"max_tokens": self.max_tokens or default_max_tokens}
        for name in ("temperature", "top_p", "presence_penalty", "frequency_penalty", "logprobs"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.seed is not None:
            out["seed"] = self.seed + choice
        if self.stop:
            out["stop"] = list(self.stop)
        if self.min_tokens:
            out["min_tokens"] = self.min_tokens
        if self.ignore_eos is not None:
            out["ignore_eos"] = self.ignore_eos
        if self.stop_token_ids:
            out["stop_token_ids"] = list(self.stop_token_ids)
        if self.logit_bias:
            out["logit_bias"] = {str(token): bias for token, bias in self.logit_bias}
        if self.structured is not None:
            # a JSON string inside the JSON: NVIDIA's backend json.loads() it; tritonkit's takes both
            out["structured_outputs"] = json.dumps(self.structured)
        return out

    def pipeline(self, *, choice: int = 0) -> dict[str, Any]:
        """What a pipeline's sampling input takes: :meth:`vllm` less ``max_tokens`` (the
        pipeline's own input, held to its limit) and ``logprobs`` (no pipeline returns them)."""
        out = self.vllm(default_max_tokens=1, choice=choice)
        del out["max_tokens"]
        out.pop("logprobs", None)
        return out

    @property
    def generation_options(self) -> list[str]:
        """The request fields given that only an LLM stage honours (a pipeline fixes its own
        sampling), by their OpenAI names."""
        fields = {
            "response_format": self.structured,
            "stop": self.stop,
            "logprobs": self.logprobs,
            "seed": self.seed,
            "min_tokens": self.min_tokens,
            "ignore_eos": self.ignore_eos,
            "stop_token_ids": self.stop_token_ids,
            "logit_bias": self.logit_bias,
        }
        return [name for name, value in fields.items() if value not in (None, ())]


@dataclass(frozen=True)
class ImagePart:
    """One ``image_url`` content part, not yet fetched; ``param`` says where it was."""

    url: str
    param: str


@dataclass(frozen=True)
class Message:
    role: str
    text: str
    images: tuple[ImagePart, ...] = ()
    #: an assistant message's tool calls, as chat templates take them
    tool_calls: tuple[dict[str, Any], ...] = ()
    #: a tool message: the call it answers
    tool_call_id: str | None = None


@dataclass(frozen=True)
class ChatRequest:
    model: str
    messages: tuple[Message, ...]
    sampling: Sampling
    n: int = 1
    stream: bool = False
    include_usage: bool = False
    #: chat ``logprobs: true`` (with ``top_logprobs`` in ``sampling.logprobs``)
    logprobs: bool = False
    #: ``tools`` and ``tool_choice``; None: no tools given
    tools: Tools | None = None

    @property
    def images(self) -> list[ImagePart]:
        return [image for m in self.messages for image in m.images]


@dataclass(frozen=True)
class CompletionRequest:
    model: str
    prompt: str
    sampling: Sampling
    n: int = 1
    stream: bool = False
    include_usage: bool = False
    echo: bool = False


def _bad(message: str, param: str | None, code: str | None = "invalid_value") -> OpenAIError:
    return OpenAIError(message, status=400, param=param, code=code)


def _type_name(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number"
    )


def _get(body: Mapping[str, Any], name: str, kind: type | tuple[type, ...], wanted: str) -> Any:
    value = body.get(name)
    if value is None:
        return None
    bad_bool = isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,))
    if bad_bool or not isinstance(value, kind):
        raise _bad(f"'{name}' must be {wanted}, got {_type_name(value)}", name, "invalid_type")
    return value


def _number(body: Mapping[str, Any], name: str, low: float, high: float) -> float | None:
    value = _get(body, name, (int, float), "a number")
    if value is None:
        return None
    if not math.isfinite(value) or not low <= value <= high:
        raise _bad(f"'{name}' must be between {low:g} and {high:g}, got {value!r}", name)
    return float(value)


def _integer(body: Mapping[str, Any], name: str, low: int, high: int | None = None) -> int | None:
    value = _get(body, name, int, "an integer")
    if value is None:
        return None
    if value < low or (high is not None and value > high):
        bounds = f"at least {low}" if high is None else f"between {low} and {high}"
        raise _bad(f"'{name}' must be {bounds}, got {value}", name)
    return int(value)


def _flag(body: Mapping[str, Any], name: str) -> bool:
    return bool(_get(body, name, bool, "true or false"))


def _model(body: Mapping[str, Any]) -> str:
    model = _get(body, "model", str, "a string")
    if not model:
        raise _bad(
            "'model' is required: the id of a model from GET /v1/models",
            "model",
            "missing_required_parameter",
        )
    return str(model)


def _stop(body: Mapping[str, Any]) -> tuple[str, ...]:
    stop = body.get("stop")
    if stop is None:
        return ()
    items = [stop] if isinstance(stop, str) else stop
    if not isinstance(items, list) or not all(isinstance(s, str) and s for s in items) or len(items) > 4:
        raise _bad("'stop' must be a non-empty string or an array of up to 4 of them", "stop", "invalid_type")
    return tuple(items)


def _token_ids(body: Mapping[str, Any], name: str) -> tuple[int, ...]:
    value = body.get(name)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(
        isinstance(t, int) and not isinstance(t, bool) and 0 <= t <= _MAX_TOKEN_ID for t in value
    ):
        raise _bad(f"'{name}' must be an array of token ids (non-negative integers)", name, "invalid_type")
    return tuple(value)


def _logit_bias(body: Mapping[str, Any]) -> tuple[tuple[int, float], ...]:
    value = _get(body, "logit_bias", dict, "an object of token id: bias")
    if not value:
        return ()
    out = []
    for key, bias in value.items():
        where = f"logit_bias.{key}"
        if not (isinstance(key, str) and key.isdigit() and int(key) <= _MAX_TOKEN_ID):
            raise _bad(f"'logit_bias' keys must be token ids, got {key!r}", "logit_bias")
        ok = isinstance(bias, (int, float)) and not isinstance(bias, bool) and math.isfinite(bias)
        if not ok or not -100 <= bias <= 100:
            raise _bad(f"'{where}' must be a number between -100 and 100, got {bias!r}", "logit_bias")
        out.append((int(key), float(bias)))
    return tuple(out)


def _response_format(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """``response_format`` as vLLM's StructuredOutputsParams, or None for free text."""
    fmt = _get(body, "response_format", dict, "an object")
    if fmt is None:
        return None
    kind = fmt.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return {"json_object": True}
    if kind != "json_schema":
        raise _bad(
            "'response_format.type' must be one of text, json_object, json_schema, got " + repr(kind),
            "response_format",
        )
    spec = fmt.get("json_schema")
    where = "response_format.json_schema"
    if not isinstance(spec, Mapping):
        raise _bad(f"'{where}' must be an object with 'name' and 'schema'", where, "invalid_type")
    name = spec.get("name")
    if not isinstance(name, str) or not _SCHEMA_NAME.fullmatch(name):
        raise _bad(f"'{where}.name' must be 1-64 letters, digits, _ or -", f"{where}.name")
    schema = spec.get("schema")
    if not isinstance(schema, Mapping):
        raise _bad(f"'{where}.schema' must be a JSON schema (an object)", f"{where}.schema", "invalid_type")
    strict = spec.get("strict")
    if strict is not None and not isinstance(strict, bool):
        raise _bad(f"'{where}.strict' must be true or false", f"{where}.strict", "invalid_type")
    # strict or not, the engine holds the answer to the schema (as vLLM's own server does)
    return {"json": json_safe_strings(schema)}


#: keywords that already say what a string holds (left to the engine as they are)
_STRING_SHAPES = ("pattern", "format", "enum", "const")


def json_safe_strings(schema: Any) -> Any:
    """``schema`` with each length-bounded string (``minLength``/``maxLength``, no pattern) said
    as a pattern of the same length that excludes JSON's control characters.

    xgrammar 0.2.8 (vLLM's grammar for schemas) lets U+0000-U+001F into length-bounded strings,
    which strict JSON parsers refuse; its rule for other strings excludes them. The pattern allows
    a subset of what the schema allows (no escapes either), so every answer still validates.
    """
    if isinstance(schema, list):
        return [json_safe_strings(item) for item in schema]
    if not isinstance(schema, Mapping):
        return schema
    out = {key: json_safe_strings(value) for key, value in schema.items()}
    low, high = out.get("minLength"), out.get("maxLength")
    bounded = isinstance(low, int) or isinstance(high, int)
    kinds = out.get("type")
    shaped = any(k in out for k in _STRING_SHAPES)
    if isinstance(kinds, list) and "string" in kinds and len(kinds) > 1 and bounded and not shaped:
        # ["string", "null"]: the string as a string of its own (below), the other types apart
        others = [k for k in kinds if k != "string"]
        rest = {k: v for k, v in out.items() if k not in ("type", "minLength", "maxLength")}
        string = json_safe_strings({**out, "type": "string"})
        return {"anyOf": [string, {**rest, "type": others[0] if len(others) == 1 else others}]}
    if kinds == "string" and bounded and not shaped:
        low = low if isinstance(low, int) and not isinstance(low, bool) and low > 0 else 0
        upper = str(high) if isinstance(high, int) and not isinstance(high, bool) else ""
        out.pop("minLength", None)
        out.pop("maxLength", None)
        out["pattern"] = "^[^\\x00-\\x1f\"\\\\]{" + f"{low},{upper}" + "}$"
    return out


def _sampling(body: Mapping[str, Any], logprobs: int | None, limits: Limits) -> Sampling:
    # OpenAI deprecates max_tokens for max_completion_tokens: given both, the newer wins
    max_tokens = _integer(body, "max_completion_tokens", 1)
    legacy = _integer(body, "max_tokens", 1)
    if max_tokens is None:
        max_tokens = legacy
    ignore_eos = _get(body, "ignore_eos", bool, "true or false")
    min_tokens = _integer(body, "min_tokens", 0)
    if min_tokens is not None and max_tokens is not None and min_tokens > max_tokens:
        raise _bad(
            f"'min_tokens' ({min_tokens}) is more than the max_tokens asked ({max_tokens})", "min_tokens"
        )
    return Sampling(
        max_tokens=max_tokens,
        temperature=_number(body, "temperature", 0.0, 2.0),
        top_p=_number(body, "top_p", 0.0, 1.0),
        seed=_integer(body, "seed", -(2**63), 2**63 - 1),
        stop=_stop(body),
        presence_penalty=_number(body, "presence_penalty", -2.0, 2.0),
        frequency_penalty=_number(body, "frequency_penalty", -2.0, 2.0),
        logprobs=logprobs,
        min_tokens=min_tokens,
        ignore_eos=ignore_eos,
        stop_token_ids=_token_ids(body, "stop_token_ids"),
        logit_bias=_logit_bias(body),
        structured=_response_format(body),
    )


def _common(body: Any, limits: Limits) -> tuple[int, bool, bool]:
    if not isinstance(body, Mapping):
        raise _bad(f"the request body must be a JSON object, got {_type_name(body)}", None, "invalid_type")
    for name in _REFUSED:
        if body.get(name) not in (None, [], {}):
            raise _bad(f"'{name}' is not supported by this server", name, "unsupported_parameter")
    n = _integer(body, "n", 1, limits.max_n) or 1
    stream = _flag(body, "stream")
    options = _get(body, "stream_options", dict, "an object")
    include_usage = False
    if options is not None:
        if not stream:
            raise _bad("'stream_options' is only allowed with stream: true", "stream_options")
        include_usage = _flag(options, "include_usage")
    return n, stream, include_usage


def _content(value: Any, param: str) -> tuple[str, tuple[ImagePart, ...]]:
    if value is None:
        return "", ()
    if isinstance(value, str):
        return value, ()
    if not isinstance(value, list):
        raise _bad(f"'{param}' must be a string or an array of content parts", param, "invalid_type")
    texts: list[str] = []
    images: list[ImagePart] = []
    for i, part in enumerate(value):
        where = f"{param}[{i}]"
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, Mapping) else image
            if not isinstance(url, str) or not url:
                raise _bad(f"'{where}.image_url.url' must be a string", f"{where}.image_url", "invalid_type")
            images.append(ImagePart(url, f"{where}.image_url"))
        else:
            raise _bad(
                f'\'{where}\' must be a {{"type": "text", "text": ...}} or '
                '{"type": "image_url", "image_url": {"url": ...}} part',
                where,
                "invalid_type",
            )
    return "\n".join(texts), tuple(images)


def _messages(body: Mapping[str, Any], limits: Limits) -> tuple[Message, ...]:
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise _bad("'messages' must be a non-empty array", "messages", "invalid_type")
    if len(raw) > limits.max_messages:
        raise _bad(
            f"{len(raw)} messages; this server takes at most {limits.max_messages}",
            "messages",
            "too_many_messages",
        )
    messages = []
    for i, item in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(item, Mapping):
            raise _bad(f"'{where}' must be an object", where, "invalid_type")
        role = item.get("role")
        if role not in _ROLES:
            raise _bad(f"'{where}.role' must be one of {', '.join(_ROLES)}, got {role!r}", f"{where}.role")
        text, images = _content(item.get("content"), f"{where}.content")
        if images and role != "user":
            raise _bad(f"only user messages may carry images ({where})", f"{where}.content")
        raw_calls = item.get("tool_calls") if role == "assistant" else None
        calls = assistant_tool_calls(raw_calls, f"{where}.tool_calls")
        call_id = _get(item, "tool_call_id", str, "a string") if role == "tool" else None
        messages.append(Message(str(role), text, images, calls, call_id))
    check_tool_turns(
        [m.role for m in messages],
        [m.tool_call_id for m in messages],
        [[str(c["id"]) for c in m.tool_calls] for m in messages],
    )
    _check_size(sum(len(m.text) for m in messages), sum(len(m.images) for m in messages), limits, "messages")
    return tuple(messages)


def _check_size(chars: int, images: int, limits: Limits, param: str) -> None:
    if chars > limits.max_prompt_chars:
        raise _bad(
            f"the prompt is {chars} characters; this server takes at most {limits.max_prompt_chars}",
            param,
            "context_length_exceeded",
        )
    if images > limits.max_images:
        raise _bad(
            f"{images} images; this server takes at most {limits.max_images} per request",
            param,
            "too_many_images",
        )


def parse_chat(body: Any, limits: Limits) -> ChatRequest:
    """A ``POST /v1/chat/completions`` body, checked (OpenAIError 400 naming the field)."""
    n, stream, include_usage = _common(body, limits)
    logprobs = _flag(body, "logprobs")
    top = _integer(body, "top_logprobs", 0, 20)
    if top is not None and not logprobs:
        raise _bad("'top_logprobs' needs 'logprobs': true", "top_logprobs")
    sampling = _sampling(body, (top or 0) if logprobs else None, limits)
    tools = parse_tools(body, response_format=sampling.structured is not None)
    if tools is not None and tools.offered and logprobs:
        raise _bad("'logprobs' is not returned with 'tools' (use tool_choice none)", "logprobs")
    schema = tools.schema() if tools is not None else None
    if schema is not None:  # required or a named function: the engine holds the answer to it
        sampling = replace(sampling, structured={"json": json_safe_strings(schema)})
    return ChatRequest(
        model=_model(body),
        messages=_messages(body, limits),
        sampling=sampling,
        n=n,
        stream=stream,
        include_usage=include_usage,
        logprobs=logprobs,
        tools=tools,
    )


def parse_completion(body: Any, limits: Limits) -> CompletionRequest:
    """A ``POST /v1/completions`` body, checked: one text prompt per request."""
    n, stream, include_usage = _common(body, limits)
    for name in ("tools", "tool_choice"):
        if body.get(name) not in (None, [], {}):
            raise _bad(f"'{name}' is taken by /v1/chat/completions only", name, "unsupported_parameter")
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise _bad(
            "'prompt' must be a string (one prompt per request; token arrays are not taken)",
            "prompt",
            "invalid_type",
        )
    if not prompt.strip():
        raise _bad("'prompt' is empty", "prompt")
    _check_size(len(prompt), 0, limits, "prompt")
    best_of = _integer(body, "best_of", 1)
    if best_of is not None and best_of != n:
        # best_of > n would pick among answers server-side, which nothing here ranks: refused
        # rather than silently answering n unranked choices (best_of == n is just n)
        raise _bad(f"'best_of' ({best_of}) must equal 'n' ({n}): no server-side best-of is run", "best_of")
    logprobs = _integer(body, "logprobs", 0, 5)
    echo = _flag(body, "echo")
    if echo and logprobs is not None:
        raise _bad(
            "'echo' with 'logprobs' would need the prompt's log-probabilities, which no stage returns", "echo"
        )
    return CompletionRequest(
        model=_model(body),
        prompt=prompt,
        sampling=_sampling(body, logprobs, limits),
        n=n,
        stream=stream,
        include_usage=include_usage,
        echo=echo,
    )


def conversation_text(messages: Sequence[Message]) -> str:
    """The text a pipeline's text input takes: one user message's text as it is; a conversation
    as ``role: text`` lines (a pipeline builds its own prompt, so no chat template applies)."""
    spoken = [m for m in messages if m.text or m.images]
    if len(spoken) == 1 and spoken[0].role == "user":
        return spoken[0].text
    return "\n".join(f"{m.role}: {m.text}" for m in spoken)
