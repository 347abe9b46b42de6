"""config.pbtxt load/dump through Triton's schema: golden round trips, errors with lines."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tritonkit.config import (
    DataType,
    DynamicBatching,
    EnsembleStep,
    InstanceGroup,
    InstanceKind,
    ModelConfigSpec,
    QueuePolicy,
    TensorSpec,
    TimeoutAction,
    VersionPolicy,
    dumps_config,
    locate_fields,
    parse_config,
    read_config,
    write_config,
)
from tritonkit.errors import ConfigParseError

GOLDEN = sorted((Path(__file__).resolve().parent.parent / "fixtures" / "configs").glob("*.pbtxt"))


@pytest.mark.parametrize("golden", GOLDEN, ids=lambda p: p.stem)
def test_dumps_config_equals_golden_when_golden_is_loaded(golden: Path) -> None:
    assert dumps_config(read_config(golden)) == golden.read_text()


def test_golden_fixtures_cover_the_less_common_fields() -> None:
    cfg = read_config(next(p for p in GOLDEN if p.stem == "everything"))
    assert cfg.sequence_batching.state[0].input_name == "STATE_IN"
    assert cfg.model_warmup[0].inputs["INPUT"].zero_data
    assert cfg.batch_input[0].target_name == ["INDEX"]
    assert cfg.optimization.input_pinned_memory.enable
    assert cfg.HasField("response_cache")


def test_write_config_round_trips_and_leaves_no_temp_files_when_written(tmp_path: Path) -> None:
    cfg = read_config(GOLDEN[0])
    out = write_config(cfg, tmp_path / "m" / "config.pbtxt")
    assert read_config(out) == cfg
    assert [p.name for p in out.parent.iterdir()] == ["config.pbtxt"]


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ('name: "x"\nmax_batch_size: 8\ninput {\n  name: "a"\n  dims: [1, \n', 6),
        ('name: "x"\nbogus_field: 3\n', 2),
        ('name: "x"\ninput {\n  name: "a"\n  data_type: TYPE_NOPE\n}\n', 4),
        ("\x00\x01garbage{{{", 1),
        ('name: "x"\ninput {\n  name: "a"\n', 3),
    ],
    ids=["truncated-list", "unknown-field", "bad-enum", "binary-garbage", "unclosed-brace"],
)
def test_parse_config_raises_with_file_and_line_when_text_is_broken(text: str, line: int) -> None:
    with pytest.raises(ConfigParseError) as info:
        parse_config(text, source="m/config.pbtxt")
    assert info.value.file == "m/config.pbtxt"
    assert info.value.line == line
    assert "m/config.pbtxt" in str(info.value)


def test_read_config_raises_config_parse_error_when_file_is_missing(tmp_path: Path) -> None:
    with pytest.raises(ConfigParseError, match="does not exist"):
        read_config(tmp_path / "config.pbtxt")


def test_read_config_raises_with_line_when_file_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "config.pbtxt"
    path.write_bytes(b'name: "x"\n\xff\xfe\n')
    with pytest.raises(ConfigParseError) as info:
        read_config(path)
    assert info.value.line == 2


def test_locate_fields_finds_lines_when_paths_are_nested() -> None:
    text = (GOLDEN[0].parent / "ensemble.pbtxt").read_text()
    loc = locate_fields(text)
    lines = text.splitlines()
    step1 = loc.line("ensemble_scheduling.step[1]")
    assert step1 is not None and "step {" in lines[step1 - 1]
    qline = loc.line("ensemble_scheduling.step[1].input_map[QUERY]")
    assert qline is not None and lines[qline - 1].strip() == "input_map {"
    assert lines[qline].strip() == 'key: "QUERY"'
    name_line = loc.line("input[1].name")
    assert name_line is not None and "TEXT_QUERY" in lines[name_line - 1]
    # an unknown child falls back to the nearest located parent
    assert loc.line("input[1].nothing_here") == loc.line("input[1]")
    assert loc.line("not_there") is None


def test_locate_fields_keeps_partial_result_when_text_is_truncated() -> None:
    loc = locate_fields('name: "x"\ninput {\n  name: "a"\n  dims: [1,')
    assert loc.line("input[0].name") == 3
    assert loc.line("name") == 1


def test_model_config_spec_builds_expected_proto_when_typed_helpers_are_used() -> None:
    spec = ModelConfigSpec(
        name="m",
        backend="python",
        max_batch_size=8,
        inputs=(TensorSpec(name="A", data_type=DataType.parse("TYPE_FP32"), dims=(3, -1), optional=True),),
        outputs=(TensorSpec(name="B", data_type=DataType.parse("bytes"), dims=(1,), label_filename="l.txt"),),
        dynamic_batching=DynamicBatching(
            preferred_batch_size=(4, 8),
            max_queue_delay_microseconds=100,
            priority_levels=2,
            default_priority_level=1,
            default_queue_policy=QueuePolicy(
                timeout_action=TimeoutAction.DELAY, default_timeout_microseconds=5
            ),
            priority_queue_policy={2: QueuePolicy(max_queue_size=3)},
        ),
        instance_groups=(InstanceGroup(kind=InstanceKind.KIND_CPU, count=2),),
        version_policy=VersionPolicy(specific=(1, 2)),
        parameters={"k": "v"},
        extra={"response_cache": {"enable": True}},
    )
    cfg = spec.to_proto()
    assert cfg.input[0].data_type == DataType.FP32.proto_value and cfg.input[0].optional
    assert cfg.output[0].data_type == DataType.BYTES.proto_value
    assert cfg.output[0].label_filename == "l.txt"
    assert list(cfg.dynamic_batching.preferred_batch_size) == [4, 8]
    assert cfg.dynamic_batching.priority_queue_policy[2].max_queue_size == 3
    assert cfg.dynamic_batching.default_queue_policy.default_timeout_microseconds == 5
    assert list(cfg.version_policy.specific.versions) == [1, 2]
    assert cfg.parameters["k"].string_value == "v"
    assert cfg.response_cache.enable
    assert parse_config(dumps_config(cfg)) == cfg


def test_model_config_spec_writes_ensemble_steps_when_steps_are_given() -> None:
    cfg = ModelConfigSpec(
        name="e",
        platform="ensemble",
        ensemble_steps=(EnsembleStep(model_name="x", input_map={"a": "b"}, output_map={"c": "d"}),),
    ).to_proto()
    step = cfg.ensemble_scheduling.step[0]
    assert (step.model_name, step.model_version, step.input_map["a"], step.output_map["c"]) == (
        "x",
        -1,
        "b",
        "d",
    )


# ---- property test: generated configs survive dump -> load unchanged -------------------------

_names = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=0x2FF), min_size=1, max_size=12)
_dims = st.lists(st.one_of(st.just(-1), st.integers(min_value=1, max_value=4096)), min_size=1, max_size=4)
_tensor = st.builds(
    lambda name, dtype, dims, optional: TensorSpec(
        name=name, data_type=dtype, dims=tuple(dims), optional=optional
    ),
    _names,
    st.sampled_from(list(DataType)),
    _dims,
    st.booleans(),
)
_batching = st.one_of(
    st.none(),
    st.builds(
        lambda sizes, delay, order: DynamicBatching(
            preferred_batch_size=tuple(sizes), max_queue_delay_microseconds=delay, preserve_ordering=order
        ),
        st.lists(st.integers(min_value=1, max_value=64), max_size=3),
        st.integers(min_value=0, max_value=10**9),
        st.booleans(),
    ),
)


@settings(max_examples=60, deadline=None)
@given(
    name=_names,
    backend=st.sampled_from(["python", "onnxruntime", "my_custom"]),
    mbs=st.integers(min_value=0, max_value=1024),
    inputs=st.lists(_tensor, max_size=3),
    outputs=st.lists(_tensor, max_size=3),
    batching=_batching,
    groups=st.lists(
        st.builds(
            lambda k, c: InstanceGroup(kind=k, count=c),
            st.sampled_from(list(InstanceKind)),
            st.integers(min_value=1, max_value=8),
        ),
        max_size=2,
    ),
    params=st.dictionaries(_names, st.text(max_size=20), max_size=3),
)
def test_generated_config_survives_dump_then_load_unchanged(
    name: str,
    backend: str,
    mbs: int,
    inputs: list[TensorSpec],
    outputs: list[TensorSpec],
    batching: DynamicBatching | None,
    groups: list[InstanceGroup],
    params: dict[str, str],
) -> None:
    cfg = ModelConfigSpec(
        name=name,
        backend=backend,
        max_batch_size=mbs,
        inputs=tuple(inputs),
        outputs=tuple(outputs),
        dynamic_batching=batching,
        instance_groups=tuple(groups),
        parameters=params,
    ).to_proto()
    text = dumps_config(cfg)
    again = parse_config(text)
    assert again == cfg
    assert dumps_config(again) == text


def test_model_config_spec_sets_transaction_policy_only_when_decoupled() -> None:
    on = ModelConfigSpec(name="g", backend="python", decoupled=True).to_proto()
    off = ModelConfigSpec(name="g", backend="python").to_proto()
    assert on.model_transaction_policy.decoupled
    assert "model_transaction_policy" in dumps_config(on)
    assert not off.HasField("model_transaction_policy")
    assert parse_config(dumps_config(on)) == on
