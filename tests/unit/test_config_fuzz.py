"""Arbitrary text meets the pbtxt parser, the field locator and the validator: never a traceback."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tritonkit.config import locate_fields, parse_config
from tritonkit.errors import ConfigParseError
from tritonkit.repository import validate_repository

BASE = Path(__file__).resolve().parent.parent / "fixtures" / "validator" / "base"
GOOD = (BASE / "solo" / "config.pbtxt").read_text()

# Text that looks like pbtxt often enough to reach deep parser states.
_pbtxt_ish = st.lists(
    st.sampled_from(
        ['name: "m"', "input {", "}", "dims: [", "1,", "-1", "]", "max_batch_size:", "8", "data_type:",
         "TYPE_FP32", "reshape {", "shape: []", "#c\n", "\n", '"', "<", ">", "::", "\x00"]
    ),
    max_size=40,
).map(" ".join)  # fmt: skip
_texts = st.one_of(st.text(max_size=300), _pbtxt_ish, st.integers(0, len(GOOD)).map(lambda n: GOOD[:n]))


@settings(max_examples=300, deadline=None)
@given(text=_texts)
def test_parse_config_raises_only_config_parse_error_when_text_is_arbitrary(text: str) -> None:
    try:
        parse_config(text, source="f.pbtxt")
    except ConfigParseError as exc:
        assert exc.file == "f.pbtxt"
        assert exc.line is None or exc.line >= 1


@settings(max_examples=300, deadline=None)
@given(text=_texts)
def test_locate_fields_never_raises_when_text_is_arbitrary(text: str) -> None:
    loc = locate_fields(text)
    n_lines = text.count("\n") + 1
    assert all(1 <= line <= n_lines for line in loc.lines.values())


@settings(max_examples=40, deadline=None)
@given(text=_texts)
def test_validate_repository_reports_problems_not_tracebacks_when_config_is_arbitrary(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        shutil.copytree(BASE, repo)
        (repo / "solo" / "config.pbtxt").write_text(text)
        report = validate_repository(repo)
        for problem in report.problems:
            assert problem.file.startswith(str(repo))
            assert problem.line is None or problem.line >= 1
