"""Does `tritonkit perf --stream` measure streams as perf_analyzer 2.51 does? Same server, same model.

Starts one real local tritonserver serving a decoupled model and measures it, over gRPC
streaming, with Triton's perf_analyzer 2.51 (``--streaming --profile-export-file``: the export
holds every response's timestamp, from which TTFT, ITL and request latency are computed with
the definitions tritonkit states; C++ binary from the tritonclient 2.51.0 wheel, see
_perf_common.perf_analyzer) and with tritonkit perf (gRPC; HTTP generate_stream recorded
beside it), alternating tool order every round so drift on the shared box hits both alike.

Models: ``stream_ticker`` (benchmarks/stream_ticker.yaml: timings known by construction, 8
tokens, first after 20 ms, then every 5 ms, then a flags-only final 2 ms later) and
``arr_coc_stream`` when the example repository has it.

Target: TTFT, ITL and request latency p50 of tritonkit within 5% of perf_analyzer's at
concurrency 1 and 16. Writes benchmarks/results/stream_accuracy.json (with the exact command,
the load average around every measurement) and .png.

    .venv/bin/python benchmarks/stream_accuracy.py [--concurrency 1,16] [--rounds 3] [--models stream_ticker]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _perf_common import (  # noqa: E402
    ENSEMBLES,
    command_line,
    finish_accuracy,
    machine,
    now,
    perf_analyzer,
    verdict,
)

from tritonkit.perf import PerfSettings, run_perf  # noqa: E402
from tritonkit.perf.stats import percentile  # noqa: E402
from tritonkit.server import LocalTritonServer  # noqa: E402

PA_VERSION = "2.51.0"
HERE = Path(__file__).resolve().parent
METRICS = ("ttft", "itl", "latency")
#: the specs each model is built from, in order (arr_coc_stream reuses arr_coc's stages)
SPECS = {
    "stream_ticker": (HERE / "stream_ticker.yaml",),
    "arr_coc_stream": (ENSEMBLES / "arr_coc.yaml", ENSEMBLES / "arr_coc_stream.yaml"),
}
IMAGE = ENSEMBLES / "assets" / "sample.png"


def arr_coc_data(path: Path) -> str:
    """perf_analyzer's JSON input format, read by both tools: the sample image and a question
    (MAX_TOKENS left out: it is optional, the decoder's whole text is streamed)."""
    img = list(IMAGE.read_bytes())
    entry = {"RAW_IMAGE": {"content": img, "shape": [len(img)]}, "TEXT_QUERY": ["what is in the picture?"]}
    path.write_text(json.dumps({"data": [entry]}))
    return str(path)


def _flags_only(outputs: dict[str, Any]) -> bool:
    """A response of the export without output data (perf_analyzer writes the final one as '')."""
    return all(v in ("", None, [], {}) for v in outputs.values()) if outputs else True


def pa_metrics(export: dict[str, Any]) -> dict[str, Any]:
    """TTFT, ITL and request latency from perf_analyzer's per-response export, over the requests
    that ended inside the windows perf_analyzer reported (its last three)."""
    exp = export["experiments"][0]
    bounds = exp.get("window_boundaries") or []
    lo = bounds[-4] if len(bounds) >= 4 else (bounds[0] if bounds else 0)
    hi = bounds[-1] if bounds else 2**63
    ttft, itl, lat, tail, tokens = [], [], [], [], []
    for req in exp["requests"]:
        stamps = req.get("response_timestamps") or []
        outs = req.get("response_outputs") or [{}] * len(stamps)
        data = [t for t, o in zip(stamps, outs, strict=False) if not _flags_only(o)]
        if not data:
            continue
        end = stamps[-1]
        if not lo <= end < hi:
            continue
        sent = req["timestamp"]
        ttft.append((data[0] - sent) / 1e3)
        lat.append((data[-1] - sent) / 1e3)
        tokens.append(len(data))
        if len(data) > 1:
            itl.append((data[-1] - data[0]) / (len(data) - 1) / 1e3)
        if stamps[-1] != data[-1]:
            tail.append((stamps[-1] - data[-1]) / 1e3)

    def p50(values: list[float]) -> float | None:
        return percentile(sorted(values), 50) if values else None

    duration_s = (hi - lo) / 1e9 if bounds else 0.0
    return {
        "ttft_p50_us": p50(ttft),
        "itl_p50_us": p50(itl),
        "latency_p50_us": p50(lat),
        "final_tail_p50_us": p50(tail),
        "requests": len(lat),
        "output_tokens_per_s": sum(tokens) / duration_s if duration_s else None,
    }


def run_perf_analyzer(model: str, address: str, conc: int, args: argparse.Namespace) -> dict[str, Any]:
    cmd, env = perf_analyzer(PA_VERSION)
    with tempfile.TemporaryDirectory() as tmp:
        export = Path(tmp) / "profile.json"
        full = [
            *cmd,
            "-m",
            model,
            "-u",
            address,
            "-i",
            "grpc",
            "--streaming",
            "--concurrency-range",
            f"{conc}:{conc}",
            "-p",
            str(args.interval_ms),
            "-s",
            str(args.stability),
            "--max-trials",
            str(args.max_trials),
            "--profile-export-file",
            str(export),
        ]
        if args.input_data.get(model):
            full += ["--input-data", args.input_data[model]]
        load_before = os.getloadavg()[0]
        proc = subprocess.run(full, env=env, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0 or not export.exists():
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
            return {"ok": False, "error": " / ".join(tail)}
        result = pa_metrics(json.loads(export.read_text()))
    return {
        "ok": True,
        "command": "perf_analyzer " + " ".join(full[1:-2]),
        **result,
        "load_avg": [load_before, os.getloadavg()[0]],
    }


def run_tritonkit(model: str, url: str, protocol: str, conc: int, args: argparse.Namespace) -> dict[str, Any]:
    settings = PerfSettings(
        url=url,
        model=model,
        protocol=protocol,
        levels=(float(conc),),
        measurement_interval_ms=args.interval_ms,
        stability_percentage=args.stability,
        max_trials=args.max_trials,
        warmup_s=0.5,
        stream=True,
        input_data=args.input_data.get(model, "random"),
    )
    load_before = os.getloadavg()[0]
    (step,) = run_perf(settings).steps
    st = step.stream
    assert st is not None
    return {
        "ok": step.requests > 0,
        "ttft_p50_us": st.get("ttft", "p50"),
        "itl_p50_us": st.get("itl", "p50"),
        "latency_p50_us": step.latency_us("p50"),
        "final_tail_p50_us": st.final_tail.p50_us if st.final_tail else None,
        "requests": step.requests,
        "errors": step.error_count,
        "output_tokens_per_s": st.output_tokens_per_s,
        "client_cpu_us_per_response": st.client_cpu_us_per_response,
        "client_bound": st.client_bound,
        "stable": step.stable,
        "load_avg": [load_before, os.getloadavg()[0]],
    }


def _median(samples: list[dict[str, Any]], key: str) -> float | None:
    values = [s[key] for s in samples if s.get("ok") and s.get(key) is not None]
    return statistics.median(values) if values else None


def plot(cases: list[dict[str, Any]], path: Path) -> None:
    from tritonkit.perf.plot import pyplot, save_figure

    plt = pyplot()
    fig, axes = plt.subplots(1, len(METRICS), figsize=(15, 4.6))
    labels = [f"{c['model']}\nc={c['concurrency']}" for c in cases]
    xs = list(range(len(cases)))
    w = 0.27
    tools = (
        ("perf_analyzer", "perf_analyzer (gRPC)", "#3d5a80"),
        ("tritonkit", "tritonkit (gRPC)", "#ee6c4d"),
    )
    for ax, metric in zip(axes, METRICS, strict=True):
        key = f"{metric}_p50_us"
        for off, (tool, name, color) in zip((-w, 0.0), tools, strict=True):
            vals = [(c[tool][key] or 0) / 1000 for c in cases]
            ax.bar([x + off for x in xs], vals, w, label=name, color=color)
        http = [(c["tritonkit_http"][key] or 0) / 1000 if c.get("tritonkit_http") else 0 for c in cases]
        ax.bar([x + w for x in xs], http, w, label="tritonkit (HTTP SSE)", color="#98c1d9")
        for x, c in zip(xs, cases, strict=True):
            r = c["ratio"][key]
            if r is not None:
                top = max((c["perf_analyzer"][key] or 0), (c["tritonkit"][key] or 0)) / 1000
                ax.annotate(
                    f"{r:.3f}x", (x, top), textcoords="offset points", xytext=(0, 4), ha="center", fontsize=8
                )
        ax.set_xticks(xs, labels, fontsize=8)
        ax.set_ylabel(f"{metric.upper()} p50 (ms)")
        ax.set_title(f"{metric.upper()} p50 (label: tritonkit / perf_analyzer)")
        ax.legend(fontsize=7)
    fig.suptitle("tritonkit perf --stream vs perf_analyzer 2.51 --streaming (same server, alternating)")
    save_figure(fig, path)


KEYS = ("ttft_p50_us", "itl_p50_us", "latency_p50_us", "final_tail_p50_us", "output_tokens_per_s")


def measure_case(model: str, conc: int, server: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Both tools on one model and concurrency, alternating, ``args.rounds`` times."""
    pa: list[dict[str, Any]] = []
    tk: list[dict[str, Any]] = []
    tk_http: list[dict[str, Any]] = []
    for r in range(args.rounds):
        # alternate which tool goes first, so drift on the shared box favours neither
        order = ("pa", "tk") if r % 2 == 0 else ("tk", "pa")
        for tool in order:
            if tool == "pa":
                pa.append(run_perf_analyzer(model, server.grpc_address, conc, args))
            else:
                tk.append(run_tritonkit(model, server.grpc_url, "grpc", conc, args))
        if not args.no_http:
            tk_http.append(run_tritonkit(model, server.http_url, "http", conc, args))
        print(model, conc, "pa", pa[-1], "\n   tk", tk[-1], flush=True)
    case: dict[str, Any] = {"model": model, "concurrency": conc}
    keys = (
        "ttft_p50_us",
        "itl_p50_us",
        "latency_p50_us",
        "final_tail_p50_us",
        "output_tokens_per_s",
    )
    for name, samples in (
        ("perf_analyzer", pa),
        ("tritonkit", tk),
        ("tritonkit_http", tk_http),
    ):
        if samples:
            case[name] = {k: _median(samples, k) for k in keys}
            case[name]["samples"] = samples
    case["ratio"] = {
        k: (case["tritonkit"][k] / case["perf_analyzer"][k])
        if case["tritonkit"][k] and case["perf_analyzer"][k]
        else None
        for k in keys
    }
    return case


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--concurrency", default="1,16")
    ap.add_argument(
        "--arr-coc-concurrency",
        default="1,16",
        help="levels for arr_coc_stream (the first design, a decoupled ensemble step, crashed "
        "tritonserver 2.51 at 2 and above: give '1' to repeat a run of that era)",
    )
    ap.add_argument("--models", default="stream_ticker,arr_coc_stream")
    ap.add_argument("--interval-ms", type=int, default=3000)
    ap.add_argument("--stability", type=float, default=10.0)
    ap.add_argument("--max-trials", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds per case (median reported)")
    ap.add_argument("--no-http", action="store_true", help="skip the tritonkit HTTP generate_stream runs")
    ap.add_argument("--tag", default="", help="suffix of the result files (stream_accuracy{TAG}.json)")
    args = ap.parse_args()
    args.input_data = {}
    levels = [int(c) for c in args.concurrency.split(",")]
    started = now()
    facts = machine()
    cases: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        from tritonkit.repository import build_spec

        repo = Path(tmp) / "repo"
        models = []
        for model in args.models.split(","):
            specs = SPECS.get(model, ())
            if not specs or not all(spec.exists() for spec in specs):
                skipped[model] = "no spec (streaming ensemble not merged yet)"
                continue
            for spec in specs:
                build_spec(spec, repo)
            models.append(model)
        args.input_data["arr_coc_stream"] = arr_coc_data(Path(tmp) / "arr_coc.json")
        high = [c for c in levels if c not in [int(x) for x in args.arr_coc_concurrency.split(",")]]
        if "arr_coc_stream" in models and high:
            skipped[f"arr_coc_stream c={','.join(map(str, high))}"] = "not in --arr-coc-concurrency"
        with LocalTritonServer(repo) as server:
            for model in models:
                model_levels = levels
                if model == "arr_coc_stream":
                    model_levels = [int(x) for x in args.arr_coc_concurrency.split(",")]
                for conc in model_levels:
                    cases.append(measure_case(model, conc, server, args))
    verdicts = {}
    for c in cases:
        for metric in METRICS:
            key = f"{metric}_p50_us"
            r = c["ratio"][key]
            verdicts[f"{c['model']} c={c['concurrency']} {metric} p50"] = verdict(r, 0.05)
    data = {
        "benchmark": "stream_accuracy",
        "command": command_line(),
        "started_at": started,
        "finished_at": now(),
        "machine": {**facts, "load_avg_at_end": list(os.getloadavg())},
        "perf_analyzer": f"tritonclient=={PA_VERSION} wheel, --streaming over gRPC, --profile-export-file",
        "notes": (
            "perf_analyzer's figures are computed from its per-response export with tritonkit's "
            "definitions (TTFT: send -> first response with outputs; ITL: (last - first) / (n - 1) "
            "per request; request latency: send -> last response with outputs, perf_analyzer 2.51's "
            "own rule) over the requests ending in its last three windows. Ratios are tritonkit / "
            "perf_analyzer, medians over the rounds; load_avg (1 min) is recorded around every "
            "measurement: the 2-core box is shared by other jobs."
        ),
        "settings": {k: v for k, v in vars(args).items() if k != "input_data"},
        "skipped": skipped,
        "verdicts": verdicts,
        "cases": cases,
    }
    finish_accuracy(f"stream_accuracy{args.tag}", data, verdicts, lambda png: plot(cases, png), 0.05)


if __name__ == "__main__":
    main()
