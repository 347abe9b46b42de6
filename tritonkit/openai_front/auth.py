"""API keys of the front: ``Authorization: Bearer <key>``, compared in constant time.

Keys come from a file (one per line; blank lines and ``#`` comments skipped), never from the
command line (it shows in ``ps``), and are never logged or echoed in an error.

Each key has a stable **id** that metrics and logs may show instead of the key: the name given
before it on its line (``team-a sk-...``; a bearer token holds no blank, so the first word of a
two-word line is a name), else ``key-`` and the first 8 hex digits of the key's SHA-256 (one-way,
and short enough that it cannot be brute-forced back into a usable key of any real length).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Sequence
from pathlib import Path

from tritonkit.errors import ConfigError
from tritonkit.openai_front.errors import OpenAIError

__all__ = ["ANONYMOUS", "ApiKeys", "key_id"]

#: the id metrics use for requests to a front without keys
ANONYMOUS = "none"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")


def key_id(key: str) -> str:
    """A key's stable id when no name is given: ``key-`` + 8 hex digits of its SHA-256."""
    return "key-" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:8]


def _entry(line: str) -> tuple[str, str]:
    """``KEY`` or ``NAME KEY`` -> (id, key)."""
    words = line.split()
    if len(words) == 1:
        return key_id(words[0]), words[0]
    if len(words) == 2 and _NAME.match(words[0]):
        return words[0], words[1]
    raise ConfigError(
        "an API key line must be KEY or NAME KEY (NAME: letters, digits, '.', '_', '-')",
        hint="one key per line, optionally preceded by a name that metrics show instead of the key",
    )


class ApiKeys:
    """The accepted keys and their ids; :meth:`check` refuses a request without one with a 401."""

    def __init__(self, keys: Sequence[str]) -> None:
        cleaned = [k.strip() for k in keys if k.strip()]
        if not cleaned:
            raise ConfigError("no API key given", hint="put one key per line in the --openai-api-key-file")
        entries = [_entry(line) for line in cleaned]
        ids = [i for i, _ in entries]
        if len(set(ids)) != len(ids):
            raise ConfigError("two API keys have the same name", hint="give each key its own name, or none")
        self._ids = tuple(ids)
        self._keys = tuple(k.encode("utf-8") for _, k in entries)

    def __repr__(self) -> str:
        return f"ApiKeys({len(self._keys)} key(s))"

    @property
    def ids(self) -> tuple[str, ...]:
        """The keys' ids, in file order (never the keys)."""
        return self._ids

    @classmethod
    def from_file(cls, path: Path) -> ApiKeys:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read the API key file {path}: {exc}") from exc
        keys = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            try:
                _entry(line)
            except ConfigError as exc:  # the message never quotes the line: it holds a key
                raise ConfigError(f"{path}:{number}: {exc.message}", hint=exc.hint) from None
            keys.append(line)
        if not keys:
            raise ConfigError(f"the API key file {path} holds no key", hint="one key per line")
        try:
            return cls(keys)
        except ConfigError as exc:
            raise ConfigError(f"the API key file {path}: {exc.message}", hint=exc.hint) from None

    def identify(self, authorization: str | None) -> str | None:
        """The id of the key in ``Bearer <key>``, or None; every key is compared."""
        scheme, _, given = (authorization or "").partition(" ")
        token = given.strip().encode("utf-8")
        found: str | None = None
        for ident, key in zip(self._ids, self._keys, strict=True):
            # no early exit: the time taken does not say which key (or how much of one) matched
            if hmac.compare_digest(token, key):
                found = ident
        return found if scheme.lower() == "bearer" else None

    def matches(self, authorization: str | None) -> bool:
        """True when ``authorization`` is ``Bearer <one of the keys>``."""
        return self.identify(authorization) is not None

    def check(self, authorization: str | None) -> str:
        """The id of the request's key; a 401 when it has none that matches."""
        ident = self.identify(authorization)
        if ident is None:
            raise OpenAIError(
                "missing or invalid API key: send 'Authorization: Bearer <key>'",
                status=401,
                code="invalid_api_key",
            )
        return ident
