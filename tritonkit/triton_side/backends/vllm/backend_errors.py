"""What kind of failure a request met: its own fault, a dead engine, or the engine's verdict.

Shipped beside ``model.py`` (the stub puts this directory on ``sys.path``); imports nothing
from tritonkit.
"""

from __future__ import annotations


class BadRequest(ValueError):
    """A request this backend refuses (Triton's INVALID_ARG): said to that client only."""


class EngineGone(Exception):
    """A request that arrived after the engine died."""


def engine_dead(exc: BaseException) -> bool:
    return type(exc).__name__ == "EngineDeadError"


def client_error(exc: BaseException) -> bool:
    """True for vLLM's verdicts on the request itself (too long a prompt, a bad parameter)."""
    try:
        from vllm.exceptions import VLLMClientError
    except ImportError:  # pragma: no cover - older vLLM
        return isinstance(exc, ValueError)
    return isinstance(exc, (VLLMClientError, ValueError))
