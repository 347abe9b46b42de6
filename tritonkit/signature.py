"""A model's signature as a Triton server reports it: one description shared by the client,
perf and tune.

``ModelSignature.from_metadata(metadata, config)`` reads Triton's metadata and config answers
(HTTP JSON or gRPC ``as_json``, where int64 dims arrive as strings and the config is nested under
``config``). Dims exclude the batch dimension when the model batches (``max_batch_size > 0``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from tritonkit._dtypes import TRITON_TO_NUMPY

__all__ = ["ModelSignature", "TensorInfo"]

_S = TypeVar("_S", bound="ModelSignature")

_NP_DTYPES = {k: np.dtype(v) for k, v in TRITON_TO_NUMPY.items()}


@dataclass(frozen=True)
class TensorInfo:
    """One input or output: dims without the batch dimension when the model batches."""

    name: str
    datatype: str
    dims: tuple[int, ...]
    optional: bool = False

    @property
    def np_dtype(self) -> Any:
        return _NP_DTYPES.get(self.datatype)

    @property
    def fixed(self) -> bool:
        return all(d >= 0 for d in self.dims)

    @property
    def variable(self) -> bool:
        return not self.fixed

    def expected(self, batching: bool) -> str:
        # "N" marks the batch dimension (upper case: rich would read "[batch" as markup).
        shown = ["N", *map(str, self.dims)] if batching else [str(d) for d in self.dims]
        return f"{self.datatype} [{', '.join(shown)}]"


@dataclass(frozen=True)
class ModelSignature:
    """A model's name, version, batching and tensors, read from the server."""

    name: str
    version: str
    max_batch_size: int
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    #: model_transaction_policy.decoupled: the model answers with a stream of responses
    decoupled: bool = False
    #: the config's ``backend`` (``"vllm"`` for an LLM stage; "" when the config names a platform)
    backend: str = ""
    #: the outputs' names, computed once (the client's hot path reads it per request)
    output_names: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "output_names", tuple(t.name for t in self.outputs))

    @property
    def batching(self) -> bool:
        return self.max_batch_size > 0

    def find_input(self, name: str) -> TensorInfo | None:
        return next((t for t in self.inputs if t.name == name), None)

    @staticmethod
    def parse(metadata: Mapping[str, Any], config: Mapping[str, Any], *, version: str = "") -> dict[str, Any]:
        """The constructor arguments read from Triton's answers (subclasses build from them)."""
        cfg = config.get("config", config)  # gRPC as_json nests the config
        max_batch = int(cfg.get("max_batch_size", cfg.get("maxBatchSize", 0)) or 0)
        optional = {str(i.get("name")) for i in cfg.get("input", []) if i.get("optional")}
        policy = cfg.get("model_transaction_policy", cfg.get("modelTransactionPolicy")) or {}

        def tensors(items: Sequence[Mapping[str, Any]], with_optional: bool) -> tuple[TensorInfo, ...]:
            out = []
            for item in items:
                shape = tuple(int(d) for d in item.get("shape", []))
                if max_batch > 0 and shape:
                    shape = shape[1:]  # metadata shows the batch dimension as -1
                name = str(item["name"])
                datatype = str(item["datatype"]).upper().removeprefix("TYPE_")
                out.append(TensorInfo(name, datatype, shape, with_optional and name in optional))
            return tuple(out)

        return {
            "name": str(metadata.get("name", "")),
            "version": version,
            "max_batch_size": max_batch,
            "inputs": tensors(metadata.get("inputs", []), True),
            "outputs": tensors(metadata.get("outputs", []), False),
            "decoupled": bool(policy.get("decoupled", False)),
            "backend": str(cfg.get("backend", "") or ""),
        }

    @classmethod
    def from_metadata(
        cls: type[_S], metadata: Mapping[str, Any], config: Mapping[str, Any], *, version: str = ""
    ) -> _S:
        return cls(**cls.parse(metadata, config, version=version))
