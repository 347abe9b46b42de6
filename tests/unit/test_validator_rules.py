"""Every validator rule: a fixture that fails it and a close one that passes.

The base repository (tests/fixtures/validator/base: an ONNX model, a Python model, an ensemble
wiring them, and a stand-alone Python model) is valid; each case copies it and changes one
thing through the config layer, so the failing and the passing fixture differ only in the rule.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tritonkit.config import merge_json, read_config, write_config
from tritonkit.repository import validate_repository

BASE = Path(__file__).resolve().parent.parent / "fixtures" / "validator" / "base"

Mutation = Callable[[Path], None]


def patch(
    model: str, data: dict[str, Any], *, clear: tuple[str, ...] = (), variant: str | None = None
) -> Mutation:
    """Clear ``clear`` fields, then merge ``data`` (protobuf JSON) into the model's config."""

    def apply(repo: Path) -> None:
        path = repo / model / ("config.pbtxt" if variant is None else f"configs/{variant}.pbtxt")
        cfg = read_config(repo / model / "config.pbtxt")
        for name in clear:
            cfg.ClearField(name)
        merge_json(cfg, data, where="test")
        write_config(cfg, path)

    return apply


def io(model: str, kind: str, tensors: list[dict[str, Any]], **extra: Any) -> Mutation:
    return patch(model, {kind: tensors, **extra}, clear=(kind,))


def both(*mutations: Mutation) -> Mutation:
    def apply(repo: Path) -> None:
        for m in mutations:
            m(repo)

    return apply


def nothing(repo: Path) -> None:
    """The unchanged base repository."""


def fp32(name: str, dims: list[int], **kw: Any) -> dict[str, Any]:
    return {"name": name, "data_type": "TYPE_FP32", "dims": dims, **kw}


def step(model: str, inputs: dict[str, str], outputs: dict[str, str], version: int = -1) -> dict[str, Any]:
    return {"model_name": model, "model_version": version, "input_map": inputs, "output_map": outputs}


def steps(*s: dict[str, Any]) -> Mutation:
    return patch("ens", {"ensemble_scheduling": {"step": list(s)}}, clear=("ensemble_scheduling",))


S0 = step("onnx_m", {"x": "IN"}, {"y": "mid"})
S1 = step("py_m", {"INPUT0": "mid"}, {"OUTPUT0": "OUT"})


def write_text(rel: str, text: str) -> Mutation:
    def apply(repo: Path) -> None:
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)

    return apply


def remove(rel: str) -> Mutation:
    def apply(repo: Path) -> None:
        target = repo / rel
        shutil.rmtree(target) if target.is_dir() else target.unlink()

    return apply


def rename(src: str, dst: str) -> Mutation:
    def apply(repo: Path) -> None:
        (repo / src).rename(repo / dst)

    return apply


def symlink(rel: str, target: Callable[[Path], Path]) -> Mutation:
    def apply(repo: Path) -> None:
        (repo / rel).symlink_to(target(repo))

    return apply


@dataclass(frozen=True)
class Case:
    code: str
    model: str
    fail: Mutation
    ok: Mutation
    line_has: str | None = None  # text expected on the reported line
    severity: str = "error"


PY_SOLO_SEQ = {
    "sequence_batching": {"control_input": [{"name": "START", "control": [{"int32_false_true": [0, 1]}]}]}
}

CASES: dict[str, Case] = {
    # ---- layout -----------------------------------------------------------------------------
    "config-parse": Case(
        "config-parse",
        "solo",
        write_text("solo/config.pbtxt", 'name: "solo"\nbackend: "python"\ninput {\n  name: "A"\n  dims: [2,'),
        nothing,
    ),
    "config-parse-binary": Case(
        "config-parse", "solo", write_text("solo/config.pbtxt", "\x00\x7f}}}{{garbage"), nothing
    ),
    "config-missing": Case(
        "config-missing",
        "solo",
        both(remove("solo/config.pbtxt"), rename("solo/1/model.py", "solo/1/weights.bin")),
        nothing,
    ),
    "config-missing-python": Case(
        "config-missing", "solo", remove("solo/config.pbtxt"), nothing, severity="warning"
    ),
    "config-missing-autocomplete": Case(
        "config-missing",
        "onnx_m",
        both(remove("onnx_m/config.pbtxt"), remove("ens")),
        remove("ens"),
        severity="warning",
    ),
    "name-mismatch": Case(
        "name-mismatch", "solo", patch("solo", {"name": "other"}), patch("solo", {}, clear=("name",)), "name:"
    ),
    "no-version": Case("no-version", "solo", remove("solo/1"), rename("solo/1", "solo/7")),
    "no-version-specific": Case(
        "no-version",
        "solo",
        patch("solo", {"version_policy": {"specific": {"versions": ["5"]}}}),
        patch("solo", {"version_policy": {"specific": {"versions": ["1"]}}}),
        "version_policy",
    ),
    "version-missing": Case(
        "version-missing",
        "solo",
        patch("solo", {"version_policy": {"specific": {"versions": ["1", "2"]}}}),
        patch("solo", {"version_policy": {"all": {}}}),
        severity="warning",
    ),
    "model-file-missing": Case("model-file-missing", "onnx_m", remove("onnx_m/1/model.onnx"), nothing),
    "model-file-missing-default-name": Case(
        "model-file-missing",
        "onnx_m",
        patch("onnx_m", {"default_model_filename": "net.onnx"}),
        both(
            patch("onnx_m", {"default_model_filename": "net.onnx"}),
            rename("onnx_m/1/model.onnx", "onnx_m/1/net.onnx"),
        ),
        "default_model_filename",
    ),
    "label-file-missing": Case(
        "label-file-missing",
        "solo",
        io("solo", "output", [fp32("B", [6], label_filename="labels.txt")]),
        both(
            io("solo", "output", [fp32("B", [6], label_filename="labels.txt")]),
            write_text("solo/labels.txt", "a\n"),
        ),
        "label_filename",
    ),
    "symlink-escape": Case(
        "symlink-escape",
        "solo",
        symlink("solo/1/data.bin", lambda repo: repo.parent / "outside.bin"),
        symlink("solo/1/data.bin", lambda repo: repo / "solo" / "config.pbtxt"),
    ),
    "symlink-escape-model-dir": Case(
        "symlink-escape",
        "linked",
        symlink("linked", lambda repo: repo.parent),
        both(patch("solo", {}, clear=("name",)), symlink("linked", lambda repo: repo / "solo")),
    ),
    "no-backend": Case(
        "no-backend",
        "solo",
        both(patch("solo", {}, clear=("backend",)), rename("solo/1/model.py", "solo/1/other.py")),
        patch("solo", {}, clear=("backend",)),
    ),
    "unknown-backend": Case(
        "unknown-backend",
        "solo",
        patch("solo", {"backend": "my_custom"}),
        nothing,
        "backend",
        severity="warning",
    ),
    "unknown-platform": Case(
        "unknown-platform",
        "onnx_m",
        patch("onnx_m", {"platform": "onnx_something"}, clear=("backend",)),
        patch("onnx_m", {"platform": "onnxruntime_onnx"}, clear=("backend",)),
        "platform",
    ),
    "platform-backend-mismatch": Case(
        "platform-backend-mismatch",
        "onnx_m",
        patch("onnx_m", {"platform": "tensorrt_plan"}),
        patch("onnx_m", {"platform": "onnxruntime_onnx"}),
        "backend",
    ),
    # ---- one config ----------------------------------------------------------------------------
    "max-batch-size-negative": Case(
        "max-batch-size-negative",
        "solo",
        patch("solo", {"max_batch_size": -1}),
        patch("solo", {"max_batch_size": 0}),
        "max_batch_size",
    ),
    "dims-invalid": Case(
        "dims-invalid",
        "solo",
        io("solo", "input", [fp32("A", [2, 0])]),
        io("solo", "input", [fp32("A", [2, -1])]),
        "dims",
    ),
    "dims-invalid-below-minus-one": Case(
        "dims-invalid", "solo", io("solo", "input", [fp32("A", [-2])]), io("solo", "input", [fp32("A", [-1])])
    ),
    "dims-missing": Case(
        "dims-missing",
        "solo",
        io("solo", "input", [fp32("A", [])]),
        io("solo", "input", [fp32("A", [1], reshape={"shape": []})]),
    ),
    "reshape-mismatch-count": Case(
        "reshape-mismatch",
        "solo",
        io("solo", "input", [fp32("A", [2, 3], reshape={"shape": [5]})]),
        io("solo", "input", [fp32("A", [2, 3], reshape={"shape": [6]})]),
        "reshape",
    ),
    "reshape-mismatch-variable": Case(
        "reshape-mismatch",
        "solo",
        io("solo", "input", [fp32("A", [-1, 3], reshape={"shape": [3, -1]})]),
        io("solo", "input", [fp32("A", [2, 4, -1, 6], reshape={"shape": [8, -1, 1, 6]})]),
    ),
    "reshape-mismatch-variable-count": Case(
        "reshape-mismatch",
        "solo",
        io("solo", "input", [fp32("A", [-1, 3], reshape={"shape": [-1, -1, 3]})]),
        io("solo", "input", [fp32("A", [-1, 3], reshape={"shape": [-1, 3, 1]})]),
    ),
    "reshape-invalid-empty-non-batching": Case(
        "reshape-invalid",
        "solo",
        both(
            patch("solo", {"max_batch_size": 0}), io("solo", "input", [fp32("A", [1], reshape={"shape": []})])
        ),
        io("solo", "input", [fp32("A", [1], reshape={"shape": []})]),
    ),
    "reshape-invalid-zero": Case(
        "reshape-invalid",
        "solo",
        io("solo", "input", [fp32("A", [2, 3], reshape={"shape": [6, 0]})]),
        io("solo", "input", [fp32("A", [2, 3], reshape={"shape": [6, 1]})]),
    ),
    "duplicate-tensor": Case(
        "duplicate-tensor",
        "solo",
        io("solo", "input", [fp32("A", [1]), fp32("A", [2])]),
        io("solo", "input", [fp32("A", [1]), fp32("C", [2])]),
    ),
    "tensor-name-missing": Case(
        "tensor-name-missing",
        "solo",
        io("solo", "input", [fp32("", [1])]),
        io("solo", "input", [fp32("A", [1])]),
    ),
    "data-type-missing": Case(
        "data-type-missing",
        "solo",
        io("solo", "input", [{"name": "A", "dims": [1]}]),
        io("solo", "input", [fp32("A", [1])]),
    ),
    "format-dims": Case(
        "format-dims",
        "solo",
        io("solo", "input", [fp32("A", [3, 224], format="FORMAT_NCHW")]),
        io("solo", "input", [fp32("A", [3, 224, 224], format="FORMAT_NCHW")]),
    ),
    "shape-tensor-not-tensorrt": Case(
        "shape-tensor-not-tensorrt",
        "solo",
        io("solo", "input", [fp32("A", [2], is_shape_tensor=True)]),
        io("solo", "input", [fp32("A", [2])]),
    ),
    "preferred-batch-size-too-large": Case(
        "preferred-batch-size-too-large",
        "solo",
        patch("solo", {"dynamic_batching": {"preferred_batch_size": [16]}}),
        patch("solo", {"dynamic_batching": {"preferred_batch_size": [8]}}),
        "preferred_batch_size",
    ),
    "preferred-batch-size-invalid": Case(
        "preferred-batch-size-invalid",
        "solo",
        patch("solo", {"dynamic_batching": {"preferred_batch_size": [0]}}),
        patch("solo", {"dynamic_batching": {"preferred_batch_size": [1]}}),
    ),
    "batching-not-supported": Case(
        "batching-not-supported",
        "solo",
        patch("solo", {"max_batch_size": 0, "dynamic_batching": {"preferred_batch_size": [4]}}),
        patch("solo", {"max_batch_size": 4, "dynamic_batching": {"preferred_batch_size": [4]}}),
    ),
    "batching-ignored": Case(
        "batching-ignored",
        "solo",
        patch("solo", {"max_batch_size": 0, "dynamic_batching": {}}),
        patch("solo", {"max_batch_size": 2, "dynamic_batching": {}}),
        severity="warning",
    ),
    "priority-level-default-out-of-range": Case(
        "priority-level-invalid",
        "solo",
        patch("solo", {"dynamic_batching": {"priority_levels": "2", "default_priority_level": "3"}}),
        patch("solo", {"dynamic_batching": {"priority_levels": "2", "default_priority_level": "2"}}),
        "default_priority_level",
    ),
    "priority-level-default-unset": Case(
        "priority-level-invalid",
        "solo",
        patch("solo", {"dynamic_batching": {"priority_levels": "2"}}),
        patch("solo", {"dynamic_batching": {"priority_levels": "2", "default_priority_level": "1"}}),
    ),
    "priority-level-queue-policy": Case(
        "priority-level-invalid",
        "solo",
        patch(
            "solo",
            {
                "dynamic_batching": {
                    "priority_levels": "2",
                    "default_priority_level": "1",
                    "priority_queue_policy": {"3": {"max_queue_size": 4}},
                }
            },
        ),
        patch(
            "solo",
            {
                "dynamic_batching": {
                    "priority_levels": "2",
                    "default_priority_level": "1",
                    "priority_queue_policy": {"2": {"max_queue_size": 4}},
                }
            },
        ),
    ),
    "preserve-ordering-priority": Case(
        "preserve-ordering-conflict",
        "solo",
        patch(
            "solo",
            {
                "dynamic_batching": {
                    "preserve_ordering": True,
                    "priority_levels": "2",
                    "default_priority_level": "1",
                }
            },
        ),
        patch(
            "solo",
            {
                "dynamic_batching": {
                    "preserve_ordering": True,
                    "priority_levels": "1",
                    "default_priority_level": "1",
                }
            },
        ),
        "preserve_ordering",
    ),
    "preserve-ordering-delay": Case(
        "preserve-ordering-conflict",
        "solo",
        patch(
            "solo",
            {
                "dynamic_batching": {
                    "preserve_ordering": True,
                    "default_queue_policy": {
                        "timeout_action": "DELAY",
                        "default_timeout_microseconds": "100",
                    },
                }
            },
        ),
        patch(
            "solo",
            {
                "dynamic_batching": {
                    "preserve_ordering": True,
                    "default_queue_policy": {
                        "timeout_action": "REJECT",
                        "default_timeout_microseconds": "100",
                    },
                }
            },
        ),
    ),
    "batch-input-source": Case(
        "batch-input-invalid",
        "solo",
        patch(
            "solo",
            {
                "batch_input": [
                    {
                        "kind": "BATCH_ELEMENT_COUNT",
                        "target_name": ["N"],
                        "data_type": "TYPE_FP32",
                        "source_input": ["nope"],
                    }
                ]
            },
        ),
        patch(
            "solo",
            {
                "batch_input": [
                    {
                        "kind": "BATCH_ELEMENT_COUNT",
                        "target_name": ["N"],
                        "data_type": "TYPE_FP32",
                        "source_input": ["A"],
                    }
                ]
            },
        ),
        "source_input",
    ),
    "batch-input-dtype": Case(
        "batch-input-invalid",
        "solo",
        patch(
            "solo",
            {
                "batch_input": [
                    {
                        "kind": "BATCH_ITEM_SHAPE",
                        "target_name": ["N"],
                        "data_type": "TYPE_FP16",
                        "source_input": ["A"],
                    }
                ]
            },
        ),
        patch(
            "solo",
            {
                "batch_input": [
                    {
                        "kind": "BATCH_ITEM_SHAPE",
                        "target_name": ["N"],
                        "data_type": "TYPE_INT32",
                        "source_input": ["A"],
                    }
                ]
            },
        ),
    ),
    "batch-input-source-count": Case(
        "batch-input-invalid",
        "solo",
        patch(
            "solo",
            {
                "batch_input": [
                    {
                        "kind": "BATCH_ELEMENT_COUNT",
                        "target_name": ["N"],
                        "data_type": "TYPE_FP32",
                        "source_input": ["A", "A"],
                    }
                ]
            },
        ),
        patch(
            "solo",
            {
                "batch_input": [
                    {
                        "kind": "BATCH_ELEMENT_COUNT",
                        "target_name": ["N"],
                        "data_type": "TYPE_FP32",
                        "source_input": ["A"],
                    }
                ]
            },
        ),
    ),
    "batch-output-target": Case(
        "batch-output-invalid",
        "solo",
        patch(
            "solo",
            {
                "batch_output": [
                    {"kind": "BATCH_SCATTER_WITH_INPUT_SHAPE", "target_name": ["nope"], "source_input": ["A"]}
                ]
            },
        ),
        patch(
            "solo",
            {
                "batch_output": [
                    {"kind": "BATCH_SCATTER_WITH_INPUT_SHAPE", "target_name": ["B"], "source_input": ["A"]}
                ]
            },
        ),
        "target_name",
    ),
    "batch-output-source": Case(
        "batch-output-invalid",
        "solo",
        patch("solo", {"batch_output": [{"target_name": ["B"], "source_input": ["zz"]}]}),
        patch("solo", {"batch_output": [{"target_name": ["B"], "source_input": ["A"]}]}),
    ),
    "sequence-control-entries": Case(
        "sequence-control-invalid",
        "solo",
        patch(
            "solo",
            {
                "sequence_batching": {
                    "control_input": [{"name": "START", "control": [{"int32_false_true": [1]}]}]
                }
            },
        ),
        patch("solo", PY_SOLO_SEQ),
        "control",
    ),
    "sequence-control-both-kinds-of-values": Case(
        "sequence-control-invalid",
        "solo",
        patch(
            "solo",
            {
                "sequence_batching": {
                    "control_input": [
                        {
                            "name": "START",
                            "control": [{"int32_false_true": [0, 1], "fp32_false_true": [0, 1]}],
                        }
                    ]
                }
            },
        ),
        patch(
            "solo",
            {
                "sequence_batching": {
                    "control_input": [{"name": "START", "control": [{"fp32_false_true": [0, 1]}]}]
                }
            },
        ),
    ),
    "sequence-control-corrid-type": Case(
        "sequence-control-invalid",
        "solo",
        patch(
            "solo",
            {
                "sequence_batching": {
                    "control_input": [
                        {
                            "name": "CORRID",
                            "control": [{"kind": "CONTROL_SEQUENCE_CORRID", "data_type": "TYPE_FP32"}],
                        }
                    ]
                }
            },
        ),
        patch(
            "solo",
            {
                "sequence_batching": {
                    "control_input": [
                        {
                            "name": "CORRID",
                            "control": [{"kind": "CONTROL_SEQUENCE_CORRID", "data_type": "TYPE_UINT64"}],
                        }
                    ]
                }
            },
        ),
    ),
    "sequence-control-tensor-twice": Case(
        "sequence-control-invalid",
        "solo",
        patch(
            "solo",
            {
                "sequence_batching": {
                    "control_input": [
                        {"name": "S", "control": [{"int32_false_true": [0, 1]}]},
                        {
                            "name": "S",
                            "control": [{"kind": "CONTROL_SEQUENCE_END", "int32_false_true": [0, 1]}],
                        },
                    ]
                }
            },
        ),
        patch(
            "solo",
            {
                "sequence_batching": {
                    "control_input": [
                        {"name": "S", "control": [{"int32_false_true": [0, 1]}]},
                        {
                            "name": "E",
                            "control": [{"kind": "CONTROL_SEQUENCE_END", "int32_false_true": [0, 1]}],
                        },
                    ]
                }
            },
        ),
    ),
    "sequence-control-kind-twice": Case(
        "sequence-control-invalid",
        "solo",
        patch(
            "solo",
            {
                "sequence_batching": {
                    "control_input": [
                        {"name": "S", "control": [{"int32_false_true": [0, 1]}]},
                        {"name": "T", "control": [{"bool_false_true": [False, True]}]},
                    ]
                }
            },
        ),
        patch(
            "solo",
            {
                "sequence_batching": {
                    "control_input": [
                        {"name": "S", "control": [{"int32_false_true": [0, 1]}]},
                        {
                            "name": "T",
                            "control": [{"kind": "CONTROL_SEQUENCE_READY", "bool_false_true": [False, True]}],
                        },
                    ]
                }
            },
        ),
    ),
    "sequence-batching-invalid": Case(
        "sequence-batching-invalid",
        "solo",
        patch("solo", {"sequence_batching": {"direct": {"minimum_slot_utilization": 1.5}}}),
        patch("solo", {"sequence_batching": {"direct": {"minimum_slot_utilization": 0.5}}}),
    ),
    "sequence-oldest-preferred": Case(
        "preferred-batch-size-too-large",
        "solo",
        patch("solo", {"sequence_batching": {"oldest": {"preferred_batch_size": [9]}}}),
        patch("solo", {"sequence_batching": {"oldest": {"preferred_batch_size": [8]}}}),
    ),
    "response-cache-unsupported": Case(
        "response-cache-unsupported",
        "solo",
        patch("solo", {**PY_SOLO_SEQ, "response_cache": {"enable": True}}),
        patch("solo", {"response_cache": {"enable": True}}),
    ),
    "response-cache-decoupled": Case(
        "response-cache-unsupported",
        "solo",
        patch("solo", {"model_transaction_policy": {"decoupled": True}, "response_cache": {"enable": True}}),
        patch("solo", {"model_transaction_policy": {"decoupled": True}}),
    ),
    "instance-group-invalid": Case(
        "instance-group-invalid",
        "py_m",
        patch("py_m", {"instance_group": [{"kind": "KIND_CPU", "gpus": [0]}]}, clear=("instance_group",)),
        patch("py_m", {"instance_group": [{"kind": "KIND_CPU", "count": 2}]}, clear=("instance_group",)),
        "gpus",
    ),
    "ensemble-scheduling-not-ensemble": Case(
        "ensemble-scheduling-not-ensemble",
        "solo",
        patch("solo", {"ensemble_scheduling": {"step": [step("py_m", {"INPUT0": "A"}, {"OUTPUT0": "B"})]}}),
        nothing,
        "ensemble_scheduling",
    ),
    "ensemble-scheduling-missing": Case(
        "ensemble-scheduling-missing",
        "ens",
        patch("ens", {}, clear=("ensemble_scheduling",)),
        nothing,
        "platform",
    ),
    "ensemble-backend": Case(
        "ensemble-backend", "ens", patch("ens", {"backend": "python"}), nothing, "backend"
    ),
    "ensemble-invalid-field": Case(
        "ensemble-invalid-field",
        "ens",
        patch("ens", {"instance_group": [{"kind": "KIND_CPU"}]}),
        nothing,
        "instance_group",
    ),
    "ensemble-no-steps": Case(
        "ensemble-no-steps",
        "ens",
        patch("ens", {"ensemble_scheduling": {"max_inflight_requests": 2}}, clear=("ensemble_scheduling",)),
        nothing,
    ),
    "ensemble-step-invalid": Case(
        "ensemble-step-invalid", "ens", steps(S0, step("py_m", {"INPUT0": "mid"}, {})), nothing
    ),
    # ---- across models -------------------------------------------------------------------------
    "ensemble-unknown-model": Case(
        "ensemble-unknown-model",
        "ens",
        steps(S0, step("nope", {"INPUT0": "mid"}, {"OUTPUT0": "OUT"})),
        steps(S0, S1),
        "model_name",
    ),
    "ensemble-unknown-version": Case(
        "ensemble-unknown-version",
        "ens",
        steps(S0, step("py_m", {"INPUT0": "mid"}, {"OUTPUT0": "OUT"}, version=7)),
        steps(S0, step("py_m", {"INPUT0": "mid"}, {"OUTPUT0": "OUT"}, version=1)),
        "model_version",
    ),
    "ensemble-unknown-tensor": Case(
        "ensemble-unknown-tensor",
        "ens",
        steps(S0, step("py_m", {"INPUT0": "mid"}, {"NOPE": "OUT"})),
        steps(S0, S1),
        "output_map",
    ),
    "ensemble-unmapped-input": Case(
        "ensemble-unmapped-input",
        "ens",
        io("py_m", "input", [fp32("INPUT0", [4]), fp32("EXTRA", [1])]),
        io("py_m", "input", [fp32("INPUT0", [4]), fp32("EXTRA", [1], optional=True)]),
        "step {",
    ),
    "ensemble-input-unused": Case(
        "ensemble-input-unused",
        "ens",
        io("ens", "input", [fp32("IN", [4]), fp32("UNUSED", [1])]),
        nothing,
        "input {",
    ),
    "ensemble-output-not-written": Case(
        "ensemble-output-not-written",
        "ens",
        io("ens", "output", [fp32("OUT", [4]), fp32("OUT2", [4])]),
        nothing,
        "output {",
    ),
    "ensemble-tensor-unreachable": Case(
        "ensemble-tensor-unreachable",
        "ens",
        steps(S0, step("py_m", {"INPUT0": "ghost"}, {"OUTPUT0": "OUT"})),
        steps(S0, S1),
        "input_map",
    ),
    "ensemble-tensor-unused": Case(
        "ensemble-tensor-unused",
        "ens",
        steps(S0, step("py_m", {"INPUT0": "IN"}, {"OUTPUT0": "OUT"})),
        steps(S0, S1),
    ),
    "ensemble-tensor-written-twice": Case(
        "ensemble-tensor-written-twice",
        "ens",
        steps(S0, step("py_m", {"INPUT0": "mid"}, {"OUTPUT0": "mid"})),
        steps(S0, S1),
        "output_map",
    ),
    "ensemble-cycle-steps": Case(
        "ensemble-cycle",
        "ens",
        steps(
            step("onnx_m", {"x": "back"}, {"y": "mid"}), step("py_m", {"INPUT0": "mid"}, {"OUTPUT0": "back"})
        ),
        steps(S0, S1),
    ),
    "ensemble-cycle-self": Case(
        "ensemble-cycle",
        "ens",
        steps(S0, S1, step("ens", {"IN": "OUT"}, {"OUT": "OUT3"})),
        nothing,
        "model_name",
    ),
    "ensemble-dtype-mismatch": Case(
        "ensemble-dtype-mismatch",
        "ens",
        io("py_m", "input", [{"name": "INPUT0", "data_type": "TYPE_INT32", "dims": [4]}]),
        io("py_m", "input", [fp32("INPUT0", [4])]),
        "input_map",
    ),
    "ensemble-shape-mismatch": Case(
        "ensemble-shape-mismatch",
        "ens",
        io("py_m", "input", [fp32("INPUT0", [5])]),
        io("py_m", "input", [fp32("INPUT0", [-1])]),
        "input_map",
    ),
    "ensemble-shape-batch-dim": Case(
        # a non-batching ensemble over batching members: [3] agrees with neither the dims [4]
        # nor the full shape [-1, 4]; [-1, 4] agrees with the full shape, which Triton accepts
        "ensemble-shape-mismatch",
        "ens",
        both(patch("ens", {"max_batch_size": 0}), io("ens", "input", [fp32("IN", [3])])),
        both(patch("ens", {"max_batch_size": 0}), io("ens", "input", [fp32("IN", [-1, 4])])),
        "input_map",
    ),
    "ensemble-batch-size": Case(
        "ensemble-batch-size",
        "ens",
        patch("ens", {"max_batch_size": 16}),
        patch("ens", {"max_batch_size": 4}),
        "max_batch_size",
    ),
    "ensemble-batch-size-member-cannot-batch": Case(
        # a batching ensemble may hold a member that cannot batch (max_batch_size 0) when the
        # expanded shapes agree; only a batching member with a smaller max_batch_size is refused
        "ensemble-batch-size",
        "ens",
        patch("py_m", {"max_batch_size": 4}),
        both(
            patch("py_m", {"max_batch_size": 0}),
            io("py_m", "input", [fp32("INPUT0", [-1, 4])]),
            io("py_m", "output", [fp32("OUTPUT0", [-1, 4])]),
        ),
    ),
    # ---- variants -----------------------------------------------------------------------------
    "variant-checked": Case(
        "preferred-batch-size-too-large",
        "solo",
        patch("solo", {"dynamic_batching": {"preferred_batch_size": [64]}}, variant="cpu"),
        patch("solo", {"dynamic_batching": {"preferred_batch_size": [8]}}, variant="cpu"),
        "preferred_batch_size",
    ),
}

NESTED_CYCLE = both(
    write_text("outer/1/.keep", ""),
    write_text(
        "outer/config.pbtxt",
        'name: "outer"\nplatform: "ensemble"\nmax_batch_size: 8\n'
        'input { name: "IN" data_type: TYPE_FP32 dims: 4 }\n'
        'output { name: "OUT" data_type: TYPE_FP32 dims: 4 }\n'
        'ensemble_scheduling { step { model_name: "ens" model_version: -1 '
        'input_map { key: "IN" value: "IN" } output_map { key: "OUT" value: "OUT" } } }\n',
    ),
)
CASES["ensemble-cycle-nested"] = Case(
    "ensemble-cycle",
    "ens",
    both(
        NESTED_CYCLE,
        steps(
            S0, step("py_m", {"INPUT0": "mid"}, {"OUTPUT0": "p"}), step("outer", {"IN": "p"}, {"OUT": "OUT"})
        ),
    ),
    NESTED_CYCLE,
    "model_name",
)


def fresh(tmp_path: Path, mutation: Mutation) -> Path:
    repo = tmp_path / "repo"
    shutil.copytree(BASE, repo)
    mutation(repo)
    return repo


def test_validate_repository_accepts_base_fixture_when_unchanged(tmp_path: Path) -> None:
    report = validate_repository(fresh(tmp_path, nothing))
    assert report.valid, [str(p) for p in report.problems]
    assert report.problems == []


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_validate_repository_reports_rule_when_fixture_breaks_it(tmp_path: Path, case_id: str) -> None:
    case = CASES[case_id]
    repo = fresh(tmp_path, case.fail)
    report = validate_repository(repo)
    hits = [p for p in report.problems if p.code == case.code]
    assert hits, f"{case.code} not reported; got {[str(p) for p in report.problems]}"
    hit = hits[0]
    assert hit.severity == case.severity
    assert hit.model == case.model
    assert hit.file.startswith(str(repo))
    assert report.valid is (case.severity == "warning" and not report.errors)
    if case.line_has is not None:
        assert hit.line is not None, str(hit)
        line_text = Path(hit.file).read_text().splitlines()[hit.line - 1]
        assert case.line_has in line_text, (str(hit), line_text)


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_validate_repository_accepts_fixture_when_rule_is_respected(tmp_path: Path, case_id: str) -> None:
    case = CASES[case_id]
    report = validate_repository(fresh(tmp_path, case.ok))
    assert not [p for p in report.problems if p.code == case.code], [str(p) for p in report.problems]
    assert report.valid, [str(p) for p in report.problems]
