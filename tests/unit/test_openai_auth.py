"""API keys: Bearer only, every key compared, never shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonkit.errors import ConfigError
from tritonkit.openai_front import ApiKeys, OpenAIError


def test_api_keys_accept_any_listed_key_as_bearer_only(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text("# team a\nsk-one\n\n  sk-two  \n")
    keys = ApiKeys.from_file(path)
    assert keys.matches("Bearer sk-one") and keys.matches("bearer sk-two")
    for header in (None, "", "sk-one", "Basic sk-one", "Bearer sk-on", "Bearer sk-one2", "Bearer # team a"):
        assert not keys.matches(header), header


def test_api_keys_refusal_is_a_401_that_never_names_a_key() -> None:
    keys = ApiKeys(["sk-secret"])
    with pytest.raises(OpenAIError) as caught:
        keys.check("Bearer sk-secre")
    assert caught.value.status == 401 and caught.value.code == "invalid_api_key"
    assert "sk-secre" not in str(caught.value.body()) and "sk-secret" not in repr(keys)


def test_api_key_file_without_keys_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text("# nothing\n\n")
    with pytest.raises(ConfigError, match="holds no key"):
        ApiKeys.from_file(path)
    with pytest.raises(ConfigError, match="cannot read"):
        ApiKeys.from_file(tmp_path / "missing")
