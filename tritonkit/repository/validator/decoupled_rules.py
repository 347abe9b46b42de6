"""Decoupled models (0..n responses a request) as Triton core r24.10 (tritonserver 2.51) sees them.

An ensemble's own ``model_transaction_policy`` does not count: when Triton loads an ensemble it
walks the ensemble's tensors from its inputs, gives every decoupled step's outputs a fresh
*stream label* and everything downstream the label of its inputs, refuses a step whose inputs
carry different labels, and then sets the ensemble's ``decoupled`` to "some decoupled step was
reached" (``ValidateEnsembleConfig`` in core ``src/ensemble_scheduler/ensemble_utils.cc``,
r24.10: tensors first declared 158-159 and 212-216, siblings 198/216, decoupled flags and links
229-239, ensemble inputs and the sink over its outputs 258-275, the walk 308-363 with the refusal
at 331-340 and the labels at 342-357, the override 364-365). ``Model::Init`` (core
``src/model.cc``) then runs ``ValidateModelConfig`` (``src/model_config_utils.cc``) on the
overridden config, so its response-cache rule also refuses an ensemble made decoupled.
:func:`ensemble_streams` replays the walk on the protos.

Triton 2.51 measured (tests/integration/test_decoupled_triton.py): HTTP ``/infer`` answers a
decoupled model with 501, unary gRPC ``ModelInfer`` with UNIMPLEMENTED, ``/generate`` only when
exactly one response comes; gRPC ``ModelStreamInfer`` and HTTP ``generate_stream`` serve them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tritonkit.config import ModelConfig
from tritonkit.repository.validator.ensemble_rules import ModelDirectory
from tritonkit.repository.validator.report import ConfigFile

__all__ = [
    "CALL_PATHS",
    "Branching",
    "EnsembleStreams",
    "check_decoupled",
    "ensemble_streams",
    "served_decoupled",
]

#: how a decoupled model can and cannot be called (measured on tritonserver 2.51)
CALL_PATHS = (
    "call it over gRPC streaming (ModelStreamInfer) or HTTP POST /v2/models/{model}/generate_stream; "
    "HTTP /infer answers 501 and unary gRPC UNIMPLEMENTED on tritonserver 2.51"
)


@dataclass(frozen=True, kw_only=True)
class Branching:
    """The step Triton refuses: ``model`` is the name Triton's message gives."""

    model: str
    tensor: str | None  # the ensemble tensor whose inputs disagree; None: the ensemble outputs
    step: int | None  # the step writing ``tensor``
    member_tensor: str | None  # that step's output name for it
    sources: tuple[tuple[str, str], ...]  # (tensor, where its stream comes from), one per input


@dataclass(frozen=True, kw_only=True)
class EnsembleStreams:
    decoupled: bool  # what Triton sets model_transaction_policy.decoupled to
    decoupled_steps: tuple[int, ...]  # the decoupled steps the walk reached
    branching: Branching | None = None


@dataclass(eq=False)
class _Node:
    name: str
    model: str  # whose declaration made the node first (the name Triton's message shows)
    step: int | None = None  # the step writing it
    member_tensor: str | None = None
    decoupled: bool = False
    sibling: int | None = None  # outputs of one step share a label
    label: int = 0
    visited: bool = False
    prev: list[_Node] = field(default_factory=list)
    next: list[_Node] = field(default_factory=list)


def ensemble_streams(
    name: str, cfg: ModelConfig, member_decoupled: Callable[[str], bool | None]
) -> EnsembleStreams | None:
    """Replay Triton's decoupled walk over ensemble ``name``; None when a member's transaction
    policy is unknown (no usable config). Assumes the wiring checks passed (every mapped name
    exists); ``name`` is the model directory, which Triton's messages show."""
    steps = list(cfg.ensemble_scheduling.step)
    flags: list[bool] = []
    for step in steps:
        flag = member_decoupled(step.model_name)
        if flag is None:
            return None
        flags.append(flag)
    nodes = _graph(name, cfg, steps, flags)
    return _walk([nodes[io.name] for io in cfg.input], steps)


def _graph(name: str, cfg: ModelConfig, steps: list[Any], flags: list[bool]) -> dict[str, _Node]:
    """The tensor graph as ValidateEnsembleConfig/ValidateTensorMapping build it: the first
    declaration names a tensor's model; the ensemble outputs feed one sink node."""
    nodes: dict[str, _Node] = {}
    for io in cfg.input:
        nodes.setdefault(io.name, _Node(io.name, name))
    sink = _Node("", name)
    for io in cfg.output:
        node = nodes.setdefault(io.name, _Node(io.name, name))
        sink.prev.append(node)
        node.next.append(sink)
    for i, step in enumerate(steps):
        for tensor in step.input_map.values():
            nodes.setdefault(tensor, _Node(tensor, step.model_name))
        for member_tensor, tensor in step.output_map.items():
            node = nodes.setdefault(tensor, _Node(tensor, step.model_name))
            node.sibling = i
            node.step, node.member_tensor = i, member_tensor
        for tensor in step.output_map.values():
            node = nodes[tensor]
            node.decoupled = flags[i]
            for source in step.input_map.values():
                node.prev.append(nodes[source])
                nodes[source].next.append(node)
    return nodes


def _walk(inputs: list[_Node], steps: list[Any]) -> EnsembleStreams:
    """Breadth-first from the ensemble inputs; a node is labelled once all its inputs are."""
    counter = 0
    origin: dict[int, int] = {}  # label -> the decoupled step that started it
    sibling_label: dict[int, int] = {}
    reached: list[int] = []
    queue: deque[_Node] = deque()
    for node in inputs:
        node.visited = True
        queue.append(node)
    while queue:
        for nxt in queue[0].next:
            if nxt.visited or not all(p.visited for p in nxt.prev):
                continue
            first = nxt.prev[0].label
            if any(p.label != first for p in nxt.prev):
                return EnsembleStreams(
                    decoupled=counter != 0,
                    decoupled_steps=tuple(reached),
                    branching=_branching(nxt, steps, origin),
                )
            if nxt.sibling is not None and nxt.sibling in sibling_label:
                nxt.label = sibling_label[nxt.sibling]
            else:
                nxt.label = first
                if nxt.decoupled:
                    counter += 1
                    nxt.label = counter
                    if nxt.step is not None:
                        origin[counter] = nxt.step
                        reached.append(nxt.step)
                if nxt.sibling is not None:
                    sibling_label[nxt.sibling] = nxt.label
            nxt.visited = True
            queue.append(nxt)
        queue.popleft()
    return EnsembleStreams(decoupled=counter != 0, decoupled_steps=tuple(reached))


def _branching(node: _Node, steps: list[Any], origin: Mapping[int, int]) -> Branching:
    sources: dict[str, str] = {}
    for prev in node.prev:
        if prev.label == 0:
            where = "the request itself (no decoupled step before it)"
        else:
            i = origin[prev.label]
            where = f"the stream of decoupled step {i} ('{steps[i].model_name}')"
        sources.setdefault(prev.name, where)
    return Branching(
        model=node.model,
        tensor=node.name or None,
        step=node.step,
        member_tensor=node.member_tensor,
        sources=tuple(sources.items()),
    )


def served_decoupled(configs: Mapping[str, ModelConfig]) -> dict[str, EnsembleStreams | None]:
    """Every ensemble of ``configs`` -> how Triton will serve it (None: a member is unknown)."""
    memo: dict[str, EnsembleStreams | None] = {}
    active: set[str] = set()

    def member(model: str) -> bool | None:
        cfg = configs.get(model)
        if cfg is None:
            return None
        if cfg.platform != "ensemble":
            return bool(cfg.model_transaction_policy.decoupled)
        if model in active:  # a cycle: refused elsewhere
            return None
        streams = walk(model)
        return None if streams is None or streams.branching is not None else streams.decoupled

    def walk(model: str) -> EnsembleStreams | None:
        if model not in memo:
            active.add(model)
            memo[model] = ensemble_streams(model, configs[model], member)
            active.discard(model)
        return memo[model]

    return {name: walk(name) for name, cfg in configs.items() if cfg.platform == "ensemble"}


def check_decoupled(models: Mapping[str, ModelDirectory], refused: set[str]) -> None:
    """Report Triton's decoupled rules; ``refused`` (models with errors so far) are not walked
    and ensembles refused here are added to it."""
    configs = {name: info.cf.config for name, info in models.items() if info.cf is not None}
    usable = {name: cfg for name, cfg in configs.items() if name not in refused}
    verdicts = served_decoupled(usable)
    for name, info in models.items():
        cf = info.cf
        if cf is None or name in refused:
            continue
        cfg = cf.config
        if cfg.platform != "ensemble":
            if cfg.model_transaction_policy.decoupled:
                cf.info(
                    "decoupled-model",
                    f"'{name}' is decoupled (0..n responses a request): {CALL_PATHS.format(model=name)}",
                    at="model_transaction_policy",
                )
            continue
        streams = verdicts.get(name)
        if streams is None:
            continue
        if streams.branching is not None:
            _report_branching(cf, streams.branching)
            refused.add(name)
            continue
        declared = cfg.model_transaction_policy.decoupled
        if streams.decoupled:
            first = streams.decoupled_steps[0]
            step_name = cfg.ensemble_scheduling.step[first].model_name
            explicit = cfg.HasField("model_transaction_policy") and not declared
            said = " (its own config says decoupled: false)" if explicit else ""
            cf.info(
                "ensemble-decoupled",
                f"Triton serves ensemble '{name}' as decoupled, whatever its own config says{said}: "
                f"step {first} ('{step_name}') is decoupled; {CALL_PATHS.format(model=name)}",
                at=f"ensemble_scheduling.step[{first}].model_name",
            )
            if cfg.response_cache.enable and not declared:
                # Model::Init (core src/model.cc) validates the config again after the override;
                # ValidateModelConfig refuses a decoupled model with the response cache.
                cf.error(
                    "response-cache-unsupported",
                    f"the response cache does not support decoupled models, and Triton makes ensemble "
                    f"'{name}' decoupled (step {first} '{step_name}' is); disable response_cache",
                    at="response_cache",
                )
                refused.add(name)
        elif declared:
            cf.warning(
                "ensemble-decoupled-ignored",
                f"ensemble '{name}' says decoupled: true but none of its steps is decoupled; Triton "
                "sets it to false and the ensemble answers exactly one response a request",
                at="model_transaction_policy",
            )


def _report_branching(cf: ConfigFile, b: Branching) -> None:
    joined = "; ".join(f"'{tensor}' comes from {where}" for tensor, where in b.sources)
    if b.tensor is None:
        what = "its outputs come from different streams"
        at = "output"
    else:
        what = f"tensor '{b.tensor}' is made from inputs of different streams"
        at = (
            f"ensemble_scheduling.step[{b.step}].output_map[{b.member_tensor}]"
            if b.step is not None
            else "output"
        )
    cf.error(
        "ensemble-decoupled-branching",
        f"in ensemble {cf.model}, step of model '{b.model}' receives inputs originated "
        f"from different decoupled models (Triton's words): {what}: {joined}. Every response of a "
        "decoupled step runs the rest of the pipeline on its own, so a step cannot combine two streams "
        "or a stream with the request; feed the later steps from one decoupled step only (pass the "
        "request's tensors through it), or make the decoupled model the last step",
        at=at,
    )
