"""perf's OpenAI sender: the bodies it posts and what its settings refuse (the streams
themselves are measured against the real front in tests/integration/test_openai_front.py)."""

from __future__ import annotations

import base64
import json

import pytest

from tritonkit.errors import PerfError
from tritonkit.perf._kstamp import _events
from tritonkit.perf._openai_sender import _chunk_text, openai_body, openai_requests
from tritonkit.perf.llm import Prompt
from tritonkit.perf.settings import PerfSettings

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8


def test_openai_body_streams_with_usage_and_carries_max_tokens_when_asked() -> None:
    [with_len, without] = openai_requests([Prompt(text="Hi", output_tokens=7), Prompt(text="Yo")])
    body = json.loads(openai_body(with_len, model="tiny_llm", api="completions"))
    assert body == {
        "model": "tiny_llm",
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 7,
        "prompt": "Hi",
    }
    chat = json.loads(openai_body(without, model="tiny_llm", api="chat"))
    assert chat["messages"] == [{"role": "user", "content": "Yo"}] and "max_tokens" not in chat


def test_openai_body_sends_an_image_as_a_data_url_part_when_the_prompt_has_one() -> None:
    [request] = openai_requests([Prompt(text="What is it?", image=PNG)])
    body = json.loads(openai_body(request, model="vlm_llm", api="chat"))
    text, image = body["messages"][0]["content"]
    assert text == {"type": "text", "text": "What is it?"}
    assert image["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(PNG).decode()


def test_openai_body_refuses_an_image_when_the_api_is_completions() -> None:
    [request] = openai_requests([Prompt(text="What is it?", image=PNG)])
    with pytest.raises(PerfError, match="--openai chat"):
        openai_body(request, model="vlm_llm", api="completions")


def test_chunk_text_reads_chat_deltas_and_completion_texts_and_nothing_else() -> None:
    assert _chunk_text({"choices": [{"delta": {"content": "ab"}}]}) == "ab"
    assert _chunk_text({"choices": [{"delta": {"role": "assistant", "content": ""}}]}) == ""
    assert _chunk_text({"choices": [{"text": "cd", "finish_reason": None}]}) == "cd"
    assert _chunk_text({"choices": [], "usage": {"completion_tokens": 3}}) == ""


def test_stream_events_skip_the_done_marker_when_the_stream_is_openais() -> None:
    assert _events(b'data: {"a":1}\n\ndata: [DONE]\n\n') == [{"a": 1}]


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"openai": "embeddings"}, "unknown --openai"),
        ({"protocol": "grpc"}, "over HTTP"),
        ({"stream": False}, "over HTTP"),
        ({"input_data": "data.json"}, "sends prompts"),
    ],
)
def test_perf_settings_refuse_openai_runs_when_options_are_for_tensors(
    changes: dict[str, object], words: str
) -> None:
    settings = PerfSettings(url="http://127.0.0.1:9000", model="tiny_llm", **{"openai": "chat", **changes})  # type: ignore[arg-type]
    with pytest.raises(PerfError, match=words):
        settings.validate()
