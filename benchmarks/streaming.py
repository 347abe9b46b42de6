"""Time to first piece and pieces per second of the streaming pipelines, here, on a real server.

Builds ensembles/*.yaml (the streaming specs included), serves them (CPU variants) and streams the
demo's questions through ``vlm_stream`` and ``arr_coc_stream`` over gRPC streaming (tritonclient)
and HTTP ``generate_stream`` (server-sent events), with clients tritonkit did not write
(ensembles/plain_streams.py):

- one client at a time (``--streams`` streams each): time to first piece (from sending the
  request; it includes the features ensemble: image decode, encoders, scorers) and the decode
  rate, pieces after the first over the time from the first piece to the last;
- ``--concurrency`` clients at once: pieces per second delivered in all.

Once with the shipped ``DECODE_STEP_MS`` (5 ms per piece: the stand-in decoder paced like a real
one) and once with 0 (what the serving path itself carries: Triton, the Python backend, gRPC/SSE).

    .venv/bin/python benchmarks/streaming.py [--streams 20] [--concurrency 8] [--step-ms 5,0]

Writes ``benchmarks/results/streaming.json`` (with the exact command).
"""

from __future__ import annotations

import argparse
import re
import shutil
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

from benchmarks._perf_common import command_line, machine, now, write_result  # noqa: E402
from tests._examples import load_example  # noqa: E402

plain = load_example("ensembles/plain_streams.py")
SPECS = ("densenet", "vlm", "arr_coc", "vlm_stream", "arr_coc_stream")
QUESTIONS = {"vlm_stream": "Describe the image.", "arr_coc_stream": "Where is the sun?"}
PROTOCOLS = ("grpc", "sse")


def _set_step_ms(repository: Path, step_ms: int) -> None:
    """Rewrite DECODE_STEP_MS in the streaming models' configs (production and cpu variant)."""
    for model in QUESTIONS:
        for config in (repository / model).glob("**/*.pbtxt"):
            text = config.read_text()
            text = re.sub(
                r'(key: "DECODE_STEP_MS"\s*value \{\s*string_value: )"\d+"', rf'\1"{step_ms}"', text
            )
            config.write_text(text)


def _stream(server: Any, protocol: str, model: str, client: Any) -> Any:
    raw = np.frombuffer((ROOT / "ensembles" / "assets" / "sample.png").read_bytes(), dtype=np.uint8)
    inputs = {"RAW_IMAGE": raw, "TEXT_QUERY": np.array([QUESTIONS[model].encode()], dtype=np.object_)}
    if protocol == "sse":
        return plain.stream_sse(server.http_address, model, inputs)
    return plain.stream_grpc(client, model, inputs)


def _grpc(server: Any) -> Any:
    import tritonclient.grpc as grpcclient

    return grpcclient.InferenceServerClient(server.grpc_address)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure(server: Any, model: str, protocol: str, streams: int, concurrency: int) -> dict[str, Any]:
    client = _grpc(server)
    try:
        _stream(server, protocol, model, client)  # warm-up
        single = [_stream(server, protocol, model, client) for _ in range(streams)]
    finally:
        client.close()
    errors = [s.error for s in single if s.error is not None]
    ttfp = [s.first_s * 1000 for s in single if s.first_s is not None]
    rates = [s.pieces_per_s for s in single if s.pieces_per_s is not None]
    results: list[Any] = []
    lock = threading.Lock()

    def worker() -> None:
        own = _grpc(server)
        try:
            for _ in range(max(1, streams // concurrency)):
                stream = _stream(server, protocol, model, own)
                with lock:
                    results.append(stream)
        finally:
            own.close()

    started = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - started
    errors += [s.error for s in results if s.error is not None]
    return {
        "model": model,
        "protocol": protocol,
        "streams": len(single),
        "pieces_per_answer": len(single[0].pieces) if single else None,
        "time_to_first_piece_ms": {
            "p50": round(statistics.median(ttfp), 1),
            "p90": round(_pct(ttfp, 0.9), 1),
            "min": round(min(ttfp), 1),
        },
        "pieces_per_s_per_stream": {"p50": round(statistics.median(rates), 1), "min": round(min(rates), 1)},
        "concurrent": {
            "clients": concurrency,
            "streams": len(results),
            "pieces_per_s_total": round(sum(len(s.pieces) for s in results) / seconds, 1),
            "time_to_first_piece_ms_p50": round(
                statistics.median([s.first_s * 1000 for s in results if s.first_s is not None]), 1
            ),
        },
        "errors": errors[:5],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--streams", type=int, default=20, help="streams per (pipeline, protocol)")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--step-ms", default="5,0", help="DECODE_STEP_MS values to measure")
    parser.add_argument("--name", default="streaming")
    args = parser.parse_args()

    from tritonkit.repository import build_spec
    from tritonkit.server import LocalTritonServer

    runs = []
    started = now()
    with tempfile.TemporaryDirectory() as tmp:
        built = Path(tmp) / "built"
        for spec in SPECS:
            build_spec(ROOT / "ensembles" / f"{spec}.yaml", built)
        for step_ms in (int(v) for v in args.step_ms.split(",")):
            repository = Path(tmp) / f"step{step_ms}"
            shutil.copytree(built, repository, symlinks=True)
            _set_step_ms(repository, step_ms)
            with LocalTritonServer(repository) as server:
                for model in QUESTIONS:
                    for protocol in PROTOCOLS:
                        measured = measure(server, model, protocol, args.streams, args.concurrency)
                        row = {"decode_step_ms": step_ms, **measured}
                        runs.append(row)
                        first = row["time_to_first_piece_ms"]["p50"]
                        rate = row["pieces_per_s_per_stream"]["p50"]
                        total = row["concurrent"]["pieces_per_s_total"]
                        errors = f"  errors {row['errors']}" if row["errors"] else ""
                        print(  # noqa: T201 - a script's progress line
                            f"step {step_ms} ms {model:14} {protocol:4} first piece p50 {first} ms, {rate} "
                            f"pieces/s per stream, {total} pieces/s with {args.concurrency} clients{errors}",
                            flush=True,
                        )
    path = write_result(
        args.name,
        {
            "benchmark": "streaming",
            "command": command_line(),
            "started": started,
            "machine": machine(),
            "settings": {
                "streams": args.streams,
                "concurrency": args.concurrency,
                "triton": "2.51 (nvidia-pytriton wheel), CPU variants",
                "pieces_per_s_per_stream": "(pieces - 1) / (last - first piece time), one client at a time",
                "time_to_first_piece": "request sent -> first piece, the features ensemble included",
            },
            "runs": runs,
        },
    )
    print(f"wrote {path}")  # noqa: T201


if __name__ == "__main__":
    main()
