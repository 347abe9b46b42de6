"""The static validator agrees with a real tritonserver: what it calls an error, Triton refuses.

One repository holds the valid base fixture plus one broken copy per rule below; a real local
tritonserver (``--exit-on-error=false``) loads it. The models Triton does not list as READY in
its startup model table (load failures, ensembles refused by the repository manager, a model
with no version) must be exactly the models the validator reports errors for.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tritonkit.config import merge_json, read_config, write_config
from tritonkit.errors import ModelLoadError
from tritonkit.repository import validate_repository
from tritonkit.server import LocalTritonServer

BASE = Path(__file__).resolve().parent.parent / "fixtures" / "validator" / "base"


def broken_copy(
    repo: Path, name: str, data: dict[str, Any], *, clear: tuple[str, ...] = (), base: str = "solo"
) -> None:
    shutil.copytree(repo / base, repo / name)
    cfg = read_config(repo / name / "config.pbtxt")
    cfg.name = name
    for field in clear:
        cfg.ClearField(field)
    merge_json(cfg, data, where="test")
    write_config(cfg, repo / name / "config.pbtxt")


def step(
    model: str, inputs: dict[str, str], outputs: dict[str, str], version: int | None = -1
) -> dict[str, Any]:
    data: dict[str, Any] = {"model_name": model, "input_map": inputs, "output_map": outputs}
    if version is not None:  # None leaves model_version unset (0), which Triton reads as "version 0"
        data["model_version"] = version
    return data


def steps(*items: dict[str, Any]) -> dict[str, Any]:
    return {"ensemble_scheduling": {"step": list(items)}}


BROKEN: dict[str, Callable[[Path], None]] = {
    "bad_preferred": lambda r: broken_copy(
        r, "bad_preferred", {"dynamic_batching": {"preferred_batch_size": [16]}}
    ),
    "bad_priority": lambda r: broken_copy(
        r, "bad_priority", {"dynamic_batching": {"priority_levels": "2", "default_priority_level": "3"}}
    ),
    "bad_reshape": lambda r: broken_copy(
        r,
        "bad_reshape",
        {"input": [{"name": "A", "data_type": "TYPE_FP32", "dims": [2, 3], "reshape": {"shape": [5]}}]},
        clear=("input",),
    ),
    "bad_dims": lambda r: broken_copy(
        r, "bad_dims", {"input": [{"name": "A", "data_type": "TYPE_FP32", "dims": [0]}]}, clear=("input",)
    ),
    "bad_negative_mbs": lambda r: broken_copy(r, "bad_negative_mbs", {"max_batch_size": -2}),
    "bad_name": lambda r: (broken_copy(r, "bad_name", {}), _rename_config(r / "bad_name", "someone_else")),
    "bad_no_version": lambda r: (
        broken_copy(r, "bad_no_version", {}),
        shutil.rmtree(r / "bad_no_version" / "1"),
    ),
    "bad_sched": lambda r: broken_copy(
        r,
        "bad_sched",
        {
            "ensemble_scheduling": {
                "step": [{"model_name": "solo", "input_map": {"A": "A"}, "output_map": {"B": "B"}}]
            }
        },
    ),
    "bad_sequence_control": lambda r: broken_copy(
        r,
        "bad_sequence_control",
        {"sequence_batching": {"control_input": [{"name": "START", "control": [{"int32_false_true": [1]}]}]}},
    ),
    "bad_batch_input": lambda r: broken_copy(
        r,
        "bad_batch_input",
        {"batch_input": [{"kind": "BATCH_ELEMENT_COUNT", "target_name": ["N"], "data_type": "TYPE_FP32",
                          "source_input": ["nope"]}]},
    ),
    "bad_ens_model": lambda r: broken_copy(
        r, "bad_ens_model", steps(step("nope", {"x": "IN"}, {"y": "OUT"})),
        clear=("ensemble_scheduling",), base="ens",
    ),
    "bad_ens_dtype": lambda r: broken_copy(
        r, "bad_ens_dtype", {"input": [{"name": "IN", "data_type": "TYPE_INT32", "dims": [4]}]},
        clear=("input",), base="ens",
    ),
    "bad_ens_version_unset": lambda r: broken_copy(
        r, "bad_ens_version_unset", steps(step("onnx_m", {"x": "IN"}, {"y": "mid"}, version=None),
              step("py_m", {"INPUT0": "mid"}, {"OUTPUT0": "OUT"})),
        clear=("ensemble_scheduling",), base="ens",
    ),
    "bad_ens_batch": lambda r: broken_copy(r, "bad_ens_batch", {"max_batch_size": 16}, base="ens"),
    "bad_ens_tensor": lambda r: broken_copy(
        r, "bad_ens_tensor",
        steps(step("onnx_m", {"x": "IN"}, {"y": "mid"}), step("py_m", {"NOPE": "mid"}, {"OUTPUT0": "OUT"})),
        clear=("ensemble_scheduling",), base="ens",
    ),
    "bad_ens_unused": lambda r: broken_copy(
        r, "bad_ens_unused", {"input": [{"name": "IN", "data_type": "TYPE_FP32", "dims": [4]},
                                        {"name": "SPARE", "data_type": "TYPE_FP32", "dims": [4]}]},
        clear=("input",), base="ens",
    ),
}  # fmt: skip


def _rename_config(model_dir: Path, name: str) -> None:
    cfg = read_config(model_dir / "config.pbtxt")
    cfg.name = name
    write_config(cfg, model_dir / "config.pbtxt")


def ready_models(log: str) -> set[str]:
    """Models whose row in Triton's startup model table says READY."""
    ready = set()
    for line in log.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) == 5 and cells[3] == "READY":
            ready.add(cells[1])
    return ready


@pytest.mark.integration
def test_validator_errors_match_models_triton_refuses_when_repository_mixes_good_and_bad(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(BASE, repo)
    for make in BROKEN.values():
        make(repo)

    report = validate_repository(repo)
    flagged = {p.model for p in report.errors}
    assert flagged == set(BROKEN), [str(p) for p in report.problems]

    server = LocalTritonServer(repo, model_config_name=None, startup_timeout=240)
    try:
        with pytest.raises(ModelLoadError):
            server.start()
    finally:
        server.stop()
    ready = ready_models(server.logs())
    assert ready == {"ens", "onnx_m", "py_m", "solo"}, server.logs()[-4000:]
    refused = {p.name for p in repo.iterdir()} - ready
    assert refused == set(BROKEN)
