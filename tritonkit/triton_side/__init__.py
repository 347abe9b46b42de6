"""Code that runs inside Triton: Python backends and Python models tritonserver loads itself.

Nothing here imports tritonkit (each file runs in Triton's own process, with the image's own
packages); tritonkit finds these files by path, through :data:`TRITON_SIDE_DIR`.

- ``backends/<name>/model.py``: the Python-based backends ``tritonkit serve`` installs
  (``onnxruntime`` and ``vllm`` stand-ins for NVIDIA's C++ or image-only backends).
- ``trtllm_models/*.py``: the Python models a TensorRT-LLM stage's build copies into the
  repository (tokenizer, detokenizer, BLS entry point, vision encoder).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["BACKENDS_DIR", "TRITON_SIDE_DIR", "TRTLLM_MODELS_DIR"]

TRITON_SIDE_DIR = Path(__file__).resolve().parent
#: one directory per Python-based backend, each holding the ``model.py`` Triton loads
BACKENDS_DIR = TRITON_SIDE_DIR / "backends"
#: the Python models of a TensorRT-LLM stage, copied into the repository by the build
TRTLLM_MODELS_DIR = TRITON_SIDE_DIR / "trtllm_models"
