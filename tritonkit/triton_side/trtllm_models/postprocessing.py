"""Detokenizer stage of a TensorRT-LLM layout, written by tritonkit to NVIDIA's documented contract.

Inputs (batched): TOKENS_BATCH [beams, tokens] (the engine's ``output_ids``) and
SEQUENCE_LENGTH [beams] (its ``sequence_length``). Output: OUTPUT [beams], the text of each beam.
Parameters: ``tokenizer_dir``, ``skip_special_tokens``.
"""

import json

import numpy as np
import triton_python_backend_utils as pb_utils
from served_paths import served_dir  # shipped beside model.py


class TritonPythonModel:
    def initialize(self, args):
        # The -trtllm-python-py3 image ships transformers (a TensorRT-LLM dependency).
        from transformers import AutoTokenizer

        params = json.loads(args["model_config"]).get("parameters", {})
        raw = params["tokenizer_dir"]["string_value"]
        path = served_dir(raw, args["model_repository"], args["model_version"])
        self.tokenizer = AutoTokenizer.from_pretrained(path, legacy=False, trust_remote_code=False)
        skip = params.get("skip_special_tokens", {}).get("string_value", "true")
        self.skip_special = skip.lower() in ("true", "1", "yes") or skip.startswith("${")

    def execute(self, requests):
        responses = []
        for request in requests:
            try:
                tokens = pb_utils.get_input_tensor_by_name(request, "TOKENS_BATCH").as_numpy()
                lengths = pb_utils.get_input_tensor_by_name(request, "SEQUENCE_LENGTH").as_numpy()
                tokens = tokens.reshape(tokens.shape[0], -1, tokens.shape[-1])
                lengths = lengths.reshape(tokens.shape[0], -1)
                texts = [
                    [
                        self.tokenizer.decode(beam[: int(n)], skip_special_tokens=self.skip_special).encode(
                            "utf-8"
                        )
                        for beam, n in zip(row, lens, strict=True)
                    ]
                    for row, lens in zip(tokens, lengths, strict=True)
                ]
                out = pb_utils.Tensor("OUTPUT", np.array(texts, dtype=np.object_))
                responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
            except (ValueError, TypeError, AttributeError) as exc:
                responses.append(
                    pb_utils.InferenceResponse(error=pb_utils.TritonError(f"postprocessing: {exc}"))
                )
        return responses

    def finalize(self):
        self.tokenizer = None
