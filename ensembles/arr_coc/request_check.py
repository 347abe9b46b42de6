"""Triton Python model ``arr_coc_request_check``: check the client's request once, before any fan-out.

Inputs ``RAW_IMAGE`` UINT8 [-1] (an encoded image) and ``TEXT_QUERY`` BYTES [1]; outputs the
same bytes as ``CHECKED_IMAGE`` and ``CHECKED_QUERY`` once both are known to be processable, so
no later stage of the pipeline can fail on what the client sent.

Why a separate first step: on Triton 2.51 (and every release before the upstream fix,
triton-inference-server/core#483) an ensemble step that returns an error while a sibling
step of the same scheduling batch is still being dispatched crashes the whole server
(SIGSEGV). In ARR-COC the image and query branches start together, so one undecodable
upload could take the endpoint down. This step runs alone; everything after it only sees
checked input.

Checks (limits from the config ``parameters``): the image is non-empty, at most
MAX_IMAGE_BYTES bytes, a format Pillow reads, at most MAX_PIXELS pixels (read from the
header, before any pixel is decoded, so a decompression bomb costs no memory), and decodes
completely; the query is one UTF-8 string, not blank, at most MAX_QUERY_CHARS characters.
A failed check answers INVALID_ARGUMENT (HTTP 400) with what was wrong.

Needs only numpy, Pillow, ``triton_python_backend_utils`` and ``image_input.py`` (the image
checks shared with the other image stages, copied beside this file by the spec's ``files:``);
the checks are the plain functions ``check_image`` and ``check_query``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
from image_input import MAX_PIXELS, StageError, decode_image  # shipped beside model.py (files:)

try:
    import triton_python_backend_utils as pb_utils
except ImportError:  # imported outside Triton: tests call the stage functions directly
    pb_utils = None


@dataclass(frozen=True)
class Limits:
    """Request limits, from the model config's parameters."""

    max_pixels: int = MAX_PIXELS
    max_image_bytes: int = 32 * 1024 * 1024
    max_query_chars: int = 2000

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Limits:
        params = config.get("parameters", {})
        values: dict[str, int] = {}
        for key, field_name in (
            ("MAX_PIXELS", "max_pixels"),
            ("MAX_IMAGE_BYTES", "max_image_bytes"),
            ("MAX_QUERY_CHARS", "max_query_chars"),
        ):
            raw = params.get(key, {}).get("string_value", "")
            if raw == "":
                continue
            try:
                value = int(raw)
            except ValueError:
                raise StageError(f"parameter {key} must be an int, got {raw!r}") from None
            if value <= 0:
                raise StageError(f"parameter {key} must be > 0, got {value}")
            values[field_name] = value
        return cls(**values)


def check_image(raw: np.ndarray, limits: Limits) -> None:
    """Raise StageError unless ``raw`` (UINT8 bytes) is an image the pipeline can process."""
    decode_image(raw, max_pixels=limits.max_pixels, max_bytes=limits.max_image_bytes)


def check_query(tensor: np.ndarray, limits: Limits) -> None:
    """Raise StageError unless ``tensor`` holds one non-blank UTF-8 query within the limit."""
    if tensor.size != 1:
        raise StageError(f"TEXT_QUERY must hold exactly one string, got {tensor.size} elements")
    value = tensor.ravel()[0]
    if isinstance(value, bytes):
        try:
            text = value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise StageError(f"TEXT_QUERY is not UTF-8 text (byte {exc.start} is invalid)") from None
    else:
        text = str(value)
    if len(text) > limits.max_query_chars:
        raise StageError(f"TEXT_QUERY has {len(text)} characters; the limit is {limits.max_query_chars}")
    if not text.strip():
        raise StageError("TEXT_QUERY is empty: send one question as a UTF-8 string")


class TritonPythonModel:
    """Triton entry point; one instance per configured model instance."""

    def initialize(self, args: dict[str, Any]) -> None:
        try:
            self.limits = Limits.from_config(json.loads(args["model_config"]))
        except StageError as exc:
            raise pb_utils.TritonModelException(f"arr_coc_request_check: {exc}") from None

    def execute(self, requests: list[Any]) -> list[Any]:
        responses = []
        for request in requests:
            try:
                raw = pb_utils.get_input_tensor_by_name(request, "RAW_IMAGE").as_numpy()
                query = pb_utils.get_input_tensor_by_name(request, "TEXT_QUERY").as_numpy()
                check_query(query, self.limits)
                check_image(raw, self.limits)
                responses.append(
                    pb_utils.InferenceResponse(
                        [pb_utils.Tensor("CHECKED_IMAGE", raw), pb_utils.Tensor("CHECKED_QUERY", query)]
                    )
                )
            except StageError as exc:
                error = pb_utils.TritonError(str(exc), pb_utils.TritonError.INVALID_ARG)
                responses.append(pb_utils.InferenceResponse(error=error))
        return responses
