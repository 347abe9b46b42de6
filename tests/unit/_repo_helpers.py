"""Helpers shared by the builder/validator tests: tiny real ONNX models and spec files."""

from __future__ import annotations

import textwrap
from pathlib import Path

import onnx
from onnx import TensorProto, helper

PY_MODEL = textwrap.dedent(
    """
    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            out = []
            for request in requests:
                x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
                out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x * 2)]))
            return out
    """
)


def identity_onnx(
    *,
    batch: str | int = "batch",
    width: int | str = 4,
    elem: int = TensorProto.FLOAT,
    name_in: str = "x",
    name_out: str = "y",
) -> onnx.ModelProto:
    """A real one-node ONNX graph (Identity) with the given leading and second dims."""
    x = helper.make_tensor_value_info(name_in, elem, [batch, width])
    y = helper.make_tensor_value_info(name_out, elem, [batch, width])
    graph = helper.make_graph([helper.make_node("Identity", [name_in], [name_out])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def write_onnx(path: Path, model: onnx.ModelProto | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes((model or identity_onnx()).SerializeToString())
    return path


def write_py_model(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(PY_MODEL)
    return path


def pipeline_spec(tmp: Path, *, name: str = "demo", prefix: str = "", version: int = 1) -> Path:
    """A spec with an ONNX file model, a python model, an ONNX generator model and an ensemble."""
    src = tmp / "src"
    write_onnx(src / "ident.onnx")
    write_py_model(src / "double.py")
    (src / "labels.txt").write_text("a\nb\nc\nd\n")
    (src / "vocab.json").write_text('{"a": 1}')
    (src / "gen.py").write_text(
        textwrap.dedent(
            """
            from onnx import TensorProto, helper

            def make():
                x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])
                y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])
                g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
                m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
                m.ir_version = 8
                return m
            """
        )
    )
    p = prefix
    spec = tmp / f"{name}.yaml"
    spec.write_text(
        textwrap.dedent(
            f"""
            name: {name}
            models:
              - name: {p}ident
                source: src/ident.onnx
                version: {version}
                dynamic_batching: {{preferred_batch_size: [4], max_queue_delay_microseconds: 100}}
                outputs: [{{name: y, data_type: FP32, dims: [4], labels: src/labels.txt}}]
                inputs: [{{name: x, data_type: FP32, dims: [4]}}]
                max_batch_size: 8
                variants:
                  cpu: {{instance_group: [{{kind: KIND_CPU, count: 2}}]}}
              - name: {p}double
                backend: python
                source: src/double.py
                files: [src/vocab.json]
                max_batch_size: 8
                inputs: [{{name: INPUT0, data_type: FP32, dims: [4]}}]
                outputs: [{{name: OUTPUT0, data_type: FP32, dims: [4]}}]
                instance_group: [{{kind: KIND_CPU, count: 1}}]
              - name: {p}relu
                generator: src/gen.py:make
              - name: {p}pipe
                platform: ensemble
                max_batch_size: 8
                inputs: [{{name: IN, data_type: FP32, dims: [4]}}]
                outputs: [{{name: OUT, data_type: FP32, dims: [4]}}]
                steps:
                  - model: {p}relu
                    inputs: {{x: IN}}
                    outputs: {{y: mid}}
                  - model: {p}double
                    inputs: {{INPUT0: mid}}
                    outputs: {{OUTPUT0: OUT}}
            """
        )
    )
    return spec
