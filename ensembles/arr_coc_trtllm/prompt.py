"""Triton Python model ``arr_coc_trtllm_prompt``: the ARR-COC features -> a VLM decoder's request.

Inputs: ``TEXT_QUERY`` BYTES [1]; ``RELEVANCE`` FP32 [14, 14] and ``TOKEN_BUDGET`` INT32 [14, 14]
from the opponent processor; ``TEXTURE`` FP32 [1, 13, 224, 224] from texture_array.
Outputs (a batch of one, for the TensorRT-LLM stage's batching entry point): ``PROMPT`` BYTES
[1, 1] (the query and where relevance concentrates), ``IMAGE`` FP16 [1, 3, 448, 448] (the RGB
channels of the texture, upsampled 2x for the vision encoder) and ``MAX_TOKENS`` INT32 [1, 1]
(the visual-token budget's share for the answer, clipped to 16..256).

Needs numpy and ``triton_python_backend_utils``; the stage is the plain function ``prepare``.
"""

from __future__ import annotations

import json

import numpy as np

try:
    import triton_python_backend_utils as pb_utils
except ImportError:  # imported outside Triton: tests call ``prepare`` directly
    pb_utils = None

GRID = 14
MAX_QUERY_CHARS = 2000


def prepare(
    query: str, relevance: np.ndarray, budget: np.ndarray, texture: np.ndarray
) -> dict[str, np.ndarray]:
    if relevance.shape != (GRID, GRID) or budget.shape != (GRID, GRID):
        raise ValueError(f"RELEVANCE and TOKEN_BUDGET must be [{GRID}, {GRID}]")
    if texture.shape != (1, 13, 224, 224):
        raise ValueError("TEXTURE must be [1, 13, 224, 224]")
    row, col = divmod(int(np.argmax(relevance)), GRID)
    prompt = (
        f"<image>\nQuestion: {query[:MAX_QUERY_CHARS]}\n"
        f"The most relevant region is around row {row + 1}, column {col + 1} of a {GRID}x{GRID} grid. "
        "Answer in one or two sentences."
    )
    rgb = np.clip(texture[0, :3], 0.0, 1.0)
    image = rgb.repeat(2, axis=1).repeat(2, axis=2).astype(np.float16)[np.newaxis]
    tokens = int(np.clip(int(budget.sum()) // 8, 16, 256))
    return {
        "PROMPT": np.array([[prompt.encode("utf-8")]], dtype=np.object_),
        "IMAGE": image,
        "MAX_TOKENS": np.array([[tokens]], dtype=np.int32),
    }


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        self.name = json.loads(args["model_config"]).get("name", "arr_coc_trtllm_prompt")

    def execute(self, requests: list) -> list:
        responses = []
        for request in requests:
            try:
                query = pb_utils.get_input_tensor_by_name(request, "TEXT_QUERY").as_numpy().reshape(-1)[0]
                out = prepare(
                    query.decode("utf-8") if isinstance(query, bytes) else str(query),
                    pb_utils.get_input_tensor_by_name(request, "RELEVANCE").as_numpy(),
                    pb_utils.get_input_tensor_by_name(request, "TOKEN_BUDGET").as_numpy(),
                    pb_utils.get_input_tensor_by_name(request, "TEXTURE").as_numpy(),
                )
                tensors = [pb_utils.Tensor(k, v) for k, v in out.items()]
                responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
            except (ValueError, UnicodeDecodeError) as exc:
                responses.append(
                    pb_utils.InferenceResponse(error=pb_utils.TritonError(f"{self.name}: {exc}"))
                )
        return responses
