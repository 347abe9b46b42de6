"""Tuning an LLM engine model (vLLM): engine arguments and instance count, judged on tokens/s.

For an LLM engine the knobs that decide throughput are the engine's own (``max_num_seqs``,
``max_num_batched_tokens``, chunked prefill, KV cache size), not Triton's batching. They live in
the model's ``<version>/model.json``, which NVIDIA's vllm backend hands to vLLM as its engine
arguments. A candidate is loaded on the running server through the model-repository API with
the file override (``file:<version>/model.json`` beside the ``config`` override in the load
request): no restart. An override replaces the model directory's files, so the candidate's
``model`` path is written as the absolute path of the packed ``hf_model/`` on this machine.

Each candidate is measured at every load level with LLM-shaped streams (``tritonkit perf``'s
``--prompt-tokens``/``--output-tokens``) and judged on output tokens/s among the candidates whose
TTFT/ITL/latency percentiles meet the budget at that level. The search is a coordinate descent
from the engine's defaults (the files as they are): each knob's values are tried in turn with
the others at the best found so far, then the next knob, within ``max_candidates`` loads.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritonkit.errors import PerfError, TuneError
from tritonkit.perf.llm import LlmLoad
from tritonkit.perf.runner import PerfSettings, run_perf
from tritonkit.perf.stream_metrics import StreamLimit, parse_stream_budget

__all__ = [
    "ENGINE_KNOBS",
    "EngineSpace",
    "EngineTrial",
    "EngineTuneResult",
    "default_engine_space",
    "engine_pareto",
    "tune_engine",
]

logger = logging.getLogger(__name__)

#: engine arguments with a default ladder (any other model.json key can be given explicitly)
ENGINE_KNOBS = ("max_num_seqs", "max_num_batched_tokens", "enable_chunked_prefill", "kv_cache_memory_bytes")
INSTANCES = "instance_count"


@dataclass(frozen=True)
class EngineSpace:
    """The values to try per knob (engine-argument names, and ``instance_count``)."""

    knobs: Mapping[str, tuple[Any, ...]]

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) for k, v in self.knobs.items()}


def default_engine_space(engine_args: Mapping[str, Any], *, max_model_len: int = 2048) -> EngineSpace:
    """A ladder per knob around the model's own values (its defaults are always tried first)."""
    seqs = int(engine_args.get("max_num_seqs", 256))
    batched = int(engine_args.get("max_num_batched_tokens", max(max_model_len, 2048)))
    knobs: dict[str, tuple[Any, ...]] = {
        "max_num_seqs": tuple(sorted({4, 16, 64, seqs})),
        "max_num_batched_tokens": tuple(
            sorted({max(max_model_len, 256), 2 * max(max_model_len, 256), batched})
        ),
        "enable_chunked_prefill": (False, True),
        INSTANCES: (1, 2),
    }
    return EngineSpace(knobs=knobs)


@dataclass(frozen=True)
class EngineTrial:
    """One candidate measured at one load level."""

    settings: Mapping[str, Any]  # knob -> value (only those that differ from the defaults)
    level: float
    output_tokens_per_s: float
    requests_per_s: float
    ttft_p99_us: float | None
    itl_p99_us: float | None
    latency_p99_us: float | None
    meets_budget: bool
    client_bound: bool
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "settings": dict(self.settings),
            "level": self.level,
            "output_tokens_per_s": self.output_tokens_per_s,
            "requests_per_s": self.requests_per_s,
            "ttft_p99_us": self.ttft_p99_us,
            "itl_p99_us": self.itl_p99_us,
            "latency_p99_us": self.latency_p99_us,
            "meets_budget": self.meets_budget,
            "client_bound": self.client_bound,
            "error": self.error,
        }


@dataclass
class EngineTuneResult:
    """Every trial, the defaults' and the best candidate's figures per load level."""

    model: str
    mode: str
    levels: tuple[float, ...]
    budget: str
    space: EngineSpace
    trials: list[EngineTrial] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)  # candidate -> why it did not load
    seconds: float = 0.0

    def at(self, level: float) -> list[EngineTrial]:
        return [t for t in self.trials if t.level == level and t.error is None]

    def baseline(self, level: float) -> EngineTrial | None:
        return next((t for t in self.at(level) if not t.settings), None)

    def best(self, level: float) -> EngineTrial | None:
        """The most output tokens/s among the trials that meet the budget at ``level``."""
        good = [t for t in self.at(level) if t.meets_budget]
        return max(good, key=lambda t: t.output_tokens_per_s, default=None)

    def gain(self, level: float) -> float | None:
        base, best = self.baseline(level), self.best(level)
        if base is None or best is None or base.output_tokens_per_s <= 0:
            return None
        return best.output_tokens_per_s / base.output_tokens_per_s

    def to_dict(self) -> dict[str, Any]:
        per_level = []
        for level in self.levels:
            base, best = self.baseline(level), self.best(level)
            per_level.append(
                {
                    "level": level,
                    "defaults": base.to_dict() if base else None,
                    "best": best.to_dict() if best else None,
                    "gain": self.gain(level),
                    "pareto": [t.to_dict() for t in engine_pareto(self.at(level))],
                }
            )
        return {
            "model": self.model,
            "mode": self.mode,
            "levels": list(self.levels),
            "budget": self.budget,
            "space": self.space.to_dict(),
            "per_level": per_level,
            "trials": [t.to_dict() for t in self.trials],
            "refused": self.refused,
            "seconds": self.seconds,
        }


def engine_pareto(trials: Sequence[EngineTrial]) -> list[EngineTrial]:
    """Trials no other beats on both output tokens/s (higher) and TTFT p99 (lower)."""
    ok = [t for t in trials if t.ttft_p99_us is not None]
    front = []
    for t in ok:
        assert t.ttft_p99_us is not None
        dominated = any(
            o is not t
            and o.ttft_p99_us is not None
            and o.output_tokens_per_s >= t.output_tokens_per_s
            and o.ttft_p99_us <= t.ttft_p99_us
            and (o.output_tokens_per_s > t.output_tokens_per_s or o.ttft_p99_us < t.ttft_p99_us)
            for o in ok
        )
        if not dominated:
            front.append(t)
    return sorted(front, key=lambda t: t.ttft_p99_us or 0.0)


def _meets(limits: Sequence[StreamLimit], trial_values: Mapping[str, float | None]) -> bool:
    for lim in limits:
        value = trial_values.get(f"{lim.metric}_{lim.stat}")
        if value is None or value > lim.limit_us:
            return False
    return True


class _EngineFiles:
    """An LLM engine model's files: its model.json (engine arguments) and where its hf_model/ lies."""

    def __init__(self, model_dir: Path) -> None:
        versions = sorted(
            (p for p in model_dir.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name)
        )
        for version in reversed(versions):
            if (version / "model.json").is_file():
                self.version = version
                break
        else:
            raise TuneError(
                f"{model_dir}: no <version>/model.json: not a vLLM stage",
                hint="engine tuning needs a stage built with backend: vllm (tritonkit build)",
            )
        try:
            self.args: dict[str, Any] = json.loads((self.version / "model.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise TuneError(f"{self.version / 'model.json'}: not readable JSON: {exc}") from exc
        packed = self.version / "hf_model"
        self.model_path = str(packed.resolve()) if packed.is_dir() else str(self.args.get("model", ""))

    def files(self, settings: Mapping[str, Any]) -> dict[str, bytes]:
        """The candidate's model.json as a load-request file override."""
        args = {**self.args, "model": self.model_path}
        if (
            "tokenizer" in args
            and not Path(str(args["tokenizer"])).is_absolute()
            and Path(self.model_path).is_dir()
        ):
            args["tokenizer"] = self.model_path
        args.update({k: v for k, v in settings.items() if k != INSTANCES})
        return {f"file:{self.version.name}/model.json": (json.dumps(args, indent=2) + "\n").encode("utf-8")}


def _label(settings: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={json.dumps(v)}" for k, v in sorted(settings.items())) or "defaults"


def tune_engine(
    *,
    url: str,
    model: str,
    model_dir: Path,
    levels: Sequence[float],
    llm: LlmLoad,
    budget: str,
    mode: str = "concurrency",
    protocol: str = "grpc",
    space: EngineSpace | None = None,
    max_candidates: int = 12,
    duration_s: float = 6.0,
    warmup_s: float = 1.0,
    tokenizer: str | None = None,
    progress: Callable[[EngineTrial], None] | None = None,
) -> EngineTuneResult:
    """Search engine arguments and instance count of ``model`` on the server at ``url``."""
    from tritonkit.tune.control import CandidateRefusedError, ModelControl

    limits = parse_stream_budget(budget)
    engine = _EngineFiles(model_dir)
    space = space or default_engine_space(engine.args)
    result = EngineTuneResult(model=model, mode=mode, levels=tuple(levels), budget=budget, space=space)
    control = ModelControl(url, protocol=protocol)
    original = control.config(model)
    started = time.monotonic()
    tried: set[str] = set()
    changed = [False]  # whether a candidate replaced what the server was serving

    def measure(settings: dict[str, Any]) -> float:
        """Load and measure a candidate; its score: tokens/s summed over the levels it meets."""
        key = _label(settings)
        tried.add(key)
        if not settings and not changed[0]:
            return _score(settings)  # the defaults are what the server serves: no reload
        changed[0] = True
        cfg = original
        if INSTANCES in settings:
            from tritonkit.tune.space import apply_settings

            cfg = apply_settings(original, {"instance_count": settings[INSTANCES]})
        try:
            control.load(model, cfg, files=engine.files(settings))
        except CandidateRefusedError as exc:
            result.refused[key] = exc.reason
            logger.info("candidate %s refused: %s", key, exc.reason)
            return -1.0
        return _score(settings)

    def _score(settings: dict[str, Any]) -> float:
        score = 0.0
        for level in levels:
            trial = _measure_level(
                url, model, protocol, mode, level, llm, settings, limits, duration_s, warmup_s, tokenizer
            )
            result.trials.append(trial)
            if progress is not None:
                progress(trial)
            if trial.meets_budget:
                score += trial.output_tokens_per_s
        return score

    try:
        _coordinate_search(space, engine.args, measure, tried, max_candidates)
    finally:
        try:
            if changed[0]:
                control.load(model, original, files=engine.files({}))  # back to the model's own files
        finally:
            control.close()
    result.seconds = time.monotonic() - started
    return result


def _coordinate_search(
    space: EngineSpace,
    defaults: Mapping[str, Any],
    measure: Callable[[dict[str, Any]], float],
    tried: set[str],
    max_candidates: int,
) -> dict[str, Any]:
    """From the defaults, each knob's values in turn with the others at the best so far."""
    best: dict[str, Any] = {}
    best_score = measure(best)
    for knob, values in space.knobs.items():
        default = defaults.get(knob, 1 if knob == INSTANCES else None)
        for value in values:
            if len(tried) >= max_candidates:
                return best
            candidate = {**best, knob: value}
            if value == default:
                candidate.pop(knob)
            if _label(candidate) in tried:
                continue
            score = measure(candidate)
            if score > best_score:
                best, best_score = candidate, score
    return best


def _measure_level(
    url: str,
    model: str,
    protocol: str,
    mode: str,
    level: float,
    llm: LlmLoad,
    settings: Mapping[str, Any],
    limits: Sequence[StreamLimit],
    duration_s: float,
    warmup_s: float,
    tokenizer: str | None,
) -> EngineTrial:
    perf = PerfSettings(
        url=url,
        model=model,
        protocol=protocol,
        mode=mode,
        levels=(float(level),),
        duration_s=duration_s,
        measurement_interval_ms=max(100, int(duration_s * 1000 / 3)),
        warmup_s=warmup_s,
        stream=True,
        llm=llm,
        tokenizer=tokenizer,
        server_stats=False,
    )
    try:
        (step,) = run_perf(perf).steps
    except PerfError as exc:
        return EngineTrial(dict(settings), level, 0.0, 0.0, None, None, None, False, False, error=exc.message)
    st = step.stream
    if st is None or step.requests == 0:
        why = ", ".join(f"{k} x{v}" for k, v in step.errors.items()) or "no request completed"
        return EngineTrial(dict(settings), level, 0.0, 0.0, None, None, None, False, False, error=why)
    values = {
        "ttft_p99": st.get("ttft", "p99"),
        "itl_p99": st.get("itl", "p99"),
        "latency_p99": step.latency_us("p99"),
    }
    values.update({f"ttft_{s}": st.get("ttft", s) for s in ("avg", "p50", "p90", "p95", "max")})
    values.update({f"itl_{s}": st.get("itl", s) for s in ("avg", "p50", "p90", "p95", "max")})
    values.update({f"latency_{s}": step.latency_us(s) for s in ("avg", "p50", "p90", "p95", "max")})
    return EngineTrial(
        settings=dict(settings),
        level=level,
        output_tokens_per_s=st.output_tokens_per_s,
        requests_per_s=st.requests_per_s,
        ttft_p99_us=values["ttft_p99"],
        itl_p99_us=values["itl_p99"],
        latency_p99_us=values["latency_p99"],
        meets_budget=_meets(limits, values) and step.error_count == 0,
        client_bound=st.client_bound,
        error=None,
    )
