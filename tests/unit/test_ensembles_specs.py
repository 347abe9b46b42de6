"""The example specs (ensembles/*.yaml) build into the repository the pipelines promise.

Production configs target GPUs (TensorRT for the ONNX image models), every model has a CPU
variant, the Python model files ship without tritonkit, and the committed assets are what
their generators make. Also densenet_onnx's stand-in classifier, run with onnxruntime.
"""

from __future__ import annotations

import ast
import io
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from tests._examples import load_example
from tritonkit.config import config_to_dict, read_config
from tritonkit.repository import build_spec, load_spec

ROOT = Path(__file__).resolve().parents[2]
ENSEMBLES = ROOT / "ensembles"
SPECS = ("densenet.yaml", "vlm.yaml", "arr_coc.yaml", "vlm_stream.yaml", "arr_coc_stream.yaml")
ENSEMBLE_MODELS = {"vlm_ensemble", "arr_coc", "vlm_stream", "arr_coc_stream"}
#: streaming pipeline -> (its unary twin, the decoupled decoder it ends in, the unary decoder)
STREAMING = {
    "vlm_stream": ("vlm_ensemble", "vlm_model_stream", "vlm_model"),
    "arr_coc_stream": ("arr_coc", "arr_coc_decoder_stream", "arr_coc_decoder"),
}
TENSORRT_MODELS = {"densenet_onnx", "vision_encoder"}
SCORERS = {"propositional_scorer", "perspectival_scorer", "participatory_scorer"}
ALLOWED_IMPORTS = {"numpy", "PIL", "triton_python_backend_utils", "__future__"}


reference = load_example("ensembles/reference.py")


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("specs") / "model_repository"
    for spec in SPECS:
        build_spec(ENSEMBLES / spec, out)
    return out


def _config(repository: Path, model: str, variant: str | None = None) -> dict[str, Any]:
    path = repository / model / ("config.pbtxt" if variant is None else f"configs/{variant}.pbtxt")
    return dict(config_to_dict(read_config(path)))


def _models(repository: Path) -> list[str]:
    return sorted(p.name for p in repository.iterdir() if (p / "config.pbtxt").is_file())


def _accelerators(config: dict[str, Any]) -> list[str]:
    accelerators = config.get("optimization", {}).get("execution_accelerators", {})
    gpu = accelerators.get("gpu_execution_accelerator", [])
    return [a["name"] for a in gpu]


def test_specs_build_every_pipeline_model_when_built_into_one_repository(repository: Path) -> None:
    assert _models(repository) == sorted(
        {"densenet_onnx", "image_preprocessor", "vision_encoder", "vlm_model", "vlm_ensemble",
         "arr_coc_request_check", "texture_array", "query_encoder", *SCORERS, "opponent_processor",
         "arr_coc_decoder", "arr_coc", "vlm_model_stream", "vlm_stream", "arr_coc_decoder_stream",
         "arr_coc_stream"}
    )


def test_streaming_pipelines_mirror_their_unary_twins_with_a_decoupled_decoder_when_built(
    repository: Path,
) -> None:
    max_tokens = {"name": "MAX_TOKENS", "data_type": "TYPE_INT32", "dims": ["1"], "optional": True}
    for stream, (unary, decoder, unary_decoder) in STREAMING.items():
        streaming, twin = _config(repository, stream), _config(repository, unary)
        assert streaming["input"] == [*twin["input"], max_tokens], stream
        assert streaming["output"] == [o for o in twin["output"] if o["name"] == "GENERATED_TEXT"], stream
        steps = [s["model_name"] for s in streaming["ensemble_scheduling"]["step"]]
        assert steps == [decoder if s == unary_decoder else s for s in
                         (t["model_name"] for t in twin["ensemble_scheduling"]["step"])], stream
        assert steps[-1] == decoder and "model_transaction_policy" not in twin
        for variant in (None, "cpu"):
            config = _config(repository, decoder, variant)
            assert config["model_transaction_policy"] == {"decoupled": True}, (decoder, variant)
            assert config["input"] == [*_config(repository, unary_decoder)["input"], max_tokens]
            assert "model_transaction_policy" not in _config(repository, unary_decoder, variant)
        # one decoder source serves both variants
        source = (repository / decoder / "1" / "model.py").read_bytes()
        assert source == (repository / unary_decoder / "1" / "model.py").read_bytes()
        for shared in ("scene_names.py", "text_stream.py"):
            shipped = (repository / decoder / "1" / shared).read_bytes()
            assert shipped == (ENSEMBLES / "common" / shared).read_bytes()


def test_production_configs_target_gpus_when_model_is_onnx(repository: Path) -> None:
    for model in _models(repository):
        config = _config(repository, model)
        if config.get("platform") == "onnxruntime_onnx":
            assert {g["kind"] for g in config["instance_group"]} == {"KIND_GPU"}, model
            assert _accelerators(config) == (["tensorrt"] if model in TENSORRT_MODELS else []), model


def test_cpu_variants_use_only_cpu_instances_when_selected(repository: Path) -> None:
    for model in set(_models(repository)) - ENSEMBLE_MODELS:
        config = _config(repository, model, "cpu")
        assert config["instance_group"] and {g["kind"] for g in config["instance_group"]} == {"KIND_CPU"}
        assert _accelerators(config) == [], model
        production = _config(repository, model)
        assert config["input"] == production["input"] and config["output"] == production["output"]


def test_densenet_config_keeps_the_classic_contract_when_built(repository: Path) -> None:
    config = _config(repository, "densenet_onnx")
    assert config["input"] == [{"name": "data_0", "data_type": "TYPE_FP32", "dims": ["3", "224", "224"]}]
    assert config["output"][0]["dims"] == ["1000"] and config["output"][0]["label_filename"] == "labels.txt"
    assert config["max_batch_size"] >= 32
    assert config["dynamic_batching"]["preferred_batch_size"] == [8, 16, 32]
    assert len((repository / "densenet_onnx" / "labels.txt").read_text().splitlines()) == 1000


def test_scorers_batch_dynamically_and_python_stages_set_instance_counts(repository: Path) -> None:
    for model in SCORERS:
        config = _config(repository, model)
        assert config["max_batch_size"] > 0 and "dynamic_batching" in config, model
    for model in _models(repository):
        config = _config(repository, model)
        if config.get("backend") == "python":
            assert all(g["count"] >= 1 for g in config["instance_group"]), model
            assert _config(repository, model, "cpu")["instance_group"][0]["count"] == 1, model


def test_python_models_import_only_numpy_pillow_the_stdlib_and_their_shipped_files() -> None:
    for spec_name in SPECS:
        for entry in load_spec(ENSEMBLES / spec_name).models:
            if entry.kind.value != "python":
                continue
            assert entry.source is not None
            shipped = {f.stem for f in entry.files if f.suffix == ".py"}  # copied beside model.py
            for source in (entry.source, *(f for f in entry.files if f.suffix == ".py")):
                tree = ast.parse(source.read_text())
                for node in ast.walk(tree):
                    names = (
                        [a.name for a in node.names] if isinstance(node, ast.Import)
                        else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                    )
                    for name in names:
                        top = name.split(".")[0]
                        allowed = top in ALLOWED_IMPORTS or top in sys.stdlib_module_names or top in shipped
                        assert allowed, (source, name)


def test_generated_onnx_models_stay_small_when_built(repository: Path) -> None:
    sizes = {p.parent.parent.name: p.stat().st_size for p in repository.glob("*/1/model.onnx")}
    assert set(sizes) == {"densenet_onnx", "vision_encoder", *SCORERS}
    assert max(sizes.values()) < 1_000_000


def test_committed_labels_match_their_generator_when_regenerated() -> None:
    labels = reference.load_stage("onnx_models.py").densenet_labels()
    assert (ENSEMBLES / "densenet" / "labels.txt").read_text().splitlines() == labels
    assert len(set(labels)) == 1000


def test_committed_sample_image_matches_its_generator_when_redrawn() -> None:
    drawn = load_example("ensembles/assets/make_sample.py").draw_sample()
    committed = Image.open(ENSEMBLES / "assets" / "sample.png").convert("RGB")
    assert np.array_equal(np.asarray(drawn), np.asarray(committed))


def _solid_pixels(rgb: tuple[int, int, int]) -> np.ndarray:
    buffer = io.BytesIO()
    Image.new("RGB", (32, 32), rgb).save(buffer, format="PNG")
    raw = np.frombuffer(buffer.getvalue(), dtype=np.uint8)
    return np.asarray(reference.load_stage("vlm/image_preprocessor.py").preprocess(raw))


def test_densenet_standin_picks_the_nearest_colour_class_when_given_solid_images() -> None:
    pytest.importorskip("onnxruntime")
    models = reference.load_stage("onnx_models.py")
    labels = models.densenet_labels()
    batch = np.stack([_solid_pixels((240, 140, 10)), _solid_pixels((20, 30, 200))])
    logits = reference.densenet(batch)
    assert logits.shape == (2, 1000)
    top = [int(i) for i in np.argmax(logits, axis=1)]
    assert labels[top[0]] == "orange (r=0.95 g=0.55 b=0.05)"
    assert labels[top[1]] == "blue (r=0.05 g=0.15 b=0.75)"
    np.testing.assert_allclose(reference.densenet(batch[1:]), logits[1:], atol=1e-4)
