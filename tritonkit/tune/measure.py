"""The live measurer: apply a candidate through the model-repository API, then run perf on it.

Measurements use perf's own load engine and stability rule (``run_perf``), and their windows
adapt as perf_analyzer's do: windows run until the last three agree within
``stability_percentage`` (short ones for screening, up to ``screen_max_windows``; longer ones for
confirmation, up to ``max_trials``). A confirmation that is still not stable runs once more with
windows twice as long. After a candidate is loaded the load runs ``load_warmup_s`` before any
window counts: a freshly loaded model (a GPU one above all) is slow on its first batches.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tritonkit.client.auth import AuthProvider
from tritonkit.config import ModelConfig, config_to_dict
from tritonkit.perf.results import StepResult
from tritonkit.perf.runner import PerfSettings, Progress, Runner, StopRule
from tritonkit.repository.execution_env import ENV_PARAMETER
from tritonkit.tune.control import CandidateRefusedError, ModelControl, differences, validate_candidate
from tritonkit.tune.objective import Outcome
from tritonkit.tune.space import apply_settings

__all__ = ["LiveMeasurer", "PerfStep", "run_step", "touched_fields"]

logger = logging.getLogger(__name__)

SCREEN_WINDOWS = 3
#: screening stops once this many windows show the candidate cannot reach the bar
CUT_AFTER_WINDOWS = 2
#: the load generator counts as saturated above this share of the CPU it can use (one core
#: in-process: its event loop holds the GIL; one per worker process with --workers)
CLIENT_BOUND_SHARE = 0.85


def client_capacity(workers: int) -> float:
    """CPU cores the load generator can use."""
    return float(min(workers, os.cpu_count() or 1)) if workers > 0 else 1.0


def touched_fields(knobs: Mapping[str, Any]) -> set[str]:
    """The top-level ModelConfig fields a set of knobs changes (what the read-back compares)."""
    out = set()
    for name in knobs:
        if name in ("instance_count", "instance_kind"):
            out.add("instance_group")
        elif name in ("dynamic_batching", "preferred_batch_size", "max_queue_delay_microseconds"):
            out.add("dynamic_batching")
        else:
            out.add(name)
    return out


def _key(cfg: ModelConfig) -> str:
    return json.dumps(config_to_dict(cfg), sort_keys=True)


@dataclass(frozen=True)
class PerfStep:
    """One perf step as the measurer ran it: the step, how long its warm-up ran, and whether
    the stop rule ended it before the stability rule did."""

    step: StepResult
    warmup_s: float
    stopped_early: bool


def run_step(
    perf: PerfSettings,
    *,
    auth: AuthProvider | None,
    headers: Mapping[str, str],
    progress: Callable[[Progress], None] | None,
    stop: StopRule | None,
) -> PerfStep:
    """Run ``perf`` (one level) to completion with perf's runner."""
    runner = Runner(perf, auth=auth, headers=headers, progress=progress, stop=stop)
    run = asyncio.run(runner.run())
    return PerfStep(run.steps[0], runner.warmed_up_s, runner.stopped_early)


def cannot_reach(bar: float, stability_percentage: float) -> StopRule:
    """A stop rule for screening: after :data:`CUT_AFTER_WINDOWS` windows, the candidate's best
    window, even that much better again (the stability rule's own tolerance), stays under
    ``bar``: more windows would only pin down how far under it is, which decides nothing."""

    def stop(throughputs: list[float]) -> bool:
        if len(throughputs) < CUT_AFTER_WINDOWS:
            return False
        return max(throughputs) * (1 + stability_percentage / 100.0) < bar

    return stop


@dataclass
class _Spent:
    """Where one measurement's time went (seconds), summed over the perf runs it took."""

    load_s: float = 0.0
    perf_s: float = 0.0
    warmup_s: float = 0.0
    windows_s: float = 0.0

    def add_run(self, wall_s: float, ran: PerfStep) -> None:
        self.perf_s += wall_s
        self.warmup_s += ran.warmup_s
        self.windows_s += sum(w.duration_s for w in ran.step.windows)

    def to_timing(self) -> dict[str, float]:
        overhead = max(0.0, self.perf_s - self.warmup_s - self.windows_s)
        return {
            "load_s": round(self.load_s, 3),
            "warmup_s": round(self.warmup_s, 3),
            "windows_s": round(self.windows_s, 3),
            "overhead_s": round(overhead, 3),
        }


class LiveMeasurer:
    """Loads each candidate into the server (no restart) and measures it with perf."""

    def __init__(
        self,
        *,
        control: ModelControl,
        base: Mapping[str, ModelConfig],
        original: Mapping[str, ModelConfig],
        model_dirs: Mapping[str, Path | None],
        perf: PerfSettings,
        screen_window_ms: int,
        confirm_window_ms: int,
        max_trials: int,
        screen_max_windows: int = SCREEN_WINDOWS,
        load_warmup_s: float = 0.0,
        warmup_settle_ms: int | None = None,
        auth: AuthProvider | None = None,
        headers: Mapping[str, str] | None = None,
        progress: Callable[[Progress], None] | None = None,
    ) -> None:
        self.control = control
        self.base = dict(base)
        self.original = dict(original)
        self.model_dirs = dict(model_dirs)
        self.perf = perf
        self.screen_window_ms = screen_window_ms
        self.confirm_window_ms = confirm_window_ms
        self.max_trials = max_trials
        self.screen_max_windows = max(SCREEN_WINDOWS, screen_max_windows)
        self.load_warmup_s = load_warmup_s
        self.warmup_settle_ms = warmup_settle_ms
        self.auth = auth
        self.headers = dict(headers or {})
        self.progress = progress
        self.applied: dict[str, str] = {}  # model -> key of the config the server has (ours)
        self.good: dict[str, ModelConfig] = {}  # model -> last config that loaded and matched
        self.loads = 0
        self.refused = 0

    # -- configs --------------------------------------------------------------------------

    def candidate_configs(self, settings: Mapping[str, Mapping[str, Any]]) -> dict[str, ModelConfig]:
        return {m: self._served(m, apply_settings(self.base[m], knobs)) for m, knobs in settings.items()}

    def _served(self, model: str, cfg: ModelConfig) -> ModelConfig:
        """``cfg`` with the Python environment the server runs the model in.

        Candidates start from the repository's config, but the server may run another
        ``EXECUTION_ENV_PATH`` than the file names: ``tritonkit serve`` points a packed 3.10
        archive at a local twin for its 3.11 stub. Tuning changes scheduling, never the
        environment, so the served one is kept (the winner written back keeps the file's).
        """
        served = self.original.get(model)
        if served is None or ENV_PARAMETER not in served.parameters:
            return cfg
        if cfg.parameters[ENV_PARAMETER].string_value == served.parameters[ENV_PARAMETER].string_value:
            return cfg
        cfg.parameters[ENV_PARAMETER].CopyFrom(served.parameters[ENV_PARAMETER])  # a fresh copy
        return cfg

    def apply(self, settings: Mapping[str, Mapping[str, Any]]) -> bool:
        """Put the candidate on the server; CandidateRefusedError (and the previous config
        restored) when the validator or Triton refuses it or the server applies something else.
        Returns whether a model was (re)loaded, so that the measurement warms it up first."""
        configs = self.candidate_configs(settings)
        for model, cfg in configs.items():
            problems = validate_candidate(cfg, model_dir=self.model_dirs.get(model))
            if problems:
                self.refused += 1
                raise CandidateRefusedError(
                    f"rejected by tritonkit's validator (not sent): {problems[0].message}"
                )
        changed: list[str] = []
        try:
            for model, cfg in configs.items():
                if self.applied.get(model) == _key(cfg):
                    continue
                changed.append(model)
                self.loads += 1
                self.control.load(model, cfg)
                got = self.control.config(model)
                diffs = differences(cfg, got, touched_fields(settings[model]))
                if diffs:
                    raise CandidateRefusedError("the server applied a different config: " + "; ".join(diffs))
                self.applied[model] = _key(cfg)
        except CandidateRefusedError:
            self.refused += 1
            for model in changed:
                self._back_to_good(model)
            raise
        self.good.update(configs)
        return bool(changed)

    def _back_to_good(self, model: str) -> None:
        """After a refused load: Triton keeps serving the previous config when a load fails, but
        a load that succeeded with the wrong config (or a crashed reload) must be undone."""
        previous = self.good.get(model, self.original[model])
        key = _key(previous)
        if self.control.is_ready(model) and self.applied.get(model) == key:
            try:
                if not differences(
                    previous,
                    self.control.config(model),
                    {"instance_group", "dynamic_batching", "max_batch_size"},
                ):
                    return
            except Exception:  # noqa: BLE001 - reload below
                logger.info("could not read back '%s'; reloading the previous config", model)
        self.loads += 1
        self.control.load(model, previous)
        self.applied[model] = key

    def restore(self) -> list[str]:
        """Load every touched model's original config back; returns what could not be restored."""
        problems = []
        for model in list(self.applied):
            original = self.original[model]
            try:
                self.loads += 1
                self.control.load(model, original)
                diffs = differences(
                    original,
                    self.control.config(model),
                    {"instance_group", "dynamic_batching", "max_batch_size"},
                )
                if diffs:
                    problems.append(f"{model}: " + "; ".join(diffs))
                else:
                    del self.applied[model]
            except Exception as exc:  # noqa: BLE001 - report every model, then go on
                problems.append(f"{model}: {exc}")
        return problems

    # -- measuring ------------------------------------------------------------------------

    def measure(
        self,
        settings: Mapping[str, Mapping[str, Any]],
        load: float,
        *,
        confirm: bool,
        bar: float | None = None,
    ) -> Outcome:
        """Load the candidate and measure it at ``load``. ``bar`` (screening only): a throughput
        below which the figure decides nothing; once the windows show the candidate cannot
        reach it (:func:`cannot_reach`), the measurement stops there and says so."""
        spent = _Spent()
        started = time.monotonic()
        try:
            loaded = self.apply(settings)
        except CandidateRefusedError as exc:
            spent.load_s = time.monotonic() - started
            return Outcome(failed=exc.reason, timing=spent.to_timing())
        spent.load_s = time.monotonic() - started
        perf = replace(
            self.perf,
            levels=(float(load),),
            measurement_interval_ms=self.confirm_window_ms if confirm else self.screen_window_ms,
            max_trials=self.max_trials if confirm else self.screen_max_windows,
            warmup_s=max(self.perf.warmup_s, self.load_warmup_s) if loaded else self.perf.warmup_s,
            warmup_settle_ms=self.warmup_settle_ms,
        )
        stop = cannot_reach(bar, perf.stability_percentage) if bar and not confirm else None
        ran = self._run(perf, load, spent, stop)
        step = ran.step
        if confirm and not step.stable and step.requests > 0:
            # perf_analyzer's answer to an unstable run is more windows; ours were all used, so
            # each window gets twice as long (more requests each, less noise) for one more try
            logger.info(
                "not stable in %d windows of %g ms at load %g: measuring again with %g ms windows",
                perf.max_trials,
                perf.measurement_interval_ms,
                load,
                2 * perf.measurement_interval_ms,
            )
            perf = replace(perf, measurement_interval_ms=2 * perf.measurement_interval_ms, warmup_s=0.0)
            ran = self._run(perf, load, spent, None)
            step = ran.step
        cut = ""
        if ran.stopped_early and bar:
            cut = f"stopped after {len(step.windows)} windows: cannot reach {bar:.1f} infer/s"
        return replace(self._outcome(step, load, perf), timing=spent.to_timing(), cut_short=cut)

    def _perf(self, perf: PerfSettings, spent: _Spent, stop: StopRule | None) -> PerfStep:
        started = time.monotonic()
        ran = run_step(perf, auth=self.auth, headers=self.headers, progress=self.progress, stop=stop)
        spent.add_run(time.monotonic() - started, ran)
        return ran

    def _run(self, perf: PerfSettings, load: float, spent: _Spent, stop: StopRule | None) -> PerfStep:
        ran = self._perf(perf, spent, stop)
        step = ran.step
        if step.requests == 0 and step.error_count == 0:
            # None finished and none failed: every request outlasted the windows (a slow model, or
            # the first requests after a load on a busy machine). Judge the candidate on windows
            # that end when requests complete, not on none ("no request succeeded").
            logger.info(
                "no request completed within the %g ms windows at load %g: counting instead",
                perf.measurement_interval_ms,
                load,
            )
            count = max(1, int(load)) if perf.mode == "concurrency" else 1
            ran = self._perf(replace(perf, requests_per_window=count), spent, stop)
        return ran

    def _outcome(self, step: StepResult, load: float, perf: PerfSettings) -> Outcome:
        lat: dict[str, float] = {}
        for stat in ("avg", "p50", "p90", "p95", "p99", "max"):
            value = step.latency_us(stat)
            if value is not None:
                lat[stat] = float(value)
        recent = [w.throughput for w in step.windows[-SCREEN_WINDOWS:] if w.throughput > 0]
        spread = 0.0
        if recent:
            mean = sum(recent) / len(recent)
            spread = max(abs(t - mean) for t in recent) / mean * 100.0
        attempts = step.requests + step.error_count
        cores = (
            step.client_cpu_us_per_request * attempts / step.duration_s / 1e6 if step.duration_s > 0 else 0.0
        )
        bound = cores >= CLIENT_BOUND_SHARE * client_capacity(self.perf.workers)
        if bound:
            logger.warning(
                "the load generator used %.2f CPU cores at load %g: it, not the server, may be the "
                "limit there (more --workers, or a client on another machine)",
                cores,
                load,
            )
        metrics: dict[str, float] = {}
        if step.stream is not None:
            st = step.stream
            metrics["output_tokens_per_s"] = st.output_tokens_per_s
            for name, summary in (("ttft", st.ttft), ("itl", st.itl)):
                if summary is not None:
                    for stat in ("avg", "p50", "p90", "p95", "p99", "max"):
                        metrics[f"{name}_{stat}_us"] = summary.get(stat)
            if st.goodput is not None:
                metrics["goodput_requests_per_s"] = st.goodput.requests_per_s
        return Outcome(
            throughput=step.throughput,
            latency_us=lat,
            errors=step.error_count,
            stable=step.stable,
            spread_pct=spread,
            client_cpu=round(cores, 3),
            client_bound=bound,
            metrics=metrics,
            windows=len(step.windows),
            window_ms=int(perf.measurement_interval_ms),
        )
