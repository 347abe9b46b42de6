"""The backend names a config.pbtxt gives its LLM engines, and the one test on them.

A leaf that imports nothing: the client and the CLI ask it whether a served model is an LLM
engine without pulling the build side (the kinds, the spec, the builder) in.
"""

from __future__ import annotations

__all__ = ["LLM_ENGINES", "TENSORRTLLM", "VLLM", "is_llm_engine", "is_vllm"]

#: NVIDIA's vLLM backend (``backend: "vllm"``); also the engine's Python package name
VLLM = "vllm"
#: NVIDIA's TensorRT-LLM backend (``backend: "tensorrtllm"``)
TENSORRTLLM = "tensorrtllm"
#: backends that run an LLM engine
LLM_ENGINES = frozenset({VLLM, TENSORRTLLM})


def is_llm_engine(backend: str) -> bool:
    """True when ``backend`` (a config's ``backend`` field) runs an LLM engine."""
    return backend in LLM_ENGINES


def is_vllm(backend: str) -> bool:
    """True for NVIDIA's vLLM backend: always decoupled, takes ``sampling_parameters``."""
    return backend == VLLM
