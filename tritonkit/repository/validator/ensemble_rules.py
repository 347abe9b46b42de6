"""Rules across models: ensemble wiring, member tensors, data types, shapes, batch sizes, cycles."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tritonkit.config import data_type_name
from tritonkit.ensembles import StepWiring, analyze_dataflow, find_cycles
from tritonkit.repository.validator._report import ConfigFile
from tritonkit.repository.validator.config_rules import full_shape

__all__ = ["ModelInfo", "check_ensembles"]

_FLOW_CODES = {
    "written-twice": "ensemble-tensor-written-twice",
    "input-unused": "ensemble-input-unused",
    "output-not-written": "ensemble-output-not-written",
    "tensor-unreachable": "ensemble-tensor-unreachable",
    "tensor-unused": "ensemble-tensor-unused",
    "cycle": "ensemble-cycle",
}


@dataclass(frozen=True, kw_only=True)
class ModelInfo:
    """A model directory as the cross-model rules see it (``cf`` None: its config is unusable)."""

    name: str
    cf: ConfigFile | None
    versions: tuple[int, ...]


@dataclass(frozen=True)
class _End:
    """One end of a connection: data type, full shape (batch dim included), and a description."""

    dtype: int
    shape: tuple[int, ...]
    what: str


def _compatible(a: Sequence[int], b: Sequence[int]) -> bool:
    return len(a) == len(b) and all(x == y or x == -1 or y == -1 for x, y in zip(a, b, strict=True))


def check_ensembles(models: Mapping[str, ModelInfo]) -> None:
    ensembles = {
        name: info
        for name, info in models.items()
        if info.cf is not None
        and info.cf.config.platform == "ensemble"
        and info.cf.config.HasField("ensemble_scheduling")
    }
    for info in ensembles.values():
        if info.cf is not None:
            _check_one(info.cf, models)
    _nested_cycles(ensembles)


def _check_one(cf: ConfigFile, models: Mapping[str, ModelInfo]) -> None:
    cfg = cf.config
    steps = list(cfg.ensemble_scheduling.step)
    wiring = [
        StepWiring(model=s.model_name, inputs=dict(s.input_map), outputs=dict(s.output_map)) for s in steps
    ]
    in_index = {io.name: i for i, io in enumerate(cfg.input)}
    out_index = {io.name: i for i, io in enumerate(cfg.output)}
    for issue in analyze_dataflow(list(in_index), list(out_index), wiring):
        at: str | None = None
        if issue.kind == "input-unused" and issue.tensor in in_index:
            at = f"input[{in_index[issue.tensor]}]"
        elif issue.kind == "output-not-written" and issue.tensor in out_index:
            at = f"output[{out_index[issue.tensor]}]"
        elif issue.step is not None and issue.member_tensor is not None:
            side = "input_map" if issue.kind == "tensor-unreachable" else "output_map"
            at = f"ensemble_scheduling.step[{issue.step}].{side}[{issue.member_tensor}]"
        elif issue.step is not None:
            at = f"ensemble_scheduling.step[{issue.step}]"
        cf.error(_FLOW_CODES[issue.kind], issue.message, at=at)

    producers: dict[str, _End] = {
        io.name: _End(io.data_type, full_shape(io.dims, cfg.max_batch_size), f"ensemble input '{io.name}'")
        for io in cfg.input
    }
    consumers: list[tuple[str, _End, str]] = []  # (tensor, consumer end, field path)
    for i, step in enumerate(steps):
        member = _member(cf, i, step, models)
        if member is None:
            continue
        mcfg = member.config
        _step_tensors(cf, i, step, mcfg, producers, consumers)
        if cfg.max_batch_size > 0 and mcfg.max_batch_size < cfg.max_batch_size:
            detail = (
                "which cannot batch (max_batch_size 0)"
                if mcfg.max_batch_size == 0
                else f"which allows at most {mcfg.max_batch_size}"
            )
            cf.error(
                "ensemble-batch-size",
                f"ensemble max_batch_size {cfg.max_batch_size} is too large: it contains model "
                f"'{step.model_name}' {detail}",
                at="max_batch_size",
            )
    for i, io in enumerate(cfg.output):
        end = _End(io.data_type, full_shape(io.dims, cfg.max_batch_size), f"ensemble output '{io.name}'")
        consumers.append((io.name, end, f"output[{i}]"))
    _connections(cf, producers, consumers)


def _step_tensors(
    cf: ConfigFile,
    i: int,
    step: Any,
    mcfg: Any,
    producers: dict[str, _End],
    consumers: list[tuple[str, _End, str]],
) -> None:
    m_inputs = {io.name: io for io in mcfg.input}
    m_outputs = {io.name: io for io in mcfg.output}
    at_step = f"ensemble_scheduling.step[{i}]"
    for m_in, tensor in step.input_map.items():
        io = m_inputs.get(m_in)
        if io is None:
            cf.error(
                "ensemble-unknown-tensor",
                f"step {i}: model '{step.model_name}' has no input '{m_in}' "
                f"(its inputs: {', '.join(sorted(m_inputs)) or 'none'})",
                at=f"{at_step}.input_map[{m_in}]",
            )
            continue
        end = _End(
            io.data_type, full_shape(io.dims, mcfg.max_batch_size), f"'{step.model_name}' input '{m_in}'"
        )
        consumers.append((tensor, end, f"{at_step}.input_map[{m_in}]"))
    for m_out, tensor in step.output_map.items():
        io = m_outputs.get(m_out)
        if io is None:
            cf.error(
                "ensemble-unknown-tensor",
                f"step {i}: model '{step.model_name}' has no output '{m_out}' "
                f"(its outputs: {', '.join(sorted(m_outputs)) or 'none'})",
                at=f"{at_step}.output_map[{m_out}]",
            )
            continue
        end = _End(
            io.data_type,
            full_shape(io.dims, mcfg.max_batch_size),
            f"'{step.model_name}' output '{m_out}'",
        )
        producers.setdefault(tensor, end)
    for io in mcfg.input:
        if io.name not in step.input_map and not io.optional:
            cf.error(
                "ensemble-unmapped-input",
                f"step {i}: required input '{io.name}' of model '{step.model_name}' is not in input_map",
                at=at_step,
            )


def _member(cf: ConfigFile, i: int, step: Any, models: Mapping[str, ModelInfo]) -> ConfigFile | None:
    at_step = f"ensemble_scheduling.step[{i}]"
    info = models.get(step.model_name)
    if info is None:
        if step.model_name:
            cf.error(
                "ensemble-unknown-model",
                f"step {i} uses model '{step.model_name}', which is not in the repository",
                at=f"{at_step}.model_name",
            )
        return None
    if step.model_version != -1 and step.model_version not in info.versions:
        cf.error(
            "ensemble-unknown-version",
            f"step {i} asks for version {step.model_version} of '{step.model_name}', which has versions "
            f"{list(info.versions) or 'none'}"
            + (
                "; model_version is unset or 0: use -1 for the latest version"
                if step.model_version == 0
                else ""
            ),
            at=f"{at_step}.model_version",
        )
    return info.cf


def _connections(
    cf: ConfigFile, producers: Mapping[str, _End], consumers: Sequence[tuple[str, _End, str]]
) -> None:
    for tensor, end, at in consumers:
        src = producers.get(tensor)
        if src is None:
            continue  # reported by the data-flow rules
        if src.dtype != end.dtype:
            cf.error(
                "ensemble-dtype-mismatch",
                f"ensemble tensor '{tensor}': {src.what} is {data_type_name(src.dtype)} but "
                f"{end.what} expects {data_type_name(end.dtype)}",
                at=at,
            )
        elif not _compatible(src.shape, end.shape):
            cf.error(
                "ensemble-shape-mismatch",
                f"ensemble tensor '{tensor}': {src.what} has shape {list(src.shape)} but {end.what} "
                f"expects {list(end.shape)} (-1 = any; a leading -1 is the batch dimension)",
                at=at,
            )


def _nested_cycles(ensembles: Mapping[str, ModelInfo]) -> None:
    edges: dict[str, list[str]] = {}
    for name, info in ensembles.items():
        if info.cf is None:
            continue
        edges[name] = [
            s.model_name for s in info.cf.config.ensemble_scheduling.step if s.model_name in ensembles
        ]
    for cycle in find_cycles(edges):
        path = " -> ".join([*cycle, cycle[0]])
        for k, name in enumerate(cycle):
            info = ensembles[name]
            if info.cf is None:
                continue
            nxt = cycle[(k + 1) % len(cycle)]
            steps = info.cf.config.ensemble_scheduling.step
            idx = next(i for i, s in enumerate(steps) if s.model_name == nxt)
            info.cf.error(
                "ensemble-cycle",
                f"ensembles depend on each other in a cycle: {path}",
                at=f"ensemble_scheduling.step[{idx}].model_name",
            )
