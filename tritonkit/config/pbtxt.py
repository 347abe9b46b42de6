"""Load and dump ``config.pbtxt`` through Triton's own schema, with file and line on errors.

Protobuf's Python ``text_format`` gives a line for syntax errors but no public way to ask
"on which line is ``input[1].dims``?". The validator needs that, so :func:`locate_fields`
runs a small tokenizer over the same text and maps field paths to line numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from tritonkit._files import atomic_write_bytes
from tritonkit.config._proto import ModelConfig, new_config, text_format
from tritonkit.errors import ConfigParseError

__all__ = [
    "FieldLocator",
    "dumps_config",
    "locate_fields",
    "parse_config",
    "read_config",
    "write_config",
]

_HINT = "fix the text so it follows Triton's ModelConfig schema (model_config.proto)"


def parse_config(text: str, *, source: str | Path = "<string>") -> ModelConfig:
    """Parse config.pbtxt text into a ModelConfig; ConfigParseError names ``source`` and line."""
    cfg = new_config()
    try:
        text_format.Parse(text, cfg, allow_unknown_field=False)
    except text_format.ParseError as exc:
        line = exc.GetLine() if hasattr(exc, "GetLine") else None
        column = exc.GetColumn() if hasattr(exc, "GetColumn") else None
        message = _strip_position(str(exc))
        raise ConfigParseError(
            f"not a valid Triton model config: {message}",
            file=source,
            line=line if line and line > 0 else _last_line(text),
            column=column,
            hint=_HINT,
        ) from exc
    except (ValueError, TypeError, UnicodeError) as exc:  # pragma: no cover - defensive
        raise ConfigParseError(
            f"not a valid Triton model config: {exc}", file=source, line=_last_line(text), hint=_HINT
        ) from exc
    return cfg


def read_config(path: str | Path) -> ModelConfig:
    """Read and parse a config.pbtxt file."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError as exc:
        raise ConfigParseError(
            "config file does not exist", file=p, hint="create it or build the model with `tritonkit build`"
        ) from exc
    except OSError as exc:
        raise ConfigParseError(f"cannot read config file: {exc.strerror}", file=p) from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigParseError("config file is not UTF-8 text", file=p, line=line, hint=_HINT) from exc
    return parse_config(text, source=p)


def dumps_config(cfg: ModelConfig) -> str:
    """Stable, diff-friendly text: fields in .proto declaration order, map keys sorted."""
    text: str = text_format.MessageToString(cfg, as_utf8=True, use_index_order=True)
    return text


def write_config(cfg: ModelConfig, path: str | Path, *, atomic: bool = True) -> Path:
    """Write ``cfg`` to ``path`` atomically (temp file in the same directory, then rename).

    ``atomic=False`` writes in place: for a directory that is itself renamed into place when
    complete (the builder's scratch directory), where a second rename per file only costs time.
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    if atomic:
        atomic_write_text(p, dumps_config(cfg))
    else:
        p.write_text(dumps_config(cfg), encoding="utf-8")
    return p


def atomic_write_text(path: Path, text: str) -> None:
    """Write text to ``path`` via a temporary sibling and ``os.replace`` (the usual permissions)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def _strip_position(message: str) -> str:
    return re.sub(r"^\d+:\d+\s*:\s*", "", message)


def _last_line(text: str) -> int:
    return max(1, text.count("\n") + (0 if text.endswith("\n") else 1))


# --------------------------------------------------------------------------------------------
# Field locator
# --------------------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<ws>[ \t\r\f\v]+)
  | (?P<nl>\n)
  | (?P<comment>\#[^\n]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<word>[-+]?[A-Za-z0-9_.]+)
  | (?P<punct>[{}\[\]<>:,;])
  | (?P<other>.)
    """,
    re.VERBOSE,
)


@dataclass(frozen=True)
class _Tok:
    kind: str
    value: str
    line: int


@dataclass
class FieldLocator:
    """Maps field paths such as ``input[1].dims`` or ``ensemble_scheduling.step[0].input_map[X]``
    to the 1-based line where they appear.

    Repeated message fields are indexed by occurrence (``input[0]``); map entries are also
    reachable by key (``parameters[KEY]``); a path without index means the first occurrence.
    """

    lines: dict[str, int] = field(default_factory=dict)

    def line(self, path: str) -> int | None:
        """Line of ``path``, or of its nearest located ancestor, or None."""
        current = path
        while current:
            found = self.lines.get(current)
            if found is not None:
                return found
            current = _parent(current)
        return None


def _parent(path: str) -> str:
    if path.endswith("]"):
        return path[: path.rfind("[")]
    dot = path.rfind(".")
    return path[:dot] if dot >= 0 else ""


def _tokenize(text: str) -> list[_Tok]:
    toks: list[_Tok] = []
    line = 1
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup or "other"
        if kind == "nl":
            line += 1
        elif kind in ("ws", "comment"):
            continue
        else:
            toks.append(_Tok(kind, m.group(), line))
    return toks


def locate_fields(text: str) -> FieldLocator:
    """Best-effort map from field paths to lines; never raises, even on broken text."""
    loc = FieldLocator()
    toks = _tokenize(text)
    try:
        _Parser(toks, loc.lines).message("", closing=None)
    except _StopParseError:
        pass
    # Singular sub-messages are recorded as "x[0]"; make "x.y" (first occurrence) work too.
    for path, line in list(loc.lines.items()):
        if "[0]" in path:
            loc.lines.setdefault(path.replace("[0]", ""), line)
    return loc


class _StopParseError(Exception):
    """The text ended or broke; keep what was located so far."""


class _Parser:
    def __init__(self, toks: list[_Tok], lines: dict[str, int]) -> None:
        self.toks = toks
        self.pos = 0
        self.lines = lines

    def peek(self) -> _Tok | None:
        return self.toks[self.pos] if self.pos < len(self.toks) else None

    def take(self) -> _Tok:
        tok = self.peek()
        if tok is None:
            raise _StopParseError
        self.pos += 1
        return tok

    def record(self, path: str, line: int) -> None:
        self.lines.setdefault(path, line)

    def message(self, prefix: str, closing: str | None) -> dict[str, str]:
        """Parse fields until ``closing``; returns scalar values seen (for map keys)."""
        counts: dict[str, int] = {}
        scalars: dict[str, str] = {}
        while True:
            tok = self.peek()
            if tok is None:
                if closing is None:
                    return scalars
                raise _StopParseError
            if closing is not None and tok.value == closing:
                self.pos += 1
                return scalars
            if tok.value in (",", ";"):
                self.pos += 1
                continue
            if tok.kind != "word":
                raise _StopParseError
            self.pos += 1
            name = tok.value
            base = f"{prefix}.{name}" if prefix else name
            self.record(base, tok.line)
            nxt = self.peek()
            if nxt is not None and nxt.value == ":":
                self.pos += 1
                nxt = self.peek()
            if nxt is None:
                raise _StopParseError
            if nxt.value in ("{", "<"):
                self.pos += 1
                index = counts.get(name, 0)
                counts[name] = index + 1
                path = f"{base}[{index}]"
                self.record(path, tok.line)
                inner = self.message(path, "}" if nxt.value == "{" else ">")
                if "key" in inner:
                    self.record(f"{base}[{inner['key']}]", tok.line)
            elif nxt.value == "[":
                self.pos += 1
                self.list_value(base, name, counts, tok.line)
            else:
                value = self.take()
                scalars[name] = _unquote(value.value)

    def list_value(self, base: str, name: str, counts: dict[str, int], line: int) -> None:
        while True:
            tok = self.take()
            if tok.value == "]":
                return
            if tok.value == ",":
                continue
            if tok.value in ("{", "<"):
                index = counts.get(name, 0)
                counts[name] = index + 1
                path = f"{base}[{index}]"
                self.record(path, tok.line)
                self.message(path, "}" if tok.value == "{" else ">")


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] in "\"'" and value[-1] == value[0]:
        return value[1:-1]
    return value
