"""Is `tritonkit perf` as accurate as Triton's perf_analyzer? Same server, same model, same rule.

Starts one real local tritonserver serving ``densenet_onnx`` (ensembles/densenet.yaml, CPU
variant) and measures, over HTTP and gRPC, at a low concurrency (latency) and a saturating one
(throughput), with Triton's perf_analyzer (C++ binary from the tritonclient 2.41.0 wheel, see
_perf_common.perf_analyzer) and with tritonkit perf, using the same measurement interval and
stability rule. The two tools alternate (and swap order every round) so drift on the shared
machine hits both alike; medians over --rounds are compared.

Target: tritonkit's saturated throughput and low-concurrency latency (avg and p50) within 10% of
perf_analyzer's. Writes benchmarks/results/perf_accuracy.json (with the exact command) and .png.

    .venv/bin/python benchmarks/perf_accuracy.py [--concurrency 1,8] [--interval-ms 2000] [--rounds 1]
"""

from __future__ import annotations

import argparse
import csv
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _perf_common import (  # noqa: E402
    build_repository,
    command_line,
    finish_accuracy,
    machine,
    now,
    perf_analyzer,
    verdict,
)

from tritonkit.perf import PerfSettings, run_perf  # noqa: E402
from tritonkit.server import LocalTritonServer  # noqa: E402

MODEL = "densenet_onnx"


def run_perf_analyzer(
    address: str, protocol: str, concurrency: int, args: argparse.Namespace
) -> dict[str, Any]:
    cmd, env = perf_analyzer()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "pa.csv"
        full = [
            *cmd,
            "-m",
            MODEL,
            "-u",
            address,
            "-i",
            protocol,
            "--concurrency-range",
            f"{concurrency}:{concurrency}",
            "-p",
            str(args.interval_ms),
            "-s",
            str(args.stability),
            "--max-trials",
            str(args.max_trials),
            "-f",
            str(out),
        ]
        proc = subprocess.run(full, env=env, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0 or not out.exists():
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
            return {"ok": False, "error": " / ".join(tail), "command": " ".join(full[1:])}
        row = next(csv.DictReader(out.open()))
    parts = (
        "Client Send",
        "Network+Server Send/Recv",
        "Server Queue",
        "Server Compute Input",
        "Server Compute Infer",
        "Server Compute Output",
        "Client Recv",
    )
    return {
        "ok": True,
        "command": "perf_analyzer " + " ".join(full[1:-2]),
        "throughput": float(row["Inferences/Second"]),
        "avg_us": float(sum(int(row[p]) for p in parts)),  # perf_analyzer's average is the sum of its parts
        "p50_us": float(row["p50 latency"]),
        "p90_us": float(row["p90 latency"]),
        "p99_us": float(row["p99 latency"]),
        "server_queue_us": float(row["Server Queue"]),
        "server_infer_us": float(row["Server Compute Infer"]),
    }


def run_tritonkit(url: str, protocol: str, concurrency: int, args: argparse.Namespace) -> dict[str, Any]:
    settings = PerfSettings(
        url=url,
        model=MODEL,
        protocol=protocol,
        levels=(float(concurrency),),
        measurement_interval_ms=args.interval_ms,
        stability_percentage=args.stability,
        max_trials=args.max_trials,
        warmup_s=0.0,
        workers=args.workers,
    )
    run = run_perf(settings)
    (step,) = run.steps
    assert step.latency is not None and step.server is not None
    return {
        "ok": step.stable,
        "error": "" if step.stable else step.stability,
        "command": (
            f"tritonkit perf {url} {MODEL} --protocol {protocol} --concurrency {concurrency} "
            f"--measurement-interval {args.interval_ms} --stability-percentage {args.stability:g} "
            f"--max-trials {args.max_trials} --warmup 0 --workers {args.workers}"
        ),
        "throughput": step.throughput,
        "avg_us": step.latency.avg_us,
        "p50_us": step.latency.p50_us,
        "p90_us": step.latency.p90_us,
        "p99_us": step.latency.p99_us,
        "server_queue_us": step.server.queue_us,
        "server_infer_us": step.server.compute_infer_us,
        "client_cpu_us_per_request": step.client_cpu_us_per_request,
    }


def _median(samples: list[dict[str, Any]], key: str) -> float | None:
    vals = [s[key] for s in samples if s.get("ok") and key in s]
    return statistics.median(vals) if vals else None


def plot(cases: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{c['protocol']} c={c['concurrency']}" for c in cases]
    xs = range(len(cases))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    w = 0.38
    for off, tool, color in ((-w / 2, "perf_analyzer", "#3d5a80"), (w / 2, "tritonkit", "#ee6c4d")):
        ax1.bar(
            [x + off for x in xs], [c[tool]["throughput"] or 0 for c in cases], w, label=tool, color=color
        )
        ax2.bar(
            [x + off for x in xs],
            [(c[tool]["avg_us"] or 0) / 1000 for c in cases],
            w,
            label=f"{tool} avg",
            color=color,
        )
        ax2.scatter(
            [x + off for x in xs],
            [(c[tool]["p99_us"] or 0) / 1000 for c in cases],
            marker="^",
            color="black",
            zorder=3,
            label="p99" if tool == "tritonkit" else None,
        )
    for ax in (ax1, ax2):
        ax.set_xticks(list(xs), labels)
        ax.legend(fontsize=8)
    for x, c in zip(xs, cases, strict=True):
        r = c["ratio"]["throughput"]
        if r:
            ax1.annotate(
                f"{r:.2f}x",
                (x, max(c["perf_analyzer"]["throughput"] or 0, c["tritonkit"]["throughput"] or 0)),
                ha="center",
                va="bottom",
                fontsize=8,
            )
    ax1.set_ylabel("inferences/s")
    ax1.set_title("throughput (label: tritonkit / perf_analyzer)")
    ax2.set_ylabel("latency (ms)")
    ax2.set_title("average latency (bars) and p99 (triangles)")
    fig.suptitle(f"tritonkit perf vs perf_analyzer: {MODEL} on a local CPU tritonserver")
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--concurrency", default="1,8", help="low (latency) and saturating (throughput) levels")
    ap.add_argument("--protocols", default="http,grpc")
    ap.add_argument("--interval-ms", type=int, default=2000)
    ap.add_argument("--stability", type=float, default=10.0)
    ap.add_argument("--max-trials", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=1, help="alternating rounds per case (median reported)")
    ap.add_argument("--workers", type=int, default=0)
    args = ap.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    started = now()
    facts = machine()
    cases: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        repo = build_repository(Path(tmp) / "repo", ("densenet.yaml",))
        with LocalTritonServer(repo) as server:
            for protocol in args.protocols.split(","):
                address = server.http_address if protocol == "http" else server.grpc_address
                url = server.http_url if protocol == "http" else server.grpc_url
                for conc in levels:
                    pa: list[dict[str, Any]] = []
                    tk: list[dict[str, Any]] = []
                    for r in range(args.rounds):
                        # alternate which tool goes first, so drift on the shared box favours neither
                        if r % 2 == 0:
                            pa.append(run_perf_analyzer(address, protocol, conc, args))
                            tk.append(run_tritonkit(url, protocol, conc, args))
                        else:
                            tk.append(run_tritonkit(url, protocol, conc, args))
                            pa.append(run_perf_analyzer(address, protocol, conc, args))
                        print(protocol, conc, "pa", pa[-1], "\n   tk", tk[-1], flush=True)
                    case: dict[str, Any] = {"protocol": protocol, "concurrency": conc}
                    for name, samples in (("perf_analyzer", pa), ("tritonkit", tk)):
                        case[name] = {
                            k: _median(samples, k)
                            for k in ("throughput", "avg_us", "p50_us", "p90_us", "p99_us")
                        }
                        case[name]["samples"] = samples
                    case["ratio"] = {
                        k: (case["tritonkit"][k] / case["perf_analyzer"][k])
                        if case["tritonkit"][k] and case["perf_analyzer"][k]
                        else None
                        for k in ("throughput", "avg_us", "p50_us", "p99_us")
                    }
                    cases.append(case)
    low, high = min(levels), max(levels)
    verdicts = {}
    for c in cases:
        key = "throughput" if c["concurrency"] == high else "avg_us"
        r = c["ratio"][key]
        verdicts[f"{c['protocol']} c={c['concurrency']} {key}"] = verdict(r, 0.10)
    data = {
        "benchmark": "perf_accuracy",
        "command": command_line(),
        "started_at": started,
        "finished_at": now(),
        "machine": facts,
        "model": MODEL,
        "notes": (
            f"low concurrency {low}: latency compared (avg; p50/p99 recorded); concurrency {high}: "
            "throughput compared. Ratios are tritonkit / perf_analyzer. The box is shared by other "
            "jobs, so run-to-run noise of several percent is expected for both tools."
        ),
        "settings": vars(args),
        "verdicts": verdicts,
        "cases": cases,
    }
    finish_accuracy("perf_accuracy", data, verdicts, lambda png: plot(cases, png), 0.10)


if __name__ == "__main__":
    main()
