"""API keys of the front: ``Authorization: Bearer <key>``, compared in constant time.

Keys come from a file (one per line; blank lines and ``#`` comments skipped), never from the
command line (it shows in ``ps``), and are never logged or echoed in an error.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from pathlib import Path

from tritonkit.errors import ConfigError
from tritonkit.openai_front.errors import OpenAIError

__all__ = ["ApiKeys"]


class ApiKeys:
    """The accepted keys; :meth:`check` refuses a request without one with a 401."""

    def __init__(self, keys: Sequence[str]) -> None:
        cleaned = [k.strip() for k in keys if k.strip()]
        if not cleaned:
            raise ConfigError("no API key given", hint="put one key per line in the --openai-api-key-file")
        self._keys = tuple(k.encode("utf-8") for k in cleaned)

    def __repr__(self) -> str:
        return f"ApiKeys({len(self._keys)} key(s))"

    @classmethod
    def from_file(cls, path: Path) -> ApiKeys:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read the API key file {path}: {exc}") from exc
        keys = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
        if not keys:
            raise ConfigError(f"the API key file {path} holds no key", hint="one key per line")
        return cls(keys)

    def matches(self, authorization: str | None) -> bool:
        """True when ``authorization`` is ``Bearer <one of the keys>``; every key is compared."""
        scheme, _, given = (authorization or "").partition(" ")
        token = given.strip().encode("utf-8")
        ok = False
        for key in self._keys:
            # no early exit: the time taken does not say which key (or how much of one) matched
            ok |= hmac.compare_digest(token, key)
        return ok and scheme.lower() == "bearer"

    def check(self, authorization: str | None) -> None:
        if not self.matches(authorization):
            raise OpenAIError(
                "missing or invalid API key: send 'Authorization: Bearer <key>'",
                status=401,
                code="invalid_api_key",
            )
