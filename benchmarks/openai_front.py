"""The OpenAI front beside direct gRPC, on the same local tritonserver and tiny vLLM engine.

Builds tiny_llm and vlm_llm (``ensembles/demo.py``'s LLM repository; the pipelines' ``openai:``
spec key maps them), serves them on one tritonserver 2.51 with one front (``FrontServer``, no
key) before it, and measures each model at each concurrency, alternating the order every round:

- **direct**: ``tritonkit perf`` over gRPC streaming (``ModelStreamInfer``), the engine's tensors
  (tiny_llm) or the pipeline's (vlm_llm, the shipped sample image with every request);
- **front**: ``tritonkit perf --openai`` through the front: ``/v1/completions`` for tiny_llm (the
  same prompt text, no chat template between), ``/v1/chat/completions`` with the image as a
  ``data:`` URL part for vlm_llm; SSE kernel-stamped as generate_stream is;
- **genai-perf 0.0.8** (``--service-kind openai --endpoint-type chat --streaming``) against the
  front on tiny_llm (its chat template renders the prompt), from ``.venv-genai`` (made on first
  use, as ``benchmarks/llm_accuracy.py`` does), with perf_analyzer 2.51 on PATH.

Targets (issue #31): the front's TTFT p50 at most 2 ms above direct gRPC, output tokens/s within
5%. The 2-core box is shared and the engine takes both cores: the load average around every
measurement is recorded, and the verdicts say what was measured, not what the front costs on an
idle machine. Writes benchmarks/results/openai_front.{json,png}.

    .venv/bin/python benchmarks/openai_front.py --suite engine [--concurrency 1,8] [--rounds 2] [--no-genai]

**The clock suite** (``--suite clock``, the default; issue #40) measures what the front itself
costs, apart from any engine: ``clock_llm`` (benchmarks/clock_llm.yaml: the vLLM stage's
tensors, 32 pieces, the first 20 ms after the request, then one every 10 ms, no compute) on one
tritonserver, the front started as its own process (``tritonkit openai``, so its CPU time is read
from ``/proc``), and benchmarks/_front_load.py as the load (raw grpc.aio streams direct, raw
keep-alive HTTP/1.1 through the front; neither parses what it gets). Direct and front alternate
every round, at concurrency 1, 16, 48 and 128: TTFT p50/p99, tokens/s, the front's CPU time per
token, and the cores each process used; ``--workers 1,2`` sweeps the front's worker count. The
front streams its answers over Triton's HTTP ``generate_stream`` (``--stream-url``, as ``serve
--openai-port`` runs it; ``--grpc-streams-only``: over gRPC), and ``--grpc-streams`` measures
the same front streaming over gRPC in turn with it.
Writes benchmarks/results/openai_front_clock{tag}.{json,png}.

    .venv/bin/python benchmarks/openai_front.py [--workers 1,2] [--clock-concurrency 1,16,48,128] [--rounds 2]
        [--front-src DIR]   # run the front from another checkout (the before/after comparison)
        [--baseline-src DIR [--baseline-http]] [--grpc-streams]  # in turn with main's front, and over gRPC
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _perf_common import RESULTS, command_line, machine, now, write_result  # noqa: E402
from llm_accuracy import GENAI_VERSION, _pa_path, _stat, genai_perf  # noqa: E402

from tests._examples import load_example  # noqa: E402
from tritonkit.perf import PerfSettings, run_perf  # noqa: E402
from tritonkit.perf.llm import Length, LlmLoad  # noqa: E402

demo = load_example("ensembles/demo.py")

MODELS = ("tiny_llm", "vlm_llm")
KEYS = ("ttft_p50_us", "itl_p50_us", "output_tokens_per_s")


def _figures(step: Any, before: float) -> dict[str, Any]:
    st = step.stream
    if st is None or step.requests == 0:
        return {"ok": False, "error": f"no request completed: {step.errors}"}
    return {
        "ok": True,
        "ttft_p50_us": st.get("ttft", "p50"),
        "ttft_p99_us": st.get("ttft", "p99"),
        "itl_p50_us": st.get("itl", "p50"),
        "latency_p50_us": step.latency_us("p50"),
        "output_tokens_per_s": st.output_tokens_per_s,
        "requests_per_s": st.requests_per_s,
        "output_length_avg": st.output_tokens.avg_us if st.output_tokens else None,
        "token_counting": st.token_counting,
        "client_check": st.client.to_dict() if st.client else None,
        "requests": step.requests,
        "errors": step.error_count,
        "load_avg": [before, os.getloadavg()[0]],
    }


def _dataset(tmp: Path, output_tokens: int) -> Path:
    """vlm_llm's requests: the demo's question about the shipped sample image."""
    image = tmp / "sample.png"
    image.write_bytes(demo.SAMPLE.read_bytes())
    path = tmp / "vlm.jsonl"
    entry = {"prompt": demo.VLM_QUERIES[0], "output_tokens": output_tokens, "image": image.name}
    path.write_text(json.dumps(entry) + "\n")
    return path


def run_tritonkit(
    url: str,
    model: str,
    conc: int,
    args: argparse.Namespace,
    *,
    repo: Path,
    dataset: Path,
    openai: str | None,
) -> dict[str, Any]:
    if model == "tiny_llm":
        llm = LlmLoad(prompt_tokens=Length(args.prompt_tokens), output_tokens=Length(args.output_tokens))
    else:
        llm = LlmLoad(dataset=str(dataset))
    settings = PerfSettings(
        url=url,
        model=model,
        protocol="http" if openai else "grpc",
        levels=(float(conc),),
        measurement_interval_ms=args.interval_ms,
        max_trials=args.max_trials,
        warmup_s=1.0,
        stream=True,
        # tiny_llm's tokenizer counts both sides alike (vlm_llm's engine is tiny_llm): the pipeline's
        # responses and the front's chunks may each merge tokens, so neither is counted one a piece
        tokenizer=str(repo / "tiny_llm" / "1" / "hf_model" / "tokenizer.json"),
        llm=llm,
        openai=openai,
        server_stats=False,
    )
    before = os.getloadavg()[0]
    (step,) = run_perf(settings).steps
    return _figures(step, before)


def run_genai(
    exe: Path, env: dict[str, str], url: str, hf: Path, conc: int, args: argparse.Namespace, tmp: Path
) -> dict[str, Any]:
    art = tmp / f"genai-{conc}-{len(list(tmp.glob('genai-*')))}"
    cmd = [
        str(exe), "profile", "-m", "tiny_llm", "--service-kind", "openai", "--endpoint-type", "chat",
        "-u", url, "--streaming", "--tokenizer", str(hf),
        "--synthetic-input-tokens-mean", str(args.prompt_tokens), "--synthetic-input-tokens-stddev", "0",
        "--output-tokens-mean", str(args.output_tokens), "--output-tokens-stddev", "0",
        "--concurrency", str(conc), "--measurement-interval", str(args.interval_ms),
        "--random-seed", "0", "--artifact-dir", str(art),
    ]  # fmt: skip
    before = os.getloadavg()[0]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    exports = sorted(art.rglob("*genai_perf.json"))
    if proc.returncode != 0 or not exports:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-6:]
        return {"ok": False, "error": " / ".join(tail), "command": "genai-perf " + " ".join(cmd[1:])}
    doc = json.loads(exports[0].read_text())
    return {
        "ok": True,
        "command": "genai-perf " + " ".join(cmd[1:]),
        "ttft_p50_us": (_stat(doc, "time_to_first_token", "p50") or 0) * 1000,  # its export is in ms
        "itl_p50_us": (_stat(doc, "inter_token_latency", "p50") or 0) * 1000,
        "latency_p50_us": (_stat(doc, "request_latency", "p50") or 0) * 1000,
        "output_tokens_per_s": _stat(doc, "output_token_throughput", "avg"),
        "requests_per_s": _stat(doc, "request_throughput", "avg"),
        "output_length_avg": _stat(doc, "output_sequence_length", "avg"),
        "load_avg": [before, os.getloadavg()[0]],
    }


def _median(samples: list[dict[str, Any]], key: str) -> float | None:
    values = [s[key] for s in samples if s.get("ok") and s.get(key) is not None]
    return statistics.median(values) if values else None


def _case(model: str, conc: int, samples: dict[str, list[dict[str, Any]]], before: float) -> dict[str, Any]:
    case: dict[str, Any] = {"model": model, "concurrency": conc, "load_avg": [before, os.getloadavg()[0]]}
    for tool, runs in samples.items():
        keys = (*KEYS, "ttft_p99_us", "latency_p50_us", "requests_per_s", "output_length_avg")
        case[tool] = {k: _median(runs, k) for k in keys}
        case[tool]["samples"] = runs
    d, f = case["direct"], case["front"]
    overhead = f["ttft_p50_us"] - d["ttft_p50_us"] if f["ttft_p50_us"] and d["ttft_p50_us"] else None
    ratio = (
        f["output_tokens_per_s"] / d["output_tokens_per_s"]
        if f["output_tokens_per_s"] and d["output_tokens_per_s"]
        else None
    )
    case["ttft_p50_overhead_ms"] = overhead / 1000 if overhead is not None else None
    case["tokens_per_s_ratio"] = ratio
    case["verdict"] = {
        "ttft_p50_overhead_le_2ms": overhead is not None and overhead <= 2000,
        "tokens_per_s_within_5pct": ratio is not None and abs(ratio - 1) <= 0.05,
    }
    return case


def plot(cases: list[dict[str, Any]], path: Path) -> None:
    from tritonkit.perf.plot import pyplot, save_figure

    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.6))
    labels = [f"{c['model']}\nc={c['concurrency']}" for c in cases]
    xs = list(range(len(cases)))
    tools = (("direct", "direct gRPC", "#3d5a80"), ("front", "front (perf --openai)", "#ee6c4d"))
    tools += (("genai_perf", f"genai-perf {GENAI_VERSION} via front", "#98c1d9"),)
    w = 0.27
    for ax, key in zip(axes, KEYS, strict=True):
        scale = 1.0 if key == "output_tokens_per_s" else 1000.0
        for i, (tool, label, color) in enumerate(tools):
            vals = [((c.get(tool) or {}).get(key) or 0) / scale for c in cases]
            ax.bar([x + (i - 1) * w for x in xs], vals, w, label=label, color=color)
        ax.set_xticks(xs, labels, fontsize=8)
        ax.set_title(key.replace("_us", " (ms)").replace("_", " "))
        ax.legend(fontsize=7)
    for x, c in zip(xs, cases, strict=True):
        if c["ttft_p50_overhead_ms"] is not None:
            top = (c["front"]["ttft_p50_us"] or 0) / 1000
            axes[0].annotate(
                f"+{c['ttft_p50_overhead_ms']:.1f} ms", (x, top), ha="center", va="bottom", fontsize=7
            )
        if c["tokens_per_s_ratio"] is not None:
            top = c["front"]["output_tokens_per_s"] or 0
            axes[2].annotate(
                f"{c['tokens_per_s_ratio']:.3f}x", (x, top), ha="center", va="bottom", fontsize=7
            )
    loads = ", ".join(f"{c['load_avg'][0]:.1f}-{c['load_avg'][1]:.1f}" for c in cases)
    fig.suptitle(
        f"OpenAI front vs direct gRPC, tritonserver 2.51, tiny vLLM engine (load avg per case: {loads})",
        fontsize=9,
    )
    save_figure(fig, path)


CLOCK_SPEC = Path(__file__).resolve().parent / "clock_llm.yaml"
CLOCK_KEYS = ("ttft_p50_ms", "ttft_p99_ms", "tokens_per_s", "front_cpu_us_per_token")
#: the issue's targets, one worker, on the clock model
CLOCK_TARGETS = {
    "ttft_p50_overhead_ms": {"c1": 2.0, "c16": 5.0},
    "tokens_per_s_ratio_c48": 0.95,
    "front_cpu_us_per_token": 100.0,
}


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _urls(server: Any) -> dict[str, str]:
    """The front's Triton URLs as ``serve --openai-port`` gives them: gRPC, answers over HTTP."""
    return {"triton_url": server.grpc_url, "stream_url": server.http_url}


def start_front(
    grpc_url: str,
    workers: int,
    src: Path | None,
    stream_url: str | None = None,
    *,
    extra: list[str] | None = None,
    log_path: Path | None = None,
) -> tuple[subprocess.Popen[bytes], int]:
    """``tritonkit openai`` as its own process (and its workers), listening once this returns;
    ``stream_url``: its ``--stream-url`` (Triton's HTTP URL, as ``serve --openai-port`` gives it);
    ``extra``: more of its options; ``log_path``: where its log goes (default: a temporary file)."""
    import urllib.request

    port = _free_port()
    cmd = [sys.executable, "-m", "tritonkit", "openai", grpc_url, "--port", str(port)]
    if stream_url:
        cmd += ["--stream-url", stream_url]
    if workers != 1:
        cmd += ["--workers", str(workers)]
    cmd += extra or []
    root = src or Path(__file__).resolve().parent.parent
    env = dict(os.environ)
    env["PYTHONPATH"] = str(root)
    # cwd: ``python -m`` puts the working directory first on sys.path, before PYTHONPATH, so a
    # front started from another checkout would import this one's tritonkit
    # its log to a file, not a pipe: nobody reads a pipe while it serves, and a full one (64 KB
    # of warnings) would block the front's event loop mid-benchmark
    log = open(log_path, "w+b") if log_path is not None else tempfile.TemporaryFile()  # noqa: SIM115
    proc = subprocess.Popen(cmd, env=env, cwd=root, stdout=subprocess.DEVNULL, stderr=log)
    for _ in range(600):
        if proc.poll() is not None:
            log.seek(0)
            raise RuntimeError(f"the front exited: {log.read().decode(errors='replace')[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health/ready", timeout=2) as r:
                if r.status == 200:
                    return proc, port
        except OSError:
            pass
        time.sleep(0.1)
    proc.terminate()
    raise RuntimeError("the front did not get ready in 60 s")


def stop_front(proc: subprocess.Popen[bytes]) -> None:
    import signal

    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _clock_case(
    conc: int, workers: int, direct: list[dict[str, Any]], front: list[dict[str, Any]]
) -> dict[str, Any]:
    def med(runs: list[dict[str, Any]], key: str) -> float | None:
        values = [r[key] for r in runs if r.get(key) is not None]
        return statistics.median(values) if values else None

    keys = (*CLOCK_KEYS, "front_cores", "server_cores", "tritonserver_cores", "stub_cores", "client_cores")
    keys = (*keys, "requests", "errors")
    d = {k: med(direct, k) for k in keys}
    f = {k: med(front, k) for k in keys}
    over = f["ttft_p50_ms"] - d["ttft_p50_ms"] if f["ttft_p50_ms"] and d["ttft_p50_ms"] else None
    ratio = f["tokens_per_s"] / d["tokens_per_s"] if f["tokens_per_s"] and d["tokens_per_s"] else None
    return {
        "concurrency": conc,
        "workers": workers,
        "direct": {**d, "samples": direct},
        "front": {**f, "samples": front},
        "ttft_p50_overhead_ms": over,
        "ttft_p99_overhead_ms": (f["ttft_p99_ms"] - d["ttft_p99_ms"])
        if f["ttft_p99_ms"] and d["ttft_p99_ms"]
        else None,
        "tokens_per_s_ratio": ratio,
    }


def _clock_verdicts(cases: list[dict[str, Any]]) -> dict[str, Any]:
    one = {c["concurrency"]: c for c in cases if c["workers"] == 1}
    out: dict[str, Any] = {}
    for conc, most in ((1, 2.0), (16, 5.0)):
        over = one.get(conc, {}).get("ttft_p50_overhead_ms")
        out[f"ttft_p50_overhead_c{conc}_le_{most:g}ms"] = {
            "value": over,
            "ok": over is not None and over <= most,
        }
    ratio = one.get(48, {}).get("tokens_per_s_ratio")
    out["tokens_per_s_ratio_c48_ge_0.95"] = {"value": ratio, "ok": ratio is not None and ratio >= 0.95}
    cpu = {k: c["front"]["front_cpu_us_per_token"] for k, c in sorted(one.items())}
    # Judged where the front is busy (48 and up: several pieces per wake-up), which is what its CPU
    # per token limits; below that each piece wakes the process alone, and a wake-up has a floor
    # of its own on this machine (benchmarks/transport_floor.py's "wakeup" rows; docs/openai.md).
    busy = [v for k, v in cpu.items() if k >= 48 and v]
    worst = max(busy) if busy else None
    out["front_cpu_per_token_le_100us"] = {
        "value": worst,
        "ok": worst is not None and worst <= 100.0,
        "judged_at": [k for k in cpu if k >= 48],
        "by_concurrency": {f"c{k}": v for k, v in cpu.items()},
    }
    return out


def plot_clock(data: dict[str, Any], path: Path) -> None:
    from tritonkit.perf.plot import pyplot, save_figure

    plt = pyplot()
    cases = data["cases"]
    fig, axes = plt.subplots(1, 4, figsize=(20, 4.6))
    workers = sorted({c["workers"] for c in cases})
    concs = sorted({c["concurrency"] for c in cases})
    xs = list(range(len(concs)))
    series = [("direct", 1, "direct gRPC", "#3d5a80")] + [
        ("front", w, f"front, {w} worker(s)", c)
        for w, c in zip(workers, ("#ee6c4d", "#f4a261", "#2a9d8f", "#8d99ae"), strict=False)
    ]
    if any("front_grpc" in c for c in cases):
        series.insert(1, ("front_grpc", 1, "front, streams over gRPC, 1 worker", "#e9c46a"))
    if any("baseline" in c for c in cases):
        series.insert(1, ("baseline", 1, "front before (baseline), 1 worker", "#8d99ae"))
    width = 0.8 / len(series)
    titles = {"ttft_p50_ms": "TTFT p50 (ms)", "ttft_p99_ms": "TTFT p99 (ms)", "tokens_per_s": "tokens/s",
              "front_cpu_us_per_token": "front CPU per token (µs)"}  # fmt: skip
    for ax, key in zip(axes, CLOCK_KEYS, strict=True):
        for i, (tool, w, label, color) in enumerate(series):
            if tool == "direct" and key == "front_cpu_us_per_token":
                continue
            vals = []
            for conc in concs:
                case = next((c for c in cases if c["concurrency"] == conc and c["workers"] == w), None)
                vals.append(((case.get(tool) or {}).get(key) or 0) if case else 0)
            ax.bar(
                [x + (i - (len(series) - 1) / 2) * width for x in xs], vals, width, label=label, color=color
            )
        ax.set_xticks(xs, [f"c={c}" for c in concs])
        ax.set_title(titles[key])
        ax.legend(fontsize=7)
    axes[3].axhline(100, color="grey", linestyle="--", linewidth=0.8)
    fig.suptitle(
        f"OpenAI front vs direct gRPC on clock_llm (32 pieces, 20 ms + 10 ms/piece, no compute), "
        f"tritonserver 2.51, {data['machine']['cpus']} cores; front: {data['front_src']}",
        fontsize=9,
    )
    save_figure(fig, path)


_SHOWN = ("ttft_p50_ms", "ttft_p99_ms", "tokens_per_s", "front_cpu_us_per_token", "front_cores")
_CORES = ("tritonserver_cores", "stub_cores", "client_cores")


def _line(one: dict[str, Any]) -> str:
    shown = [f"{k}={one[k]:.4g}" for k in (*_SHOWN, *_CORES) if one.get(k) is not None]
    return ", ".join(shown) + f", errors={one['errors']} {one['error_sample'][:1]}"


def clock_suite(args: argparse.Namespace) -> None:
    from _front_load import measure

    from tritonkit.repository import build_spec
    from tritonkit.server import LocalTritonServer

    started, at_start = now(), machine()
    concs = [int(c) for c in args.clock_concurrency.split(",")]
    sweep = [int(w) for w in args.workers.split(",")]
    cases: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp_s:
        repo = Path(tmp_s) / "model_repository"
        build_spec(CLOCK_SPEC, repo)
        with LocalTritonServer(repo) as server:
            address = server.grpc_url.removeprefix("grpc://")
            direct: dict[int, list[dict[str, Any]]] = {c: [] for c in concs}
            for workers in sweep:
                streams = None if args.grpc_streams_only else server.http_url
                proc, port = start_front(server.grpc_url, workers, args.front_src, streams)
                # the same clients against the front of another checkout (before/after), and
                # against this one streaming over gRPC, in turn
                fronts = {"front": (proc, port)}
                if args.baseline_src and workers == 1:
                    before = server.http_url if args.baseline_http else None
                    fronts["baseline"] = start_front(server.grpc_url, 1, args.baseline_src, before)
                if args.grpc_streams and streams and workers == 1:
                    fronts["front_grpc"] = start_front(server.grpc_url, 1, args.front_src)
                try:
                    for conc in concs:
                        runs: dict[str, list[dict[str, Any]]] = {"direct": direct[conc]}
                        runs |= {tool: [] for tool in fronts}
                        for r in range(args.rounds):
                            tools = ["direct", *fronts]
                            tools = tools[r % len(tools) :] + tools[: r % len(tools)]
                            for tool in tools:
                                if tool == "direct" and workers != sweep[0]:
                                    continue  # direct does not depend on the front: measured once
                                fproc, fport = fronts.get(tool, (proc, port))
                                one = measure(
                                    "direct" if tool == "direct" else "front", conc, grpc_address=address,
                                    front=("127.0.0.1", fport), front_pid=fproc.pid, server_pid=server.pid,
                                    warmup_s=args.warmup_s, window_s=args.window_s,
                                )  # fmt: skip
                                runs[tool].append(one)
                                print(f"w={workers} c={conc} {tool}: {_line(one)}", flush=True)
                        case = _clock_case(conc, workers, direct[conc], runs["front"])
                        for other in ("baseline", "front_grpc"):
                            if runs.get(other):
                                before = _clock_case(conc, 1, direct[conc], runs[other])
                                case[other] = before["front"]
                                case[f"{other}_ttft_p50_overhead_ms"] = before["ttft_p50_overhead_ms"]
                                case[f"{other}_tokens_per_s_ratio"] = before["tokens_per_s_ratio"]
                        cases.append(case)
                finally:
                    for fproc, _ in fronts.values():
                        stop_front(fproc)
    data = {
        "benchmark": "openai_front_clock",
        "command": command_line(),
        "started_at": started,
        "finished_at": now(),
        "machine": {**at_start, "load_avg_at_end": list(os.getloadavg())},
        "front_src": str(args.front_src or "this checkout"),
        "baseline_src": str(args.baseline_src) if args.baseline_src else None,
        "note": "2-core box: the load generator, tritonserver (clock_llm's Python stub) and the front "
        "share both cores; each sample records the cores each process used",
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "targets": CLOCK_TARGETS,
        "cases": cases,
    }
    data["verdicts"] = _clock_verdicts(cases)
    path = write_result(f"openai_front_clock{args.tag}", data)
    plot_clock(data, RESULTS / f"openai_front_clock{args.tag}.png")
    print(f"wrote {path}")
    for c in cases:
        cpu = c["front"]["front_cpu_us_per_token"]
        print(f"  w={c['workers']} c={c['concurrency']}: TTFT p50 +{c['ttft_p50_overhead_ms']} ms, ", end="")
        print(f"tokens/s x{c['tokens_per_s_ratio']}, front CPU/token {cpu} us")
    print(json.dumps(data["verdicts"], indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", default="clock", choices=("clock", "engine"))
    ap.add_argument("--clock-concurrency", default="1,16,48,128")
    ap.add_argument("--workers", default="1", help="clock suite: the front's worker counts to sweep")
    ap.add_argument("--window-s", type=float, default=8.0)
    ap.add_argument("--warmup-s", type=float, default=2.0)
    ap.add_argument("--front-src", type=Path, help="clock suite: PYTHONPATH of the front (another checkout)")
    ap.add_argument(
        "--baseline-src",
        type=Path,
        help="clock suite: also measure a one-worker front from this checkout, in turn with the others",
    )
    ap.add_argument(
        "--baseline-http",
        action="store_true",
        help="clock suite: the baseline front streams over Triton's HTTP too (--stream-url; since #40)",
    )
    ap.add_argument(
        "--grpc-streams",
        action="store_true",
        help="clock suite: also measure this checkout's front streaming over gRPC (no --stream-url)",
    )
    ap.add_argument(
        "--grpc-streams-only",
        action="store_true",
        help="clock suite: the front streams over gRPC (default: over Triton's HTTP, as serve does)",
    )
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--concurrency", default="1,8")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--prompt-tokens", type=int, default=32)
    ap.add_argument("--output-tokens", type=int, default=16)
    ap.add_argument("--interval-ms", type=int, default=4000)
    ap.add_argument("--max-trials", type=int, default=6)
    ap.add_argument("--no-genai", action="store_true", help="skip genai-perf")
    ap.add_argument("--tag", default="")
    ap.add_argument("--replot", type=Path, help="only redraw the plot of a result JSON")
    args = ap.parse_args()
    if args.replot is not None:
        replotted = json.loads(args.replot.read_text())
        if replotted["benchmark"] == "openai_front_clock":
            plot_clock(replotted, args.replot.with_suffix(".png"))
        else:
            plot(replotted["cases"], args.replot.with_suffix(".png"))
        return
    if args.suite == "clock":
        clock_suite(args)
        return
    from tritonkit.openai_front import FrontServer, FrontSettings
    from tritonkit.server import LocalTritonServer

    started, at_start = now(), machine()
    exe = None if args.no_genai else genai_perf()
    cases = []
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        repo = tmp / "model_repository"
        demo.build_llm_repository(repo, quiet=True)
        dataset = _dataset(tmp, args.output_tokens)
        hf = repo / "tiny_llm" / "1" / "hf_model"
        env = _pa_path(tmp) if exe else {}
        with (
            LocalTritonServer(repo) as server,
            FrontServer(FrontSettings(**_urls(server), repository=repo)) as front,
        ):
            for model in args.models.split(","):
                for conc in (int(c) for c in args.concurrency.split(",")):
                    before = os.getloadavg()[0]
                    samples: dict[str, list[dict[str, Any]]] = {"direct": [], "front": []}
                    for r in range(args.rounds):
                        for tool in ("direct", "front") if r % 2 == 0 else ("front", "direct"):
                            api = (
                                None
                                if tool == "direct"
                                else ("completions" if model == "tiny_llm" else "chat")
                            )
                            url = server.grpc_url if tool == "direct" else front.url
                            one = run_tritonkit(
                                url, model, conc, args, repo=repo, dataset=dataset, openai=api
                            )
                            samples[tool].append(one)
                            print(f"{model} c={conc} {tool}: {one}", flush=True)
                    if exe is not None and model == "tiny_llm":
                        samples["genai_perf"] = [run_genai(exe, env, front.url, hf, conc, args, tmp)]
                        print(f"{model} c={conc} genai-perf: {samples['genai_perf'][0]}", flush=True)
                    cases.append(_case(model, conc, samples, before))
    data = {
        "benchmark": "openai_front",
        "command": command_line(),
        "started_at": started,
        "finished_at": now(),
        "machine": {**at_start, "load_avg_at_end": list(os.getloadavg())},
        "note": "2-core box shared with other work; the engine takes both cores: see each case's load_avg",
        "genai_perf": None
        if exe is None
        else f"genai-perf=={GENAI_VERSION} in .venv-genai, perf_analyzer 2.51 on PATH",
        "settings": vars(args),
        "targets": {"ttft_p50_overhead_ms": 2.0, "tokens_per_s_within": 0.05},
        "cases": cases,
    }
    path = write_result(f"openai_front{args.tag}", data)
    plot(cases, RESULTS / f"openai_front{args.tag}.png")
    print(f"wrote {path}")
    for c in cases:
        print(f"  {c['model']} c={c['concurrency']}: TTFT p50 +{c['ttft_p50_overhead_ms']} ms, "
              f"tokens/s x{c['tokens_per_s_ratio']}, {c['verdict']}")  # fmt: skip


if __name__ == "__main__":
    main()
