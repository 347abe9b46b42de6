"""The TensorRT-LLM kind: one spec entry expands into NVIDIA's inflight-batcher layout.

:mod:`.spec` holds the kind's facts and the checked spec, :mod:`.expand` turns a spec entry into
the models of :mod:`.models`, :mod:`.engine` reads the engine's ``config.json``,
:mod:`.parameters` knows every documented parameter, :mod:`.checks` holds the validator's rules,
:mod:`.kind` the kind itself (:data:`TENSORRTLLM`).
The Python models it writes run inside Triton: ``tritonkit/triton_side/trtllm_models``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tritonkit._lazy import lazy_exports

if TYPE_CHECKING:
    from tritonkit.kinds.tensorrtllm.kind import TENSORRTLLM, TensorrtllmKind, trtllm_models

# The kind loads on first use: its modules (``spec``, ``parse``, ...) import alone.
__getattr__, __dir__ = lazy_exports(__name__, {"kind": ("TENSORRTLLM", "TensorrtllmKind", "trtllm_models")})

__all__ = ["TENSORRTLLM", "TensorrtllmKind", "trtllm_models"]
