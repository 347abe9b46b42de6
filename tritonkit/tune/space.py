"""The search space: which config fields (and which client loads) a tuning run tries.

A :class:`Space` is a list of :class:`Dimension` s (one config field of one model, with the values
to try) plus the load levels (concurrencies, or request rates in ``request_rate`` mode). Points
are tuples of value indexes, so a search can step to a neighbour by moving one index.
``default_space`` derives the dimensions from the
model's config and the machine; ``load_space`` reads ``--space FILE.yaml``, where any
ModelConfig field in protobuf JSON form may appear (checked against Triton's schema).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tritonkit.config import ModelConfig, config_to_dict, merge_json, new_config
from tritonkit.errors import ConfigError, TuneError

__all__ = [
    "BUILTIN_KNOBS",
    "Dimension",
    "Point",
    "Space",
    "apply_settings",
    "LOAD_LADDER",
    "default_space",
    "load_hint",
    "load_space",
]

Point = tuple[int, ...]

#: knobs with tuning semantics beyond "replace this field" (everything else is a ModelConfig field)
BUILTIN_KNOBS = (
    "instance_count",
    "instance_kind",
    "max_batch_size",
    "dynamic_batching",
    "preferred_batch_size",
    "max_queue_delay_microseconds",
)
_DB_ONLY = ("preferred_batch_size", "max_queue_delay_microseconds")

#: concurrency levels a sweep may climb when no production load is given: powers of two up to
#: 1,024 (Model Analyzer's ceiling); the sweep stops at saturation or the latency budget, so the
#: top is rarely reached and never limited by the client machine's cores
LOAD_LADDER: tuple[float, ...] = tuple(float(2**i) for i in range(11))
#: queue delays (microseconds) tried with dynamic batching on
QUEUE_DELAYS = (0, 100, 500, 2000, 10000)


@dataclass(frozen=True)
class Dimension:
    """One config field of one model and the values to try (in order: neighbours are adjacent)."""

    model: str
    name: str
    values: tuple[Any, ...]

    @property
    def key(self) -> str:
        return f"{self.model}.{self.name}"


@dataclass(frozen=True)
class Space:
    """Dimensions over the tuned models' configs, and the load levels measured."""

    target: str  # the model the load is sent to (the ensemble, for an ensemble)
    dimensions: tuple[Dimension, ...]
    loads: tuple[float, ...]  # load levels: concurrencies, or requests/s (see load_mode)
    load_mode: str = "concurrency"  # or "request_rate"

    def settings(self, point: Point) -> dict[str, Any]:
        """``model.field`` -> value for ``point``."""
        return {d.key: d.values[i] for d, i in zip(self.dimensions, point, strict=True)}

    def by_model(self, point: Point) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for d, i in zip(self.dimensions, point, strict=True):
            out.setdefault(d.model, {})[d.name] = d.values[i]
        return out

    def signature(self, point: Point) -> str:
        """A canonical id of the configs ``point`` yields: points that differ only in a field
        that has no effect (a queue delay with dynamic batching off) share one signature."""
        effective: dict[str, Any] = {}
        for model, knobs in self.by_model(point).items():
            for name, value in knobs.items():
                if name in _DB_ONLY and knobs.get("dynamic_batching") is False:
                    continue
                effective[f"{model}.{name}"] = value
        return json.dumps(effective, sort_keys=True, separators=(",", ":"))

    def points(self) -> list[Point]:
        """Every point of the grid (distinct signatures only, first point of each kept)."""
        points: list[Point] = [()]
        for d in self.dimensions:
            points = [(*p, i) for p in points for i in range(len(d.values))]
        seen: set[str] = set()
        out = []
        for p in points:
            sig = self.signature(p)
            if sig not in seen:
                seen.add(sig)
                out.append(p)
        return out

    def neighbours(self, point: Point) -> list[Point]:
        """Points one step away along one dimension."""
        out = []
        for axis, d in enumerate(self.dimensions):
            for step in (-1, 1):
                j = point[axis] + step
                if 0 <= j < len(d.values):
                    out.append((*point[:axis], j, *point[axis + 1 :]))
        return out

    def point_of(self, settings: Mapping[str, Any]) -> Point:
        """The point whose values equal ``settings`` (value by value); KeyError-free: a value
        not in a dimension maps to index 0."""
        out = []
        for d in self.dimensions:
            value = settings.get(d.key)
            out.append(next((i for i, v in enumerate(d.values) if _same(v, value)), 0))
        return tuple(out)

    @property
    def size(self) -> int:
        return len(self.points()) * len(self.loads)

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "dimensions": [{"key": d.key, "values": list(d.values)} for d in self.dimensions],
            "concurrency": list(self.loads),  # the file format keeps its key
            "load_mode": self.load_mode,
            "configs": len(self.points()),
            "grid_measurements": self.size,
        }


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


# --- applying a point to a config --------------------------------------------------------------


def apply_settings(base: ModelConfig, knobs: Mapping[str, Any]) -> ModelConfig:
    """A copy of ``base`` with ``knobs`` (one model's ``field -> value``) applied.

    Preferred batch sizes above ``max_batch_size`` are dropped, so the candidate is one Triton
    accepts (Model Analyzer's known failure mode is generating exactly that).
    """
    data = config_to_dict(base)
    for name, value in knobs.items():
        if name == "instance_count":
            groups = data.get("instance_group") or [{"kind": "KIND_CPU"}]
            data["instance_group"] = [{**g, "count": int(value)} for g in groups]
        elif name == "instance_kind":
            groups = data.get("instance_group") or [{"count": 1}]
            data["instance_group"] = [{**g, "kind": str(value)} for g in groups]
        elif name == "max_batch_size":
            data["max_batch_size"] = int(value)
        elif name == "dynamic_batching":
            if value:
                data.setdefault("dynamic_batching", {})
            else:
                data.pop("dynamic_batching", None)
        elif name in _DB_ONLY:
            continue  # applied below, once dynamic batching is settled
        else:
            data[name] = value
    db = data.get("dynamic_batching")
    if db is not None:
        db = dict(db)
        if "preferred_batch_size" in knobs:
            db["preferred_batch_size"] = list(knobs["preferred_batch_size"])
        if "max_queue_delay_microseconds" in knobs:
            db["max_queue_delay_microseconds"] = int(knobs["max_queue_delay_microseconds"])
        mbs = int(data.get("max_batch_size", 0) or 0)
        sizes = [int(s) for s in db.get("preferred_batch_size", []) if mbs <= 0 or int(s) <= mbs]
        if sizes:
            db["preferred_batch_size"] = sizes
        else:
            db.pop("preferred_batch_size", None)
        data["dynamic_batching"] = db
    cfg = new_config()
    merge_json(cfg, data, where=f"tuning candidate for model '{base.name}'")
    return cfg


# --- defaults ---------------------------------------------------------------------------------


def _powers_up_to(limit: int) -> list[int]:
    out, v = [], 1
    while v <= limit:
        out.append(v)
        v *= 2
    return out


def batch_ladder(mbs: int) -> tuple[int, ...]:
    """``max_batch_size`` values to try: the config's own and four halvings (32 -> 2..32)."""
    return tuple(sorted({max(1, mbs >> k) for k in range(5)}))


def _model_dimensions(cfg: ModelConfig, *, cores: int) -> list[Dimension]:
    """Instances (1, 2, 4, ... up to the server's cores; 1, 2 on a GPU) and, for a batching
    model, a max_batch_size ladder, dynamic batching and its queue delay.

    Preferred batch sizes are left out of the defaults: Triton's dynamic batcher already forms
    the largest batch it can, and its docs advise against setting them for most models; they
    stay a knob for ``--space``.
    """
    name = str(cfg.name)
    kinds = {int(g.kind) for g in cfg.instance_group}
    gpu = any(k == 1 for k in kinds)  # KIND_GPU
    counts = [1, 2] if gpu else _powers_up_to(max(2, min(cores, 8)))[:4]
    dims = [Dimension(name, "instance_count", tuple(counts))]
    mbs = int(cfg.max_batch_size)
    if mbs > 0 and cfg.platform != "ensemble":
        sizes = batch_ladder(mbs)
        if len(sizes) > 1:
            dims.append(Dimension(name, "max_batch_size", sizes))
        dims.append(Dimension(name, "dynamic_batching", (False, True)))
        dims.append(Dimension(name, "max_queue_delay_microseconds", QUEUE_DELAYS))
    return dims


def default_concurrency() -> tuple[float, ...]:
    """The sweep's ladder when no production load is given (see ``LOAD_LADDER``)."""
    return LOAD_LADDER


def load_hint(configs: Mapping[str, ModelConfig]) -> Callable[[Mapping[str, Mapping[str, Any]]], float]:
    """A candidate's settings -> the concurrency its first sweep starts at.

    Model Analyzer's quick-search rule: 2 x instances x max batch size (the load that keeps every
    instance busy with full batches, twice over), the largest over the tuned models of an
    ensemble; a knob the candidate does not set comes from the model's config.
    """

    def hint(settings: Mapping[str, Mapping[str, Any]]) -> float:
        best = 1.0
        for model, cfg in configs.items():
            knobs = settings.get(model, {})
            groups = list(cfg.instance_group)
            inst = int(knobs.get("instance_count", groups[0].count if groups and groups[0].count else 1))
            mbs = int(knobs.get("max_batch_size", cfg.max_batch_size))
            batching = bool(knobs.get("dynamic_batching", cfg.HasField("dynamic_batching")))
            best = max(best, 2.0 * inst * (max(mbs, 1) if batching else 1))
        return best

    return hint


def default_space(target: str, configs: Mapping[str, ModelConfig], *, cores: int | None = None) -> Space:
    """Dimensions from the models' configs and this machine's cores.

    ``configs`` holds the target's config and, for an ensemble, its composing models' (the
    dimensions then cover the composing models, measured at the ensemble).
    """
    cores = cores or os.cpu_count() or 1
    top = configs[target]
    dims: list[Dimension] = []
    if top.platform == "ensemble":
        for step in top.ensemble_scheduling.step:
            member = configs.get(str(step.model_name))
            if member is not None and member.platform != "ensemble":
                dims.extend(d for d in _model_dimensions(member, cores=cores) if d.name == "instance_count")
                if int(member.max_batch_size) > 0:
                    dims.append(Dimension(str(member.name), "dynamic_batching", (False, True)))
    else:
        dims = _model_dimensions(top, cores=cores)
    return Space(target=target, dimensions=tuple(dims), loads=default_concurrency())


# --- --space FILE.yaml -------------------------------------------------------------------------


def _field_names() -> set[str]:
    return set(new_config().DESCRIPTOR.fields_by_name)


def _check_values(model: str, name: str, values: Any, base: ModelConfig, where: str) -> tuple[Any, ...]:
    if not isinstance(values, list) or not values:
        raise TuneError(f"{where}: '{name}' must be a non-empty list of values to try, got {values!r}")
    if name not in BUILTIN_KNOBS and name not in _field_names():
        raise TuneError(
            f"{where}: '{name}' is not a ModelConfig field",
            hint="use one of the tuning knobs (" + ", ".join(BUILTIN_KNOBS) + ") or a field of "
            "Triton's model_config.proto in protobuf JSON form (e.g. parameters, optimization)",
        )
    ints = ("instance_count", "max_batch_size", "max_queue_delay_microseconds")
    for i, v in enumerate(values):
        at = f"{where}: {name}[{i}]"
        if name in ints and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise TuneError(f"{at} must be a non-negative integer, got {v!r}")
        if name == "instance_count" and v < 1:
            raise TuneError(f"{at}: an instance count must be at least 1")
        if name == "dynamic_batching" and not isinstance(v, bool):
            raise TuneError(f"{at} must be true or false, got {v!r}")
        if name == "instance_kind" and v not in ("KIND_CPU", "KIND_GPU", "KIND_AUTO", "KIND_MODEL"):
            raise TuneError(f"{at} must be KIND_CPU, KIND_GPU, KIND_AUTO or KIND_MODEL, got {v!r}")
        if name == "preferred_batch_size" and (
            not isinstance(v, list) or not all(isinstance(s, int) and s > 0 for s in v)
        ):
            raise TuneError(f"{at} must be a list of positive integers, got {v!r}")
        if name not in BUILTIN_KNOBS:
            try:
                merge_json(new_config(), {name: v}, where=at)
            except ConfigError as exc:
                raise TuneError(exc.message, hint=exc.hint) from exc
    try:
        apply_settings(base, {name: values[0]})
    except ConfigError as exc:
        raise TuneError(f"{where}: {exc.message}", hint=exc.hint) from exc
    return tuple(values)


def load_space(
    path: str | Path, *, target: str, configs: Mapping[str, ModelConfig], cores: int | None = None
) -> Space:
    """Read ``--space FILE.yaml`` over the defaults.

    Format::

        concurrency: [1, 2, 4, 8]        # optional; the client loads to try
        defaults: true                   # false: only the dimensions given here
        dimensions:                      # the target model's fields (or MODEL.FIELD)
          instance_count: [1, 2]
          parameters: [{intra_op_thread_count: {string_value: "1"}}, ...]
        models:                          # an ensemble's composing models
          texture_array: {instance_count: [1, 2]}

    A key given here replaces the default dimension of the same name; other defaults stay
    unless ``defaults: false``.
    """
    p = Path(path)
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TuneError(f"--space {p}: cannot read the file: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise TuneError(f"--space {p}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise TuneError(f"--space {p}: expected a mapping with 'dimensions', 'models', 'concurrency'")
    unknown = sorted(set(raw) - {"concurrency", "defaults", "dimensions", "models"})
    if unknown:
        raise TuneError(
            f"--space {p}: unknown key(s) {', '.join(map(str, unknown))}",
            hint="top-level keys are concurrency, defaults, dimensions and models",
        )
    base = default_space(target, configs, cores=cores)
    given: list[Dimension] = []
    entries: list[tuple[str, str, Any]] = []
    for key, values in (raw.get("dimensions") or {}).items():
        model, dot, field = str(key).rpartition(".")
        entries.append((model if dot else target, field, values))
    models = raw.get("models") or {}
    if not isinstance(models, dict):
        raise TuneError(f"--space {p}: 'models' must map model names to their dimensions")
    for model, fields in models.items():
        if not isinstance(fields, dict):
            raise TuneError(f"--space {p}: models.{model} must map field names to value lists")
        entries.extend((str(model), str(f), v) for f, v in fields.items())
    for model, field, values in entries:
        if model not in configs:
            raise TuneError(
                f"--space {p}: model '{model}' is not part of '{target}'",
                hint="tunable models: " + ", ".join(sorted(configs)),
            )
        checked = _check_values(model, field, values, configs[model], f"--space {p}: {model}")
        given.append(Dimension(model, field, checked))
    keep_defaults = raw.get("defaults", True)
    if not isinstance(keep_defaults, bool):
        raise TuneError(f"--space {p}: 'defaults' must be true or false")
    given_keys = {d.key for d in given}
    dims = [d for d in base.dimensions if keep_defaults and d.key not in given_keys] + given
    loads = base.loads
    if "concurrency" in raw:
        levels = raw["concurrency"]
        if (
            not isinstance(levels, list)
            or not levels
            or not all(isinstance(c, int) and not isinstance(c, bool) and c > 0 for c in levels)
        ):
            raise TuneError(f"--space {p}: 'concurrency' must be a list of positive integers")
        loads = tuple(sorted({float(c) for c in levels}))
    return Space(target=target, dimensions=tuple(dims), loads=loads)
