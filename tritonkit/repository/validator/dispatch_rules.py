"""Ensembles that one bad request can crash: a step reading client input starts beside a sibling.

Triton dispatches the steps that become ready together (one *scheduling batch*) one after
the other, in step order, from the thread that made them ready. Up to 2.51 (the version
tritonkit serves), when a step of the batch returns an error before a later sibling has been
dispatched, ``EnsembleContext::ScheduleSteps`` releases the ensemble request one time too
many and the server dies with SIGSEGV (fixed upstream in triton-inference-server/core#483).

The rule replays Triton's readiness rule statically. The steps that start together are the
steps reading only ensemble inputs (the first batch) and, for each step X, the steps that
read an output of X and can become ready when X finishes (none of their other producers
runs after X). A step of such a batch that is not the last one and reads an ensemble input
directly is reported: whatever the client sent reaches it unchecked, so a refusal (bad
image, bad text) can take the server down. Steps fed only by other models are assumed not
to fail on input; that is the pipeline's job to guarantee (check the input once, in a step
that runs alone).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tritonkit.repository.validator.ensemble_rules import ModelDirectory

__all__ = ["AFFECTED_TRITON", "check_parallel_step_failure"]

#: the Triton releases the rule warns for (tritonkit serves 2.51)
AFFECTED_TRITON = "Triton <= 2.51 (fixed upstream in triton-inference-server/core#483)"
CODE = "ensemble-parallel-step-failure"


def check_parallel_step_failure(models: Mapping[str, ModelDirectory]) -> None:
    """Warn on each ensemble step that reads client input and starts before a sibling."""
    for info in models.values():
        cf = info.cf
        if cf is None or cf.config.platform != "ensemble" or not cf.config.HasField("ensemble_scheduling"):
            continue
        steps = list(cf.config.ensemble_scheduling.step)
        client_inputs = {io.name for io in cf.config.input}
        for batch in scheduling_batches(
            client_inputs, [(dict(s.input_map), dict(s.output_map)) for s in steps]
        ):
            for position, index in enumerate(batch[:-1]):
                read = sorted(t for t in steps[index].input_map.values() if t in client_inputs)
                if not read:
                    continue
                later = ", ".join(f"{j} ('{steps[j].model_name}')" for j in batch[position + 1 :])
                model = steps[index].model_name
                cf.warning(
                    CODE,
                    f"step {index} ('{model}') reads the client's {', '.join(map(repr, read))} and starts "
                    f"together with step(s) {later}: if '{model}' refuses a request before they are "
                    f"dispatched, {AFFECTED_TRITON} crashes (SIGSEGV). Check client input in a step that "
                    f"runs alone before the fan-out, or list '{model}' after its siblings",
                    at=f"ensemble_scheduling.step[{index}]",
                )


def scheduling_batches(
    client_inputs: set[str], steps: Sequence[tuple[Mapping[str, str], Mapping[str, str]]]
) -> list[list[int]]:
    """Groups of step indices Triton may dispatch together, each in dispatch (step) order.

    ``steps`` holds each step's (input_map, output_map). Steps whose inputs are neither ensemble
    inputs nor written by a step, and wiring with cycles, yield no batches (other rules report them).
    """
    producer: dict[str, int] = {}
    for i, (_, outputs) in enumerate(steps):
        for tensor in outputs.values():
            producer.setdefault(tensor, i)
    deps: list[set[int]] = []
    for inputs, _ in steps:
        if any(t not in client_inputs and t not in producer for t in inputs.values()):
            return []
        deps.append({producer[t] for t in inputs.values() if t in producer})
    ancestors = _ancestors(deps)
    if ancestors is None:
        return []
    batches = [[i for i, d in enumerate(deps) if not d]]
    for x in range(len(steps)):
        # s can start when x finishes unless another producer of s necessarily runs after x
        batches.append(
            [s for s, d in enumerate(deps) if x in d and not any(x in ancestors[o] for o in d if o != x)]
        )
    return [b for b in batches if len(b) > 1]


def _ancestors(deps: Sequence[set[int]]) -> list[set[int]] | None:
    """Every step each step transitively waits for; None when the steps wait in a cycle."""
    result: list[set[int] | None] = [None] * len(deps)
    visiting: set[int] = set()

    def visit(i: int) -> set[int] | None:
        done = result[i]
        if done is not None:
            return done
        if i in visiting:
            return None
        visiting.add(i)
        found: set[int] = set()
        for d in deps[i]:
            above = visit(d)
            if above is None:
                return None
            found |= above | {d}
        visiting.discard(i)
        result[i] = found
        return found

    out: list[set[int]] = []
    for i in range(len(deps)):
        got = visit(i)
        if got is None:
            return None
        out.append(got)
    return out
