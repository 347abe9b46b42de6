"""The TensorRT-LLM kind: one spec entry expands into NVIDIA's inflight-batcher layout.

:mod:`.spec` holds the kind's facts and the checked spec, :mod:`.expand` turns a spec entry into
the models of :mod:`.models`, :mod:`.engine` reads the engine's ``config.json``,
:mod:`.parameters` knows every documented parameter, :mod:`.checks` holds the validator's rules,
:mod:`.kind` the kind itself (:data:`TENSORRTLLM`).
The Python models it writes run inside Triton: ``tritonkit/triton_side/trtllm_models``.
"""
