"""Decoupled rules (validator/decoupled_rules.py): Triton's stream-label walk, and what is said.

The verdicts themselves are checked against a real tritonserver in
tests/integration/test_decoupled_triton.py; these cases pin the walk's corners and the lines.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.integration import _decoupled_corpus as dc
from tritonkit.config import merge_json, parse_config, read_config, write_config
from tritonkit.repository import validate_repository
from tritonkit.repository.validator.decoupled_rules import ensemble_streams, served_decoupled

BASE = Path(__file__).resolve().parent.parent / "fixtures" / "validator" / "base"


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    shutil.copytree(BASE, repo)
    return repo


def _patch(repo: Path, model: str, data: dict[str, object]) -> None:
    cfg = read_config(repo / model / "config.pbtxt")
    merge_json(cfg, data, where="test")
    write_config(cfg, repo / model / "config.pbtxt")


def _line_of(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


def test_ensemble_streams_names_the_model_triton_names_when_qa_branching_cases_are_walked() -> None:
    repeat = parse_config(dc.REPEAT_CONFIG)
    nobatch = parse_config(dc.NOBATCH_OUTPUT2_CONFIG)
    members = {"repeat_int32": True, "int32_dim1_nobatch_output2": False}
    for name, text in (
        ("invalid_decoupled_branching", dc.QA_BRANCHING),
        ("invalid_decoupled_branching_2", dc.QA_BRANCHING_2),
    ):
        streams = ensemble_streams(name, parse_config(text), members.get)
        assert streams is not None and streams.branching is not None
        expected = dc.QA_EXPECTED[name]
        assert f"step of model '{streams.branching.model}'" in expected
    assert repeat.model_transaction_policy.decoupled and not nobatch.model_transaction_policy.decoupled


def test_ensemble_streams_returns_none_when_a_member_is_unknown() -> None:
    assert ensemble_streams("q", parse_config(dc.QA_BRANCHING), {"repeat_int32": True}.get) is None


def test_served_decoupled_follows_nested_ensembles_and_survives_cycles() -> None:
    dec = parse_config('name: "d" backend: "python" model_transaction_policy { decoupled: true }')
    inner = parse_config(
        'name: "inner" platform: "ensemble" input { name: "IN" } output { name: "OUT" }\n'
        'ensemble_scheduling { step { model_name: "d" input_map { key: "INPUT0" value: "IN" } '
        'output_map { key: "OUTPUT0" value: "OUT" } } }'
    )
    outer = parse_config(
        'name: "outer" platform: "ensemble" input { name: "IN" } output { name: "OUT" }\n'
        'ensemble_scheduling { step { model_name: "inner" input_map { key: "IN" value: "IN" } '
        'output_map { key: "OUT" value: "OUT" } } }'
    )
    loop = parse_config(
        'name: "loop" platform: "ensemble" input { name: "IN" } output { name: "OUT" }\n'
        'ensemble_scheduling { step { model_name: "loop" input_map { key: "IN" value: "IN" } '
        'output_map { key: "OUT" value: "OUT" } } }'
    )
    verdicts = served_decoupled({"d": dec, "inner": inner, "outer": outer, "loop": loop})
    assert verdicts["inner"] is not None and verdicts["inner"].decoupled
    assert verdicts["outer"] is not None and verdicts["outer"].decoupled
    assert verdicts["loop"] is None


def test_validate_says_ensemble_is_decoupled_at_its_decoupled_step_when_its_config_says_false(
    tmp_path: Path,
) -> None:
    repo = _repo(tmp_path)
    _patch(repo, "py_m", {"model_transaction_policy": {"decoupled": True}})
    _patch(repo, "ens", {"model_transaction_policy": {"decoupled": False}})
    report = validate_repository(repo)
    assert report.valid
    [said] = [p for p in report.problems if p.code == "ensemble-decoupled"]
    assert said.severity == "info" and said.model == "ens"
    assert "whatever its own config says (its own config says decoupled: false)" in said.message
    assert "step 1 ('py_m')" in said.message and "generate_stream" in said.message
    assert said.line == _line_of(repo / "ens" / "config.pbtxt", 'model_name: "py_m"')
    [model] = [p for p in report.problems if p.code == "decoupled-model"]
    assert model.model == "py_m" and "501" in model.message and "UNIMPLEMENTED" in model.message


def test_validate_warns_when_ensemble_says_decoupled_without_a_decoupled_step(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    _patch(repo, "ens", {"model_transaction_policy": {"decoupled": True}})
    report = validate_repository(repo)
    assert report.valid
    [warning] = [p for p in report.warnings if p.code == "ensemble-decoupled-ignored"]
    assert warning.line == _line_of(repo / "ens" / "config.pbtxt", "model_transaction_policy")
    assert not [p for p in report.problems if p.code == "ensemble-decoupled"]


def test_validate_reports_branching_at_the_step_that_joins_two_streams(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    for write in (dc.LEGAL["dec_stream"], dc.LEGAL["dec_join"], dc.BROKEN["dens_stream_and_request"]):
        write(repo)
    report = validate_repository(repo)
    [error] = report.errors
    assert error.code == "ensemble-decoupled-branching" and error.model == "dens_stream_and_request"
    assert "step of model 'dec_join' receives inputs originated from different decoupled" in error.message
    assert "'d' comes from the stream of decoupled step 0 ('dec_stream')" in error.message
    assert "'IN' comes from the request itself" in error.message
    assert error.line == _line_of(repo / "dens_stream_and_request" / "config.pbtxt", 'value: "j"')


def test_validate_refuses_response_cache_when_a_decoupled_step_makes_the_ensemble_decoupled(
    tmp_path: Path,
) -> None:
    repo = _repo(tmp_path)
    _patch(repo, "py_m", {"model_transaction_policy": {"decoupled": True}})
    _patch(repo, "ens", {"response_cache": {"enable": True}})
    report = validate_repository(repo)
    [error] = report.errors
    assert (error.model, error.code) == ("ens", "response-cache-unsupported")
    assert error.line == _line_of(repo / "ens" / "config.pbtxt", "response_cache")


def test_validate_skips_decoupled_walk_when_ensemble_has_wiring_errors(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    _patch(repo, "py_m", {"model_transaction_policy": {"decoupled": True}})
    cfg = read_config(repo / "ens" / "config.pbtxt")
    cfg.ensemble_scheduling.step[1].input_map["NOPE"] = "mid"
    write_config(cfg, repo / "ens" / "config.pbtxt")
    report = validate_repository(repo)
    assert {p.code for p in report.errors} == {"ensemble-unknown-tensor"}
    assert not [p for p in report.problems if p.code.startswith("ensemble-decoupled")]


@pytest.mark.parametrize("name", sorted(dc.BROKEN))
def test_validate_flags_each_refused_decoupled_corpus_case(tmp_path: Path, name: str) -> None:
    repo = _repo(tmp_path)
    for write in dc.LEGAL.values():
        write(repo)
    dc.BROKEN[name](repo)
    assert {p.model for p in validate_repository(repo).errors} == {name}


@pytest.mark.parametrize(
    ("body", "line"),
    [
        ("    def execute(self, requests):\n        return [1]\n", 5),
        ("    async def execute(self, requests):\n        if requests:\n            return None\n"
         "        return requests\n", 7),
        ("    def execute(self, requests):\n        def helper():\n            return 1\n"
         "        for r in requests:\n            r.get_response_sender().send(flags=1)\n"
         "        return None\n", None),
        ("    def execute(self, requests):\n        return\n", None),
        ("    def initialize(self, args):\n        return 5\n", None),
    ],
    ids=["returns-list", "async-returns-late", "nested-function-only", "bare-return", "not-execute"],
)  # fmt: skip
def test_decoupled_execute_return_finds_execute_returning_responses(body: str, line: int | None) -> None:
    import ast

    from tritonkit.repository.validator.model_files import decoupled_execute_return

    source = "import x\n\nclass TritonPythonModel:\n" + body
    assert decoupled_execute_return(ast.parse(source)) == line


def test_validate_warns_when_decoupled_python_model_returns_from_execute(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    _patch(repo, "py_m", {"model_transaction_policy": {"decoupled": True}})
    report = validate_repository(repo)
    [warning] = [p for p in report.warnings if p.code == "python-decoupled-returns"]
    assert warning.model == "py_m" and warning.file.endswith("py_m/1/model.py")
    assert warning.line == _line_of(repo / "py_m" / "1" / "model.py", "return")


_TENSORS = st.sampled_from(["IN", "OUT", "a", "b", "c"])
_STEPS = st.lists(
    st.tuples(
        st.sampled_from(["d", "u", "missing"]),
        st.dictionaries(st.sampled_from(["I0", "I1"]), _TENSORS, max_size=2),
        st.dictionaries(st.sampled_from(["O0", "O1"]), _TENSORS, max_size=2),
    ),
    max_size=4,
)


@settings(max_examples=200, deadline=None)
@given(steps=_STEPS, outputs=st.lists(_TENSORS, max_size=2))
def test_ensemble_streams_never_raises_when_wiring_is_arbitrary(
    steps: list[tuple[str, dict[str, str], dict[str, str]]], outputs: list[str]
) -> None:
    """build calls the walk on ensembles nobody validated yet: any wiring gives an answer."""
    cfg = parse_config('name: "e" platform: "ensemble" input { name: "IN" }')
    for name in outputs:
        cfg.output.add(name=name)
    for model, ins, outs in steps:
        step = cfg.ensemble_scheduling.step.add(model_name=model)
        step.input_map.update(ins)
        step.output_map.update(outs)
    flags = {"d": True, "u": False}
    streams = ensemble_streams("e", cfg, flags.get)
    if any(model == "missing" for model, _, _ in steps):
        assert streams is None
    else:
        assert streams is not None and streams.decoupled == bool(streams.decoupled_steps)
