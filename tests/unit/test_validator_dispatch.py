"""The ensemble-parallel-step-failure rule: steps reading client input that start beside a sibling."""

from __future__ import annotations

from pathlib import Path

from tests.integration._crash_repo import write_crash_repository
from tritonkit.repository import build_spec
from tritonkit.repository.validator import Problem, ValidationReport, validate_repository
from tritonkit.repository.validator.dispatch_rules import CODE, scheduling_batches

ROOT = Path(__file__).resolve().parents[2]


def _rule(report: ValidationReport) -> list[Problem]:
    return [p for p in report.problems if p.code == CODE]


def test_rule_warns_on_the_failing_step_with_its_line_when_it_starts_beside_a_sibling(tmp_path: Path) -> None:
    report = validate_repository(write_crash_repository(tmp_path / "repo"))
    found = _rule(report)
    assert report.valid  # a warning, not an error: Triton loads and serves it
    assert [(p.model, p.severity, p.line) for p in found] == [("fanout", "warning", 7)]
    message = found[0].message
    assert "step 0 ('reject')" in message and "step(s) 1 ('passthrough')" in message
    assert "2.51" in message and "core#483" in message


def test_rule_stays_silent_when_client_input_is_checked_by_a_step_that_runs_alone(tmp_path: Path) -> None:
    write_crash_repository(tmp_path / "repo")
    report = validate_repository(tmp_path / "repo")
    assert [p.model for p in _rule(report)] == ["fanout"]  # not "gated"


def test_rule_stays_silent_on_the_example_pipelines_when_built_from_the_specs(tmp_path: Path) -> None:
    out = tmp_path / "repo"
    for spec in ("densenet.yaml", "vlm.yaml", "arr_coc.yaml"):
        build_spec(ROOT / "ensembles" / spec, out)
    assert _rule(validate_repository(out)) == []


def test_scheduling_batches_group_steps_that_start_together_when_wired_like_the_old_arr_coc() -> None:
    steps = [
        ({"RAW_IMAGE": "RAW_IMAGE"}, {"TEXTURE": "texture"}),  # 0 texture_array
        ({"TEXT_QUERY": "TEXT_QUERY"}, {"Q": "q"}),  # 1 query_encoder
        ({"TEXTURE": "texture"}, {"P": "p"}),  # 2 propositional
        ({"TEXTURE": "texture"}, {"S": "s"}),  # 3 perspectival
        ({"TEXTURE": "texture", "Q": "q"}, {"C": "c"}),  # 4 participatory
        ({"P": "p", "S": "s", "C": "c"}, {"R": "r"}),  # 5 opponent
        ({"TEXT_QUERY": "TEXT_QUERY", "R": "r", "TEXTURE": "texture"}, {"T": "t"}),  # 6 decoder
    ]
    batches = scheduling_batches({"RAW_IMAGE", "TEXT_QUERY"}, steps)
    # the decoder never starts beside anything: texture_array always finishes before the opponent
    assert batches == [[0, 1], [2, 3, 4]]


def test_scheduling_batches_are_empty_when_steps_wait_on_each_other_in_a_cycle() -> None:
    steps = [({"X": "b"}, {"Y": "a"}), ({"X": "a"}, {"Y": "b"}), ({"X": "IN"}, {"Y": "c"})]
    assert scheduling_batches({"IN"}, steps) == []
