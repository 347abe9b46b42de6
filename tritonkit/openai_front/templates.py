"""Chat templates: a model's Jinja template that turns messages into its prompt.

A template comes from ``--chat-template MODEL=PATH`` (a ``.jinja`` file, a
``tokenizer_config.json`` or a Hugging Face model directory holding one) or from the model's own
tokenizer in the served repository (its version directory's ``model.json`` names the model
directory). It is rendered in Jinja's sandbox: a template is code from a model repository.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tritonkit._extras import require
from tritonkit.errors import ConfigError
from tritonkit.kinds.paths import local_path
from tritonkit.openai_front.errors import OpenAIError
from tritonkit.openai_front.requests import Message
from tritonkit.openai_front.tool_parsers import detect_parser

__all__ = ["ChatTemplate", "template_from_repository"]

_TOKENIZER_CONFIG = "tokenizer_config.json"
_TEMPLATE_FILE = "chat_template.jinja"


def _token(value: Any) -> str:
    if isinstance(value, Mapping):  # {"content": "<s>", "lstrip": false, ...}
        value = value.get("content")
    return value if isinstance(value, str) else ""


class ChatTemplate:
    """One model's chat template, compiled once; :meth:`render` makes the prompt."""

    def __init__(
        self, source: str, *, bos_token: str = "", eos_token: str = "", origin: str = "<string>"
    ) -> None:
        jinja2 = require("jinja2", feature="chat templates of the OpenAI front")
        sandbox = require("jinja2.sandbox", feature="chat templates of the OpenAI front")
        self.origin = origin
        #: the template renders ``tools`` (a template that ignores them would drop them silently)
        self.takes_tools = "tools" in source
        #: the tool-call parser its own tool format calls for (None: it shows none)
        self.tool_parser = detect_parser(source) if self.takes_tools else None
        self.bos_token = bos_token
        self.eos_token = eos_token
        env = sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = _raise_from_template
        try:
            self._template = env.from_string(source)
        except jinja2.TemplateSyntaxError as exc:
            raise ConfigError(
                f"chat template {origin} does not parse: {exc.message} (line {exc.lineno})",
                hint="fix the template or pass another with --chat-template MODEL=FILE",
            ) from exc
        self._errors: tuple[type[Exception], ...] = (jinja2.TemplateError,)

    @classmethod
    def from_path(cls, path: Path) -> ChatTemplate:
        """From a ``.jinja`` file, a ``tokenizer_config.json`` or a directory holding either."""
        if path.is_dir():
            for name in (_TEMPLATE_FILE, _TOKENIZER_CONFIG):
                if (path / name).is_file():
                    return cls.from_path(path / name)
            raise ConfigError(
                f"{path} holds no {_TOKENIZER_CONFIG} or {_TEMPLATE_FILE}",
                hint="point --chat-template at the model's tokenizer directory or a .jinja file",
            )
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read chat template {path}: {exc.strerror}") from exc
        if path.suffix != ".json":
            tokens = cls._special_tokens(path.parent / _TOKENIZER_CONFIG)
            return cls(text, origin=str(path), **tokens)
        try:
            config = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path} is not JSON: {exc.msg} (line {exc.lineno})") from exc
        template = config.get("chat_template") if isinstance(config, Mapping) else None
        if isinstance(template, list):  # named templates: [{"name": "default", "template": ...}]
            named = {t.get("name"): t.get("template") for t in template if isinstance(t, Mapping)}
            template = named.get("default")
        if not isinstance(template, str) or not template:
            raise ConfigError(
                f"{path} has no chat_template",
                hint="the model has no chat template: pass one with --chat-template MODEL=FILE.jinja",
            )
        return cls(
            template,
            bos_token=_token(config.get("bos_token")),
            eos_token=_token(config.get("eos_token")),
            origin=str(path),
        )

    @staticmethod
    def _special_tokens(config: Path) -> dict[str, str]:
        try:
            data = json.loads(config.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, Mapping):
            return {}
        return {"bos_token": _token(data.get("bos_token")), "eos_token": _token(data.get("eos_token"))}

    def render(self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None = None) -> str:
        """The prompt of ``messages`` with the assistant's turn opened (``add_generation_prompt``);
        ``tools`` as Hugging Face templates take them (given only when there are some)."""
        turns = [_turn(m) for m in messages]
        extra: dict[str, Any] = {"tools": list(tools)} if tools else {}
        try:
            return str(
                self._template.render(
                    messages=turns,
                    add_generation_prompt=True,
                    bos_token=self.bos_token,
                    eos_token=self.eos_token,
                    **extra,
                )
            )
        except OpenAIError:
            raise
        except self._errors as exc:
            raise OpenAIError(
                f"the model's chat template failed on these messages: {exc}",
                status=400,
                param="messages",
                code="invalid_messages",
            ) from exc


def _turn(message: Message) -> dict[str, Any]:
    """A message as chat templates take it: ``tool_calls`` on an assistant's, ``tool_call_id`` on
    a tool's (an assistant message of calls only has ``content`` None, as Hugging Face's do)."""
    turn: dict[str, Any] = {"role": message.role, "content": message.text}
    if message.tool_calls:
        turn["tool_calls"] = [dict(call) for call in message.tool_calls]
        if not message.text:
            turn["content"] = None
    if message.tool_call_id is not None:
        turn["tool_call_id"] = message.tool_call_id
    return turn


def _raise_from_template(message: str) -> None:
    """A template's own ``raise_exception(...)``: the messages break its rules (a 400)."""
    raise OpenAIError(str(message), status=400, param="messages", code="invalid_messages")


def _model_dir(repository: Path, model: str) -> Path | None:
    """The directory named by the newest version's ``model.json`` (``tokenizer``, else ``model``)."""
    root = repository / model
    versions = sorted(
        (p for p in root.glob("*") if p.name.isdigit() and p.is_dir()), key=lambda p: int(p.name)
    )
    if not versions:
        return None
    version = versions[-1]
    try:
        args = json.loads((version / "model.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(args, Mapping):
        return None
    for key in ("tokenizer", "model"):
        value = args.get(key)
        if not isinstance(value, str):
            continue
        # a served path ('<serving root>/<model>/<N>/<rest>') -> here, by the one served-path rule
        local = local_path(value, model_dir=root) if Path(value).is_absolute() else version / value
        if local is not None and local.is_dir():
            return local
    return None


def template_from_repository(repository: Path, model: str) -> ChatTemplate | None:
    """The chat template of ``model``'s tokenizer in a local repository, or None when it has none."""
    directory = _model_dir(repository, model)
    if directory is None:
        return None
    try:
        return ChatTemplate.from_path(directory)
    except ConfigError:
        return None
