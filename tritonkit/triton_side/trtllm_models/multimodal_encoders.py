"""Vision-encoder stage of a TensorRT-LLM vision-language layout, written by tritonkit.

Runs the vision engine (``model.engine`` in ``multimodal_model_path``, built by TensorRT-LLM's
multimodal builder) on IMAGE and returns its embeddings as the engine's prompt table:
OUT_PROMPT_EMBEDDING_TABLE [rows, hidden] (FP16) and OUT_PROMPT_VOCAB_SIZE [1] (= rows), which
the preprocessing model turns into prompt-table ids and the tensorrt_llm model reads as
``prompt_embedding_table`` / ``prompt_vocab_size`` (tensorrtllm_backend docs/multimodal.md).

Written against TensorRT-LLM's runtime ``Session`` API; it can only run on a GPU node with the
``-trtllm-python-py3`` image, and tritonkit has not run it (no GPU where it is developed).
"""

import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils
from served_paths import served_dir  # shipped beside model.py


class TritonPythonModel:
    def initialize(self, args):
        # Both ship in the -trtllm-python-py3 image.
        import tensorrt as trt
        import torch
        from tensorrt_llm.runtime import Session, TensorInfo

        self.torch, self.trt, self.tensor_info = torch, trt, TensorInfo
        params = json.loads(args["model_config"]).get("parameters", {})
        path = served_dir(
            params["multimodal_model_path"]["string_value"], args["model_repository"], args["model_version"]
        )
        with open(os.path.join(path, "model.engine"), "rb") as f:
            self.session = Session.from_serialized_engine(f.read())
        engine = self.session.engine
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        self.input = next(n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT)
        self.output = next(n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.OUTPUT)
        self.stream = torch.cuda.Stream()

    def execute(self, requests):
        responses = []
        for request in requests:
            try:
                image = pb_utils.get_input_tensor_by_name(request, "IMAGE").as_numpy()
                responses.append(pb_utils.InferenceResponse(output_tensors=self._encode(image)))
            except (ValueError, RuntimeError) as exc:
                responses.append(
                    pb_utils.InferenceResponse(error=pb_utils.TritonError(f"multimodal_encoders: {exc}"))
                )
        return responses

    def _encode(self, image):
        torch = self.torch
        pixels = torch.from_numpy(image).cuda().half()
        shapes = self.session.infer_shapes(
            [self.tensor_info(self.input, self.trt.DataType.HALF, tuple(pixels.shape))]
        )
        outputs = {t.name: torch.empty(tuple(t.shape), dtype=torch.float16, device="cuda") for t in shapes}
        if not self.session.run({self.input: pixels}, outputs, self.stream.cuda_stream):
            raise RuntimeError("the vision engine did not run")
        self.stream.synchronize()
        features = outputs[self.output]
        batch = features.shape[0]
        table = features.reshape(batch, -1, features.shape[-1]).cpu().numpy().astype(np.float16)
        rows = np.full((batch, 1), table.shape[1], dtype=np.int32)
        return [
            pb_utils.Tensor("OUT_PROMPT_EMBEDDING_TABLE", table),
            pb_utils.Tensor("OUT_PROMPT_VOCAB_SIZE", rows),
        ]
