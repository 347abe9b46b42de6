"""BLS entry point of a TensorRT-LLM layout, written by tritonkit to NVIDIA's documented contract.

Takes the ensemble's inputs (``text_input``, ``max_tokens``, optional ``bad_words``,
``stop_words``, ``end_id``, ``pad_id``, sampling inputs and ``stream``) and calls, by BLS, the
models its parameters name: ``preprocessing_model_name`` -> ``tensorrt_llm_model_name`` ->
``postprocessing_model_name``. Decoupled (``stream`` true): one response per generated piece,
then the final flag; unary: one response with the whole text.

On Triton 2.51's Python stub a streaming BLS call needs care (``bls_streams.py``, shipped beside
this file): the stream is read in ``execute`` (one request at a time per instance: concurrency
is the instance count), let go of only after the stub's cleanup of it has run, and each response
carries only the outputs its request asked for.
"""

import json

import numpy as np
import triton_python_backend_utils as pb_utils
from bls_streams import BlsStream, requested_outputs  # shipped beside model.py

#: what a response of this model may carry (each only those its request asked for)
_OUTPUTS = ("text_output", "cum_log_probs", "output_log_probs")

_SAMPLING = {
    "top_k": "runtime_top_k",
    "top_p": "runtime_top_p",
    "temperature": "temperature",
    "length_penalty": "len_penalty",
    "repetition_penalty": "repetition_penalty",
    "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty",
    "beam_width": "beam_width",
    "return_log_probs": "return_log_probs",
}
_PRE = {
    "text_input": "QUERY",
    "max_tokens": "REQUEST_OUTPUT_LEN",
    "bad_words": "BAD_WORDS_DICT",
    "stop_words": "STOP_WORDS_DICT",
    "end_id": "END_ID",
    "pad_id": "PAD_ID",
}
_PRE_TO_LLM = {
    "INPUT_ID": "input_ids",
    "REQUEST_INPUT_LEN": "input_lengths",
    "REQUEST_OUTPUT_LEN": "request_output_len",
    "BAD_WORDS_IDS": "bad_words_list",
    "STOP_WORDS_IDS": "stop_words_list",
    "OUT_END_ID": "end_id",
    "OUT_PAD_ID": "pad_id",
}


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = config.get("parameters", {})

        def name(key):
            return params[key]["string_value"]

        self.pre = name("preprocessing_model_name")
        self.llm = name("tensorrt_llm_model_name")
        self.post = name("postprocessing_model_name")
        self.decoupled = pb_utils.using_decoupled_model_transaction_policy(config)

    def execute(self, requests):
        if self.decoupled:
            for request in requests:
                sender = request.get_response_sender()
                try:
                    self._one(request, sender)
                except (pb_utils.TritonModelException, ValueError, TypeError) as exc:
                    error = pb_utils.InferenceResponse(error=pb_utils.TritonError(str(exc)))
                    sender.send(error, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            return None
        responses = []
        for request in requests:
            try:
                responses.append(self._one(request, None))
            except (pb_utils.TritonModelException, ValueError, TypeError) as exc:
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(str(exc))))
        return responses

    def _one(self, request, sender):
        stream_in = pb_utils.get_input_tensor_by_name(request, "stream")
        stream = bool(stream_in is not None and stream_in.as_numpy().reshape(-1)[0])
        if stream and sender is None:
            raise ValueError("stream=true needs the decoupled model (this one is unary)")
        pre_inputs = []
        for outer, inner in _PRE.items():
            tensor = pb_utils.get_input_tensor_by_name(request, outer)
            if tensor is not None:
                pre_inputs.append(pb_utils.Tensor(inner, tensor.as_numpy().reshape(1, -1)))
        pre = pb_utils.InferenceRequest(
            model_name=self.pre, requested_output_names=list(_PRE_TO_LLM), inputs=pre_inputs
        ).exec()
        if pre.has_error():
            raise pb_utils.TritonModelException(pre.error().message())
        llm_inputs = [
            pb_utils.Tensor(llm, pb_utils.get_output_tensor_by_name(pre, name).as_numpy())
            for name, llm in _PRE_TO_LLM.items()
        ]
        for outer, inner in _SAMPLING.items():
            tensor = pb_utils.get_input_tensor_by_name(request, outer)
            if tensor is not None:
                llm_inputs.append(pb_utils.Tensor(inner, tensor.as_numpy().reshape(1, 1)))
        llm_inputs.append(pb_utils.Tensor("streaming", np.array([[stream]], dtype=np.bool_)))
        llm_request = pb_utils.InferenceRequest(
            model_name=self.llm,
            requested_output_names=["output_ids", "sequence_length", "cum_log_probs", "output_log_probs"],
            inputs=llm_inputs,
        )
        wanted = requested_outputs(request, _OUTPUTS)
        if sender is None:
            return self._respond(llm_request.exec(), wanted)
        with BlsStream(llm_request, sender) as pieces:
            for piece in pieces:
                if piece.has_error():
                    raise pb_utils.TritonModelException(piece.error().message())
                if pb_utils.get_output_tensor_by_name(piece, "output_ids") is not None:
                    response = self._respond(piece, wanted)
                    sender.send(response)
                    del response  # its tensors released here, holding the GIL
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None

    def _respond(self, llm, wanted):
        if llm.has_error():
            raise pb_utils.TritonModelException(llm.error().message())
        ids = pb_utils.get_output_tensor_by_name(llm, "output_ids").as_numpy()
        lengths = pb_utils.get_output_tensor_by_name(llm, "sequence_length").as_numpy()
        post = pb_utils.InferenceRequest(
            model_name=self.post,
            requested_output_names=["OUTPUT"],
            inputs=[pb_utils.Tensor("TOKENS_BATCH", ids), pb_utils.Tensor("SEQUENCE_LENGTH", lengths)],
        ).exec()
        if post.has_error():
            raise pb_utils.TritonModelException(post.error().message())
        text = pb_utils.get_output_tensor_by_name(post, "OUTPUT").as_numpy().reshape(-1)
        outputs = [pb_utils.Tensor("text_output", text)] if "text_output" in wanted else []
        for name in ("cum_log_probs", "output_log_probs"):
            tensor = pb_utils.get_output_tensor_by_name(llm, name)
            if tensor is not None and name in wanted:
                array = tensor.as_numpy()
                outputs.append(
                    pb_utils.Tensor(name, array.reshape(array.shape[1:]) if array.ndim > 1 else array)
                )
        return pb_utils.InferenceResponse(output_tensors=outputs)
