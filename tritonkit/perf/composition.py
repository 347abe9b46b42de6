"""An LLM-decoder pipeline measured composed: what the runner reads of it before the load starts.

``tritonkit perf`` on a pipeline's Python front door (``vlm_llm``, ``arr_coc_llm``) measures, by
default, what its callers do (:mod:`tritonkit.llm_pipeline`): the prompt model unary, then the
LLM stage streamed straight from Triton. The front door's config says which models those are;
the stage's metadata says which inputs it takes (its ``return_*`` flags) and whether it counts
its own tokens. The sender that sends it is :mod:`tritonkit.perf._composed_sender`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from tritonkit.client.control import AsyncModelControl, ControlCallError
from tritonkit.llm_pipeline import ComposedPipeline, composed_pipeline
from tritonkit.perf import stages
from tritonkit.perf._target import Target
from tritonkit.perf.inputs import model_inputs_from_metadata

__all__ = ["Composition", "composed_record", "read_composition"]


@dataclass(frozen=True)
class Composition:
    """A pipeline measured composed: its contract and its LLM stage's inputs."""

    pipeline: ComposedPipeline
    stage_inputs: tuple[str, ...]
    #: the stage returns num_output_tokens when asked (vLLM's contract): tokens are its counts
    engine_counts: bool

    @property
    def stats_model(self) -> tuple[str, str]:
        """The model (and version) whose statistics are the run's server side: the LLM stage
        (the front door is not called)."""
        return self.pipeline.llm_model, ""

    def target(self, target: Target) -> Target:
        """``target`` (the front door's) sent composed: the composed sender streams the stage."""
        return replace(target, pipeline=self.pipeline, stage_inputs=self.stage_inputs)

    async def stages(self, config_of: stages.ConfigFetcher) -> list[stages.Stage]:
        """The models a composed request reaches: the prompt model, its ensemble's steps, the
        LLM stage (the front door is not called)."""
        first, last, parent = self.pipeline.prompt_model, self.pipeline.llm_model, self.pipeline.name
        inner = await stages.discover_stages(first, config_of)
        return [
            stages.Stage(model=first, via="composed", parent=parent),
            *(st for st in inner if st.model != last),
            stages.Stage(model=last, via="composed", parent=parent),
        ]


def composed_record(composition: Composition | None) -> dict[str, str] | None:
    """What a result file says of a run's composition (``settings["composed"]``; None: the model
    itself was measured)."""
    if composition is None:
        return None
    return {"prompt_model": composition.pipeline.prompt_model, "llm_model": composition.pipeline.llm_model}


async def read_composition(control: AsyncModelControl, cfg: Mapping[str, Any]) -> Composition | None:
    """The composition the served config ``cfg`` carries, or None when the model is not an
    LLM-decoder pipeline's front door. Raises :class:`ControlCallError` naming the prompt model
    or the stage when the server cannot say what it is."""
    pipeline = composed_pipeline(cfg)
    if pipeline is None:
        return None
    for name, role in ((pipeline.prompt_model, "prompt model"), (pipeline.llm_model, "LLM stage")):
        try:
            meta, stage_cfg = await control.metadata(name, "")
        except ControlCallError as exc:
            action = f"reading metadata of '{name}', the {role} of pipeline '{pipeline.name}'"
            raise ControlCallError(action, exc.refusal) from exc
    stage = model_inputs_from_metadata(meta, stage_cfg)
    counts = stage.find_input("return_num_output_tokens") is not None and any(
        o.name == "num_output_tokens" for o in stage.outputs
    )
    return Composition(
        pipeline=pipeline, stage_inputs=tuple(t.name for t in stage.inputs), engine_counts=counts
    )
