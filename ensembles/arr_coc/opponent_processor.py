"""Triton Python model ``opponent_processor``: three relevance maps -> one map and a token budget.

Inputs ``PROPOSITIONAL``, ``PERSPECTIVAL``, ``PARTICIPATORY`` FP32 [1, 14, 14] (the three
scorers' patch maps, batch of one). Outputs ``RELEVANCE`` FP32 [14, 14] in [0, 1],
``TOKEN_BUDGET`` INT32 [14, 14] (visual tokens per patch, summing to TOTAL_TOKENS) and
``BALANCE`` FP32 [3] (the weights given to propositional, perspectival, participatory).

The balancing plays the opponent processes against each other:
- query vs image (participate vs perceive): the participatory map gets up to 60% of the
  weight, in proportion to how strongly the query separates patches (its contrast); a query
  with no visual cue leaves relevance to the image alone;
- compress vs particularise (information vs salience): the rest is split in favour of the
  map that is more selective (one minus its mean);
- focus vs diversify (exploit vs explore): the combined map is sharpened by an exponent that
  grows with the query's weight, and every patch keeps at least MIN_TOKENS_PER_PATCH tokens
  plus an EXPLORATION share, so nothing is ever fully ignored.

Parameters (config ``parameters``): TOTAL_TOKENS (1024), MIN_TOKENS_PER_PATCH (1),
MAX_TOKENS_PER_PATCH (32), EXPLORATION (0.05). Self-contained on purpose (numpy and
``triton_python_backend_utils`` only); the stage is the plain function ``balance``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

try:
    import triton_python_backend_utils as pb_utils
except ImportError:  # imported outside Triton: tests call the stage functions directly
    pb_utils = None

#: the patch grid the scorers produce (14 x 14 patches of 16 x 16 pixels)
PATCHES = 14 * 14
MAX_QUERY_WEIGHT = 0.6
#: participatory contrast (max - min of its sigmoid map) that earns the full query weight
FULL_QUERY_CONTRAST = 0.6


class StageError(ValueError):
    """A request (or configuration) this stage cannot process."""


@dataclass(frozen=True)
class Budget:
    """Token budget settings, from the model config's parameters."""

    total_tokens: int = 1024
    min_tokens: int = 1
    max_tokens: int = 32
    exploration: float = 0.05

    def check(self, patches: int) -> None:
        if not 0 <= self.min_tokens <= self.max_tokens:
            raise StageError(
                f"MIN_TOKENS_PER_PATCH ({self.min_tokens}) must be between 0 and MAX_TOKENS_PER_PATCH "
                f"({self.max_tokens})"
            )
        if not self.min_tokens * patches <= self.total_tokens <= self.max_tokens * patches:
            raise StageError(
                f"TOTAL_TOKENS ({self.total_tokens}) must lie between {self.min_tokens * patches} and "
                f"{self.max_tokens * patches} for {patches} patches with "
                f"{self.min_tokens}..{self.max_tokens} tokens each"
            )
        if self.exploration < 0:
            raise StageError(f"EXPLORATION must be >= 0, got {self.exploration}")

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Budget:
        params = config.get("parameters", {})

        def value(key: str, default: float, kind: type) -> Any:
            raw = params.get(key, {}).get("string_value", "")
            if raw == "":
                return default
            try:
                return kind(raw)
            except ValueError:
                raise StageError(f"parameter {key} must be a {kind.__name__}, got {raw!r}") from None

        return cls(
            total_tokens=value("TOTAL_TOKENS", cls.total_tokens, int),
            min_tokens=value("MIN_TOKENS_PER_PATCH", cls.min_tokens, int),
            max_tokens=value("MAX_TOKENS_PER_PATCH", cls.max_tokens, int),
            exploration=value("EXPLORATION", cls.exploration, float),
        )


def normalise(values: np.ndarray) -> np.ndarray:
    """Min-max scale to [0, 1]; a flat map becomes all zeros."""
    low, high = float(values.min()), float(values.max())
    if high - low < 1e-9:
        return np.zeros_like(values, dtype=np.float64)
    return (values.astype(np.float64) - low) / (high - low)


def allocate(weights: np.ndarray, budget: Budget) -> np.ndarray:
    """Integer tokens per cell, proportional to weights, within [min, max], summing to the total.

    Water-filling: share what is left in proportion to the weights of cells below the cap, cap,
    repeat; then round with the largest-remainder method so the sum is exact.
    """
    flat = np.maximum(weights.astype(np.float64).ravel(), 0.0)
    budget.check(flat.size)
    tokens = np.full(flat.size, float(budget.min_tokens))
    remaining = float(budget.total_tokens - budget.min_tokens * flat.size)
    open_cells = tokens < budget.max_tokens
    while remaining > 1e-9 and open_cells.any():
        w = flat[open_cells]
        share = remaining * (w / w.sum() if w.sum() > 0 else np.full(w.size, 1.0 / w.size))
        take = np.minimum(share, budget.max_tokens - tokens[open_cells])
        tokens[open_cells] += take
        remaining -= float(take.sum())
        open_cells = tokens < budget.max_tokens - 1e-9
    whole = np.floor(tokens + 1e-9)
    short = int(round(budget.total_tokens - whole.sum()))
    if short > 0:
        order = np.argsort(-(tokens - whole), kind="stable")
        whole[order[:short]] += 1
    return whole.reshape(weights.shape).astype(np.int32)


def balance(
    propositional: np.ndarray,
    perspectival: np.ndarray,
    participatory: np.ndarray,
    budget: Budget | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The stage: three [G, G] maps -> (relevance [G, G] FP32, tokens [G, G] INT32, weights [3] FP32)."""
    budget = budget or Budget()
    maps = [
        np.asarray(m, dtype=np.float64).reshape(np.shape(m)[-2:])
        for m in (propositional, perspectival, participatory)
    ]
    if len({m.shape for m in maps}) != 1:
        raise StageError(f"the three relevance maps differ in shape: {[list(m.shape) for m in maps]}")
    prop, pers, part = (normalise(m) for m in maps)
    contrast = float(maps[2].max() - maps[2].min())
    w_part = MAX_QUERY_WEIGHT * min(1.0, contrast / FULL_QUERY_CONTRAST)
    selective_prop, selective_pers = 1.0 - prop.mean(), 1.0 - pers.mean()
    rest = 1.0 - w_part
    w_prop = rest * selective_prop / max(selective_prop + selective_pers, 1e-9)
    w_pers = rest - w_prop
    combined = w_prop * prop + w_pers * pers + w_part * part
    relevance = normalise(combined) ** (1.0 + w_part)
    tokens = allocate(relevance + budget.exploration, budget)
    weights = np.array([w_prop, w_pers, w_part], dtype=np.float32)
    return relevance.astype(np.float32), tokens, weights


class TritonPythonModel:
    """Triton entry point; one instance per configured model instance."""

    def initialize(self, args: dict[str, Any]) -> None:
        config = json.loads(args["model_config"])
        try:
            self.budget = Budget.from_config(config)
            self.budget.check(PATCHES)
        except StageError as exc:
            raise pb_utils.TritonModelException(f"opponent_processor: {exc}") from None

    def execute(self, requests: list[Any]) -> list[Any]:
        responses = []
        for request in requests:
            try:
                maps = [
                    pb_utils.get_input_tensor_by_name(request, name).as_numpy()
                    for name in ("PROPOSITIONAL", "PERSPECTIVAL", "PARTICIPATORY")
                ]
                relevance, tokens, weights = balance(*maps, budget=self.budget)
                responses.append(
                    pb_utils.InferenceResponse(
                        [
                            pb_utils.Tensor("RELEVANCE", relevance),
                            pb_utils.Tensor("TOKEN_BUDGET", tokens),
                            pb_utils.Tensor("BALANCE", weights),
                        ]
                    )
                )
            except StageError as exc:
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(str(exc))))
        return responses
