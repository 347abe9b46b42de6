"""The vllm backend's request parsing, model-path rule and KV-cache sizing (no engine, no Triton).

The backend's modules import ``triton_python_backend_utils``, which exists only inside Triton's
Python backend stub: these tests load them with a stand-in module of that name (a fake, because
the real one cannot be imported outside the stub). What runs against the real engine and
tritonserver is in tests/integration/test_vllm_engine.py.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from tests.unit._triton_side import load_backend_module
from tritonkit.errors import MissingExtraError
from tritonkit.server._vllm import find_llm_env

BACKEND_DIR = Path(__file__).resolve().parents[2] / "tritonkit" / "triton_side" / "backends" / "vllm"

#: SamplingParams' field types as vLLM 0.32 declares them (the ones these tests use)
FIELDS: dict[str, Any] = {
    "n": int,
    "temperature": float,
    "top_p": float,
    "top_k": int,
    "seed": int | None,
    "max_tokens": int | None,
    "ignore_eos": bool,
    "stop": str | list[str] | None,
    "logprobs": int | None,
    "min_tokens": int,
    "stop_token_ids": list[int] | None,
    "logit_bias": dict[int, float] | None,
    "structured_outputs": object,
}


def _sibling(name: str) -> Any:
    return load_backend_module(BACKEND_DIR / f"{name}.py", f"tritonkit_vllm_backend_{name}_under_test")


@pytest.fixture(scope="module")
def sampling() -> Any:
    return _sibling("sampling_checks")


@pytest.fixture(scope="module")
def engine_config() -> Any:
    return _sibling("engine_config")


@pytest.fixture(scope="module")
def kv_cache() -> Any:
    return _sibling("kv_cache_size")


@pytest.fixture(scope="module")
def health() -> Any:
    return _sibling("engine_health")


@pytest.fixture(scope="module")
def metrics() -> Any:
    return _sibling("backend_metrics")


def test_parse_sampling_parameters_converts_numbers_and_booleans_sent_as_strings(sampling: Any) -> None:
    raw = json.dumps({"max_tokens": "16", "temperature": "0.5", "ignore_eos": "true", "seed": "3"})
    kwargs, lora = sampling.parse_sampling_parameters(raw, FIELDS, max_model_len=256)
    assert kwargs == {"max_tokens": 16, "temperature": 0.5, "ignore_eos": True, "seed": 3}
    assert lora is None


def test_parse_sampling_parameters_keeps_lora_name_apart_from_sampling(sampling: Any) -> None:
    raw = '{"lora_name": "colours", "top_k": 4}'
    kwargs, lora = sampling.parse_sampling_parameters(raw, FIELDS, max_model_len=8)
    assert kwargs == {"top_k": 4} and lora == "colours"


def test_parse_sampling_parameters_drops_null_values_for_vllm_defaults(sampling: Any) -> None:
    kwargs, _ = sampling.parse_sampling_parameters('{"seed": null, "stop": ["."]}', FIELDS, max_model_len=8)
    assert kwargs == {"stop": ["."]}


SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


@pytest.mark.parametrize(
    "given",
    [
        {"structured_outputs": {"json": SCHEMA}},
        {"structured_outputs": json.dumps({"json": SCHEMA})},  # NVIDIA's backend: a JSON string
        {"guided_decoding": {"json": SCHEMA, "backend": "auto"}},  # vLLM < 0.11's name
    ],
)
def test_parse_sampling_parameters_takes_structured_outputs_as_an_object_a_string_or_guided_decoding(
    sampling: Any, given: dict[str, Any]
) -> None:
    kwargs, _ = sampling.parse_sampling_parameters(
        json.dumps({"max_tokens": 4, **given}), FIELDS, max_model_len=8
    )
    assert kwargs == {"max_tokens": 4, "structured_outputs": {"json": SCHEMA}}


@pytest.mark.parametrize(
    ("structured", "reason"),
    [
        ({"json": SCHEMA, "regex": "a+"}, "exactly one of"),
        ({}, "got none"),
        ({"choice": []}, "non-empty array of strings"),
        ({"choice": ["a", 1]}, "non-empty array of strings"),
        ({"regex": 5}, "regex must be a string"),
        ({"json_object": False}, "json_object must be true"),
        ({"json": 5}, "JSON schema"),
        ({"schema": SCHEMA}, "unknown structured_outputs key(s) 'schema'"),
        ({"json": SCHEMA, "backend": "outlines"}, "the engine's choice"),
        ("{not json", "not valid JSON"),
        (["json"], "must be a JSON object"),
    ],
)
def test_parse_sampling_parameters_refuses_a_malformed_structured_outputs_naming_why(
    sampling: Any, structured: Any, reason: str
) -> None:
    with pytest.raises(sampling.BadRequest) as caught:
        sampling.parse_sampling_parameters(
            json.dumps({"structured_outputs": structured}), FIELDS, max_model_len=8
        )
    assert reason in str(caught.value)


def test_parse_sampling_parameters_reads_logit_bias_keys_as_token_ids(sampling: Any) -> None:
    kwargs, _ = sampling.parse_sampling_parameters(
        '{"logit_bias": {"12": -100, "7": "2.5"}}', FIELDS, max_model_len=8
    )
    assert kwargs == {"logit_bias": {12: -100.0, 7: 2.5}}
    with pytest.raises(sampling.BadRequest, match="logit_bias"):
        sampling.parse_sampling_parameters('{"logit_bias": {"x": 1}}', FIELDS, max_model_len=8)


def test_parse_sampling_parameters_reads_empty_text_as_no_parameters(sampling: Any) -> None:
    assert sampling.parse_sampling_parameters("  ", FIELDS, max_model_len=8) == ({}, None)


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("not json", "not valid JSON"),
        ("[1]", "must be a JSON object"),
        ('{"bogus": 1, "zeta": 2}', "unknown sampling parameter(s) 'bogus', 'zeta'"),
        ('{"_eos_token_id": 1}', "unknown sampling parameter(s) '_eos_token_id'"),
        ('{"max_tokens": -1}', "max_tokens must be between 1 and the model's max_model_len (256), got -1"),
        ('{"max_tokens": 0}', "got 0"),
        ('{"max_tokens": 100000000000000000000}', "max_model_len (256)"),
        ('{"max_tokens": "many"}', "'max_tokens' must be an integer"),
        ('{"max_tokens": 2.5}', "'max_tokens' must be an integer"),
        ('{"max_tokens": true}', "'max_tokens' must be an integer"),
        ('{"temperature": "hot"}', "'temperature' must be a number"),
        ('{"temperature": "nan"}', "'temperature' must be finite"),
        ('{"ignore_eos": "maybe"}', "'ignore_eos' must be true or false"),
        ('{"lora_name": 3}', "'lora_name' must be a string"),
    ],
)
def test_parse_sampling_parameters_raises_bad_request_when_parameters_are_malformed(
    sampling: Any, raw: str, says: str
) -> None:
    with pytest.raises(sampling.BadRequest) as info:
        sampling.parse_sampling_parameters(raw, FIELDS, max_model_len=256)
    assert says in str(info.value)


def test_map_local_path_maps_a_missing_server_path_onto_the_version_directory(
    engine_config: Any, tmp_path: Path
) -> None:
    version_dir = tmp_path / "repo" / "llm" / "1"
    (version_dir / "hf_model").mkdir(parents=True)
    mapped, changed = engine_config.map_local_path(
        "/models/llm/1/hf_model", model_name="llm", version_dir=version_dir
    )
    assert changed and mapped == str(version_dir / "hf_model")


def test_map_local_path_leaves_existing_relative_and_hub_paths_alone(
    engine_config: Any, tmp_path: Path
) -> None:
    version_dir = tmp_path / "llm" / "1"
    version_dir.mkdir(parents=True)
    for value in (str(tmp_path), "hf_model", "org/model", "/elsewhere/other/1/hf_model"):
        assert engine_config.map_local_path(value, model_name="llm", version_dir=version_dir) == (
            value,
            False,
        )


def test_map_local_path_leaves_the_path_when_the_local_target_is_missing_too(
    engine_config: Any, tmp_path: Path
) -> None:
    version_dir = tmp_path / "llm" / "1"
    version_dir.mkdir(parents=True)
    assert engine_config.map_local_path("/models/llm/1/gone", model_name="llm", version_dir=version_dir) == (
        "/models/llm/1/gone",
        False,
    )


def test_default_kv_cache_bytes_takes_a_tenth_of_available_memory_within_bounds(kv_cache: Any) -> None:
    gib = 1 << 30
    assert kv_cache.default_kv_cache_bytes(8 * gib) == int(0.8 * gib)
    assert kv_cache.default_kv_cache_bytes(1 * gib) == 256 << 20
    assert kv_cache.default_kv_cache_bytes(400 * gib) == 4 * gib
    assert kv_cache.default_kv_cache_bytes(None) == 256 << 20


def _hf_model(tmp_path: Path, **config: Any) -> Path:
    model = tmp_path / "hf"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return model


def test_engine_kv_cache_bytes_holds_max_num_seqs_sequences_of_a_small_model(
    kv_cache: Any, tmp_path: Path
) -> None:
    model = _hf_model(
        tmp_path,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        hidden_size=128,
        max_position_embeddings=2048,
        torch_dtype="float32",
    )
    engine = {"model": str(model), "max_model_len": 256, "max_num_seqs": 16, "dtype": "float32"}
    per_token = 2 * 2 * 2 * 32 * 4
    assert (
        kv_cache.kv_bytes_per_token(json.loads((model / "config.json").read_text()), "float32") == per_token
    )
    # 16 full sequences of 256 tokens are 4 MiB: the 64 MiB floor applies.
    assert kv_cache.engine_kv_cache_bytes(engine, 16 << 30) == 64 << 20


def test_engine_kv_cache_bytes_is_capped_by_memory_but_holds_one_full_sequence(
    kv_cache: Any, tmp_path: Path
) -> None:
    model = _hf_model(
        tmp_path,
        num_hidden_layers=32,
        num_attention_heads=32,
        hidden_size=4096,
        max_position_embeddings=32768,
        torch_dtype="bfloat16",
    )
    per_token = 2 * 32 * 32 * 128 * 2  # 512 KiB
    engine = {"model": str(model)}
    one_sequence = per_token * 32768  # 16 GiB: more than the cap, so at least this
    assert kv_cache.engine_kv_cache_bytes(engine, 8 << 30) == one_sequence + (16 << 20)
    engine = {"model": str(model), "max_model_len": 1024}
    assert kv_cache.engine_kv_cache_bytes(engine, 8 << 30) == kv_cache.default_kv_cache_bytes(8 << 30)


def test_engine_kv_cache_bytes_falls_back_to_the_memory_share_for_a_hub_id(kv_cache: Any) -> None:
    share = kv_cache.default_kv_cache_bytes(8 << 30)
    assert kv_cache.engine_kv_cache_bytes({"model": "org/model"}, 8 << 30) == share


def test_engine_processes_lists_children_and_grandchildren_of_a_process(health: Any) -> None:
    import os
    import signal
    import subprocess
    import time

    shell = subprocess.Popen(["sh", "-c", "sleep 30 & wait"])
    grandchildren: list[int] = []
    try:
        deadline = time.monotonic() + 10
        while not (grandchildren := health.engine_processes(shell.pid)):
            assert time.monotonic() < deadline, "the shell never started its sleep"
            time.sleep(0.05)
        assert len(grandchildren) == 1
        assert {shell.pid, *grandchildren} <= set(health.engine_processes(os.getpid()))
    finally:
        for pid in grandchildren:
            os.kill(pid, signal.SIGKILL)
        shell.kill()
        shell.wait()


def test_active_gauge_keeps_updating_after_a_failed_update_and_warns_once(
    metrics: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One update the stub could not pass to Triton used to switch the gauge off for the model's
    life, leaving it stuck at a stale value; now the next update goes through."""
    values: list[float] = []
    failures = [RuntimeError("Failed to set metric value: stub busy")] * 2

    class Metric:
        def __init__(self, labels: dict[str, str]) -> None:
            self.labels = labels

        def set(self, value: float) -> None:
            if failures:
                raise failures.pop()
            values.append(value)

    class MetricFamily:
        GAUGE = "gauge"

        def __init__(self, name: str, description: str, kind: str) -> None:
            self.Metric = Metric

    warnings: list[str] = []
    monkeypatch.setattr(metrics.pb_utils, "MetricFamily", MetricFamily, raising=False)
    gauge = metrics.Gauge(metrics.ACTIVE_METRIC, "active", {"model": "m", "instance": "m_0"}, warnings.append)
    for value in (1, 2, 1, 0):
        gauge.set(value)
    assert values == [1.0, 0.0]  # the first two updates failed, the next ones went through
    assert len(warnings) == 1 and "tritonkit_generation_active" in warnings[0]


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_engine_health_sees_a_process_gone_and_vllms_own_dead_flag(health: Any) -> None:
    shell = subprocess.Popen(["sleep", "30"])
    try:
        health = health.EngineHealth([shell.pid], stall=None)
        assert health.problem(None) is None
        assert "EngineDeadError" in health.problem(types.SimpleNamespace(errored=True))
        shell.kill()
        shell.wait()
        assert health.problem(None) == f"engine process {shell.pid} is gone"
    finally:
        if shell.poll() is None:
            shell.kill()
            shell.wait()


def test_engine_health_calls_an_engine_wedged_only_while_requests_wait_without_output(health: Any) -> None:
    clock = _Clock()
    health = health.EngineHealth([], stall=10.0, clock=clock)
    clock.now += 60  # idle for a minute: nothing is expected of it
    assert health.problem(None) is None
    health.busy(2)
    clock.now += 8
    health.progressed()
    clock.now += 8
    assert health.problem(None) is None  # output 8 s ago
    clock.now += 3
    assert "no output for 11 s" in health.problem(None)
    health.busy(0)
    assert health.problem(None) is None


def test_stall_seconds_reads_the_environment_and_zero_turns_the_check_off(health: Any) -> None:
    assert health.stall_seconds({}) == health.DEFAULT_STALL_S
    assert health.stall_seconds({health.STALL_ENV: "7.5"}) == 7.5
    assert health.stall_seconds({health.STALL_ENV: "0"}) is None
    assert health.stall_seconds({health.STALL_ENV: "soon"}) == health.DEFAULT_STALL_S


def _engine_config(engine_config: Any, tmp_path: Path, engine: dict[str, Any], parameter: str | None) -> Any:
    (tmp_path / "model.json").write_text(json.dumps({"model": "org/hub-model", **engine}))
    params = {} if parameter is None else {"STRUCTURED_OUTPUTS_CONFIG": {"string_value": parameter}}
    files = engine_config.EngineFiles(
        model_name="tiny_llm", version_dir=tmp_path, config={"parameters": params}, log=lambda line: None
    )
    return files.engine_arguments()


def test_engine_config_takes_the_structured_outputs_parameter_where_model_json_has_none(
    engine_config: Any, tmp_path: Path
) -> None:
    compact = {"backend": "xgrammar", "disable_any_whitespace": True}
    assert (
        _engine_config(engine_config, tmp_path, {}, json.dumps(compact))["structured_outputs_config"]
        == compact
    )
    own = {"structured_outputs_config": {"backend": "guidance"}}
    assert _engine_config(engine_config, tmp_path, own, json.dumps(compact)) == {
        "model": "org/hub-model",
        **own,
    }
    assert "structured_outputs_config" not in _engine_config(engine_config, tmp_path, {}, None)

    class RefusedError(Exception):
        pass

    engine_config.pb_utils.TritonModelException = RefusedError  # the stand-in module is empty
    for bad in ("[true]", "{not json"):
        with pytest.raises(RefusedError, match="STRUCTURED_OUTPUTS_CONFIG must be a JSON object"):
            _engine_config(engine_config, tmp_path, {}, bad)


#: the modules shipped beside the backend's model.py, imported by their plain names inside Triton
SIBLINGS = sorted(p.stem for p in BACKEND_DIR.glob("*.py") if p.name != "model.py")


def test_backend_model_loads_with_its_siblings_imported_by_plain_name() -> None:
    model = load_backend_module(BACKEND_DIR / "model.py", "tritonkit_vllm_backend_model_under_test")
    assert callable(model.TritonPythonModel.auto_complete_config)
    assert not set(SIBLINGS) & set(sys.modules)  # each load's siblings are its own


@pytest.mark.parametrize("name", SIBLINGS)
def test_backend_sibling_name_is_taken_by_no_installed_or_standard_module(name: str) -> None:
    """The stub appends the backend's directory to ``sys.path``: an installed module of the same
    name would be imported in the sibling's place. The ``llm`` environment is checked where it
    is installed (tritonkit.server._vllm finds it as ``serve`` does)."""
    assert name not in sys.stdlib_module_names
    assert importlib.util.find_spec(name) is None, name
    try:
        llm_env = find_llm_env()
    except MissingExtraError:
        return
    probe = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({name!r}) is not None)"
    assert (
        subprocess.run([str(llm_env.path / "bin" / "python3"), "-I", "-c", probe], check=False).returncode
        == 0
    )
