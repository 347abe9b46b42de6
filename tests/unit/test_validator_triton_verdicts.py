"""Rules whose verdicts were corrected against the real tritonserver 2.51 (issue 10).

Each case breaks the base fixture one way (the validator must report the code, with its line)
and keeps a close variant Triton loads (the validator must stay silent). ``LEGAL`` holds
repositories Triton 2.51 loads that earlier rules flagged: python models without a config,
non-batching ensembles over batching members, batching ensembles over non-batching members.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.unit.test_validator_rules import (
    S0,
    S1,
    Case,
    Mutation,
    both,
    fp32,
    fresh,
    io,
    nothing,
    patch,
    remove,
    step,
    steps,
    write_text,
)
from tritonkit.repository import validate_repository

ENV = "$$TRITON_MODEL_DIRECTORY/env.tar.gz"


def env_path(value: str) -> Mutation:
    return patch("solo", {"parameters": {"EXECUTION_ENV_PATH": {"string_value": value}}})


def md5_hex(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def checksum(key: str, digest: str | None = None) -> Mutation:
    """A checksum agent on ``solo``; ``digest`` None: the real MD5 of ``solo/<path of key>``."""

    def apply(repo: Path) -> None:
        value = digest
        if value is None:
            value = md5_hex(repo / "solo" / key.partition(":")[2])
        agent = {"name": "checksum", "parameters": {key: value}}
        patch("solo", {"model_repository_agents": {"agents": [agent]}})(repo)

    return apply


CASES: dict[str, Case] = {
    "execution-env-missing": Case(
        "execution-env-missing",
        "solo",
        env_path(ENV),
        both(env_path(ENV), write_text("solo/env.tar.gz", "archive")),
        "parameters",
    ),
    "execution-env-missing-absolute": Case(
        "execution-env-missing",
        "solo",
        env_path("/nonexistent/tritonkit/env.tar.gz"),
        both(env_path(ENV), write_text("solo/env.tar.gz", "archive")),
    ),
    "execution-env-invalid": Case(
        "execution-env-invalid",
        "solo",
        env_path("$$TRITON_MODEL_DIRECTORY/1"),
        both(env_path("$$TRITON_MODEL_DIRECTORY/env"), write_text("solo/env/bin/activate", "")),
        "parameters",
    ),
    "execution-env-relative": Case(
        "execution-env-relative",
        "solo",
        both(env_path("env.tar.gz"), write_text("solo/env.tar.gz", "archive")),
        both(env_path(ENV), write_text("solo/env.tar.gz", "archive")),
        "parameters",
        severity="warning",
    ),
    "checksum-mismatch": Case(
        "checksum-mismatch",
        "solo",
        checksum("MD5:1/model.py", "0" * 32),
        checksum("MD5:1/model.py"),
        "parameters",
    ),
    "checksum-mismatch-uppercase-hex": Case(
        # the agent compares its lower-case hex digest with the text as written
        "checksum-mismatch",
        "solo",
        lambda r: checksum("MD5:1/model.py", md5_hex(r / "solo/1/model.py").upper())(r),
        checksum("md5:1/model.py"),
    ),
    "checksum-file-missing": Case(
        "checksum-file-missing", "solo", checksum("MD5:1/other.py", "0" * 32), checksum("MD5:1/model.py")
    ),
    "checksum-invalid-algorithm": Case(
        "checksum-invalid", "solo", checksum("SHA256:1/model.py", "0" * 64), checksum("MD5:1/model.py")
    ),
    "checksum-invalid-key": Case(
        "checksum-invalid", "solo", checksum("1/model.py", "0" * 32), checksum("MD5:1/model.py")
    ),
    "ensemble-member-invalid": Case(
        "ensemble-member-invalid",
        "ens",
        patch("py_m", {"dynamic_batching": {"preferred_batch_size": [16]}}),
        patch("py_m", {"dynamic_batching": {"preferred_batch_size": [8]}}),
        "model_name",
    ),
    "ensemble-member-invalid-nested": Case(
        "ensemble-member-invalid",
        "outer",
        both(
            patch("py_m", {"dynamic_batching": {"preferred_batch_size": [16]}}),
            write_text("outer/1/.keep", ""),
            write_text(
                "outer/config.pbtxt",
                'name: "outer"\nplatform: "ensemble"\nmax_batch_size: 8\n'
                'input { name: "IN" data_type: TYPE_FP32 dims: 4 }\n'
                'output { name: "OUT" data_type: TYPE_FP32 dims: 4 }\n'
                'ensemble_scheduling { step { model_name: "ens" model_version: -1 '
                'input_map { key: "IN" value: "IN" } output_map { key: "OUT" value: "OUT" } } }\n',
            ),
        ),
        nothing,
    ),
    "ensemble-shape-mismatch-ensemble-reshape": Case(
        # Triton compares an ensemble input by its reshape, not its dims
        "ensemble-shape-mismatch",
        "ens",
        io("ens", "input", [fp32("IN", [4], reshape={"shape": [2, 2]})]),
        io("ens", "input", [fp32("IN", [2, 2], reshape={"shape": [4]})]),
        "input_map",
    ),
}

NON_BATCHING_MEMBER = both(
    patch("py_m", {"max_batch_size": 0}),
    io("py_m", "input", [fp32("INPUT0", [-1, 4])]),
    io("py_m", "output", [fp32("OUTPUT0", [-1, 4])]),
)

LEGAL: dict[str, Mutation] = {
    "python-model-without-config": remove("solo/config.pbtxt"),
    "python-member-without-config": both(remove("solo/config.pbtxt"), remove("ens")),
    "non-batching-ensemble-full-shapes": both(
        patch("ens", {"max_batch_size": 0}),
        io("ens", "input", [fp32("IN", [-1, 4])]),
        io("ens", "output", [fp32("OUT", [-1, 4])]),
    ),
    "non-batching-ensemble-same-dims": patch("ens", {"max_batch_size": 0}),
    "non-batching-ensemble-fixed-batch": both(
        patch("ens", {"max_batch_size": 0}),
        io("ens", "input", [fp32("IN", [2, 4])]),
        io("ens", "output", [fp32("OUT", [2, 4])]),
    ),
    "batching-ensemble-non-batching-member": NON_BATCHING_MEMBER,
    "batching-ensemble-non-batching-member-same-dims": patch("py_m", {"max_batch_size": 0}),
    "ensemble-smaller-than-members": patch("ens", {"max_batch_size": 2}),
    "optional-member-input-unmapped": both(
        io("py_m", "input", [fp32("INPUT0", [4]), fp32("EXTRA", [4], optional=True)]), steps(S0, S1)
    ),
    "steps-out-of-order": steps(S1, S0),
    "wildcard-member-dims": io("py_m", "input", [fp32("INPUT0", [-1])]),
    "execution-env-unpacked": both(
        env_path("$$TRITON_MODEL_DIRECTORY/env"), write_text("solo/env/bin/activate", "")
    ),
    "unknown-agent-params-unchecked": patch(
        "solo", {"model_repository_agents": {"agents": [{"name": "custom", "parameters": {"x": "y"}}]}}
    ),
    "step-reads-ensemble-output-shape": steps(S0, step("py_m", {"INPUT0": "mid"}, {"OUTPUT0": "OUT"})),
    # No target known: an import the image may provide is a warning on the member, never a
    # refusal of it or of its ensemble (the local server's environment has PyYAML, so it loads).
    "ensemble-member-imports-unpacked-module": lambda r: prepend_import(r / "py_m/1/model.py", "yaml"),
}


def prepend_import(model_py: Path, module: str) -> None:
    model_py.write_text(f"import {module}\n" + model_py.read_text())


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_validate_repository_reports_rule_when_fixture_breaks_it(tmp_path: Path, case_id: str) -> None:
    case = CASES[case_id]
    repo = fresh(tmp_path, case.fail)
    report = validate_repository(repo)
    hits = [p for p in report.problems if p.code == case.code and p.model == case.model]
    assert hits, f"{case.code} not reported for {case.model}; got {[str(p) for p in report.problems]}"
    hit = hits[0]
    assert hit.severity == case.severity
    assert report.valid is (case.severity == "warning" and not report.errors)
    if case.line_has is not None:
        assert hit.line is not None, str(hit)
        line_text = Path(hit.file).read_text().splitlines()[hit.line - 1]
        assert case.line_has in line_text, (str(hit), line_text)


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_validate_repository_accepts_fixture_when_rule_is_respected(tmp_path: Path, case_id: str) -> None:
    report = validate_repository(fresh(tmp_path, CASES[case_id].ok))
    assert report.valid and not report.errors, [str(p) for p in report.problems]
    assert CASES[case_id].code not in {p.code for p in report.problems}


@pytest.mark.parametrize("case_id", sorted(LEGAL))
def test_validate_repository_accepts_repository_when_triton_loads_it(tmp_path: Path, case_id: str) -> None:
    report = validate_repository(fresh(tmp_path, LEGAL[case_id]))
    assert report.valid, [str(p) for p in report.problems]
