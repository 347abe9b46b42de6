"""Configs cross-checked against model files: ONNX graph I/O, model.py names, TorchScript, TensorRT."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from tritonkit.config import merge_json, new_config, write_config
from tritonkit.repository import validate_repository
from tritonkit.repository.onnx_io import OnnxReadError, read_onnx_io, read_onnx_io_bytes
from tritonkit.repository.validator.model_files import onnx_findings, python_findings


def graph(
    inputs: list[tuple[str, int, list[Any]]],
    outputs: list[tuple[str, int, list[Any]]],
    *,
    initializers: dict[str, list[int]] | None = None,
    ir_version: int = 8,
) -> onnx.ModelProto:
    """A real ONNX graph: outputs are Identity copies of the first input (types are not run)."""
    ins = [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs]
    outs = [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs]
    inits = []
    for name, shape in (initializers or {}).items():
        inits.append(numpy_helper.from_array(np.zeros(shape, np.float32), name))
        ins.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape))
    nodes = [helper.make_node("Identity", [inputs[0][0]], [n]) for n, _, _ in outputs]
    model = helper.make_model(helper.make_graph(nodes, "g", ins, outs, inits))
    model.ir_version = ir_version
    return model


BATCHED = graph([("x", TensorProto.FLOAT, ["N", 3, 8])], [("y", TensorProto.FLOAT, ["N", 10])])


def repo_with(
    tmp: Path,
    config: dict[str, Any],
    *,
    model: onnx.ModelProto | bytes | None = BATCHED,
    name: str = "m",
    filename: str = "model.onnx",
    versions: tuple[int, ...] = (1,),
) -> Path:
    repo = tmp / "repo"
    cfg = new_config(name=name)
    merge_json(cfg, {"backend": "onnxruntime", **config}, where="test")
    write_config(cfg, repo / name / "config.pbtxt")
    for v in versions:
        (repo / name / str(v)).mkdir(parents=True, exist_ok=True)
        if model is not None:
            data = model if isinstance(model, bytes) else model.SerializeToString()
            (repo / name / str(v) / filename).write_bytes(data)
    return repo


def t(name: str, dims: list[int], dtype: str = "TYPE_FP32", **kw: Any) -> dict[str, Any]:
    return {"name": name, "data_type": dtype, "dims": dims, **kw}


GOOD = {"max_batch_size": 8, "input": [t("x", [3, 8])], "output": [t("y", [10])]}


def codes(repo: Path) -> list[str]:
    return [p.code for p in validate_repository(repo).problems]


def only(repo: Path, code: str) -> Any:
    report = validate_repository(repo)
    hits = [p for p in report.problems if p.code == code]
    assert len(hits) == 1, [str(p) for p in report.problems]
    return hits[0]


def line_of(problem: Any) -> str:
    return str(Path(problem.file).read_text().splitlines()[problem.line - 1])


# ---- ONNX: legal configs stay quiet --------------------------------------------------------------


def test_onnx_check_accepts_config_when_it_matches_graph(tmp_path: Path) -> None:
    assert validate_repository(repo_with(tmp_path, GOOD)).problems == []


def test_onnx_check_accepts_config_when_dims_are_minus_one_for_symbolic_graph_dims(tmp_path: Path) -> None:
    model = graph([("x", TensorProto.FLOAT, ["N", "S"])], [("y", TensorProto.FLOAT, ["N", "S"])])
    cfg = {"max_batch_size": 4, "input": [t("x", [-1])], "output": [t("y", [-1])]}
    assert validate_repository(repo_with(tmp_path, cfg, model=model)).problems == []


def test_onnx_check_accepts_fixed_input_dim_when_graph_dim_is_symbolic(tmp_path: Path) -> None:
    model = graph([("x", TensorProto.FLOAT, ["N", "S"])], [("y", TensorProto.FLOAT, ["N", "S"])])
    cfg = {"max_batch_size": 4, "input": [t("x", [7])], "output": [t("y", [-1])]}
    assert validate_repository(repo_with(tmp_path, cfg, model=model)).problems == []


def test_onnx_check_accepts_full_shape_when_max_batch_size_is_zero(tmp_path: Path) -> None:
    cfg = {"max_batch_size": 0, "input": [t("x", [-1, 3, 8])], "output": [t("y", [-1, 10])]}
    assert validate_repository(repo_with(tmp_path, cfg)).problems == []


def test_onnx_check_accepts_reshape_when_it_matches_graph(tmp_path: Path) -> None:
    cfg = {**GOOD, "input": [t("x", [24], reshape={"shape": [3, 8]})]}
    assert validate_repository(repo_with(tmp_path, cfg)).problems == []


def test_onnx_check_stays_quiet_when_config_leaves_io_to_auto_complete(tmp_path: Path) -> None:
    assert validate_repository(repo_with(tmp_path, {"max_batch_size": 8})).problems == []
    assert validate_repository(repo_with(tmp_path / "b", {})).problems == []


def test_onnx_check_accepts_overridable_initializer_named_as_input(tmp_path: Path) -> None:
    model = graph(
        [("x", TensorProto.FLOAT, ["N", 4])], [("y", TensorProto.FLOAT, ["N", 4])], initializers={"w": [4]}
    )
    cfg = {"max_batch_size": 8, "input": [t("x", [4])], "output": [t("y", [4])]}
    assert validate_repository(repo_with(tmp_path, cfg, model=model)).problems == []


# ---- ONNX: mismatches Triton refuses -------------------------------------------------------------


def test_onnx_check_reports_missing_tensor_on_config_name_line_when_graph_lacks_it(tmp_path: Path) -> None:
    cfg = {**GOOD, "input": [t("INPUT0", [3, 8])]}
    hit = only(repo_with(tmp_path, cfg), "onnx-tensor-missing")
    assert hit.severity == "error"
    assert "INPUT0" in hit.message and "graph inputs: x" in hit.message
    assert 'name: "INPUT0"' in line_of(hit)


def test_onnx_check_reports_missing_output_when_graph_has_other_name(tmp_path: Path) -> None:
    hit = only(repo_with(tmp_path, {**GOOD, "output": [t("probs", [10])]}), "onnx-tensor-missing")
    assert "output 'probs'" in hit.message


def test_onnx_check_reports_data_type_on_data_type_line_when_types_differ(tmp_path: Path) -> None:
    hit = only(repo_with(tmp_path, {**GOOD, "input": [t("x", [3, 8], "TYPE_FP16")]}), "onnx-data-type")
    assert "TYPE_FP16" in hit.message and "FP32" in hit.message
    assert "data_type" in line_of(hit)


def test_onnx_check_explains_classic_mistake_when_dims_repeat_batch_dimension(tmp_path: Path) -> None:
    cfg = {**GOOD, "input": [t("x", [-1, 3, 8])]}
    hit = only(repo_with(tmp_path, cfg), "onnx-shape")
    assert "include the batch dimension" in hit.message and "dims: [3, 8]" in hit.message
    assert "dims" in line_of(hit)


def test_onnx_check_reports_batch_dim_when_graph_first_dim_is_fixed(tmp_path: Path) -> None:
    model = graph([("x", TensorProto.FLOAT, [1, 4])], [("y", TensorProto.FLOAT, [1, 4])])
    cfg = {"max_batch_size": 8, "input": [t("x", [4])], "output": [t("y", [4])]}
    report = validate_repository(repo_with(tmp_path, cfg, model=model))
    assert [p.code for p in report.errors] == ["onnx-batch-dim", "onnx-batch-dim"]
    assert "max_batch_size: 0" in report.errors[0].message


def test_onnx_check_reports_batch_dim_when_auto_complete_meets_unbatchable_graph(tmp_path: Path) -> None:
    model = graph([("x", TensorProto.FLOAT, [1, 4])], [("y", TensorProto.FLOAT, [1, 4])])
    hit = only(repo_with(tmp_path, {"max_batch_size": 8}, model=model), "onnx-batch-dim")
    assert "max_batch_size" in line_of(hit)


def test_onnx_check_reports_shape_when_fixed_dims_differ(tmp_path: Path) -> None:
    hit = only(repo_with(tmp_path, {**GOOD, "input": [t("x", [3, 9])]}), "onnx-shape")
    assert "[-1, 3, 9]" in hit.message and "[-1, 3, 8]" in hit.message


def test_onnx_check_reports_shape_when_config_uses_minus_one_for_fixed_input_dim(tmp_path: Path) -> None:
    assert "onnx-shape" in codes(repo_with(tmp_path, {**GOOD, "input": [t("x", [3, -1])]}))


def test_onnx_check_reports_shape_when_reshape_misses_graph(tmp_path: Path) -> None:
    cfg = {**GOOD, "input": [t("x", [24], reshape={"shape": [24]})]}
    hit = only(repo_with(tmp_path, cfg), "onnx-shape")
    assert "reshape" in hit.message


def test_onnx_check_reports_missing_batch_dim_when_max_batch_size_is_zero(tmp_path: Path) -> None:
    cfg = {"max_batch_size": 0, "input": [t("x", [3, 8])], "output": [t("y", [-1, 10])]}
    hit = only(repo_with(tmp_path, cfg), "onnx-shape")
    assert "set max_batch_size > 0" in hit.message


def test_onnx_check_warns_when_output_fixes_a_symbolic_graph_dim(tmp_path: Path) -> None:
    model = graph([("x", TensorProto.FLOAT, ["N", "S"])], [("y", TensorProto.FLOAT, ["N", "S"])])
    cfg = {"max_batch_size": 4, "input": [t("x", [-1])], "output": [t("y", [5])]}
    report = validate_repository(repo_with(tmp_path, cfg, model=model))
    assert [(p.severity, p.code) for p in report.problems] == [("warning", "onnx-shape-unverified")]
    assert report.valid


def test_onnx_check_reports_input_count_when_config_omits_a_graph_input(tmp_path: Path) -> None:
    model = graph(
        [("a", TensorProto.FLOAT, ["N", 2]), ("b", TensorProto.FLOAT, ["N", 2])],
        [("y", TensorProto.FLOAT, ["N", 2])],
    )
    cfg = {"max_batch_size": 4, "input": [t("a", [2])], "output": [t("y", [2])]}
    hit = only(repo_with(tmp_path, cfg, model=model), "onnx-input-count")
    assert "not in the config: b" in hit.message


def test_onnx_check_reports_optional_input_when_model_batches(tmp_path: Path) -> None:
    cfg = {**GOOD, "input": [t("x", [3, 8], optional=True)]}
    assert "onnx-optional-batching" in codes(repo_with(tmp_path, cfg))


def test_onnx_check_names_each_version_file_when_versions_share_a_mismatch(tmp_path: Path) -> None:
    cfg = {**GOOD, "version_policy": {"all": {}}, "input": [t("x", [3, 8], "TYPE_INT32")]}
    hit = only(repo_with(tmp_path, cfg, versions=(1, 2)), "onnx-data-type")
    assert "1/model.onnx, 2/model.onnx" in hit.message


def test_onnx_check_reads_default_model_filename_when_config_names_one(tmp_path: Path) -> None:
    cfg = {**GOOD, "default_model_filename": "net.onnx", "input": [t("z", [3, 8])]}
    hit = only(repo_with(tmp_path, cfg, filename="net.onnx"), "onnx-tensor-missing")
    assert "1/net.onnx" in hit.message


def test_onnx_check_reads_only_latest_version_when_policy_is_default(tmp_path: Path) -> None:
    repo = repo_with(tmp_path, GOOD, versions=(1, 2))
    (repo / "m" / "1" / "model.onnx").write_bytes(b"garbage from an old export")
    assert validate_repository(repo).problems == []


def test_onnx_check_infers_onnxruntime_when_config_names_no_backend(tmp_path: Path) -> None:
    repo = repo_with(tmp_path, {**GOOD, "input": [t("q", [3, 8])]})
    cfg_path = repo / "m" / "config.pbtxt"
    cfg_path.write_text(cfg_path.read_text().replace('backend: "onnxruntime"\n', ""))
    assert "onnx-tensor-missing" in codes(repo)


def test_onnx_check_reports_unreadable_file_when_it_is_not_onnx(tmp_path: Path) -> None:
    hit = only(
        repo_with(tmp_path, GOOD, model=b"version https://git-lfs.github.com/spec/v1\n"),
        "model-file-unreadable",
    )
    assert hit.severity == "error" and "1/model.onnx" in hit.message


def test_onnx_check_reads_model_directory_when_model_onnx_is_a_directory(tmp_path: Path) -> None:
    repo = repo_with(tmp_path, {**GOOD, "input": [t("q", [3, 8])]}, model=None)
    (repo / "m" / "1" / "model.onnx").mkdir()
    (repo / "m" / "1" / "model.onnx" / "model.onnx").write_bytes(BATCHED.SerializeToString())
    assert "onnx-tensor-missing" in codes(repo)


# ---- the reader --------------------------------------------------------------------------------


def test_onnx_reader_skips_initializers_when_they_are_listed_as_inputs() -> None:
    model = graph(
        [("x", TensorProto.FLOAT, ["N", 4])], [("y", TensorProto.FLOAT, ["N", 4])], initializers={"w": [4]}
    )
    io = read_onnx_io_bytes(model.SerializeToString())
    assert [v.name for v in io.inputs] == ["x"]
    assert [v.name for v in io.initializer_inputs] == ["w"]
    assert io.inputs[0].shape == (-1, 4) and io.outputs[0].elem_type == TensorProto.FLOAT


def test_onnx_reader_treats_initializer_inputs_as_constants_when_ir_version_is_old() -> None:
    model = graph(
        [("x", TensorProto.FLOAT, ["N", 4])],
        [("y", TensorProto.FLOAT, ["N", 4])],
        initializers={"w": [4]},
        ir_version=3,
    )
    io = read_onnx_io_bytes(model.SerializeToString())
    assert [v.name for v in io.inputs] == ["x"] and io.initializer_inputs == ()


def test_onnx_reader_does_not_open_external_data_when_weights_live_outside(tmp_path: Path) -> None:
    model = graph(
        [("x", TensorProto.FLOAT, ["N", 64])],
        [("y", TensorProto.FLOAT, ["N", 64])],
        initializers={"w": [64, 64]},
    )
    onnx.save_model(
        model, tmp_path / "m.onnx", save_as_external_data=True, location="weights.bin", size_threshold=0
    )
    (tmp_path / "weights.bin").unlink()  # a reader that touched the weights would fail now
    assert [v.name for v in read_onnx_io(tmp_path / "m.onnx").inputs] == ["x"]


def test_onnx_reader_reports_unreadable_when_file_is_truncated() -> None:
    data = BATCHED.SerializeToString()
    try:
        read_onnx_io_bytes(data[: len(data) // 2])
    except OnnxReadError as exc:
        assert str(exc)
    else:  # pragma: no cover - the assertion below explains
        raise AssertionError("a truncated file was accepted")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=512))
def test_onnx_reader_raises_only_onnx_read_error_when_bytes_are_arbitrary(data: bytes) -> None:
    try:
        io = read_onnx_io_bytes(data)
    except OnnxReadError:
        return
    onnx_findings(new_config(name="m"), io, filename="model.onnx")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cut=st.integers(min_value=0, max_value=400), flips=st.lists(st.integers(0, 10_000), max_size=4))
def test_onnx_reader_raises_only_onnx_read_error_when_real_model_is_corrupted(
    cut: int, flips: list[int]
) -> None:
    data = bytearray(BATCHED.SerializeToString())
    for at in flips:
        data[at % len(data)] ^= 0xFF
    data = data[: max(0, len(data) - cut)]
    cfg = new_config(name="m")
    merge_json(cfg, GOOD, where="test")
    try:
        io = read_onnx_io_bytes(bytes(data))
    except OnnxReadError:
        return
    onnx_findings(cfg, io, filename="model.onnx")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=256))
def test_validator_reports_unreadable_and_never_raises_when_model_file_is_arbitrary(
    tmp_path: Path, data: bytes
) -> None:
    repo = repo_with(tmp_path, GOOD, model=data)
    report = validate_repository(repo)
    assert all(p.code in {"model-file-unreadable", "onnx-tensor-missing", "onnx-input-count",
                          "onnx-data-type", "onnx-shape", "onnx-batch-dim", "onnx-shape-unverified",
                          "onnx-unsupported-type"} for p in report.problems)  # fmt: skip


# ---- Python models -----------------------------------------------------------------------------

PY = textwrap.dedent(
    """
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            out = []
            for request in requests:
                x = pb_utils.get_input_tensor_by_name(request, "{inp}").as_numpy()
                name = "COMPUTED" + str(1)
                extra = pb_utils.get_input_tensor_by_name(request, name)
                out.append(pb_utils.InferenceResponse([pb_utils.Tensor("{out}", x)]))
            return out
    """
)


def py_repo(tmp: Path, source: str, config: dict[str, Any] | None = None) -> Path:
    repo = tmp / "repo"
    cfg = new_config(name="p")
    merge_json(
        cfg, config or {"backend": "python", "input": [t("IN", [4])], "output": [t("OUT", [4])]}, where="t"
    )
    write_config(cfg, repo / "p" / "config.pbtxt")
    (repo / "p" / "1").mkdir(parents=True)
    (repo / "p" / "1" / "model.py").write_text(source)
    return repo


def test_python_check_accepts_model_when_literal_names_match_config(tmp_path: Path) -> None:
    assert validate_repository(py_repo(tmp_path, PY.format(inp="IN", out="OUT"))).problems == []


def test_python_check_warns_on_model_py_line_when_it_reads_an_undeclared_input(tmp_path: Path) -> None:
    report = validate_repository(py_repo(tmp_path, PY.format(inp="INPUT0", out="OUT")))
    [hit] = report.problems
    assert (hit.severity, hit.code) == ("warning", "python-tensor-unknown") and report.valid
    assert hit.file.endswith("p/1/model.py")
    assert '"INPUT0"' in line_of(hit)


def test_python_check_warns_when_it_builds_an_undeclared_output(tmp_path: Path) -> None:
    [hit] = validate_repository(py_repo(tmp_path, PY.format(inp="IN", out="OUTPUT0"))).problems
    assert "OUTPUT0" in hit.message and "pb_utils.Tensor" in line_of(hit)


def test_python_check_skips_built_names_when_model_sends_bls_requests(tmp_path: Path) -> None:
    source = (
        PY.format(inp="IN", out="OTHER_MODEL_INPUT") + "\nreq = pb_utils.InferenceRequest(model_name='x')\n"
    )
    # 'x' is served by another repository (otherwise bls-model-unknown, tests/unit/test_validator_bls.py)
    assert validate_repository(py_repo(tmp_path, source), bls_external=["x"]).problems == []


def test_python_check_accepts_names_when_auto_complete_config_adds_them(tmp_path: Path) -> None:
    source = PY.format(inp="LATE", out="OUT") + textwrap.dedent(
        """
        def auto_complete_config(cfg):
            cfg.add_input({"name": "LATE", "data_type": "TYPE_FP32", "dims": [4]})
            return cfg
        """
    )
    assert validate_repository(py_repo(tmp_path, source)).problems == []


def test_python_check_reports_unreadable_when_model_py_has_a_syntax_error(tmp_path: Path) -> None:
    [hit] = validate_repository(py_repo(tmp_path, "class TritonPythonModel(:\n    pass\n")).problems
    assert (hit.severity, hit.code, hit.line) == ("error", "model-file-unreadable", 1)


# ---- TorchScript and TensorRT ------------------------------------------------------------------


def other_repo(tmp: Path, config: dict[str, Any], filename: str) -> Path:
    repo = tmp / "repo"
    cfg = new_config(name="o")
    merge_json(cfg, config, where="t")
    write_config(cfg, repo / "o" / "config.pbtxt")
    (repo / "o" / "1").mkdir(parents=True)
    (repo / "o" / "1" / filename).write_bytes(b"\x00opaque")
    return repo


def test_torchscript_check_accepts_named_index_convention_when_indices_are_complete(tmp_path: Path) -> None:
    cfg = {"platform": "pytorch_libtorch", "max_batch_size": 4,
           "input": [t("INPUT__0", [3]), t("INPUT__1", [3])], "output": [t("OUTPUT__0", [3])]}  # fmt: skip
    assert validate_repository(other_repo(tmp_path, cfg, "model.pt")).problems == []


def test_torchscript_check_warns_when_names_mix_conventions(tmp_path: Path) -> None:
    cfg = {"platform": "pytorch_libtorch", "max_batch_size": 4,
           "input": [t("INPUT__0", [3]), t("mask", [3])], "output": [t("OUTPUT__0", [3])]}  # fmt: skip
    hit = only(other_repo(tmp_path, cfg, "model.pt"), "torchscript-naming")
    assert hit.severity == "warning" and "mask" in hit.message and "order" in hit.message


def test_torchscript_check_warns_when_indices_skip_a_position(tmp_path: Path) -> None:
    cfg = {"platform": "pytorch_libtorch", "max_batch_size": 4,
           "input": [t("INPUT__0", [3])], "output": [t("OUTPUT__0", [3]), t("OUTPUT__2", [3])]}  # fmt: skip
    hit = only(other_repo(tmp_path, cfg, "model.pt"), "torchscript-naming")
    assert "0..1" in hit.message


def test_torchscript_check_reports_string_tensor_when_it_has_more_than_one_dim(tmp_path: Path) -> None:
    cfg = {"platform": "pytorch_libtorch", "max_batch_size": 4,
           "input": [t("TEXT__0", [1], "TYPE_STRING")], "output": [t("OUTPUT__0", [3])]}  # fmt: skip
    assert only(other_repo(tmp_path, cfg, "model.pt"), "torchscript-string-dims").severity == "error"


def test_tensorrt_check_says_plainly_that_plans_are_not_inspected(tmp_path: Path) -> None:
    cfg = {"platform": "tensorrt_plan", "max_batch_size": 4, "input": [t("x", [3])], "output": [t("y", [3])]}
    report = validate_repository(other_repo(tmp_path, cfg, "model.plan"))
    [hit] = report.problems
    assert (hit.severity, hit.code) == ("info", "model-file-not-inspected") and report.valid
    assert "not inspect" in hit.message


# ---- ONNX: less common config features ---------------------------------------------------------


def seq_config(control_name: str) -> dict[str, Any]:
    return {
        "max_batch_size": 4,
        "input": [t("x", [3, 8])],
        "output": [t("y", [10])],
        "sequence_batching": {
            "control_input": [{"name": control_name, "control": [{"kind": "CONTROL_SEQUENCE_START",
                                                                   "int32_false_true": [0, 1]}]}]
        },
    }  # fmt: skip


def test_onnx_check_accepts_sequence_control_when_graph_takes_it_as_int32_of_dims_one(tmp_path: Path) -> None:
    model = graph(
        [("x", TensorProto.FLOAT, ["N", 3, 8]), ("START", TensorProto.INT32, ["N", 1])],
        [("y", TensorProto.FLOAT, ["N", 10])],
    )
    assert validate_repository(repo_with(tmp_path, seq_config("START"), model=model)).problems == []


def test_onnx_check_reports_sequence_control_when_graph_lacks_it(tmp_path: Path) -> None:
    hit = only(repo_with(tmp_path, seq_config("START")), "onnx-tensor-missing")
    assert "sequence control 'START'" in hit.message


def test_onnx_check_reports_sequence_control_when_its_type_or_dims_differ(tmp_path: Path) -> None:
    model = graph(
        [("x", TensorProto.FLOAT, ["N", 3, 8]), ("START", TensorProto.FLOAT, ["N", 2])],
        [("y", TensorProto.FLOAT, ["N", 10])],
    )
    found = codes(repo_with(tmp_path, seq_config("START"), model=model))
    assert "onnx-data-type" in found and "onnx-shape" in found


def test_onnx_check_requires_minus_one_shape_when_input_allows_ragged_batch(tmp_path: Path) -> None:
    ragged = graph([("x", TensorProto.FLOAT, ["T"])], [("y", TensorProto.FLOAT, ["B", "T"])])
    cfg = {"max_batch_size": 4, "input": [t("x", [-1], allow_ragged_batch=True)], "output": [t("y", [-1])]}
    assert "onnx-shape" not in codes(repo_with(tmp_path, cfg, model=ragged))
    assert "onnx-shape" in codes(
        repo_with(tmp_path / "b", {**GOOD, "input": [t("x", [3, 8], allow_ragged_batch=True)]})
    )


def test_onnx_check_requires_ones_when_graph_tensor_is_scalar(tmp_path: Path) -> None:
    scalar = graph([("x", TensorProto.FLOAT, [])], [("y", TensorProto.FLOAT, [])])
    ok = {"max_batch_size": 0, "input": [t("x", [1])], "output": [t("y", [1])]}
    assert validate_repository(repo_with(tmp_path, ok, model=scalar)).problems == []
    bad = {"max_batch_size": 0, "input": [t("x", [2])], "output": [t("y", [1])]}
    assert "onnx-shape" in codes(repo_with(tmp_path / "b", bad, model=scalar))


def test_onnx_check_reports_unsupported_type_when_graph_output_is_a_sequence(tmp_path: Path) -> None:
    model = BATCHED.__class__()
    model.CopyFrom(BATCHED)
    seq = helper.make_tensor_sequence_value_info("y", TensorProto.FLOAT, None)
    model.graph.output[0].CopyFrom(seq)
    assert codes(repo_with(tmp_path, GOOD, model=model)) == ["onnx-unsupported-type"]


def test_onnx_reader_maps_large_file_when_weights_are_embedded(tmp_path: Path) -> None:
    x, y = ("x", TensorProto.FLOAT, ["N", 4]), ("y", TensorProto.FLOAT, ["N", 4])
    model = graph([x], [y], initializers={"w": [4_500_000]})  # 18 MB of weights, above the mmap limit
    path = tmp_path / "big.onnx"
    path.write_bytes(model.SerializeToString())
    assert path.stat().st_size > 16 * 1024 * 1024
    io = read_onnx_io(path)
    assert [v.name for v in io.inputs] == ["x"] and [v.name for v in io.initializer_inputs] == ["w"]


def test_onnx_reader_reports_unreadable_when_large_mapped_file_is_truncated(tmp_path: Path) -> None:
    x, y = ("x", TensorProto.FLOAT, ["N", 4]), ("y", TensorProto.FLOAT, ["N", 4])
    data = graph([x], [y], initializers={"w": [4_500_000]}).SerializeToString()
    path = tmp_path / "big.onnx"
    path.write_bytes(data[: len(data) - 1000])
    try:
        read_onnx_io(path)
    except OnnxReadError as exc:
        assert "past the end" in str(exc) or "truncated" in str(exc)
    else:  # pragma: no cover - the assertion below explains
        raise AssertionError("a truncated file was accepted")


@settings(max_examples=150, deadline=None)
@given(source=st.binary(max_size=400) | st.text(max_size=400).map(str.encode))
def test_python_check_never_raises_when_model_py_is_arbitrary(source: bytes) -> None:
    import tempfile

    cfg = new_config(name="p")
    merge_json(cfg, {"backend": "python", "input": [t("IN", [4])], "output": [t("OUT", [4])]}, where="t")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.py"
        path.write_bytes(source)
        for p in python_findings(cfg, path, display="p/1/model.py", model="p"):
            assert p.code in {"model-file-unreadable", "python-tensor-unknown"}


def test_python_check_warns_instead_of_crashing_when_model_py_nests_too_deeply(tmp_path: Path) -> None:
    report = validate_repository(py_repo(tmp_path, "x = " + "-" * 100_000 + "1\n"))
    [hit] = report.problems
    assert (hit.severity, hit.code) == ("warning", "model-file-unreadable")


def test_torchscript_check_reports_missing_io_when_config_leaves_it_to_auto_complete(tmp_path: Path) -> None:
    cfg = {"platform": "pytorch_libtorch", "max_batch_size": 4, "input": [t("INPUT__0", [3])]}
    hit = only(other_repo(tmp_path, cfg, "model.pt"), "torchscript-io-missing")
    assert hit.severity == "error" and "no output" in hit.message
