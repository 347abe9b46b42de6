"""Engine-stage tuning: the search space, the file override, the per-load answer and the front."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tritonkit.errors import TuneError
from tritonkit.tune.engine import (
    EngineSpace,
    EngineTrial,
    EngineTuneResult,
    _EngineFiles,
    default_engine_space,
    engine_pareto,
)


def _trial(
    settings: dict[str, object], level: float, tok: float, ttft_ms: float, ok: bool = True
) -> EngineTrial:
    return EngineTrial(settings, level, tok, tok / 16, ttft_ms * 1000, 5000.0, ttft_ms * 3000, ok, False)


def _stage(tmp_path: Path) -> Path:
    version = tmp_path / "tiny_llm" / "1"
    (version / "hf_model").mkdir(parents=True)
    (version / "model.json").write_text(
        json.dumps({"model": "/models/tiny_llm/1/hf_model", "max_num_seqs": 8, "dtype": "float32"})
    )
    return tmp_path / "tiny_llm"


def test_the_candidate_model_json_points_at_the_local_hf_model_and_carries_the_knobs(tmp_path: Path) -> None:
    stage = _EngineFiles(_stage(tmp_path))
    files = stage.files({"max_num_seqs": 32, "enable_chunked_prefill": True, "instance_count": 2})
    assert list(files) == ["file:1/model.json"]
    args = json.loads(files["file:1/model.json"])
    assert args["model"] == str((tmp_path / "tiny_llm" / "1" / "hf_model").resolve())
    assert args["max_num_seqs"] == 32 and args["enable_chunked_prefill"] is True
    assert args["dtype"] == "float32" and "instance_count" not in args


def test_a_model_without_model_json_is_not_an_engine_stage(tmp_path: Path) -> None:
    (tmp_path / "m" / "1").mkdir(parents=True)
    with pytest.raises(TuneError, match="not a vLLM stage"):
        _EngineFiles(tmp_path / "m")


def test_the_default_space_keeps_the_stages_own_values_among_its_ladders() -> None:
    space = default_engine_space({"max_num_seqs": 8, "max_num_batched_tokens": 512}, max_model_len=256)
    assert 8 in space.knobs["max_num_seqs"] and 512 in space.knobs["max_num_batched_tokens"]
    assert space.knobs["enable_chunked_prefill"] == (False, True)
    assert space.knobs["instance_count"] == (1, 2)


def test_the_best_per_load_is_the_most_tokens_within_budget_and_the_gain_is_against_defaults() -> None:
    result = EngineTuneResult(
        model="m", mode="concurrency", levels=(4.0,), budget="ttft_p99=100ms", space=EngineSpace({})
    )
    result.trials += [
        _trial({}, 4.0, 100.0, 50),
        _trial({"max_num_seqs": 64}, 4.0, 180.0, 90),
        _trial({"max_num_seqs": 256}, 4.0, 250.0, 400, ok=False),  # faster but over the budget
    ]
    best = result.best(4.0)
    assert best is not None and best.settings == {"max_num_seqs": 64}
    assert result.gain(4.0) == pytest.approx(1.8)
    data = result.to_dict()
    assert data["per_level"][0]["gain"] == pytest.approx(1.8)
    assert [t["settings"] for t in data["per_level"][0]["pareto"]] == [
        {},
        {"max_num_seqs": 64},
        {"max_num_seqs": 256},
    ]


def test_the_pareto_front_drops_candidates_beaten_on_tokens_and_ttft() -> None:
    a, b, c = _trial({"x": 1}, 1, 100, 50), _trial({"x": 2}, 1, 90, 60), _trial({"x": 3}, 1, 150, 80)
    assert engine_pareto([a, b, c]) == [a, c]


def test_the_coordinate_search_tries_each_knob_from_the_best_so_far_within_the_cap() -> None:
    from tritonkit.tune.engine import _coordinate_search

    scores = {"defaults": 10.0, "a=1": 5.0, "a=2": 20.0, "a=2 b=1": 30.0, "a=2 b=2": 25.0}
    seen: list[str] = []
    tried: set[str] = set()

    def measure(settings: dict[str, object]) -> float:
        key = " ".join(f"{k}={v}" for k, v in sorted(settings.items())) or "defaults"
        seen.append(key)
        tried.add(key)
        return scores[key]

    best = _coordinate_search(
        EngineSpace({"a": (0, 1, 2), "b": (0, 1, 2)}), {"a": 0, "b": 0}, measure, tried, 10
    )
    assert best == {"a": 2, "b": 1}
    assert seen == ["defaults", "a=1", "a=2", "a=2 b=1", "a=2 b=2"]  # a=0, b=0: the defaults again
    tried.clear()
    seen.clear()
    _coordinate_search(EngineSpace({"a": (0, 1, 2), "b": (0, 1, 2)}), {"a": 0, "b": 0}, measure, tried, 2)
    assert seen == ["defaults", "a=1"]
