"""Does dynamic batching multiply throughput at high concurrency? Measured on this CPU box.

Builds the example pipelines (ensembles/densenet.yaml, ensembles/arr_coc.yaml), copies
``densenet_onnx`` and the ARR-COC ``propositional_scorer`` into one benchmark repository under
one name per configuration variant, rewritten through the tritonkit.config API:

- ``off``: the spec's config with ``dynamic_batching`` removed (every request runs alone);
- ``spec``: the config exactly as the spec in ensembles/ writes it;
- tuned variants (``--variants``): other preferred sizes, queue delays and instance counts.

One real local tritonserver serves them all (CPU variant configs), and ``tritonkit perf``
sweeps each over gRPC across concurrency 1..64. The claim under test is "dynamic batching
multiplies throughput 5-8x at high concurrency". Writes benchmarks/results/dynamic_batching.json
(with the exact command, per-variant throughput/latency/executed batch size and the on/off
ratios), dynamic_batching.png, and each run's full `tritonkit perf --json` result under
benchmarks/results/dynamic_batching/ (usable with `tritonkit perf --compare`).

    .venv/bin/python benchmarks/dynamic_batching.py [--concurrency 1,2,4,8,16,32,64] [--variants off,spec,...]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _perf_common import RESULTS, build_repository, command_line, machine, now, write_result  # noqa: E402

from tritonkit.config import read_config, write_config  # noqa: E402
from tritonkit.perf import PerfRun, PerfSettings, parse_levels, run_perf, write_json  # noqa: E402
from tritonkit.perf.plot import plot_runs  # noqa: E402
from tritonkit.server import LocalTritonServer  # noqa: E402

MODELS = ("densenet_onnx", "propositional_scorer")
Edit = Callable[[Any], None]


def _batching(preferred: list[int], delay_us: int) -> Edit:
    def edit(cfg: Any) -> None:
        cfg.dynamic_batching.Clear()
        cfg.dynamic_batching.preferred_batch_size.extend(preferred)
        cfg.dynamic_batching.max_queue_delay_microseconds = delay_us

    return edit


def _delay(delay_us: int) -> Edit:
    """Keep the spec's preferred batch sizes, change only the queue delay."""

    def edit(cfg: Any) -> None:
        cfg.dynamic_batching.max_queue_delay_microseconds = delay_us

    return edit


def _instances(count: int) -> Edit:
    def edit(cfg: Any) -> None:
        for group in cfg.instance_group:
            group.count = count

    return edit


def _off(cfg: Any) -> None:
    cfg.ClearField("dynamic_batching")


def _nothing(cfg: Any) -> None:
    return None


#: variant name -> (description, edits applied to every config file of the model)
VARIANTS: dict[str, tuple[str, list[Edit]]] = {
    "off": ("dynamic_batching removed", [_off]),
    "spec": ("as ensembles/*.yaml writes it", [_nothing]),
    "delay100": ("no preferred sizes, max_queue_delay 100us", [_batching([], 100)]),
    "spec_delay100": ("spec preferred sizes, max_queue_delay 100us", [_delay(100)]),
    "spec_delay500": ("spec preferred sizes, max_queue_delay 500us", [_delay(500)]),
    "delay500": ("no preferred sizes, max_queue_delay 500us", [_batching([], 500)]),
    "pref8_delay500": ("preferred [8], max_queue_delay 500us", [_batching([8], 500)]),
    "spec_x2": ("spec batching, 2 instances", [_instances(2)]),
    "off_x2": ("no batching, 2 instances", [_off, _instances(2)]),
}


def make_variant(built: Path, repo: Path, model: str, variant: str) -> str:
    """Copy ``model`` to ``repo/<model>__<variant>`` and rewrite every config file of it."""
    name = f"{model}__{variant}"
    dst = repo / name
    shutil.copytree(built / model, dst)
    configs = [dst / "config.pbtxt", *sorted((dst / "configs").glob("*.pbtxt"))]
    for path in configs:
        cfg = read_config(path)
        cfg.name = name
        for edit in VARIANTS[variant][1]:
            edit(cfg)
        write_config(cfg, path)
    return name


def summarize(run: PerfRun) -> dict[str, Any]:
    return {
        "levels": [s.level for s in run.steps],
        "throughput": [round(s.throughput, 2) for s in run.steps],
        "p50_ms": [round((s.latency_us("p50") or 0) / 1000, 3) for s in run.steps],
        "p99_ms": [round((s.latency_us("p99") or 0) / 1000, 3) for s in run.steps],
        "avg_batch_size": [round(s.server.avg_batch_size, 2) if s.server else None for s in run.steps],
        "queue_ms": [round(s.server.queue_us / 1000, 3) if s.server else None for s in run.steps],
        "compute_infer_ms": [
            round(s.server.compute_infer_us / 1000, 3) if s.server else None for s in run.steps
        ],
        "stable": [s.stable for s in run.steps],
        "errors": [s.error_count for s in run.steps],
        "client_cpu_us_per_request": [round(s.client_cpu_us_per_request) for s in run.steps],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--variants", default="off,spec,delay100")
    ap.add_argument("--concurrency", default="1,2,4,8,16,32,64")
    ap.add_argument("--protocol", default="grpc")
    ap.add_argument("--interval-ms", type=int, default=1000)
    ap.add_argument("--max-trials", type=int, default=5)
    ap.add_argument("--warmup", type=float, default=0.5)
    ap.add_argument("--tag", default="", help="suffix for the result files (for tuning runs)")
    args = ap.parse_args()
    models = args.models.split(",")
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        ap.error(f"unknown variants {unknown}; known: {sorted(VARIANTS)}")
    levels = parse_levels(args.concurrency)
    started, facts, t0 = now(), machine(), time.monotonic()
    runs: dict[str, dict[str, PerfRun]] = {m: {} for m in models}
    out_dir = RESULTS / f"dynamic_batching{args.tag}"
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        built = build_repository(Path(tmp) / "built", ("densenet.yaml", "arr_coc.yaml"))
        repo = Path(tmp) / "bench"
        repo.mkdir()
        names = {(m, v): make_variant(built, repo, m, v) for m in models for v in variants}
        with LocalTritonServer(repo) as server:
            url = server.grpc_url if args.protocol == "grpc" else server.http_url
            for model in models:
                for variant in variants:
                    name = names[(model, variant)]
                    settings = PerfSettings(
                        url=url,
                        model=name,
                        protocol=args.protocol,
                        levels=levels,
                        measurement_interval_ms=args.interval_ms,
                        max_trials=args.max_trials,
                        warmup_s=args.warmup,
                    )
                    rel = out_dir.relative_to(RESULTS.parent.parent)
                    cmd = (
                        f"tritonkit perf {url} {name} --protocol {args.protocol} "
                        f"--concurrency {args.concurrency} --measurement-interval {args.interval_ms} "
                        f"--max-trials {args.max_trials} --warmup {args.warmup}s --json {rel}/{name}.json"
                    )
                    run = run_perf(settings, command=cmd)
                    runs[model][variant] = run
                    write_json(run, out_dir / f"{name}.json")
                    s = summarize(run)
                    print(
                        model,
                        variant,
                        list(zip(s["levels"], s["throughput"], s["avg_batch_size"], strict=True)),
                        flush=True,
                    )
    results: dict[str, Any] = {}
    for model in models:
        per = {v: summarize(r) for v, r in runs[model].items()}
        entry: dict[str, Any] = {"variants": per}
        if "off" in per:
            base = per["off"]["throughput"]
            entry["speedup_vs_off"] = {
                v: [round(t / b, 2) if b else None for t, b in zip(s["throughput"], base, strict=True)]
                for v, s in per.items()
                if v != "off"
            }
            best_v = max(per, key=lambda v: max(per[v]["throughput"]))
            entry["best_variant"] = best_v
            entry["best_throughput"] = max(per[best_v]["throughput"])
            entry["off_max_throughput"] = max(base)
            entry["best_over_off_max"] = round(entry["best_throughput"] / max(base), 2)
        results[model] = entry
    data = {
        "benchmark": "dynamic_batching",
        "command": command_line(),
        "started_at": started,
        "finished_at": now(),
        "elapsed_s": round(time.monotonic() - t0, 1),
        "machine": facts,
        "claim": "dynamic batching multiplies throughput 5-8x at high concurrency",
        "variants": {v: VARIANTS[v][0] for v in variants},
        "settings": vars(args),
        "results": results,
    }
    path = write_result(f"dynamic_batching{args.tag}", data)
    for model in models:
        plot_runs(
            {f"{v}: {VARIANTS[v][0]}": r for v, r in runs[model].items()},
            RESULTS / f"dynamic_batching{args.tag}_{model}.png",
            title=f"dynamic batching on/off: {model} (local CPU tritonserver, {args.protocol})",
        )
    print(f"wrote {path}")
    for model, entry in results.items():
        print(model, {k: v for k, v in entry.items() if k != "variants"})


if __name__ == "__main__":
    main()
