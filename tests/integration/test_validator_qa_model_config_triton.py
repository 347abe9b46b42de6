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
from typing import Any

import pytest

from tests._upstream_qa import CASES, QA, auto_complete, grep_pattern, group, model_name, place
from tests.integration._verdict_corpus import ready_models
from tritonkit.errors import ModelLoadError
from tritonkit.server import LocalTritonServer
from tritonkit.server._logs import parse_load_failures

pytestmark = pytest.mark.integration


def _run(row: dict[str, Any]) -> tuple[str, bool]:
    """One server per QA directory and auto-complete setting, as test.sh runs them."""
    return group(row["case"]), auto_complete(row["case"])


RUNS = sorted({_run(row) for row in CASES})


@pytest.mark.parametrize("run", RUNS, ids=lambda run: f"{run[0]}-{'auto' if run[1] else 'strict'}")
def test_tritonserver_gives_the_qa_model_config_cases_the_recorded_verdicts(
    tmp_path: Path, run: tuple[str, bool]
) -> None:
    rows = {model_name(row["case"]): row for row in CASES if _run(row) == run}
    repository = tmp_path / "repo"
    repository.mkdir()
    for row in rows.values():
        place(row, repository)
    server = LocalTritonServer(
        repository,
        model_config_name=None,
        startup_timeout=600,
        extra_args=["--exit-on-error=false", *([] if run[1] else ["--disable-auto-complete-config"])],
    )
    try:
        server.start()
    except ModelLoadError:
        pass  # a run with a refused case fails the start; the log says why, per model
    finally:
        server.stop()
    failures = parse_load_failures(server.logs())
    assert set(failures) == {m for m, row in rows.items() if row["triton"] == "refused"}, failures
    assert ready_models(server.logs()) == {m for m, row in rows.items() if row["triton"] == "loads"}
    for model, reason in failures.items():
        row = rows[model]
        assert row["triton_2_51"] in reason, (model, reason)
        expected = [p.read_text() for p in (QA / row["case"]).glob("expected*")]
        holds = any(re.search(grep_pattern(text), reason) for text in expected)
        assert holds == row["expected_holds_on_2_51"], (model, reason, expected)
