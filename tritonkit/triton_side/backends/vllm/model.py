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
imports nothing from tritonkit. It holds the engine's lifecycle (start, requests, a dead engine,
shutdown); its siblings, shipped beside it (the stub puts this directory on ``sys.path``, so they
are imported by their plain names, which no installed package may take), hold the rest:

- ``request_inputs.py``: the inputs of one request, read and checked;
- ``sampling_checks.py`` and ``structured_outputs.py``: the ``sampling_parameters`` JSON checked
  into SamplingParams arguments;
- ``replies.py``: the response tensors of an engine output, and the one-final-response sender;
- ``engine_config.py`` and ``kv_cache_size.py``: the engine's arguments and its KV cache size;
- ``engine_health.py``: whether the engine lives (processes, error flag, progress), its watchdog;
- ``backend_metrics.py``: the gauges; ``backend_errors.py``: which failure is whose.
"""

from __future__ import annotations

import asyncio
import json
import locale
import os
import threading
import time
import typing
import uuid
from pathlib import Path
from typing import Any

import triton_python_backend_utils as pb_utils
from backend_errors import BadRequest, EngineGone, client_error, engine_dead
from backend_metrics import ACTIVE_METRIC, ALIVE_METRIC, Gauge
from engine_config import ENGINE_ARGS_FILE, EngineFiles
from engine_health import HEALTH_PERIOD_S, EngineHealth, engine_pids, stall_seconds, start_watchdog
from kv_cache_size import size_kv_cache
from replies import OUTPUTS, Reply, ResponseState, build_response
from request_inputs import INPUTS, ParsedRequest
from structured_outputs import with_engine_structured_outputs

LOG_PREFIX = "[tritonkit vllm]"


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
        files = EngineFiles(
            model_name=self.model_name, version_dir=self.version_dir, config=self.config, log=self._log
        )
        engine_config = files.engine_arguments()
        self.lora_paths = files.loras(engine_config)
        size_kv_cache(engine_config, model_name=self.model_name, log=self._log)
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
        self._active = Gauge(ACTIVE_METRIC, "Streams being generated now", labels, self._warn)
        self._alive = Gauge(ALIVE_METRIC, "1 while the vLLM engine runs, 0 after", labels, self._warn)
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
        self._health = EngineHealth(engine_pids(), stall=stall_seconds(os.environ))
        self._dead: str | None = None
        self._alive.set(1)
        self._watchdog = start_watchdog(self._warn)
        asyncio.run_coroutine_threadsafe(self._watch(), self._loop)  # type: ignore[arg-type]
        self._log(
            f"vLLM engine for model '{self.model_name}' ready in {time.monotonic() - began:.1f} s "
            f"(max_model_len {self.max_model_len})"
        )

    def _log(self, message: str) -> None:
        self.logger.log_info(f"{LOG_PREFIX} {message}")

    def _warn(self, message: str) -> None:
        self.logger.log_warn(f"{LOG_PREFIX} {message}")

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
        reply = Reply(request.get_response_sender(), self._warn)
        try:
            if self._dead is not None:
                raise EngineGone(self._dead)
            await self._generate(request, request_id, reply)
        except asyncio.CancelledError:
            # finalize() cancels what still runs (vLLM aborts it: generate's own clean-up), and
            # so does a dead engine (_on_dead): the client hears which.
            if self._dead is not None:
                reply.error(self._dead_message(), pb_utils.TritonError.UNAVAILABLE)
            else:
                reply.error("the model is unavailable: it is shutting down", pb_utils.TritonError.UNAVAILABLE)
            raise
        except EngineGone:
            reply.error(self._dead_message(), pb_utils.TritonError.UNAVAILABLE)
        except BadRequest as exc:
            reply.error(str(exc))
        except Exception as exc:  # noqa: BLE001 - one request's failure is that request's only
            if client_error(exc):
                reply.error(f"the request was refused: {exc}")
            elif engine_dead(exc) or self._dead is not None:
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

    async def _generate(self, request: Any, request_id: str, reply: Reply) -> None:
        parsed = ParsedRequest(request, field_types=self._field_types, max_model_len=self.max_model_len)
        lora = self._lora_request(parsed.lora_name)
        try:
            sampling = self._sampling_params_type(**with_engine_structured_outputs(parsed.sampling_kwargs))
        except Exception as exc:  # noqa: BLE001 - SamplingParams' own checks, whatever they raise
            raise BadRequest(f"invalid sampling_parameters: {exc}") from exc
        prompt = await self._render(parsed.prompt)
        state = ResponseState()
        last = None
        async for output in self._engine.generate(prompt, sampling, request_id, lora_request=lora):
            if reply.cancelled():
                await self._abort(request_id, "cancelled by the client")
                reply.error("Request was cancelled", pb_utils.TritonError.CANCELLED)
                return
            last = output
            self._health.progressed()
            if parsed.stream:
                response = build_response(output, parsed, state, prepend=False)
                if not reply.send(response, final=output.finished):
                    await self._abort(request_id, "dropped by the client (its stream is gone)")
                    return
        if not parsed.stream:
            if last is None:
                raise RuntimeError("the engine returned no output")
            response = build_response(last, parsed, ResponseState(), prepend=parsed.prepend_input)
            reply.send(response, final=True)

    async def _render(self, prompt: str) -> Any:
        renderer = getattr(self._engine, "renderer", None)
        if renderer is None or not hasattr(renderer, "render_cmpl_async"):
            return prompt
        try:
            (rendered,) = await renderer.render_cmpl_async([{"prompt": prompt}])
        except Exception as exc:
            if client_error(exc):  # the prompt is longer than the model takes, ...
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
            self._warn(f"could not abort request {request_id}: {exc}")
            return
        self._log(f"model '{self.model_name}': request {request_id} {why}; aborted in the engine")

    def _send_error(self, sender: Any, message: str, *, code: int | None = None) -> None:
        Reply(sender, self._warn).error(message, code)

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
                self._warn(f"engine health check failed: {exc}")
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
        self._stopping = True
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        self._log(f"model '{self.model_name}': stopping the vLLM engine")
        try:
            wait = 60 if self._dead is None else 15
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout=wait)
        except Exception as exc:  # noqa: BLE001 - best effort; the stub exits next
            self._warn(f"engine shutdown: {exc}")
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
