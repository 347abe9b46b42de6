"""Tokenizer stage of a TensorRT-LLM layout, written by tritonkit to NVIDIA's documented contract.

Inputs (batched): QUERY (text), REQUEST_OUTPUT_LEN, optional BAD_WORDS_DICT / STOP_WORDS_DICT
(words), END_ID, PAD_ID and, for a vision-language stage, PROMPT_VOCAB_SIZE (how many image
embeddings the encoder made). Outputs: INPUT_ID (padded token ids), REQUEST_INPUT_LEN,
BAD_WORDS_IDS / STOP_WORDS_IDS (TensorRT-LLM's [2, n] word-list format: flat ids, then end
offsets, -1 padded), REQUEST_OUTPUT_LEN, OUT_END_ID, OUT_PAD_ID.

Parameters: ``tokenizer_dir`` (a Hugging Face tokenizer directory), ``add_special_tokens``,
``vocab_size`` (multimodal: image embeddings take the ids vocab_size .. vocab_size+n-1, the
engine's prompt-table ids). A request that cannot be tokenized fails alone (its own error).
"""


import numpy as np
import triton_python_backend_utils as pb_utils
from served_paths import served_dir  # shipped beside model.py


def _flag(params, key, default):
    value = params.get(key, {}).get("string_value", "")
    if value in ("", None) or value.startswith("${"):
        return default
    return value.lower() in ("true", "1", "yes")


class TritonPythonModel:
    def initialize(self, args):
        import json

        # The -trtllm-python-py3 image ships transformers (a TensorRT-LLM dependency).
        from transformers import AutoTokenizer

        config = json.loads(args["model_config"])
        params = config.get("parameters", {})
        raw = params["tokenizer_dir"]["string_value"]
        path = served_dir(raw, args["model_repository"], args["model_version"])
        self.tokenizer = AutoTokenizer.from_pretrained(path, legacy=False, trust_remote_code=False)
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.add_special = _flag(params, "add_special_tokens", True)
        vocab = params.get("vocab_size", {}).get("string_value", "0")
        self.vocab_size = int(vocab) if vocab.isdigit() else 0
        self.end_id = self.tokenizer.eos_token_id
        self.pad_id = self.tokenizer.pad_token_id

    def execute(self, requests):
        responses = []
        for request in requests:
            try:
                responses.append(pb_utils.InferenceResponse(output_tensors=self._one(request)))
            except (ValueError, TypeError, UnicodeDecodeError) as exc:
                responses.append(
                    pb_utils.InferenceResponse(error=pb_utils.TritonError(f"preprocessing: {exc}"))
                )
        return responses

    def _one(self, request):
        query = _input(request, "QUERY")
        out_len = _input(request, "REQUEST_OUTPUT_LEN")
        if query is None or out_len is None:
            raise ValueError("QUERY and REQUEST_OUTPUT_LEN are required")
        batch = query.shape[0]
        end = _input(request, "END_ID")
        pad = _input(request, "PAD_ID")
        vocab_rows = _input(request, "PROMPT_VOCAB_SIZE")
        ids = []
        for i in range(batch):
            text = _text(query[i].reshape(-1)[0])
            tokens = self.tokenizer.encode(text, add_special_tokens=self.add_special)
            if vocab_rows is not None and self.vocab_size > 0:
                rows = int(np.asarray(vocab_rows[i]).reshape(-1)[0])
                tokens = list(range(self.vocab_size, self.vocab_size + rows)) + list(tokens)
            ids.append(tokens)
        # One pad id per batch (the rows are padded to one width with it).
        pad_id = self.pad_id if pad is None else int(np.asarray(pad).reshape(-1)[0])
        width = max(1, max(len(t) for t in ids))
        input_id = np.full((batch, width), pad_id, dtype=np.int32)
        for i, tokens in enumerate(ids):
            input_id[i, : len(tokens)] = tokens
        lengths = np.array([[len(t)] for t in ids], dtype=np.int32)
        if end is None:
            end_ids = np.full((batch, 1), self.end_id, dtype=np.int32)
        else:
            end_ids = np.asarray(end, dtype=np.int32).reshape(batch, -1)[:, :1]
        pad_ids = np.full((batch, 1), pad_id, dtype=np.int32)
        return [
            pb_utils.Tensor("INPUT_ID", input_id),
            pb_utils.Tensor("REQUEST_INPUT_LEN", lengths),
            pb_utils.Tensor("BAD_WORDS_IDS", self._words(_input(request, "BAD_WORDS_DICT"), batch)),
            pb_utils.Tensor("STOP_WORDS_IDS", self._words(_input(request, "STOP_WORDS_DICT"), batch)),
            pb_utils.Tensor("REQUEST_OUTPUT_LEN", np.asarray(out_len, dtype=np.int32).reshape(batch, 1)),
            pb_utils.Tensor("OUT_END_ID", end_ids),
            pb_utils.Tensor("OUT_PAD_ID", pad_ids),
        ]

    def _words(self, words, batch):
        """TensorRT-LLM's word list: row 0 the ids of all words, row 1 each word's end offset."""
        lists = []
        for i in range(batch):
            flat, offsets = [], []
            if words is not None:
                for word in words[i].reshape(-1):
                    text = _text(word)
                    if text:
                        flat.extend(self.tokenizer.encode(text, add_special_tokens=False))
                        offsets.append(len(flat))
            lists.append((flat, offsets))
        width = max(1, max(max(len(f), len(o)) for f, o in lists))
        out = np.zeros((batch, 2, width), dtype=np.int32)
        out[:, 1, :] = -1
        for i, (flat, offsets) in enumerate(lists):
            out[i, 0, : len(flat)] = flat
            out[i, 1, : len(offsets)] = offsets
        return out

    def finalize(self):
        self.tokenizer = None


def _input(request, name):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return None if tensor is None else tensor.as_numpy()


def _text(value):
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)
