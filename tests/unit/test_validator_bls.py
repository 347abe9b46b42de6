"""bls-*: the models, versions and outputs a Python model's BLS calls name, checked statically.

Each rule on a minimal repository, once failing and once passing; the shipped streaming
pipelines (BLS fronts naming their features ensembles through a config parameter) validate
without a finding.
"""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest
import yaml

from tritonkit.errors import SpecError
from tritonkit.repository import build_spec, validate_repository
from tritonkit.repository.bls import bls_calls, model_bls_calls
from tritonkit.repository.manifest import Manifest

CALLER = 'name: "front"\nbackend: "python"\nmax_batch_size: 0\n{params}'
CALLEE = textwrap.dedent(
    """\
    name: "{name}"
    backend: "python"
    max_batch_size: 0
    {policy}
    input [{{ name: "X" data_type: TYPE_FP32 dims: [1] }}]
    output [{{ name: "Y" data_type: TYPE_FP32 dims: [1] }}, {{ name: "Z" data_type: TYPE_FP32 dims: [1] }}]
    """
)
CALLEE_PY = textwrap.dedent(
    """\
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            x = pb_utils.get_input_tensor_by_name(requests[0], "X").as_numpy()
            return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", x), pb_utils.Tensor("Z", x)])]
    """
)


def caller(repo: Path, body: str, *, params: str = "", files: dict[str, str] | None = None) -> Path:
    model = repo / "front"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(CALLER.format(params=params))
    (model / "1" / "model.py").write_text(textwrap.dedent(body))
    for rel, text in (files or {}).items():
        (model / "1" / rel).write_text(textwrap.dedent(text))
    return model


def callee(repo: Path, name: str = "features", *, versions: tuple[int, ...] = (1,), policy: str = "") -> Path:
    model = repo / name
    for version in versions:
        (model / str(version)).mkdir(parents=True)
        (model / str(version) / "model.py").write_text(CALLEE_PY)
    (model / "config.pbtxt").write_text(CALLEE.format(name=name, policy=policy))
    return model


def bls(repo: Path, **kwargs: object) -> list[tuple[str, str, int | None, str]]:
    report = validate_repository(repo, **kwargs)  # type: ignore[arg-type]
    return [
        (p.severity, p.code, p.line, p.file.rsplit("/", 1)[-1])
        for p in report.problems
        if p.code.startswith("bls-")
    ]


def call(args: str) -> str:
    return f"""\
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            x = pb_utils.get_input_tensor_by_name(requests[0], "X")
            r = pb_utils.InferenceRequest({args})
            return [r.exec()]
    """


# -- bls-model-unknown ------------------------------------------------------------------------


def test_bls_model_unknown_is_a_warning_with_file_and_line_when_a_keyword_name_has_a_typo(
    tmp_path: Path,
) -> None:
    callee(tmp_path)
    caller(tmp_path, call('model_name="featuers", inputs=[x], requested_output_names=["Y"]'))
    assert bls(tmp_path) == [("warning", "bls-model-unknown", 6, "model.py")]
    report = validate_repository(tmp_path)
    assert report.valid and not report.strict().valid  # Triton loads it; --strict refuses it
    assert "'featuers'" in report.warnings[0].message and "bls_external" in report.warnings[0].message


def test_bls_model_unknown_not_reported_when_the_name_is_in_the_repository(tmp_path: Path) -> None:
    callee(tmp_path)
    caller(tmp_path, call('model_name="features", inputs=[x], requested_output_names=["Y"]'))
    assert bls(tmp_path) == []
    assert validate_repository(tmp_path).valid


def test_bls_model_unknown_reads_the_stub_positional_order(tmp_path: Path) -> None:
    # request_id, correlation_id, inputs, requested_output_names, model_name (pb_stub.cc)
    callee(tmp_path)
    caller(tmp_path, call('"", 0, [x], ["Y"], "nope"'))
    assert bls(tmp_path) == [("warning", "bls-model-unknown", 6, "model.py")]
    (tmp_path / "front" / "1" / "model.py").write_text(textwrap.dedent(call('"", 0, [x], ["Y"], "features"')))
    assert bls(tmp_path) == []


def test_bls_model_unknown_follows_a_module_constant(tmp_path: Path) -> None:
    callee(tmp_path)
    source = 'FEATURES = "{name}"\n' + textwrap.dedent(
        call("model_name=FEATURES, inputs=[x], requested_output_names=['Y']")
    )
    caller(tmp_path, source.format(name="featuers"))
    found = bls(tmp_path)
    assert found == [("warning", "bls-model-unknown", 7, "model.py")]
    assert "through constant FEATURES" in validate_repository(tmp_path).warnings[0].message
    (tmp_path / "front" / "1" / "model.py").write_text(source.format(name="features"))
    assert bls(tmp_path) == []


def test_bls_model_unknown_follows_a_config_parameter_and_names_its_line(tmp_path: Path) -> None:
    callee(tmp_path)
    body = """\
    import json
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def initialize(self, args):
            params = json.loads(args["model_config"])["parameters"]
            self.target = params["TARGET_MODEL"]["string_value"]

        def execute(self, requests):
            r = pb_utils.InferenceRequest(model_name=self.target, inputs=[], requested_output_names=[])
            return [r.exec()]
    """
    param = 'parameters {{ key: "TARGET_MODEL" value {{ string_value: "{v}" }} }}\n'
    caller(tmp_path, body, params=param.format(v="featurez"))
    report = validate_repository(tmp_path)
    [problem] = [p for p in report.problems if p.code == "bls-model-unknown"]
    assert problem.line == 10 and problem.file.endswith("front/1/model.py")
    assert "from parameter TARGET_MODEL of " in problem.message and "config.pbtxt:4" in problem.message
    (tmp_path / "front" / "config.pbtxt").write_text(CALLER.format(params=param.format(v="features")))
    assert bls(tmp_path) == []


def test_bls_model_unknown_found_in_a_module_beside_model_py(tmp_path: Path) -> None:
    callee(tmp_path)
    helper = call('model_name="missing", inputs=[], requested_output_names=[]')
    caller(tmp_path, "from helper import TritonPythonModel\n", files={"helper.py": helper})
    assert bls(tmp_path) == [("warning", "bls-model-unknown", 6, "helper.py")]


def test_bls_model_unknown_not_reported_when_declared_external_on_the_command_line(tmp_path: Path) -> None:
    caller(tmp_path, call('model_name="reranker", inputs=[], requested_output_names=[]'))
    assert bls(tmp_path)[0][1] == "bls-model-unknown"
    assert bls(tmp_path, bls_external=["reranker"]) == []


def test_bls_external_from_the_spec_is_recorded_by_build_and_honoured_by_validate(tmp_path: Path) -> None:
    src = tmp_path / "front.py"
    src.write_text(textwrap.dedent(call('model_name="reranker", inputs=[], requested_output_names=[]')))
    model = {
        "name": "front",
        "backend": "python",
        "source": "front.py",
        "max_batch_size": 0,
        "inputs": [{"name": "X", "data_type": "FP32", "dims": [1]}],
        "outputs": [{"name": "Y", "data_type": "FP32", "dims": [1]}],
    }
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"name": "p", "models": [model]}))
    repo = tmp_path / "repo"
    build_spec(spec, repo)
    assert [c for _, c, _, _ in bls(repo)] == ["bls-model-unknown"]
    spec.write_text(yaml.safe_dump({"name": "p", "models": [{**model, "bls_external": ["reranker"]}]}))
    build_spec(spec, repo, force=True)
    assert Manifest.load(repo).bls_external() == {"front": ["reranker"]}
    assert bls(repo) == []


def test_bls_external_refused_by_the_spec_on_a_model_that_is_not_python(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "p",
                "models": [{"name": "e", "platform": "ensemble", "bls_external": ["x"], "steps": []}],
            }
        )
    )
    with pytest.raises(SpecError, match="bls_external"):
        build_spec(spec, tmp_path / "repo")


# -- bls-model-dynamic ------------------------------------------------------------------------


def test_bls_model_dynamic_is_an_info_note_when_the_name_is_computed(tmp_path: Path) -> None:
    callee(tmp_path)
    caller(tmp_path, call('model_name="feat" + "ures"[0:], inputs=[], requested_output_names=[]'))
    assert bls(tmp_path) == [("info", "bls-model-dynamic", 6, "model.py")]
    assert validate_repository(tmp_path).valid


def test_bls_model_dynamic_not_reported_when_the_name_is_literal(tmp_path: Path) -> None:
    callee(tmp_path)
    caller(tmp_path, call('model_name="features", inputs=[], requested_output_names=[]'))
    assert not [p for p in bls(tmp_path) if p[1] == "bls-model-dynamic"]


def test_bls_model_dynamic_when_a_variable_is_assigned_twice(tmp_path: Path) -> None:
    body = 'NAME = "features"\nNAME = "other"\n' + textwrap.dedent(
        call("model_name=NAME, inputs=[], requested_output_names=[]")
    )
    caller(tmp_path, body)
    assert [c for _, c, _, _ in bls(tmp_path)] == ["bls-model-dynamic"]


# -- bls-version-unknown ----------------------------------------------------------------------


def test_bls_version_unknown_is_a_warning_when_the_callee_does_not_load_that_version(tmp_path: Path) -> None:
    callee(tmp_path, versions=(1, 2))  # default policy: latest 1 -> only 2 is loaded
    caller(tmp_path, call('model_name="features", model_version=1, inputs=[], requested_output_names=["Y"]'))
    assert bls(tmp_path) == [("warning", "bls-version-unknown", 6, "model.py")]


def test_bls_version_unknown_not_reported_when_the_version_is_loaded_or_left_to_the_server(
    tmp_path: Path,
) -> None:
    callee(tmp_path, versions=(1, 2), policy="version_policy { all { } }")
    caller(tmp_path, call('model_name="features", model_version=1, inputs=[], requested_output_names=["Y"]'))
    assert bls(tmp_path) == []
    (tmp_path / "front" / "1" / "model.py").write_text(
        textwrap.dedent(
            call('model_name="features", model_version=-1, inputs=[], requested_output_names=["Y"]')
        )
    )
    assert bls(tmp_path) == []


# -- bls-output-unknown -----------------------------------------------------------------------


def test_bls_output_unknown_is_a_warning_when_a_requested_output_is_not_declared(tmp_path: Path) -> None:
    callee(tmp_path)
    caller(tmp_path, call('model_name="features", inputs=[x], requested_output_names=["Y", "W"]'))
    assert bls(tmp_path) == [("warning", "bls-output-unknown", 6, "model.py")]
    assert "'W'" in validate_repository(tmp_path).warnings[0].message


def test_bls_output_unknown_not_reported_when_the_outputs_are_declared_or_not_literal(tmp_path: Path) -> None:
    callee(tmp_path)
    caller(tmp_path, call('model_name="features", inputs=[x], requested_output_names=("Y", "Z")'))
    assert bls(tmp_path) == []
    (tmp_path / "front" / "1" / "model.py").write_text(
        textwrap.dedent(call('model_name="features", inputs=[x], requested_output_names=[n for n in "W"]'))
    )
    assert bls(tmp_path) == []


def test_bls_output_unknown_not_reported_when_the_callee_completes_its_config_itself(tmp_path: Path) -> None:
    model = callee(tmp_path)
    (model / "1" / "model.py").write_text(
        CALLEE_PY + "\n    def auto_complete_config(c):\n        return c\n"
    )
    caller(tmp_path, call('model_name="features", inputs=[x], requested_output_names=["W"]'))
    assert bls(tmp_path) == []


# -- the shipped pipelines --------------------------------------------------------------------


def test_shipped_streaming_pipelines_validate_with_no_bls_finding(streaming_example_repository: Path) -> None:
    report = validate_repository(streaming_example_repository)
    found = [p for p in report.problems if p.code.startswith("bls-")]
    assert report.valid
    assert [str(p) for p in found if p.severity != "info"] == []
    # the unary decoders share text_stream.py but set no FEATURES_MODEL: said plainly, once each
    notes = {(p.model, p.severity) for p in found}
    assert notes <= {("arr_coc_decoder", "info"), ("vlm_model", "info")}
    assert all("parameter FEATURES_MODEL, which this model's config does not set" in p.message for p in found)


def test_shipped_streaming_fronts_resolve_their_features_model_through_the_parameter(
    streaming_example_repository: Path,
) -> None:
    from tritonkit.config import read_config

    for front, features in (("vlm_stream", "vlm_features"), ("arr_coc_stream", "arr_coc_features")):
        cfg = read_config(streaming_example_repository / front / "config.pbtxt")
        calls = model_bls_calls(cfg, streaming_example_repository / front / "1")
        assert [(c.model, c.source, c.file.name) for c in calls] == [
            (features, "parameter FEATURES_MODEL", "text_stream.py")
        ]


def test_shipped_streaming_front_typo_in_the_parameter_is_caught(
    streaming_example_repository: Path, copy_of: object
) -> None:
    repo = copy_of(streaming_example_repository)  # type: ignore[operator]
    cfg = repo / "vlm_stream" / "config.pbtxt"
    cfg.write_text(cfg.read_text().replace('"vlm_features"', '"vlm_featurse"'))
    codes = [(p.model, p.code) for p in validate_repository(repo).warnings]
    assert codes == [("vlm_stream", "bls-model-unknown")]


def test_bls_calls_ignore_requests_with_no_model_name() -> None:
    import ast

    tree = ast.parse("pb_utils.InferenceRequest(inputs=[])\nother.Request(model_name='x')\n")
    assert bls_calls(tree, file=Path("m.py"), parameters={}) == []


def test_cli_validate_bls_external_option_accepts_a_model_from_another_repository(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tritonkit.cli.app import main

    caller(tmp_path, call('model_name="reranker", inputs=[], requested_output_names=[]'))
    cases = (
        ([], 0, [("warning", "bls-model-unknown")]),
        (["--strict"], 1, [("error", "bls-model-unknown")]),
        (["--bls-external", "reranker", "--strict"], 0, []),
    )
    for extra, expected, found in cases:
        with pytest.raises(SystemExit) as info:
            main(["validate", str(tmp_path), "--json", *extra])
        assert info.value.code == expected
        out = capsys.readouterr().out
        assert [(p["severity"], p["code"]) for p in json.loads(out)["problems"]] == found


# -- upstream models (tests/fixtures/upstream): where Triton itself fails the load ------------

UPSTREAM = Path(__file__).resolve().parent.parent / "fixtures" / "upstream"
QA = UPSTREAM / "server" / "qa_python_models"


def _only(repo: Path, *models: str) -> Path:
    for model in models:
        shutil.copytree(QA / model, repo / model)
    return repo


def test_bls_in_initialize_is_an_error_when_triton_qa_bls_init_error_calls_in_initialize(
    tmp_path: Path,
) -> None:
    """Triton 2.51 refuses server qa/python_models/bls_init_error at load (served:
    tests/integration/test_upstream_verdicts_triton.py)."""
    found = bls(_only(tmp_path, "bls_init_error"))
    assert found == [("error", "bls-in-initialize", 11, "model.py")]


def test_bls_in_initialize_not_reported_when_qa_models_call_from_execute_or_its_threads(
    tmp_path: Path,
) -> None:
    repo = _only(tmp_path, "decoupled_bls_stream", "dlpack_io_identity")
    assert {code for _, code, _, _ in bls(repo)} == {"bls-model-unknown"}
    assert validate_repository(repo).valid


def test_bls_in_initialize_found_through_a_method_initialize_calls(tmp_path: Path) -> None:
    body = """\
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def initialize(self, args):
            self.warm_up()

        def warm_up(self):
            pb_utils.InferenceRequest(model_name="features", inputs=[], requested_output_names=[]).exec()

        def execute(self, requests):
            return []
    """
    callee(tmp_path)
    caller(tmp_path, body)
    assert bls(tmp_path) == [("error", "bls-in-initialize", 8, "model.py")]


def test_bls_in_finalize_is_a_warning_when_triton_qa_bls_finalize_error_calls_in_finalize(
    tmp_path: Path,
) -> None:
    assert bls(_only(tmp_path, "bls_finalize_error")) == [("warning", "bls-in-finalize", 16, "model.py")]


def test_bls_model_unknown_is_only_a_warning_on_the_qa_models_triton_loads(tmp_path: Path) -> None:
    """The ten QA models the issue names load on Triton 2.51 without their callees."""
    repo = _only(tmp_path, "bls", "bls_onnx_warmup", "dlpack_io_identity", "decoupled_bls")
    report = validate_repository(repo)
    assert report.valid
    unknown = [p for p in report.problems if p.code == "bls-model-unknown"]
    models = ("bls", "bls_onnx_warmup", "dlpack_io_identity", "decoupled_bls")
    assert {(p.model, p.severity) for p in unknown} == {(m, "warning") for m in models}
    assert all("fails at request time unless" in p.message for p in unknown)


def test_bls_model_unknown_not_reported_when_the_example_repository_holds_the_callee() -> None:
    """python_backend's bls_decoupled example, laid out as its README says (square_int32 beside it)."""
    found = [f for f in bls(UPSTREAM / "python_backend" / "examples") if f[1] != "bls-model-dynamic"]
    assert found == []


def test_cli_validate_strict_fails_an_upstream_repository_that_only_has_warnings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tritonkit.cli.app import main

    repo = _only(tmp_path, "decoupled_bls_stream")
    for extra, expected in (([], 0), (["--strict"], 1)):
        with pytest.raises(SystemExit) as info:
            main(["validate", str(repo), *extra])
        assert info.value.code == expected
    out = capsys.readouterr().out
    assert "error: bls-model-unknown" in out and "invalid (1 error(s), 0 warning(s))" in out
