"""The example pipelines run in-process, stage by stage, without Triton.

Loads the same Python model files the repository ships (by path: they are self-contained) and
runs the same generated ONNX models with onnxruntime, in the order the ensembles wire them.
Tests compare a real server's answers with these; it is also handy for debugging a stage.
"""

from __future__ import annotations

import importlib.util
import sys
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
SAMPLE_IMAGE = HERE / "assets" / "sample.png"


@cache
def load_stage(relative: str) -> Any:
    """Import one of the pipelines' source files (e.g. 'vlm/vlm_model.py') as a module."""
    path = HERE / relative
    # Triton imports a stage's sibling files (the spec's `files:`) from its model directory; here
    # the shared ones live in common/.
    if str(HERE / "common") not in sys.path:
        sys.path.insert(0, str(HERE / "common"))
    name = "tritonkit_example_" + relative.replace("/", "_").removesuffix(".py")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


@cache
def _session(generator: str) -> Any:
    import onnxruntime as ort

    model = getattr(load_stage("onnx_models.py"), generator)()
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def run_onnx(generator: str, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Run the ONNX model that ``onnx_models.<generator>()`` builds."""
    return list(_session(generator).run(None, feeds))


def sample_bytes() -> np.ndarray:
    """The shipped sample image as the UINT8 tensor the ensembles take."""
    return np.frombuffer(SAMPLE_IMAGE.read_bytes(), dtype=np.uint8)


def densenet(pixels: np.ndarray) -> np.ndarray:
    """densenet_onnx: FP32 [N, 3, 224, 224] -> logits [N, 1000]."""
    return run_onnx("make_densenet", {"data_0": pixels.astype(np.float32)})[0]


def vlm(raw: np.ndarray, query: str) -> str:
    """vlm_ensemble: image_preprocessor -> vision_encoder -> vlm_model."""
    pixels = load_stage("vlm/image_preprocessor.py").preprocess(raw)
    colours, detail = run_onnx("make_vision_encoder", {"PIXELS": pixels})
    head = load_stage("vlm/vlm_model.py")
    return str(head.answer(head.decode_query(query), colours, detail))


def arr_coc(raw: np.ndarray, query: str) -> dict[str, Any]:
    """arr_coc: texture_array + query_encoder -> three scorers -> opponent_processor -> decoder."""
    texture = load_stage("arr_coc/texture_array.py").texture_array(raw)
    embedding = load_stage("arr_coc/query_encoder.py").encode_query(query)[None]
    propositional = run_onnx("make_propositional_scorer", {"TEXTURE": texture})[0]
    perspectival = run_onnx("make_perspectival_scorer", {"TEXTURE": texture})[0]
    participatory = run_onnx(
        "make_participatory_scorer", {"TEXTURE": texture, "QUERY_EMBEDDING": embedding}
    )[0]
    relevance, tokens, weights = load_stage("arr_coc/opponent_processor.py").balance(
        propositional, perspectival, participatory
    )
    decoder = load_stage("arr_coc/decoder.py")
    text = decoder.decode(decoder.decode_query(query), relevance, tokens, weights, texture)
    return {
        "GENERATED_TEXT": text,
        "RELEVANCE_MAP": relevance,
        "TOKEN_BUDGET": tokens,
        "PROPOSITIONAL": propositional,
        "PERSPECTIVAL": perspectival,
        "PARTICIPATORY": participatory,
        "BALANCE": weights,
    }
