"""``tune(TuneSettings(...)) -> TuneResult``: find the best config of a model by measurement.

Without ``url`` a local tritonserver is started on ``repository`` with
``--model-control-mode=explicit`` (only the tuned model and, for an ensemble, its composing
models are loaded); with ``url`` a running endpoint that allows model control is tuned. Either
way candidates go through the model-repository API (no restarts). On a running endpoint the
models' original configs are loaded back when the run ends, fails or is interrupted; a local
server is stopped instead (nothing would serve them).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tritonkit.client.auth import AuthProvider, for_protocol
from tritonkit.config import ModelConfig, config_to_dict, read_config
from tritonkit.errors import TritonKitError, TuneError
from tritonkit.perf.runner import PerfSettings, Progress
from tritonkit.tune import stages as stage_tuning
from tritonkit.tune.checkpoint import Checkpoint, checkpoint_header, read_checkpoint
from tritonkit.tune.control import ModelControl
from tritonkit.tune.measure import LiveMeasurer
from tritonkit.tune.objective import Measurement, Objective, SearchResult, cache_from_lines
from tritonkit.tune.settings import TuneSettings
from tritonkit.tune.space import Space, apply_settings, default_space, load_hint, load_space
from tritonkit.tune.strategy import search
from tritonkit.tune.timing import time_breakdown

__all__ = ["TuneResult", "TuneSettings", "tune"]


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
    #: seconds the run spent outside the search's measurements: ``server_start_s``,
    #: ``setup_s``, ``stage_profile_s``, ``restore_s``, ``server_stop_s`` (see time_breakdown)
    timing: Mapping[str, float] = field(default_factory=dict)

    @property
    def winner(self) -> Measurement | None:
        return self.search.winner

    def time_breakdown(self) -> dict[str, Any]:
        """Where the run's time went: its steps and each search phase, split into config loads,
        warm-ups, measurement windows and the load generator's set-up."""
        return time_breakdown(self.measurements, total_s=self.wall_s, steps=self.timing)

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
            "final_check": self.search.check.to_dict() if self.search.check is not None else None,
            "client_bound": [
                {"index": x.index, "level": x.load, "client_cpu": x.outcome.client_cpu}
                for x in self.search.client_bound
            ],
            "wall_s": round(self.wall_s, 2),
            "time_breakdown": self.time_breakdown(),
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


@dataclass(frozen=True)
class _Served:
    """The models a run tunes, as the server serves them and as their files have them."""

    pipeline: stage_tuning.Pipeline
    original: dict[str, ModelConfig]  # model -> the config the server had when the run began
    base: dict[str, ModelConfig]  # model -> what candidates are built on (the file, else the served)


@dataclass(frozen=True)
class _Plan:
    """What is searched: the space, the perf settings every measurement starts from, and a
    pipeline's stage profile (``staged``: the space was derived from its bottleneck)."""

    space: Space
    perf: PerfSettings
    base: dict[str, ModelConfig]
    stage_info: dict[str, Any]
    staged: bool


def _check_model_dir(settings: TuneSettings, repo: Path | None) -> None:
    """A local run's model must be in the repository (say which models are)."""
    if settings.url is not None or repo is None or (repo / settings.model).is_dir():
        return
    known = (
        sorted(p.name for p in repo.iterdir() if p.is_dir() and not p.name.startswith("."))
        if repo.is_dir()
        else []
    )
    raise TuneError(
        f"model '{settings.model}' is not in {repo}",
        hint=("models there: " + ", ".join(known)) if known else "check the repository path",
    )


def _served_models(
    settings: TuneSettings, control: ModelControl, repo: Path | None, members: list[str]
) -> _Served:
    """The tuned models: the model, an ensemble's members, or a pipeline's working stages."""
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
    models = [settings.model, *tuned]
    original = {m: control.config(m) for m in models}
    files = _file_configs(settings, models)
    return _Served(pipeline=pipeline, original=original, base={m: files.get(m, original[m]) for m in models})


def _perf_settings(settings: TuneSettings, url: str) -> PerfSettings:
    return PerfSettings(
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
        stagger=True,
    )


def _plan(settings: TuneSettings, served: _Served, perf: PerfSettings) -> _Plan:
    """The space to search; a pipeline is profiled stage by stage first (its bottleneck seeds
    the derived space; a given space is the user's)."""
    pipeline, base = served.pipeline, served.base
    stage_info: dict[str, Any] = {}
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
    return _Plan(
        space=space,
        perf=replace(perf, mode=space.load_mode),
        base={m: c for m, c in base.items() if m in used},
        stage_info=stage_info,
        staged=staged,
    )


def _search(
    settings: TuneSettings,
    plan: _Plan,
    objective: Objective,
    measurer: LiveMeasurer,
    *,
    keep: list[str],
    record: Callable[[Measurement], None],
    deadline: float | None,
    clock: Callable[[], float],
) -> SearchResult:
    """Run the strategy from the model's own settings (a checkpoint's lines replayed first)."""
    space, base = plan.space, plan.base
    return search(
        space,
        objective,
        measurer,
        strategy=settings.strategy,
        start=space.point_of(original_settings(space, base)),
        max_measurements=settings.max_measurements,
        deadline=deadline,
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
        check_rounds=settings.check_rounds,
    )


def _open_checkpoint(
    settings: TuneSettings, plan: _Plan, objective: Objective
) -> tuple[Checkpoint, list[str]]:
    """The run's checkpoint and the lines it resumes from (none unless ``resume``)."""
    header = checkpoint_header(settings, plan.space, objective)
    path = Path(settings.checkpoint) if settings.checkpoint is not None else None
    keep = read_checkpoint(path, header) if (path is not None and settings.resume) else []
    return Checkpoint(path, header, keep), keep


def _restore(measurer: LiveMeasurer) -> list[str]:
    try:
        return measurer.restore()
    except Exception as exc:  # noqa: BLE001 - the server may be gone; say so
        return [f"could not restore: {exc}"]


@dataclass(frozen=True)
class _Hooks:
    """What the caller hands a run: credentials, progress callbacks and the clock."""

    auth: AuthProvider | None
    headers: Mapping[str, str] | None
    progress: Callable[[Measurement], None] | None
    perf_progress: Callable[[Progress], None] | None
    clock: Callable[[], float]


@dataclass(frozen=True)
class _Searched:
    result: SearchResult
    stage_info: dict[str, Any]
    restore_problems: tuple[str, ...]
    loads: int  # config loads through the model-repository API
    timing: dict[str, float]  # stage_profile_s, restore_s


def _measured_search(
    settings: TuneSettings,
    plan: _Plan,
    served: _Served,
    objective: Objective,
    control: ModelControl,
    repo: Path | None,
    *,
    deadline: float | None,
    hooks: _Hooks,
) -> _Searched:
    """The search on the live server, checkpointed; on a server the caller runs (``url``) the
    original configs are loaded back after it, whatever happened (the server may be gone: then
    that is what the result says). A local server tune started is stopped right after, so
    nothing would ever serve the restored configs: they are not loaded back."""
    checkpoint, keep = _open_checkpoint(settings, plan, objective)
    measurer = LiveMeasurer(
        control=control,
        base=plan.base,
        original={m: served.original[m] for m in plan.base},
        model_dirs={m: (repo / m if repo is not None else None) for m in plan.base},
        perf=plan.perf,
        screen_window_ms=settings.screen_window_ms,
        confirm_window_ms=settings.confirm_window_ms,
        max_trials=settings.max_trials,
        screen_max_windows=settings.screen_max_windows,
        load_warmup_s=settings.load_warmup_s,
        warmup_settle_ms=settings.warmup_settle_ms,
        auth=hooks.auth,
        headers=hooks.headers,
        progress=hooks.perf_progress,
    )

    def record(m: Measurement) -> None:
        checkpoint.write(m)
        if hooks.progress is not None:
            hooks.progress(m)

    stage_info = dict(plan.stage_info)
    timing: dict[str, float] = {}
    try:
        result = _search(
            settings,
            plan,
            objective,
            measurer,
            keep=keep,
            record=record,
            deadline=deadline,
            clock=hooks.clock,
        )
        if plan.staged and result.winner is not None:
            began = hooks.clock()
            stage_info.update(
                _bound_by(measurer, plan.space, result.winner, plan.perf, served.pipeline, settings)
            )
            timing["stage_profile_s"] = hooks.clock() - began
    finally:
        checkpoint.close()
        restore_problems = []
        if settings.url is not None:
            began = hooks.clock()
            restore_problems = _restore(measurer)
            timing["restore_s"] = hooks.clock() - began
    return _Searched(result, stage_info, tuple(restore_problems), measurer.loads, timing)


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
    _check_model_dir(settings, repo)
    members = _members(settings, _file_configs(settings, [settings.model]).get(settings.model))
    shipped = stage_tuning.pipeline_of(
        settings.model, lambda name: _file_configs(settings, [name]).get(name), repo
    )
    auth = for_protocol(auth, settings.protocol) if auth is not None else None
    merged_headers = dict(headers or {})
    if auth is not None:
        merged_headers.update(auth.headers())
    timing: dict[str, float] = {}
    with _endpoint(settings, [settings.model, *shipped.bls_callees]) as (url, restarts):
        timing["server_start_s"] = clock() - started
        control = ModelControl(
            url, protocol=settings.protocol, headers=merged_headers, cacert=settings.cacert
        )
        try:
            served = _served_models(settings, control, repo, members)
            plan = _plan(settings, served, _perf_settings(settings, url))
            timing["setup_s"] = clock() - started - timing["server_start_s"]
            deadline = (started + settings.budget_s) if settings.budget_s else None
            searched = _measured_search(
                settings,
                plan,
                served,
                objective,
                control,
                repo,
                deadline=deadline,
                hooks=_Hooks(
                    auth=auth, headers=headers, progress=progress, perf_progress=perf_progress, clock=clock
                ),
            )
        finally:
            control.close()
        server_restarts = restarts()
        stopping = clock()
    timing.update(searched.timing)
    timing["server_stop_s"] = clock() - stopping
    return TuneResult(
        model=settings.model,
        url=url,
        strategy=settings.strategy,
        objective=objective,
        space=plan.space,
        search=searched.result,
        base_configs=plan.base,
        original_configs={m: served.original[m] for m in plan.base},
        wall_s=clock() - started,
        server_restarts=server_restarts,
        config_loads=searched.loads,
        restore_problems=searched.restore_problems,
        started_at=started_at,
        source_files=dict(_config_paths(settings, list(plan.base))),
        stages=searched.stage_info,
        settings=settings.to_record(command),
        timing=timing,
    )
