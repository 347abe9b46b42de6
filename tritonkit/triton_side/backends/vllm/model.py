"""A Python-based Triton backend named ``vllm``: the vLLM engine behind tritonserver, on CPU.

Triton loads ``<backend-directory>/vllm/model.py`` for every model whose config says
``backend: "vllm"``. It is written here to the documented contract of NVIDIA's vLLM backend
(triton-inference-server/vllm_backend), so a repository built for NVIDIA's ``-vllm-python-py3``
image serves unchanged on a CPU-only box:

- ``<version>/model.json`` holds the engine arguments, passed to ``AsyncEngineArgs`` as written;
  ``multi_lora.json`` names the LoRA adapters when ``enable_lora`` is true; the config parameter
  ``STRUCTURED_OUTPUTS_CONFIG`` (a JSON object) is the engine's ``structured_outputs_config`` when
  ``model.json`` has none (NVIDIA's backend ignores it; a release whose vLLM predates the engine
  argument would refuse it in ``model.json``);
- auto-complete adds the backend's inputs and outputs, ``max_batch_size: 0`` and the decoupled
  transaction policy (vLLM batches on its own; responses stream);
- inputs ``text_input``, ``stream``, ``sampling_parameters`` (JSON; numbers may arrive as
  strings, as genai-perf sends them), ``exclude_input_in_output`` and the ``return_*`` flags;
  outputs ``text_output`` and the additional outputs ``finish_reason``, ``cumulative_logprob``,
  ``logprobs``, ``num_input_tokens``, ``num_output_tokens``;
- a cancelled request (client cancel, dropped stream) is aborted in the engine;
- a malformed request gets an error for itself only; the engine keeps serving the others.

What happens when the engine dies (an out-of-memory kill, a crashed worker) or wedges: see
"A dead engine" below: the model answers UNAVAILABLE at once and its gauge
``tritonkit_engine_alive`` drops to 0; ``tritonkit serve`` (its healer) then unloads the model,
so Triton's model and server readiness turn false, and loads it again.

What is tritonkit's own (the local serving of one repository):
- an absolute ``model`` (or ``tokenizer``, LoRA) path of the form
  ``<anything>/<model name>/<version>/<rest>`` that does not exist here is read from this
  model's own version directory + ``<rest>`` (``tritonkit build`` writes ``/models/...`` paths,
  NVIDIA's documented mount);
- the KV cache is sized for the machine when neither ``kv_cache_memory_bytes`` nor
  ``VLLM_CPU_KVCACHE_SPACE`` sizes it (vLLM's CPU default asks for 92% of NUMA node 0);
- responses are sent from the engine's event loop (a sender thread delivered whole streams in
  one burst on a busy 2-core box), and start-up progress goes to Triton's log;
- the gauge ``tritonkit_generation_active`` (labels ``model``, ``instance``: the same as the
  example pipelines' decoders) counts the requests in the engine now, so a soak can see that
  every cancelled or failed request left it.

This file runs inside the Python backend stub with the ``llm`` environment's interpreter; it
imports nothing from tritonkit.
"""

from __future__ import annotations

import asyncio
import json
import locale
import math
import os
import subprocess
import sys
import threading
import time
import types
import typing
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils

ENGINE_ARGS_FILE = "model.json"
#: config parameter: the engine's structured_outputs_config when model.json has none
STRUCTURED_OUTPUTS_PARAMETER = "STRUCTURED_OUTPUTS_CONFIG"
LORA_FILE = "multi_lora.json"
LOG_PREFIX = "[tritonkit vllm]"
ACTIVE_METRIC = "tritonkit_generation_active"
ALIVE_METRIC = "tritonkit_engine_alive"

#: the backend's inputs, as NVIDIA's vllm backend declares them (auto-complete adds the missing)
INPUTS: tuple[dict[str, Any], ...] = (
    {"name": "text_input", "data_type": "TYPE_STRING", "dims": [1]},
    {"name": "stream", "data_type": "TYPE_BOOL", "dims": [1], "optional": True},
    {"name": "sampling_parameters", "data_type": "TYPE_STRING", "dims": [1], "optional": True},
    {"name": "exclude_input_in_output", "data_type": "TYPE_BOOL", "dims": [1], "optional": True},
    {"name": "return_finish_reason", "data_type": "TYPE_BOOL", "dims": [1], "optional": True},
    {"name": "return_cumulative_logprob", "data_type": "TYPE_BOOL", "dims": [1], "optional": True},
    {"name": "return_logprobs", "data_type": "TYPE_BOOL", "dims": [1], "optional": True},
    {"name": "return_num_input_tokens", "data_type": "TYPE_BOOL", "dims": [1], "optional": True},
    {"name": "return_num_output_tokens", "data_type": "TYPE_BOOL", "dims": [1], "optional": True},
)
OUTPUTS: tuple[dict[str, Any], ...] = (
    {"name": "text_output", "data_type": "TYPE_STRING", "dims": [-1]},
    {"name": "finish_reason", "data_type": "TYPE_STRING", "dims": [-1]},
    {"name": "cumulative_logprob", "data_type": "TYPE_FP32", "dims": [-1]},
    {"name": "logprobs", "data_type": "TYPE_STRING", "dims": [-1]},
    {"name": "num_input_tokens", "data_type": "TYPE_UINT32", "dims": [1]},
    {"name": "num_output_tokens", "data_type": "TYPE_UINT32", "dims": [-1]},
)
ADDITIONAL_OUTPUTS = (
    "return_finish_reason",
    "return_cumulative_logprob",
    "return_logprobs",
    "return_num_input_tokens",
    "return_num_output_tokens",
)

#: how often the engine's health is looked at (its processes, vLLM's own error state, progress)
HEALTH_PERIOD_S = 0.5
#: requests in the engine and no output for this long: the engine counts as wedged (the
#: environment variable of the same name, in seconds, chooses another; 0 turns the check off)
STALL_ENV = "TRITONKIT_VLLM_STALL_SECONDS"
DEFAULT_STALL_S = 120.0

#: the KV cache tritonkit gives an unsized engine: this share of available memory, within bounds
KV_CACHE_SHARE = 0.10
KV_CACHE_MIN_BYTES = 256 << 20
KV_CACHE_MAX_BYTES = 4 << 30


def _use_utf8_locale() -> None:
    """Read and write text as UTF-8, as vLLM, transformers and torch expect.

    The stub's embedded Python starts isolated, in the C locale whatever the environment says,
    so ``open()`` would default to ASCII (torch fails on its UTF-8 templates). Python reads the
    locale's encoding at each ``open()``, so switching LC_CTYPE here is enough.
    """
    if locale.getpreferredencoding(False).lower().replace("-", "") == "utf8":
        return
    for name in ("C.UTF-8", "C.utf8", "en_US.UTF-8"):
        try:
            locale.setlocale(locale.LC_CTYPE, name)
            return
        except locale.Error:
            continue


_use_utf8_locale()


#: run beside the stub: when the stub dies without finalize() (SIGKILL, a crash), the engine's
#: processes would live on (vLLM's EngineCore does not watch its parent); this kills them then.
_WATCHDOG = """
import os, signal, sys, time
stub, pids = int(sys.argv[1]), [int(p) for p in sys.argv[2:]]
while os.getppid() == stub:
    time.sleep(1.0)
for pid in pids:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
"""


def engine_processes(root: int) -> list[int]:
    """Every process below ``root`` (the engine core and its workers), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text(encoding="ascii", errors="replace").rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: list[int] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return sorted(found)


def process_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, dead but not yet reaped, counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return False
    fields = stat.rsplit(")", 1)[1].split()
    return bool(fields) and fields[0] not in ("Z", "X", "x")


def stall_seconds(environ: dict[str, str] | os._Environ[str]) -> float | None:
    """How long requests may see no output before the engine counts as wedged (None: never)."""
    raw = environ.get(STALL_ENV, "").strip()
    try:
        value = float(raw) if raw else DEFAULT_STALL_S
    except ValueError:
        value = DEFAULT_STALL_S
    return value if value > 0 and math.isfinite(value) else None


class EngineHealth:
    """Whether an engine is alive: its processes, vLLM's own error flag, and progress.

    ``problem()`` says why the engine is dead or wedged, or None while it is fine. Progress:
    while requests are in the engine, some output must come at least every ``stall`` seconds
    (a step that never ends: a hung worker, a stopped process).
    """

    def __init__(self, pids: list[int], *, stall: float | None, clock: Any = time.monotonic) -> None:
        self.pids = list(pids)
        self.stall = stall
        self._clock = clock
        self._busy_since: float | None = None
        self._last_output = clock()

    def busy(self, requests: int) -> None:
        """The engine holds ``requests`` requests now (0: idle, no progress expected)."""
        if requests <= 0:
            self._busy_since = None
        elif self._busy_since is None:
            self._busy_since = self._last_output = self._clock()

    def progressed(self) -> None:
        self._last_output = self._clock()

    def problem(self, engine: Any) -> str | None:
        for pid in self.pids:
            if not process_alive(pid):
                return f"engine process {pid} is gone"
        if engine is not None and bool(getattr(engine, "errored", False)):
            return "the engine reported itself dead (EngineDeadError)"
        if self.stall is not None and self._busy_since is not None:
            quiet = self._clock() - self._last_output
            if quiet > self.stall:
                return f"no output for {quiet:.0f} s while requests were in the engine"
        return None


class BadRequest(ValueError):
    """A request this backend refuses (Triton's INVALID_ARG): said to that client only."""


# -- helpers that need no engine ------------------------------------------------------------


def map_local_path(value: str, *, model_name: str, version_dir: Path) -> tuple[str, bool]:
    """``value``, or where it lies in this model's directory when it is a missing absolute path.

    ``<anything>/<model name>/<N>/<rest>`` -> ``<model dir>/<N>/<rest>`` for the first such pair,
    ``N`` any version number: tritonkit's served-path rule (``tritonkit.kinds.paths.local_path``),
    copied because this file runs inside Triton; a unit test holds the two to the same table.
    Returns the path and whether it was mapped (only onto a path that exists). Relative paths
    and hub ids are returned unchanged.
    """
    path = Path(value)
    if not path.is_absolute() or path.exists():
        return value, False
    parts = path.parts
    for i in range(len(parts) - 1):
        if parts[i] == model_name and parts[i + 1].isdigit():
            local = version_dir.parent.joinpath(*parts[i + 1 :])
            return (str(local), True) if local.exists() else (value, False)
    return value, False


def meminfo_available_bytes() -> int | None:
    """MemAvailable from /proc/meminfo, in bytes (None where there is no such file)."""
    try:
        for line in Path("/proc/meminfo").read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def default_kv_cache_bytes(available: int | None) -> int:
    """The most KV cache tritonkit gives an unsized engine: 10% of available memory, 256 MiB..4 GiB."""
    if available is None:
        return KV_CACHE_MIN_BYTES
    return int(min(KV_CACHE_MAX_BYTES, max(KV_CACHE_MIN_BYTES, available * KV_CACHE_SHARE)))


#: vLLM's max_num_seqs when model.json does not set it (its CPU default)
DEFAULT_MAX_NUM_SEQS = 256
_DTYPE_BYTES = {"float32": 4, "float": 4, "float64": 8, "double": 8}


def kv_bytes_per_token(hf_config: dict[str, Any], dtype: str | None) -> int | None:
    """Key + value bytes one token takes in every layer, from a Hugging Face config.json."""
    try:
        layers = int(hf_config["num_hidden_layers"])
        heads = int(hf_config["num_attention_heads"])
        kv_heads = int(hf_config.get("num_key_value_heads") or heads)
        head_dim = int(hf_config.get("head_dim") or int(hf_config["hidden_size"]) // heads)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None
    if dtype in (None, "auto"):
        dtype = hf_config.get("torch_dtype") or hf_config.get("dtype")
    name = str(dtype)
    return 2 * layers * kv_heads * head_dim * _DTYPE_BYTES.get(name.replace("torch.", ""), 2)


def engine_kv_cache_bytes(engine_config: dict[str, Any], available: int | None) -> int:
    """A KV cache for this engine on this machine: what max_num_seqs full sequences take, capped.

    The cap is default_kv_cache_bytes(available); never less than one full sequence (vLLM
    refuses a cache that cannot hold max_model_len tokens) nor 64 MiB.
    """
    cap = default_kv_cache_bytes(available)
    model = engine_config.get("model")
    hf_path = Path(model) / "config.json" if isinstance(model, str) else None
    try:
        hf_config = json.loads(hf_path.read_text(encoding="utf-8")) if hf_path and hf_path.is_file() else None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        hf_config = None
    if not isinstance(hf_config, dict):
        return cap
    per_token = kv_bytes_per_token(hf_config, engine_config.get("dtype"))
    max_len = engine_config.get("max_model_len") or hf_config.get("max_position_embeddings")
    if per_token is None or not isinstance(max_len, int):
        return cap
    sequences = int(engine_config.get("max_num_seqs") or DEFAULT_MAX_NUM_SEQS)
    one_sequence = per_token * max_len
    return int(max(64 << 20, one_sequence + (16 << 20), min(cap, one_sequence * sequences)))


def _strip_optional(hint: Any) -> Any:
    """``int | None`` -> ``int``; any other hint unchanged."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return args[0] if len(args) == 1 else hint
    return hint


def _as_bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0"):
        return value.strip().lower() in ("true", "1")
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise BadRequest(f"sampling parameter '{key}' must be true or false, got {value!r}")


def _as_int(key: str, value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise BadRequest(f"sampling parameter '{key}' must be an integer, got {value!r}")


def _as_float(key: str, value: Any) -> float:
    if isinstance(value, bool):
        raise BadRequest(f"sampling parameter '{key}' must be a number, got {value!r}")
    try:
        number = float(value.strip()) if isinstance(value, str) else float(value)
    except (TypeError, ValueError):
        raise BadRequest(f"sampling parameter '{key}' must be a number, got {value!r}") from None
    if not math.isfinite(number):
        raise BadRequest(f"sampling parameter '{key}' must be finite, got {value!r}")
    return number


def coerce_value(key: str, value: Any, hint: Any) -> Any:
    """A JSON value for SamplingParams field ``key``; numbers and booleans may come as strings."""
    target = _strip_optional(hint)
    if value is None:
        return None
    if target is bool:
        return _as_bool(key, value)
    if target is int:
        return _as_int(key, value)
    if target is float:
        return _as_float(key, value)
    if target is str and not isinstance(value, str):
        raise BadRequest(f"sampling parameter '{key}' must be a string, got {value!r}")
    return value


#: the constraints of vLLM's StructuredOutputsParams (one per request) and its other options
STRUCTURED_CONSTRAINTS = ("json", "regex", "choice", "grammar", "json_object", "structural_tag")
_STRUCTURED_OPTIONS = (
    "disable_any_whitespace",
    "disable_additional_properties",
    "whitespace_pattern",
    "backend",
)


def structured_outputs(value: Any) -> dict[str, Any]:
    """The ``structured_outputs`` (or ``guided_decoding``) sampling parameter, checked: an object,
    or that object as a JSON string (NVIDIA's backend takes the string form), with exactly one
    constraint. The engine checks the constraint itself (a schema it cannot compile is its verdict
    on that request)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise BadRequest(
                f"structured_outputs is not valid JSON: {exc.msg} at position {exc.pos}"
            ) from None
    if not isinstance(value, dict):
        raise BadRequest(f"structured_outputs must be a JSON object, got {type(value).__name__}")
    unknown = sorted(k for k in value if k not in STRUCTURED_CONSTRAINTS + _STRUCTURED_OPTIONS)
    if unknown:
        raise BadRequest(
            f"unknown structured_outputs key(s) {', '.join(map(repr, unknown))}; "
            f"give one of {', '.join(STRUCTURED_CONSTRAINTS)}"
        )
    given = [k for k in STRUCTURED_CONSTRAINTS if value.get(k) is not None]
    if len(given) != 1:
        raise BadRequest(
            f"structured_outputs takes exactly one of {', '.join(STRUCTURED_CONSTRAINTS)}, got "
            f"{', '.join(given) or 'none'}"
        )
    backend = value.pop("backend", None)
    if backend not in (None, "auto"):
        raise BadRequest(
            f"structured_outputs.backend {backend!r}: the backend is the engine's choice "
            "(model.json's structured_outputs_config), not a request's"
        )
    if value.get("choice") is not None and not (
        isinstance(value["choice"], list)
        and value["choice"]
        and all(isinstance(c, str) for c in value["choice"])
    ):
        raise BadRequest("structured_outputs.choice must be a non-empty array of strings")
    for key in ("regex", "grammar", "whitespace_pattern", "structural_tag"):
        if value.get(key) is not None and not isinstance(value[key], str):
            raise BadRequest(f"structured_outputs.{key} must be a string")
    schema = value.get("json")
    if schema is not None and not isinstance(schema, (dict, bool, str)):
        raise BadRequest("structured_outputs.json must be a JSON schema (an object)")
    if value.get("json_object") is not None and value["json_object"] is not True:
        raise BadRequest("structured_outputs.json_object must be true")
    return value


def _logit_bias(value: Any) -> dict[int, float]:
    """``{"token id": bias}`` (JSON keys are strings) as vLLM's ``{int: float}``."""
    if not isinstance(value, dict):
        raise BadRequest("sampling parameter 'logit_bias' must be an object of token id: bias")
    out: dict[int, float] = {}
    for key, bias in value.items():
        token = _as_int("logit_bias", key)
        out[token] = _as_float(f"logit_bias[{key}]", bias)
    return out


def parse_sampling_parameters(
    raw: str, field_types: dict[str, Any], *, max_model_len: int
) -> tuple[dict[str, Any], str | None]:
    """The SamplingParams keyword arguments in ``raw`` (JSON), and the LoRA name, if any.

    Raises BadRequest for text that is not a JSON object, keys SamplingParams does not know,
    values of the wrong type and a ``max_tokens`` outside 1..max_model_len.
    """
    try:
        params = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        raise BadRequest(f"sampling_parameters is not valid JSON: {exc.msg} at position {exc.pos}") from None
    if not isinstance(params, dict):
        raise BadRequest(f"sampling_parameters must be a JSON object, got {type(params).__name__}")
    lora_name = params.pop("lora_name", None)
    if lora_name is not None and not isinstance(lora_name, str):
        raise BadRequest(f"sampling parameter 'lora_name' must be a string, got {lora_name!r}")
    guided = params.pop("guided_decoding", None)  # vLLM < 0.11's name, as NVIDIA's backend maps it
    if guided is not None and params.get("structured_outputs") is None:
        params["structured_outputs"] = guided
    unknown = sorted(k for k in params if k not in field_types or k.startswith("_"))
    if unknown:
        raise BadRequest(
            f"unknown sampling parameter(s) {', '.join(map(repr, unknown))}; "
            f"vLLM's SamplingParams takes e.g. max_tokens, temperature, top_p, top_k, seed, stop, "
            f"ignore_eos, logprobs"
        )
    kwargs = {k: coerce_value(k, v, field_types[k]) for k, v in params.items() if v is not None}
    if "structured_outputs" in kwargs:
        kwargs["structured_outputs"] = structured_outputs(kwargs["structured_outputs"])
    if "logit_bias" in kwargs:
        kwargs["logit_bias"] = _logit_bias(kwargs["logit_bias"])
    max_tokens = kwargs.get("max_tokens")
    if max_tokens is not None and not 1 <= max_tokens <= max_model_len:
        raise BadRequest(
            f"max_tokens must be between 1 and the model's max_model_len ({max_model_len}), got {max_tokens}"
        )
    return kwargs, lora_name


def _one_value(request: Any, name: str, what: str) -> Any:
    """The one value of the optional input ``name`` (None when the request leaves it out)."""
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    if tensor is None:
        return None
    values = tensor.as_numpy().reshape(-1)
    if values.size != 1:
        raise BadRequest(f"input '{name}' must hold one {what}, got {values.size} values")
    return values[0]


def _bool_input(request: Any, name: str) -> bool | None:
    value = _one_value(request, name, "boolean")
    return None if value is None else bool(value)


def _string_input(request: Any, name: str) -> str | None:
    value = _one_value(request, name, "string")
    if value is None:
        return None
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise BadRequest(f"input '{name}' is not UTF-8 text") from None
    return str(value)


class _Request:
    """What one Triton request asks for, read and checked before it reaches the engine."""

    def __init__(self, request: Any, *, field_types: dict[str, Any], max_model_len: int) -> None:
        prompt = _string_input(request, "text_input")
        if prompt is None:
            raise BadRequest("the request lacks input 'text_input' (the prompt)")
        if not prompt.strip():
            raise BadRequest("text_input is empty: send a prompt to generate from")
        self.prompt = prompt
        self.stream = bool(_bool_input(request, "stream"))
        exclude = _bool_input(request, "exclude_input_in_output")
        # NVIDIA's contract: the prompt is prepended unless excluded; streaming never prepends.
        self.prepend_input = (not exclude) if exclude is not None else not self.stream
        if self.prepend_input and self.stream:
            raise BadRequest("when streaming, exclude_input_in_output = false is not allowed")
        raw = _string_input(request, "sampling_parameters")
        if raw is None:
            raw = request.parameters() or "{}"
        self.sampling_kwargs, self.lora_name = parse_sampling_parameters(
            raw, field_types, max_model_len=max_model_len
        )
        self.outputs = {name: bool(_bool_input(request, name)) for name in ADDITIONAL_OUTPUTS}


class _ResponseState:
    """How much of each completion earlier streamed responses already carried."""

    def __init__(self) -> None:
        self.text_lens: list[int] | None = None
        self.token_lens: list[int] | None = None
        self.logprob_lens: list[int] | None = None


def _deltas(previous: list[int] | None, current: list[int]) -> list[int]:
    return [0] * len(current) if previous is None else previous


class _Reply:
    """One request's response sender: sends at most one final response, never raises."""

    def __init__(self, sender: Any, logger: Any) -> None:
        self._sender = sender
        self._logger = logger
        self.done = False

    def cancelled(self) -> bool:
        try:
            return bool(self._sender.is_cancelled())
        except Exception:  # noqa: BLE001 - a sender that cannot tell has lost its client
            return True

    def send(self, response: Any, *, final: bool) -> bool:
        """Send ``response``; False when the client is gone (the request should be aborted)."""
        if self.done:
            return False
        flags = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL if final else 0
        try:
            self._sender.send(response, flags=flags)
        except Exception as exc:  # noqa: BLE001 - the client dropped its stream
            self._logger.log_warn(f"{LOG_PREFIX} could not send a response: {exc}")
            self.done = True
            return False
        self.done = final
        return True

    def error(self, message: str, code: int | None = None) -> None:
        """Send ``message`` as the final (error) response, unless one was sent already."""
        if self.done:
            return
        if code is None:
            code = pb_utils.TritonError.INVALID_ARG
        self.send(pb_utils.InferenceResponse(error=pb_utils.TritonError(message, code)), final=True)
        self.done = True


# -- the model ------------------------------------------------------------------------------


class TritonPythonModel:
    """One vLLM engine per Triton model instance, running on its own asyncio event loop."""

    @staticmethod
    def auto_complete_config(auto_complete_model_config: Any) -> Any:
        config = auto_complete_model_config.as_dict()
        have_inputs = {spec["name"] for spec in config.get("input", [])}
        have_outputs = {spec["name"] for spec in config.get("output", [])}
        for spec in INPUTS:
            if spec["name"] not in have_inputs:
                auto_complete_model_config.add_input(spec)
        for spec in OUTPUTS:
            if spec["name"] not in have_outputs:
                auto_complete_model_config.add_output(spec)
        auto_complete_model_config.set_model_transaction_policy({"decoupled": True})
        auto_complete_model_config.set_max_batch_size(0)
        return auto_complete_model_config

    # -- start-up -------------------------------------------------------------------------

    def initialize(self, args: dict[str, Any]) -> None:
        self.logger = pb_utils.Logger
        self.config: dict[str, Any] = json.loads(args["model_config"])
        self.model_name: str = args["model_name"]
        if not pb_utils.using_decoupled_model_transaction_policy(self.config):
            raise pb_utils.TritonModelException(
                f"model '{self.model_name}': the vllm backend streams its responses and needs "
                "'model_transaction_policy { decoupled: true }' in config.pbtxt"
            )
        self.version_dir = Path(args["model_repository"]) / args["model_version"]
        engine_config = self._read_engine_config()
        self.lora_paths = self._read_loras(engine_config)
        self._size_kv_cache(engine_config)
        began = time.monotonic()
        self._log(
            f"starting the vLLM engine for model '{self.model_name}' (model {engine_config.get('model')}); "
            "importing vLLM and starting its engine takes tens of seconds on CPU"
        )

        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.sampling_params import SamplingParams

        self._sampling_params_type = SamplingParams
        self._field_types = {
            name: hint
            for name, hint in typing.get_type_hints(SamplingParams).items()
            if not name.startswith("_")
        }
        try:
            engine_args = AsyncEngineArgs(**engine_config)
        except TypeError as exc:
            raise pb_utils.TritonModelException(
                f"model '{self.model_name}': {self.version_dir / ENGINE_ARGS_FILE} holds an argument "
                f"this vLLM does not know: {exc}"
            ) from exc
        self._tasks: dict[str, asyncio.Task[None]] = {}
        labels = {"model": self.model_name, "instance": str(args.get("model_instance_name", self.model_name))}
        self._active = _ActiveGauge(ACTIVE_METRIC, "Streams being generated now", labels, self.logger)
        self._alive = _ActiveGauge(ALIVE_METRIC, "1 while the vLLM engine runs, 0 after", labels, self.logger)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._engine: Any = None
        self._started = threading.Event()
        self._start_error: BaseException | None = None
        self._stopping = False
        self._thread = threading.Thread(
            target=self._run_loop, args=(engine_args,), name=f"vllm-{self.model_name}", daemon=True
        )
        self._thread.start()
        self._started.wait()
        if self._start_error is not None:
            self._thread.join(timeout=30)
            raise pb_utils.TritonModelException(
                f"model '{self.model_name}': the vLLM engine did not start: {self._start_error}"
            ) from self._start_error
        self.max_model_len = int(self._engine.model_config.max_model_len)
        self._health = EngineHealth(self._engine_pids(), stall=stall_seconds(os.environ))
        self._dead: str | None = None
        self._alive.set(1)
        self._watchdog = self._start_watchdog()
        asyncio.run_coroutine_threadsafe(self._watch(), self._loop)  # type: ignore[arg-type]
        self._log(
            f"vLLM engine for model '{self.model_name}' ready in {time.monotonic() - began:.1f} s "
            f"(max_model_len {self.max_model_len})"
        )

    @staticmethod
    def _engine_pids() -> list[int]:
        """The engine's processes (vLLM names them VLLM::...), else every process below the stub."""
        pids = engine_processes(os.getpid())
        named = []
        for pid in pids:
            try:
                comm = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"VLLM" in comm or b"EngineCore" in comm:
                named.append(pid)
        return named or pids

    def _start_watchdog(self) -> subprocess.Popen[bytes] | None:
        pids = engine_processes(os.getpid())
        if not pids:
            return None
        try:
            return subprocess.Popen(
                [sys.executable, "-c", _WATCHDOG, str(os.getpid()), *map(str, pids)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        except OSError as exc:
            self.logger.log_warn(f"{LOG_PREFIX} no watchdog for the engine's processes: {exc}")
            return None

    def _log(self, message: str) -> None:
        self.logger.log_info(f"{LOG_PREFIX} {message}")

    def _read_engine_config(self) -> dict[str, Any]:
        path = self.version_dir / ENGINE_ARGS_FILE
        if not path.is_file():
            raise pb_utils.TritonModelException(
                f"model '{self.model_name}': '{ENGINE_ARGS_FILE}' with the vLLM engine arguments "
                f"must be in {self.version_dir}"
            )
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise pb_utils.TritonModelException(
                f"model '{self.model_name}': cannot read {path}: {exc}"
            ) from exc
        if not isinstance(config, dict):
            raise pb_utils.TritonModelException(
                f"model '{self.model_name}': {path} must hold a JSON object of engine arguments"
            )
        for key in ("model", "tokenizer"):
            value = config.get(key)
            if isinstance(value, str):
                config[key] = self._local_path(value, key)
        structured = self._structured_outputs_parameter()
        if structured is not None and "structured_outputs_config" not in config:
            config["structured_outputs_config"] = structured
        return config

    def _structured_outputs_parameter(self) -> dict[str, Any] | None:
        """The config parameter ``STRUCTURED_OUTPUTS_CONFIG`` (a JSON object), the engine's
        ``structured_outputs_config`` where ``model.json`` has none: a target release whose vLLM
        predates that engine argument refuses it in ``model.json``, and NVIDIA's backend ignores
        config parameters it does not know."""
        raw = self.config.get("parameters", {}).get(STRUCTURED_OUTPUTS_PARAMETER, {}).get("string_value")
        if not raw:
            return None
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            value = exc
        if not isinstance(value, dict):
            raise pb_utils.TritonModelException(
                f"model '{self.model_name}': parameter {STRUCTURED_OUTPUTS_PARAMETER} must be a JSON "
                f"object (vLLM's structured_outputs_config), got {raw!r}"
            )
        return value

    def _local_path(self, value: str, what: str) -> str:
        mapped, changed = map_local_path(value, model_name=self.model_name, version_dir=self.version_dir)
        if changed:
            self._log(f"model '{self.model_name}': {what} {value} is not on this machine; using {mapped}")
        return mapped

    def _read_loras(self, engine_config: dict[str, Any]) -> dict[str, str] | None:
        if str(engine_config.get("enable_lora", "false")).lower() != "true":
            return None
        path = self.version_dir / LORA_FILE
        try:
            loras = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise pb_utils.TritonModelException(
                f"model '{self.model_name}': enable_lora is true but {path} is missing"
            ) from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise pb_utils.TritonModelException(
                f"model '{self.model_name}': cannot read {path}: {exc}"
            ) from exc
        if not isinstance(loras, dict) or not all(isinstance(v, str) for v in loras.values()):
            raise pb_utils.TritonModelException(
                f"model '{self.model_name}': {path} must map LoRA names to adapter directories"
            )
        resolved = {}
        for name, where in loras.items():
            local = where if Path(where).is_absolute() else str(self.version_dir / where)
            resolved[name] = self._local_path(local, f"LoRA '{name}'")
        return resolved

    def _size_kv_cache(self, engine_config: dict[str, Any]) -> None:
        if engine_config.get("kv_cache_memory_bytes") is not None:
            return
        if os.environ.get("VLLM_CPU_KVCACHE_SPACE", "") != "":
            return
        size = engine_kv_cache_bytes(engine_config, meminfo_available_bytes())
        engine_config["kv_cache_memory_bytes"] = size
        self._log(
            f"model '{self.model_name}': KV cache {size >> 20} MiB (max_num_seqs full sequences, at most "
            "10% of available memory; set kv_cache_memory_bytes in model.json or VLLM_CPU_KVCACHE_SPACE "
            "to choose)"
        )

    def _run_loop(self, engine_args: Any) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        try:
            from vllm.v1.engine.async_llm import AsyncLLM

            self._engine = AsyncLLM.from_engine_args(engine_args)
        except BaseException as exc:  # noqa: BLE001 - reported by initialize()
            self._start_error = exc
            self._started.set()
            loop.close()
            return
        self._started.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    # -- requests -------------------------------------------------------------------------

    def execute(self, requests: list[Any]) -> None:
        loop = self._loop
        for request in requests:
            if self._dead is not None:
                self._send_error(
                    request.get_response_sender(), self._dead_message(), code=pb_utils.TritonError.UNAVAILABLE
                )
                continue
            if loop is None or self._stopping:
                self._send_error(
                    request.get_response_sender(),
                    "the model is unavailable: it is shutting down",
                    code=pb_utils.TritonError.UNAVAILABLE,
                )
                continue
            asyncio.run_coroutine_threadsafe(self._start(request), loop)
        return None

    async def _start(self, request: Any) -> None:
        request_id = uuid.uuid4().hex
        task = asyncio.current_task()
        if task is not None:
            self._tasks[request_id] = task
            self._active.set(len(self._tasks))
            self._health.busy(len(self._tasks))
        reply = _Reply(request.get_response_sender(), self.logger)
        try:
            if self._dead is not None:
                raise _EngineGone(self._dead)
            await self._generate(request, request_id, reply)
        except asyncio.CancelledError:
            # finalize() cancels what still runs (vLLM aborts it: generate's own clean-up), and
            # so does a dead engine (_on_dead): the client hears which.
            if self._dead is not None:
                reply.error(self._dead_message(), pb_utils.TritonError.UNAVAILABLE)
            else:
                reply.error("the model is unavailable: it is shutting down", pb_utils.TritonError.UNAVAILABLE)
            raise
        except _EngineGone:
            reply.error(self._dead_message(), pb_utils.TritonError.UNAVAILABLE)
        except BadRequest as exc:
            reply.error(str(exc))
        except Exception as exc:  # noqa: BLE001 - one request's failure is that request's only
            if _client_error(exc):
                reply.error(f"the request was refused: {exc}")
            elif _engine_dead(exc) or self._dead is not None:
                self._engine_died(f"{type(exc).__name__}: {exc}")
                reply.error(self._dead_message(), pb_utils.TritonError.UNAVAILABLE)
            else:
                why = f"{type(exc).__name__}: {exc}"
                self.logger.log_error(f"{LOG_PREFIX} request {request_id} failed: {why}")
                await self._abort(request_id, "failed")
                reply.error(f"generation failed: {why}", pb_utils.TritonError.INTERNAL)
        finally:
            self._tasks.pop(request_id, None)
            self._active.set(len(self._tasks))
            self._health.busy(len(self._tasks))
            # Whatever happened, the client gets a final response (Triton holds it until then).
            reply.error("the backend ended the request without a response", pb_utils.TritonError.INTERNAL)

    async def _generate(self, request: Any, request_id: str, reply: _Reply) -> None:
        parsed = _Request(request, field_types=self._field_types, max_model_len=self.max_model_len)
        lora = self._lora_request(parsed.lora_name)
        kwargs = parsed.sampling_kwargs
        try:
            if "structured_outputs" in kwargs:
                from vllm.sampling_params import StructuredOutputsParams

                kwargs = {
                    **kwargs,
                    "structured_outputs": StructuredOutputsParams(**kwargs["structured_outputs"]),
                }
            sampling = self._sampling_params_type(**kwargs)
        except Exception as exc:  # noqa: BLE001 - SamplingParams' own checks, whatever they raise
            raise BadRequest(f"invalid sampling_parameters: {exc}") from exc
        prompt = await self._render(parsed.prompt)
        state = _ResponseState()
        last = None
        async for output in self._engine.generate(prompt, sampling, request_id, lora_request=lora):
            if reply.cancelled():
                await self._abort(request_id, "cancelled by the client")
                reply.error("Request was cancelled", pb_utils.TritonError.CANCELLED)
                return
            last = output
            self._health.progressed()
            if parsed.stream:
                response = self._response(output, parsed, state, prepend=False)
                if not reply.send(response, final=output.finished):
                    await self._abort(request_id, "dropped by the client (its stream is gone)")
                    return
        if not parsed.stream:
            if last is None:
                raise RuntimeError("the engine returned no output")
            response = self._response(last, parsed, _ResponseState(), prepend=parsed.prepend_input)
            reply.send(response, final=True)

    async def _render(self, prompt: str) -> Any:
        renderer = getattr(self._engine, "renderer", None)
        if renderer is None or not hasattr(renderer, "render_cmpl_async"):
            return prompt
        try:
            (rendered,) = await renderer.render_cmpl_async([{"prompt": prompt}])
        except Exception as exc:
            if _client_error(exc):  # the prompt is longer than the model takes, ...
                raise BadRequest(str(exc)) from exc
            raise
        return rendered

    def _lora_request(self, name: str | None) -> Any:
        if name is None:
            return None
        if self.lora_paths is None:
            raise BadRequest("LoRA feature is not enabled (enable_lora in model.json)")
        if name not in self.lora_paths:
            raise BadRequest(f"LoRA {name} is not supported, we currently support {sorted(self.lora_paths)}")
        from vllm.lora.request import LoRARequest

        index = list(self.lora_paths).index(name) + 1
        return LoRARequest(name, index, self.lora_paths[name])

    async def _abort(self, request_id: str, why: str) -> None:
        try:
            await self._engine.abort(request_id)
        except Exception as exc:  # noqa: BLE001 - the engine may be gone already
            self.logger.log_warn(f"{LOG_PREFIX} could not abort request {request_id}: {exc}")
            return
        self._log(f"model '{self.model_name}': request {request_id} {why}; aborted in the engine")

    def _response(self, output: Any, parsed: _Request, state: _ResponseState, *, prepend: bool) -> Any:
        completions = list(output.outputs)
        text_lens = _deltas(state.text_lens, [len(c.text) for c in completions])
        prefix = parsed.prompt if prepend else ""
        texts = [
            (prefix + c.text[start:]).encode("utf-8") for c, start in zip(completions, text_lens, strict=True)
        ]
        state.text_lens = [len(c.text) for c in completions]
        tensors = [pb_utils.Tensor("text_output", np.asarray(texts, dtype=np.object_))]
        wants = parsed.outputs
        if wants["return_finish_reason"]:
            reasons = [str(c.finish_reason).encode("utf-8") for c in completions]
            tensors.append(pb_utils.Tensor("finish_reason", np.asarray(reasons, dtype=np.object_)))
        if wants["return_cumulative_logprob"]:
            values = [math.nan if c.cumulative_logprob is None else c.cumulative_logprob for c in completions]
            tensors.append(pb_utils.Tensor("cumulative_logprob", np.asarray(values, dtype=np.float32)))
        if wants["return_logprobs"]:
            logprobs = np.asarray(self._logprobs(completions, state), dtype=np.object_)
            tensors.append(pb_utils.Tensor("logprobs", logprobs))
        if wants["return_num_input_tokens"]:
            count = len(output.prompt_token_ids or ())
            tensors.append(pb_utils.Tensor("num_input_tokens", np.asarray([count], dtype=np.uint32)))
        if wants["return_num_output_tokens"]:
            token_lens = _deltas(state.token_lens, [len(c.token_ids) for c in completions])
            counts = [len(c.token_ids) - start for c, start in zip(completions, token_lens, strict=True)]
            state.token_lens = [len(c.token_ids) for c in completions]
            tensors.append(pb_utils.Tensor("num_output_tokens", np.asarray(counts, dtype=np.uint32)))
        return pb_utils.InferenceResponse(output_tensors=tensors)

    @staticmethod
    def _logprobs(completions: list[Any], state: _ResponseState) -> list[bytes]:
        starts = _deltas(state.logprob_lens, [0] * len(completions))
        encoded: list[bytes] = []
        lens: list[int] = []
        for completion, start in zip(completions, starts, strict=True):
            steps = completion.logprobs
            if steps is None:
                encoded.append(b"null")
                lens.append(0)
                continue
            lens.append(len(steps))
            rows = [
                {
                    str(token): {"logprob": lp.logprob, "rank": lp.rank, "decoded_token": lp.decoded_token}
                    for token, lp in step.items()
                }
                for step in list(steps)[start:]
            ]
            encoded.append(json.dumps(rows).encode("utf-8"))
        state.logprob_lens = lens
        return encoded

    def _send_error(self, sender: Any, message: str, *, code: int | None = None) -> None:
        _Reply(sender, self.logger).error(message, code)

    # -- a dead engine --------------------------------------------------------------------
    #
    # Seen by _watch (every HEALTH_PERIOD_S: a process gone, vLLM's errored flag, no progress)
    # or by a request that gets EngineDeadError, whichever comes first. Then, once: every request
    # still running and every later one is answered UNAVAILABLE, what is left of the engine is
    # killed, and the gauge tritonkit_engine_alive drops to 0. `tritonkit serve`'s healer reads it
    # (Triton's metrics) and unloads the model through the repository API, so its readiness and
    # the server's turn false, then loads it again. The model does not unload itself: in 2.51 a
    # stub's unload_model() waits on the server while the server waits on the stub's in-flight
    # responses (measured: the model stayed UNLOADING for good when a request was in flight).

    async def _watch(self) -> None:
        while not self._stopping and self._dead is None:
            await asyncio.sleep(HEALTH_PERIOD_S)
            try:
                why = self._health.problem(self._engine)
            except Exception as exc:  # noqa: BLE001 - a failed look is no verdict; look again
                self.logger.log_warn(f"{LOG_PREFIX} engine health check failed: {exc}")
                continue
            if why is not None and not self._stopping:
                self._engine_died(why)

    def _engine_died(self, why: str) -> None:
        """Called on the engine's loop: refuse everything from now on and unload (once)."""
        if self._dead is not None or self._stopping:
            return
        self._dead = why
        running = [t for t in self._tasks.values() if t is not asyncio.current_task()]
        self.logger.log_error(
            f"{LOG_PREFIX} model '{self.model_name}': the vLLM engine died ({why}); answering its "
            f"{len(self._tasks)} running and all new requests UNAVAILABLE until it is reloaded"
        )
        self._alive.set(0)
        for task in running:
            task.cancel()
        for pid in self._health.pids:
            try:
                os.kill(pid, 9)  # a wedged engine holds its memory until killed
            except OSError:
                pass

    def _dead_message(self) -> str:
        return (
            f"model '{self.model_name}' is unavailable: its vLLM engine died ({self._dead}); "
            "retry once the model is ready again"
        )

    # -- shutdown -------------------------------------------------------------------------

    def finalize(self) -> None:
        try:
            self._stop_engine()
        finally:  # after the loop thread: nothing updates the gauges any more
            self._active.release()
            self._alive.release()

    def _stop_engine(self) -> None:
        self._stopping = True
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        self._log(f"model '{self.model_name}': stopping the vLLM engine")
        try:
            wait = 60 if self._dead is None else 15
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout=wait)
        except Exception as exc:  # noqa: BLE001 - best effort; the stub exits next
            self.logger.log_warn(f"{LOG_PREFIX} engine shutdown: {exc}")
        loop.call_soon_threadsafe(loop.stop)
        self._thread.join(timeout=30)
        if self._watchdog is not None:  # the engine is down: nothing left for it to kill
            self._watchdog.kill()
            self._watchdog.wait(timeout=10)
        self._log(f"model '{self.model_name}': vLLM engine stopped")

    async def _shutdown(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._engine is not None:
            self._engine.shutdown()
            self._engine = None


class _ActiveGauge:
    """A gauge of this instance: ``tritonkit_generation_active`` (requests in the engine now) and
    ``tritonkit_engine_alive`` (1 while the engine runs, 0 once it died).

    A failed update (the stub's message to Triton did not go through) is logged once and the
    next update tries again: giving the metric up would leave the gauge stuck at a stale value.
    """

    def __init__(self, name: str, description: str, labels: dict[str, str], logger: Any) -> None:
        self._metric: Any = None
        self._family: Any = None
        self._name = name
        self._logger = logger
        self._failed = False
        try:
            family = pb_utils.MetricFamily
            self._family = family(name, description, family.GAUGE)
            self._metric = self._family.Metric(labels=labels)
        except Exception:  # noqa: BLE001 - metrics are optional (--allow-metrics=false)
            self._metric = None

    def release(self) -> None:
        """Delete the metric now (from ``finalize``): Triton 2.51's stub crashes deleting a metric
        still alive at its exit (``Metric::SaveToSharedMemory`` on a stub without shared memory;
        ensembles/common/text_stream.py's ``_Counters.release`` says how)."""
        self._metric = self._family = None

    def set(self, value: int) -> None:
        if self._metric is None:
            return
        try:
            self._metric.set(float(value))
        except Exception as exc:  # noqa: BLE001 - a metric must never fail a request
            if not self._failed:
                self._logger.log_warn(f"{LOG_PREFIX} could not update {self._name}: {exc}")
            self._failed = True


class _EngineGone(Exception):
    """A request that arrived after the engine died."""


def _engine_dead(exc: BaseException) -> bool:
    return type(exc).__name__ == "EngineDeadError"


def _client_error(exc: BaseException) -> bool:
    """True for vLLM's verdicts on the request itself (too long a prompt, a bad parameter)."""
    try:
        from vllm.exceptions import VLLMClientError
    except ImportError:  # pragma: no cover - older vLLM
        return isinstance(exc, ValueError)
    return isinstance(exc, (VLLMClientError, ValueError))

