"""tritonkit.tune.stages: a pipeline's working stages, the search space (bottleneck first), the words."""

from __future__ import annotations

from pathlib import Path

from tritonkit.config import ModelConfig, read_config
from tritonkit.tune.stages import pipeline_of, pipeline_space, stage_lines


def configs_of(repo: Path) -> dict[str, ModelConfig]:
    return {p.name: read_config(p / "config.pbtxt") for p in repo.iterdir() if (p / "config.pbtxt").is_file()}


def test_pipeline_of_an_ensemble_tunes_its_steps_not_the_ensemble(streaming_example_repository: Path) -> None:
    cfgs = configs_of(streaming_example_repository)
    pipe = pipeline_of("arr_coc", cfgs.get, streaming_example_repository)
    assert pipe.is_pipeline and pipe.bls_callees == ()
    assert pipe.working[0] == "arr_coc_request_check" and "texture_array" in pipe.working
    assert "arr_coc" not in pipe.working and all(cfgs[m].platform != "ensemble" for m in pipe.working)


def test_pipeline_of_a_bls_front_tunes_the_front_and_its_callees_steps(
    streaming_example_repository: Path,
) -> None:
    cfgs = configs_of(streaming_example_repository)
    pipe = pipeline_of("vlm_stream", cfgs.get, streaming_example_repository)
    assert pipe.bls_callees == ("vlm_features",)
    assert pipe.reached == ("vlm_features", "image_preprocessor", "vision_encoder")
    assert pipe.working == ("vlm_stream", "image_preprocessor", "vision_encoder")
    # without the repository's source the BLS call is unknown: a single model, not a pipeline
    assert not pipeline_of("vlm_stream", cfgs.get, None).is_pipeline


def test_pipeline_of_a_plain_model_is_not_a_pipeline(streaming_example_repository: Path) -> None:
    cfgs = configs_of(streaming_example_repository)
    assert not pipeline_of("texture_array", cfgs.get, streaming_example_repository).is_pipeline


def test_pipeline_space_lists_the_bottleneck_stage_knobs_first(streaming_example_repository: Path) -> None:
    cfgs = configs_of(streaming_example_repository)
    working = pipeline_of("arr_coc", cfgs.get, streaming_example_repository).working
    space = pipeline_space("arr_coc", cfgs, working, first="texture_array", cores=4)
    assert space.target == "arr_coc"
    assert space.dimensions[0].model == "texture_array" and space.dimensions[0].name == "instance_count"
    assert {d.model for d in space.dimensions} == set(working)
    plain = pipeline_space("arr_coc", cfgs, working, first=None, cores=4)
    assert plain.dimensions[0].model == working[0]


def test_stage_lines_say_the_bottleneck_before_and_the_stage_that_bound_the_result() -> None:
    def profile(model: str, us: float) -> dict[str, object]:
        return {
            "level": 4.0,
            "bottleneck": model,
            "stages": [{"model": model, "per_pipeline_request_us": us}],
        }

    lines = stage_lines(
        {
            "working": ["a", "b"],
            "before": profile("a", 50_000.0),
            "after": profile("b", 20_000.0),
            "bound_by": "b",
        }
    )
    assert lines[0] == "pipeline stages tuned: a, b"
    assert "stage 'a' takes the most time (50.00 ms per pipeline request) at load 4" in lines[1]
    assert "bound by stage 'b' (20.00 ms per pipeline request at load 4)" in lines[2]
    assert stage_lines({}) == []
