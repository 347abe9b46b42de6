"""Triton's own QA model-config cases, served on the real tritonserver 2.51: its verdicts, recorded.

Each QA directory's cases (``tests/_upstream_qa.py`` places them as the QA's test.sh does) are
loaded by one local tritonserver (``--exit-on-error=false``, auto-complete off where test.sh runs
``--strict-model-config=true``). Every case ``verdicts.json`` says is refused must fail with the
message it records (config checks run before any backend loads, so no model file is needed), and
the QA's own ``expected`` text must match that message exactly where the table says it still does
on 2.51 (the QA's wording moves between releases; the validator is held to the rule, not the words).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests._upstream_qa import CASES, QA, grep_pattern, group, model_name, place
from tritonkit.errors import ModelLoadError
from tritonkit.server import LocalTritonServer
from tritonkit.server._logs import parse_load_failures

pytestmark = pytest.mark.integration

GROUPS = sorted({group(row["case"]) for row in CASES})


@pytest.mark.parametrize("qa_dir", GROUPS)
def test_tritonserver_refuses_the_qa_model_config_cases_with_the_recorded_message(
    tmp_path: Path, qa_dir: str
) -> None:
    rows = {model_name(row["case"]): row for row in CASES if group(row["case"]) == qa_dir}
    repository = tmp_path / "repo"
    repository.mkdir()
    for row in rows.values():
        place(row["case"], repository)
    strict = qa_dir in ("noautofill_platform", "special_cases")
    server = LocalTritonServer(
        repository,
        model_config_name=None,
        startup_timeout=300,
        extra_args=["--exit-on-error=false", *(["--disable-auto-complete-config"] if strict else [])],
    )
    try:
        server.start()
    except ModelLoadError:
        pass  # every case here is refused, so the start fails; the log says why, per model
    finally:
        server.stop()
    failures = parse_load_failures(server.logs())
    assert set(failures) == {m for m, row in rows.items() if row["triton"] == "refused"}, failures
    for model, row in rows.items():
        assert row["triton_2_51"] in failures[model], (model, failures[model])
        expected = [p.read_text() for p in (QA / row["case"]).glob("expected*")]
        holds = any(re.search(grep_pattern(text), failures[model]) for text in expected)
        assert holds == row["expected_holds_on_2_51"], (model, failures[model], expected)
