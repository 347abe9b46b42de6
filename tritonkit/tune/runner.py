"""``tune(TuneSettings(...)) -> TuneResult``: find the best config of a model by measurement.

Without ``url`` a local tritonserver is started on ``repository`` with
``--model-control-mode=explicit`` (only the tuned model and, for an ensemble, its composing
models are loaded); with ``url`` a running endpoint that allows model control is tuned. Either
way candidates go through the model-repository API (no restarts), and the models' original
configs are loaded back when the run ends, fails or is interrupted.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tritonkit.client.auth import AuthProvider, for_protocol
from tritonkit.config import ModelConfig, config_to_dict, read_config
from tritonkit.errors import TritonKitError, TuneError
from tritonkit.perf.cost import find_sku, parse_budget
from tritonkit.perf.runner import PerfSettings, Progress
from tritonkit.tune import stages as stage_tuning
from tritonkit.tune.control import ModelControl
from tritonkit.tune.measure import LiveMeasurer
from tritonkit.tune.space import Space, apply_settings, default_space, load_hint, load_space
from tritonkit.tune.strategy import (
    STRATEGIES,
    Measurement,
    Objective,
    SearchResult,
    cache_from_lines,
    search,
)

__all__ = ["TuneResult", "TuneSettings", "tune"]

CHECKPOINT_VERSION = 2


@dataclass(frozen=True, kw_only=True)
class TuneSettings:
    """Everything that defines one tuning run."""

    model: str
    repository: str | Path | None = None  # local server's repository; with url: for validation/variants
    url: str | None = None  # None: start a local server on ``repository``
    protocol: str = "http"
    model_config_name: str | None = "auto"
    space_file: str | Path | None = None
    space: Space | None = None  # instead of defaults / space_file
    strategy: str = "default"
    #: the production load: concurrency levels or request rates (one level or several; the
    #: recommended config is judged at their peak). None: each candidate's sweep finds the load
    concurrency: tuple[int, ...] | None = None
    request_rate: tuple[float, ...] | None = None
    workers: int = 0  # load-generator processes (perf's --workers); 0: in-process
    trials: int | None = None  # default strategy: most candidates (None: from the space)
    patience: int = 8  # default strategy: candidates in a row without gain before it stops
    seed: int = 0
    objective: str = "throughput"
    latency_budget: str | None = None  # e.g. "p99=20ms"
    min_throughput: float | None = None
    sku: str | None = None  # --objective cost: a VM size from perf's price table
    price_per_hour: float | None = None
    spot: bool = False
    budget_s: float | None = None
    max_measurements: int | None = None
    finalists: int = 2
    screen_window_ms: int = 500
    confirm_window_ms: int = 1000
    stability_percentage: float = 10.0
    max_trials: int = 10
    warmup_s: float = 0.5
    noise_pct: float = 5.0
    input_data: str = "random"
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    timeout_s: float = 30.0
    cacert: str | None = None
    checkpoint: str | Path | None = None
    resume: bool = False
    startup_timeout_s: float = 180.0

    def validate(self) -> None:
        if self.url is None and self.repository is None:
            raise TuneError(
                "give a model repository (local server) or a URL", hint="tritonkit tune REPO MODEL"
            )
        if self.strategy not in STRATEGIES:
            raise TuneError(f"unknown strategy '{self.strategy}'", hint="use one of " + ", ".join(STRATEGIES))
        if self.concurrency is not None and self.request_rate is not None:
            raise TuneError(
                "give --concurrency or --request-rate, not both",
                hint="the production load is either closed (concurrency) or open (request rate)",
            )
        if self.concurrency is not None and (not self.concurrency or any(c < 1 for c in self.concurrency)):
            raise TuneError("--concurrency levels must be positive integers", hint="e.g. --concurrency 32")
        if self.request_rate is not None and (
            not self.request_rate or any(not r > 0 for r in self.request_rate)
        ):
            raise TuneError("--request-rate levels must be positive", hint="e.g. --request-rate 200")
        if self.workers < 0:
            raise TuneError("--workers must be 0 (in-process) or more")
        if self.trials is not None and self.trials < 1:
            raise TuneError("--trials must be at least 1")
        if self.patience < 1:
            raise TuneError("--patience must be at least 1")
        if self.protocol not in ("http", "grpc"):
            raise TuneError(f"unknown protocol '{self.protocol}'", hint="use http or grpc")
        if self.budget_s is not None and self.budget_s <= 0:
            raise TuneError("--budget must be positive")
        if self.max_measurements is not None and self.max_measurements < 2:
            raise TuneError("--max-measurements must be at least 2 (one screening, one confirmation)")
        if self.screen_window_ms < 100 or self.confirm_window_ms < 100:
            raise TuneError("measurement windows must be at least 100 ms")
        if self.resume and self.checkpoint is None:
            raise TuneError("--resume needs a checkpoint file", hint="pass --checkpoint PATH")
        if self.min_throughput is not None and self.min_throughput <= 0:
            raise TuneError("--min-throughput must be positive")

    @property
    def production_loads(self) -> tuple[float, ...]:
        levels = self.request_rate if self.request_rate is not None else self.concurrency
        return tuple(sorted({float(x) for x in levels})) if levels else ()

    @property
    def load_mode(self) -> str:
        return "request_rate" if self.request_rate is not None else "concurrency"

    def objective_spec(self) -> Objective:
        from tritonkit.perf.stream_metrics import StreamLimit, is_stream_budget, parse_stream_budget

        limits: tuple[StreamLimit, ...] = ()
        if self.latency_budget and is_stream_budget(self.latency_budget):
            limits = parse_stream_budget(self.latency_budget)  # ttft_p99=200ms,itl_p99=40ms
            budget = None
        else:
            budget = parse_budget(self.latency_budget) if self.latency_budget else None
        stat = budget.stat if budget else "p99"
        if self.objective == "ttft":  # the TTFT objective's statistic: the TTFT limit's, or p99
            stat = next((lim.stat for lim in limits if lim.metric == "ttft"), "p99")
        price = self.price_per_hour
        if self.objective == "cost" and price is None and self.sku:
            sku = find_sku(self.sku)
            price = sku.spot if self.spot and sku.spot is not None else sku.pay_as_you_go
        return Objective(
            kind=self.objective,
            latency_stat=stat,
            budget=budget,
            stream_limits=limits,
            min_throughput=self.min_throughput,
            usd_per_hour=price,
        )


@dataclass(frozen=True)
class TuneResult:
    """A finished run: every measurement, the winner (None: no feasible config) and why."""

    model: str
    url: str
    strategy: str
    objective: Objective
    space: Space
    search: SearchResult
    base_configs: Mapping[str, ModelConfig]
    original_configs: Mapping[str, ModelConfig]
    wall_s: float
    server_restarts: int
    config_loads: int
    restore_problems: tuple[str, ...]
    started_at: str
    settings: Mapping[str, Any]
    #: model -> the repository file its candidates were built on (what ``--apply`` replaces)
    source_files: Mapping[str, Path] = field(default_factory=dict)
    #: a pipeline's stages (tritonkit.tune.stages): working stages, the bottleneck profiled on
    #: the shipped configs ("before") and on the winner ("after", whose bottleneck bound it)
    stages: Mapping[str, Any] = field(default_factory=dict)

    @property
    def winner(self) -> Measurement | None:
        return self.search.winner

    @property
    def measurements(self) -> tuple[Measurement, ...]:
        return self.search.measurements

    def configs_of(self, m: Measurement) -> dict[str, ModelConfig]:
        """The full configs (per tuned model) of a measured point."""
        by_model = self.space.by_model(m.point)
        return {
            model: apply_settings(self.base_configs[model], by_model.get(model, {}))
            for model in self.base_configs
        }

    def winner_configs(self) -> dict[str, ModelConfig]:
        if self.winner is None:
            raise TuneError(
                f"no feasible config for '{self.model}': nothing to write",
                hint="relax --latency-budget / --min-throughput, or widen the space",
            )
        return self.configs_of(self.winner)

    def baseline(self) -> Measurement | None:
        """The best screening measurement of the model's original settings, when measured."""
        start = self.space.signature(self.space.point_of(original_settings(self.space, self.base_configs)))
        same = [m for m in self.measurements if m.signature == start and m.phase == "screen" and m.feasible]
        return max(same, key=lambda m: m.score) if same else None

    def to_dict(self) -> dict[str, Any]:
        def m(x: Measurement | None) -> dict[str, Any] | None:
            return x.to_dict() if x is not None else None

        base = self.baseline()
        return {
            "model": self.model,
            "url": self.url,
            "strategy": self.strategy,
            "objective": {
                "kind": self.objective.kind,
                "unit": self.objective.unit,
                "latency_budget": str(self.objective.budget) if self.objective.budget else None,
                "min_throughput": self.objective.min_throughput,
                "usd_per_hour": self.objective.usd_per_hour,
                "stream_limits": [str(lim) for lim in self.objective.stream_limits],
            },
            "space": self.space.to_dict(),
            "measurements": [x.to_dict() for x in self.measurements],
            "measurement_count": len(self.measurements),
            "new_measurements": self.search.new_measurements,
            "winner": m(self.winner),
            "runner_up": m(self.search.runner_up),
            "within_noise": self.search.within_noise,
            "noise_pct": self.search.noise_pct,
            "baseline": m(base),
            "stopped_by": self.search.stopped_by,
            "trials": self.search.trials,
            "load_mode": self.space.load_mode,
            "production_levels": list(self.search.production_loads),  # the file format keeps its key
            "recommended": {
                "measurement": m(self.winner),
                "load": self.winner.load if self.winner is not None else None,
                "meets_constraints_in_confirmation": self.winner is not None,
            },
            "per_level": [{"level": level, "best": x.to_dict()} for level, x in self.search.per_level],
            "client_bound": [
                {"index": x.index, "level": x.load, "client_cpu": x.outcome.client_cpu}
                for x in self.search.client_bound
            ],
            "wall_s": round(self.wall_s, 2),
            "server_restarts": self.server_restarts,
            "config_loads": self.config_loads,
            "restore_problems": list(self.restore_problems),
            "started_at": self.started_at,
            "settings": dict(self.settings),
            "stages": dict(self.stages),
        }


def original_settings(space: Space, configs: Mapping[str, ModelConfig]) -> dict[str, Any]:
    """The space's ``model.field`` values as ``configs`` have them (the search's start)."""
    out: dict[str, Any] = {}
    for d in space.dimensions:
        cfg = configs.get(d.model)
        if cfg is None:
            continue
        data = config_to_dict(cfg)
        groups = data.get("instance_group") or [{}]
        db = data.get("dynamic_batching")
        known: dict[str, Any] = {
            "instance_count": groups[0].get("count", 1),
            "instance_kind": groups[0].get("kind", "KIND_AUTO"),
            "max_batch_size": data.get("max_batch_size", 0),
            "dynamic_batching": db is not None,
            "max_queue_delay_microseconds": int((db or {}).get("max_queue_delay_microseconds", 0)),
            "preferred_batch_size": (db or {}).get("preferred_batch_size", []),
        }
        out[d.key] = known[d.name] if d.name in known else data.get(d.name)
    return out


# --- checkpoint ---------------------------------------------------------------------------------


def _checkpoint_header(settings: TuneSettings, space: Space, objective: Objective) -> dict[str, Any]:
    return {
        "type": "header",
        "version": CHECKPOINT_VERSION,
        "model": settings.model,
        "strategy": settings.strategy,
        "space": space.to_dict(),
        "objective": [
            objective.kind,
            str(objective.budget),
            objective.min_throughput,
            *(str(lim) for lim in objective.stream_limits),
        ],
        "search": [settings.trials, settings.patience, settings.seed],
    }


def _read_checkpoint(path: Path, header: Mapping[str, Any]) -> list[str]:
    try:
        lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise TuneError(f"cannot read checkpoint {path}: {exc.strerror}") from exc
    if not lines:
        return []
    try:
        first = json.loads(lines[0])
        good = [ln for ln in lines[1:] if _is_json(ln)]  # a line cut by a crash is dropped
    except ValueError as exc:
        raise TuneError(f"checkpoint {path} is not a tritonkit tune checkpoint (JSONL)") from exc
    if first != dict(header):
        raise TuneError(
            f"checkpoint {path} belongs to a different run (model, strategy, space or objective differ)",
            hint="use the same settings to resume, or another --checkpoint path for a new run",
        )
    return good


def _is_json(line: str) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


class _Checkpoint:
    def __init__(self, path: Path | None, header: Mapping[str, Any], keep: list[str]) -> None:
        self.path = path
        self.fh: Any = None
        if path is not None:
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text("\n".join([json.dumps(dict(header)), *keep]) + "\n", encoding="utf-8")
            os.replace(tmp, path)
            self.fh = path.open("a", encoding="utf-8")

    def write(self, m: Measurement) -> None:
        if self.fh is None or m.resumed:
            return
        self.fh.write(json.dumps({"type": "measurement", **m.to_dict()}) + "\n")
        self.fh.flush()
        os.fsync(self.fh.fileno())

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()


# --- the run ------------------------------------------------------------------------------------


@contextlib.contextmanager
def _endpoint(settings: TuneSettings, models: list[str]) -> Iterator[tuple[str, Callable[[], int]]]:
    """The URL to tune and a function that counts server restarts so far."""
    if settings.url is not None:
        yield settings.url, lambda: 0
        return
    from tritonkit.server import LocalTritonServer

    server = LocalTritonServer(
        Path(str(settings.repository)),
        model_config_name=settings.model_config_name,
        extra_args=["--model-control-mode=explicit", *(f"--load-model={m}" for m in models)],
        startup_timeout=settings.startup_timeout_s,
    )
    with server:
        pid = server.pid

        def restarts() -> int:
            return 0 if server.running and server.pid == pid else 1

        url = server.grpc_url if settings.protocol == "grpc" else server.http_url
        yield url, restarts


def _config_paths(settings: TuneSettings, names: list[str]) -> dict[str, Path]:
    """Each model's config file in the repository: the variant the server picks, else
    config.pbtxt (models without a config file are left out)."""
    if settings.repository is None:
        return {}
    from tritonkit.server import resolve_model_config_name

    variant = resolve_model_config_name(settings.model_config_name)
    out = {}
    for name in names:
        model_dir = Path(settings.repository) / name
        path = model_dir / "config.pbtxt"
        if variant and (model_dir / "configs" / f"{variant}.pbtxt").is_file():
            path = model_dir / "configs" / f"{variant}.pbtxt"
        if path.is_file():
            out[name] = path
    return out


def _file_configs(settings: TuneSettings, names: list[str]) -> dict[str, ModelConfig]:
    return {m: read_config(p) for m, p in _config_paths(settings, names).items()}


def _members(settings: TuneSettings, cfg: ModelConfig | None) -> list[str]:
    if cfg is None or cfg.platform != "ensemble":
        return []
    return [str(step.model_name) for step in cfg.ensemble_scheduling.step]


def _config_or_none(settings: TuneSettings, control: ModelControl, name: str) -> ModelConfig | None:
    """A model's config from the repository, else as the server serves it (None: neither)."""
    found = _file_configs(settings, [name]).get(name)
    if found is not None:
        return found
    try:
        return control.config(name)
    except TritonKitError:
        return None


def _choose_space(
    settings: TuneSettings,
    base: Mapping[str, ModelConfig],
    pipeline: stage_tuning.Pipeline,
    stage_info: Mapping[str, Any],
) -> Space:
    if settings.space is not None:
        return settings.space
    if settings.space_file is not None:
        return load_space(settings.space_file, target=settings.model, configs=base)
    if pipeline.is_pipeline and stage_info:
        first = stage_info["before"]["bottleneck"]
        return stage_tuning.pipeline_space(settings.model, base, pipeline.working, first=first)
    return default_space(settings.model, base)


def _bound_by(
    measurer: LiveMeasurer,
    space: Space,
    winner: Measurement,
    perf: PerfSettings,
    pipeline: stage_tuning.Pipeline,
    settings: TuneSettings,
) -> dict[str, Any]:
    """The winner put back on the server and profiled stage by stage: its bottleneck bound it."""
    try:
        measurer.apply(space.by_model(winner.point))
        after = stage_tuning.profile_stages(
            perf, pipeline.working, winner.load, window_ms=settings.confirm_window_ms
        )
    except TritonKitError as exc:
        return {"after": None, "bound_by": None, "note": f"the winner could not be profiled: {exc.message}"}
    return {"after": after.to_dict(), "bound_by": after.bottleneck}


def tune(
    settings: TuneSettings,
    *,
    auth: AuthProvider | None = None,
    headers: Mapping[str, str] | None = None,
    progress: Callable[[Measurement], None] | None = None,
    perf_progress: Callable[[Progress], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    command: str = "",
) -> TuneResult:
    """Tune ``settings.model``; the server's original configs are restored before returning.

    ``command`` (the command line that started the run) is recorded in the result."""
    settings.validate()
    objective = settings.objective_spec()
    started = clock()
    started_at = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    repo = Path(settings.repository) if settings.repository is not None else None
    if settings.url is None and repo is not None:
        if not (repo / settings.model).is_dir():
            known = (
                sorted(p.name for p in repo.iterdir() if p.is_dir() and not p.name.startswith("."))
                if repo.is_dir()
                else []
            )
            raise TuneError(
                f"model '{settings.model}' is not in {repo}",
                hint=("models there: " + ", ".join(known)) if known else "check the repository path",
            )
    top_file = _file_configs(settings, [settings.model]).get(settings.model)
    members = _members(settings, top_file)
    shipped = stage_tuning.pipeline_of(
        settings.model, lambda name: _file_configs(settings, [name]).get(name), repo
    )
    auth = for_protocol(auth, settings.protocol) if auth is not None else None
    merged_headers = dict(headers or {})
    if auth is not None:
        merged_headers.update(auth.headers())
    with _endpoint(settings, [settings.model, *shipped.bls_callees]) as (url, restarts):
        control = ModelControl(
            url, protocol=settings.protocol, headers=merged_headers, cacert=settings.cacert
        )
        try:
            top_server = control.config(settings.model)
            # a model served decoupled is measured by perf --stream (the served config decides)
            if not members:
                members = _members(settings, top_server)
            tuned = [m for m in members if m != settings.model] if members else [settings.model]
            pipeline = stage_tuning.pipeline_of(
                settings.model, lambda name: _config_or_none(settings, control, name), repo
            )
            if pipeline.is_pipeline:
                tuned = list(pipeline.working)
            original = {m: control.config(m) for m in [settings.model, *tuned]}
            files = _file_configs(settings, [settings.model, *tuned])
            base = {m: files.get(m, original[m]) for m in [settings.model, *tuned]}
            perf = PerfSettings(
                url=url,
                model=settings.model,
                protocol=settings.protocol,
                mode=settings.load_mode,
                workers=settings.workers,
                stability_percentage=settings.stability_percentage,
                warmup_s=settings.warmup_s,
                input_data=settings.input_data,
                shapes=dict(settings.shapes),
                timeout_s=settings.timeout_s,
                server_stats=False,
                cacert=settings.cacert,
                latency_stat="avg",
            )
            stage_info: dict[str, Any] = {}
            # stage tuning: a pipeline searched over its derived space (a given space is the user's)
            staged = pipeline.is_pipeline and settings.space is None and settings.space_file is None
            if staged:
                level = (settings.production_loads or (load_hint(base)({}),))[-1]
                before = stage_tuning.profile_stages(
                    perf, pipeline.working, level, window_ms=settings.confirm_window_ms
                )
                stage_info = {"working": list(pipeline.working), "before": before.to_dict()}
            space = _choose_space(settings, base, pipeline, stage_info)
            if settings.production_loads:
                space = replace(space, loads=settings.production_loads, load_mode=settings.load_mode)
            if not space.dimensions:
                raise TuneError(f"nothing to tune for '{settings.model}': the search space is empty")
            used = {d.model for d in space.dimensions}
            base = {m: c for m, c in base.items() if m in used}
            header = _checkpoint_header(settings, space, objective)
            ckpt_path = Path(settings.checkpoint) if settings.checkpoint is not None else None
            keep = _read_checkpoint(ckpt_path, header) if (ckpt_path is not None and settings.resume) else []
            checkpoint = _Checkpoint(ckpt_path, header, keep)
            perf = replace(perf, mode=space.load_mode)
            model_dirs = {m: (repo / m if repo is not None else None) for m in base}
            measurer = LiveMeasurer(
                control=control,
                base=base,
                original={m: original[m] for m in base},
                model_dirs=model_dirs,
                perf=perf,
                screen_window_ms=settings.screen_window_ms,
                confirm_window_ms=settings.confirm_window_ms,
                max_trials=settings.max_trials,
                auth=auth,
                headers=headers,
                progress=perf_progress,
            )

            def record(m: Measurement) -> None:
                checkpoint.write(m)
                if progress is not None:
                    progress(m)

            restore_problems: list[str] = []
            try:
                start_point = space.point_of(original_settings(space, base))
                result = search(
                    space,
                    objective,
                    measurer,
                    strategy=settings.strategy,
                    start=start_point,
                    max_measurements=settings.max_measurements,
                    deadline=(started + settings.budget_s) if settings.budget_s else None,
                    finalists=settings.finalists,
                    noise_pct=settings.noise_pct,
                    cache=cache_from_lines(keep),
                    on_measurement=record,
                    clock=clock,
                    production_loads=settings.production_loads,
                    load_hint=load_hint(base) if not settings.production_loads else None,
                    trials=settings.trials,
                    patience=settings.patience,
                    seed=settings.seed,
                )
                if staged and result.winner is not None:
                    stage_info.update(_bound_by(measurer, space, result.winner, perf, pipeline, settings))
            finally:
                checkpoint.close()
                try:
                    restore_problems = measurer.restore()
                except Exception as exc:  # noqa: BLE001 - the server may be gone; say so
                    restore_problems = [f"could not restore: {exc}"]
        finally:
            control.close()
        server_restarts = restarts()
    return TuneResult(
        model=settings.model,
        url=url,
        strategy=settings.strategy,
        objective=objective,
        space=space,
        search=result,
        base_configs=base,
        original_configs={m: original[m] for m in base},
        wall_s=clock() - started,
        server_restarts=server_restarts,
        config_loads=measurer.loads,
        restore_problems=tuple(restore_problems),
        started_at=started_at,
        source_files={m: p for m, p in _config_paths(settings, list(base)).items()},
        stages=stage_info,
        settings={
            "command": command,
            "strategy": settings.strategy,
            "concurrency": list(settings.concurrency) if settings.concurrency else None,
            "request_rate": list(settings.request_rate) if settings.request_rate else None,
            "workers": settings.workers,
            "trials": settings.trials,
            "patience": settings.patience,
            "seed": settings.seed,
            "screen_window_ms": settings.screen_window_ms,
            "confirm_window_ms": settings.confirm_window_ms,
            "stability_percentage": settings.stability_percentage,
            "max_trials": settings.max_trials,
            "warmup_s": settings.warmup_s,
            "finalists": settings.finalists,
            "max_measurements": settings.max_measurements,
            "budget_s": settings.budget_s,
            "input_data": settings.input_data,
            "protocol": settings.protocol,
            "model_config_name": settings.model_config_name,
        },
    )
