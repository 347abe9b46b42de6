"""Search spaces: defaults from the model and machine, --space files, applying a point."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonkit.config import config_to_dict, parse_config
from tritonkit.errors import TuneError
from tritonkit.tune.control import differences, validate_candidate
from tritonkit.tune.measure import touched_fields
from tritonkit.tune.space import apply_settings, default_space, load_hint, load_space

DENSENET = parse_config(
    """name: "densenet_onnx"
platform: "onnxruntime_onnx"
max_batch_size: 32
input [{ name: "data_0" data_type: TYPE_FP32 dims: [3, 224, 224] }]
output [{ name: "fc6_1" data_type: TYPE_FP32 dims: [1000] }]
dynamic_batching { preferred_batch_size: [8, 16, 32] max_queue_delay_microseconds: 500 }
instance_group [{ kind: KIND_CPU count: 1 }]
"""
)
STAGE = parse_config(
    """name: "stage"
backend: "python"
max_batch_size: 0
input [{ name: "X" data_type: TYPE_FP32 dims: [4] }]
output [{ name: "Y" data_type: TYPE_FP32 dims: [4] }]
instance_group [{ kind: KIND_CPU count: 1 }]
"""
)
ENSEMBLE = parse_config(
    """name: "pipe"
platform: "ensemble"
max_batch_size: 0
input [{ name: "X" data_type: TYPE_FP32 dims: [4] }]
output [{ name: "Y" data_type: TYPE_FP32 dims: [4] }]
ensemble_scheduling { step [{ model_name: "stage" model_version: -1
  input_map { key: "X" value: "X" } output_map { key: "Y" value: "Y" } }] }
"""
)


def test_default_space_covers_instances_batching_and_queue_delay_for_a_batching_model() -> None:
    space = default_space("densenet_onnx", {"densenet_onnx": DENSENET}, cores=2)
    keys = {d.key: d.values for d in space.dimensions}
    assert keys["densenet_onnx.instance_count"] == (1, 2)
    assert keys["densenet_onnx.max_batch_size"] == (2, 4, 8, 16, 32)
    assert keys["densenet_onnx.dynamic_batching"] == (False, True)
    assert keys["densenet_onnx.max_queue_delay_microseconds"] == (0, 100, 500, 2000, 10000)


def test_default_load_ladder_reaches_model_analyzers_ceiling_whatever_the_client_cores() -> None:
    small = default_space("densenet_onnx", {"densenet_onnx": DENSENET}, cores=1)
    big = default_space("densenet_onnx", {"densenet_onnx": DENSENET}, cores=64)
    assert small.loads == big.loads
    assert small.loads[0] == 1 and small.loads[-1] == 1024


def test_load_hint_scales_with_instances_and_batch_size_like_model_analyzer_quick_mode() -> None:
    hint = load_hint({"densenet_onnx": DENSENET})
    knobs = {"instance_count": 2, "max_batch_size": 16, "dynamic_batching": True}
    assert hint({"densenet_onnx": knobs}) == 2 * 2 * 16
    assert hint({"densenet_onnx": {**knobs, "dynamic_batching": False}}) == 2 * 2
    # a knob the candidate does not set comes from the config (1 instance, 32, batching on)
    assert hint({}) == 2 * 1 * 32


def test_default_space_of_an_ensemble_tunes_its_composing_models() -> None:
    space = default_space("pipe", {"pipe": ENSEMBLE, "stage": STAGE}, cores=4)
    assert [d.key for d in space.dimensions] == ["stage.instance_count"]
    assert space.dimensions[0].values == (1, 2, 4)


def test_grid_points_skip_queue_delays_that_have_no_effect_without_dynamic_batching() -> None:
    space = default_space("densenet_onnx", {"densenet_onnx": DENSENET}, cores=2)
    # 2 instance counts x 5 batch sizes x (off + 5 delays)
    assert len(space.points()) == 60


def test_apply_settings_drops_preferred_sizes_above_the_max_batch_size() -> None:
    cfg = apply_settings(DENSENET, {"max_batch_size": 8, "dynamic_batching": True, "instance_count": 2})
    data = config_to_dict(cfg)
    assert data["dynamic_batching"]["preferred_batch_size"] == [8]
    assert data["instance_group"][0]["count"] == 2
    assert validate_candidate(cfg, model_dir=None) == []


def test_apply_settings_removes_dynamic_batching_when_switched_off() -> None:
    cfg = apply_settings(DENSENET, {"dynamic_batching": False, "max_queue_delay_microseconds": 100})
    assert "dynamic_batching" not in config_to_dict(cfg)


def test_apply_settings_sets_any_model_config_field_in_protobuf_json() -> None:
    params = {"intra_op_thread_count": {"string_value": "1"}}
    cfg = apply_settings(DENSENET, {"parameters": params})
    assert config_to_dict(cfg)["parameters"] == params


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "space.yaml"
    p.write_text(text, encoding="utf-8")
    return p


def test_load_space_replaces_given_dimensions_and_keeps_other_defaults(tmp_path: Path) -> None:
    p = _write(tmp_path, "concurrency: [2, 1]\ndimensions:\n  instance_count: [1, 3]\n")
    space = load_space(p, target="densenet_onnx", configs={"densenet_onnx": DENSENET}, cores=2)
    keys = {d.key: d.values for d in space.dimensions}
    assert keys["densenet_onnx.instance_count"] == (1, 3)
    assert "densenet_onnx.dynamic_batching" in keys
    assert space.loads == (1, 2)


def test_load_space_without_defaults_keeps_only_given_dimensions(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        "defaults: false\ndimensions:\n  parameters:\n    - {intra_op_thread_count: {string_value: '1'}}\n"
        "    - {intra_op_thread_count: {string_value: '2'}}\n",
    )
    space = load_space(p, target="densenet_onnx", configs={"densenet_onnx": DENSENET}, cores=2)
    assert [d.key for d in space.dimensions] == ["densenet_onnx.parameters"]


def test_load_space_rejects_a_key_that_is_not_a_model_config_field(tmp_path: Path) -> None:
    p = _write(tmp_path, "dimensions:\n  instance_cuont: [1, 2]\n")
    with pytest.raises(TuneError, match="'instance_cuont' is not a ModelConfig field"):
        load_space(p, target="densenet_onnx", configs={"densenet_onnx": DENSENET})


def test_load_space_rejects_a_value_the_schema_refuses(tmp_path: Path) -> None:
    p = _write(tmp_path, "dimensions:\n  optimization: [{no_such_field: 1}]\n")
    with pytest.raises(TuneError, match="optimization"):
        load_space(p, target="densenet_onnx", configs={"densenet_onnx": DENSENET})


def test_load_space_rejects_a_model_outside_the_target(tmp_path: Path) -> None:
    p = _write(tmp_path, "models:\n  other: {instance_count: [1]}\n")
    with pytest.raises(TuneError, match="'other' is not part of 'densenet_onnx'"):
        load_space(p, target="densenet_onnx", configs={"densenet_onnx": DENSENET})


def test_load_space_rejects_a_bad_instance_count(tmp_path: Path) -> None:
    p = _write(tmp_path, "dimensions:\n  instance_count: [0, 2]\n")
    with pytest.raises(TuneError, match="at least 1"):
        load_space(p, target="densenet_onnx", configs={"densenet_onnx": DENSENET})


def test_override_read_back_comparison_ignores_server_defaults_and_catches_changes() -> None:
    sent = apply_settings(DENSENET, {"instance_count": 2, "dynamic_batching": True})
    fields = touched_fields({"instance_count": 2, "dynamic_batching": True})
    # the server echoes the config with names and defaults filled in
    applied = parse_config(
        config_to_dict_text(sent).replace("count: 2", 'name: "densenet_onnx_0"\n  count: 2')
    )
    assert differences(sent, applied, fields) == []
    other = apply_settings(DENSENET, {"instance_count": 1})
    assert any("instance_group" in d for d in differences(sent, other, fields))


def config_to_dict_text(cfg: object) -> str:
    from tritonkit.config import dumps_config

    return dumps_config(cfg)


def test_load_space_reads_composing_model_dimensions_of_an_ensemble(tmp_path: Path) -> None:
    p = _write(tmp_path, "defaults: false\nmodels:\n  stage: {instance_count: [1, 3]}\n")
    space = load_space(p, target="pipe", configs={"pipe": ENSEMBLE, "stage": STAGE})
    assert [(d.key, d.values) for d in space.dimensions] == [("stage.instance_count", (1, 3))]
    assert space.by_model((1,)) == {"stage": {"instance_count": 3}}
