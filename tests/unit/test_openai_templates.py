"""Chat templates: from a tokenizer_config.json, a .jinja file or the served repository; sandboxed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tritonkit.errors import ConfigError
from tritonkit.openai_front import ChatTemplate, OpenAIError
from tritonkit.openai_front.requests import Message
from tritonkit.openai_front.templates import template_from_repository

TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "<|{{ message['role'] }}|>\n{{ message['content'] }}{{ eos_token }}\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
MESSAGES = [Message("system", "Be brief."), Message("user", "Hi")]


def _tokenizer(directory: Path, template: object = TEMPLATE) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    config = {
        "chat_template": template,
        "bos_token": "<s>",
        "eos_token": {"content": "</s>", "lstrip": False},
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(config))
    return directory


def test_chat_template_from_tokenizer_config_renders_messages_with_its_special_tokens(tmp_path: Path) -> None:
    template = ChatTemplate.from_path(_tokenizer(tmp_path) / "tokenizer_config.json")
    assert template.render(MESSAGES) == "<s><|system|>\nBe brief.</s>\n<|user|>\nHi</s>\n<|assistant|>\n"


def test_chat_template_from_a_directory_or_jinja_file(tmp_path: Path) -> None:
    assert ChatTemplate.from_path(_tokenizer(tmp_path)).render(MESSAGES).startswith("<s><|system|>")
    jinja = tmp_path / "t.jinja"
    jinja.write_text("{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}")
    assert ChatTemplate.from_path(jinja).render(MESSAGES) == "[system] Be brief.\n[user] Hi\n"


def test_chat_template_named_list_uses_the_default_one(tmp_path: Path) -> None:
    named = [
        {"name": "tool_use", "template": "no"},
        {"name": "default", "template": "{{ messages[0].content }}"},
    ]
    assert ChatTemplate.from_path(_tokenizer(tmp_path, named)).render(MESSAGES) == "Be brief."


def test_chat_template_missing_or_broken_is_a_config_error_that_says_what_to_pass(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="has no chat_template") as caught:
        ChatTemplate.from_path(_tokenizer(tmp_path / "none", None) / "tokenizer_config.json")
    assert caught.value.hint and "--chat-template" in caught.value.hint
    with pytest.raises(ConfigError, match="does not parse"):
        ChatTemplate("{% for m in messages %}")
    with pytest.raises(ConfigError, match="holds no"):
        ChatTemplate.from_path(tmp_path)


def test_chat_template_raise_exception_and_sandbox_escape_are_400s() -> None:
    strict = ChatTemplate(
        "{% if messages[0].role != 'user' %}{{ raise_exception('first must be user') }}{% endif %}"
    )
    with pytest.raises(OpenAIError, match="first must be user") as caught:
        strict.render(MESSAGES)
    assert caught.value.status == 400
    escape = ChatTemplate("{{ messages.__class__.__mro__[1].__subclasses__() }}")
    with pytest.raises(OpenAIError, match="chat template failed"):
        escape.render(MESSAGES)


def test_template_from_repository_follows_model_json_to_the_tokenizer(tmp_path: Path) -> None:
    version = tmp_path / "tiny_llm" / "1"
    _tokenizer(version / "hf_model")
    (version / "model.json").write_text(json.dumps({"model": "/models/tiny_llm/1/hf_model"}))
    template = template_from_repository(tmp_path, "tiny_llm")
    assert template is not None and template.render([Message("user", "x")]).endswith("<|assistant|>\n")
    assert template_from_repository(tmp_path, "other") is None


def test_template_from_repository_reads_a_served_path_to_another_version_by_the_one_rule(
    tmp_path: Path,
) -> None:
    """Version 2's model.json may name version 1's tokenizer under any serving root: Triton keeps
    it in tiny_llm/1 (kinds.paths.local_path; the front's own copy matched only version 2)."""
    _tokenizer(tmp_path / "tiny_llm" / "1" / "hf_model")
    version = tmp_path / "tiny_llm" / "2"
    version.mkdir(parents=True)
    (version / "model.json").write_text(json.dumps({"model": "/srv/repo/tiny_llm/1/hf_model"}))
    template = template_from_repository(tmp_path, "tiny_llm")
    assert template is not None and template.render([Message("user", "x")]).endswith("<|assistant|>\n")
