"""`tritonkit tune` on the `arr_coc` pipeline, stage by stage, against the shipped config.

One local tritonserver (``--model-control-mode=explicit``, the configs `tritonkit serve` runs on a
CPU box: the ``cpu`` variants) serves `arr_coc`. Each repeat:

1. ``tune`` with no space given: the pipeline's working stages (the ensemble's steps) are found,
   a per-stage profile of the shipped configs names the bottleneck stage, whose knobs come first
   in the space; the hill climb (``--strategy hill-climb``, which tries knobs in that order) runs
   at the production load (``--concurrency``) under the end-to-end latency budget; the winner is
   profiled again and the stage that bound it is recorded;
2. a head-to-head: the shipped config and the winner, re-measured alternately (``--rounds``
   each, confirmation windows, same load), so the gain is not the luck of one window.

The box is shared (2 cores, other engineers' jobs): the load average is recorded with every
repeat, and the per-round figures are kept beside the medians.

    .venv/bin/python benchmarks/stage_tune.py [--repeats 3] [--concurrency 4]

Writes benchmarks/results/stage_tune.{json,png}.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _perf_common import RESULTS, build_repository, command_line, machine, now, write_result  # noqa: E402

from tritonkit.perf.inputs import encode_image_png  # noqa: E402
from tritonkit.server import LocalTritonServer  # noqa: E402
from tritonkit.tune import Dimension, Space, TuneResult, TuneSettings, tune  # noqa: E402
from tritonkit.tune.runner import original_settings  # noqa: E402

MODEL = "arr_coc"


def _settings(args: argparse.Namespace, url: str, repo: Path, **kw: Any) -> TuneSettings:
    return TuneSettings(
        model=MODEL,
        url=url,
        repository=repo,
        concurrency=(args.concurrency,),
        latency_budget=args.latency_budget,
        screen_window_ms=args.screen_window_ms,
        confirm_window_ms=args.confirm_window_ms,
        max_trials=args.max_trials,
        warmup_s=args.warmup_s,
        input_data=str(args.image),
        **kw,
    )


def _fixed(space: Space, settings: dict[str, Any], level: float) -> Space:
    dims = tuple(Dimension(d.model, d.name, (settings[d.key],)) for d in space.dimensions)
    return Space(target=space.target, dimensions=dims, loads=(level,))


def _head_to_head(args: argparse.Namespace, url: str, repo: Path, result: TuneResult) -> dict[str, Any]:
    assert result.winner is not None
    shipped = original_settings(result.space, result.base_configs)
    pairs = {
        "shipped": _fixed(result.space, shipped, args.concurrency),
        "tuned": _fixed(result.space, dict(result.winner.settings), args.concurrency),
    }
    values: dict[str, list[float]] = {"shipped": [], "tuned": []}
    p99: dict[str, list[float]] = {"shipped": [], "tuned": []}
    loads: list[list[float]] = []
    for i in range(args.rounds):
        for name in ("shipped", "tuned") if i % 2 == 0 else ("tuned", "shipped"):
            loads.append(list(os.getloadavg()))
            r = tune(_settings(args, url, repo, space=pairs[name], strategy="grid", finalists=1))
            confirm = [m for m in r.measurements if m.phase == "confirm"]
            values[name].append(confirm[-1].outcome.throughput if confirm else 0.0)
            p99[name].append(confirm[-1].outcome.latency_us.get("p99", 0.0) if confirm else 0.0)
    med = {k: statistics.median(v) for k, v in values.items()}
    return {
        "rounds": args.rounds,
        "throughput": {k: [round(x, 2) for x in v] for k, v in values.items()},
        "p99_ms": {k: [round(x / 1000, 1) for x in v] for k, v in p99.items()},
        "median_throughput": {k: round(x, 2) for k, x in med.items()},
        "gain": round(med["tuned"] / med["shipped"], 3) if med["shipped"] else None,
        "same_config": dict(result.winner.settings) == shipped,
        "load_avg_per_measurement": loads,
    }


def _repeat(args: argparse.Namespace, url: str, repo: Path, index: int) -> dict[str, Any]:
    load = list(os.getloadavg())
    t0 = time.monotonic()
    result = tune(
        _settings(args, url, repo, strategy="hill-climb", max_measurements=args.max_measurements),
        progress=lambda m: print(  # noqa: T201
            f"   [{m.index}] {m.phase} c={m.load:g} {m.outcome.throughput:.2f}/s "
            f"{'ok' if m.feasible else m.violation} {dict(m.settings)}",
            flush=True,
        ),
    )
    out: dict[str, Any] = {
        "repeat": index + 1,
        "load_avg_at_start": load,
        "tune_wall_s": round(time.monotonic() - t0, 1),
        "measurements": len(result.measurements),
        "stopped_by": result.search.stopped_by,
        "space": result.space.to_dict(),
        "stages": dict(result.stages),
        "winner": None if result.winner is None else dict(result.winner.settings),
        "restore_problems": list(result.restore_problems),
    }
    if result.winner is not None:
        out["head_to_head"] = _head_to_head(args, url, repo, result)
    out["load_avg_at_end"] = list(os.getloadavg())
    print(  # noqa: T201
        f"== repeat {index + 1}: bottleneck {result.stages.get('before', {}).get('bottleneck')}, "
        f"bound by {result.stages.get('bound_by')}, gain {out.get('head_to_head', {}).get('gain')}",
        flush=True,
    )
    return out


def _plot(repeats: list[dict[str, Any]], path: Path, concurrency: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.8))
    for i, rep in enumerate(repeats):
        h2h = rep.get("head_to_head")
        if not h2h:
            continue
        for j, name in enumerate(("shipped", "tuned")):
            vals = h2h["throughput"][name]
            x = i * 3 + j
            ax.bar(x, statistics.median(vals), color="#98c1d9" if name == "shipped" else "#3d5a80", width=0.8)
            ax.vlines(x, min(vals), max(vals), color="black", linewidth=1)
        ax.annotate(
            f"gain {h2h['gain']}x\nfirst: {rep['stages'].get('before', {}).get('bottleneck')}\n"
            f"bound by: {rep['stages'].get('bound_by')}\nload {rep['load_avg_at_start'][0]:.1f}",
            (i * 3 + 0.5, max(h2h["throughput"]["tuned"] + h2h["throughput"]["shipped"])),
            textcoords="offset points",
            xytext=(0, 6),
            ha="center",
            fontsize=7,
        )
    ax.set_xticks(
        [i * 3 + j for i in range(len(repeats)) for j in range(2)],
        [f"r{i + 1} {n}" for i in range(len(repeats)) for n in ("shipped", "tuned")],
        fontsize=7,
    )
    top = max(
        (
            max(r["head_to_head"]["throughput"]["tuned"] + r["head_to_head"]["throughput"]["shipped"])
            for r in repeats
            if r.get("head_to_head")
        ),
        default=1.0,
    )
    ax.set_ylim(0, top * 1.45)  # room for the notes above the bars
    ax.set_ylabel(f"throughput at concurrency {concurrency} (infer/s), median; line: min-max")
    ax.set_title("arr_coc: stage tune vs the shipped config (head-to-head rounds per repeat)", pad=10)
    ax.grid(alpha=0.3, axis="y")
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--latency-budget", default="p99=3s")
    p.add_argument("--max-measurements", type=int, default=14)
    p.add_argument("--screen-window-ms", type=int, default=1500)
    p.add_argument("--confirm-window-ms", type=int, default=2500)
    p.add_argument("--max-trials", type=int, default=4)
    p.add_argument("--warmup-s", type=float, default=0.5)
    args = p.parse_args()
    started = now()
    info = machine()
    repeats: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="stage-tune-") as tmp:
        repo = build_repository(Path(tmp) / "repo", ("arr_coc.yaml",))
        args.image = Path(tmp) / "image.png"
        pixels = np.random.default_rng(0).integers(0, 256, size=(96, 96, 3), dtype=np.uint8)
        args.image.write_bytes(encode_image_png(pixels))
        server = LocalTritonServer(
            repo,
            model_config_name="auto",
            extra_args=["--model-control-mode=explicit", f"--load-model={MODEL}"],
            startup_timeout=900,  # a shared box: loading 9 models took over 300 s once
        )
        with server:
            print(f"server up, load average {os.getloadavg()}", flush=True)  # noqa: T201
            pid = server.pid
            for i in range(args.repeats):
                repeats.append(_repeat(args, server.http_url, repo, i))
            restarts = 0 if (server.running and server.pid == pid) else 1
    gains = [r["head_to_head"]["gain"] for r in repeats if r.get("head_to_head")]
    result = {
        "benchmark": "stage_tune",
        "started_at": started,
        "finished_at": now(),
        "command": command_line(),
        "machine": {**info, "load_avg_at_end": list(os.getloadavg())},
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "server_restarts": restarts,
        "gains": gains,
        "median_gain": statistics.median(gains) if gains else None,
        "note": "throughput of the shipped config vs the tuned winner, re-measured alternately at the "
        "same load under the same budget; a shared 2-core box (load averages recorded): the spread "
        "of the rounds is the noise",
        "repeats": repeats,
    }
    path = write_result("stage_tune", result)
    _plot(repeats, RESULTS / "stage_tune.png", args.concurrency)
    print(f"wrote {path}; gains {gains}")  # noqa: T201


if __name__ == "__main__":
    main()
