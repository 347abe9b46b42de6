"""Runs a benchmark: load levels, warm-up, measurement windows and the stability rule.

For each load level (a concurrency or a request rate) the runner warms up, then measures
windows (``measurement_interval_ms`` long, or ``requests_per_window`` requests each) until the
last three agree within ``stability_percentage`` (perf_analyzer's rule) or ``max_trials``
windows have passed. The step then reports the last three windows merged, and says whether
they were stable. With ``duration_s`` a step measures exactly that long instead and reports
all of it (stability is still checked on its last windows and reported).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as _dt
import math
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tritonkit.client.auth import AuthProvider, for_protocol
from tritonkit.client.control import AsyncModelControl, ControlCallError
from tritonkit.client.endpoint import parse_url
from tritonkit.errors import (
    AuthenticationError,
    ClientError,
    EndpointUnreachableError,
    PerfError,
    TritonKitError,
)
from tritonkit.perf import server_stats, stages
from tritonkit.perf._target import Target
from tritonkit.perf.composition import Composition, composed_record, read_composition
from tritonkit.perf.coordinator import TcpLoad, open_workers
from tritonkit.perf.front_counts import FrontCounts
from tritonkit.perf.inputs import (
    Array,
    ModelInputs,
    generate_requests,
    load_requests,
    model_inputs_from_metadata,
)
from tritonkit.perf.llm import LlmLoad, Prompt
from tritonkit.perf.loadgen import Load, LocalLoad, make_sender
from tritonkit.perf.results import PerfRun, StepResult, WindowSummary
from tritonkit.perf.saturation import LagProbe
from tritonkit.perf.settings import STABLE_WINDOWS, PerfSettings, Progress, ProgressCallback
from tritonkit.perf.stats import Window, check_stability, merge_windows, summarize_ns
from tritonkit.perf.stream_metrics import summarize_stream
from tritonkit.perf.windows import Windows, server_delta

__all__ = ["PerfSettings", "Progress", "ProgressCallback", "Runner", "StopRule", "run_perf"]

_POLL_S = 0.02

#: the window throughputs of a step so far -> whether to end it now (see Runner)
StopRule = Callable[[list[float]], bool]


def _setup_error(
    exc: ControlCallError, *, action: str, url: str, auth: AuthProvider | None
) -> TritonKitError:
    """Map a failed set-up call (metadata, config, stats) to a tritonkit error."""
    refusal = exc.refusal
    code, reason = refusal.code, refusal.reason
    credential = auth.describe() if auth else "no credential"
    if refusal.auth:
        return AuthenticationError(
            f"{action} at {url} was refused ({code}); credential used: {credential}",
            status=code,
            hint="pass a credential this endpoint accepts (--key-env VAR, --restricted-header KEY=ENVVAR)",
        )
    if refusal.model_missing:
        return PerfError(
            f"{action} at {url} failed: {reason}", hint="check the model name and that it is READY"
        )
    if not code or refusal.connection:
        return EndpointUnreachableError(
            f"{action}: cannot reach {url}: {reason or type(exc.__cause__ or exc).__name__}",
            hint="is the server running, and are the URL and --protocol right? (HTTP: 8000, gRPC: 8001)",
        )
    return ClientError(f"{action} at {url} failed ({code}): {reason}", status=code)


#: error kinds (loadgen.error_kind) that mean the request never reached a live server
_UNREACHABLE_KINDS = ("connection", "grpc UNAVAILABLE")


class Runner:
    """Runs :class:`PerfSettings` against a server; use :func:`run_perf` for one call."""

    def __init__(
        self,
        settings: PerfSettings,
        *,
        auth: AuthProvider | None = None,
        headers: Mapping[str, str] | None = None,
        progress: ProgressCallback | None = None,
        command: str = "",
        stop: StopRule | None = None,
    ) -> None:
        settings.validate()
        self.settings = settings
        #: called with the window throughputs after each window that is not yet stable: True
        #: ends the step there (the caller knows the rest would not change its decision)
        self.stop = stop
        self.stopped_early = False  # a step ended by ``stop`` (it says stable False)
        self.warmed_up_s = 0.0  # how long the warm-ups ran, all steps together
        self.endpoint = parse_url(settings.url, settings.protocol)
        self.auth = for_protocol(auth, settings.protocol) if auth is not None else None
        self.extra_headers = dict(headers or {})
        self.progress = progress
        self.command = command
        self.model_inputs: ModelInputs | None = None
        self.stream = bool(settings.stream)  # decided against the model's config in run()
        self.stages: list[stages.Stage] = []  # the pipeline's composing models (found in run())
        self._stage_snaps: list[stages.StageSnapshot | None] = []
        self.tokenizer_file = settings.tokenizer  # resolved to a file by LLM load
        self.prompt_counts: tuple[tuple[int, int], ...] = ()
        self.engine_counts = False
        self.front_counts = FrontCounts(None, settings.model)  # an OpenAI front's: read between windows
        self.composition: Composition | None = None  # a pipeline measured composed (found in run())

    async def _headers(self) -> dict[str, str]:
        merged = dict(self.extra_headers)
        if self.auth is not None:
            merged.update(await self.auth.aheaders())
        return merged

    def _prompts(self, llm: LlmLoad) -> list[Prompt]:
        """Prompts shaped by ``llm`` (its data set, else synthetic ones); sets the tokenizer file
        and the per-request token counts."""
        from tritonkit.perf import llm as shaping

        s = self.settings
        path = shaping.find_tokenizer(s.tokenizer, model=s.model)
        self.tokenizer_file = str(path) if path else None
        tok = shaping.PromptTokenizer(path) if path is not None else None
        if llm.dataset:
            prompts = shaping.read_dataset(Path(llm.dataset), llm, tok)
        else:
            prompts = shaping.synthetic_prompts(llm, tok)
        self.prompt_counts = shaping.prompt_counts(prompts)
        return prompts

    def _llm_requests(self, model: ModelInputs, llm: LlmLoad) -> list[dict[str, Array]]:
        """Prompts shaped by ``llm``; sets the per-request token counts and how tokens are counted."""
        from tritonkit.perf import llm as shaping

        s = self.settings
        prompts = self._prompts(llm)
        # the engine counts output tokens when the stage declares num_output_tokens (its prompt
        # tokens too, when it also declares num_input_tokens: taken from responses that carry it)
        self.engine_counts = model.find_input("return_num_output_tokens") is not None and any(
            o.name == "num_output_tokens" for o in model.outputs
        )
        return shaping.build_requests(
            model, prompts, stream=bool(self.stream), text_input=s.text_input, shapes=s.shapes
        )

    def _requests(self, model: ModelInputs) -> list[dict[str, Array]]:
        if self.settings.llm is not None:
            return self._llm_requests(model, self.settings.llm)
        data = self.settings.input_data
        if data in ("random", "zero"):
            return generate_requests(model, mode=data, shapes=self.settings.shapes)
        return load_requests(model, Path(data), shapes=self.settings.shapes)

    async def run(self) -> PerfRun:
        s = self.settings
        started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        url = str(self.endpoint)
        steps = await (self._openai_steps() if s.openai else self._triton_steps(url))
        return PerfRun(
            url=url,
            model=s.model,
            protocol=s.protocol,
            mode=s.mode,
            steps=tuple(steps),
            settings={**s.to_dict(), "stream": self.stream, "composed": composed_record(self.composition)},
            started_at=started,
            command=self.command,
        )

    async def _openai_steps(self) -> list[StepResult]:
        """The steps against an OpenAI-compatible server: prompts as chat/completion calls, no
        Triton control calls (the front has no model metadata or statistics to read)."""
        from tritonkit.perf._openai_sender import openai_requests

        s = self.settings
        self.stream = True
        prompts = self._prompts(s.llm or LlmLoad())
        load = await self._open_load(self._target(()), openai_requests(prompts))
        self.front_counts = FrontCounts(str(self.endpoint), s.model, cacert=s.cacert)
        try:
            return [await self._step(load, None, i, level) for i, level in enumerate(s.levels)]
        finally:
            await load.close()
            await self.front_counts.close()

    async def _triton_steps(self, url: str) -> list[StepResult]:
        """The steps against Triton: the model's metadata shapes the requests; statistics and
        liveness are read between steps."""
        s = self.settings
        control = AsyncModelControl(s.url, protocol=s.protocol, cacert=s.cacert)
        try:
            control.headers = await self._headers()
            try:
                meta, cfg = await control.metadata(s.model, s.model_version)
            except ControlCallError as exc:
                raise _setup_error(
                    exc, action=f"reading metadata of model '{s.model}'", url=url, auth=self.auth
                ) from exc
            model = model_inputs_from_metadata(meta, cfg)
            self.model_inputs = model
            self.stream = self._decide_stream(cfg)
            requests = self._requests(model)
            if s.compose and self.stream and s.protocol == "grpc":  # the composed sender is gRPC's
                try:
                    self.composition = await read_composition(control, cfg)
                except ControlCallError as exc:
                    raise _setup_error(exc, action=exc.action, url=url, auth=self.auth) from exc
                # its tokens: the stage's own counts when it gives them, as for the stage by itself
                self.engine_counts = (
                    self.composition.engine_counts if self.composition else self.engine_counts
                )
            if s.server_stats:
                self.stages = await self._find_stages(control, cfg)
            load = await self._open_load(self._target(model.output_names), requests)
            stats_control = control if s.server_stats else None
            steps = []
            try:
                for i, level in enumerate(s.levels):
                    step = await self._step(load, stats_control, i, level)
                    steps.append(step)
                    await self._check_server_alive(control, step, url)
            finally:
                await load.close()
        finally:
            await control.close()
        return steps

    def _target(self, outputs: tuple[str, ...]) -> Target:
        """What the load calls: the endpoint, the model and how (streams, channels, token counts)."""
        s = self.settings
        target = Target(
            client_url=self.endpoint.client_url,
            ssl=self.endpoint.ssl,
            protocol=s.protocol,
            model=s.model,
            model_version=s.model_version,
            outputs=outputs,
            timeout_s=s.timeout_s,
            cacert=s.cacert,
            host=self.endpoint.host,
            port=self.endpoint.port,
            path_prefix=self.endpoint.path_prefix,
            grpc_channels=min(int(max(s.levels)), 16) if s.mode == "concurrency" else 8,
            stream=self.stream,
            # one stream per concurrent request, as perf_analyzer keeps one per context
            grpc_streams=int(max(s.levels)) if s.mode == "concurrency" else 16,
            tokenizer=self.tokenizer_file,
            prompt_counts=self.prompt_counts,
            engine_counts=self.engine_counts and self.stream,
            openai=s.openai or "",
        )
        return self.composition.target(target) if self.composition else target

    async def _open_load(self, target: Target, requests: list[dict[str, Array]]) -> Load:
        """The load generator: worker processes, or senders on this event loop."""
        s = self.settings
        if self.stream and self.tokenizer_file:
            from tritonkit.perf.stream_metrics import TokenCounter

            TokenCounter(self.tokenizer_file)  # a bad file fails here, once, not in every request
        top = int(max(s.levels)) if s.mode == "concurrency" else 256
        conn_limit = max(top, 100)
        if s.workers > 0:  # processes over loopback TCP, or with --listen a --kube run's pods
            listen = s.listen_address() if s.listen else None
            return await open_workers(
                target, requests, workers=s.workers, conn_limit=conn_limit, listen=listen
            )
        ll = LocalLoad(make_sender(target=target, requests=requests, conn_limit=conn_limit))
        await ll.open()
        return ll

    async def _find_stages(self, control: AsyncModelControl, cfg: Mapping[str, Any]) -> list[stages.Stage]:
        s = self.settings
        if s.composing:
            return stages.named_stages(s.model, s.composing)

        async def config_of(name: str) -> Mapping[str, Any]:
            if name == s.model:
                return cfg
            try:
                return (await control.metadata(name, ""))[1]
            except Exception:  # noqa: BLE001 - a stage whose config cannot be read is not followed
                return {}

        if self.composition is not None:  # the front door is not called: its two steps are
            return await self.composition.stages(config_of)
        repository = Path(s.repository) if s.repository else None
        return await stages.discover_stages(s.model, config_of, repository=repository)

    async def _snapshot(self, control: AsyncModelControl | None) -> server_stats.StatsSnapshot | None:
        """The target's counters (composed: the stage's); with stages, every stage's from one answer."""
        s = self.settings
        model, version = self.composition.stats_model if self.composition else (s.model, s.model_version)
        if not self.stages or control is None:
            return await server_stats.read_snapshot(control, model, version)
        try:
            data = await control.statistics("", "")
        except Exception:  # a gateway may allow the target's statistics only: stages go without
            self._stage_snaps.append(None)
            return await server_stats.read_snapshot(control, model, version)
        self._stage_snaps.append(stages.stage_snapshot(data, [st.model for st in self.stages]))
        target = [m for m in data.get("model_stats", []) if not version or str(m.get("version")) == version]
        return server_stats.parse_statistics({"model_stats": target}, model)

    def _token_counting(self) -> str:
        if self.settings.openai:  # the server's usage chunk when it sends one
            fallback = f"tokenizer:{self.tokenizer_file}" if self.tokenizer_file else "responses"
            return f"usage, else {fallback}"
        if self.engine_counts:
            return "engine"
        return f"tokenizer:{self.tokenizer_file}" if self.tokenizer_file else "responses"

    def _decide_stream(self, cfg: Mapping[str, Any]) -> bool:
        """Stream when asked, or when the server serves the model decoupled (its unary calls
        would all fail). The served config is the truth: Triton derives an ensemble's flag from
        its steps, whatever the ensemble's own config says."""
        config = cfg.get("config", cfg)
        policy = config.get("model_transaction_policy") or {}
        decoupled = bool(policy.get("decoupled", False))
        if self.settings.stream is None:
            return decoupled
        if decoupled and not self.settings.stream:
            raise PerfError(
                f"model '{self.settings.model}' is decoupled (model_transaction_policy.decoupled): "
                "unary requests to it fail (HTTP 501, gRPC UNIMPLEMENTED)",
                hint="measure it with --stream (the default for decoupled models)",
            )
        return self.settings.stream

    async def _check_server_alive(self, control: AsyncModelControl, step: StepResult, url: str) -> None:
        """A step where every request failed to connect: if the server is gone, say so and stop,
        rather than sweeping on and reporting a column of connection errors as measurements."""
        unreachable = sum(step.errors.get(kind, 0) for kind in _UNREACHABLE_KINDS)
        if step.requests > 0 or not unreachable:
            return
        if await control.is_live():
            return
        raise PerfError(
            f"the server at {url} stopped answering during the {self.settings.mode} {step.level:g} step "
            f"({unreachable} requests could not reach it, none succeeded)",
            hint="check the server's log: it may have crashed or been stopped; the steps before "
            "this one were measured against a live server",
        )

    async def _step(
        self, load: Load, control: AsyncModelControl | None, index: int, level: float
    ) -> StepResult:
        s = self.settings
        headers = await self._headers()
        load.set_headers(headers)
        if control is not None:
            control.headers = headers
        probe = LagProbe() if s.workers == 0 and self.stream else None
        windows = Windows(load, probe)
        if probe is not None:
            probe.start()
        await load.start_step(s.mode, level, poisson=s.poisson, stagger=s.stagger)
        try:
            if s.warmup_s > 0:
                await self._warm_up(windows)
            await windows.pull()
            windows.reset()
            measured, snaps = await self._measure(load, control, windows, index, level)
        finally:
            await load.stop_step()
            if probe is not None:
                await probe.stop()
        result = self._result(level, measured, snaps, windows.delayed)
        if isinstance(load, TcpLoad):
            result = dataclasses.replace(result, load_workers=load.step_loads())
        return result

    async def _warm_up(self, windows: Windows) -> None:
        """Run the load ``warmup_s``; with ``warmup_settle_ms``, stop as soon as two warm-up
        windows in a row agree within the stability percentage (a model past its slow first
        requests needs no more), each window at least three times the latency seen so far."""
        began = time.monotonic()
        try:
            await self._warm_up_for(windows)
        finally:
            self.warmed_up_s += time.monotonic() - began

    async def _warm_up_for(self, windows: Windows) -> None:
        s = self.settings
        if s.warmup_settle_ms is None:
            await asyncio.sleep(s.warmup_s)
            return
        deadline = time.monotonic() + s.warmup_s
        start_ns = time.monotonic_ns()
        length_s = s.warmup_settle_ms / 1000.0
        previous = 0.0
        while (remaining := deadline - time.monotonic()) > 0:
            await asyncio.sleep(min(length_s, remaining))
            await windows.pull()
            end_ns = time.monotonic_ns()
            window = windows.cut(start_ns, end_ns)
            start_ns = end_ns
            now = window.throughput
            if (
                now > 0
                and previous > 0
                and abs(now - previous) / max(now, previous) * 100 <= s.stability_percentage
            ):
                return
            previous = now
            if window.completed:
                length_s = max(length_s, 3 * window.avg_latency_us() / 1e6)

    def _max_windows(self) -> int:
        s = self.settings
        if s.duration_s is not None:
            return max(STABLE_WINDOWS, math.ceil(s.duration_s * 1000 / s.measurement_interval_ms))
        return s.max_trials

    async def _measure(
        self, load: Load, control: AsyncModelControl | None, windows: Windows, index: int, level: float
    ) -> tuple[list[Window], list[server_stats.StatsSnapshot | None]]:
        s = self.settings
        measured: list[Window] = []
        self._stage_snaps = []
        await self.front_counts.mark(first=True)
        snaps = [await self._snapshot(control)]
        max_windows = self._max_windows()
        interval_s = s.measurement_interval_ms / 1000.0
        if s.duration_s is not None:
            interval_s = s.duration_s / max_windows
        start_ns = time.monotonic_ns()
        while len(measured) < max_windows:
            end_ns = await self._wait_window(windows, start_ns, interval_s)
            window = windows.cut(start_ns, end_ns)
            measured.append(window)
            snaps.append(await self._snapshot(control))
            await self.front_counts.mark()
            verdict = check_stability(
                measured, percentage=s.stability_percentage, latency_stat=s.latency_stat
            )
            if self.progress is not None:
                ttft = summarize_ns([i[0] for i in window.streams if i[0] >= 0])
                itl = summarize_ns([i[1] for i in window.streams if i[1] >= 0])
                self.progress(
                    Progress(
                        step=index + 1,
                        steps=len(s.levels),
                        mode=s.mode,
                        level=level,
                        window=len(measured),
                        max_windows=max_windows,
                        throughput=window.throughput,
                        avg_latency_us=window.avg_latency_us(),
                        errors=sum(window.errors.values()),
                        stability=verdict.reason,
                        stream=self.stream,
                        ttft_p50_us=ttft.p50_us if ttft else 0.0,
                        itl_p50_us=itl.p50_us if itl else 0.0,
                        output_tokens_per_s=sum(i[3] for i in window.streams) / window.duration_s,
                    )
                )
            start_ns = end_ns
            if verdict.stable and s.duration_s is None:
                break
            if self.stop is not None and s.duration_s is None and self.stop([w.throughput for w in measured]):
                self.stopped_early = True
                break
            if self.auth is not None and len(measured) % 5 == 0:
                headers = await self._headers()  # tokens may expire during a long step
                load.set_headers(headers)
                if control is not None:
                    control.headers = headers
        return measured, snaps

    async def _wait_window(self, windows: Windows, start_ns: int, interval_s: float) -> int:
        """Wait until the window ends; returns its end (monotonic ns)."""
        s = self.settings
        if s.requests_per_window is None:
            end_ns = start_ns + int(interval_s * 1e9)
            remaining = (end_ns - time.monotonic_ns()) / 1e9
            if remaining > 0:
                await asyncio.sleep(remaining)
            await windows.pull()
            return end_ns
        # count window: ends when the N-th request of this window completes
        deadline = time.monotonic() + max(60.0, 4 * interval_s)
        while True:
            await asyncio.sleep(_POLL_S)
            await windows.pull()
            done = sorted(r[0] for r in windows.pending if r[0] >= start_ns)
            if len(done) >= s.requests_per_window:
                return done[s.requests_per_window - 1] + 1
            if time.monotonic() > deadline:
                raise PerfError(
                    f"only {len(done)} of {s.requests_per_window} requests completed within "
                    f"{max(60.0, 4 * interval_s):.0f}s",
                    hint="lower --requests or use --measurement-interval (time windows)",
                )

    def _stage_delta(self, first: int, last: int) -> tuple[stages.StageStats, ...]:
        snaps = self._stage_snaps
        if not self.stages or len(snaps) <= last:
            return ()
        return stages.stage_deltas(self.stages, snaps[first], snaps[last])

    def _result(
        self,
        level: float,
        measured: list[Window],
        snaps: list[server_stats.StatsSnapshot | None],
        delayed: int,
    ) -> StepResult:
        s = self.settings
        verdict = check_stability(measured, percentage=s.stability_percentage, latency_stat=s.latency_stat)
        if s.duration_s is not None:
            first = 0
        else:
            first = max(len(measured) - STABLE_WINDOWS, 0)
        reported = merge_windows(measured[first:])
        summary = summarize_ns(reported.latencies_ns)
        completed = reported.completed
        attempts = completed + sum(reported.errors.values())
        stability = verdict.reason
        if not verdict.stable:
            stability = f"NOT STABLE after {len(measured)} windows: {verdict.reason}"
        if completed == 0:
            stability = f"no request succeeded ({sum(reported.errors.values())} errors)"
        stream = None
        if self.stream:
            stream = summarize_stream(
                reported.streams,
                reported.latencies_ns,
                duration_s=reported.duration_s,
                client_cpu_s=reported.client_cpu_s,
                processes=max(s.workers, 1),
                token_counting=self._token_counting(),
                limits=s.stream_limits(),
                latency=summary,
                loop_lag_ns=reported.loop_lag_ns,
                cpu_wait_s=reported.cpu_wait_s,
                asked_concurrency=level if s.mode == "concurrency" else None,
            )
            counted = self.front_counts.per_s(first, len(measured), reported.duration_s)
            stream = dataclasses.replace(stream, server_output_tokens_per_s=counted)
        return StepResult(
            mode=s.mode,
            level=level,
            throughput=reported.throughput,
            latency=summary,
            requests=completed,
            errors=dict(reported.errors),
            stable=verdict.stable and completed > 0,
            stability=stability,
            duration_s=reported.duration_s,
            windows=tuple(
                WindowSummary(
                    duration_s=w.duration_s,
                    requests=w.completed,
                    throughput=w.throughput,
                    avg_latency_us=w.avg_latency_us(),
                    errors=sum(w.errors.values()),
                )
                for w in measured
            ),
            server=server_delta(snaps, first, len(measured)),
            stages=self._stage_delta(first, len(measured)),
            client_cpu_us_per_request=(reported.client_cpu_s * 1e6 / attempts) if attempts else 0.0,
            client_send_us=0.0,
            client_recv_us=0.0,
            delayed_requests=delayed,
            stream=stream,
        )


def run_perf(
    settings: PerfSettings,
    *,
    auth: AuthProvider | None = None,
    headers: Mapping[str, str] | None = None,
    progress: ProgressCallback | None = None,
    command: str = "",
) -> PerfRun:
    """Run a benchmark to completion (blocking) and return its results."""
    runner = Runner(settings, auth=auth, headers=headers, progress=progress, command=command)
    return asyncio.run(runner.run())
