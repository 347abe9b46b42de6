"""Hostile soak: good and malformed requests mixed, against the served example pipelines.

Serves the example repository (``ensembles/*.yaml``, CPU variants) on a real local tritonserver
and sends, for each pipeline (``vlm_ensemble``, ``arr_coc``, ``densenet_onnx``), protocol (HTTP,
gRPC) and concurrency level, a fixed number of requests with plain tritonclient (no client-side
checks), a share of them malformed:

- image pipelines: random bytes, a truncated PNG and JPEG, zero bytes, a PNG whose header claims
  60000x60000 pixels (a decompression bomb), RAW_IMAGE as FP32 (wrong data type), RAW_IMAGE as
  a 2-D tensor (wrong shape), a 100 000-character query, a query that is not UTF-8;
- densenet_onnx: wrong shape, wrong data type.

The streaming pipelines (``vlm_stream``, ``arr_coc_stream``) are soaked over gRPC streams
(protocol ``grpc-stream``: tritonclient's ``start_stream``/``async_stream_infer``) and HTTP
``generate_stream`` (``sse``: server-sent events read with the standard library): the same
malformed inputs (less those JSON cannot carry) plus MAX_TOKENS 0 and -5; the good streams are
whole answers, answers cut at MAX_TOKENS 8, and clients that vanish after 3 pieces (gRPC
cancel, or the HTTP connection closed). A good stream is right when its pieces joined are the
unary pipeline's answer (for a client that vanished: the start of it); a bad one when it ends
with one error event naming the input and nothing else (SSE: HTTP 400). After each streaming
step the decoders must go idle (their ``tritonkit_generation_active`` gauge back to 0: no
generation left running).

With ``--llm-pipelines`` (default: none; ``vlm_llm,arr_coc_llm,tiny_llm`` takes all) the
LLM-decoder pipelines and their vLLM engine stage are soaked the same way, served from the ``llm``
venv (``make llm-venv``): the pipelines with the streaming pipelines' malformed inputs plus
MAX_TOKENS 500; ``tiny_llm`` itself with sampling_parameters that are not JSON, negative, huge
and unknown ones, an empty prompt, a prompt past max_model_len and text_input as INT32. A good
stream is right when it equals that request's greedy answer asked alone before the soak
(tests/integration/test_vllm_engine.py proves the alone answer equals vLLM's offline
``LLM.generate``); afterwards the front and the engine must both go idle (the engine's gauge too:
on 2.51 a pipeline's engine request finishes its answer after the client left, so it gets time).

With ``--openai-pipelines`` (e.g. ``tiny_llm,vlm_llm``; needs the llm venv) the OpenAI front
(``tritonkit openai``, with an API key) stands before the server and its models are soaked through
it (protocol ``openai``, ``benchmarks/_openai_soak.py``): unary, streamed and vanishing good
requests, and malformed ones (bad JSON, wrong types, unknown model, bad base64, non-image bytes,
huge prompts, no or a wrong key), each refused with a 4xx in OpenAI's error shape; after each
step the front holds no request (``tritonkit_openai_requests_active`` back to 0) and the engine
and pipelines generate nothing.

Stubs: a Python-backend stub whose pid is gone after a step (no model loads or unloads during
one) crashed; target 0. New ``triton_python_b`` segfault lines in the kernel log (``dmesg``, where
readable) are recorded beside it: on a machine of its own that is the same count seen twice; on a
shared host the kernel log holds other tenants' stubs too.

Records per step: good requests answered correctly (the same answer the stages give in-process,
``ensembles/reference.py``; target 100%), bad requests answered 4xx / INVALID_ARGUMENT (target
100%), anything else, whether the server died (target: never; it is restarted to go on), and
the resident memory of tritonserver and its Python-backend stubs before and after. After each
step one good request checks the pipeline still answers (a server can stay up with a wedged
ensemble that never answers again: seen with the old ``arr_coc``); a crashed or wedged server is
restarted for the next step.

Writes ``benchmarks/results/hostile.json`` (with the exact command) and ``hostile.png``.

    .venv/bin/python benchmarks/hostile.py [--concurrency 1,4,16,32] [--requests 200]
        [--bad-share 0.2] [--pipelines vlm_ensemble,arr_coc,densenet_onnx] [--protocols http,grpc]
        [--stream-pipelines vlm_stream,arr_coc_stream] [--stream-protocols grpc-stream,sse]
        [--llm-pipelines vlm_llm,arr_coc_llm,tiny_llm]   # needs the llm venv
        [--repository PATH --name NAME]   # e.g. a repository built from an older spec, to compare
    .venv/bin/python benchmarks/hostile.py --replot benchmarks/results/hostile.json  # redraw only
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import struct
import sys
import tempfile
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import _openai_soak  # noqa: E402
from benchmarks._perf_common import RESULTS, command_line, machine, now, write_result  # noqa: E402
from tests._examples import load_example  # noqa: E402

#: streaming clients tritonkit did not write (loaded once: worker threads share it)
plain = load_example("ensembles/plain_streams.py")

PIPELINES = ("vlm_ensemble", "arr_coc", "densenet_onnx")
STREAM_PIPELINES = ("vlm_stream", "arr_coc_stream")
STREAM_PROTOCOLS = ("grpc-stream", "sse")
#: the LLM-decoder pipelines and their engine stage (served from the llm venv)
LLM_STREAM_PIPELINES = ("vlm_llm", "arr_coc_llm", "tiny_llm")
LLM = "tiny_llm"
#: the models whose activity gauge (tritonkit_generation_active) must return to 0 after a step:
#: the decoupled Python decoders, and for the LLM pipelines their front and the vLLM engine
STREAM_DECODERS = {
    "vlm_stream": ("vlm_stream",),
    "arr_coc_stream": ("arr_coc_stream",),
    "vlm_llm": ("vlm_llm", LLM),
    "arr_coc_llm": ("arr_coc_llm", LLM),
    LLM: (LLM,),
}
#: the streamed output, where it is not GENERATED_TEXT (the vLLM backend's contract)
STREAM_OUTPUTS = {LLM: "text_output"}
#: inputs the streamed models' errors name (a bad request's error must say which input is wrong)
INPUT_NAMES = ("RAW_IMAGE", "TEXT_QUERY", "MAX_TOKENS")
#: malformed inputs a generate_stream JSON body cannot carry: JSON text is always valid UTF-8, and
#: JSON numbers have no data type (the FP32 copy of the image's bytes arrives as the same integers)
NOT_IN_JSON = {"non-UTF-8 query", "RAW_IMAGE as FP32", "text_input as INT32"}
LLM_PROMPT = "The image shows"
#: what the good streams do: whole answers, answers cut at MAX_TOKENS, clients that vanish
STREAM_LIMIT, VANISH_AFTER = 8, 3
VLM_QUERY = "Describe the image."
ARR_QUERY = "Where is the sun?"
#: a request unanswered this long counts as lost (a hung request is as bad as a refused one)
REQUEST_TIMEOUT_S = 30.0
#: every good stream answered wrongly, as it came (list.append is atomic: workers share it)
WRONG_ANSWERS: list[dict[str, Any]] = []


@dataclass(frozen=True)
class Case:
    """One request: its inputs (name -> array), and for good ones the expected outputs."""

    kind: str
    inputs: dict[str, np.ndarray]
    expected: dict[str, np.ndarray] | None  # None: a malformed request, must be refused with 4xx
    stop_after: int | None = None  # streams only: the client vanishes after this many pieces
    says: str | None = None  # bad streams: what the error must say (default: an input's name)


#: pipeline -> (good cases, bad cases)
Cases = dict[str, tuple[list[Case], list[Case]]]


def _text(value: str | bytes) -> np.ndarray:
    return np.array([value if isinstance(value, bytes) else value.encode()], dtype=np.object_)


def bomb_png(width: int = 60_000, height: int = 60_000) -> bytes:
    """A tiny PNG whose header claims width x height pixels (its data is one row of zeros)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\0" * 64))
        + chunk(b"IEND", b"")
    )


def _jpeg(raw: np.ndarray) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.open(io.BytesIO(raw.tobytes())).convert("RGB").save(out, format="JPEG", quality=90)
    return out.getvalue()


def build_cases(seed: int = 0) -> Cases:
    """pipeline -> (good cases, bad cases); expected outputs computed in-process by the stages."""
    reference = load_example("ensembles/reference.py")
    rng = np.random.default_rng(seed)
    raw = reference.sample_bytes()
    jpeg = np.frombuffer(_jpeg(raw), dtype=np.uint8)
    arr = reference.arr_coc(raw, ARR_QUERY)
    pixels = reference.load_stage("vlm/image_preprocessor.py").preprocess(raw)[None]

    def image_bad(query: str) -> list[Case]:
        q = _text(query)
        u8 = lambda b: np.frombuffer(b, dtype=np.uint8)  # noqa: E731
        return [
            Case("random bytes", {"RAW_IMAGE": u8(rng.bytes(512)), "TEXT_QUERY": q}, None),
            Case("truncated PNG", {"RAW_IMAGE": raw[: raw.size // 2], "TEXT_QUERY": q}, None),
            Case("truncated JPEG", {"RAW_IMAGE": jpeg[: jpeg.size // 2], "TEXT_QUERY": q}, None),
            Case("zero bytes", {"RAW_IMAGE": np.zeros(0, np.uint8), "TEXT_QUERY": q}, None),
            Case("60000x60000 PNG header", {"RAW_IMAGE": u8(bomb_png()), "TEXT_QUERY": q}, None),
            Case("RAW_IMAGE as FP32", {"RAW_IMAGE": raw.astype(np.float32), "TEXT_QUERY": q}, None),
            Case("RAW_IMAGE 2-D", {"RAW_IMAGE": raw[:64].reshape(8, 8), "TEXT_QUERY": q}, None),
            Case("100k-character query", {"RAW_IMAGE": raw, "TEXT_QUERY": _text("red " * 25_000)}, None),
            Case("non-UTF-8 query", {"RAW_IMAGE": raw, "TEXT_QUERY": _text(b"\xff\xfe\xfd where?")}, None),
        ]

    vlm_answer = _text(reference.vlm(raw, VLM_QUERY))
    vlm_inputs = {"RAW_IMAGE": raw, "TEXT_QUERY": _text(VLM_QUERY)}
    vlm_good = Case("good", vlm_inputs, {"GENERATED_TEXT": vlm_answer})
    arr_good = Case(
        "good",
        {"RAW_IMAGE": raw, "TEXT_QUERY": _text(ARR_QUERY)},
        {
            "GENERATED_TEXT": _text(arr["GENERATED_TEXT"]),
            "RELEVANCE_MAP": arr["RELEVANCE_MAP"],
            "TOKEN_BUDGET": arr["TOKEN_BUDGET"],
        },
    )
    densenet_good = Case("good", {"data_0": pixels}, {"fc6_1": reference.densenet(pixels)})
    densenet_bad = [
        Case("wrong shape", {"data_0": pixels[:, :, :100, :100].copy()}, None),
        Case("wrong data type", {"data_0": pixels.astype(np.float64)}, None),
    ]
    word_pieces = reference.load_stage("common/text_stream.py").word_pieces

    def stream_cases(query: str, answer: str) -> tuple[list[Case], list[Case]]:
        pieces = list(word_pieces([answer]))
        inputs = {"RAW_IMAGE": raw, "TEXT_QUERY": _text(query)}
        limited = {**inputs, "MAX_TOKENS": np.array([STREAM_LIMIT], np.int32)}
        good = [
            Case("good", inputs, {"GENERATED_TEXT": _text(answer)}),
            Case("good MAX_TOKENS", limited, {"GENERATED_TEXT": _text("".join(pieces[:STREAM_LIMIT]))}),
            Case("vanishes", inputs, {"GENERATED_TEXT": _text(answer)}, VANISH_AFTER),
        ]
        bad = image_bad(query) + [
            Case("MAX_TOKENS 0", {**inputs, "MAX_TOKENS": np.array([0], np.int32)}, None),
            Case("MAX_TOKENS -5", {**inputs, "MAX_TOKENS": np.array([-5], np.int32)}, None),
        ]
        return good, bad

    return {
        "vlm_ensemble": ([vlm_good], image_bad(VLM_QUERY)),
        "arr_coc": ([arr_good], image_bad(ARR_QUERY)),
        "densenet_onnx": ([densenet_good], densenet_bad),
        "vlm_stream": stream_cases(VLM_QUERY, reference.vlm(raw, VLM_QUERY)),
        "arr_coc_stream": stream_cases(ARR_QUERY, arr["GENERATED_TEXT"]),
    }


def _llm_stage_cases() -> tuple[list[Case], list[Case]]:
    """The vLLM stage's own requests (greedy, streamed); good ones without an expected answer yet."""

    def request(prompt: str, params: str) -> dict[str, np.ndarray]:
        return {"text_input": _text(prompt), "stream": np.array([True]), "sampling_parameters": _text(params)}

    greedy = '{"temperature": 0, "max_tokens": 16}'
    good = [
        Case("good", request(LLM_PROMPT, greedy), None),
        Case("good max_tokens 8", request(LLM_PROMPT, '{"temperature": 0, "max_tokens": 8}'), None),
        Case("vanishes", request(LLM_PROMPT, greedy), None, VANISH_AFTER),
    ]
    refused = {  # kind -> (prompt, sampling_parameters, what its error must say)
        "sampling_parameters not JSON": (LLM_PROMPT, "not json", "not valid JSON"),
        "negative max_tokens": (LLM_PROMPT, '{"max_tokens": -1}', "max_tokens must be"),
        "huge max_tokens": (LLM_PROMPT, '{"max_tokens": 10000000000000}', "max_tokens"),
        "unknown sampling key": (LLM_PROMPT, '{"bogus": 1}', "unknown sampling parameter"),
        "empty prompt": ("   ", greedy, "text_input is empty"),
        "prompt past max_model_len": ("word " * 3000, greedy, "maximum context length"),
    }
    bad = [
        Case(kind, request(text, params), None, says=said) for kind, (text, params, said) in refused.items()
    ]
    as_int = {**request("7", greedy), "text_input": np.array([7], dtype=np.int32)}
    bad.append(Case("text_input as INT32", as_int, None, says="text_input"))
    return good, bad


def llm_cases(server: Any, cases: Cases) -> Cases:
    """The LLM-decoder pipelines and their vLLM stage, each good request's answer asked alone first.

    The pipelines take the streaming pipelines' inputs, so their bad cases are those plus a
    MAX_TOKENS past the pipeline's limit; greedy decoding makes the alone answer the only right one.
    """
    out: Cases = {}
    for model, like in (("vlm_llm", "vlm_stream"), ("arr_coc_llm", "arr_coc_stream")):
        good, bad = cases[like]
        too_many = {**good[0].inputs, "MAX_TOKENS": np.array([500], np.int32)}
        fresh = [Case(c.kind, c.inputs, None, c.stop_after) for c in good]
        out[model] = (fresh, [*bad, Case("MAX_TOKENS 500", too_many, None)])
    out[LLM] = _llm_stage_cases()
    client = _client(server, "grpc")[0]
    try:
        for model, (good, bad) in out.items():
            output = STREAM_OUTPUTS.get(model, "GENERATED_TEXT")
            answered = []
            for case in good:
                alone = plain.stream_grpc(client, model, case.inputs, output=output)
                if alone.error is not None or not alone.final:
                    raise RuntimeError(f"{model} did not answer a good request alone: {alone.error}")
                expected = {output: _text(alone.text)}
                answered.append(Case(case.kind, case.inputs, expected, case.stop_after))
            out[model] = (answered, bad)
    finally:
        client.close()
    return out


def _same(got: np.ndarray, expected: np.ndarray) -> bool:
    if got.shape != expected.shape:
        return False
    if expected.dtype == np.object_:
        return [bytes(v) for v in got.ravel()] == [bytes(v) for v in expected.ravel()]
    if np.issubdtype(expected.dtype, np.integer):
        return bool(np.array_equal(got, expected))
    return bool(np.allclose(got, expected, rtol=1e-4, atol=1e-5))


def _client(server: Any, protocol: str) -> tuple[Any, Any]:
    if protocol == "http":
        import tritonclient.http as module

        return module.InferenceServerClient(
            server.http_address, connection_timeout=10.0, network_timeout=REQUEST_TIMEOUT_S
        ), module
    import tritonclient.grpc as module

    return module.InferenceServerClient(server.grpc_address), module


def _send(client: Any, module: Any, model: str, case: Case) -> tuple[str, bool]:
    """(outcome, answered correctly); outcome is 'ok', the 4xx family, or what else happened."""
    from tritonclient.utils import InferenceServerException, np_to_triton_dtype

    tensors = []
    for name, value in case.inputs.items():
        tensor = module.InferInput(name, list(value.shape), np_to_triton_dtype(value.dtype))
        tensor.set_data_from_numpy(value)
        tensors.append(tensor)
    outputs = [module.InferRequestedOutput(n) for n in case.expected] if case.expected else None
    try:
        if module.__name__.endswith("grpc"):
            result = client.infer(model, tensors, outputs=outputs, client_timeout=REQUEST_TIMEOUT_S)
        else:
            result = client.infer(model, tensors, outputs=outputs)
    except InferenceServerException as exc:
        status = str(exc.status())
        if status == "StatusCode.DEADLINE_EXCEEDED":
            return f"no answer within {REQUEST_TIMEOUT_S:g}s", False
        if status.startswith("4") or status == "StatusCode.INVALID_ARGUMENT":
            return "4xx", False
        return f"refused {status}", False
    except Exception as exc:  # the connection broke (a server crash shows up here)
        return f"no answer ({type(exc).__name__})", False
    if case.expected is None:
        return "ok", False
    return "ok", all(_same(result.as_numpy(n), v) for n, v in case.expected.items())


def _send_stream(client: Any, server: Any, protocol: str, model: str, case: Case) -> tuple[str, bool]:
    """Like ``_send``, for one streamed request over a gRPC stream or generate_stream (SSE)."""
    inputs = case.inputs
    output = STREAM_OUTPUTS.get(model, "GENERATED_TEXT")
    options = {"stop_after": case.stop_after, "output": output}
    try:
        if protocol == "sse":
            stream = plain.stream_sse(server.http_address, model, inputs, **options)
        else:
            stream = plain.stream_grpc(client, model, inputs, **options)
    except Exception as exc:  # the connection broke (a server crash shows up here)
        return f"no answer ({type(exc).__name__})", False
    if stream.error is not None:
        says = (case.says,) if case.says else INPUT_NAMES
        names_input = any(text in stream.error for text in says)
        # one error event and nothing else; gRPC stream errors carry a message but no status code
        clean = names_input and not stream.pieces and stream.events == 1 and stream.status in (None, "400")
        if clean:
            return "4xx", False
        return f"error after {len(stream.pieces)} pieces (HTTP {stream.status}): {stream.error[:80]}", False
    if case.expected is None:
        return "ok", False
    expected = bytes(case.expected[output].ravel()[0]).decode()
    if case.stop_after is not None and not stream.final:
        # a client that left: what it read must begin the answer. Not the same pieces: a vLLM
        # engine merges the tokens of a stream whose reader lags into one response (vLLM's
        # output collector; NVIDIA's backend sends what it gets, as tritonkit's does)
        right = len(stream.pieces) >= case.stop_after and expected.startswith(stream.text)
    else:
        right = stream.final and stream.text == expected
    if not right:  # kept whole, so a failed soak says how the answer was wrong
        WRONG_ANSWERS.append(
            {"model": model, "protocol": protocol, "kind": case.kind, "final": stream.final,
             "pieces": len(stream.pieces), "got": stream.text, "expected": expected}
        )  # fmt: skip
    return "ok", right


def _decoders_active(server: Any, model: str) -> float | None:
    """Streams the pipeline's decoders are still generating (their tritonkit_generation_active gauges)."""
    decoders = STREAM_DECODERS.get(model)
    if decoders is None:
        return None
    # vanished clients' decoders finish their answer first (an LLM pipeline's engine request, on 2.51)
    deadline = time.monotonic() + (60.0 if LLM in decoders else 10.0)
    while True:
        try:
            counters = plain.decoder_counters(server.metrics_url)
            active = sum(counters.get(("tritonkit_generation_active", d), 0.0) for d in decoders)
        except OSError:
            return None
        if active == 0 or time.monotonic() > deadline:
            return active
        time.sleep(0.1)


Send = Callable[[Case], tuple[str, bool]]


def _sender(server: Any, protocol: str, model: str, front: Any = None) -> tuple[Send, Callable[[], None]]:
    """(send one case, close) for one worker: a client of its own for ``protocol``."""
    if protocol == _openai_soak.PROTOCOL:
        return _openai_soak.sender(front.url)  # type: ignore[no-any-return]
    if protocol in STREAM_PROTOCOLS:
        client = _client(server, "grpc")[0] if protocol == "grpc-stream" else None
        return (
            lambda case: _send_stream(client, server, protocol, model, case),
            client.close if client is not None else lambda: None,
        )
    client, module = _client(server, protocol)
    return (lambda case: _send(client, module, model, case)), client.close


def rss_mib(server: Any) -> float | None:
    """Resident memory of tritonserver and its process group (the Python-backend stubs), MiB."""
    pid = server.pid
    if pid is None:
        return None
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getpgid(int(entry.name)) != pid:
                continue
            for line in (entry / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except (OSError, ValueError):
            continue
    return round(total / 1024, 1)


def stub_pids(server: Any) -> set[int]:
    """The Python-backend stubs of tritonserver (its process group), by pid. During a step no
    model loads or unloads, so a pid that is gone after it is a stub that died (Triton starts a
    new one for an unhealthy stub: the new pid hides the crash from every other count)."""
    pid = server.pid
    if pid is None:
        return set()
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getpgid(int(entry.name)) == pid and "triton_python_backend_stub" in (
                (entry / "cmdline").read_bytes().decode(errors="replace")
            ):
                found.add(int(entry.name))
        except (OSError, ValueError):
            continue
    return found


def stub_segfaults() -> frozenset[str] | None:
    """Segfault lines of Python-backend stubs in the kernel log now (its comm is cut to 15
    characters: ``triton_python_b``), each with its timestamp; None where the kernel log cannot
    be read (no CAP_SYSLOG). A step's new ones are the lines not there before it: a count would
    go negative when the ring buffer drops old lines, as it did once on a busy CI host."""
    import subprocess

    try:
        out = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    lines = out.stdout.splitlines()
    return frozenset(line for line in lines if "triton_python_b" in line and "segfault" in line)


def run_step(
    server: Any,
    model: str,
    protocol: str,
    concurrency: int,
    requests: int,
    bad_share: float,
    cases: tuple[list[Case], list[Case]],
    seed: int,
    deadline_s: float = 120.0,
    front: Any = None,
) -> dict[str, Any]:
    """``requests`` requests (every 1/bad_share-th is malformed, bad kinds in turn) at ``concurrency``.

    No new request starts after ``deadline_s`` (a wedged pipeline answers nothing; each request
    then waits REQUEST_TIMEOUT_S). Afterwards one good request checks the pipeline still answers.
    """
    good, bad = cases
    every = max(1, round(1 / bad_share)) if bad_share > 0 else 0
    plan = [
        bad[(i // every) % len(bad)] if every and i % every == every - 1 else good[i % len(good)]
        for i in range(requests)
    ]
    np.random.default_rng(seed).shuffle(plan)  # type: ignore[arg-type]
    lock = threading.Lock()
    tally: Counter[str] = Counter()
    bad_kinds: Counter[str] = Counter()
    todo = iter(plan)
    rss_before = rss_mib(server)
    stubs_before = stub_pids(server)
    segfaults_before = stub_segfaults()
    wrong_before = len(WRONG_ANSWERS)
    start = time.monotonic()

    def worker() -> None:
        send, close = _sender(server, protocol, model, front)
        try:
            while time.monotonic() - start < deadline_s:
                with lock:
                    case = next(todo, None)
                if case is None:
                    return
                outcome, correct = send(case)
                with lock:
                    if case.expected is not None:
                        tally["good"] += 1
                        failed = "wrong" if outcome == "ok" else outcome
                        tally["good correct" if correct else f"good {failed}"] += 1
                    else:
                        tally["bad"] += 1
                        tally["bad 4xx" if outcome == "4xx" else f"bad {outcome}"] += 1
                        if outcome != "4xx":
                            bad_kinds[f"{case.kind}: {outcome}"] += 1
        finally:
            close()

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.monotonic() - start
    time.sleep(0.3)
    alive = server.running
    stubs_gone = sorted(stubs_before - stub_pids(server)) if alive else []
    segfaults_after = stub_segfaults()
    known = segfaults_before is not None and segfaults_after is not None
    kernel_segfaults = len(segfaults_after - segfaults_before) if known else None
    active = _decoders_active(server, model) if alive else None
    through_front = protocol == _openai_soak.PROTOCOL
    front_left = _openai_soak.front_active(front.url) if through_front and alive else None
    # a server can stay up with a wedged pipeline: one good request must still be answered
    if alive:
        send, close = _sender(server, protocol, model, front)
        answers = send(good[0]) == ("ok", True)
        close()
    else:
        answers = False
    return {
        "model": model,
        "protocol": protocol,
        "concurrency": concurrency,
        "requests": requests,
        "seconds": round(seconds, 2),
        "good": tally["good"],
        "good_correct": tally["good correct"],
        "bad": tally["bad"],
        "bad_4xx": tally["bad 4xx"],
        "other": {k: v for k, v in tally.items() if k not in ("good", "bad", "good correct", "bad 4xx")},
        "bad_not_4xx": dict(bad_kinds),
        "wrong_answers": WRONG_ANSWERS[wrong_before:],
        "not_sent": requests - tally["good"] - tally["bad"],
        "server_crashed": not alive,
        "stubs_crashed": len(stubs_gone),
        "stub_segfaults_in_kernel_log": kernel_segfaults,
        "pipeline_wedged": alive and not answers,
        "decoders_active_after": active,
        "front_requests_active_after": front_left,
        "rss_mib_before": rss_before,
        "rss_mib_after": rss_mib(server) if alive else None,
    }


def soak(
    server: Any,
    *,
    pipelines: tuple[str, ...] = PIPELINES,
    protocols: tuple[str, ...] = ("http", "grpc"),
    stream_pipelines: tuple[str, ...] = STREAM_PIPELINES,
    stream_protocols: tuple[str, ...] = STREAM_PROTOCOLS,
    concurrency: tuple[int, ...] = (1, 4, 16, 32),
    requests: int = 200,
    stream_requests: int | None = None,
    repeat: int = 1,
    bad_share: float = 0.2,
    seed: int = 0,
    restart: Callable[[], None] | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
    openai_pipelines: tuple[str, ...] = (),
    front: Any = None,
) -> dict[str, Any]:
    """Every (pipeline, protocol, concurrency) step in turn; a crashed server is restarted if it can be.

    ``stream_requests`` (default: ``requests``) is the number of requests per streaming step;
    ``repeat`` runs each step that many times in a row (memory must level off, not keep growing).
    ``openai_pipelines`` are soaked through ``front`` (a running ``FrontServer`` before ``server``).
    """
    cases = build_cases(seed) if pipelines or stream_pipelines else {}
    if any(model in LLM_STREAM_PIPELINES for model in stream_pipelines):
        cases.update(llm_cases(server, cases))
    rss_start = rss_mib(server)
    steps = []
    plan = [(m, p) for m in pipelines for p in protocols] + [
        (m, p) for m in stream_pipelines for p in stream_protocols
    ]
    front_cases: dict[str, tuple[list[Any], list[Any]]] = {}
    for model in openai_pipelines:
        good, bad = _openai_soak.front_cases(model)
        front_cases[model] = (_openai_soak.with_answers(front.url, good), bad)
        plan.append((model, _openai_soak.PROTOCOL))
    for model, protocol in plan:
        good, bad = front_cases[model] if protocol == _openai_soak.PROTOCOL else cases[model]
        if protocol == "sse":
            bad = [case for case in bad if case.kind not in NOT_IN_JSON]
        streamed = (*STREAM_PROTOCOLS, _openai_soak.PROTOCOL)
        count = stream_requests if stream_requests is not None and protocol in streamed else requests
        for level in (c for c in concurrency for _ in range(repeat)):
            step = run_step(server, model, protocol, level, count, bad_share, (good, bad), seed, front=front)
            steps.append(step)
            if progress is not None:
                progress(step)
            if step["server_crashed"] or step["pipeline_wedged"]:
                if restart is None:
                    return _summary(steps, rss_start, None)
                restart()
    return _summary(steps, rss_start, rss_mib(server))


def _summary(steps: list[dict[str, Any]], rss_start: float | None, rss_end: float | None) -> dict[str, Any]:
    good = sum(s["good"] for s in steps)
    bad = sum(s["bad"] for s in steps)
    return {
        "server_crashes": sum(s["server_crashed"] for s in steps),
        "stubs_crashed": sum(s["stubs_crashed"] for s in steps),
        # None: the kernel log was not readable here (the stubs' pids still count every crash)
        "stub_segfaults_in_kernel_log": (
            None
            if any(s["stub_segfaults_in_kernel_log"] is None for s in steps)
            else sum(s["stub_segfaults_in_kernel_log"] for s in steps)
        ),
        "pipelines_wedged": sum(s["pipeline_wedged"] for s in steps),
        "good_requests": good,
        "good_correct_pct": round(100 * sum(s["good_correct"] for s in steps) / good, 2) if good else None,
        "bad_requests": bad,
        "bad_4xx_pct": round(100 * sum(s["bad_4xx"] for s in steps) / bad, 2) if bad else None,
        "streams_left_generating": sum(s.get("decoders_active_after") or 0 for s in steps),
        "front_requests_left": sum(s.get("front_requests_active_after") or 0 for s in steps),
        "rss_mib_start": rss_start,
        "rss_mib_end": rss_end,
        "steps": steps,
    }


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = result["steps"]
    series = sorted({(s["model"], s["protocol"]) for s in steps})
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for model, protocol in series:
        mine = [s for s in steps if s["model"] == model and s["protocol"] == protocol]
        levels = [s["concurrency"] for s in mine]
        label = f"{model} {protocol}"
        style = {"http": "-", "grpc": "--", "grpc-stream": ":", "sse": "-."}.get(protocol, "-")
        nan = float("nan")  # no point: no such requests, or no server to measure
        good = [100 * s["good_correct"] / s["good"] if s["good"] else nan for s in mine]
        refused = [100 * s["bad_4xx"] / s["bad"] if s["bad"] else nan for s in mine]
        rss = [s["rss_mib_after"] if s["rss_mib_after"] is not None else nan for s in mine]
        for ax, values in zip(axes, (good, refused, rss), strict=True):
            (line,) = ax.plot(levels, values, style, marker="o", label=label)
        down = [(s["concurrency"], r) for s, r in zip(mine, refused, strict=True) if s["server_crashed"]]
        stuck = [(s["concurrency"], r) for s, r in zip(mine, refused, strict=True) if s["pipeline_wedged"]]
        for points, marker in ((down, "X"), (stuck, "s")):
            if points:
                xs, ys = zip(*points, strict=True)
                axes[1].scatter(xs, ys, marker=marker, s=90, color=line.get_color(), zorder=3)
    for ax, title in zip(
        axes,
        ("good answered correctly (%)", "bad answered 4xx (%)", "RSS of server + stubs after step (MiB)"),
        strict=True,
    ):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrency")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].set_ylim(-5, 105)
    axes[1].set_ylim(-5, 105)
    axes[2].legend(fontsize=7)
    good_pct = "n/a" if result["good_correct_pct"] is None else f"{result['good_correct_pct']}%"
    fig.suptitle(
        f"hostile soak: {result['server_crashes']} server crash(es) (X), {result['pipelines_wedged']} "
        f"wedged (square), {good_pct} good correct, {result['bad_4xx_pct']}% bad -> 4xx",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--concurrency", default="1,4,16,32")
    parser.add_argument("--requests", type=int, default=200, help="requests per step")
    parser.add_argument("--bad-share", type=float, default=0.2)
    parser.add_argument("--repeat", type=int, default=1, help="run each step this many times in a row")
    parser.add_argument("--pipelines", default=",".join(PIPELINES), help="'' for none")
    parser.add_argument("--protocols", default="http,grpc")
    parser.add_argument("--stream-pipelines", default=",".join(STREAM_PIPELINES), help="'' for none")
    parser.add_argument("--stream-protocols", default=",".join(STREAM_PROTOCOLS))
    parser.add_argument(
        "--llm-pipelines", default="", help=f"'{','.join(LLM_STREAM_PIPELINES)}' for all (needs the llm venv)"
    )
    parser.add_argument(
        "--openai-pipelines",
        default="",
        help="'tiny_llm,vlm_llm': soaked through the OpenAI front (llm venv)",
    )
    parser.add_argument("--name", default="hostile", help="result file name under benchmarks/results/")
    parser.add_argument(
        "--repository", type=Path, help="serve this repository instead of building ensembles/*.yaml"
    )
    parser.add_argument("--replot", type=Path, help="only redraw the plot of a result JSON")
    args = parser.parse_args()
    if args.replot is not None:
        plot(json.loads(args.replot.read_text()), args.replot.with_suffix(".png"))
        return

    from tritonkit.repository import build_spec
    from tritonkit.server import LocalTritonServer

    llm_pipelines = tuple(p for p in args.llm_pipelines.split(",") if p)
    openai_pipelines = tuple(p for p in args.openai_pipelines.split(",") if p)
    with tempfile.TemporaryDirectory() as tmp:
        repo = args.repository or Path(tmp) / "model_repository"
        if args.repository is None:
            # the streaming specs build on the unary ones: they come last
            for spec in ("densenet", "vlm", "arr_coc", "vlm_stream", "arr_coc_stream"):
                build_spec(ROOT / "ensembles" / f"{spec}.yaml", repo)
            if llm_pipelines or openai_pipelines:
                load_example("ensembles/demo.py").build_llm_repository(repo, quiet=True)
        with contextlib.ExitStack() as stack:
            server = stack.enter_context(LocalTritonServer(repo, startup_timeout=900))
            front = None
            if openai_pipelines:
                from tritonkit.openai_front import ApiKeys, FrontServer, FrontSettings

                keys = ApiKeys([_openai_soak.KEY])
                settings = FrontSettings(triton_url=server.grpc_url, repository=repo, api_keys=keys)
                front = stack.enter_context(FrontServer(settings))
            started = now()
            result = soak(
                server,
                pipelines=tuple(p for p in args.pipelines.split(",") if p),
                protocols=tuple(args.protocols.split(",")),
                stream_pipelines=tuple(p for p in args.stream_pipelines.split(",") if p) + llm_pipelines,
                stream_protocols=tuple(args.stream_protocols.split(",")),
                concurrency=tuple(int(c) for c in args.concurrency.split(",")),
                requests=args.requests,
                bad_share=args.bad_share,
                repeat=args.repeat,
                restart=server.restart,
                openai_pipelines=openai_pipelines,
                front=front,
                progress=lambda s: print(  # noqa: T201 - a script's progress line
                    f"{s['model']:14} {s['protocol']:4} c={s['concurrency']:<3} {s['seconds']:6.1f}s "
                    f"good {s['good_correct']}/{s['good']}  bad->4xx {s['bad_4xx']}/{s['bad']}  "
                    f"crashed={s['server_crashed']} stubs={s['stubs_crashed']} "
                    f"segv={s['stub_segfaults_in_kernel_log']} wedged={s['pipeline_wedged']}  "
                    f"rss {s['rss_mib_before']}->{s['rss_mib_after']} MiB"
                    + (f"  other {s['other']}" if s["other"] else ""),
                    flush=True,
                ),
            )
    data = {
        "benchmark": "hostile",
        "command": command_line(),
        "started": started,
        "machine": machine(),
        "settings": {
            "concurrency": args.concurrency,
            "requests_per_step": args.requests,
            "bad_share": args.bad_share,
            "repeat": args.repeat,
            "stream_pipelines": args.stream_pipelines,
            "stream_protocols": args.stream_protocols,
            "llm_pipelines": args.llm_pipelines,
            "openai_pipelines": args.openai_pipelines,
            "triton": "2.51 (nvidia-pytriton wheel), CPU variants",
            "repository": str(args.repository) if args.repository else "ensembles/*.yaml, built fresh",
        },
        "targets": {
            "server_crashes": 0,
            "stubs_crashed": 0,
            "stub_segfaults_in_kernel_log": 0,
            "pipelines_wedged": 0,
            "good_correct_pct": 100,
            "bad_4xx_pct": 100,
            "streams_left_generating": 0,
            "front_requests_left": 0,
        },
        **result,
    }
    path = write_result(args.name, data)
    plot(data, RESULTS / f"{args.name}.png")
    print(f"wrote {path} and {RESULTS / (args.name + '.png')}")  # noqa: T201


if __name__ == "__main__":
    main()
