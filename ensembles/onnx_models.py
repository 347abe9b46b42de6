"""Generators for the example pipelines' ONNX models: small, deterministic stand-ins.

Each ``make_*`` function returns an ``onnx.ModelProto``; the pipeline specs name them as
``generator: onnx_models.py:make_...`` and ``tritonkit build`` writes the result to
``<model>/<version>/model.onnx``. Nothing is downloaded and nothing is trained: the weights are
chosen (or drawn from a fixed seed) so that every model computes something meaningful and
checkable, which is what a demo and an end-to-end test need. In production you swap in the real
model file (an ImageNet DenseNet, a CLIP/ViT image encoder, trained relevance scorers) by
pointing the spec's ``source`` at it, keeping the tensor names, data types and shapes.

Opset 17 / IR version 8 so that the onnxruntime inside older Triton containers loads them too.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8
IMAGE_SIZE = 224
#: ImageNet normalisation used by image_preprocessor (pixels = (rgb - MEAN) / STD).
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)

#: densenet_onnx: a nearest-colour classifier over a 10x10x10 RGB grid (1000 classes).
DENSENET_LEVELS = 10
DENSENET_SHARPNESS = 40.0

#: vision_encoder: a 16x16 grid of regions (14x14 pixels each).
VLM_GRID = 16

#: ARR-COC: 13 texture channels, 16x16-pixel patches -> a 14x14 patch grid.
TEXTURE_CHANNELS = 13
PATCH = 16
GRID = IMAGE_SIZE // PATCH
#: texture channel indices (see arr_coc/texture_array.py)
CH_L, CH_A, CH_B, CH_LUMA, CH_GRAD, CH_LOCAL_VAR = 3, 4, 5, 6, 9, 11
#: query embedding layout (see arr_coc/query_encoder.py): 13 channel weights, x and y
#: position weights, then hashed character trigrams.
QUERY_DIM = 64
QUERY_CONCEPT_DIM = TEXTURE_CHANNELS + 2
QUERY_NGRAM_PROJECTION_SCALE = 0.05
QUERY_SEED = 7
#: participatory = sigmoid(GAIN * (score / (1 + |w|) - THRESHOLD)): only patches that match the
#: query clearly better than the image's average light up, and a query without visual words
#: (|w| near 0) gives a flat, low map.
PARTICIPATORY_GAIN = 4.0
PARTICIPATORY_THRESHOLD = 1.0
#: position prior range: x and y grids span [-POSITION_SCALE, POSITION_SCALE], like z-scores
POSITION_SCALE = 2.0

_ENSEMBLES = Path(__file__).resolve().parent


class _Graph:
    """A small builder over onnx.helper: constants and single-output nodes with unique names."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._count = 0

    def _fresh(self, stem: str) -> str:
        self._count += 1
        return f"{stem}_{self._count}"

    def const(self, array: Any, *, dtype: Any = np.float32, name: str | None = None) -> str:
        tensor_name = name or self._fresh("const")
        self.initializers.append(numpy_helper.from_array(np.asarray(array, dtype=dtype), tensor_name))
        return tensor_name

    def op(self, op_type: str, inputs: Sequence[str], *, out: str | None = None, **attrs: Any) -> str:
        output = out or self._fresh(op_type.lower())
        node = helper.make_node(op_type, list(inputs), [output], name=self._fresh(op_type), **attrs)
        self.nodes.append(node)
        return output

    def model(
        self, inputs: Sequence[onnx.ValueInfoProto], outputs: Sequence[onnx.ValueInfoProto], doc: str
    ) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, self.name, list(inputs), list(outputs), self.initializers)
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", OPSET)],
            producer_name="tritonkit-examples",
            doc_string=doc,
        )
        model.ir_version = IR_VERSION
        onnx.checker.check_model(model)
        return model

    # -- composite helpers ------------------------------------------------------------------

    def pool(self, x: str, size: int) -> str:
        """Non-overlapping mean over size x size cells."""
        return self.op("AveragePool", [x], kernel_shape=[size, size], strides=[size, size])

    def channels(self, x: str, indices: Sequence[int]) -> str:
        """Select channels (axis 1)."""
        return self.op("Gather", [x, self.const(list(indices), dtype=np.int64)], axis=1)

    def scale(self, x: str, factor: float) -> str:
        return self.op("Mul", [x, self.const(factor)])

    def sum_channels(self, x: str) -> str:
        return self.op("ReduceSum", [x, self.const([1], dtype=np.int64)], keepdims=1)

    def normalise_by_max(self, x: str) -> str:
        """x / (max over each sample's map + eps): a map in [0, 1] per image."""
        peak = self.op("ReduceMax", [x], axes=[1, 2, 3], keepdims=1)
        return self.op("Div", [x, self.op("Add", [peak, self.const(1e-6)])])

    def to_grid(self, x: str, out: str) -> str:
        """[N, 1, G, G] -> [N, G, G]."""
        return self.op("Squeeze", [x, self.const([1], dtype=np.int64)], out=out)


def _load_module(relative: str) -> Any:
    """Import one of the self-contained model.py sources by path (they are not a package)."""
    path = _ENSEMBLES / relative
    spec = importlib.util.spec_from_file_location(f"_tritonkit_example_{path.stem}", path)
    if spec is None or spec.loader is None:  # pragma: no cover - the file ships with the repo
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


# -- densenet_onnx ----------------------------------------------------------------------------


def densenet_prototypes() -> np.ndarray:
    """The 1000 class prototypes: mean RGB colours on a 10x10x10 grid, r-major."""
    levels = (np.arange(DENSENET_LEVELS, dtype=np.float32) + 0.5) / DENSENET_LEVELS
    r, g, b = np.meshgrid(levels, levels, levels, indexing="ij")
    return np.stack([r.ravel(), g.ravel(), b.ravel()], axis=1).astype(np.float32)


def densenet_labels() -> list[str]:
    """One label per class, in class order: the prototype's colour name and its RGB values."""
    colour_name = _load_module("vlm/vlm_model.py").colour_name
    return [
        f"{colour_name(r, g, b)} (r={r:.2f} g={g:.2f} b={b:.2f})" for r, g, b in densenet_prototypes()
    ]


def make_densenet() -> onnx.ModelProto:
    """``densenet_onnx`` stand-in: classifies an image by its mean colour into 1000 classes.

    Same contract as Triton's classic densenet example: ``data_0`` FP32 [N, 3, 224, 224]
    (ImageNet-normalised) -> ``fc6_1`` FP32 [N, 1000] logits. A strided conv undoes the
    normalisation while pooling 4x4 cells, relu, global average pooling gives the mean colour,
    and a Gemm scores each class as -k * ||colour - prototype||^2 (up to a per-image constant),
    so the top class is the nearest colour on the grid.
    """
    g = _Graph("densenet_standin")
    weight = np.zeros((3, 3, 4, 4), dtype=np.float32)
    for c in range(3):
        weight[c, c] = STD[c] / 16.0
    x = g.op(
        "Conv",
        ["data_0", g.const(weight), g.const(np.array(MEAN, dtype=np.float32))],
        kernel_shape=[4, 4],
        strides=[4, 4],
    )
    x = g.op("Relu", [x])
    x = g.op("GlobalAveragePool", [x])
    x = g.op("Flatten", [x], axis=1)
    protos = densenet_prototypes()
    fc_weight = 2.0 * DENSENET_SHARPNESS * protos  # [1000, 3], used with transB
    fc_bias = -DENSENET_SHARPNESS * (protos**2).sum(axis=1)
    g.op("Gemm", [x, g.const(fc_weight), g.const(fc_bias)], out="fc6_1", transB=1)
    return g.model(
        [helper.make_tensor_value_info("data_0", TensorProto.FLOAT, ["N", 3, IMAGE_SIZE, IMAGE_SIZE])],
        [helper.make_tensor_value_info("fc6_1", TensorProto.FLOAT, ["N", 1000])],
        doc="Stand-in for DenseNet-121: nearest mean colour on a 10x10x10 RGB grid.",
    )


# -- VLM: vision_encoder ------------------------------------------------------------------------


def make_vision_encoder() -> onnx.ModelProto:
    """``vision_encoder``: PIXELS FP32 [3, 224, 224] -> per-region colour and detail features.

    Outputs ``REGION_COLOURS`` FP32 [3, 16, 16] (mean RGB in [0, 1] of each 14x14 region) and
    ``REGION_DETAIL`` FP32 [16, 16] (mean Sobel gradient magnitude of the luminance). The VLM
    text head (vlm_model) reads these; a production encoder emits an embedding instead and
    the text head becomes a real decoder.
    """
    g = _Graph("vision_encoder")
    x = g.op("Unsqueeze", ["PIXELS", g.const([0], dtype=np.int64)])
    std = np.array(STD, dtype=np.float32).reshape(1, 3, 1, 1)
    mean = np.array(MEAN, dtype=np.float32).reshape(1, 3, 1, 1)
    rgb = g.op("Add", [g.op("Mul", [x, g.const(std)]), g.const(mean)])
    cell = IMAGE_SIZE // VLM_GRID
    colours = g.pool(rgb, cell)
    g.op("Reshape", [colours, g.const([3, VLM_GRID, VLM_GRID], dtype=np.int64)], out="REGION_COLOURS")

    luma = g.op("Conv", [rgb, g.const(np.array([0.299, 0.587, 0.114], dtype=np.float32).reshape(1, 3, 1, 1))])
    sobel_x = np.array([[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]], dtype=np.float32) / 4.0
    sobel = np.stack([sobel_x, sobel_x.T])[:, None]  # [2, 1, 3, 3]
    grads = g.op("Conv", [luma, g.const(sobel)], pads=[1, 1, 1, 1])
    magnitude = g.op("Sqrt", [g.sum_channels(g.op("Mul", [grads, grads]))])
    detail = g.pool(magnitude, cell)
    g.op("Reshape", [detail, g.const([VLM_GRID, VLM_GRID], dtype=np.int64)], out="REGION_DETAIL")
    return g.model(
        [helper.make_tensor_value_info("PIXELS", TensorProto.FLOAT, [3, IMAGE_SIZE, IMAGE_SIZE])],
        [
            helper.make_tensor_value_info("REGION_COLOURS", TensorProto.FLOAT, [3, VLM_GRID, VLM_GRID]),
            helper.make_tensor_value_info("REGION_DETAIL", TensorProto.FLOAT, [VLM_GRID, VLM_GRID]),
        ],
        doc="Stand-in image encoder: region colours and edge energy on a 16x16 grid.",
    )


# -- ARR-COC relevance scorers ------------------------------------------------------------------


def _texture_input() -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(
        "TEXTURE", TensorProto.FLOAT, ["N", TEXTURE_CHANNELS, IMAGE_SIZE, IMAGE_SIZE]
    )


def _map_output(name: str) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, ["N", GRID, GRID])


def make_propositional_scorer() -> onnx.ModelProto:
    """``propositional_scorer`` (information content): TEXTURE -> PROPOSITIONAL [N, 14, 14].

    Per patch: 0.5 * mean gradient magnitude + 0.25 * sqrt(mean local variance)
    + 0.25 * luminance standard deviation within the patch, divided by the image's maximum.
    """
    g = _Graph("propositional_scorer")
    pooled = g.pool("TEXTURE", PATCH)
    grad = g.channels(pooled, [CH_GRAD])
    local_sd = g.op("Sqrt", [g.op("Relu", [g.channels(pooled, [CH_LOCAL_VAR])])])
    # Two-pass variance within each patch (E[(Y - mean)^2], not E[Y^2] - mean^2, which cancels
    # badly in float32 on flat patches).
    luma = g.channels("TEXTURE", [CH_LUMA])
    blocks = g.op("Reshape", [luma, g.const([-1, 1, GRID, PATCH, GRID, PATCH], dtype=np.int64)])
    centred = g.op("Sub", [blocks, g.op("ReduceMean", [blocks], axes=[3, 5], keepdims=1)])
    patch_var = g.op("ReduceMean", [g.op("Mul", [centred, centred])], axes=[3, 5], keepdims=0)
    patch_sd = g.op("Sqrt", [patch_var])
    info = g.op(
        "Add",
        [g.scale(grad, 0.5), g.op("Add", [g.scale(local_sd, 0.25), g.scale(patch_sd, 0.25)])],
    )
    g.to_grid(g.normalise_by_max(info), out="PROPOSITIONAL")
    return g.model([_texture_input()], [_map_output("PROPOSITIONAL")], doc="Information content per patch.")


def make_perspectival_scorer() -> onnx.ModelProto:
    """``perspectival_scorer`` (salience): TEXTURE -> PERSPECTIVAL [N, 14, 14].

    Centre-surround contrast in CIELAB: 0.6 * distance of each patch's mean (L, a, b) from the
    mean of its 5x5 patch neighbourhood + 0.4 * distance from the image mean (rarity), divided by
    the image's maximum.
    """
    g = _Graph("perspectival_scorer")
    lab = g.channels(g.pool("TEXTURE", PATCH), [CH_L, CH_A, CH_B])
    surround = g.op(
        "AveragePool", [lab], kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2], count_include_pad=0
    )
    diff = g.op("Sub", [lab, surround])
    local = g.op("Sqrt", [g.sum_channels(g.op("Mul", [diff, diff]))])
    image_mean = g.op("ReduceMean", [lab], axes=[2, 3], keepdims=1)
    rare = g.op("Sub", [lab, image_mean])
    rarity = g.op("Sqrt", [g.sum_channels(g.op("Mul", [rare, rare]))])
    salience = g.op("Add", [g.scale(local, 0.6), g.scale(rarity, 0.4)])
    g.to_grid(g.normalise_by_max(salience), out="PERSPECTIVAL")
    return g.model([_texture_input()], [_map_output("PERSPECTIVAL")], doc="Centre-surround salience.")


def query_projection() -> np.ndarray:
    """[64, 15]: query embedding -> 13 channel weights + x/y position weights.

    The first 15 embedding dimensions already are those weights (identity); the hashed trigram
    dimensions add a small fixed random projection, standing in for a learned text tower.
    """
    rng = np.random.default_rng(QUERY_SEED)
    ngram = rng.normal(0.0, 1.0, size=(QUERY_DIM - QUERY_CONCEPT_DIM, QUERY_CONCEPT_DIM))
    projection = np.concatenate([np.eye(QUERY_CONCEPT_DIM), QUERY_NGRAM_PROJECTION_SCALE * ngram])
    return projection.astype(np.float32)


def position_grids() -> tuple[np.ndarray, np.ndarray]:
    """Patch-centre coordinates in [-2, 2]: x grows to the right, y grows downwards."""
    axis = np.linspace(-POSITION_SCALE, POSITION_SCALE, GRID, dtype=np.float32)
    y, x = np.meshgrid(axis, axis, indexing="ij")
    return x, y


def make_participatory_scorer() -> onnx.ModelProto:
    """``participatory_scorer`` (query-aware): TEXTURE, QUERY_EMBEDDING -> PARTICIPATORY [N, 14, 14].

    Projects the query embedding to one weight per texture channel plus x/y position weights w,
    z-scores each channel's patch means within the image, and returns per patch
    sigmoid(GAIN * ((sum_c w_c * z_c + w_x * x + w_y * y) / (1 + |w|) - THRESHOLD)).
    """
    g = _Graph("participatory_scorer")
    pooled = g.pool("TEXTURE", PATCH)
    mean = g.op("ReduceMean", [pooled], axes=[2, 3], keepdims=1)
    centred = g.op("Sub", [pooled, mean])
    var = g.op("ReduceMean", [g.op("Mul", [centred, centred])], axes=[2, 3], keepdims=1)
    z = g.op("Div", [centred, g.op("Sqrt", [g.op("Add", [var, g.const(1e-6)])])])

    weights = g.op("MatMul", ["QUERY_EMBEDDING", g.const(query_projection())])  # [N, 15]
    four_d = g.const([-1, TEXTURE_CHANNELS + 2, 1, 1], dtype=np.int64)
    weights = g.op("Reshape", [weights, four_d])
    norm = g.op("Sqrt", [g.sum_channels(g.op("Mul", [weights, weights]))])  # [N, 1, 1, 1]
    channel_w = g.op(
        "Slice",
        [weights, g.const([0], dtype=np.int64), g.const([TEXTURE_CHANNELS], dtype=np.int64),
         g.const([1], dtype=np.int64)],
    )
    x_w = g.channels(weights, [TEXTURE_CHANNELS])
    y_w = g.channels(weights, [TEXTURE_CHANNELS + 1])
    content = g.sum_channels(g.op("Mul", [z, channel_w]))
    x_grid, y_grid = position_grids()
    place = g.op(
        "Add",
        [g.op("Mul", [x_w, g.const(x_grid[None, None])]), g.op("Mul", [y_w, g.const(y_grid[None, None])])],
    )
    score = g.op("Div", [g.op("Add", [content, place]), g.op("Add", [norm, g.const(1.0)])])
    shifted = g.op("Sub", [score, g.const(PARTICIPATORY_THRESHOLD)])
    score = g.op("Sigmoid", [g.scale(shifted, PARTICIPATORY_GAIN)])
    g.to_grid(score, out="PARTICIPATORY")
    return g.model(
        [
            _texture_input(),
            helper.make_tensor_value_info("QUERY_EMBEDDING", TensorProto.FLOAT, ["N", QUERY_DIM]),
        ],
        [_map_output("PARTICIPATORY")],
        doc="Query-aware relevance: query-weighted, z-scored patch features plus a position prior.",
    )
