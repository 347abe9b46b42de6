"""Pipeline graphs: ensemble steps wired by tensor names, and what is wrong with their data flow.

Triton runs an ensemble step once every tensor it reads is ready; ensemble inputs are ready
at the start. :func:`analyze_dataflow` replays that rule statically and reports tensors
written twice, inputs nobody reads, outputs nobody writes, tensors read but never written,
intermediate tensors nobody reads, and steps that wait on each other in a cycle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["FlowIssue", "StepWiring", "analyze_dataflow", "find_cycles"]


@dataclass(frozen=True, kw_only=True)
class StepWiring:
    """One step: ``inputs``/``outputs`` map member tensor name -> ensemble tensor name."""

    model: str
    inputs: Mapping[str, str] = field(default_factory=dict)
    outputs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class FlowIssue:
    """``kind`` is one of: written-twice, input-unused, output-not-written, tensor-unreachable,
    tensor-unused, cycle. ``step`` is the index of the step at fault, if any."""

    kind: str
    tensor: str | None
    step: int | None
    member_tensor: str | None
    message: str


def find_cycles(edges: Mapping[str, Sequence[str]]) -> list[list[str]]:
    """Elementary cycles found by depth-first search (each reported once, as a node list)."""
    cycles: list[list[str]] = []
    seen_sets: set[frozenset[str]] = set()
    state: dict[str, int] = {}  # 1 = on stack, 2 = done
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in edges.get(node, ()):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt) :]
                key = frozenset(cycle)
                if key not in seen_sets:
                    seen_sets.add(key)
                    cycles.append(list(cycle))
            elif state.get(nxt) is None:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if state.get(node) is None:
            visit(node)
    return cycles


def analyze_dataflow(
    inputs: Sequence[str], outputs: Sequence[str], steps: Sequence[StepWiring]
) -> list[FlowIssue]:
    flow = _Flow(inputs, outputs, steps)
    return [
        *flow.written_twice(),
        *flow.unused_inputs(),
        *flow.unreachable(),
        *flow.unused_tensors(),
        *flow.cycles(),
        *flow.unwritten_outputs(),
    ]


class _Flow:
    def __init__(self, inputs: Sequence[str], outputs: Sequence[str], steps: Sequence[StepWiring]) -> None:
        self.inputs = list(inputs)
        self.input_set = set(inputs)
        self.outputs = list(outputs)
        self.steps = steps
        self.writers: dict[str, list[tuple[int, str]]] = {}
        self.readers: dict[str, list[tuple[int, str]]] = {}
        for i, step in enumerate(steps):
            for member, tensor in step.outputs.items():
                self.writers.setdefault(tensor, []).append((i, member))
            for member, tensor in step.inputs.items():
                self.readers.setdefault(tensor, []).append((i, member))

    def _at(self, i: int, member: str) -> str:
        return f"step {i} ({self.steps[i].model}.{member})"

    def _issue(self, kind: str, tensor: str, at: tuple[int, str], message: str) -> FlowIssue:
        """An issue of ``tensor`` at one step's member tensor ``at`` (step index, member name)."""
        return FlowIssue(kind=kind, tensor=tensor, step=at[0], member_tensor=at[1], message=message)

    def written_twice(self) -> list[FlowIssue]:
        issues = []
        for tensor, ws in self.writers.items():
            first = self._at(*ws[0])
            if tensor in self.input_set:
                issues.append(
                    self._issue(
                        "written-twice",
                        tensor,
                        ws[0],
                        f"ensemble tensor '{tensor}' is an ensemble input and is also written by {first}",
                    )
                )
            issues.extend(
                self._issue(
                    "written-twice",
                    tensor,
                    w,
                    f"ensemble tensor '{tensor}' is written twice: by {first} and by {self._at(*w)}",
                )
                for w in ws[1:]
            )
        return issues

    def unused_inputs(self) -> list[FlowIssue]:
        return [
            FlowIssue(
                kind="input-unused",
                tensor=name,
                step=None,
                member_tensor=None,
                message=f"ensemble input '{name}' is not read by any step",
            )
            for name in self.inputs
            if name not in self.readers
        ]

    def unreachable(self) -> list[FlowIssue]:
        return [
            self._issue(
                "tensor-unreachable",
                tensor,
                rs[0],
                f"{self._at(*rs[0])} reads ensemble tensor '{tensor}', "
                "but no step writes it and it is not an ensemble input",
            )
            for tensor, rs in self.readers.items()
            if tensor not in self.input_set and tensor not in self.writers
        ]

    def unused_tensors(self) -> list[FlowIssue]:
        read_or_given = {*self.readers, *self.outputs, *self.input_set}
        return [
            self._issue(
                "tensor-unused",
                tensor,
                ws[0],
                f"ensemble tensor '{tensor}' written by {self._at(*ws[0])} is neither "
                "read by a step nor an ensemble output (Triton rejects unused tensors)",
            )
            for tensor, ws in self.writers.items()
            if tensor not in read_or_given
        ]

    def cycles(self) -> list[FlowIssue]:
        # step j -> step i when step i reads a tensor that step j writes
        edges: dict[str, list[str]] = {str(i): [] for i in range(len(self.steps))}
        for tensor, rs in self.readers.items():
            for j, _ in self.writers.get(tensor, []):
                edges[str(j)].extend(str(i) for i, _ in rs)
        issues = []
        for cycle in find_cycles(edges):
            path = " -> ".join(f"step {n} ({self.steps[int(n)].model})" for n in [*cycle, cycle[0]])
            issues.append(
                FlowIssue(
                    kind="cycle",
                    tensor=None,
                    step=min(int(n) for n in cycle),
                    member_tensor=None,
                    message=f"ensemble steps wait on each other in a cycle: {path}",
                )
            )
        return issues

    def unwritten_outputs(self) -> list[FlowIssue]:
        ready = _ready_tensors(self.input_set, self.steps)
        issues = []
        for name in self.outputs:
            if name not in self.writers:
                message = f"ensemble output '{name}' is not written by any step"
            elif name not in ready:
                message = (
                    f"ensemble output '{name}' can never be computed: the step writing it waits on a "
                    "tensor that is never ready"
                )
            else:
                continue
            issues.append(
                FlowIssue(
                    kind="output-not-written", tensor=name, step=None, member_tensor=None, message=message
                )
            )
        return issues


def _ready_tensors(start: set[str], steps: Sequence[StepWiring]) -> set[str]:
    ready = set(start)
    fired: set[int] = set()
    progress = True
    while progress:
        progress = False
        for i, step in enumerate(steps):
            if i not in fired and all(t in ready for t in step.inputs.values()):
                fired.add(i)
                ready.update(step.outputs.values())
                progress = True
    return ready
