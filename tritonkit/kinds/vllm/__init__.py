"""The vLLM kind: an LLM engine stage on NVIDIA's vLLM backend.

A spec model with ``backend: vllm`` (keys: :data:`~tritonkit.kinds.vllm.spec.VLLM_KEYS`) is parsed
by :mod:`.parse`, built by :mod:`.layout` and checked by :mod:`.checks` (vLLM's engine arguments per
version: :mod:`.engine_args`), the kind itself is :mod:`.kind` (:data:`VLLM`); ``tritonkit serve`` runs
it on tritonkit's own stand-in backend (``tritonkit/triton_side/backends/vllm``).
"""
