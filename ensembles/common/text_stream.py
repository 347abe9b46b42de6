"""Serve a text decoder from a Triton Python model: one answer (unary) or a stream of pieces.

The pipelines' decoders (``vlm/vlm_model.py``, ``arr_coc/decoder.py``) write their answer as a
generator of text fragments, each computed only when the answer reaches it. This module turns
the fragments into word pieces and serves them the way the model's config asks:

- unary (``vlm_model``, ``arr_coc_decoder``, steps of the unary ensembles): the pieces joined
  into one ``GENERATED_TEXT``;
- decoupled (``model_transaction_policy { decoupled: true }``: ``vlm_stream``,
  ``arr_coc_stream``): one response per piece, then a flags-only final response. Each stream
  runs on its own worker thread, so one model instance serves many streams at once. It stops
  after the optional ``MAX_TOKENS`` pieces, and as soon as the client cancels (gRPC stream
  cancelled, HTTP connection closed): no later piece is computed.

So one decoder source serves both variants. The streaming models are the pipeline's front door,
not the last step of an ensemble: they fetch the decoder's inputs from a unary ensemble through
BLS (config parameters ``FEATURES_MODEL``, ``FEATURES_INPUTS``, ``FEATURES_OUTPUTS``: names,
comma-separated), then generate. Why: Triton 2.51 never tells an ensemble's running step that
the client cancelled (core#263 checks the flag between steps only: measured in
tests/integration/test_stream_crash.py), so a decoder inside an ensemble would finish every
abandoned answer. The client's request is this model's own, so ``is_cancelled()`` sees it leave.

`tritonkit build` copies this file beside each decoder's ``model.py`` (the spec's ``files:``); it
needs only numpy and Triton's ``triton_python_backend_utils`` (passed in, so tests can run
everything but the Triton calls).

Config parameters: ``DECODE_STEP_MS`` (default 0) paces the stream like a real language model's
decode step (the stand-ins compute a piece in microseconds); ``MAX_STREAMS`` (default 64) bounds
the streams one instance generates at once (more wait their turn).

Server-side counters (Triton's metrics endpoint, labelled by model and instance):
``tritonkit_generated_pieces_total`` (pieces sent), ``tritonkit_generation_cancelled_total``
(streams stopped because the client cancelled) and ``tritonkit_generation_active`` (streams
being generated now). Updates are serialised: Triton 2.51 crashes when a Python model updates a
custom metric from several threads at once.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

OUTPUT = "GENERATED_TEXT"
MAX_TOKENS = "MAX_TOKENS"
DEFAULT_MAX_STREAMS = 64

_METRICS_LOCK = threading.Lock()
_LAST_SEPARATOR = re.compile(r"\s+\S*$")
_PIECE = re.compile(r"\s*\S+|\s+")


class StageError(ValueError):
    """A request the decoder refuses; the message goes back to the client as INVALID_ARGUMENT."""


class FeaturesError(RuntimeError):
    """The FEATURES_MODEL failed for a reason other than the client's input."""


def word_pieces(fragments: Iterable[str]) -> Iterator[str]:
    """Word pieces of text arriving in fragments; each piece keeps the whitespace before it.

    A word is given out as soon as the whitespace after it arrives, so a fragment is asked for
    only when the piece before it has been taken: stopping the iteration stops the decoder.
    The pieces joined are exactly the fragments joined.
    """
    pending = ""
    for fragment in fragments:
        pending += fragment
        last = _LAST_SEPARATOR.search(pending)
        if last is None or last.start() == 0:
            continue
        done, pending = pending[: last.start()], pending[last.start() :]
        yield from _PIECE.findall(done)
    yield from _PIECE.findall(pending)


def max_tokens(tensor: np.ndarray | None) -> int | None:
    """The optional MAX_TOKENS input as a piece limit (None: no limit)."""
    if tensor is None:
        return None
    if tensor.size != 1:
        raise StageError(f"MAX_TOKENS must hold one INT32 value, got {tensor.size} values")
    value = int(tensor.ravel()[0])
    if value < 1:
        raise StageError(f"MAX_TOKENS must be at least 1, got {value}")
    return value


def _int_parameter(config: dict[str, Any], key: str, default: int) -> int:
    raw = config.get("parameters", {}).get(key, {}).get("string_value", "")
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise StageError(f"parameter {key} must be an integer, got {raw!r}") from None
    if value < 0:
        raise StageError(f"parameter {key} must be >= 0, got {value}")
    return value


class _Counters:
    """The decoder's Prometheus counters, or nothing where Triton runs without metrics."""

    def __init__(self, pb_utils: Any, labels: dict[str, str]) -> None:
        self.pieces = self.cancelled = self.active = None
        try:
            family = pb_utils.MetricFamily
            self._families = (
                family("tritonkit_generated_pieces_total", "Text pieces the decoder sent", family.COUNTER),
                family(
                    "tritonkit_generation_cancelled_total",
                    "Streams the decoder stopped because the client cancelled",
                    family.COUNTER,
                ),
                family("tritonkit_generation_active", "Streams being generated now", family.GAUGE),
            )
            self.pieces, self.cancelled, self.active = (f.Metric(labels=labels) for f in self._families)
        except Exception:  # noqa: BLE001 - metrics are optional (--allow-metrics=false)
            self.pieces = self.cancelled = self.active = None

    def add(self, metric: Any, value: float) -> None:
        if metric is not None:
            # One update at a time: custom-metric updates from concurrent threads of one model
            # crash Triton 2.51 (boost lock_exception / SIGSEGV; tests/integration/test_stream_crash.py).
            with _METRICS_LOCK:
                metric.increment(value)


class TextGenerator:
    """Serves ``pieces(inputs)`` (fragments of the answer) for one Triton model instance.

    ``inputs`` maps each input tensor of the request to a numpy copy; ``pieces`` raises
    StageError (before its first fragment) for a request it refuses.
    """

    def __init__(
        self, args: dict[str, Any], config: dict[str, Any], pb_utils: Any,
        pieces: Callable[[dict[str, np.ndarray]], Iterable[str]],
    ) -> None:
        self.pb_utils = pb_utils
        self.pieces = pieces
        self.name = str(config.get("name", args.get("model_name", "decoder")))
        self.input_names = [str(i["name"]) for i in config.get("input", [])]
        params = config.get("parameters", {})
        self.features_model = str(params.get("FEATURES_MODEL", {}).get("string_value", ""))
        self.features_inputs, self.features_outputs = (
            [n.strip() for n in str(params.get(key, {}).get("string_value", "")).split(",") if n.strip()]
            for key in ("FEATURES_INPUTS", "FEATURES_OUTPUTS")
        )
        self.decoupled = bool(pb_utils.using_decoupled_model_transaction_policy(config))
        try:
            self.step_s = _int_parameter(config, "DECODE_STEP_MS", 0) / 1000.0
            streams = _int_parameter(config, "MAX_STREAMS", DEFAULT_MAX_STREAMS) or DEFAULT_MAX_STREAMS
        except StageError as exc:
            raise pb_utils.TritonModelException(f"{self.name}: {exc}") from None
        labels = {"model": self.name, "instance": str(args.get("model_instance_name", self.name))}
        self.counters = _Counters(pb_utils, labels)
        self.executor = (
            ThreadPoolExecutor(max_workers=streams, thread_name_prefix=f"{self.name}-stream")
            if self.decoupled
            else None
        )
        self._lock = threading.Lock()

    # -- Triton entry points ------------------------------------------------------------------

    def respond(self, requests: list[Any]) -> list[Any]:
        """Unary: one response per request, the pieces joined."""
        return [self._unary(request) for request in requests]

    def stream(self, requests: list[Any]) -> None:
        """Decoupled: each request's pieces go out through its own response sender, from a worker."""
        if self.executor is None:
            raise self.pb_utils.TritonModelException(f"{self.name} is not decoupled: use respond()")
        for request in requests:
            # inputs are copied now: the request's tensors are not the worker's to keep
            inputs = self._inputs(request)
            self.executor.submit(self._stream, inputs, request.get_response_sender())

    def finalize(self) -> None:
        if self.executor is not None:
            self.executor.shutdown(wait=True, cancel_futures=True)

    # -- the two variants -----------------------------------------------------------------------

    def _inputs(self, request: Any) -> dict[str, np.ndarray]:
        inputs = {}
        for name in self.input_names:
            tensor = self.pb_utils.get_input_tensor_by_name(request, name)
            if tensor is not None:  # optional inputs (MAX_TOKENS) may be absent
                inputs[name] = np.array(tensor.as_numpy(), copy=True)
        return inputs

    def _decoder_inputs(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The request's inputs and, with FEATURES_MODEL, that model's outputs for them (BLS)."""
        if not self.features_model:
            return inputs
        pb = self.pb_utils
        request = pb.InferenceRequest(
            model_name=self.features_model,
            inputs=[pb.Tensor(name, inputs[name]) for name in self.features_inputs if name in inputs],
            requested_output_names=self.features_outputs,
        )
        response = request.exec()
        if response.has_error():
            error = response.error()
            message = str(error.message())
            # A stage refusing the client's input answers INVALID_ARG, but Triton 2.51's BLS hands
            # every error back as INTERNAL (measured); the stages' messages name the input they
            # refuse ("RAW_IMAGE is not a readable image ..."), so that is what marks them.
            if error.code() == pb.TritonError.INVALID_ARG or any(
                re.search(rf"\b{re.escape(name)}\b", message) for name in self.features_inputs
            ):
                raise StageError(message)
            raise FeaturesError(f"{self.features_model}: {message}")
        features = {
            name: np.array(pb.get_output_tensor_by_name(response, name).as_numpy(), copy=True)
            for name in self.features_outputs
        }
        return {**inputs, **features}

    def _text_response(self, text: str) -> Any:
        out = np.array([text.encode("utf-8")], dtype=np.object_)
        return self.pb_utils.InferenceResponse([self.pb_utils.Tensor(OUTPUT, out)])

    def _error_response(self, message: str, code: Any) -> Any:
        return self.pb_utils.InferenceResponse(error=self.pb_utils.TritonError(message, code))

    def _unary(self, request: Any) -> Any:
        try:
            inputs = self._inputs(request)
            limit = max_tokens(inputs.get(MAX_TOKENS))
            pieces = []
            for piece in word_pieces(self.pieces(self._decoder_inputs(inputs))):
                if limit is not None and len(pieces) >= limit:
                    break
                pieces.append(piece)
            self.counters.add(self.counters.pieces, len(pieces))
            return self._text_response("".join(pieces))
        except StageError as exc:
            # bad client input: INVALID_ARGUMENT (HTTP 400), not an internal error
            return self._error_response(str(exc), self.pb_utils.TritonError.INVALID_ARG)
        except FeaturesError as exc:
            return self._error_response(str(exc), self.pb_utils.TritonError.INTERNAL)

    def _stream(self, inputs: dict[str, np.ndarray], sender: Any) -> None:
        pb = self.pb_utils
        final = pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        self.counters.add(self.counters.active, 1)
        sent = 0
        ending = False  # once the final flag is on its way the sender is never touched again:
        # Triton 2.51 segfaults on is_cancelled() after the final response
        try:
            limit = max_tokens(inputs.get(MAX_TOKENS))
            pieces = word_pieces(self.pieces(self._decoder_inputs(inputs)))
            while limit is None or sent < limit:
                if sender.is_cancelled():  # checked before each piece is computed
                    self._cancelled(sender, sent)
                    return
                if self.step_s:
                    time.sleep(self.step_s)
                piece = next(pieces, None)
                if piece is None:
                    break
                sender.send(self._text_response(piece))
                sent += 1
                self.counters.add(self.counters.pieces, 1)
            ending = True
            sender.send(flags=final)
        except StageError as exc:
            ending = True
            sender.send(self._error_response(str(exc), pb.TritonError.INVALID_ARG), flags=final)
        except Exception as exc:  # noqa: BLE001 - a worker thread must always end its stream
            if ending:
                pb.Logger.log_error(f"{self.name}: the final response failed: {type(exc).__name__}: {exc}")
                return
            if sender.is_cancelled():  # the client went away while a piece was being sent
                self._cancelled(sender, sent)
                return
            failure = f"{self.name}: stream failed after {sent} pieces: {type(exc).__name__}: {exc}"
            pb.Logger.log_error(failure)
            self._send_quietly(sender, self._error_response(failure, pb.TritonError.INTERNAL))
        finally:
            self.counters.add(self.counters.active, -1)

    def _cancelled(self, sender: Any, sent: int) -> None:
        self.counters.add(self.counters.cancelled, 1)
        self.pb_utils.Logger.log_info(
            f"{self.name}: the client cancelled the stream after {sent} pieces; generation stopped"
        )
        # the final flag releases the request on the server even though nobody reads it
        cancelled = self._error_response("cancelled by the client", self.pb_utils.TritonError.CANCELLED)
        self._send_quietly(sender, cancelled)

    def _send_quietly(self, sender: Any, response: Any) -> None:
        try:
            sender.send(response, flags=self.pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        except Exception:  # noqa: BLE001 - the stream may already be closed on the server
            pass
