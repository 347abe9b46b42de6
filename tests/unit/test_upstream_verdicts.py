"""The validator's verdicts on NVIDIA's own model repositories equal Triton's (issue 32).

``tests/fixtures/upstream`` holds models of NVIDIA's QA, python_backend examples, tutorials and
vllm_backend samples; ``verdicts.json`` says, for each, whether tritonserver 2.51 loads it and how
that is known (served here: tests/integration/test_upstream_verdicts_triton.py; read from the
backend's source where it cannot run here). The validator, told nothing about the serving image,
must report errors for exactly the models Triton refuses.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tritonkit.repository import validate_repository

UPSTREAM = Path(__file__).resolve().parent.parent / "fixtures" / "upstream"
TABLE: list[dict[str, Any]] = json.loads((UPSTREAM / "verdicts.json").read_text())["models"]

def _flagged(repository: str, model: str) -> list[str]:
    report = validate_repository(UPSTREAM / repository)
    return [f"{p.code}: {p.message}" for p in report.errors if p.model == model]


@pytest.mark.parametrize("row", TABLE, ids=lambda row: f"{row['repository']}/{row['model']}")
def test_validator_refuses_an_upstream_model_exactly_when_triton_does(row: dict[str, Any]) -> None:
    flagged = _flagged(row["repository"], row["model"])
    assert bool(flagged) == (row["triton"] == "refused"), (row["how"], flagged)


def test_upstream_corpus_lists_every_model_of_its_fixtures_once() -> None:
    listed = [(row["repository"], row["model"]) for row in TABLE]
    present = {
        (p.parent.parent.relative_to(UPSTREAM).as_posix(), p.parent.name)
        for p in UPSTREAM.glob("*/*/*/config.pbtxt")
    }
    assert len(listed) == len(set(listed)) and set(listed) == present


def test_upstream_agreement_before_issue_32_is_what_the_table_records() -> None:
    """The figure the docs quote: the validator before issue 32 agreed on 6 of these 17 models."""
    before = sum((row["before"] != "ok") == (row["triton"] == "refused") for row in TABLE)
    assert (before, len(TABLE)) == (6, 17)
