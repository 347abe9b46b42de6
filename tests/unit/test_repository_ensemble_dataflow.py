"""Ensemble data-flow analysis (tritonkit.repository.ensemble_dataflow) on hand-written wirings."""

from __future__ import annotations

from tritonkit.repository.ensemble_dataflow import StepWiring, analyze_dataflow, find_cycles


def kinds(inputs: list[str], outputs: list[str], steps: list[StepWiring]) -> list[str]:
    return sorted(i.kind for i in analyze_dataflow(inputs, outputs, steps))


def test_analyze_dataflow_reports_nothing_when_pipeline_is_a_chain() -> None:
    steps = [
        StepWiring(model="a", inputs={"x": "IN"}, outputs={"y": "t"}),
        StepWiring(model="b", inputs={"x": "t"}, outputs={"y": "OUT"}),
    ]
    assert kinds(["IN"], ["OUT"], steps) == []


def test_analyze_dataflow_reports_diamond_as_valid_when_two_branches_join() -> None:
    steps = [
        StepWiring(model="split", inputs={"x": "IN"}, outputs={"l": "L", "r": "R"}),
        StepWiring(model="left", inputs={"x": "L"}, outputs={"y": "L2"}),
        StepWiring(model="right", inputs={"x": "R"}, outputs={"y": "R2"}),
        StepWiring(model="join", inputs={"a": "L2", "b": "R2"}, outputs={"y": "OUT"}),
    ]
    assert kinds(["IN"], ["OUT"], steps) == []


def test_analyze_dataflow_reports_cycle_and_unwritten_output_when_steps_feed_each_other() -> None:
    steps = [
        StepWiring(model="a", inputs={"x": "IN", "fb": "back"}, outputs={"y": "t"}),
        StepWiring(model="b", inputs={"x": "t"}, outputs={"y": "back", "z": "OUT"}),
    ]
    assert kinds(["IN"], ["OUT"], steps) == ["cycle", "output-not-written"]


def test_analyze_dataflow_reports_each_wiring_fault_when_present() -> None:
    steps = [
        StepWiring(model="a", inputs={"x": "ghost"}, outputs={"y": "t", "z": "IN"}),
        StepWiring(model="b", inputs={"x": "IN"}, outputs={"y": "t", "w": "dangling"}),
    ]
    found = kinds(["IN", "SPARE"], ["OUT"], steps)
    assert found == sorted(
        [
            "input-unused",
            "output-not-written",
            "tensor-unreachable",
            "tensor-unused",
            "tensor-unused",
            "written-twice",
            "written-twice",
        ]
    )


def test_find_cycles_finds_self_loops_and_longer_cycles_when_present() -> None:
    cycles = find_cycles({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["d"], "e": ["a"]})
    assert sorted(sorted(c) for c in cycles) == [["a", "b", "c"], ["d"]]
    assert find_cycles({"a": ["b"], "b": []}) == []
