"""How many answers an LLM-decoder pipeline streams at once, against what its parts allow.

Builds ``vlm.yaml``, ``arr_coc.yaml``, ``benchmarks/clock_tiny_llm.yaml`` (a stand-in for the vLLM
stage that answers by the clock, so the engine side streams any number of answers at once) and the
pipelines ``vlm_llm`` / ``arr_coc_llm`` over it; serves them on a real local tritonserver with the
OpenAI front (which composes the pipelines: ``client/composed.py``) and a second front that does
not (``--no-compose-pipelines``: the pipeline's Python front door answers, the "before"), and
measures at each concurrency, for a fixed window, with clients that re-send as soon as an answer
ends:

- ``prompt``: the prompt ensemble alone (``<pipeline>_prompt``, unary gRPC): prompts/s, p50;
- ``stage``: the stage alone (``tiny_llm``, gRPC stream, the pipeline's prompt): tokens/s, TTFT;
- ``grpc_front_door``: plain gRPC streams on the pipeline's name (its Python front door: one answer
  per instance on Triton 2.51);
- ``grpc_composed``: tritonkit's client composing the pipeline (``stream_composed``: the documented
  uncapped path for gRPC callers);
- ``front``: a streamed chat with the image as a data: URL through the composing front;
- ``front_front_door``: the same through the front that does not compose (at 8 and 32 only).

Tokens are counted as occurrences of the clock's piece text in the raw bytes (no parsing); TTFT
is the time from the request to the first token. Then the resident memory of every process of
the server side (tritonserver, each Python stub, each front). Verdicts (issue #52): at 32 and 128,
each pipeline path streams >= 0.9x min(stage tokens/s, prompts/s x tokens per answer), and its
TTFT p50 <= prompt p50 + stage TTFT p50 + 10 ms.

    .venv/bin/python benchmarks/pipeline_concurrency.py [--concurrency 8,32,128] [--window 6]
    .venv/bin/python benchmarks/pipeline_concurrency.py --stage engine --concurrency 8,32 \
        --window 20 --name pipeline_concurrency_engine

``--stage engine`` puts the real CPU vLLM engine (``ensembles/tiny_llm.yaml``, ``make llm-venv``)
behind the same pipelines: every answer is made 32 tokens long (``min_tokens``) and tokens are
counted per answer that ends in the window, since an engine's pieces do not hold one token each.

Writes ``benchmarks/results/pipeline_concurrency.{json,png}``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._front_load import (  # noqa: E402
    NEEDLE,
    Window,
    _percentile,
)
from benchmarks._front_load import _direct_client as _stream_client  # noqa: E402
from benchmarks._front_load import _front_client as _http_client  # noqa: E402
from benchmarks._perf_common import RESULTS, command_line, machine, now, write_result  # noqa: E402

SAMPLE = ROOT / "ensembles" / "assets" / "sample.png"
QUESTIONS = {"vlm_llm": "Describe the image.", "arr_coc_llm": "Where is the sun?"}
PIECES = 32
STAGES = {
    "clock": "benchmarks/clock_tiny_llm.yaml (20 ms, then 10 ms a piece)",
    "engine": "ensembles/tiny_llm.yaml (vLLM's CPU engine, max_num_seqs 16; min_tokens = max_tokens)",
}
#: set by --stage engine: the real CPU vLLM engine answers; every answer is made PIECES tokens long
#: (min_tokens), counted per answer ended in the window, since an engine's pieces are not one
#: token each (vLLM merges a lagging reader's); a piece is then a response or event with text
ENGINE = False
#: what marks a piece of text in each path's raw bytes, on the engine (the clock's: NEEDLE)
ENGINE_NEEDLES = {"stage": b"text_output", "grpc_front_door": b"GENERATED_TEXT",
                  "front": b'"delta":{"content":', "front_front_door": b'"delta":{"content":'}  # fmt: skip


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _build(repo: Path, cancelled: Path) -> None:
    from tritonkit.repository import build_spec

    stage = STAGES["engine" if ENGINE else "clock"].split()[0]
    for spec in ("ensembles/vlm.yaml", "ensembles/arr_coc.yaml", stage,
                 "ensembles/vlm_llm.yaml", "ensembles/arr_coc_llm.yaml"):  # fmt: skip
        build_spec(ROOT / spec, repo, force=True)
    if ENGINE:
        return
    # the stage writes a line for each request Triton cancelled: the pieces it had sent
    config = repo / "tiny_llm" / "config.pbtxt"
    config.write_text(
        config.read_text()
        + f'parameters {{\n  key: "CANCELLED_LOG"\n  value {{\n    string_value: "{cancelled}"\n  }}\n}}\n'
    )


def cancellations(port: int, cancelled: Path, trials: int) -> dict[str, Any]:
    """Clients that leave a composed answer after 3 pieces: how many more pieces the stage sent
    before Triton told it (its own count), each trial alone."""
    import socket

    extra: list[int] = []
    for _ in range(trials):
        before = len(cancelled.read_text().split()) if cancelled.exists() else 0
        payload = _chat_payload(port, "vlm_llm", max_tokens=128)
        got = b""
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(payload)
            while got.count(NEEDLE) < 3:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                got += chunk
            seen = got.count(NEEDLE)
        end = time.monotonic() + 30
        while time.monotonic() < end:
            lines = cancelled.read_text().split() if cancelled.exists() else []
            if len(lines) > before:
                extra.append(int(lines[-1]) - seen)
                break
            time.sleep(0.05)
    return {
        "trials": trials,
        "cancelled_in_stage": len(extra),
        "pieces_after_leaving": extra,
        "within_2": sum(1 for e in extra if e <= 2),
    }


def _wait_http(url: str, deadline_s: float = 600.0) -> None:
    import urllib.request

    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(url, timeout=5) as r:  # noqa: S310 - loopback
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{url} never answered 200")


def _tree(pid: int) -> list[int]:
    out = [pid]
    for child in (
        Path(f"/proc/{pid}/task/{pid}/children").read_text().split() if Path(f"/proc/{pid}").exists() else []
    ):
        out += _tree(int(child))
    return out


def _rss(pid: int) -> tuple[str, float]:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "", 0.0
    kb = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
    name = Path(cmd[0].decode()).name if cmd and cmd[0] else "?"
    if "stub" in name and len(cmd) > 1:
        name = f"stub {Path(cmd[1].decode()).parent.parent.name}"
    elif "python" in name:
        name = "python " + " ".join(c.decode() for c in cmd[1:4])
    return name, kb / 1024.0


def memory(pids: list[int]) -> dict[str, Any]:
    rows = [_rss(p) for root in pids for p in _tree(root)]
    rows = [(n, mb) for n, mb in rows if n]
    by: dict[str, list[float]] = {}
    for name, mb in rows:
        by.setdefault(name, []).append(mb)
    return {
        "total_mb": round(sum(mb for _, mb in rows), 1),
        "processes": len(rows),
        "by_kind": {k: {"count": len(v), "mb": round(sum(v), 1)} for k, v in sorted(by.items())},
    }


# -- load --------------------------------------------------------------------------------------


def _grpc_request(model: str, inputs: dict[str, np.ndarray], outputs: tuple[str, ...] = ()) -> Any:
    from tritonkit.client._inputs import PreparedInput
    from tritonkit.client._stream_grpc import grpc_request

    kinds = {np.dtype(np.object_): "BYTES", np.dtype(np.bool_): "BOOL", np.dtype(np.uint8): "UINT8",
             np.dtype(np.int32): "INT32"}  # fmt: skip
    prepared = [PreparedInput(k, kinds[v.dtype], v) for k, v in inputs.items()]
    return grpc_request(model, prepared, outputs=outputs)


def _pipeline_inputs(model: str) -> dict[str, np.ndarray]:
    return {
        "RAW_IMAGE": np.frombuffer(SAMPLE.read_bytes(), dtype=np.uint8),
        "TEXT_QUERY": np.array([QUESTIONS[model].encode()], dtype=np.object_),
        "MAX_TOKENS": np.array([PIECES], dtype=np.int32),
        **({"SAMPLING_PARAMETERS": np.array([json.dumps({"min_tokens": PIECES}).encode()], dtype=np.object_)}
           if ENGINE else {}),
    }  # fmt: skip


async def _unary_client(call: Any, request: Any, w: Window, stop: float) -> None:
    while time.monotonic() < stop:
        t0 = time.monotonic()
        try:
            await call(request)
        except Exception as exc:  # noqa: BLE001
            w.errors.append(str(exc)[:200])
            await asyncio.sleep(0.05)
            continue
        t1 = time.monotonic()
        if w.inside(t0):
            w.requests += 1
            w.ttft.append(t1 - t0)


async def _composed_client(client: Any, pipeline: Any, inputs: Any, w: Window, stop: float) -> None:
    from tritonkit.client.composed import stream_composed

    while time.monotonic() < stop:
        t0, first = time.monotonic(), True
        try:
            async for response in stream_composed(client, pipeline, inputs, outputs=["GENERATED_TEXT"]):
                text = response.text("GENERATED_TEXT")
                first = w.got(t0, bool(text) if ENGINE else text.count("tick"), first)
        except Exception as exc:  # noqa: BLE001
            w.errors.append(f"{type(exc).__name__}: {exc}"[:200])
            await asyncio.sleep(0.05)
            continue
        w.done(t0)


def _chat_payload(port: int, model: str, max_tokens: int = PIECES) -> bytes:
    image = base64.b64encode(SAMPLE.read_bytes()).decode()
    body = json.dumps({
        "model": model, "stream": True, "max_tokens": max_tokens,
        **({"min_tokens": max_tokens} if ENGINE else {}),
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": QUESTIONS[model]},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{image}"}},
        ]}],
    }).encode()  # fmt: skip
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _window(
    mode: str, model: str, conc: int, ports: dict[str, int], warmup: float, span: float
) -> Window:
    import grpc

    from tritonkit.client import AsyncTritonClient
    from tritonkit.client._llm import llm_inputs
    from tritonkit.llm_pipeline import composed_pipeline

    begin = time.monotonic()
    w = Window(begin + warmup, begin + warmup + span, per_answer=PIECES if ENGINE else 0)
    needle = ENGINE_NEEDLES.get(mode, NEEDLE) if ENGINE else NEEDLE
    address = f"127.0.0.1:{ports['grpc']}"
    async with grpc.aio.insecure_channel(address) as channel:
        service = "/inference.GRPCInferenceService/"
        stream = channel.unary_stream(f"{service}ModelStreamInfer", request_serializer=_serialize)
        unary = channel.unary_unary(f"{service}ModelInfer", request_serializer=_serialize)
        inputs = _pipeline_inputs(model)
        if mode == "prompt":
            request = _grpc_request(f"{model}_prompt", {k: inputs[k] for k in ("RAW_IMAGE", "TEXT_QUERY")})
            jobs = [_unary_client(unary, request, w, w.end) for _ in range(conc)]
        elif mode == "stage":
            prompt = PROMPTS[model]
            sampling = {"temperature": 0, "max_tokens": PIECES, **({"min_tokens": PIECES} if ENGINE else {})}
            llm = llm_inputs(prompt, sampling=sampling, stream=True,
                             exclude_input_in_output=True)  # fmt: skip
            request = _grpc_request("tiny_llm", llm)
            jobs = [_stream_client(stream, request, w, w.end, needle) for _ in range(conc)]
        elif mode == "grpc_front_door":
            request = _grpc_request(model, inputs, outputs=("GENERATED_TEXT",))
            jobs = [_stream_client(stream, request, w, w.end, needle) for _ in range(conc)]
        elif mode == "grpc_composed":
            client = AsyncTritonClient(f"grpc://{address}", protocol="grpc", request_timeout=120)
            pipeline = composed_pipeline(await client.model_config(model))
            assert pipeline is not None
            try:
                await asyncio.gather(
                    *(_composed_client(client, pipeline, inputs, w, w.end) for _ in range(conc))
                )
            finally:
                await client.close()
            return w
        else:
            port = ports["front"] if mode == "front" else ports["front_door"]
            payload = _chat_payload(port, model)
            jobs = [_http_client("127.0.0.1", port, payload, w, w.end, needle) for _ in range(conc)]
        await asyncio.gather(*jobs)
    return w


PROMPTS: dict[str, str] = {}


def _serialize(message: Any) -> bytes:
    return bytes(message.SerializeToString())


def measure(
    mode: str, model: str, conc: int, ports: dict[str, int], warmup: float, span: float
) -> dict[str, Any]:
    load = os.getloadavg()[0]
    w = asyncio.run(_window(mode, model, conc, ports, warmup, span))
    row: dict[str, Any] = {
        "mode": mode, "model": model, "concurrency": conc, "window_s": span,
        "requests": w.requests, "errors": len(w.errors), "error_sample": w.errors[:3],
        "load_avg": round(load, 2),
    }  # fmt: skip
    lat = "latency" if mode == "prompt" else "ttft"
    row[f"{lat}_p50_ms"] = round((_percentile(w.ttft, 0.5) or 0) * 1000, 1) if w.ttft else None
    row[f"{lat}_p99_ms"] = round((_percentile(w.ttft, 0.99) or 0) * 1000, 1) if w.ttft else None
    if mode == "prompt":
        row["prompts_per_s"] = round(w.requests / span, 1)
    else:
        row["tokens_per_s"] = round(w.tokens / span, 1)
    print(json.dumps(row), flush=True)
    return row


def verdicts(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each pipeline path against its parts, at each concurrency. Two bounds: the issue's (min of
    the stage's tokens/s and prompts/s x tokens) and the closed loop's: a client that waits for
    its answer before the next spends the prompt's time in no stream, so C clients deliver at
    most C x tokens / (prompt p50 + the stage's time per answer at C) (Little's law)."""
    out = []
    for model in QUESTIONS:
        for conc in sorted({r["concurrency"] for r in rows}):
            got = {r["mode"]: r for r in rows if r["model"] == model and r["concurrency"] == conc}
            if "prompt" not in got or "stage" not in got:
                continue
            p, s = got["prompt"], got["stage"]
            bound = min(s["tokens_per_s"], p["prompts_per_s"] * PIECES)
            answer_s = conc * PIECES / s["tokens_per_s"] if s["tokens_per_s"] else None
            loop = conc * PIECES / ((p["latency_p50_ms"] or 0) / 1000 + answer_s) if answer_s else None
            ttft_bound = (p["latency_p50_ms"] or 0) + (s["ttft_p50_ms"] or 0) + 10
            for mode in ("grpc_front_door", "grpc_composed", "front", "front_front_door"):
                if mode not in got:
                    continue
                r = got[mode]
                ratio = r["tokens_per_s"] / bound if bound else None
                loop_ratio = r["tokens_per_s"] / min(bound, loop) if loop else None
                ttft_ok = r["ttft_p50_ms"] is not None and r["ttft_p50_ms"] <= ttft_bound
                out.append({
                    "model": model, "concurrency": conc, "mode": mode,
                    "tokens_per_s": r["tokens_per_s"], "bound_tokens_per_s": round(bound, 1),
                    "ratio": round(ratio, 3) if ratio is not None else None,
                    "closed_loop_bound_tokens_per_s": round(min(bound, loop), 1) if loop else None,
                    "closed_loop_ratio": round(loop_ratio, 3) if loop_ratio is not None else None,
                    "ttft_p50_ms": r["ttft_p50_ms"], "ttft_bound_ms": round(ttft_bound, 1),
                    "meets": bool(ratio is not None and ratio >= 0.9 and ttft_ok),
                    "meets_closed_loop": bool(loop_ratio is not None and loop_ratio >= 0.9 and ttft_ok),
                })  # fmt: skip
    return out


def plot(data: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for model, marker in zip(QUESTIONS, ("o", "s"), strict=True):
        for mode in ("stage", "grpc_front_door", "grpc_composed", "front", "front_front_door"):
            pts = [(r["concurrency"], r) for r in data["rows"] if r["model"] == model and r["mode"] == mode]
            if not pts:
                continue
            xs = [c for c, _ in pts]
            axes[0].plot(xs, [r["tokens_per_s"] for _, r in pts], marker=marker, label=f"{model} {mode}")
            axes[1].plot(xs, [r["ttft_p50_ms"] for _, r in pts], marker=marker, label=f"{model} {mode}")
    axes[0].set_title(f"tokens/s ({data['stage'].split(' (')[0]}, {PIECES} tokens an answer)")
    axes[1].set_title("TTFT p50 (ms)")
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrent streams")
        ax.grid(alpha=0.3)
    axes[1].set_yscale("log")
    axes[0].legend(fontsize=6)
    fig.suptitle("LLM-decoder pipelines: composed (front, client) vs the Python front door")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", default="8,32,128")
    parser.add_argument("--window", type=float, default=6.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--models", default="vlm_llm,arr_coc_llm")
    parser.add_argument("--name", default="pipeline_concurrency")
    parser.add_argument("--cancel-trials", type=int, default=10)
    parser.add_argument(
        "--stage",
        choices=sorted(STAGES),
        default="clock",
        help="the LLM stage: "
        "the clock stand-in, or the real CPU vLLM engine (make llm-venv; --concurrency 8,32)",
    )
    parser.add_argument("--rescore", action="store_true", help="recompute verdicts and plot from the JSON")
    args = parser.parse_args()
    if args.rescore:
        path = RESULTS / f"{args.name}.json"
        data = json.loads(path.read_text())
        data["verdicts"] = verdicts(data["rows"])
        write_result(args.name, data)
        plot(data, RESULTS / f"{args.name}.png")
        for v in data["verdicts"]:
            print(json.dumps(v))
        return
    global ENGINE
    ENGINE = args.stage == "engine"
    levels = [int(c) for c in args.concurrency.split(",")]
    ports = {k: _free_port() for k in ("http", "grpc", "metrics", "front", "front_door")}
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        cancelled = Path(tmp) / "cancelled.log"
        _build(repo, cancelled)
        tk = [sys.executable, "-m", "tritonkit"]
        log = open(Path(tmp) / "serve.log", "wb")  # noqa: SIM115 - closed below
        serve = subprocess.Popen(
            [*tk, "serve", str(repo), "--http-port", str(ports["http"]), "--grpc-port", str(ports["grpc"]),
             "--metrics-port", str(ports["metrics"]), "--openai-port", str(ports["front"])],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        door = subprocess.Popen(
            [*tk, "openai", f"grpc://127.0.0.1:{ports['grpc']}", "--port", str(ports["front_door"]),
             "--stream-url", f"http://127.0.0.1:{ports['http']}", "--no-compose-pipelines"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        try:
            _wait_http(f"http://127.0.0.1:{ports['http']}/v2/health/ready")
            _wait_http(f"http://127.0.0.1:{ports['front']}/health/ready")
            _wait_http(f"http://127.0.0.1:{ports['front_door']}/health/ready")
            rows = run_all(ports, levels, [m for m in args.models.split(",") if m], args)
            mem = memory([serve.pid, door.pid])
            # the stage counts the pieces it sent before a cancel (the clock's CANCELLED_LOG)
            left = {} if ENGINE else cancellations(ports["front"], cancelled, args.cancel_trials)
            print(json.dumps({"cancellations": left}), flush=True)
        finally:
            for proc in (door, serve):
                proc.terminate()
            for proc in (door, serve):
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()
            log.close()
    data = {
        "benchmark": args.name, "when": now(), "command": command_line(), "machine": machine(),
        "pieces_per_answer": PIECES, "stage": STAGES[args.stage],
        "rows": rows, "verdicts": verdicts(rows), "memory_after_run": mem,
        "cancellations_through_front": left,
    }  # fmt: skip
    path = write_result(args.name, data)
    plot(data, RESULTS / f"{args.name}.png")
    print(f"wrote {path}")
    for v in data["verdicts"]:
        print(json.dumps(v))


def run_all(ports: dict[str, int], levels: list[int], models: list[str], args: Any) -> list[dict[str, Any]]:
    import asyncio as _asyncio

    from tritonkit.client import AsyncTritonClient

    async def prompts() -> None:
        client = AsyncTritonClient(f"grpc://127.0.0.1:{ports['grpc']}", protocol="grpc")
        try:
            for model in models:
                inputs = _pipeline_inputs(model)
                got = await client.infer(
                    f"{model}_prompt", {k: inputs[k] for k in ("RAW_IMAGE", "TEXT_QUERY")}
                )
                PROMPTS[model] = got["PROMPT"].reshape(-1)[0].decode()
        finally:
            await client.close()

    _asyncio.run(prompts())
    rows = []
    for conc in levels:
        for model in models:
            modes = ["prompt", "stage", "grpc_front_door", "grpc_composed", "front"]
            if conc <= 32:
                modes.append("front_front_door")
            for mode in modes:
                rows.append(measure(mode, model, conc, ports, args.warmup, args.window))
    return rows


if __name__ == "__main__":
    main()
