"""`perf --workers 4` (worker processes over loopback TCP, the local case of `--kube`) against
`--workers 0` (one process) on the clock model (benchmarks/clock_llm.yaml: 32 pieces, the first
20 ms after arrival, then one every 10 ms), issue #54.

Two loads, each measured alternately from one process and from four workers, ``--repeats``
times: concurrency 16 streamed (tokens/s, TTFT p50/p99) and a request rate (throughput,
latency p50/p99). Verdict: the four workers' median within 5% of one process's median.

The merged-percentile check: during every worker run the coordinator's raw records (on its
clock, as drained) and the windows the runner cut are captured; each step's reported p50/p99
latency and TTFT must equal numpy's percentiles over the union of raw records inside the
reported windows.

    flock /tmp/tritonkit-heavy.lock .venv/bin/python benchmarks/perf_workers.py

Writes benchmarks/results/perf_workers.json and .png.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._perf_common import RESULTS, ROOT, command_line, machine, now, write_result  # noqa: E402
from tritonkit.perf import PerfSettings, run_perf  # noqa: E402
from tritonkit.perf import coordinator as coord  # noqa: E402
from tritonkit.perf import windows as win  # noqa: E402
from tritonkit.perf.llm import LlmLoad  # noqa: E402
from tritonkit.server import LocalTritonServer  # noqa: E402

TOLERANCE = 0.05


class _Capture:
    """The coordinator's drained records and the windows cut from them, for one run."""

    def __init__(self) -> None:
        self.records: list[tuple[int, int, Any, Any]] = []
        self.cuts: list[tuple[int, int]] = []
        self._drain = coord.TcpLoad.drain
        self._cut = win.Windows.cut

    def __enter__(self) -> _Capture:
        capture = self

        async def drain(load: coord.TcpLoad) -> Any:
            out = await capture._drain(load)
            capture.records.extend(out[0])
            return out

        def cut(windows: win.Windows, start_ns: int, end_ns: int) -> Any:
            capture.cuts.append((start_ns, end_ns))
            return capture._cut(windows, start_ns, end_ns)

        coord.TcpLoad.drain = drain  # type: ignore[method-assign,assignment]
        win.Windows.cut = cut  # type: ignore[method-assign,assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        coord.TcpLoad.drain = self._drain  # type: ignore[method-assign]
        win.Windows.cut = self._cut  # type: ignore[method-assign]


def _union_check(run: Any, capture: _Capture) -> dict[str, Any]:
    """The step's reported percentiles against numpy over the raw records of its reported windows."""
    step = run.steps[0]
    reported = len(step.windows)
    cuts = capture.cuts[-reported:][-3:]  # the runner reports the last three measured windows
    start, end = cuts[0][0], cuts[-1][1]
    ok = [r for r in capture.records if start <= r[0] < end and r[2] is None]
    lat = np.array([r[1] for r in ok], dtype=np.float64) / 1000.0
    out: dict[str, Any] = {"records": len(ok), "reported_requests": step.requests}
    for q in (50, 99):
        out[f"latency_p{q}_us"] = {
            "reported": step.latency_us(f"p{q}"),
            "numpy_union": float(np.percentile(lat, q)),
        }
    if step.stream is not None and step.stream.ttft is not None:
        ttft = np.array([r[3][0] for r in ok if r[3] is not None and r[3][0] >= 0], dtype=np.float64) / 1000.0
        for q in (50, 99):
            out[f"ttft_p{q}_us"] = {
                "reported": getattr(step.stream.ttft, f"p{q}_us"),
                "numpy_union": float(np.percentile(ttft, q)),
            }
    out["equal"] = len(ok) == step.requests and all(
        abs(v["reported"] - v["numpy_union"]) <= 1e-6 * max(1.0, abs(v["numpy_union"]))
        for k, v in out.items()
        if isinstance(v, dict)
    )
    return out


def _figures(run: Any) -> dict[str, Any]:
    step = run.steps[0]
    st = step.stream
    return {
        "throughput": step.throughput,
        "tokens_per_s": st.output_tokens_per_s if st else None,
        "ttft_p50_us": st.ttft.p50_us if st and st.ttft else None,
        "ttft_p99_us": st.ttft.p99_us if st and st.ttft else None,
        "latency_p50_us": step.latency_us("p50"),
        "latency_p99_us": step.latency_us("p99"),
        "errors": step.error_count,
        "stable": step.stable,
        "client_bound": bool(st and st.client_bound),
        "load_workers": [w.to_dict() for w in step.load_workers],
    }


def _measure(url: str, mode: str, level: float, workers: int, interval_ms: int) -> tuple[dict[str, Any], Any]:
    settings = PerfSettings(
        url=url,
        model="clock_llm",
        mode=mode,
        levels=(level,),
        workers=workers,
        measurement_interval_ms=interval_ms,
        max_trials=8,
        warmup_s=2.0,
        llm=LlmLoad(prompts=16),
    )
    if workers == 0:
        return _figures(run_perf(settings)), None
    with _Capture() as capture:
        run = run_perf(settings)
    return _figures(run), _union_check(run, capture)


def _ratio(a: list[float | None], b: list[float | None]) -> float | None:
    xa = [v for v in a if v is not None]
    xb = [v for v in b if v is not None]
    if not xa or not xb or statistics.median(xa) == 0:
        return None
    return statistics.median(xb) / statistics.median(xa)


def _plot(data: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = {
        "concurrency": ("tokens_per_s", "ttft_p50_us", "ttft_p99_us"),
        "request_rate": ("throughput", "latency_p50_us", "latency_p99_us"),
    }
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, (mode, names) in zip(axes, metrics.items(), strict=True):
        ratios = [data["loads"][mode]["ratios"][n] or 0 for n in names]
        ax.bar(names, ratios, color=["#4c72b0" if abs(r - 1) <= TOLERANCE else "#c44e52" for r in ratios])
        ax.axhline(1.0, color="k", lw=0.8)
        ax.axhspan(1 - TOLERANCE, 1 + TOLERANCE, color="#aaa", alpha=0.3, label="within 5%")
        ax.set_title(f"{mode}: --workers 4 / --workers 0 (median of repeats)")
        ax.set_ylim(0.8, 1.2)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--rate", type=float, default=40.0, help="request rate (requests/s)")
    parser.add_argument("--interval-ms", type=int, default=2000)
    args = parser.parse_args()
    from tritonkit.repository import build_spec

    data: dict[str, Any] = {"command": command_line(), "started": now(), "machine": machine(), "loads": {}}
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "model_repository"
        build_spec(ROOT / "benchmarks" / "clock_llm.yaml", repo)
        with LocalTritonServer(repo) as server:
            for mode, level in (("concurrency", 16.0), ("request_rate", args.rate)):
                runs: dict[str, list[dict[str, Any]]] = {"workers_0": [], "workers_4": []}
                checks = []
                for _ in range(args.repeats):
                    for workers in (0, 4):
                        figures, check = _measure(server.http_url, mode, level, workers, args.interval_ms)
                        runs[f"workers_{workers}"].append(figures)
                        if check is not None:
                            checks.append(check)
                names = (
                    "tokens_per_s",
                    "throughput",
                    "ttft_p50_us",
                    "ttft_p99_us",
                    "latency_p50_us",
                    "latency_p99_us",
                )
                ratios = {
                    n: _ratio([r[n] for r in runs["workers_0"]], [r[n] for r in runs["workers_4"]])
                    for n in names
                }
                data["loads"][mode] = {
                    "level": level,
                    "runs": runs,
                    "ratios": ratios,
                    "within_5pct": {n: r is not None and abs(r - 1) <= TOLERANCE for n, r in ratios.items()},
                    "merged_equals_numpy_union": all(c["equal"] for c in checks),
                    "union_checks": checks,
                }
    data["finished"] = now()
    path = write_result("perf_workers", data)
    _plot(data, RESULTS / "perf_workers.png")
    print(f"wrote {path}")
    for mode, load in data["loads"].items():
        print(
            mode,
            {k: (round(v, 4) if v else v) for k, v in load["ratios"].items()},
            "union:",
            load["merged_equals_numpy_union"],
        )


if __name__ == "__main__":
    main()
