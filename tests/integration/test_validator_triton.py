"""The static validator agrees with a real tritonserver, model by model.

One repository holds the valid base fixture, one broken copy per rule of ``BROKEN`` below, and
the legal and broken cases of the verdict corpus (tests/integration/_verdict_corpus.py); a
single real local tritonserver (``--exit-on-error=false``) loads it. The models Triton does not
list as READY in its startup model table (load failures, ensembles refused by the repository
manager, a model with no version) must be exactly the models the validator reports errors for,
when the validator is told the image: the `pip freeze` of the environment the local server's
Python stub runs. Told nothing, it must refuse all of them but the ones refused only for an
import that environment lacks, and warn about those.

Not in the corpus: the checksum repository agent (the nvidia-pytriton wheel ships no repo
agents, so this server refuses every model that names one; the hashes are unit-tested).
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.integration import _verdict_corpus as corpus
from tests.integration._verdict_corpus import ready_models
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


@pytest.mark.integration
def test_validator_errors_match_models_triton_refuses_when_repository_mixes_good_and_bad(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(BASE, repo)
    for make in BROKEN.values():
        make(repo)
    for write in [*corpus.LEGAL.values(), *corpus.BROKEN.values()]:
        write(repo)
    models = {p.name for p in repo.iterdir() if p.is_dir()}
    legal = {"ens", "onnx_m", "py_m", "solo", *corpus.LEGAL}
    broken = set(BROKEN) | set(corpus.BROKEN)
    assert models == legal | broken and not legal & broken

    missing = [m for m in corpus.ABSENT_MODULES if importlib.util.find_spec(m) is not None]
    assert not missing, f"the corpus needs {missing} absent from the local server's environment"
    # The local server's "image": the stub runs this interpreter's environment (PATH first).
    freeze = tmp_path / "local-image-freeze.txt"
    pip = [sys.executable, "-m", "pip", "freeze", "--disable-pip-version-check"]
    freeze.write_text(subprocess.run(pip, capture_output=True, text=True, check=True).stdout)
    report = validate_repository(repo, image_requirements=freeze)
    flagged = {p.model for p in report.errors}
    unknown = validate_repository(repo)  # no image declared

    server = LocalTritonServer(repo, model_config_name=None, startup_timeout=300)
    try:
        with pytest.raises(ModelLoadError) as refusal:
            server.start()
    finally:
        server.stop()
    log = server.logs()
    refused = models - ready_models(log)
    disagree = sorted(flagged ^ refused)
    agree = len(models) - len(disagree)
    unknown_agree = len(models) - len({p.model for p in unknown.errors} ^ refused)
    print(
        f"verdict corpus: {len(models)} models ({len(legal)} legal, {len(broken)} broken), {agree} agree "
        f"with the image declared; {unknown_agree} with none declared (the rest: import warnings)"
    )
    assert refused == broken, (sorted(refused ^ broken), log[-6000:])
    assert flagged == refused, (disagree, [str(p) for p in report.errors if p.model in disagree])
    # Told nothing about the image, the validator refuses what fails everywhere and only warns
    # about imports some image may provide (and never refuses an ensemble for a warning).
    assert corpus.IMPORT_ONLY <= refused
    assert {p.model for p in unknown.errors} == refused - corpus.IMPORT_ONLY
    warned = {p.model for p in unknown.warnings if p.code == "python-import-unavailable"}
    assert warned == {"py_imports_torch", "py_imports_cv2", "py_imports_pil", "py_imports_yaml"}
    # serve/start names every refused model with Triton's reason
    named = set(getattr(refusal.value, "failures", {}))
    assert named == refused, sorted(named ^ refused)
