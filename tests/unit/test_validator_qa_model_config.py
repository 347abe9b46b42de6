"""The validator refuses Triton's own QA model-config cases for the defect Triton names (issue 32).

``tests/fixtures/upstream/server/qa_model_config`` vendors cases of the server's
``qa/L0_model_config``; ``verdicts.json`` (``qa_model_config``) says, for each, Triton's verdict
(served on tritonserver 2.51 by tests/integration/test_validator_qa_model_config_triton.py) and
the validator rule that names the same defect. Each case is judged as the QA's test.sh runs it
(``tests/_upstream_qa.py``): a refused case must raise that rule as an error, a loading case no
error at all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests._upstream_qa import CASES, QA, auto_complete, model_name, place
from tritonkit.repository import validate_repository


def _errors(case: str, repository: Path) -> list[tuple[str, str]]:
    place(case, repository)
    report = validate_repository(repository, auto_complete=auto_complete(case))
    return [(p.code, p.message) for p in report.errors if p.model == model_name(case)]


@pytest.mark.parametrize("row", CASES, ids=lambda row: row["case"])
def test_validator_names_the_defect_triton_refuses_in_a_qa_model_config_case(
    tmp_path: Path, row: dict[str, Any]
) -> None:
    errors = _errors(row["case"], tmp_path)
    if row["triton"] == "refused":
        assert row["rule"] in {code for code, _ in errors}, (row["triton_2_51"], errors)
    else:
        assert errors == [], errors


def test_qa_model_config_table_lists_every_vendored_case_once() -> None:
    listed = [row["case"] for row in CASES]
    present = {p.parent.relative_to(QA).as_posix() for p in QA.rglob("expected*")}
    assert len(listed) == len(set(listed)) and set(listed) == present


def test_qa_model_config_agreement_before_the_table_is_what_it_records() -> None:
    """The figures the docs quote: 52 of 55 before; the three misses each have a rule now."""
    before = [row["case"] for row in CASES if row["before"] != "agrees"]
    assert (len(CASES) - len(before), len(CASES)) == (52, 55)
    assert before == [
        "noautofill_platform/negative_gpu",
        "special_cases/invalid_runtime",
        "special_cases/runtime_escape",
    ]
