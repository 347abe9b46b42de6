"""Request data for a benchmark: generated from model metadata, or read from real data.

``--input-data random`` (default) or ``zero`` generates tensors from the model's metadata;
variable dimensions need ``--shape NAME:d1,d2``. A path gives real data: a perf_analyzer JSON
file (``{"data": [{"INPUT": [...]}, ...]}``), a directory (one file per input named after the
input, or one request per file), an image, or a text file (one request per line).
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np

from tritonkit._dtypes import TRITON_TO_NUMPY
from tritonkit.errors import PerfError
from tritonkit.signature import ModelSignature, TensorInfo

Array: TypeAlias = "np.ndarray[Any, Any]"

#: Triton data type name -> numpy dtype (the package's one table)
DTYPES = TRITON_TO_NUMPY

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff"}
TEXT_SUFFIXES = {".txt", ".text", ".csv", ".tsv", ".md"}


#: perf's name for the shared model signature (tritonkit.signature), kept for callers
ModelInputs = ModelSignature


def input_of(model: ModelSignature, name: str) -> TensorInfo:
    """The input called ``name``, or a PerfError listing the model's inputs."""
    info = model.find_input(name)
    if info is None:
        raise PerfError(
            f"model '{model.name}' has no input '{name}'",
            hint=f"its inputs are: {', '.join(t.name for t in model.inputs)}",
        )
    return info


def model_inputs_from_metadata(metadata: Mapping[str, Any], config: Mapping[str, Any]) -> ModelSignature:
    """The model's signature from Triton's metadata and config JSON (HTTP or gRPC ``as_json``)."""
    sig: ModelSignature = ModelSignature.from_metadata(metadata, config)
    if not sig.inputs:
        raise PerfError(f"model '{sig.name or '?'}' reports no inputs in its metadata")
    return sig


def parse_shape_options(options: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """``NAME:d1,d2`` options (perf_analyzer's --shape) -> {NAME: (d1, d2)}."""
    shapes: dict[str, tuple[int, ...]] = {}
    for opt in options:
        name, sep, dims = opt.rpartition(":")
        try:
            parsed = tuple(int(d) for d in dims.split(","))
        except ValueError:
            parsed = ()
        if not sep or not name or not parsed or any(d <= 0 for d in parsed):
            raise PerfError(
                f"--shape '{opt}' is not NAME:d1,d2,... with positive integers",
                hint="e.g. --shape RAW_IMAGE:150528 (dimensions without the batch dimension)",
            )
        shapes[name] = parsed
    return shapes


def resolve_dims(info: TensorInfo, shapes: Mapping[str, tuple[int, ...]]) -> tuple[int, ...]:
    """The concrete dims to send for ``info``: --shape when given, else the fixed model dims."""
    if info.name in shapes:
        given = shapes[info.name]
        if len(given) != len(info.dims) or any(
            d >= 0 and d != g for d, g in zip(info.dims, given, strict=True)
        ):
            raise PerfError(
                f"--shape {info.name}:{','.join(map(str, given))} does not fit the model's "
                f"dims {list(info.dims)}",
                hint="give one value per dimension (without the batch dimension); fixed dims must match",
            )
        return given
    if info.variable:
        example = ",".join("16" if d < 0 else str(d) for d in info.dims)
        raise PerfError(
            f"input '{info.name}' has variable dims {list(info.dims)}: the benchmark needs a shape",
            hint=f"pass --shape {info.name}:{example} or real data with --input-data PATH",
        )
    return info.dims


def _generate(info: TensorInfo, dims: tuple[int, ...], batch: int, *, zero: bool, rng: Any) -> Array:
    shape = (batch, *dims) if batch > 0 else dims
    dtype = DTYPES.get(info.datatype)
    if dtype is None:
        raise PerfError(
            f"input '{info.name}' has data type {info.datatype}, which the benchmark cannot generate",
            hint="give real data with --input-data PATH (perf_analyzer JSON format)",
        )
    if info.datatype == "BYTES":
        count = int(np.prod(shape)) if shape else 1
        words = [b"" if zero else bytes(rng.integers(97, 123, size=8).astype(np.uint8)) for _ in range(count)]
        return np.array(words, dtype=np.object_).reshape(shape)
    out: Array
    if zero:
        out = np.zeros(shape, dtype=dtype)
    elif info.datatype == "BOOL":
        out = rng.integers(0, 2, size=shape).astype(np.bool_)
    elif np.issubdtype(dtype, np.integer):
        out = rng.integers(0, 100, size=shape).astype(dtype)
    else:
        out = rng.random(size=shape).astype(dtype)
    return out


def generate_requests(
    model: ModelInputs,
    *,
    mode: str = "random",
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    batch_size: int = 1,
    seed: int = 0,
) -> list[dict[str, Array]]:
    """One request of generated data (random or zeros) shaped from the model's metadata."""
    if mode not in ("random", "zero"):
        raise PerfError(f"unknown generated data mode '{mode}'", hint="use random, zero or a path")
    shapes = dict(shapes or {})
    for name in shapes:
        input_of(model, name)  # an unknown name is an error, not silently ignored
    rng = np.random.default_rng(seed)
    batch = batch_size if model.max_batch_size > 0 else 0
    llm = is_llm_entry_point(model)
    request: dict[str, Array] = {}
    for t in model.inputs:
        if llm and (t.name in LLM_VALUES or t.optional) and t.name not in shapes:
            if t.name in LLM_VALUES:
                request[t.name] = _llm_value(t, model, batch)
            continue  # the engine's own defaults, not random sampling settings
        request[t.name] = _generate(t, resolve_dims(t, shapes), batch, zero=mode == "zero", rng=rng)
    return [request]


#: Generated values for an LLM entry point's inputs (the TensorRT-LLM ensemble/BLS contract,
#: tensorrtllm_backend docs/model_config.md "Unique Inputs for tensorrt_llm_bls model"): a real
#: prompt, a small positive output length, and ``stream`` as the model serves (its other optional
#: inputs, sampling settings and word lists, are left to the engine's defaults; random ones would
#: ask for e.g. beam widths the engine was not built for).
LLM_PROMPT = "Describe what a relevance map shows, in one short sentence."
LLM_MAX_TOKENS = 16
LLM_VALUES = ("text_input", "max_tokens", "stream")


def is_llm_entry_point(model: ModelSignature) -> bool:
    """A model taking a text prompt and an output length (``text_input`` BYTES, ``max_tokens`` int)."""
    text = model.find_input("text_input")
    tokens = model.find_input("max_tokens")
    return (
        text is not None
        and text.datatype == "BYTES"
        and tokens is not None
        and tokens.datatype in ("INT32", "INT64", "UINT32", "UINT64")
    )


def _llm_value(info: TensorInfo, model: ModelSignature, batch: int) -> Array:
    dims = tuple(1 if d < 0 else d for d in info.dims) or (1,)
    shape = (batch, *dims) if batch > 0 else dims
    if info.name == "text_input":
        return np.full(shape, LLM_PROMPT.encode("utf-8"), dtype=np.object_)
    if info.name == "max_tokens":
        return np.full(shape, LLM_MAX_TOKENS, dtype=DTYPES[info.datatype])
    return np.full(shape, model.decoupled, dtype=np.bool_)


# --- real data -------------------------------------------------------------------------------


def _batched(model: ModelInputs, array: Array, batch_size: int) -> Array:
    if model.max_batch_size > 0:
        return np.repeat(array[np.newaxis, ...], batch_size, axis=0)
    return array


def _tensor_from_json(info: TensorInfo, value: Any, where: str) -> Array:
    shape: list[int] | None = None
    if isinstance(value, dict):
        if "b64" in value:
            raise PerfError(f"{where}: base64 ('b64') tensors are not supported", hint="use 'content'")
        shape = [int(d) for d in value.get("shape", [])] or None
        value = value.get("content")
    dtype = DTYPES.get(info.datatype)
    if dtype is None:
        raise PerfError(f"{where}: data type {info.datatype} is not supported")
    try:
        if info.datatype == "BYTES":
            flat = [
                v.encode() if isinstance(v, str) else bytes(v)
                for v in np.ravel(np.array(value, dtype=object))
            ]
            arr = np.array(flat, dtype=np.object_)
        else:
            arr = np.array(value, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise PerfError(f"{where}: cannot read '{info.name}' as {info.datatype}: {exc}") from exc
    if shape is None and not info.variable and arr.ndim == 1 and len(info.dims) != 1:
        shape = list(info.dims)
    if shape is not None:
        if math.prod(shape) != arr.size:
            raise PerfError(
                f"{where}: '{info.name}' has {arr.size} values, shape {shape} needs {math.prod(shape)}"
            )
        arr = arr.reshape(shape)
    return arr


def _read_json(model: ModelInputs, path: Path, batch_size: int) -> list[dict[str, Array]]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PerfError(f"{path}: not a readable JSON file: {exc}") from exc
    entries = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not entries:
        raise PerfError(
            f'{path}: expected perf_analyzer\'s format {{"data": [{{"INPUT": [...]}}, ...]}}',
            hint="each entry of 'data' is one request: input name -> values or {content, shape}",
        )
    requests = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise PerfError(f"{path}: data[{i}] is not an object of input name -> values")
        req = {}
        for info in model.inputs:
            if info.name not in entry and info.optional:
                continue  # an optional input left out is not sent (as perf_analyzer does)
            if info.name not in entry:
                raise PerfError(f"{path}: data[{i}] has no value for input '{info.name}'")
            arr = _tensor_from_json(info, entry[info.name], f"{path}: data[{i}]")
            req[info.name] = _batched(model, arr, batch_size)
        requests.append(req)
    return requests


def _primary_input(model: ModelInputs, kind: str, path: Path) -> TensorInfo:
    """The input a file of ``kind`` (image/text/raw) feeds."""
    for info in model.inputs:
        if kind == "text" and info.datatype == "BYTES":
            return info
        if kind == "image" and info.datatype in ("FP32", "FP16", "FP64") and len(info.dims) == 3:
            return info
        if kind in ("image", "raw") and info.datatype in ("UINT8", "BYTES") and info.variable:
            return info
    raise PerfError(
        f"{path}: no input of model '{model.name}' takes {kind} data",
        hint="use a perf_analyzer JSON file with --input-data to give every input explicitly",
    )


def _image_tensor(info: TensorInfo, path: Path) -> Array:
    from PIL import Image

    try:
        with Image.open(path) as img:
            rgb = img.convert("RGB")
            channels_first = info.dims[0] in (1, 3)
            h, w = (info.dims[1], info.dims[2]) if channels_first else (info.dims[0], info.dims[1])
            arr = np.asarray(rgb.resize((w, h)), dtype=np.float32) / 255.0
    except OSError as exc:
        raise PerfError(f"{path}: not a readable image: {exc}") from exc
    if channels_first:
        arr = arr.transpose(2, 0, 1)
    return arr.astype(DTYPES[info.datatype])


def _sample(model: ModelInputs, path: Path, filler: dict[str, Array], batch: int) -> dict[str, Array]:
    kind = "image" if path.suffix.lower() in IMAGE_SUFFIXES else "raw"
    info = _primary_input(model, kind, path)
    data = path.read_bytes()
    arr: Array
    if info.datatype == "BYTES":
        arr = np.array([data], dtype=np.object_).reshape((1,) * max(len(info.dims), 1))
    elif info.datatype == "UINT8" and info.variable:
        arr = np.frombuffer(data, dtype=np.uint8).copy()
    else:
        arr = _image_tensor(info, path)
    return {**filler, info.name: _batched(model, arr, batch)}


def _filler(
    model: ModelInputs, skip: str, shapes: Mapping[str, tuple[int, ...]], batch: int
) -> dict[str, Array]:
    """Generated values for inputs a real-data file does not give."""
    others = ModelSignature(
        name=model.name,
        version=model.version,
        max_batch_size=model.max_batch_size,
        inputs=tuple(t for t in model.inputs if t.name != skip),
        outputs=(),
    )
    if not others.inputs:
        return {}
    return generate_requests(others, shapes=shapes, batch_size=batch)[0]


def load_requests(
    model: ModelInputs,
    path: Path,
    *,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    batch_size: int = 1,
) -> list[dict[str, Array]]:
    """Requests made of real data at ``path`` (JSON, directory, image or text file)."""
    shapes = dict(shapes or {})
    if not path.exists():
        raise PerfError(f"--input-data {path}: no such file or directory")
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
        by_name = {p.name: p for p in files}
        if all(t.name in by_name or t.optional for t in model.inputs):
            req = {}
            for info in model.inputs:
                if info.name not in by_name:
                    continue  # an optional input without a file is not sent
                raw = by_name[info.name].read_bytes()
                if info.datatype == "BYTES":
                    arr = np.array(raw.splitlines() or [b""], dtype=np.object_)
                else:
                    arr = np.frombuffer(raw, dtype=DTYPES[info.datatype]).copy()
                    dims = (
                        resolve_dims(info, shapes) if (info.variable and info.name in shapes) else info.dims
                    )
                    if not any(d < 0 for d in dims):
                        if arr.size != math.prod(dims):
                            raise PerfError(
                                f"{by_name[info.name]}: {arr.size} values, input needs {list(dims)}"
                            )
                        arr = arr.reshape(dims)
                req[info.name] = _batched(model, arr, batch_size)
            return [req]
        if not files:
            raise PerfError(f"--input-data {path}: the directory is empty")
        requests = []
        for f in files:
            if f.suffix.lower() == ".json":
                requests.extend(_read_json(model, f, batch_size))
                continue
            kind = "image" if f.suffix.lower() in IMAGE_SUFFIXES else "raw"
            info = _primary_input(model, kind, f)
            requests.append(_sample(model, f, _filler(model, info.name, shapes, batch_size), batch_size))
        return requests
    suffix = path.suffix.lower()
    if suffix == ".json":
        return _read_json(model, path, batch_size)
    if suffix in TEXT_SUFFIXES:
        info = _primary_input(model, "text", path)
        lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
        if not lines:
            raise PerfError(f"{path}: the text file has no non-empty line")
        filler = _filler(model, info.name, shapes, batch_size)
        shape = (1,) * max(len(info.dims), 1)
        return [
            {
                **filler,
                info.name: _batched(
                    model, np.array([ln.encode()], dtype=np.object_).reshape(shape), batch_size
                ),
            }
            for ln in lines
        ]
    kind = "image" if suffix in IMAGE_SUFFIXES else "raw"
    info = _primary_input(model, kind, path)
    return [_sample(model, path, _filler(model, info.name, shapes, batch_size), batch_size)]


def encode_image_png(array: Array) -> bytes:
    """PNG bytes of an HxWx3 uint8 array (used by tests and examples to make real image data)."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(array).save(buf, format="PNG")
    return buf.getvalue()
