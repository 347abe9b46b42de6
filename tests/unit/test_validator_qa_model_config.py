"""The validator refuses Triton's own QA model-config cases for the defect Triton names (issue 32).

``tests/fixtures/upstream/server/qa_model_config`` vendors cases of the server's
``qa/L0_model_config``; ``verdicts.json`` (``qa_model_config``) says, for each, Triton's verdict
(served on tritonserver 2.51 by tests/integration/test_validator_qa_model_config_triton.py) and
the validator rule that names the same defect. Each case is judged as the QA's test.sh runs it
(``tests/_upstream_qa.py``): a refused case must raise that rule as an error, a loading case no
error at all.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests._upstream_qa import CASES, QA, auto_complete, place
from tritonkit.repository import validate_repository

ROWS = {row["case"]: row for row in CASES}


def _errors(row: dict[str, Any], repository: Path) -> set[str]:
    repository.mkdir(exist_ok=True)
    model = place(row, repository)
    report = validate_repository(repository, auto_complete=auto_complete(row["case"]))
    return {p.code for p in report.errors if p.model == model.name}


@pytest.mark.parametrize("row", CASES, ids=lambda row: row["case"])
def test_validator_names_the_defect_triton_refuses_in_a_qa_model_config_case(
    tmp_path: Path, row: dict[str, Any]
) -> None:
    errors = _errors(row, tmp_path)
    if row["triton"] == "refused":
        assert row["rule"] in errors, (row["triton_2_51"], errors)
    else:
        assert errors == set(), errors


def test_qa_model_config_table_lists_every_vendored_case_once() -> None:
    listed = [row["case"] for row in CASES]
    present = {p.parent.relative_to(QA).as_posix() for p in QA.rglob("config.pbtxt")}
    assert len(listed) == len(set(listed)) and set(listed) == present


def test_qa_model_config_agreement_before_issue_32s_qa_work_is_what_the_table_records() -> None:
    """The figures the docs quote: 60 of 81 before (21 misses, one false alarm), 81 of 81 now."""
    before = [row["before"] for row in CASES]
    assert (before.count("agrees"), len(before)) == (60, 81)
    assert sum(b.startswith("false alarm") for b in before) == 1


def _edit(path: str, old: str, new: str) -> Callable[[Path], None]:
    def apply(model: Path) -> None:
        target = model / path
        assert old in target.read_text()
        target.write_text(target.read_text().replace(old, new))

    return apply


def _touch(name: str) -> Callable[[Path], None]:
    return lambda model: (model / name).write_text("")


_EXECUTE = "\n\n    def execute"
_RETURN = "\n        return auto_complete_model_config" + _EXECUTE
#: each case a rule was added or fixed for, and the edit that corrects it on that count
FIXED: dict[str, Callable[[Path], None]] = {
    "noautofill_platform/negative_gpu": _edit("config.pbtxt", "gpus: [ -1 ]", "gpus: [ 0 ]"),
    "special_cases/invalid_runtime": _touch("__invalid_runtime__"),  # Triton searches the model dir
    "special_cases/runtime_escape": _edit("config.pbtxt", "../dummy_runtime/", ""),
    "autofill_noplatform/python/model_transaction_policy_mismatch": _edit(
        "config.pbtxt", "model_transaction_policy {\n  decoupled: false\n}", ""
    ),
    "autofill_noplatform/python/conflicting_max_batch_size": _edit(
        "config.pbtxt", "max_batch_size: 6", "max_batch_size: 4"
    ),
    "autofill_noplatform/python/input_mismatch_datatype": _edit("config.pbtxt", "TYPE_INT32", "TYPE_FP32"),
    "autofill_noplatform/python/output_mismatch_dims": _edit("config.pbtxt", "[ 16 ]", "[ 4 ]"),
    "autofill_noplatform/python/conflicting_scheduler_sequence": _edit(
        "config.pbtxt", "sequence_batching: {\n}", ""
    ),
    "autofill_noplatform/python/no_return": _edit("1/model.py", _EXECUTE, _RETURN),
    "autofill_noplatform/python/input_missing_dims": _edit(
        "1/model.py", "'TYPE_FP32'})", "'TYPE_FP32', 'dims': [4]})"
    ),
    "autofill_noplatform/python/output_wrong_property": _edit("1/model.py", ", 'is_shape_tensor:': True", ""),
    "autofill_noplatform/python/model_transaction_policy_invalid_args": _edit(
        "1/model.py", "{'invalid': 'argument'}", "{'decoupled': False}"
    ),
}


@pytest.mark.parametrize("case", sorted(FIXED))
def test_validator_rule_added_for_a_qa_case_is_silent_once_the_case_is_corrected(
    tmp_path: Path, case: str
) -> None:
    rule = ROWS[case]["rule"]
    assert rule in _errors(ROWS[case], tmp_path / "as_is")
    (tmp_path / "fixed").mkdir()
    model = place(ROWS[case], tmp_path / "fixed")
    FIXED[case](model)
    if (model / "1" / "model.py").exists():
        ast.parse((model / "1" / "model.py").read_text())  # the edit leaves a model Triton can import
    report = validate_repository(tmp_path / "fixed", auto_complete=auto_complete(case))
    assert rule not in {p.code for p in report.errors}, [str(p) for p in report.errors]


@pytest.mark.parametrize("as_test_sh", [True, False], ids=["platform-set-as-test-sh", "as-vendored"])
def test_negative_gpu_is_refused_for_its_instance_group_alone_as_triton_reports_it(
    tmp_path: Path, as_test_sh: bool
) -> None:
    """Triton validates instance groups before it resolves the backend and the model file, and
    stops at the first refusal: tritonkit used to add "model-file-missing" (the platform test.sh
    sets) or "config sets neither platform nor backend" (the vendored config)."""
    row = ROWS["noautofill_platform/negative_gpu"]
    if as_test_sh:
        assert _errors(row, tmp_path) == {"instance-group-invalid"}
        return
    model = tmp_path / "negative_gpu"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text((QA / row["case"] / "config.pbtxt").read_text())
    report = validate_repository(tmp_path, auto_complete=False)
    assert {p.code for p in report.errors} == {"instance-group-invalid"}


_GROUP_CASES = sorted(row["case"] for row in CASES if row.get("rule") == "instance-group-invalid")


@pytest.mark.parametrize("case", _GROUP_CASES)
def test_instance_group_refusal_names_the_group_as_tritons_qa_expects(tmp_path: Path, case: str) -> None:
    """Triton quotes "instance group <name> of model <model>", an unnamed group being
    ``<model>_<index>`` (core's NormalizeInstanceGroup); the QA's ``expected`` text holds the
    GPU-box verdict (negative_gpu: its second group, negative_gpu_1)."""
    expected = (QA / case / "expected").read_text()
    named = re.search(r"instance group \S+ of model \S+", expected)
    assert named is not None, expected
    model = place(ROWS[case], tmp_path)
    report = validate_repository(tmp_path, auto_complete=auto_complete(case))
    said = [p.message for p in report.errors if p.model == model.name and p.code == "instance-group-invalid"]
    assert any(named.group(0) + " " in message for message in said), (named.group(0), said)


def test_instance_group_refusal_quotes_a_groups_own_name_and_counts_every_group(tmp_path: Path) -> None:
    model = tmp_path / "m"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(
        'name: "m"\nbackend: "python"\n'
        'instance_group [{ name: "fast" kind: KIND_CPU gpus: [ 0 ] }, { kind: KIND_CPU }, '
        "{ kind: KIND_GPU gpus: [ -2 ] }]\n"
    )
    report = validate_repository(tmp_path)
    said = sorted(p.message for p in report.errors if p.code == "instance-group-invalid")
    assert len(said) == 2, said
    assert said[0].startswith("instance group fast of model m has kind KIND_CPU"), said
    assert said[1].startswith("instance group m_2 of model m lists invalid gpu id(s) [-2]"), said
