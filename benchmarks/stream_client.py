"""Streaming client against clients we did not write: time to first piece and pieces/s.

Starts a local tritonserver with the decoupled ``pieces`` test model
(``tests/integration/_stream_models.py``: N pieces, as fast as the Python backend sends them) and
streams ``--pieces`` pieces ``--reps`` times with each client (one client each, warmed up by a
first short stream; time from sending the request): plain tritonclient gRPC (``start_stream``),
raw httpx SSE, and tritonkit sync/async over gRPC and HTTP. Medians go to
``benchmarks/results/stream_client.json``. The pieces/s are the Python backend's, not the
client's: every client reads faster than this model sends.

    .venv/bin/python benchmarks/stream_client.py [--pieces 400] [--reps 7]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import queue
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import numpy as np  # noqa: E402

from tests.integration._stream_models import write_stream_repository  # noqa: E402
from tritonkit.client import AsyncTritonClient, TritonClient  # noqa: E402
from tritonkit.server import LocalTritonServer  # noqa: E402

Run = tuple[float, float]  # (time to first piece s, pieces/s after the first)


def _run(started: float, times: list[float]) -> Run:
    return times[0] - started, (len(times) - 1) / (times[-1] - times[0])


def plain_grpc(server: LocalTritonServer, n: int, reps: int) -> list[Run]:
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(server.grpc_address)
    tensor = grpcclient.InferInput("N", [1], "INT32")
    runs = []
    for count in [2] + [n] * reps:  # the first run warms the channel up
        received: queue.Queue[Any] = queue.Queue()
        started = time.monotonic()  # the stream is opened per request, as ours does
        client.start_stream(
            callback=lambda result, error, q=received: q.put((time.monotonic(), result, error))
        )
        tensor.set_data_from_numpy(np.array([count], np.int32))
        client.async_stream_infer("pieces", [tensor], enable_empty_final_response=True)
        times = []
        while True:
            at, result, error = received.get(timeout=60)
            if error is not None:
                raise RuntimeError(str(error))
            response = result.get_response()
            if response.outputs:
                result.as_numpy("PIECE")
                times.append(at)
            if response.parameters["triton_final_response"].bool_param:
                break
        client.stop_stream()
        runs.append(_run(started, times))
    client.close()
    return runs[1:]


def raw_sse(server: LocalTritonServer, n: int, reps: int) -> list[Run]:
    url = f"{server.http_url}/v2/models/pieces/generate_stream"
    runs = []
    with httpx.Client(timeout=60) as client:  # one pooled connection, as ours keeps
        for count in [2] + [n] * reps:
            times = []
            started = time.monotonic()
            with client.stream("POST", url, json={"N": count}) as response:
                for line in response.iter_lines():
                    if line.startswith("data: "):
                        json.loads(line[6:])
                        times.append(time.monotonic())
            runs.append(_run(started, times))
    return runs[1:]


def _ours_run(stream: Any, count: int, n: int) -> Run:
    assert count == n and stream.stats.first is not None and stream.stats.rate is not None
    return stream.stats.first - stream.stats.started, stream.stats.rate


def ours(protocol: str) -> Callable[[LocalTritonServer, int, int], list[Run]]:
    def run(server: LocalTritonServer, n: int, reps: int) -> list[Run]:
        url = server.http_url if protocol == "http" else server.grpc_url
        runs = []
        with TritonClient(url, protocol=protocol) as client:
            for count in [2] + [n] * reps:
                stream = client.stream("pieces", N=[count])
                runs.append(_ours_run(stream, sum(1 for _ in stream), count))
        return runs[1:]

    return run


def ours_async(protocol: str) -> Callable[[LocalTritonServer, int, int], list[Run]]:
    async def go(server: LocalTritonServer, n: int, reps: int) -> list[Run]:
        url = server.http_url if protocol == "http" else server.grpc_url
        runs = []
        async with AsyncTritonClient(url, protocol=protocol) as client:
            for count in [2] + [n] * reps:
                stream = client.stream("pieces", N=[count])
                got = 0
                async for _ in stream:
                    got += 1
                runs.append(_ours_run(stream, got, count))
        return runs[1:]

    return lambda server, n, reps: asyncio.run(go(server, n, reps))


CLIENTS: dict[str, Callable[[LocalTritonServer, int, int], list[Run]]] = {
    "plain tritonclient gRPC": plain_grpc,
    "tritonkit sync gRPC": ours("grpc"),
    "tritonkit async gRPC": ours_async("grpc"),
    "raw httpx SSE": raw_sse,
    "tritonkit sync HTTP SSE": ours("http"),
    "tritonkit async HTTP SSE": ours_async("http"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pieces", type=int, default=400)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "stream_client.json")
    args = parser.parse_args()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        repo = write_stream_repository(Path(tmp) / "repo", Path(tmp) / "log")
        with LocalTritonServer(repo) as server:
            for name, run in CLIENTS.items():
                runs = run(server, args.pieces, args.reps)
                results[name] = {
                    "time_to_first_ms_p50": round(statistics.median(r[0] for r in runs) * 1000, 2),
                    "pieces_per_s_p50": round(statistics.median(r[1] for r in runs)),
                }
                print(f"{name:26s} {results[name]}")  # noqa: T201 - a benchmark script reports
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "pieces": args.pieces,
                "reps": args.reps,
                "machine": f"{platform.machine()} {platform.processor() or ''} shared 2-core box",
                "results": results,
            },
            indent=2,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
