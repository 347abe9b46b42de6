"""Per-stage figures of `tritonkit perf` against perf_analyzer 2.51's composing-model statistics.

One local tritonserver serves the example pipelines; for each pipeline, perf_analyzer and
`tritonkit perf` take turns (``--repeats`` each, same concurrency, window length and stability
rule), and each stage's per-request queue and compute times are compared (medians over the
repeats). `arr_coc` is an ensemble (perf_analyzer prints its composing models by itself);
`vlm_stream` is a decoupled BLS front (perf_analyzer: ``--streaming
--bls-composing-models=vlm_features``; tritonkit: the BLS call found in the repository's
source). The two tools never run at once, so the figures come from different windows on a
shared 2-core box: the load average is recorded beside every run.

    .venv/bin/python benchmarks/stage_breakdown.py [--repeats 3]

Writes benchmarks/results/stage_breakdown.{json,png}.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _perf_common import RESULTS, build_repository, command_line, machine, now, perf_analyzer, write_result  # noqa: E402

from tritonkit.perf import PerfSettings, run_perf  # noqa: E402
from tritonkit.perf.inputs import encode_image_png  # noqa: E402
from tritonkit.perf.stages import Stage, stage_deltas, stage_snapshot  # noqa: E402
from tritonkit.server import LocalTritonServer  # noqa: E402

PA_VERSION = "2.51.0"
SPECS = ("vlm.yaml", "arr_coc.yaml", "vlm_stream.yaml")
#: pipeline -> (perf_analyzer's extra flags, whether the request carries MAX_TOKENS)
CASES: dict[str, tuple[list[str], bool]] = {
    "arr_coc": ([], False),
    "vlm_stream": (["--streaming", "--bls-composing-models=vlm_features"], True),
}
PHASES = ("queue_us", "compute_input_us", "compute_infer_us", "compute_output_us")
_MODEL_LINE = re.compile(r"^\s*(\S+), version: (\S*)\s*$")
_LATENCY = re.compile(
    r"Avg request latency: (\d+) usec \(overhead (\d+) usec \+ queue (\d+) usec \+ compute input (\d+) usec"
    r" \+ compute infer (\d+) usec \+ compute output (\d+) usec\)"
)


def inputs(tmp: Path, max_tokens: bool) -> tuple[Path, Path]:
    """The same request for both tools: perf_analyzer's JSON and tritonkit's input directory."""
    import numpy as np

    png = encode_image_png(np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8))
    query = "where is the red square?"
    entry: dict[str, Any] = {
        "RAW_IMAGE": {"content": list(png), "shape": [len(png)]},
        "TEXT_QUERY": {"content": [query], "shape": [1]},
    }
    folder = tmp / ("stream-inputs" if max_tokens else "inputs")
    folder.mkdir(exist_ok=True)
    (folder / "RAW_IMAGE").write_bytes(png)
    (folder / "TEXT_QUERY").write_bytes(query.encode())
    if max_tokens:
        entry["MAX_TOKENS"] = {"content": [4], "shape": [1]}
        (folder / "MAX_TOKENS").write_bytes(np.array([4], dtype=np.int32).tobytes())
    pa = tmp / f"{folder.name}.json"
    pa.write_text(json.dumps({"data": [entry]}))
    return pa, folder


def parse_composing(stdout: str) -> dict[str, dict[str, float]]:
    """perf_analyzer's "Composing models:" blocks -> model -> per-request phases (us)."""
    out: dict[str, dict[str, float]] = {}
    section = stdout.split("Composing models:", 1)
    if len(section) < 2:
        return out
    current: str | None = None
    for line in section[1].splitlines():
        named = _MODEL_LINE.match(line)
        if named:
            current = named.group(1)
            continue
        timed = _LATENCY.search(line)
        if timed and current is not None:
            _, _, queue, c_in, c_infer, c_out = (float(v) for v in timed.groups())
            out[current] = {
                "queue_us": queue,
                "compute_input_us": c_in,
                "compute_infer_us": c_infer,
                "compute_output_us": c_out,
            }
            current = None
    return out


def _server_stats(address: str) -> dict[str, Any]:
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(address)
    try:
        return dict(client.get_inference_statistics("", as_json=True))
    finally:
        client.close()


def run_pa(
    address: str, model: str, flags: list[str], data: Path, args: argparse.Namespace
) -> dict[str, Any]:
    """perf_analyzer's own figures, and tritonkit's accounting (statistics deltas) of the same
    run: the same requests, so only the arithmetic and the window differ (perf_analyzer reports
    its last stable windows; the deltas cover its whole run)."""
    cmd, env = perf_analyzer(PA_VERSION)
    full = [
        *cmd,
        "-m",
        model,
        *flags,
        "-u",
        address,
        "-i",
        "grpc",
        "--concurrency-range",
        f"{args.concurrency}:{args.concurrency}",
        "-p",
        str(args.interval_ms),
        "-s",
        str(args.stability),
        "--max-trials",
        str(args.max_trials),
        "--input-data",
        str(data),
    ]
    load = os.getloadavg()
    before = _server_stats(address)
    proc = subprocess.run(full, env=env, capture_output=True, text=True, timeout=600)
    after = _server_stats(address)
    stages = parse_composing(proc.stdout) if proc.returncode == 0 else {}
    names = sorted(stages)
    same_run = stage_deltas(
        [Stage(model=n, via="named", parent=model) for n in names],
        stage_snapshot(before, names),
        stage_snapshot(after, names),
    )
    return {
        "ok": proc.returncode == 0 and bool(stages),
        "command": "perf_analyzer " + " ".join(full[1:]),
        "error": ""
        if proc.returncode == 0
        else " / ".join((proc.stdout + proc.stderr).strip().splitlines()[-3:]),
        "load_avg": [list(load), list(os.getloadavg())],
        "stages": stages,
        "tritonkit_accounting_same_run": {st.model: {p: getattr(st, p) for p in PHASES} for st in same_run},
    }


def run_tk(url: str, model: str, data: Path, repo: Path, args: argparse.Namespace) -> dict[str, Any]:
    settings = PerfSettings(
        url=url,
        model=model,
        protocol="grpc",
        levels=(float(args.concurrency),),
        measurement_interval_ms=args.interval_ms,
        stability_percentage=args.stability,
        max_trials=args.max_trials,
        warmup_s=0.0,
        input_data=str(data),
        repository=str(repo),
    )
    load = os.getloadavg()
    (step,) = run_perf(settings).steps
    return {
        "ok": step.stable and bool(step.stages),
        "command": f"tritonkit perf {url} {model} --protocol grpc --concurrency {args.concurrency} "
        f"--measurement-interval {args.interval_ms} --stability-percentage {args.stability:g} "
        f"--max-trials {args.max_trials} --warmup 0 --input-data {data.name} --repository REPO",
        "error": "" if step.stable else step.stability,
        "load_avg": [list(load), list(os.getloadavg())],
        "stages": {st.model: {p: getattr(st, p) for p in PHASES} for st in step.stages},
        "stages_json": [st.to_dict() for st in step.stages],
    }


def medians(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    ok = [r for r in runs if r["ok"]]
    models = sorted({m for r in ok for m in r["stages"]})
    out: dict[str, dict[str, float]] = {}
    for model in models:
        rows = [r["stages"][model] for r in ok if model in r["stages"]]
        fig = {p: statistics.median(row[p] for row in rows) for p in PHASES}
        fig["time_us"] = statistics.median(sum(row[p] for p in PHASES) for row in rows)
        out[model] = fig
    return out


def compare(pa: dict[str, dict[str, float]], tk: dict[str, dict[str, float]]) -> dict[str, Any]:
    rows = {}
    for model in sorted(set(pa) & set(tk)):
        ratio = tk[model]["time_us"] / pa[model]["time_us"] if pa[model]["time_us"] else None
        infer = (
            tk[model]["compute_infer_us"] / pa[model]["compute_infer_us"]
            if pa[model]["compute_infer_us"]
            else None
        )
        rows[model] = {
            "pa_time_us": pa[model]["time_us"],
            "tk_time_us": tk[model]["time_us"],
            "time_ratio": ratio,
            "compute_infer_ratio": infer,
            "within_10pct": ratio is not None and abs(ratio - 1) <= 0.10,
        }
    return {
        "stages": rows,
        "only_perf_analyzer": sorted(set(pa) - set(tk)),
        "only_tritonkit": sorted(set(tk) - set(pa)),
    }


BARS = (
    ("perf_analyzer 2.51", "perf_analyzer"),
    ("tritonkit perf\n(its own runs)", "tritonkit"),
    ("tritonkit accounting\n(perf_analyzer's runs)", "tritonkit_accounting_same_run"),
)


def plot(cases: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(cases), figsize=(8 * len(cases), 5))
    fig.subplots_adjust(wspace=0.6)
    for ax, (name, case) in zip(axes if len(cases) > 1 else [axes], cases.items(), strict=True):
        models = list(case["comparison"]["stages"])
        cmap = plt.get_cmap("tab10")
        for x, (_tool, key) in enumerate(BARS):
            bottom = 0.0
            for k, model in enumerate(models):
                fig_ = case["medians"][key].get(model)
                if fig_ is None:
                    continue
                compute = (fig_["time_us"] - fig_["queue_us"]) / 1000
                queue = fig_["queue_us"] / 1000
                ax.bar(
                    x, compute, bottom=bottom, color=cmap(k % 10), width=0.55, label=model if x == 0 else None
                )
                bottom += compute
                ax.bar(x, queue, bottom=bottom, color=cmap(k % 10), alpha=0.35, hatch="//", width=0.55)
                bottom += queue
        ax.set_xticks(list(range(len(BARS))), [label for label, _ in BARS], fontsize=8)
        ax.set_ylabel("ms per stage request, stacked (hatched: queue)")
        ax.set_title(f"{name}: per-stage time, median of {case['repeats']} runs each")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        ax.grid(alpha=0.3, axis="y")
    fig.suptitle(
        "Composing-model statistics: perf_analyzer 2.51 vs tritonkit (its own runs, in turns; and its "
        "accounting of perf_analyzer's runs)"
    )
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--interval-ms", type=int, default=1500)
    parser.add_argument("--stability", type=float, default=30.0)
    parser.add_argument("--max-trials", type=int, default=8)
    args = parser.parse_args()
    started = now()
    info = machine()
    cases: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        repo = build_repository(tmp / "model_repository", SPECS)
        with LocalTritonServer(repo, startup_timeout=300) as server:
            for model, (flags, max_tokens) in CASES.items():
                pa_data, tk_data = inputs(tmp, max_tokens)
                runs: dict[str, list[dict[str, Any]]] = {"perf_analyzer": [], "tritonkit": []}
                for _ in range(args.repeats):
                    runs["perf_analyzer"].append(run_pa(server.grpc_address, model, flags, pa_data, args))
                    runs["tritonkit"].append(run_tk(server.grpc_url, model, tk_data, repo, args))
                meds = {tool: medians(r) for tool, r in runs.items()}
                same = [
                    {"ok": r["ok"], "stages": r["tritonkit_accounting_same_run"]}
                    for r in runs["perf_analyzer"]
                ]
                meds["tritonkit_accounting_same_run"] = medians(same)
                cases[model] = {
                    "repeats": args.repeats,
                    "perf_analyzer_flags": flags,
                    "runs": runs,
                    "medians": meds,
                    "comparison": compare(meds["perf_analyzer"], meds["tritonkit"]),
                    "comparison_same_run": compare(
                        meds["perf_analyzer"], meds["tritonkit_accounting_same_run"]
                    ),
                }
    result = {
        "benchmark": "stage_breakdown",
        "started_at": started,
        "finished_at": now(),
        "command": command_line(),
        "machine": {**info, "load_avg_at_end": list(os.getloadavg())},
        "perf_analyzer": PA_VERSION,
        "settings": vars(args),
        "note": "perf_analyzer and tritonkit perf run in turns, not at once: each figure comes from "
        "its own windows on a shared 2-core box (load averages per run)",
        "cases": cases,
    }
    path = write_result("stage_breakdown", result)
    plot(cases, RESULTS / "stage_breakdown.png")
    for model, case in cases.items():
        for key in ("comparison", "comparison_same_run"):
            for stage, row in case[key]["stages"].items():
                ratio = row["time_ratio"]
                print(  # noqa: T201 - a benchmark script reports on stdout
                    f"{key:20s} {model:12s} {stage:22s} pa {row['pa_time_us'] / 1000:8.2f} ms  tk "
                    f"{row['tk_time_us'] / 1000:8.2f} ms  tk/pa {ratio if ratio is None else round(ratio, 3)}"
                )
    print(f"wrote {path}")  # noqa: T201


if __name__ == "__main__":
    main()
