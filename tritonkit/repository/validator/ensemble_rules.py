"""Rules across models: ensemble wiring, member tensors, data types, shapes, batch sizes, cycles."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tritonkit.config import data_type_name
from tritonkit.repository.ensemble_dataflow import StepWiring, analyze_dataflow, find_cycles
from tritonkit.repository.validator.layout import selected_versions
from tritonkit.repository.validator.report import ConfigFile, ModelDirectory

__all__ = ["ModelDirectory", "check_ensembles", "check_members_loadable"]

_FLOW_CODES = {
    "written-twice": "ensemble-tensor-written-twice",
    "input-unused": "ensemble-input-unused",
    "output-not-written": "ensemble-output-not-written",
    "tensor-unreachable": "ensemble-tensor-unreachable",
    "tensor-unused": "ensemble-tensor-unused",
    "cycle": "ensemble-cycle",
}


@dataclass(frozen=True)
class _Node:
    """An ensemble tensor as Triton's ensemble check sees it: data type, dims, and the full
    shape (a leading -1 when the model that declares it batches)."""

    dtype: int
    dims: tuple[int, ...]
    full: tuple[int, ...]
    what: str


def _node(dtype: int, dims: Sequence[int], batching: bool, what: str) -> _Node:
    return _Node(dtype, tuple(dims), ((-1,) if batching else ()) + tuple(dims), what)


def _wildcard_equal(a: Sequence[int], b: Sequence[int]) -> bool:
    """Triton's CompareDimsWithWildcard: same rank, each dim equal or -1 on either side."""
    return len(a) == len(b) and all(x == y or x == -1 or y == -1 for x, y in zip(a, b, strict=True))


def check_ensembles(models: Mapping[str, ModelDirectory]) -> None:
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


def check_members_loadable(models: Mapping[str, ModelDirectory], refused: set[str]) -> None:
    """An ensemble Triton cannot load because a member it uses is refused (repeated until no
    new ensemble falls, so nested ensembles fall with their inner ones)."""
    changed = True
    while changed:
        changed = False
        for name, info in models.items():
            if name in refused or info.cf is None or info.cf.config.platform != "ensemble":
                continue
            steps = info.cf.config.ensemble_scheduling.step
            bad = next(((i, s) for i, s in enumerate(steps) if s.model_name in refused), None)
            if bad is None:
                continue
            i, s = bad
            info.cf.error(
                "ensemble-member-invalid",
                f"step {i} uses model '{s.model_name}', which Triton refuses (see its errors); "
                "the ensemble cannot load without it",
                at=f"ensemble_scheduling.step[{i}].model_name",
            )
            refused.add(name)
            changed = True


def _check_one(cf: ConfigFile, models: Mapping[str, ModelDirectory]) -> None:
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

    # Triton's ValidateEnsembleConfig: the first declaration of an ensemble tensor (ensemble
    # inputs, then outputs, then each step's inputs and outputs in order) defines it; every
    # later use must agree with that first one.
    batching = cfg.max_batch_size > 0
    nodes: dict[str, _Node] = {}
    for io in cfg.input:
        dims = io.reshape.shape if io.HasField("reshape") else io.dims
        nodes.setdefault(io.name, _node(io.data_type, dims, batching, f"ensemble input '{io.name}'"))
    for io in cfg.output:  # registered, not compared: Triton emplaces these without a check
        dims = io.reshape.shape if io.HasField("reshape") else io.dims
        nodes.setdefault(io.name, _node(io.data_type, dims, batching, f"ensemble output '{io.name}'"))
    for i, step in enumerate(steps):
        member = _member(cf, i, step, models)
        if member is None:
            continue
        mcfg = member.config
        # A member that cannot batch is fine inside a batching ensemble (Triton checks the
        # expanded shapes instead); a batching member must allow the ensemble's batch size.
        if 0 < mcfg.max_batch_size < cfg.max_batch_size:
            cf.error(
                "ensemble-batch-size",
                f"ensemble max_batch_size {cfg.max_batch_size} is too large: it contains model "
                f"'{step.model_name}' which allows at most {mcfg.max_batch_size}",
                at="max_batch_size",
            )
        _step_tensors(cf, i, step, mcfg, nodes)


def _use(cf: ConfigFile, nodes: dict[str, _Node], tensor: str, end: _Node, at: str) -> None:
    first = nodes.setdefault(tensor, end)
    if first is end:
        return
    if first.dtype != end.dtype:
        cf.error(
            "ensemble-dtype-mismatch",
            f"ensemble tensor '{tensor}': {first.what} is {data_type_name(first.dtype)} but "
            f"{end.what} is {data_type_name(end.dtype)}",
            at=at,
        )
    elif not _wildcard_equal(first.dims, end.dims) and not _wildcard_equal(first.full, end.full):
        cf.error(
            "ensemble-shape-mismatch",
            f"ensemble tensor '{tensor}': {first.what} has shape {list(first.full)} but {end.what} "
            f"has {list(end.full)} (-1 = any; a leading -1 is the batch dimension of a batching "
            "model; Triton accepts the connection when the dims or the full shapes agree)",
            at=at,
        )


def _step_tensors(cf: ConfigFile, i: int, step: Any, mcfg: Any, nodes: dict[str, _Node]) -> None:
    batching = mcfg.max_batch_size > 0
    m_outputs = {io.name: io for io in mcfg.output}
    at_step = f"ensemble_scheduling.step[{i}]"
    known_inputs = {io.name for io in mcfg.input}
    for m_in in step.input_map:
        if m_in not in known_inputs:
            cf.error(
                "ensemble-unknown-tensor",
                f"step {i}: model '{step.model_name}' has no input '{m_in}' "
                f"(its inputs: {', '.join(sorted(known_inputs)) or 'none'})",
                at=f"{at_step}.input_map[{m_in}]",
            )
    for io in mcfg.input:
        if io.name not in step.input_map:
            if not io.optional:
                cf.error(
                    "ensemble-unmapped-input",
                    f"step {i}: required input '{io.name}' of model '{step.model_name}' is not in input_map",
                    at=at_step,
                )
            continue
        end = _node(io.data_type, io.dims, batching, f"'{step.model_name}' input '{io.name}'")
        _use(cf, nodes, step.input_map[io.name], end, f"{at_step}.input_map[{io.name}]")
    for m_out, tensor in step.output_map.items():
        out = m_outputs.get(m_out)
        if out is None:
            cf.error(
                "ensemble-unknown-tensor",
                f"step {i}: model '{step.model_name}' has no output '{m_out}' "
                f"(its outputs: {', '.join(sorted(m_outputs)) or 'none'})",
                at=f"{at_step}.output_map[{m_out}]",
            )
            continue
        end = _node(out.data_type, out.dims, batching, f"'{step.model_name}' output '{m_out}'")
        _use(cf, nodes, tensor, end, f"{at_step}.output_map[{m_out}]")


def _member(cf: ConfigFile, i: int, step: Any, models: Mapping[str, ModelDirectory]) -> ConfigFile | None:
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
    # Triton needs the version loaded, not only on disk: the member's version_policy decides.
    loaded = selected_versions(info.cf.config, info.versions) if info.cf is not None else info.versions[-1:]
    if step.model_version != -1 and step.model_version not in loaded:
        on_disk = step.model_version in info.versions
        cf.error(
            "ensemble-unknown-version",
            f"step {i} asks for version {step.model_version} of '{step.model_name}', which "
            + (
                f"its version_policy does not load (it loads {list(loaded) or 'none'})"
                if on_disk
                else f"has versions {list(info.versions) or 'none'}"
            )
            + (
                "; model_version is unset or 0: use -1 for the latest version"
                if step.model_version == 0
                else ""
            ),
            at=f"{at_step}.model_version",
        )
    return info.cf


def _nested_cycles(ensembles: Mapping[str, ModelDirectory]) -> None:
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
