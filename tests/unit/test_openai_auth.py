"""API keys: Bearer only, every key compared, never shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonkit.errors import ConfigError
from tritonkit.openai_front import ApiKeys, OpenAIError
from tritonkit.openai_front.auth import key_id


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


def test_api_keys_have_stable_ids_a_given_name_or_a_short_hash_never_the_key(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text("team-a sk-alpha-0123456789\nsk-beta-0123456789\n")
    keys = ApiKeys.from_file(path)
    assert keys.check("Bearer sk-alpha-0123456789") == "team-a"
    hashed = keys.check("Bearer sk-beta-0123456789")
    assert hashed == key_id("sk-beta-0123456789") and hashed.startswith("key-") and len(hashed) == 12
    assert keys.ids == ("team-a", hashed)
    assert ApiKeys.from_file(path).ids == keys.ids  # stable across restarts and workers
    assert not any("alpha" in i or "beta" in i for i in keys.ids)
    assert keys.identify("Bearer team-a") is None  # a name is not a key


@pytest.mark.parametrize("line", ["a b c", "bad/name sk-1", "-x sk-1"])
def test_api_key_file_line_that_is_neither_key_nor_name_and_key_is_refused_without_quoting_it(
    tmp_path: Path, line: str
) -> None:
    path = tmp_path / "keys"
    path.write_text(f"# first\n{line}\n")
    with pytest.raises(ConfigError) as caught:
        ApiKeys.from_file(path)
    assert f"{path}:2:" in caught.value.message and "sk-1" not in str(caught.value)


def test_api_key_names_must_differ() -> None:
    with pytest.raises(ConfigError, match="same name"):
        ApiKeys(["team sk-1", "team sk-2"])
