"""Triton Python model: a pipeline's prompt stage, what the vision stages found + the question -> PROMPT.

Inputs ``FINDINGS`` BYTES [1] (the stand-in decoder's answer: ``vlm_model``'s or
``arr_coc_decoder``'s text, which says what the features show) and ``TEXT_QUERY`` BYTES [1] (the
client's question, already checked by an earlier step); output ``PROMPT`` BYTES [1], the
``text_input`` of the LLM stage. The same file serves ``vlm_prompt`` and ``arr_coc_prompt``
(config parameters ``PREAMBLE``: the line that says what the findings are; ``MAX_PROMPT_BYTES``:
the longest prompt, in UTF-8 bytes, the LLM stage's context takes, 0 for no limit).

The byte limit bounds the prompt's tokens: the tiny LLM's tokenizer is byte-level BPE, so a
prompt of N bytes is at most N tokens (+1 for the start token). Set it to the LLM stage's
``max_model_len`` minus the front's ``MAX_TOKENS_LIMIT`` and one, and no client question can
push a prompt past the engine's context: a longer one is refused here, naming ``TEXT_QUERY``.

So the LLM-decoder pipelines (``vlm_llm``, ``arr_coc_llm``) turn features into text the way a
production VLM's prompt builder does, and the prompt stays checkable without an engine
(``build_prompt`` is a plain function). Needs only numpy and ``triton_python_backend_utils``.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

try:
    import triton_python_backend_utils as pb_utils
except ImportError:  # imported outside Triton: tests call build_prompt directly
    pb_utils = None

__all__ = ["DEFAULT_PREAMBLE", "PromptError", "build_prompt"]

DEFAULT_PREAMBLE = "What the vision stages found in the image:"
#: what a blank question asks (the stand-in decoders describe the image then)
BLANK_QUESTION = "Describe the image."
MAX_QUERY_CHARS = 2000


class PromptError(ValueError):
    """A request the stage refuses; the message goes back to the client as INVALID_ARGUMENT."""


def _text(tensor: np.ndarray | None, name: str) -> str:
    if tensor is None or tensor.size != 1:
        raise PromptError(f"{name} must hold one UTF-8 string")
    value = tensor.ravel()[0]
    try:
        return value.decode("utf-8") if isinstance(value, bytes) else str(value)
    except UnicodeDecodeError as exc:
        raise PromptError(f"{name} is not UTF-8 text (byte {exc.start} is invalid)") from None


def build_prompt(findings: str, query: str, preamble: str = DEFAULT_PREAMBLE, max_bytes: int = 0) -> str:
    """The LLM's prompt: the findings, then the question and an open answer (at most ``max_bytes``
    UTF-8 bytes when it is not 0)."""
    question = " ".join(query.split()) or BLANK_QUESTION
    if len(question) > MAX_QUERY_CHARS:
        raise PromptError(f"TEXT_QUERY has {len(question)} characters; the limit is {MAX_QUERY_CHARS}")
    prompt = f"{preamble}\n{' '.join(findings.split())}\nQuestion: {question}\nAnswer:"
    size = len(prompt.encode("utf-8"))
    if max_bytes and size > max_bytes:
        room = max_bytes - (size - len(question.encode("utf-8")))
        raise PromptError(
            f"TEXT_QUERY makes a prompt of {size} bytes; the LLM stage's context takes {max_bytes}: "
            f"ask a question of at most {max(room, 0)} bytes (UTF-8)"
        )
    return prompt


class TritonPythonModel:
    """Triton entry point (unary): one PROMPT per request."""

    def initialize(self, args: dict[str, Any]) -> None:
        config = json.loads(args["model_config"])
        params = config.get("parameters", {})
        self.preamble = str(params.get("PREAMBLE", {}).get("string_value", "")) or DEFAULT_PREAMBLE
        self.max_bytes = int(params.get("MAX_PROMPT_BYTES", {}).get("string_value", "") or 0)

    def execute(self, requests: list[Any]) -> list[Any]:
        responses = []
        for request in requests:
            try:
                findings_tensor = pb_utils.get_input_tensor_by_name(request, "FINDINGS").as_numpy()
                query_tensor = pb_utils.get_input_tensor_by_name(request, "TEXT_QUERY").as_numpy()
                findings, query = _text(findings_tensor, "FINDINGS"), _text(query_tensor, "TEXT_QUERY")
                prompt = build_prompt(findings, query, self.preamble, self.max_bytes)
            except PromptError as exc:
                error = pb_utils.TritonError(str(exc), pb_utils.TritonError.INVALID_ARG)
                responses.append(pb_utils.InferenceResponse(error=error))
                continue
            out = np.array([prompt.encode("utf-8")], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("PROMPT", out)]))
        return responses
