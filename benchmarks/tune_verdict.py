"""Does tune's verdict hold up? Two tune runs on a model whose best config is known by
construction, their winners re-measured by perf_analyzer beside the original config.

``batch_bound`` (benchmarks/models) sleeps 20 ms plus 0.2 ms per request of a batch; it starts
with one instance and no dynamic batching. At concurrency ``c`` a config with ``i`` instances
and dynamic batching up to ``m`` runs batches of ``b = min(m, c / i)`` and serves
``i * b / (20 + 0.2 b)`` requests per ms; without batching ``i / 20.2``. At c=16 the original
config serves ~50/s and the best (2 instances, batching, max batch >= 8) ~741/s: ~15x. The
sleep takes no CPU, so the ranking holds on a busy 2-core box.

Each run is ``tune(TuneSettings(concurrency=(c,), latency_budget=p99, ...))`` with the default
strategy and windows (over HTTP, tune's default; ``--tune-protocol grpc`` for gRPC), its final
check included (winner and original config in turns). Then one
fresh server loads the original config and each run's winner in turn (the order rotates every
round) and perf_analyzer 2.51 measures each at ``c`` (2 s windows, over HTTP as tune measured;
it stabilises on throughput and average latency as tune's windows do, ``--pa-percentile 99``
for p99, which failed to stabilise in 10 windows in 4 of 6 measurements of the winners).
Recorded per run: the winner, what the report says (its per-load row at the peak is the winner,
the final check's margin and spread), the modelled throughput of the winner, tune's time
breakdown, and perf_analyzer's figures against tune's: the winner / original ratio, and the
winner's own throughput (tune's final-check median against perf_analyzer's median). The
criteria (issue #44): perf_analyzer's ratio >= 12x and tune's figure within 5% of perf_analyzer's.

    PYTHONPATH=. .venv/bin/python benchmarks/tune_verdict.py [--runs 2 --rounds 3 --concurrency 16]

Writes benchmarks/results/tune_verdict.json and .png. perf_analyzer is set up as in
benchmarks/tune_vs_ma.py (cached under ~/.cache/tritonkit/ma-race).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _perf_common import RESULTS, command_line, machine, now, write_result  # noqa: E402
from tune_vs_ma import (  # noqa: E402
    MODEL,
    MODEL_SRC,
    _dump,
    measurement_log,
    perf_analyzer_at,
    setup_perf_analyzer,
    tune_figure,
)

from tritonkit.server import LocalTritonServer  # noqa: E402
from tritonkit.tune import TuneSettings, tune  # noqa: E402
from tritonkit.tune.control import ModelControl  # noqa: E402

BATCH_MS, ITEM_MS = 20.0, 0.2
#: what each run must show (issue #44): the winner >= this many times the original config by
#: perf_analyzer, and tune's own figure for it within this share of perf_analyzer's
GOAL_RATIO = 12.0
GOAL_AGREEMENT = 0.05


def modelled(settings: dict[str, Any], c: float) -> float:
    """requests/s the construction gives a config at concurrency ``c`` (see the docstring)."""
    inst = int(settings.get(f"{MODEL}.instance_count", 1))
    if not settings.get(f"{MODEL}.dynamic_batching", False):
        return inst / (BATCH_MS + ITEM_MS) * 1000.0
    b = max(1.0, min(float(settings.get(f"{MODEL}.max_batch_size", 32)), c / inst))
    return inst * b / (BATCH_MS + ITEM_MS * b) * 1000.0


def run_tune(repo: Path, concurrency: int, p99_ms: float, protocol: str = "http") -> dict[str, Any]:
    settings = TuneSettings(
        model=MODEL,
        repository=repo,
        model_config_name=None,
        latency_budget=f"p99={p99_ms:g}ms",
        concurrency=(concurrency,),
        protocol=protocol,
    )
    load0 = os.getloadavg()
    t0 = time.monotonic()
    result = tune(settings)
    wall = time.monotonic() - t0
    w = result.winner
    per_level = dict(result.search.per_level)
    peak = per_level.get(float(concurrency))
    check = result.search.check
    return {
        "wall_s": round(wall, 1),
        "time_breakdown": result.time_breakdown(),
        "load_avg_before": list(load0),
        "load_avg_after": list(os.getloadavg()),
        "server_restarts": result.server_restarts,
        "measurements": len(result.measurements),
        "winner": None
        if w is None
        else {
            "settings": dict(w.settings),
            "throughput": round(w.outcome.throughput, 1),
            "p99_ms": round(w.outcome.latency_us.get("p99", 0) / 1000, 1),
            "stable": w.outcome.stable,
            "windows": w.outcome.windows,
            "window_ms": w.outcome.window_ms,
            "modelled_throughput": round(modelled(dict(w.settings), concurrency), 1),
        },
        "one_winner": peak is not None and w is not None and peak is w,
        "per_level_at_peak": None if peak is None else {"settings": dict(peak.settings), "phase": peak.phase},
        "final_check": None if check is None else check.to_dict(),
        "final_check_sentence": None if check is None else check.sentence(),
        "config_pbtxt": None if w is None else _dump(result.winner_configs()[MODEL]),
        "measurement_log": measurement_log(result),
    }


def head_to_head(
    pa: Path,
    repo: Path,
    configs: dict[str, str],
    concurrency: int,
    rounds: int,
    interval_ms: int,
    *,
    percentile: int | None,
    protocol: str,
) -> dict[str, Any]:
    """perf_analyzer measures each config in turn over ``protocol``, ``rounds`` times."""
    from tritonkit.config import parse_config

    server = LocalTritonServer(repo, extra_args=["--model-control-mode=explicit", f"--load-model={MODEL}"])
    raw: dict[str, list[dict[str, Any]]] = {name: [] for name in configs}
    names = list(configs)
    with server:
        url = (server.http_url if protocol == "http" else server.grpc_url).split("://", 1)[-1]
        control = ModelControl(server.http_url)
        try:
            for r in range(rounds):
                for name in names[r % len(names) :] + names[: r % len(names)]:  # rotate the order
                    control.load(MODEL, parse_config(configs[name]))
                    m = perf_analyzer_at(
                        pa, url, concurrency, interval_ms, protocol=protocol, percentile=percentile
                    )
                    m["load_avg"] = os.getloadavg()[0]
                    raw[name].append(m)
                    print(f"  round {r} {name}: {m}", flush=True)
        finally:
            control.close()
    return {
        "concurrency": concurrency,
        "rounds": rounds,
        "interval_ms": interval_ms,
        "protocol": protocol,
        "stabilised_on": f"throughput and p{percentile} latency"
        if percentile
        else "throughput and avg latency",
        "raw": raw,
    }


def medians(h2h: dict[str, Any]) -> dict[str, float]:
    """Per config, the median of the rounds perf_analyzer completed (a round it could not
    stabilise in 10 windows has no figure: counting it as 0 would pull the median down)."""
    out = {}
    for name, ms in h2h["raw"].items():
        done = [x["throughput"] for x in ms if x["throughput"] > 0]
        out[name] = statistics.median(done) if done else 0.0
    return out


def summarize(doc: dict[str, Any]) -> None:
    """The medians and the verdict per run, from the recorded rounds (rerunnable on a result:
    ``python benchmarks/tune_verdict.py --summarize benchmarks/results/tune_verdict.json``)."""
    h2h = doc["head_to_head"]
    h2h["median"] = medians(h2h)
    h2h["failed_rounds"] = {n: sum(1 for x in ms if x["throughput"] <= 0) for n, ms in h2h["raw"].items()}
    base = h2h["median"]["original"]
    verdict: dict[str, Any] = {}
    for i, run in enumerate(doc["runs"]):
        name = f"run{i + 1}"
        if not h2h["median"].get(name) or not base:
            continue
        pa_ratio = h2h["median"][name] / base
        check = run["final_check"] or {}
        tune_ratio = 1 + check["margin_pct"] / 100 if check.get("margin_pct") is not None else None
        tune_thr = tune_figure(run)
        pa_thr = h2h["median"][name]
        agreement = None if tune_thr is None else tune_thr / pa_thr
        verdict[name] = {
            "perf_analyzer_ratio": round(pa_ratio, 2),
            "tune_final_check_ratio": None if tune_ratio is None else round(tune_ratio, 2),
            "tune_over_perf_analyzer": None if tune_ratio is None else round(tune_ratio / pa_ratio, 3),
            "tune_winner_throughput": None if tune_thr is None else round(tune_thr, 1),
            "perf_analyzer_winner_throughput": round(pa_thr, 1),
            "tune_over_perf_analyzer_throughput": None if agreement is None else round(agreement, 3),
            "criteria": {
                "ratio_at_least": GOAL_RATIO,
                "ratio_met": pa_ratio >= GOAL_RATIO,
                "agreement_within": GOAL_AGREEMENT,
                "agreement_met": agreement is not None and abs(agreement - 1) <= GOAL_AGREEMENT,
            },
            "winner_vs_known_best_modelled": round(
                run["winner"]["modelled_throughput"] / doc["known_best"]["modelled_throughput"], 3
            )
            if run["winner"]
            else None,
            "one_winner_in_report": run["one_winner"],
        }
    if len(verdict) >= 2:
        ratios = [v["perf_analyzer_ratio"] for v in verdict.values()]
        verdict["run_to_run_perf_analyzer_ratio"] = round(min(ratios) / max(ratios), 3)
    doc["verdict"] = verdict


def _plot(doc: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    h2h = doc.get("head_to_head") or {}
    names = list(h2h.get("median", {}))
    for i, name in enumerate(names):
        ax1.bar(i, h2h["median"][name], color="#3d5a80" if name != "original" else "#c0c0c0")
        ax1.scatter([i] * len(h2h["raw"][name]), [x["throughput"] for x in h2h["raw"][name]], c="k", s=10)
    ax1.set_xticks(range(len(names)), names)
    ax1.set_ylabel(f"infer/s at c={doc['concurrency']} (perf_analyzer 2.51)")
    ax1.set_title("winners and the original config, same server")
    runs = doc.get("runs", [])
    for i, run in enumerate(runs):
        check = run.get("final_check") or {}
        if check.get("margin_pct") is not None:
            lo, hi = check["spread_pct"]
            ratio = 1 + check["margin_pct"] / 100
            ax2.errorbar(
                i - 0.1,
                ratio,
                yerr=[[ratio - (1 + lo / 100)], [(1 + hi / 100) - ratio]],
                fmt="o",
                color="#ee6c4d",
                label="tune's final check" if i == 0 else None,
            )
        pa = (doc.get("verdict") or {}).get(f"run{i + 1}", {}).get("perf_analyzer_ratio")
        if pa:
            ax2.scatter(
                [i + 0.1], [pa], marker="s", color="#3d5a80", label="perf_analyzer" if i == 0 else None
            )
    ax2.set_xticks(range(len(runs)), [f"run {i + 1}" for i in range(len(runs))])
    ax2.set_ylabel("winner / original config")
    ax2.set_title("the margin tune reports vs perf_analyzer's")
    ax2.legend(fontsize=8)
    fig.suptitle(f"{MODEL}: does tune's verdict hold up? (concurrency {doc['concurrency']})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--p99-ms", type=float, default=500.0)
    p.add_argument("--interval-ms", type=int, default=2000)
    p.add_argument(
        "--pa-percentile",
        type=int,
        default=0,
        help="perf_analyzer stabilises on this latency percentile (0: the average, as tune's windows do)",
    )
    p.add_argument("--pa-protocol", choices=("http", "grpc"), default="http", help="perf_analyzer's protocol")
    p.add_argument(
        "--tune-protocol", choices=("http", "grpc"), default="http", help="the protocol tune measures over"
    )
    p.add_argument("--out", type=Path, default=RESULTS / "tune_verdict.json")
    p.add_argument(
        "--remeasure",
        type=Path,
        help="skip the tune runs: perf_analyzer re-measures the winners of this earlier result (to --out)",
    )
    p.add_argument("--summarize", type=Path, help="recompute medians, verdict and plot of a result")
    args = p.parse_args()
    if args.summarize:
        doc = json.loads(args.summarize.read_text())
        summarize(doc)
        _plot(doc, write_result(args.summarize.stem, doc).with_suffix(".png"))
        print(f"verdict: {doc['verdict']}")
        return
    doc: dict[str, Any] = {
        "benchmark": "tune_verdict",
        "command": command_line(),
        "started": now(),
        "machine": machine(),
        "concurrency": args.concurrency,
        "p99_ms": args.p99_ms,
        "tune_protocol": args.tune_protocol,
        "known_best": {
            "settings": {
                f"{MODEL}.instance_count": 2,
                f"{MODEL}.dynamic_batching": True,
                "max_batch_size": ">= 8",
            },
            "modelled_throughput": round(
                modelled({f"{MODEL}.instance_count": 2, f"{MODEL}.dynamic_batching": True}, args.concurrency),
                1,
            ),
            "original_modelled_throughput": round(modelled({}, args.concurrency), 1),
        },
        "runs": [],
    }
    if args.remeasure:
        earlier = json.loads(args.remeasure.read_text())
        doc["runs"], doc["remeasured_from"] = earlier["runs"], str(args.remeasure.name)
    pa = setup_perf_analyzer()
    with tempfile.TemporaryDirectory(prefix="tune-verdict-") as tmp:
        repo = Path(tmp) / "repo"
        shutil.copytree(MODEL_SRC, repo / MODEL)
        original = (repo / MODEL / "config.pbtxt").read_text()
        for i in range(0 if args.remeasure else args.runs):
            print(f"== tune run {i + 1}", flush=True)
            run = run_tune(repo, args.concurrency, args.p99_ms, args.tune_protocol)
            print(f"   {run['winner']}\n   {run['final_check_sentence']}", flush=True)
            doc["runs"].append(run)
            write_result(args.out.stem, doc)
        configs = {"original": original}
        for i, run in enumerate(doc["runs"]):
            if run["config_pbtxt"]:
                configs[f"run{i + 1}"] = run["config_pbtxt"]
        print("== perf_analyzer re-measures the winners and the original config", flush=True)
        h2h = head_to_head(
            pa,
            repo,
            configs,
            args.concurrency,
            args.rounds,
            args.interval_ms,
            percentile=args.pa_percentile or None,
            protocol=args.pa_protocol,
        )
        doc["head_to_head"] = h2h
    summarize(doc)
    doc["finished"] = now()
    doc["load_avg_at_end"] = list(os.getloadavg())
    path = write_result(args.out.stem, doc)
    _plot(doc, path.with_suffix(".png"))
    print(f"verdict: {doc['verdict']}\nwrote {path}", flush=True)


if __name__ == "__main__":
    main()
