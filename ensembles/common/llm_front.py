"""Triton Python model: the front door of an LLM-decoder pipeline (``vlm_llm``, ``arr_coc_llm``), decoupled.

For each request (``RAW_IMAGE``, ``TEXT_QUERY``, optional ``MAX_TOKENS`` INT32 [1], optional
``SAMPLING_PARAMETERS`` BYTES [1] when the config declares it):

1. BLS -> ``PROMPT_MODEL`` (a unary ensemble: the pipeline's vision stages, its stand-in decoder,
   then the prompt stage ``llm_prompt.py``) -> ``PROMPT``; a bad image or query fails here, before
   any token, with INVALID_ARGUMENT;
2. BLS streaming (``exec(decoupled=True)``) -> ``LLM_MODEL`` (a vLLM stage: NVIDIA's vllm backend
   or tritonkit's local one) with ``text_input`` = the prompt, ``stream`` = true and the sampling
   parameters (``SAMPLING_PARAMETERS`` from the config, updated by the request's own
   ``SAMPLING_PARAMETERS`` input; ``max_tokens`` = the request's ``MAX_TOKENS``, else
   ``DEFAULT_MAX_TOKENS``; at most ``MAX_TOKENS_LIMIT``);
3. each engine response's ``text_output`` (the text of one generation step: one token, possibly
   empty when the token ends inside a UTF-8 character) goes back at once as one
   ``GENERATED_TEXT`` BYTES [1] response, then a flags-only final response.

**Usage.** When the config declares any of the outputs ``PROMPT_TOKENS`` (INT32 [1]),
``COMPLETION_TOKENS`` (INT32 [1]) and ``FINISH_REASON`` (BYTES [1]), the front asks the LLM stage
for its own counts and finish reason (``return_num_input_tokens``, ``return_num_output_tokens``,
``return_finish_reason``: the stage must declare those inputs, as NVIDIA's vllm backend does since
it has additional outputs) and sends them with the answer's **last** piece (the engine's step
that carries a finish reason): the prompt's tokens as the engine saw them, all the tokens it
generated, and why it stopped (``stop``, ``length``). Every response still carries
``GENERATED_TEXT``, so a client that reads only that (plain gRPC, ``generate_stream``) sees the
same stream as before; one that asks for the counts finds them on the last piece.

**The request's sampling.** The optional input ``SAMPLING_PARAMETERS`` (what the OpenAI front
fills when the spec's ``openai:`` mapping names it as ``sampling_parameters_input``) is a JSON
object of vLLM sampling parameters from the client, so it is untrusted: at most
``MAX_SAMPLING_BYTES``, an object, only the keys in ``REQUEST_SAMPLING_KEYS`` (``max_tokens``
goes through ``MAX_TOKENS``, held to its limit), else INVALID_ARGUMENT for that request. Its
values are the vLLM stage's to judge: a refusal there before any token (a schema the engine
cannot compile, a bad value) comes back as INVALID_ARGUMENT with the stage's reason, not as an
internal error.

**Triton 2.51's stub and BLS streams** (``bls_streams.py``, shipped beside this file, says why).
Threads reading BLS streams while another thread starts one can deadlock the stub for good, and a
finished stream let go of at the wrong moment is freed without the GIL and kills it. So the front
reads each request's engine stream in ``execute`` itself, one request at a time per instance
(concurrency = the ``instance_group`` count: each instance is a stub process of its own), lets go
of a finished stream only after the stub's cleanup of it has run (``BlsStream.close``), and sends
each response only the outputs its request names (Triton names every output when the client
names none); the engine is asked for counts only when the request wants one, and a response's
tensors stay referenced until ``send`` has returned.

Why a decoupled Python front and not an ensemble ending in the engine: see ``text_stream.py``
(Triton 2.51's ensemble scheduler never tells a running step that the client left, and crashed
with a decoupled last step).

**Cancellation.** The front checks before forwarding each token whether its client left (gRPC
cancel, HTTP connection closed), and then stops forwarding. Telling the engine needs
``InferenceResponseIterator.cancel()``, which Triton's Python backend gained after 2.51
(python_backend PR #398, 2025): where the stub has it the front calls it and the engine aborts the
request; on 2.51 it has not, so the engine generates the rest of the answer (at most
``max_tokens``) for nobody. The front then reads and drops those tokens (so the BLS request ends
cleanly) and counts them: ``tritonkit_llm_tokens_after_cancel_total`` (responses: a lower bound
in tokens, as the engine merges the tokens of a reader that lags), and the log line
``<model>: the client cancelled after N tokens; the engine generated M more``. ``MAX_TOKENS_LIMIT``
bounds that waste per abandoned stream.

Config parameters: ``PROMPT_MODEL``, ``PROMPT_INPUTS`` (comma-separated), ``LLM_MODEL``,
``SAMPLING_PARAMETERS`` (a JSON object; default greedy ``{"temperature": 0}``),
``DEFAULT_MAX_TOKENS`` (48), ``MAX_TOKENS_LIMIT`` (256). Counters as ``text_stream.py``'s
(pieces = forwarded tokens' responses), plus the one above. Needs numpy,
``triton_python_backend_utils`` and its siblings ``text_stream.py`` and ``bls_streams.py`` (the
spec's ``files:``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
from bls_streams import BlsStream, release_pending, requested_outputs  # shipped beside model.py
from text_stream import (  # shipped beside model.py
    _METRICS_LOCK,
    StageError,
    _Counters,
    _int_parameter,
    max_tokens,
)

try:
    import triton_python_backend_utils as pb_utils
except ImportError:  # imported outside Triton: tests pass a stand-in to LlmFront
    pb_utils = None

__all__ = ["EngineError", "LlmFront", "StageError", "request_sampling", "sampling_parameters"]

OUTPUT = "GENERATED_TEXT"
PROMPT = "PROMPT"
DEFAULT_SAMPLING = {"temperature": 0}
#: the optional input with the request's own sampling parameters (JSON), and what it may set
SAMPLING_INPUT = "SAMPLING_PARAMETERS"
REQUEST_SAMPLING_KEYS = frozenset(
    {"temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty",
     "repetition_penalty", "seed", "stop", "stop_token_ids", "min_tokens", "ignore_eos",
     "logit_bias", "structured_outputs", "guided_decoding"}
)  # fmt: skip
MAX_SAMPLING_BYTES = 1 << 20
#: how tritonkit's local vLLM backend words its refusal of a request's sampling (it answers
#: INVALID_ARG, which Triton 2.51's BLS hands back as INTERNAL; NVIDIA's backend answers such a
#: request with a code-less "Error generating stream", which stays an internal error here)
_SAMPLING_REFUSED = re.compile(
    r"sampling[_ ]parameter|structured_outputs|guided_decoding|request was refused"
)
#: output of the front -> (the engine's flag input that asks for it, the engine's output)
USAGE_OUTPUTS = {
    "PROMPT_TOKENS": ("return_num_input_tokens", "num_input_tokens"),
    "COMPLETION_TOKENS": ("return_num_output_tokens", "num_output_tokens"),
    "FINISH_REASON": ("return_finish_reason", "finish_reason"),
}


class EngineError(RuntimeError):
    """The prompt model or the LLM stage failed for a reason other than the client's input."""


def sampling_parameters(base: dict[str, Any], limit: int) -> str:
    """The JSON string the vLLM stage reads in ``sampling_parameters``: ``base`` with ``max_tokens``."""
    return json.dumps({**base, "max_tokens": limit})


def request_sampling(tensor: Any) -> dict[str, Any]:
    """The request's ``SAMPLING_PARAMETERS`` (BYTES [1], a client's JSON object), checked:
    StageError (INVALID_ARGUMENT) for anything else; ``{}`` when the input is absent."""
    if tensor is None:
        return {}
    values = np.asarray(tensor).ravel()
    if values.size != 1:
        raise StageError(f"{SAMPLING_INPUT} must hold one JSON object, got {values.size} elements")
    raw = values[0]
    data = raw if isinstance(raw, bytes) else str(raw).encode("utf-8")
    if len(data) > MAX_SAMPLING_BYTES:
        raise StageError(f"{SAMPLING_INPUT} is {len(data)} bytes; at most {MAX_SAMPLING_BYTES}")
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise StageError(f"{SAMPLING_INPUT} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise StageError(f"{SAMPLING_INPUT} must be a JSON object, got {type(value).__name__}")
    if "max_tokens" in value:
        raise StageError(f"{SAMPLING_INPUT} may not set max_tokens: send it in MAX_TOKENS")
    unknown = sorted(str(key) for key in value if key not in REQUEST_SAMPLING_KEYS)
    if unknown:
        raise StageError(
            f"{SAMPLING_INPUT} takes {', '.join(sorted(REQUEST_SAMPLING_KEYS))}; not {', '.join(unknown)}"
        )
    return value


@dataclass
class _Progress:
    """One stream so far: responses sent, engine responses after the client left (None while it
    is there), and whether the engine was told to stop."""

    sent: int = 0
    after: int | None = None
    engine_told: bool = False
    #: the outputs this stream's request asked for, and the usage outputs among them
    wanted: frozenset[str] = frozenset()
    usage: tuple[str, ...] = ()
    #: the engine's own counts and finish reason, when the front relays them
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = ""
    #: the request set its own sampling (a stage's refusal before any token is then its fault)
    own_sampling: bool = False


class _LlmCounters(_Counters):
    """text_stream's counters, plus the tokens the engine made after the client left."""

    def __init__(self, pb: Any, labels: dict[str, str]) -> None:
        super().__init__(pb, labels)
        self.wasted = None
        try:
            family = pb.MetricFamily
            self._wasted_family = family(
                "tritonkit_llm_tokens_after_cancel_total",
                "Responses the LLM stage generated after the client had cancelled (BLS could not cancel)",
                family.COUNTER,
            )
            self.wasted = self._wasted_family.Metric(labels=labels)
        except Exception:  # noqa: BLE001 - metrics are optional (--allow-metrics=false)
            self.wasted = None

    def add(self, metric: Any, value: float) -> None:
        if metric is not None and value:
            with _METRICS_LOCK:  # see text_stream: concurrent updates crash Triton 2.51
                metric.increment(value)


class LlmFront:
    """The decoupled front for one model instance (``pb`` is triton_python_backend_utils)."""

    def __init__(self, args: dict[str, Any], config: dict[str, Any], pb: Any) -> None:
        self.pb = pb
        self.name = str(config.get("name", args.get("model_name", "llm_front")))
        params = config.get("parameters", {})

        def text(key: str, default: str = "") -> str:
            return str(params.get(key, {}).get("string_value", "")) or default

        self.input_names = [str(i["name"]) for i in config.get("input", [])]
        self.outputs = frozenset(str(o["name"]) for o in config.get("output", []))
        self.usage = [name for name in USAGE_OUTPUTS if name in self.outputs]
        self.prompt_model = text("PROMPT_MODEL")
        self.prompt_inputs = [n.strip() for n in text("PROMPT_INPUTS").split(",") if n.strip()]
        self.llm_model = text("LLM_MODEL")
        try:
            if not self.prompt_model or not self.llm_model:
                raise StageError("parameters PROMPT_MODEL and LLM_MODEL are required")
            self.default_tokens = _int_parameter(config, "DEFAULT_MAX_TOKENS", 48)
            self.token_limit = _int_parameter(config, "MAX_TOKENS_LIMIT", 256)
            sampling = json.loads(text("SAMPLING_PARAMETERS", json.dumps(DEFAULT_SAMPLING)))
            if not isinstance(sampling, dict) or "max_tokens" in sampling:
                raise StageError("parameter SAMPLING_PARAMETERS must be a JSON object without max_tokens")
            if not 1 <= self.default_tokens <= self.token_limit:
                raise StageError("DEFAULT_MAX_TOKENS must be between 1 and MAX_TOKENS_LIMIT")
        except (StageError, ValueError) as exc:  # json.JSONDecodeError and float() are ValueErrors
            raise pb.TritonModelException(f"{self.name}: {exc}") from None
        self.sampling: dict[str, Any] = sampling
        labels = {"model": self.name, "instance": str(args.get("model_instance_name", self.name))}
        self.counters = _LlmCounters(pb, labels)

    # -- Triton entry points ------------------------------------------------------------------

    def stream(self, requests: list[Any]) -> None:
        for request in requests:
            inputs = {}
            for name in self.input_names:
                tensor = self.pb.get_input_tensor_by_name(request, name)
                if tensor is not None:  # MAX_TOKENS is optional
                    inputs[name] = np.array(tensor.as_numpy(), copy=True)
            wanted = requested_outputs(request, self.outputs)
            progress = _Progress(wanted=wanted, usage=tuple(n for n in self.usage if n in wanted))
            # here, in execute: one stream at a time per instance (see bls_streams.py)
            self._stream(inputs, request.get_response_sender(), progress)

    def finalize(self) -> None:
        """Nothing to wait for: every stream ended in ``execute``."""

    # -- one stream ---------------------------------------------------------------------------

    def _limit(self, inputs: dict[str, np.ndarray]) -> int:
        limit = max_tokens(inputs.get("MAX_TOKENS"))
        if limit is None:
            return self.default_tokens
        if limit > self.token_limit:
            raise StageError(f"MAX_TOKENS is {limit}; this pipeline generates at most {self.token_limit}")
        return limit

    def _prompt(self, inputs: dict[str, np.ndarray]) -> str:
        pb = self.pb
        request = pb.InferenceRequest(
            model_name=self.prompt_model,
            inputs=[pb.Tensor(name, inputs[name]) for name in self.prompt_inputs if name in inputs],
            requested_output_names=[PROMPT],
        )
        response = request.exec()
        if response.has_error():
            error = response.error()
            message = str(error.message())
            # Triton 2.51's BLS hands a stage's INVALID_ARG back as INTERNAL (measured: see
            # text_stream.py); the stages' messages name the input they refuse.
            if error.code() == pb.TritonError.INVALID_ARG or any(
                re.search(rf"\b{re.escape(name)}\b", message) for name in self.prompt_inputs
            ):
                raise StageError(message)
            raise EngineError(f"{self.prompt_model}: {message}")
        value = pb.get_output_tensor_by_name(response, PROMPT).as_numpy().ravel()[0]
        return value.decode("utf-8") if isinstance(value, bytes) else str(value)

    def _engine_request(
        self, prompt: str, limit: int, progress: _Progress, own: dict[str, Any] | None = None
    ) -> Any:
        pb = self.pb
        text = np.array([prompt.encode("utf-8")], dtype=np.object_)
        merged = {**self.sampling, **(own or {})}
        sampling = np.array([sampling_parameters(merged, limit).encode("utf-8")], dtype=np.object_)
        yes = np.array([True], dtype=np.bool_)
        # the finish reason marks the last piece, so it is asked whenever any count is relayed
        asked = list(USAGE_OUTPUTS) if progress.usage else []
        return pb.InferenceRequest(
            model_name=self.llm_model,
            inputs=[
                pb.Tensor("text_input", text),
                pb.Tensor("stream", yes),
                pb.Tensor("sampling_parameters", sampling),
                pb.Tensor("exclude_input_in_output", yes),
                *(pb.Tensor(USAGE_OUTPUTS[name][0], yes) for name in asked),
            ],
            requested_output_names=["text_output", *(USAGE_OUTPUTS[name][1] for name in asked)],
        )

    @staticmethod
    def _usage_values(progress: _Progress) -> dict[str, np.ndarray]:
        """The last piece's extra outputs: the engine's counts and finish reason, as asked for."""
        values = {
            "PROMPT_TOKENS": np.array([progress.prompt_tokens], dtype=np.int32),
            "COMPLETION_TOKENS": np.array([progress.completion_tokens], dtype=np.int32),
            "FINISH_REASON": np.array([progress.finish_reason.encode("utf-8")], dtype=np.object_),
        }
        return {name: values[name] for name in progress.usage}

    def _count(self, response: Any, progress: _Progress) -> None:
        """Add one engine response's counts (each response counts the tokens it carries)."""
        get = self.pb.get_output_tensor_by_name
        prompt = get(response, "num_input_tokens")
        if prompt is not None:
            progress.prompt_tokens = int(prompt.as_numpy().ravel()[0])
        completion = get(response, "num_output_tokens")
        if completion is not None:
            progress.completion_tokens += int(completion.as_numpy().sum())
        reason = get(response, "finish_reason")
        if reason is not None:
            value = reason.as_numpy().ravel()[0]
            text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
            if text and text != "None":
                progress.finish_reason = text

    def _send_piece(self, sender: Any, text: str, progress: _Progress, extra: dict[str, np.ndarray]) -> None:
        """One response with the outputs the request asked for (see "Only the outputs the client
        asked for": ``tensors`` stays referenced here until ``send`` has returned)."""
        values = {OUTPUT: np.array([text.encode("utf-8")], dtype=np.object_), **extra}
        tensors = [self.pb.Tensor(name, value) for name, value in values.items() if name in progress.wanted]
        sender.send(self.pb.InferenceResponse(tensors))
        del tensors  # released here, holding the GIL, after the stub dropped what nobody asked for

    def _stream(self, inputs: dict[str, np.ndarray], sender: Any, progress: _Progress) -> None:
        pb = self.pb
        final = pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        self.counters.add(self.counters.active, 1)
        try:
            limit = self._limit(inputs)
            own = request_sampling(inputs.get(SAMPLING_INPUT))
            progress.own_sampling = bool(own)
            prompt = self._prompt(inputs)
            cancelled = sender.is_cancelled()
            # this request's first is_cancelled() went through the stub's utility thread (only a
            # true answer is cached): the streams of clients that left before have been cleaned
            # up, so they may go now (bls_streams.py, "Frees without the GIL")
            release_pending()
            if cancelled:
                self._cancelled(sender, progress)
                return
            with BlsStream(self._engine_request(prompt, limit, progress, own), sender) as responses:
                self._relay(responses, sender, progress)
            if progress.after is not None:
                self._cancelled(sender, progress)
                return
            sender.send(flags=final)
        except StageError as exc:
            sender.send(self._error(str(exc), pb.TritonError.INVALID_ARG), flags=final)
        except Exception as exc:  # noqa: BLE001 - every stream must end, with an answer
            failure = f"{self.name}: stream failed after {progress.sent} tokens: {type(exc).__name__}: {exc}"
            pb.Logger.log_error(failure)
            self._send_quietly(sender, self._error(failure, pb.TritonError.INTERNAL))
        finally:
            self.counters.add(self.counters.active, -1)

    def _relay(self, responses: Any, sender: Any, progress: _Progress) -> None:
        """Forward the engine's text, one response per step, until its stream ends."""
        for response in responses:
            if response.has_error():
                if progress.after is not None:  # the engine's CANCELLED answer, or an error nobody reads
                    break
                error = response.error()
                message = f"{self.llm_model}: {error.message()}"
                refused = error.code() == self.pb.TritonError.INVALID_ARG or _SAMPLING_REFUSED.search(message)
                if progress.own_sampling and not progress.sent and refused:
                    raise StageError(message)  # the request's sampling, refused by the stage
                raise EngineError(message)
            if progress.usage:
                self._count(response, progress)
            tensor = self.pb.get_output_tensor_by_name(response, "text_output")
            if tensor is None:  # the flags-only final response of the BLS stream
                continue
            if progress.after is not None:
                progress.after += 1  # 2.51: the engine goes on; read and drop so the request ends cleanly
                continue
            if sender.is_cancelled():
                progress.after = 1
                cancel = getattr(responses, "cancel", None)  # Triton's Python backend after 2.51
                if cancel is not None:
                    cancel()
                    progress.engine_told = True
                continue
            value = tensor.as_numpy().ravel()
            text = "".join(v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in value)
            # Every step goes out, also one whose token ends inside a character (empty text): one
            # response per generated token, as the engine streams them.
            # the engine's step that says why it stopped is the last: it carries the counts
            last = bool(progress.usage) and bool(progress.finish_reason)
            self._send_piece(sender, text, progress, self._usage_values(progress) if last else {})
            progress.sent += 1
            self.counters.add(self.counters.pieces, 1)

    def _error(self, message: str, code: Any) -> Any:
        return self.pb.InferenceResponse(error=self.pb.TritonError(message, code))

    def _cancelled(self, sender: Any, progress: _Progress) -> None:
        after = progress.after or 0
        self.counters.add(self.counters.cancelled, 1)
        self.counters.add(self.counters.wasted, after)
        how = "the engine was told to stop" if progress.engine_told else "Triton's BLS could not cancel it"
        self.pb.Logger.log_info(
            f"{self.name}: the client cancelled after {progress.sent} tokens; "
            f"the engine generated {after} more ({how})"
        )
        self._send_quietly(sender, self._error("cancelled by the client", self.pb.TritonError.CANCELLED))

    def _send_quietly(self, sender: Any, response: Any) -> None:
        try:
            sender.send(response, flags=self.pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        except Exception:  # noqa: BLE001 - the stream may already be closed on the server
            pass


class TritonPythonModel:
    """Triton entry point; one instance per configured model instance (decoupled)."""

    def initialize(self, args: dict[str, Any]) -> None:
        config = json.loads(args["model_config"])
        if not pb_utils.using_decoupled_model_transaction_policy(config):
            raise pb_utils.TritonModelException(
                f"{config.get('name')}: the LLM front streams tokens: set model_transaction_policy "
                "{ decoupled: true }"
            )
        self.front = LlmFront(args, config, pb_utils)

    def execute(self, requests: list[Any]) -> None:
        self.front.stream(requests)

    def finalize(self) -> None:
        self.front.finalize()
