"""`tritonkit infer`: call a model on a Triton endpoint (local, AKS or Azure ML) and show the outputs."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import numpy as np
import typer
from numpy.typing import NDArray

from tritonkit.cli import render
from tritonkit.cli._auth_options import split_pair, with_auth_options
from tritonkit.cli._options import ModelVersion as _ModelVersion
from tritonkit.cli._options import Protocol as _Protocol
from tritonkit.client import (
    ModelInfo,
    ResponseStream,
    RetryPolicy,
    StreamResponse,
    StreamStats,
    TensorInfo,
    TritonClient,
    sampling_json,
)
from tritonkit.client.auth import AuthProvider
from tritonkit.client.composed import open_composed
from tritonkit.errors import ClientError, InputMismatchError
from tritonkit.kinds.names import is_vllm
from tritonkit.llm_pipeline import composed_pipeline

HELP = (
    "Call MODEL on a Triton endpoint (URL: http(s)://host[:port][/prefix], grpc://host:port, an "
    "Azure ML scoring URI, or host:port) and print its outputs. VALUE of --input NAME=VALUE is a "
    "JSON literal ([[1,2,3,4]]), a .npy/.json file, an image file, or text. Decoupled models "
    "(streamed answers) need --stream: text pieces print as they arrive, then the time to the "
    "first piece and pieces/s. LLM stages (vLLM backend): --input text_input=PROMPT --sampling "
    "'{\"max_tokens\": 32}' --stream prints the tokens as they come, then the time to the first "
    "token, the token count and tokens/s."
)

_IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff"}
_MAX_SHOWN = 16


def _image(path: Path, spec: TensorInfo) -> Any:
    raw = path.read_bytes()
    if spec.datatype == "BYTES":
        return [raw]
    if spec.datatype == "UINT8" and len(spec.dims) == 1:
        return np.frombuffer(raw, dtype=np.uint8)  # encoded bytes; the model decodes
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as img:
            pixels: NDArray[Any] = np.asarray(img.convert("RGB"))
    except (UnidentifiedImageError, OSError) as exc:
        raise InputMismatchError(
            f"cannot decode image {path}: {exc}", hint="pass a PNG or JPEG file"
        ) from exc
    return pixels if spec.datatype == "UINT8" else pixels.astype(np.float32)


def parse_value(value: str, spec: TensorInfo) -> Any:
    """A --input VALUE for ``spec``: a file (.npy, .json, image), a JSON literal, or text."""
    path = Path(value)
    if len(value) < 4096 and path.is_file():
        suffix = path.suffix.lower()
        if suffix == ".npy":
            return np.load(path, allow_pickle=False)
        if suffix == ".json":
            return json.loads(path.read_text())
        if suffix in _IMAGE_SUFFIXES:
            return _image(path, spec)
        if spec.datatype == "BYTES":
            return [path.read_bytes()]
        raise InputMismatchError(
            f"cannot read input '{spec.name}' from {path} (not .npy, .json or an image)",
            hint="save it with numpy.save(...) as .npy, or pass a JSON literal",
        )
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        if spec.datatype == "BYTES":
            return [value]  # plain text
        raise InputMismatchError(
            f"input '{spec.name}' ({spec.datatype}) needs numbers; {value!r} is neither JSON nor a file",
            hint="pass a JSON literal like [[1,2,3,4]] or a .npy file",
        ) from None
    if spec.datatype == "BYTES" and isinstance(parsed, str):
        return [parsed]
    return parsed


def _text(value: bytes) -> str | None:
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if text.isprintable() else None


def _show(values: NDArray[Any]) -> str:
    flat = values.reshape(-1)
    items = [
        (_text(v) or f"<{len(v)} bytes>") if isinstance(v, bytes) else v for v in flat[:_MAX_SHOWN].tolist()
    ]
    more = f" ... (+{flat.size - _MAX_SHOWN})" if flat.size > _MAX_SHOWN else ""
    return ", ".join(str(i) for i in items) + more


def _piece_text(value: Any) -> str | None:
    """A streamed BYTES element as text (newlines and tabs belong to generated text)."""
    if not isinstance(value, bytes):
        return None
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if all(c.isprintable() or c in "\n\t\r" for c in text) else None


def _inline_text(response: StreamResponse) -> str | None:
    """The response as one text piece when every output it holds is text, else None."""
    parts: list[str] = []
    for arr in response.outputs.values():
        if arr.dtype != object:
            return None
        for value in arr.reshape(-1).tolist():
            text = _piece_text(value)
            if text is None:
                return None
            parts.append(text)
    return "".join(parts) if response.outputs else None


def _render_stream(responses: ResponseStream, as_json: bool) -> None:
    """Each response as it arrives (text inline, anything else one line each), then the timings."""
    inline = False
    try:
        for r in responses:
            if as_json:
                outputs = {
                    name: {"datatype": str(arr.dtype), "shape": list(arr.shape), "data": _jsonable(arr)}
                    for name, arr in r.outputs.items()
                }
                item: dict[str, Any] = {"index": r.index, "outputs": outputs}
                if r.parameters:
                    item["parameters"] = dict(r.parameters)
                render.json_line(item)
                continue
            text = _inline_text(r)
            if text is not None:
                render.piece(text)
                inline = True
            else:
                if inline:
                    render.piece("\n")
                    inline = False
                render.info(f"[{r.index}] " + "  ".join(f"{n}={_show(a)}" for n, a in r.outputs.items()))
    finally:
        responses.close()  # also on Ctrl-C: the request is cancelled on the server
        if inline:
            render.piece("\n")
        stats = responses.stats
        first = stats.time_to_first
        rate = stats.rate
        if as_json:
            render.json_line(
                {
                    "summary": {
                        "responses": stats.responses,
                        "time_to_first_s": round(first, 6) if first is not None else None,
                        "responses_per_s": round(rate, 3) if rate is not None else None,
                        "elapsed_s": round(stats.elapsed, 6),
                    }
                }
            )
        else:
            render.note(
                _timing_note(f"{stats.responses} piece(s)", "first", first, "pieces", rate, stats.elapsed)
            )


def _jsonable(values: NDArray[Any]) -> Any:
    """Flat list; BYTES as text when they are printable UTF-8, else ``{"base64": ...}``."""
    if values.dtype == object:
        out: list[Any] = []
        for v in values.reshape(-1).tolist():
            if isinstance(v, bytes):
                text = _text(v)
                out.append(text if text is not None else {"base64": base64.b64encode(v).decode("ascii")})
            else:
                out.append(v)
        return out
    return values.reshape(-1).tolist()


def _inputs(info: ModelInfo, pairs: list[str]) -> dict[str, Any]:
    specs = {t.name: t for t in info.inputs}
    given: dict[str, Any] = {}
    for item in pairs:
        name, value = split_pair(item, "--input")
        spec = specs.get(name)
        if spec is None:
            raise InputMismatchError(
                f"model '{info.name}' has no input '{name}'; its inputs are "
                + ", ".join(f"{t.name} {t.expected(info.batching)}" for t in info.inputs),
                hint="use --input NAME=VALUE with one of those names",
            )
        given[name] = parse_value(value, spec)
    return given


# -- LLM stages (vLLM backend) --------------------------------------------------------------------

_LLM_TEXT = "text_output"
_LLM_TOKENS = "num_output_tokens"


def parse_sampling(value: str) -> str:
    """--sampling VALUE (a JSON object, or a .json file holding one) as the stage's JSON string."""
    path = Path(value)
    text = value
    if len(value) < 4096 and path.is_file():
        if path.suffix.lower() != ".json":
            raise InputMismatchError(
                f"--sampling reads a .json file; {path} is not one",
                hint='pass a JSON object: --sampling \'{"max_tokens": 32, "temperature": 0}\'',
            )
        text = path.read_text(encoding="utf-8")
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputMismatchError(
            f"--sampling is not JSON ({exc.msg} at character {exc.pos})",
            hint='pass a JSON object: --sampling \'{"max_tokens": 32, "temperature": 0}\'',
        ) from None
    if not isinstance(parsed, dict):
        raise InputMismatchError(
            f"--sampling must be a JSON object of vLLM sampling parameters, got {type(parsed).__name__}",
            hint='e.g. --sampling \'{"max_tokens": 32, "temperature": 0}\'',
        )
    return sampling_json(parsed)


def llm_request(info: ModelInfo, given: dict[str, Any], sampling: str | None, streaming: bool) -> bool:
    """Fill in what an LLM stage's request needs that the user left out; True for an LLM stage.

    ``--sampling`` becomes ``sampling_parameters``. On a vLLM stage streamed with ``--stream``,
    ``stream`` is true (one response per token) and ``return_num_output_tokens`` too (the token
    count), unless the user set them with --input.
    """
    llm = is_vllm(info.backend)
    if sampling is not None:
        if info.find_input("sampling_parameters") is None:
            raise InputMismatchError(
                f"model '{info.name}' has no input 'sampling_parameters': --sampling is for LLM stages "
                "(vLLM backend)",
                hint="leave --sampling out, or call an LLM stage",
            )
        if "sampling_parameters" in given:
            raise InputMismatchError(
                "sampling parameters were given twice (--sampling and --input sampling_parameters=...)",
                hint="keep one of them",
            )
        given["sampling_parameters"] = [sampling]
    if llm and streaming:
        for name in ("stream", f"return_{_LLM_TOKENS}"):
            if name not in given and info.find_input(name) is not None:
                given[name] = np.array([True], dtype=np.bool_)
    return llm


def _render_llm_stream(responses: ResponseStream, as_json: bool) -> None:
    """An LLM stage's answer: the text as it comes, then time to first token, tokens and tokens/s.

    Tokens are the stage's own count (``num_output_tokens``, per response) when it sends one;
    otherwise the responses holding text are counted (one per generation step when streaming).
    """
    count = _TokenCount()
    extra: dict[str, NDArray[Any]] = {}
    texted = False
    try:
        for r in responses:
            count.add(r)
            if as_json:
                outputs = {
                    name: {"datatype": str(arr.dtype), "shape": list(arr.shape), "data": _jsonable(arr)}
                    for name, arr in r.outputs.items()
                }
                render.json_line({"index": r.index, "outputs": outputs})
                continue
            text = r.text(_LLM_TEXT) if _LLM_TEXT in r.outputs else ""
            if text:
                render.piece(text)
                texted = True
            extra.update({n: a for n, a in r.outputs.items() if n not in (_LLM_TEXT, _LLM_TOKENS)})
    finally:
        responses.close()  # also on Ctrl-C: the request is cancelled on the server
        if texted:
            render.piece("\n")
        for name, arr in extra.items():  # the additional outputs, as the last response holding them said
            render.info(f"{name}={_show(arr)}")
        _llm_summary(count, responses.stats, as_json)


class _TokenCount:
    """Tokens of a streamed LLM answer: the stage's ``num_output_tokens``, else responses with text."""

    def __init__(self) -> None:
        self.counted: int | None = None  # the stage's own count, once it sent one
        self.first = 0  # tokens in the first response
        self.texts = 0  # responses that held text

    def add(self, response: StreamResponse) -> None:
        stage = response.outputs.get(_LLM_TOKENS)
        if stage is not None:
            n = int(np.asarray(stage, dtype=np.int64).sum())
            self.counted = (self.counted or 0) + n
            if response.index == 0:
                self.first = n
        if _LLM_TEXT in response.outputs and response.text(_LLM_TEXT):
            self.texts += 1

    @property
    def total(self) -> int:
        return self.counted if self.counted is not None else self.texts

    def after_first(self) -> int:
        return self.total - (self.first if self.counted is not None else min(1, self.total))


def _llm_summary(count: _TokenCount, stats: StreamStats, as_json: bool) -> None:
    first = stats.time_to_first
    span = stats.last - stats.first if stats.first is not None and stats.last is not None else 0.0
    after = count.after_first()
    rate = after / span if after > 0 and span > 0 else None
    by_stage = count.counted is not None
    if as_json:
        summary = {
            "responses": stats.responses,
            "tokens": count.total if by_stage else None,
            "time_to_first_token_s": round(first, 6) if first is not None else None,
            "tokens_per_s": round(rate, 3) if rate is not None and by_stage else None,
            "elapsed_s": round(stats.elapsed, 6),
        }
        render.json_line({"summary": summary})
        return
    unit = "token(s)" if by_stage else "response(s) with text (the stage sent no num_output_tokens)"
    rate_unit = "tokens" if by_stage else "responses"
    render.note(_timing_note(f"{count.total} {unit}", "first token", first, rate_unit, rate, stats.elapsed))


def _timing_note(
    head: str, first_label: str, first: float | None, rate_unit: str, rate: float | None, elapsed: float
) -> str:
    """``head, <first> after N ms, R <unit>/s after the first, T s in all``: a stream's timing line."""
    parts = [head]
    if first is not None:
        parts.append(f"{first_label} after {first * 1000:.0f} ms")
    if rate is not None:
        parts.append(f"{rate:.1f} {rate_unit}/s after the first")
    parts.append(f"{elapsed:.2f} s in all")
    return ", ".join(parts)


@with_auth_options
def command(
    url: str = typer.Argument(..., help="Endpoint URL or host:port."),
    model: str = typer.Argument(..., help="Model name."),
    protocol: _Protocol = "http",
    inputs: list[str] = typer.Option([], "--input", "-i", help="NAME=VALUE (repeat per input)."),
    outputs: list[str] = typer.Option([], "--output", "-o", help="Only these outputs (default: all)."),
    model_version: _ModelVersion = "",
    auth: AuthProvider | None = None,  # with_auth_options: from the credential options
    cacert: Path | None = None,
    timeout: float = typer.Option(
        60.0, "--timeout", help="Request timeout in seconds (--stream: for the first and each next piece)."
    ),
    stream: bool = typer.Option(
        False, "--stream", help="Stream the answer of a decoupled model (gRPC streaming or HTTP SSE)."
    ),
    total_timeout: float | None = typer.Option(
        None, "--total-timeout", help="--stream: give up after this many seconds in all."
    ),
    sampling: str | None = typer.Option(
        None,
        "--sampling",
        help="LLM stages: vLLM sampling parameters, a JSON object or a .json file "
        '(\'{"max_tokens": 32, "temperature": 0}\'), sent as sampling_parameters.',
    ),
    retries: int = typer.Option(4, "--retries", help="Retries on 429/502/503/504 and connection errors."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    compose: bool = typer.Option(
        True,
        "--compose/--no-compose",
        help="--stream on an LLM-decoder pipeline (vlm_llm, arr_coc_llm): ask its prompt model, then "
        "stream its LLM stage straight from Triton, as many at once as the engine (--no-compose: its "
        "Python front door answers, one answer per instance). See docs/pipelines.md.",
    ),
) -> None:
    with TritonClient(
        url,
        protocol=protocol,
        auth=auth,
        cacert=cacert,
        request_timeout=timeout,
        retry=RetryPolicy(max_attempts=max(1, retries + 1)),
    ) as client:
        info = client.model_info(model, model_version)
        given = _inputs(info, inputs)
        llm = llm_request(info, given, parse_sampling(sampling) if sampling is not None else None, stream)
        pipeline = (
            composed_pipeline(client.model_config(model, model_version)) if stream and compose else None
        )
        if pipeline is not None:
            composed = open_composed(
                client, pipeline, given, outputs=outputs or None, total_timeout=total_timeout
            )
            _render_stream(composed, as_json)
            return
        if stream:
            responses = client.stream(
                model,
                given,
                model_version=model_version,
                outputs=outputs or None,
                total_timeout=total_timeout,
            )
            (_render_llm_stream if llm else _render_stream)(responses, as_json)
            return
        if info.decoupled:
            message = (
                f"model '{model}' is decoupled (model_transaction_policy): it streams its answer, which "
                "a single inference call cannot receive (Triton answers HTTP 501 / gRPC UNIMPLEMENTED)"
            )
            if llm:
                raise ClientError(
                    message + "; a vLLM stage is always decoupled",
                    hint=f"add --stream: tritonkit infer {url} {model} --stream --input text_input=... "
                    "(add --input stream=false for the whole answer in one response)",
                )
            raise ClientError(message, hint=f"add --stream: tritonkit infer {url} {model} --stream ...")
        result = client.infer(model, given, model_version=model_version, outputs=outputs or None)
    if as_json:
        render.print_json(
            {
                "model": model,
                "url": str(client.endpoint),
                "outputs": {
                    name: {"datatype": str(arr.dtype), "shape": list(arr.shape), "data": _jsonable(arr)}
                    for name, arr in result.items()
                },
            }
        )
        return
    render.table(
        f"{model} @ {client.endpoint}",
        ["output", "dtype", "shape", "values"],
        [(name, arr.dtype, list(arr.shape), _show(arr)) for name, arr in result.items()],
    )
