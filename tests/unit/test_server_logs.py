"""Reading tritonserver's log: load failures, port clashes, secrets kept out of output.

The log lines below were recorded from the real tritonserver 2.51 of nvidia-pytriton.
"""

from __future__ import annotations

from tritonkit.server import _logs
from tritonkit.server._local import _model_load_error

RECORDED_LOG = r"""I1121 21:03:24.560001 16151 model_lifecycle.cc:472] "loading: noonnx:1"
E1121 21:03:24.565508 16151 model_repository_manager.cc:1460] "Poll failed for model directory 'badcfg': failed to read text proto from /tmp/erepo/badcfg/config.pbtxt"
I1121 21:03:26.043632 16151 pb_stub.cc:366] "Failed to initialize Python stub: TritonModelException: model 'noonnx': ONNX file not found: /tmp/erepo/noonnx/1/model.onnx\n\nAt:\n  /root/.cache/tritonkit/backends/x/onnxruntime/model.py(106): initialize\n"
E1121 21:03:26.193520 16151 model_lifecycle.cc:642] "failed to load 'noonnx' version 1: Internal: TritonModelException: model 'noonnx': ONNX file not found: /tmp/erepo/noonnx/1/model.onnx\n\nAt:\n  /root/.cache/tritonkit/backends/x/onnxruntime/model.py(106): initialize\n"
E1121 21:00:35.240796 8522 model_lifecycle.cc:642] "failed to load 'broken' version 1: Internal: RuntimeError: deliberately broken\n\nAt:\n  /tmp/brepo/broken/1/model.py(1): <module>\n  <frozen importlib._bootstrap>(241): _call_with_frames_removed\n  <frozen importlib._bootstrap_external>(940): exec_module\n"
I1121 21:03:26.193535 16151 model_lifecycle.cc:777] "failed to load 'noonnx'"
E1121 21:03:26.194397 16151 tritonserver.cc:2607] "Internal: failed to load all models"
"""  # noqa: E501 - recorded verbatim

PORT_CLASH_LOG = r"""E1121 21:01:55.778748592   11845 chttp2_server.cc:1060]                UNKNOWN:No address added out of total 1 resolved for '127.0.0.1:60021' {created_time:"2026-11-21T21:01:55.778701372+00:00"}
E1121 21:01:55.782107 11845 main.cc:245] "failed to start GRPC service: Unavailable - Socket '127.0.0.1:60021' already in use "
"""  # noqa: E501 - recorded verbatim


def test_parse_load_failures_names_every_model_in_log_order_when_the_log_reports_them() -> None:
    failures = _logs.parse_load_failures(RECORDED_LOG)
    assert list(failures) == ["badcfg", "noonnx", "broken"]
    assert failures["badcfg"] == "failed to read text proto from /tmp/erepo/badcfg/config.pbtxt"


def test_parse_load_failures_keeps_the_backend_message_only_when_a_backend_raised_on_purpose() -> None:
    reason = _logs.parse_load_failures(RECORDED_LOG)["noonnx"]
    assert reason == (
        "Internal: TritonModelException: model 'noonnx': ONNX file not found: /tmp/erepo/noonnx/1/model.onnx"
    )


def test_parse_load_failures_points_at_the_user_frame_when_model_code_raised() -> None:
    reason = _logs.parse_load_failures(RECORDED_LOG)["broken"]
    assert reason == (
        "Internal: RuntimeError: deliberately broken (at /tmp/brepo/broken/1/model.py(1): <module>)"
    )
    assert "frozen importlib" not in reason


RESOLVE_LOG = r"""E1121 21:35:16.803019 10115 server.cc:241] "CudaDriverHelper has not been initialized."
E1121 21:35:16.804084 10115 model_repository_manager.cc:703] "Invalid argument: ensemble ens contains models that are not available or ambiguous: missing_model"
E1121 21:35:16.804117 10115 model_repository_manager.cc:724] "failed to load model 'nover': at least one version must be available under the version policy of model 'nover'"
I1121 21:35:16.804134 10115 model_lifecycle.cc:472] "loading: densenet_onnx:1"
I1121 21:35:18.132359 10115 model_lifecycle.cc:839] "successfully loaded 'densenet_onnx'"
E1121 21:35:18.133240 10115 tritonserver.cc:2607] "Internal: failed to load all models"
"""  # noqa: E501 - recorded verbatim


def test_parse_load_failures_names_models_rejected_before_loading_when_repository_resolution_fails() -> None:
    failures = _logs.parse_load_failures(RESOLVE_LOG)
    assert list(failures) == ["ens", "nover"]
    assert failures["ens"] == (
        "Invalid argument: ensemble ens contains models that are not available or ambiguous: missing_model"
    )
    assert failures["nover"].startswith("at least one version must be available")


def test_parse_load_failures_returns_nothing_when_every_model_loaded() -> None:
    log = 'I1121 20:59:52.709171 7188 model_lifecycle.cc:849] "successfully loaded \'pyadd\'"\n'
    assert _logs.parse_load_failures(log) == {}


def test_failures_from_index_lists_only_unavailable_models_when_the_index_mixes_states() -> None:
    index = [
        {"name": "good", "version": "1", "state": "READY", "reason": ""},
        {"name": "bad", "version": "1", "state": "UNAVAILABLE", "reason": "Invalid argument: bad dims"},
        {"name": "silent", "state": "UNAVAILABLE"},
    ]
    failures = _logs.failures_from_index(index)
    assert failures["bad"] == "Invalid argument: bad dims"
    assert "no reason given" in failures["silent"]
    assert "good" not in failures


def test_merge_failures_prefers_the_log_reason_when_both_name_a_model() -> None:
    merged = _logs.merge_failures({"a": "full reason"}, {"b": "from index", "a": "short"})
    assert merged == {"a": "full reason", "b": "from index"}


def test_model_load_error_names_the_first_model_and_lists_the_others_when_several_fail() -> None:
    error = _model_load_error({"badcfg": "cannot parse", "noonnx": "no file"}, "tail")
    assert error.model == "badcfg"
    assert error.reason.startswith("cannot parse")
    assert "also failed: 'noonnx': no file" in str(error)
    assert error.log_tail == "tail"


def test_address_in_use_names_the_service_when_a_port_was_taken() -> None:
    clash = _logs.address_in_use(PORT_CLASH_LOG)
    assert clash == "GRPC: Unavailable - Socket '127.0.0.1:60021' already in use"
    assert _logs.address_in_use(RECORDED_LOG) is None


def test_redact_args_hides_restricted_api_values_when_given_either_flag_form() -> None:
    args = [
        "--http-restricted-api=model-repository,health:admin-key=TOPSECRET",
        "--grpc-restricted-protocol",
        "inference:token=TOPSECRET2",
        "--log-verbose=1",
    ]
    redacted = " ".join(_logs.redact_args(args))
    assert "TOPSECRET" not in redacted
    assert "--http-restricted-api=model-repository,health:admin-key=***" in redacted
    assert "inference:token=***" in redacted
    assert "--log-verbose=1" in redacted


def test_restricted_headers_gives_the_header_to_send_when_an_api_is_restricted() -> None:
    assert _logs.restricted_headers(["health,metadata:admin-key=abc", "malformed"]) == {"admin-key": "abc"}


def test_redact_text_replaces_every_secret_when_it_appears() -> None:
    assert _logs.redact_text("key=abc and abc again", ["abc", ""]) == "key=*** and *** again"


ENSEMBLE_LOG = r"""E1123 12:14:17.045143 6795 model_repository_manager.cc:724] "failed to load model '.ipynb_checkpoints': at least one version must be available under the version policy of model '.ipynb_checkpoints'"
I1123 12:14:17.050000 6795 model_lifecycle.cc:472] "loading: ensemble_helper:1"
E1123 12:14:25.229521 6795 model_repository_manager.cc:703] "Invalid argument: ensemble ens_mbs_small allows maximum batch size 8, but it contains model py_b2 which only allows maximum batch size to be 2"
E1123 12:14:25.229556 6795 model_repository_manager.cc:703] "Invalid argument: ensemble 'ens_v0' depends on 'onnx_m' whose required version 0 is not loaded."
E1123 12:15:33.025149 7497 model_repository_manager.cc:703] "Invalid argument: in ensemble ens_nb_mis, ensemble tensor IN: inconsistent shape: [3] is inferred from model ens_nb_mis while [-1,4] is inferred from model onnx_m"
E1123 12:15:33.025167 7497 model_repository_manager.cc:703] "Invalid argument: ensemble 'ens_nested_bad' depends on 'ens_badmember' which is not valid. Model 'ens_badmember' failed with error: ensemble ens_badmember contains models that are not available or ambiguous: py_bad"
E1123 12:14:25.230040 6795 ensemble_scheduler.cc:1468] "unable to create stream for ens: CUDA driver version is insufficient for CUDA runtime version"
"""  # noqa: E501 - recorded verbatim from tritonserver 2.51


def test_parse_load_failures_names_every_refused_ensemble_when_ensemble_checks_fail() -> None:
    failures = _logs.parse_load_failures(ENSEMBLE_LOG)
    assert list(failures) == [".ipynb_checkpoints", "ens_mbs_small", "ens_v0", "ens_nb_mis", "ens_nested_bad"]
    assert failures["ens_v0"] == (
        "Invalid argument: ensemble 'ens_v0' depends on 'onnx_m' whose required version 0 is not loaded."
    )
    assert "inconsistent shape: [3]" in failures["ens_nb_mis"]
    assert failures["ens_mbs_small"].endswith("only allows maximum batch size to be 2")


def test_model_load_error_lists_every_refused_model_when_several_ensembles_fail() -> None:
    error = _model_load_error(_logs.parse_load_failures(ENSEMBLE_LOG), "tail")
    refused = [".ipynb_checkpoints", "ens_mbs_small", "ens_v0", "ens_nb_mis", "ens_nested_bad"]
    assert list(error.failures) == refused  # type: ignore[attr-defined]
    for name in refused:
        assert f"'{name}'" in str(error)


def test_failures_from_index_counts_stateless_models_when_every_model_should_have_loaded() -> None:
    # recorded from tritonserver 2.51: ensembles refused before loading are listed without a state
    index = [
        {"name": "ens_v0"},
        {"name": "onnx_m", "version": "1", "state": "READY"},
        {"name": "py_m", "version": "1", "state": "READY"},
    ]
    assert list(_logs.failures_from_index(index, unloaded_is_failure=True)) == ["ens_v0"]
    assert _logs.failures_from_index(index) == {}
