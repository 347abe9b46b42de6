"""vLLM stage rules: each has a repository that fails it and one that passes (file and line)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.unit._vllm_helpers import vllm_spec, write_lora
from tritonkit.kinds.releases import VLLM_RELEASES
from tritonkit.kinds.vllm.engine_args import engine_arg_names
from tritonkit.repository import build_spec
from tritonkit.repository.validator import Problem, validate_repository

SAMPLE = Path(__file__).parent.parent / "fixtures" / "vllm" / "nvidia_sample"


def sample(tmp_path: Path) -> Path:
    """A copy of the NVIDIA-sample-shaped repository (vllm_model: hub id, KIND_MODEL)."""
    repo = tmp_path / "repo"
    shutil.copytree(SAMPLE, repo)
    return repo


def vllm_problems(
    repo: Path, *, target: str | None = None, severity: str | None = None, auto_complete: bool = True
) -> list[Problem]:
    report = validate_repository(repo, target=target, auto_complete=auto_complete)
    return [
        p
        for p in report.problems
        if p.code.startswith("vllm-") and (severity is None or p.severity == severity)
    ]


def codes(problems: list[Problem]) -> list[str]:
    return [p.code for p in problems]


def edit_json(path: Path, **changes: object) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data, indent=4) + "\n")


def built(tmp_path: Path, body: str = "") -> Path:
    repo = tmp_path / "built"
    build_spec(vllm_spec(tmp_path, body), repo)
    return repo


# --------------------------------------------------------------------- no false alarm


@pytest.mark.parametrize("release", [r for r in VLLM_RELEASES if r not in ("24.04", "24.11")])
def test_validate_passes_nvidia_sample_shape_when_target_is_any_vllm_release(
    tmp_path: Path, release: str
) -> None:
    report = validate_repository(sample(tmp_path), target=release)
    assert report.valid, [str(p) for p in report.problems]
    assert not [p for p in report.problems if p.severity == "warning"]


def test_validate_passes_older_sample_shape_when_target_vllm_still_knows_disable_log_requests(
    tmp_path: Path,
) -> None:
    repo = sample(tmp_path)
    edit_json(repo / "vllm_model" / "1" / "model.json", disable_log_requests=True, disable_log_stats=False)
    assert vllm_problems(repo, target="24.10", severity="error") == []


def test_validate_passes_built_repository_when_spec_is_valid(tmp_path: Path) -> None:
    write_lora(tmp_path / "adapters" / "a")
    repo = built(tmp_path, "engine: {enable_lora: true}\nlora: {a: adapters/a}\nadditional_outputs: all")
    report = validate_repository(repo)
    assert report.valid and not report.warnings, [str(p) for p in report.problems]


# --------------------------------------------------------------------- model.json


def test_validate_reports_missing_model_json_when_version_dir_lacks_it(tmp_path: Path) -> None:
    repo = sample(tmp_path)
    (repo / "vllm_model" / "1" / "model.json").unlink()
    [problem] = vllm_problems(repo, severity="error")
    assert problem.code == "vllm-model-json-missing" and problem.file.endswith("config.pbtxt")
    assert problem.line == 4  # backend: "vllm"


def test_validate_reports_json_error_line_when_model_json_is_broken(tmp_path: Path) -> None:
    repo = sample(tmp_path)
    (repo / "vllm_model" / "1" / "model.json").write_text('{\n  "model": "x",\n  "dtype": half\n}\n')
    [problem] = vllm_problems(repo, severity="error")
    assert (problem.code, problem.line) == ("vllm-model-json-invalid", 3)
    assert problem.file.endswith("vllm_model/1/model.json")


def test_validate_reports_model_json_when_it_is_not_an_object(tmp_path: Path) -> None:
    repo = sample(tmp_path)
    (repo / "vllm_model" / "1" / "model.json").write_text('["facebook/opt-125m"]\n')
    assert codes(vllm_problems(repo, severity="error")) == ["vllm-model-json-invalid"]


# --------------------------------------------------------------------- engine arguments


def test_validate_reports_engine_arg_with_line_when_target_vllm_does_not_know_it(tmp_path: Path) -> None:
    repo = sample(tmp_path)
    path = repo / "vllm_model" / "1" / "model.json"
    path.write_text('{\n  "model": "facebook/opt-125m",\n  "disable_log_requests": true\n}\n')
    [problem] = vllm_problems(repo, target="25.10", severity="error")  # vLLM 0.10.2
    assert (problem.code, problem.line) == ("vllm-engine-arg-unknown", 3)
    assert "0.10.2" in problem.message and "0.9.2" in problem.message  # where it is still known


def test_validate_suggests_name_when_engine_arg_is_misspelt(tmp_path: Path) -> None:
    repo = sample(tmp_path)
    edit_json(repo / "vllm_model" / "1" / "model.json", gpu_memory_utilisation=0.5)
    [problem] = vllm_problems(repo, target="24.10", severity="error")
    assert "did you mean 'gpu_memory_utilization'" in problem.message


def test_validate_warns_only_on_names_no_vllm_knows_when_target_is_unknown(tmp_path: Path) -> None:
    repo = sample(tmp_path)
    edit_json(repo / "vllm_model" / "1" / "model.json", disable_log_requests=True, max_modle_len=5)
    problems = vllm_problems(repo)
    assert codes(problems) == ["vllm-version-unknown", "vllm-engine-arg-unknown"]
    assert [p.severity for p in problems] == ["info", "warning"]
    assert "max_modle_len" in problems[1].message


def test_validate_says_version_unrecorded_without_alarm_when_release_ships_unrecorded_vllm(
    tmp_path: Path,
) -> None:
    repo = sample(tmp_path)
    edit_json(repo / "vllm_model" / "1" / "model.json", disable_log_requests=True)
    problems = vllm_problems(repo, target="25.06")  # NVIDIA's 0.9.0rc1 build, not on PyPI
    assert codes(problems) == ["vllm-version-unknown"]
    assert "0.9.0rc1" in problems[0].message


def test_engine_arg_names_cover_every_release_but_the_unpublished_build() -> None:
    recorded = engine_arg_names()
    missing = {r.vllm for r in VLLM_RELEASES.values()} - set(recorded)
    assert missing == {"0.9.0rc1"}
    assert {"model", "enable_lora", "tensor_parallel_size"} <= recorded["0.5.5"].names
    assert "kv_cache_memory_bytes" in recorded["0.27.1"].names


# --------------------------------------------------------------------- model directory


@pytest.mark.parametrize(
    ("remove", "code"),
    [
        ("config.json", "vllm-model-dir-incomplete"),
        ("tokenizer.json tokenizer_config.json", "vllm-model-dir-incomplete"),
        ("", "vllm-model-dir-missing"),
    ],
)
def test_validate_reports_packed_model_dir_when_files_are_missing(
    tmp_path: Path, remove: str, code: str
) -> None:
    repo = built(tmp_path)
    packed = repo / "decoder" / "1" / "hf_model"
    if remove:
        for name in remove.split():
            (packed / name).unlink()
    else:
        shutil.rmtree(packed)
    [problem] = vllm_problems(repo, severity="error")
    assert (problem.code, problem.line) == (code, 2)
    assert problem.file.endswith("decoder/1/model.json")


def test_validate_reports_relative_model_path_when_it_names_a_dir_of_the_version(tmp_path: Path) -> None:
    repo = built(tmp_path)
    edit_json(repo / "decoder" / "1" / "model.json", model="./hf_model")
    assert codes(vllm_problems(repo, severity="error")) == ["vllm-model-path-relative"]


def test_validate_says_model_outside_repository_is_not_checked(tmp_path: Path) -> None:
    repo = sample(tmp_path)
    edit_json(repo / "vllm_model" / "1" / "model.json", model="/weights/llama")
    assert codes(vllm_problems(repo, target="24.10")) == ["vllm-model-outside"]


# --------------------------------------------------------------------- placeholders


def test_validate_reports_placeholder_line_when_config_holds_unfilled_template(tmp_path: Path) -> None:
    repo = sample(tmp_path)
    cfg = repo / "vllm_model" / "config.pbtxt"
    cfg.write_text(
        cfg.read_text() + 'parameters { key: "GPU_DEVICE_IDS" value { string_value: "${gpus}" } }\n'
    )
    [problem] = vllm_problems(repo, severity="error")
    assert problem.code == "vllm-placeholder" and problem.line == len(cfg.read_text().splitlines())


def test_validate_reports_placeholder_line_when_model_json_holds_unfilled_template(tmp_path: Path) -> None:
    repo = sample(tmp_path)
    (repo / "vllm_model" / "1" / "model.json").write_text(
        '{\n  "model": "facebook/opt-125m",\n  "tensor_parallel_size": "${tp}"\n}\n'
    )
    [problem] = vllm_problems(repo, severity="error")
    assert (problem.code, problem.line) == ("vllm-placeholder", 3)


# --------------------------------------------------------------------- config


def test_validate_reports_not_decoupled_when_policy_is_off(tmp_path: Path) -> None:
    """Refused only with --disable-auto-complete-config: by default the backend's auto-complete
    makes the model decoupled (issue 32; tests/unit/test_validator_autocomplete.py)."""
    repo = sample(tmp_path)
    cfg = repo / "vllm_model" / "config.pbtxt"
    cfg.write_text(cfg.read_text().replace("decoupled: True", "decoupled: False"))
    [problem] = vllm_problems(repo, severity="error", auto_complete=False)
    assert problem.code == "vllm-not-decoupled" and problem.line == 7
    assert vllm_problems(repo, severity="error") == []


def test_validate_reports_kind_gpu_when_engine_spans_several_gpus(tmp_path: Path) -> None:
    repo = sample(tmp_path)
    edit_json(repo / "vllm_model" / "1" / "model.json", tensor_parallel_size=2)
    cfg = repo / "vllm_model" / "config.pbtxt"
    assert vllm_problems(repo, target="24.10", severity="error") == []  # KIND_MODEL: fine
    cfg.write_text(cfg.read_text().replace("KIND_MODEL", "KIND_GPU"))
    [problem] = vllm_problems(repo, target="24.10", severity="error")
    assert problem.code == "vllm-multi-gpu-kind-gpu" and problem.line == 41


def test_validate_reports_auto_kind_when_engine_spans_several_gpus(tmp_path: Path) -> None:
    repo = sample(tmp_path)
    cfg = repo / "vllm_model" / "config.pbtxt"
    cfg.write_text(cfg.read_text().replace("KIND_MODEL", "KIND_AUTO"))
    assert vllm_problems(repo, target="24.10", severity="error") == []  # one GPU: loads
    assert codes(vllm_problems(repo, target="24.10", severity="info")) == ["vllm-instance-kind"]
    edit_json(repo / "vllm_model" / "1" / "model.json", pipeline_parallel_size=2)
    assert codes(vllm_problems(repo, target="24.10", severity="error")) == ["vllm-instance-kind"]


def test_validate_says_kind_cpu_does_not_keep_vllm_off_the_gpu(tmp_path: Path) -> None:
    repo = sample(tmp_path)
    cfg = repo / "vllm_model" / "config.pbtxt"
    cfg.write_text(cfg.read_text().replace("KIND_MODEL", "KIND_CPU"))
    assert codes(vllm_problems(repo, target="24.10")) == ["vllm-kind-cpu"]
    assert validate_repository(repo, target="24.10").valid


# --------------------------------------------------------------------- LoRA


def lora_repo(tmp_path: Path) -> Path:
    write_lora(tmp_path / "adapters" / "a")
    return built(tmp_path, "engine: {enable_lora: true}\nlora: {a: adapters/a}")


def test_validate_reports_lora_name_with_line_when_adapter_dir_is_gone(tmp_path: Path) -> None:
    repo = lora_repo(tmp_path)
    shutil.rmtree(repo / "decoder" / "1" / "lora" / "a")
    [problem] = vllm_problems(repo, severity="error")
    assert (problem.code, problem.line) == ("vllm-lora-missing", 2)
    assert problem.file.endswith("decoder/1/multi_lora.json") and "'a'" in problem.message


def test_validate_reports_missing_multi_lora_when_enable_lora_is_on(tmp_path: Path) -> None:
    repo = lora_repo(tmp_path)
    (repo / "decoder" / "1" / "multi_lora.json").unlink()
    [problem] = vllm_problems(repo, severity="error")
    assert (problem.code, problem.line) == ("vllm-lora-file-missing", 3)


def test_validate_warns_multi_lora_is_ignored_when_enable_lora_is_off(tmp_path: Path) -> None:
    repo = lora_repo(tmp_path)
    edit_json(repo / "decoder" / "1" / "model.json", enable_lora="false")
    assert codes(vllm_problems(repo)) == ["vllm-version-unknown", "vllm-lora-disabled"]


def test_validate_reports_json_error_line_when_multi_lora_is_broken(tmp_path: Path) -> None:
    repo = lora_repo(tmp_path)
    (repo / "decoder" / "1" / "multi_lora.json").write_text('{\n  "a": /models/decoder\n}\n')
    [problem] = vllm_problems(repo, severity="error")
    assert (problem.code, problem.line) == ("vllm-lora-invalid", 2)


def test_validate_reports_version_dir_problems_once_when_vllm_stage_has_variants(tmp_path: Path) -> None:
    repo = built(tmp_path, "variants: {cpu: {instance_group: [{kind: KIND_CPU, count: 1}]}}")
    (repo / "decoder" / "1" / "hf_model" / "config.json").unlink()
    problems = vllm_problems(repo)
    assert codes(problems).count("vllm-model-dir-incomplete") == 1
    assert [p.file.rsplit("/", 2)[-2:] for p in problems if p.code == "vllm-kind-cpu"] == [
        ["configs", "cpu.pbtxt"]
    ]


# ------------------------------------------------- STRUCTURED_OUTPUTS_CONFIG (local backend)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("[1]", "must be a JSON object"),
        ("{not json", "must be a JSON object"),
        ('{"backend": "xgrammar", "whitespace": false}', "unknown key(s) whitespace"),
        ('{"disable_any_whitespace": true}', "needs backend xgrammar or guidance"),
    ],
    ids=["not-an-object", "not-json", "unknown-key", "whitespace-without-backend"],
)
def test_validate_refuses_a_structured_outputs_config_parameter_the_engine_would_refuse(
    tmp_path: Path, value: str, words: str
) -> None:
    repo = built(tmp_path, f"parameters: {{STRUCTURED_OUTPUTS_CONFIG: '{value}'}}")
    problems = vllm_problems(repo, target="25.11")
    (problem,) = [p for p in problems if p.code == "vllm-structured-outputs-config"]
    assert problem.severity == "error" and words in problem.message and problem.line is not None


@pytest.mark.parametrize(("release", "warned"), [("24.10", True), ("25.10", True), ("25.11", False)])
def test_validate_warns_where_the_target_releases_vllm_takes_no_structured_outputs(
    tmp_path: Path, release: str, warned: bool
) -> None:
    good = '{"backend": "xgrammar", "disable_any_whitespace": true}'
    repo = built(tmp_path, f"parameters: {{STRUCTURED_OUTPUTS_CONFIG: '{good}'}}")
    problems = vllm_problems(repo, target=release)
    assert not [p for p in problems if p.severity == "error"], [str(p) for p in problems]
    warnings = [p for p in problems if p.code == "vllm-structured-outputs-release"]
    assert bool(warnings) is warned, [str(p) for p in problems]
    if warned:
        assert VLLM_RELEASES[release].vllm in warnings[0].message and "response_format" in warnings[0].message


def test_the_local_backend_and_the_validator_name_the_same_structured_outputs_parameter() -> None:
    from tritonkit.kinds.vllm.spec import STRUCTURED_OUTPUTS_PARAMETER

    source = (Path(__file__).parents[2] / "tritonkit/triton_side/backends/vllm/engine_config.py").read_text()
    assert f'STRUCTURED_OUTPUTS_PARAMETER = "{STRUCTURED_OUTPUTS_PARAMETER}"' in source
