"""The repository builder: layout, ONNX auto-config, versions, ownership, atomicity."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
from onnx import TensorProto

from tests.unit._repo_helpers import identity_onnx, pipeline_spec, write_onnx, write_py_model
from tritonkit.config import DataType, read_config
from tritonkit.errors import ModelImportError, RepositoryError, SpecError
from tritonkit.repository import MANIFEST_NAME, build_onnx_model, build_spec, scan_repository


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under root with its bytes (what 'intact' means in these tests)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def leftovers(parent: Path) -> list[str]:
    return [p.name for p in parent.iterdir() if "tritonkit-" in p.name]


def write_spec(tmp: Path, body: str, name: str = "spec.yaml") -> Path:
    path = tmp / name
    path.write_text(textwrap.dedent(body))
    return path


def test_build_spec_writes_triton_layout_when_spec_is_valid(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    result = build_spec(pipeline_spec(tmp_path), repo)
    assert [m.name for m in result.models] == ["ident", "double", "relu", "pipe"]
    assert (repo / "ident" / "1" / "model.onnx").is_file()
    assert (repo / "ident" / "labels.txt").read_text().startswith("a")
    assert read_config(repo / "ident" / "config.pbtxt").output[0].label_filename == "labels.txt"
    assert read_config(repo / "ident" / "configs" / "cpu.pbtxt").instance_group[0].count == 2
    assert (repo / "double" / "1" / "model.py").is_file()
    assert (repo / "double" / "1" / "vocab.json").is_file()
    assert (repo / "pipe" / "1").is_dir() and not any((repo / "pipe" / "1").iterdir())
    pipe = read_config(repo / "pipe" / "config.pbtxt")
    assert [s.model_name for s in pipe.ensemble_scheduling.step] == ["relu", "double"]
    assert (repo / MANIFEST_NAME).is_file()
    assert leftovers(tmp_path) == []
    models = {m.name: m for m in scan_repository(repo)}
    assert models["pipe"].is_ensemble and models["ident"].versions == (1,)


def test_build_spec_reads_onnx_signature_when_generator_declares_no_tensors(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    build_spec(pipeline_spec(tmp_path), repo)
    cfg = read_config(repo / "relu" / "config.pbtxt")
    assert cfg.max_batch_size == 8  # dynamic leading dim 'n' became the batch dimension
    assert [(t.name, list(t.dims)) for t in cfg.input] == [("x", [4])]
    assert cfg.output[0].data_type == DataType.FP32.proto_value


@pytest.mark.parametrize(
    ("model_kwargs", "cli_mbs", "expected_mbs", "expected_dims"),
    [
        ({"batch": "batch", "width": 4}, None, 8, [4]),
        ({"batch": "batch", "width": "w"}, None, 8, [-1]),
        ({"batch": "batch", "width": 4}, 0, 0, [-1, 4]),
        ({"batch": "batch", "width": 4}, 32, 32, [4]),
        ({"batch": 2, "width": 4}, None, 0, [2, 4]),
    ],
    ids=["dynamic-batch", "other-symbolic-dim", "explicit-no-batching", "explicit-mbs", "fixed-leading-dim"],
)
def test_build_onnx_model_derives_batching_when_leading_dim_is_dynamic(
    tmp_path: Path,
    model_kwargs: dict[str, object],
    cli_mbs: int | None,
    expected_mbs: int,
    expected_dims: list[int],
) -> None:
    src = write_onnx(tmp_path / "m.onnx", identity_onnx(**model_kwargs))  # type: ignore[arg-type]
    build_onnx_model(src, tmp_path / "repo", name="m", max_batch_size=cli_mbs, dynamic_batching=True)
    cfg = read_config(tmp_path / "repo" / "m" / "config.pbtxt")
    assert cfg.max_batch_size == expected_mbs
    assert list(cfg.input[0].dims) == expected_dims
    assert cfg.HasField("dynamic_batching")


def test_build_onnx_model_maps_onnx_types_when_tensor_is_not_float(tmp_path: Path) -> None:
    src = write_onnx(tmp_path / "m.onnx", identity_onnx(elem=TensorProto.STRING))
    build_onnx_model(src, tmp_path / "repo", name="m")
    assert (
        read_config(tmp_path / "repo" / "m" / "config.pbtxt").input[0].data_type == DataType.BYTES.proto_value
    )


def test_build_onnx_model_refuses_batching_when_leading_dim_is_fixed(tmp_path: Path) -> None:
    src = write_onnx(tmp_path / "m.onnx", identity_onnx(batch=2))
    with pytest.raises(ModelImportError, match="cannot batch"):
        build_onnx_model(src, tmp_path / "repo", name="m", max_batch_size=4)
    assert not (tmp_path / "repo").exists()


def test_build_onnx_model_raises_naming_file_when_onnx_is_corrupt(tmp_path: Path) -> None:
    src = tmp_path / "broken.onnx"
    src.write_bytes(identity_onnx().SerializeToString()[:17])
    with pytest.raises(ModelImportError, match="broken.onnx"):
        build_onnx_model(src, tmp_path / "repo", name="m")
    assert not (tmp_path / "repo").exists()
    assert leftovers(tmp_path) == []


def test_build_spec_keeps_older_versions_when_a_new_version_is_added(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    build_spec(pipeline_spec(tmp_path, version=1), repo)
    build_spec(pipeline_spec(tmp_path, version=2), repo)
    assert (repo / "ident" / "1" / "model.onnx").is_file()
    assert (repo / "ident" / "2" / "model.onnx").is_file()
    assert scan_repository(repo)[1].versions == (1, 2)


def test_build_spec_succeeds_when_rebuilding_unchanged_spec(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    spec = pipeline_spec(tmp_path)
    build_spec(spec, repo)
    before = snapshot(repo)
    build_spec(spec, repo)
    assert snapshot(repo) == before


def test_build_spec_refuses_to_overwrite_version_when_files_differ_without_force(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    spec = pipeline_spec(tmp_path)
    build_spec(spec, repo)
    before = snapshot(repo)
    write_onnx(tmp_path / "src" / "ident.onnx", identity_onnx(name_in="x", name_out="y", batch="other_batch"))
    with pytest.raises(RepositoryError, match="version 1 of model 'ident' already exists") as info:
        build_spec(spec, repo)
    assert "--force" in str(info.value)
    assert snapshot(repo) == before
    assert leftovers(tmp_path) == []
    build_spec(spec, repo, force=True)
    assert (repo / "ident" / "1" / "model.onnx").read_bytes() == (
        tmp_path / "src" / "ident.onnx"
    ).read_bytes()


def test_build_spec_leaves_previous_repository_intact_when_a_generator_fails(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    spec = pipeline_spec(tmp_path)
    build_spec(spec, repo)
    before = snapshot(repo)
    (tmp_path / "src" / "gen.py").write_text("def make():\n    raise RuntimeError('out of disk')\n")
    with pytest.raises(ModelImportError, match="out of disk"):
        build_spec(spec, repo, force=True)
    assert snapshot(repo) == before
    assert leftovers(tmp_path) == []


def test_build_spec_rolls_back_when_rename_fails_during_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Simulates a crash mid-swap by failing the third os.rename (no real fault can be injected)."""
    repo = tmp_path / "repo"
    spec = pipeline_spec(tmp_path)
    build_spec(spec, repo)
    before = snapshot(repo)
    real_rename = os.rename
    calls = {"n": 0}

    def flaky(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        calls["n"] += 1
        if calls["n"] == 6:
            raise OSError(28, "No space left on device")
        real_rename(src, dst)

    monkeypatch.setattr("tritonkit.repository.builder.os.rename", flaky)
    with pytest.raises(RepositoryError, match="nothing was changed: No space left"):
        build_spec(spec, repo, force=True)
    monkeypatch.setattr("tritonkit.repository.builder.os.rename", real_rename)
    assert snapshot(repo) == before
    assert leftovers(tmp_path) == []


def test_build_spec_adds_models_side_by_side_when_specs_share_a_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    a = pipeline_spec(tmp_path / "a", name="a", prefix="a_")
    b = pipeline_spec(tmp_path / "b", name="b", prefix="b_")
    build_spec(a, repo)
    build_spec(b, repo)
    names = [m.name for m in scan_repository(repo)]
    assert names == sorted(
        ["a_ident", "a_double", "a_relu", "a_pipe", "b_ident", "b_double", "b_relu", "b_pipe"]
    )


def test_build_spec_replaces_only_its_own_models_when_spec_is_rebuilt(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    a = pipeline_spec(tmp_path / "a", name="a", prefix="a_")
    b = pipeline_spec(tmp_path / "b", name="b", prefix="b_")
    build_spec(a, repo)
    build_spec(b, repo)
    b_before = {k: v for k, v in snapshot(repo).items() if k.startswith("b_")}
    # spec a drops its ensemble and its relu model
    text = a.read_text()
    a.write_text(text[: text.index("  - name: a_relu")])
    result = build_spec(a, repo)
    assert sorted(result.removed) == ["a_pipe", "a_relu"]
    names = {m.name for m in scan_repository(repo)}
    assert names == {"a_ident", "a_double", "b_ident", "b_double", "b_relu", "b_pipe"}
    assert {k: v for k, v in snapshot(repo).items() if k.startswith("b_")} == b_before


def test_build_spec_refuses_model_of_another_spec_when_not_forced(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    build_spec(pipeline_spec(tmp_path / "a", name="a"), repo)
    other = pipeline_spec(tmp_path / "b", name="b")
    with pytest.raises(RepositoryError, match="belongs to spec 'a'"):
        build_spec(other, repo)
    build_spec(other, repo, force=True)
    manifest = (repo / MANIFEST_NAME).read_text()
    assert '"b"' in manifest and '"a"' not in manifest


def test_build_spec_refuses_hand_made_model_dir_when_not_forced(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "ident" / "1").mkdir(parents=True)
    with pytest.raises(RepositoryError, match="made by hand"):
        build_spec(pipeline_spec(tmp_path), repo)


@pytest.mark.parametrize("bad", ["../escape", "/abs/path", "a/b", "..", ".hidden"])
def test_build_spec_rejects_model_name_when_it_escapes_repository(tmp_path: Path, bad: str) -> None:
    write_py_model(tmp_path / "m.py")
    spec = write_spec(
        tmp_path,
        f"""
        name: s
        models:
          - name: "{bad}"
            source: m.py
            inputs: [{{name: A, data_type: FP32, dims: [1]}}]
            outputs: [{{name: B, data_type: FP32, dims: [1]}}]
        """,
    )
    with pytest.raises(SpecError, match="escape the repository"):
        build_spec(spec, tmp_path / "repo")
    assert not (tmp_path / "repo").exists()
    assert not (tmp_path / "escape").exists()


def test_build_spec_refuses_when_model_dir_is_a_symlink_out_of_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    outside = tmp_path / "outside"
    outside.mkdir()
    repo.mkdir()
    (repo / "ident").symlink_to(outside)
    with pytest.raises(RepositoryError, match="symbolic link"):
        build_spec(pipeline_spec(tmp_path), repo)


def test_build_spec_refuses_when_existing_version_links_out_of_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    build_spec(pipeline_spec(tmp_path), repo)
    secret = tmp_path / "secret.txt"
    secret.write_text("x")
    (repo / "ident" / "1" / "leak.txt").symlink_to(secret)
    with pytest.raises(RepositoryError, match="outside the repository"):
        build_spec(pipeline_spec(tmp_path, version=2), repo)


def test_build_spec_raises_spec_error_when_source_file_is_missing(tmp_path: Path) -> None:
    spec = write_spec(
        tmp_path,
        """
        name: s
        models:
          - name: m
            backend: python
            source: nope.py
            inputs: [{name: A, data_type: FP32, dims: [1]}]
            outputs: [{name: B, data_type: FP32, dims: [1]}]
        """,
    )
    with pytest.raises(SpecError, match="file not found: .*nope.py"):
        build_spec(spec, tmp_path / "repo")


def test_build_spec_raises_when_python_model_has_no_triton_class(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("x = 1\n")
    spec = write_spec(
        tmp_path,
        """
        name: s
        models:
          - name: m
            source: m.py
            inputs: [{name: A, data_type: FP32, dims: [1]}]
            outputs: [{name: B, data_type: FP32, dims: [1]}]
        """,
    )
    with pytest.raises(ModelImportError, match="TritonPythonModel"):
        build_spec(spec, tmp_path / "repo")
    (tmp_path / "m.py").write_text("class TritonPythonModel(:\n")
    with pytest.raises(ModelImportError, match=r"m.py:1: .*does not parse"):
        build_spec(spec, tmp_path / "repo")


def test_build_spec_requires_signature_when_python_model_declares_no_tensors(tmp_path: Path) -> None:
    write_py_model(tmp_path / "m.py")
    spec = write_spec(tmp_path, "name: s\nmodels:\n  - name: m\n    source: m.py\n")
    with pytest.raises(SpecError, match="needs its signature declared"):
        build_spec(spec, tmp_path / "repo")


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ("name: s\nmodels: [\n", "not valid YAML"),
        ("name: s\nmodels:\n  - name: m\n    sorce: m.py\n", "unknown key"),
        ("models:\n  - name: m\n", "missing 'name'"),
        ("name: s\nmodels:\n  - name: m\n    source: m.py\n    version: 0\n", "positive integer"),
        (
            "name: s\nmodels:\n  - name: m\n    source: m.py\n"
            "    inputs: [{name: A, data_type: FLOAT9, dims: [1]}]\n",
            "unknown data type",
        ),
        ("name: s\nmodels:\n  - name: e\n    platform: ensemble\n", "needs 'steps'"),
    ],
    ids=["yaml", "unknown-key", "no-name", "version", "dtype", "ensemble-steps"],
)
def test_build_spec_raises_spec_error_when_spec_is_malformed(tmp_path: Path, body: str, match: str) -> None:
    write_py_model(tmp_path / "m.py")
    spec = write_spec(tmp_path, body)
    with pytest.raises(SpecError, match=match) as info:
        build_spec(spec, tmp_path / "repo")
    assert "spec.yaml" in str(info.value)
    assert not (tmp_path / "repo").exists()


def test_build_spec_rejects_default_model_filename_when_it_escapes_version_dir(tmp_path: Path) -> None:
    write_py_model(tmp_path / "m.py")
    spec = write_spec(
        tmp_path,
        """
        name: s
        models:
          - name: m
            source: m.py
            default_model_filename: ../../evil.py
            inputs: [{name: A, data_type: FP32, dims: [1]}]
            outputs: [{name: B, data_type: FP32, dims: [1]}]
        """,
    )
    with pytest.raises(SpecError, match="default_model_filename"):
        build_spec(spec, tmp_path / "repo")
    assert not (tmp_path / "evil.py").exists()
    assert leftovers(tmp_path) == []


def test_build_spec_honours_default_model_filename_when_it_is_plain(tmp_path: Path) -> None:
    write_py_model(tmp_path / "m.py")
    spec = write_spec(
        tmp_path,
        """
        name: s
        models:
          - name: m
            source: m.py
            default_model_filename: entry.py
            inputs: [{name: A, data_type: FP32, dims: [1]}]
            outputs: [{name: B, data_type: FP32, dims: [1]}]
        """,
    )
    build_spec(spec, tmp_path / "repo")
    assert (tmp_path / "repo" / "m" / "1" / "entry.py").is_file()
    assert read_config(tmp_path / "repo" / "m" / "config.pbtxt").default_model_filename == "entry.py"


def test_build_spec_writes_into_link_target_when_output_is_a_symlinked_directory(tmp_path: Path) -> None:
    real = tmp_path / "disk" / "repo"
    real.mkdir(parents=True)
    (tmp_path / "repo").symlink_to(real)
    build_spec(pipeline_spec(tmp_path), tmp_path / "repo")
    assert (real / "ident" / "1" / "model.onnx").is_file()
    assert leftovers(tmp_path) == [] and leftovers(tmp_path / "disk") == []


def _decoupled_spec(tmp: Path, model_lines: str) -> Path:
    write_py_model(tmp / "m.py")
    body = (
        "name: s\nmodels:\n  - name: m\n    source: m.py\n"
        "    inputs: [{name: A, data_type: FP32, dims: [1]}]\n"
        "    outputs: [{name: B, data_type: FP32, dims: [1]}]\n"
    )
    return write_spec(tmp, body + textwrap.indent(textwrap.dedent(model_lines), "    "))


def test_build_spec_writes_transaction_policy_when_model_is_decoupled(tmp_path: Path) -> None:
    spec = _decoupled_spec(tmp_path, "decoupled: true\nvariants: {unary: {decoupled: false}}\n")
    build_spec(spec, tmp_path / "repo")
    text = (tmp_path / "repo" / "m" / "config.pbtxt").read_text()
    assert "model_transaction_policy {\n  decoupled: true\n}" in text
    assert read_config(tmp_path / "repo" / "m" / "config.pbtxt").model_transaction_policy.decoupled
    variant = read_config(tmp_path / "repo" / "m" / "configs" / "unary.pbtxt")
    assert not variant.HasField("model_transaction_policy")


def test_build_spec_accepts_extra_transaction_policy_when_it_agrees_with_decoupled(tmp_path: Path) -> None:
    agreeing = "decoupled: true\nextra: {model_transaction_policy: {decoupled: true}}\n"
    spec = _decoupled_spec(tmp_path, agreeing)
    build_spec(spec, tmp_path / "repo")
    assert read_config(tmp_path / "repo" / "m" / "config.pbtxt").model_transaction_policy.decoupled


@pytest.mark.parametrize(
    ("lines", "match"),
    [
        ("decoupled: yes please\n", r"decoupled must be true or false"),
        ("decoupled: false\nextra: {model_transaction_policy: {decoupled: true}}\n", "contradicts"),
        ("decouple: true\n", r"unknown key\(s\) decouple"),
    ],
    ids=["not-bool", "contradicts-extra", "misspelt"],
)
def test_build_spec_raises_spec_error_when_decoupled_is_wrong(tmp_path: Path, lines: str, match: str) -> None:
    spec = _decoupled_spec(tmp_path, lines)
    with pytest.raises(SpecError, match=match) as info:
        build_spec(spec, tmp_path / "repo")
    assert "spec.yaml" in str(info.value)
    assert not (tmp_path / "repo").exists()


def test_build_spec_marks_ensembles_decoupled_when_a_member_built_earlier_is(tmp_path: Path) -> None:
    """The member comes from an earlier build of another spec: it is read back from the repository."""
    stream = _decoupled_spec(tmp_path, "decoupled: true\n")
    repo = tmp_path / "repo"
    first = build_spec(stream, repo)
    assert [(m.name, m.decoupled) for m in first.models] == [("m", True)]
    assert any("'m' is decoupled" in note and "generate_stream" in note for note in first.notes)
    pipe = write_spec(
        tmp_path,
        """
        name: p
        models:
          - name: pipe
            platform: ensemble
            inputs: [{name: A, data_type: FP32, dims: [1]}]
            outputs: [{name: B, data_type: FP32, dims: [1]}]
            steps: [{model: m, inputs: {A: A}, outputs: {B: B}}]
          - name: lonely
            platform: ensemble
            decoupled: true
            inputs: [{name: A, data_type: FP32, dims: [1]}]
            outputs: [{name: B, data_type: FP32, dims: [1]}]
            steps: [{model: not_built, inputs: {A: A}, outputs: {B: B}}]
        """,
        name="pipe.yaml",
    )
    second = build_spec(pipe, repo)
    assert {m.name: m.decoupled for m in second.models} == {"pipe": True, "lonely": False}
    assert any("ensemble 'pipe' is decoupled because its step 'm' is" in n for n in second.notes)
    assert not any("lonely" in n for n in second.notes)  # its member is unknown: nothing to say


def test_build_spec_notes_the_refusal_to_come_when_two_streams_meet(tmp_path: Path) -> None:
    """build does not judge wiring (validate does) but says what Triton will do with it."""
    write_py_model(tmp_path / "m.py")
    spec = write_spec(
        tmp_path,
        """
        name: s
        models:
          - name: gen
            source: m.py
            decoupled: true
            inputs: [{name: A, data_type: FP32, dims: [1]}]
            outputs: [{name: B, data_type: FP32, dims: [1]}]
          - name: pipe
            platform: ensemble
            inputs: [{name: A, data_type: FP32, dims: [1]}]
            outputs: [{name: B, data_type: FP32, dims: [1]}, {name: C, data_type: FP32, dims: [1]}]
            steps:
              - {model: gen, inputs: {A: A}, outputs: {B: B}}
              - {model: gen, inputs: {A: A}, outputs: {B: C}}
        """,
    )
    result = build_spec(spec, tmp_path / "repo")
    assert any(
        "Triton will refuse ensemble 'pipe': step of model 'pipe' receives inputs originated" in note
        for note in result.notes
    )
    assert {m.name: m.decoupled for m in result.models} == {"gen": True, "pipe": False}
