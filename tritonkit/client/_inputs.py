"""Check caller inputs against a model's metadata, batch them, split and merge them.

Batch dimension rule (documented in the README): for a model with ``max_batch_size > 0`` the
caller may pass either a batch (``ndim == len(dims) + 1``) or a single sample
(``ndim == len(dims)``); a single sample gets a batch dimension of 1 added, and the outputs keep
that batch dimension (``out.shape[0] == 1``), exactly as Triton returns them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from tritonkit._dtypes import TRITON_TO_NUMPY
from tritonkit.errors import InputMismatchError
from tritonkit.signature import ModelSignature
from tritonkit.signature import TensorInfo as TensorInfo  # re-exported: callers import it here

_NP_DTYPES = {k: np.dtype(v) for k, v in TRITON_TO_NUMPY.items()}


@dataclass(frozen=True)
class ModelInfo(ModelSignature):
    """What the client needs from a model's metadata and config (cached per model and version):
    the shared :class:`ModelSignature` plus lookups precomputed for the hot path."""

    def __post_init__(self) -> None:
        super().__post_init__()
        # Precomputed once per model: the hot path only does dict and tuple lookups.
        object.__setattr__(self, "input_map", {t.name: t for t in self.inputs})
        object.__setattr__(self, "output_map", {t.name: t for t in self.outputs})
        object.__setattr__(self, "required", frozenset(t.name for t in self.inputs if not t.optional))
        fast = {t.name: (t.datatype, t.np_dtype, t.dims, len(t.dims) + 1) for t in self.inputs}
        ok = self.batching and all(
            t.fixed and t.datatype != "BYTES" and t.np_dtype is not None for t in self.inputs
        )
        object.__setattr__(self, "fast_inputs", fast if ok else None)

    input_map: dict[str, TensorInfo] = field(init=False, repr=False, compare=False)
    output_map: dict[str, TensorInfo] = field(init=False, repr=False, compare=False)
    required: frozenset[str] = field(init=False, repr=False, compare=False)
    #: name -> (datatype, numpy dtype, dims, ndim with batch) when every input allows the fast path
    fast_inputs: dict[str, tuple[str, Any, tuple[int, ...], int]] | None = field(
        init=False, repr=False, compare=False
    )


class PreparedInput(NamedTuple):
    name: str
    datatype: str
    array: NDArray[Any]


def _to_array(value: Any, spec: TensorInfo, model: str) -> NDArray[Any]:
    target = TRITON_TO_NUMPY.get(spec.datatype)
    if spec.datatype == "BYTES":
        if isinstance(value, (str, bytes)):
            value = [value]
        arr = np.asarray(value, dtype=object) if not isinstance(value, np.ndarray) else value
        if arr.dtype.kind in ("U", "S", "O"):
            flat = [v.encode("utf-8") if isinstance(v, str) else v for v in arr.reshape(-1)]
            bad = next((v for v in flat if not isinstance(v, (bytes, np.bytes_))), None)
            if bad is not None:
                raise InputMismatchError(
                    f"input '{spec.name}' of model '{model}' expects BYTES (str or bytes), "
                    f"got an element of type {type(bad).__name__}",
                    hint="pass strings, bytes or a numpy object array of them",
                )
            out = np.empty(len(flat), dtype=object)
            out[:] = flat
            return out.reshape(arr.shape)
        raise InputMismatchError(
            f"input '{spec.name}' of model '{model}' expects BYTES, got numpy {arr.dtype}",
            hint="pass strings/bytes (e.g. ['text']) or np.array([...], dtype=object)",
        )
    if target is None:
        # A type numpy cannot hold natively (BF16...): send what the caller built.
        return np.asarray(value)
    if isinstance(value, np.ndarray):
        if value.dtype == target:
            return value
        if np.can_cast(value.dtype, target, casting="safe"):
            return value.astype(target)
        raise InputMismatchError(
            f"input '{spec.name}' of model '{model}' expects {spec.datatype} "
            f"(numpy {np.dtype(target).name}), got numpy {value.dtype}",
            hint=f"convert it: array.astype(np.{np.dtype(target).name})",
        )
    return _from_literal(value, spec, model, np.dtype(target))


def _from_literal(value: Any, spec: TensorInfo, model: str, target: np.dtype[Any]) -> NDArray[Any]:
    """Python literals (lists, scalars, JSON) take the model's type, but only without loss.

    numpy would cast silently (1.5 -> 1, 300 -> 44, "12" -> 12); a request carrying such a value
    is almost always a mistake, so it is refused with the input's name instead.
    """
    where = f"input '{spec.name}' of model '{model}' expects {spec.datatype}"
    try:
        natural = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise InputMismatchError(
            f"{where}; cannot convert the given {type(value).__name__} ({exc})",
            hint="pass a numpy array or nested list of numbers",
        ) from exc
    if natural.size == 0:
        return natural.astype(target)
    kind = natural.dtype.kind
    if kind not in "biuf":  # text, objects, complex, dates: never guess a number from them
        example = natural.reshape(-1)[0].item()  # a plain Python value: numpy 2 reprs 'np.str_(...)'
        raise InputMismatchError(
            f"{where}; cannot convert the given {type(value).__name__} of {natural.dtype.name} values "
            f"(e.g. {example!r}) without guessing",
            hint=f"pass numbers (a numpy {target.name} array or a list of numbers)",
        )
    if target.kind == "b":
        if kind != "b" and not np.isin(natural, (0, 1)).all():
            raise InputMismatchError(
                f"{where}; got values other than true/false or 0/1",
                hint="pass booleans",
            )
    elif target.kind in "iu":
        if kind == "f":
            raise InputMismatchError(
                f"{where} (integers); got floating-point values (e.g. {natural.reshape(-1)[0].item()!r}), "
                "which would be truncated",
                hint=f"pass integers, or round explicitly: np.rint(values).astype(np.{target.name})",
            )
        info = np.iinfo(target)
        low, high = int(natural.min()), int(natural.max())
        if low < info.min or high > info.max:
            bad = low if low < info.min else high
            raise InputMismatchError(
                f"{where}, whose range is {info.min}..{info.max}; got {bad}, which would wrap around",
                hint=f"pass values within {info.min}..{info.max} (or use a wider input type)",
            )
    elif target.kind == "f" and kind == "f":
        finite = natural[np.isfinite(natural)]
        limit = float(np.finfo(target).max)
        if finite.size and float(np.abs(finite).max()) > limit:
            raise InputMismatchError(
                f"{where}; got {float(np.abs(finite).max()):g}, beyond its largest value {limit:g}",
                hint="scale the values or use a wider input type",
            )
    return natural.astype(target)


def _dims_match(shape: Sequence[int], dims: Sequence[int]) -> bool:
    return len(shape) == len(dims) and all(d < 0 or d == s for s, d in zip(shape, dims, strict=True))


def prepare(info: ModelInfo, given: Mapping[str, Any]) -> tuple[list[PreparedInput], int | None]:
    """Checked, typed and batched inputs, plus the batch size (None when the model does not batch)."""
    fast = prepare_fast(info, given)
    if fast is not None:
        return fast[0], fast[1]
    by_name = info.input_map
    unknown = sorted(set(given) - set(by_name))
    if unknown:
        raise InputMismatchError(
            f"model '{info.name}' has no input named {', '.join(repr(u) for u in unknown)}; "
            f"its inputs are: {', '.join(t.name + ' ' + t.expected(info.batching) for t in info.inputs)}",
            hint="use the model's input names (tritonkit infer prints them on a mismatch)",
        )
    missing = [t for t in info.inputs if t.name not in given and not t.optional]
    if missing:
        raise InputMismatchError(
            f"model '{info.name}' needs input(s) "
            f"{', '.join(t.name + ' ' + t.expected(info.batching) for t in missing)}, which were not given",
            hint="pass every required input, e.g. client.infer(model, NAME=array)",
        )
    prepared: list[PreparedInput] = []
    batch: int | None = None
    for spec in info.inputs:
        if spec.name not in given:
            continue
        arr = _to_array(given[spec.name], spec, info.name)
        if info.batching:
            if _dims_match(arr.shape, spec.dims):
                arr = arr.reshape((1, *arr.shape))  # one sample: add the batch dimension
            elif not (arr.ndim == len(spec.dims) + 1 and _dims_match(arr.shape[1:], spec.dims)):
                raise _shape_error(info, spec, arr)
            if batch is None:
                batch = int(arr.shape[0])
            elif arr.shape[0] != batch:
                raise InputMismatchError(
                    f"input '{spec.name}' of model '{info.name}' has batch size {arr.shape[0]}, "
                    f"but other inputs have {batch}",
                    hint="give every input the same first (batch) dimension",
                )
        elif not _dims_match(arr.shape, spec.dims):
            raise _shape_error(info, spec, arr)
        prepared.append(PreparedInput(spec.name, spec.datatype, arr))
    return prepared, batch


def prepare_fast(info: ModelInfo, given: Mapping[str, Any]) -> tuple[list[PreparedInput], int] | None:
    """The common case, checked with a few tuple comparisons: exact names, numpy arrays of the
    exact dtype and fixed shape, already batched. None sends the call down the full path."""
    specs = info.fast_inputs
    if specs is None or len(given) != len(specs):
        return None
    prepared = []
    batch = -1
    for name, value in given.items():
        spec = specs.get(name)
        if spec is None or type(value) is not np.ndarray or value.dtype != spec[1]:
            return None
        shape = value.shape
        if len(shape) != spec[3] or shape[1:] != spec[2] or (batch != -1 and shape[0] != batch):
            return None
        batch = shape[0]
        prepared.append(PreparedInput(name, spec[0], value))
    return prepared, batch


def _shape_error(info: ModelInfo, spec: TensorInfo, arr: NDArray[Any]) -> InputMismatchError:
    if info.batching:
        dims = ", ".join(map(str, spec.dims))
        want = f"[N, {dims}] (N = batch) or one sample [{dims}]"
    else:
        want = f"[{', '.join(map(str, spec.dims))}] (this model does not batch)"
    return InputMismatchError(
        f"input '{spec.name}' of model '{info.name}' expects shape {want} ({spec.datatype}; -1 = any), "
        f"got shape {list(arr.shape)}",
        hint="reshape the array to the model's input shape",
    )


def split(prepared: list[PreparedInput], batch: int | None, max_batch_size: int) -> list[list[PreparedInput]]:
    """Chunks of at most ``max_batch_size`` along the batch dimension (one chunk when it fits)."""
    if batch is None or max_batch_size <= 0 or batch <= max_batch_size:
        return [prepared]
    return [
        [PreparedInput(p.name, p.datatype, p.array[start : start + max_batch_size]) for p in prepared]
        for start in range(0, batch, max_batch_size)
    ]


def merge(parts: list[dict[str, NDArray[Any]]]) -> dict[str, NDArray[Any]]:
    """Concatenate chunked results along the batch dimension, in order."""
    if len(parts) == 1:
        return parts[0]
    return {name: np.concatenate([p[name] for p in parts], axis=0) for name in parts[0]}
