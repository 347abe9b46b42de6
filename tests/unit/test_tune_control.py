"""What tune sends to Triton's model-repository API, and how it reads the answers.

A recording stand-in replaces tritonclient's HTTP client here (the real server path is covered by
tests/integration/test_tune_server.py); it only records calls and raises what Triton raises.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tritonkit.config import config_to_dict
from tritonkit.errors import TuneError
from tritonkit.tune.control import CandidateRefusedError, ModelControl
from tritonkit.tune.space import apply_settings

from .test_tune_space import DENSENET


class _RefusalError(Exception):
    def __init__(self, msg: str, status: str = "400") -> None:
        super().__init__(msg)
        self._msg, self._status = msg, status

    def message(self) -> str:
        return self._msg

    def status(self) -> str:
        return self._status


class _Recorder:
    def __init__(self, error: Exception | None = None, index: list[dict[str, Any]] | None = None) -> None:
        self.error = error
        self.index = index or []
        self.loads: list[tuple[str, dict[str, str], str]] = []

    def load_model(self, name: str, headers: dict[str, str], config: str) -> None:
        self.loads.append((name, headers, config))
        if self.error is not None:
            raise self.error

    def get_model_repository_index(self, headers: dict[str, str]) -> list[dict[str, Any]]:
        return self.index

    def close(self) -> None:
        pass


def _control(rec: _Recorder) -> ModelControl:
    control = ModelControl("http://127.0.0.1:1", headers={"admin-key": "s3cret"})
    control._client = rec
    return control


def test_load_sends_the_candidate_as_protobuf_json_in_the_config_parameter() -> None:
    rec = _Recorder()
    cand = apply_settings(DENSENET, {"instance_count": 2, "max_queue_delay_microseconds": 100})
    _control(rec).load("densenet_onnx", cand)
    [(name, headers, payload)] = rec.loads
    assert name == "densenet_onnx" and headers == {"admin-key": "s3cret"}
    sent = json.loads(payload)
    assert sent == config_to_dict(cand)
    assert sent["instance_group"][0]["count"] == 2
    assert sent["dynamic_batching"]["max_queue_delay_microseconds"] == "100"  # uint64 as in proto JSON


def test_a_refused_load_carries_tritons_reason_from_the_repository_index() -> None:
    rec = _Recorder(
        _RefusalError("failed to load 'densenet_onnx', failed to poll from model repository"),
        index=[{"name": "densenet_onnx", "reason": "instance group KIND_GPU: no GPU available"}],
    )
    with pytest.raises(CandidateRefusedError, match="no GPU available"):
        _control(rec).load("densenet_onnx", DENSENET)


def test_an_endpoint_without_explicit_model_control_is_a_clear_error() -> None:
    rec = _Recorder(_RefusalError("explicit model load / unload is not allowed if polling is enabled"))
    with pytest.raises(TuneError, match="does not allow loading models") as err:
        _control(rec).load("densenet_onnx", DENSENET)
    assert err.value.hint is not None and "--model-control-mode=explicit" in err.value.hint


def test_candidates_keep_the_served_python_environment_while_the_base_keeps_the_repository_one() -> None:
    """`tritonkit serve` runs a packed 3.10 archive through a local twin: a candidate built from
    the repository's config must not send the server back to the archive its stub cannot run."""
    from typing import cast

    from tritonkit.config import parse_config
    from tritonkit.tune.measure import LiveMeasurer

    text = (
        'name: "pre"\nbackend: "python"\n'
        'parameters {{ key: "EXECUTION_ENV_PATH" value {{ string_value: "{}" }} }}\n'
    )
    file_cfg = parse_config(text.format("$$TRITON_MODEL_DIRECTORY/pyenv-py3.10-abc.tar.gz"))
    served = parse_config(text.format("/cache/pyenvs/pyenv-py3.11-def.tar.gz"))
    measurer = LiveMeasurer(
        control=cast(Any, None),
        base={"pre": file_cfg},
        original={"pre": served},
        model_dirs={},
        perf=cast(Any, None),
        screen_window_ms=100,
        confirm_window_ms=100,
        max_trials=1,
    )
    candidate = measurer.candidate_configs({"pre": {"instance_count": 3}})["pre"]
    assert candidate.parameters["EXECUTION_ENV_PATH"].string_value == "/cache/pyenvs/pyenv-py3.11-def.tar.gz"
    assert candidate.instance_group[0].count == 3
    assert file_cfg.parameters["EXECUTION_ENV_PATH"].string_value.startswith("$$TRITON_MODEL_DIRECTORY")


def test_measure_counts_requests_instead_when_none_completed_within_the_time_windows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A request that outlasts every screening window (a slow model, or the first requests after
    a load on a busy machine) is not a failed candidate: it is measured again in windows that end
    when requests complete. run_step is a recording stand-in here (the real path: the ensemble
    case of tests/integration/test_tune_server.py)."""
    from types import SimpleNamespace
    from typing import cast

    from tritonkit.perf.runner import PerfSettings
    from tritonkit.tune import measure as measure_module
    from tritonkit.tune.measure import LiveMeasurer

    def step(requests: int) -> Any:
        return SimpleNamespace(
            requests=requests,
            error_count=0,
            throughput=float(requests),
            stable=requests > 0,
            windows=(),
            client_cpu_us_per_request=0.0,
            duration_s=1.0,
            stream=None,
            latency_us=lambda stat: 1000.0 if requests else None,
        )

    calls: list[PerfSettings] = []

    def run_step(perf: PerfSettings, **_: Any) -> Any:
        calls.append(perf)
        return measure_module.PerfStep(step(0 if len(calls) == 1 else 3), 0.0, False)

    monkeypatch.setattr(measure_module, "run_step", run_step)
    measurer = LiveMeasurer(
        control=cast(Any, None),
        base={},
        original={},
        model_dirs={},
        perf=PerfSettings(url="http://localhost:8000", model="ens"),
        screen_window_ms=200,
        confirm_window_ms=200,
        max_trials=3,
    )
    monkeypatch.setattr(measurer, "apply", lambda settings: None)
    outcome = measurer.measure({}, 2, confirm=False)
    assert [c.requests_per_window for c in calls] == [None, 2]
    assert calls[1].measurement_interval_ms == 200 and calls[1].levels == (2.0,)
    assert outcome.throughput == 3.0 and outcome.errors == 0 and outcome.failed is None
