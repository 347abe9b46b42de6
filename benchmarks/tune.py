"""`tritonkit tune`: the default strategy against grid ground truth, on the local server (CPU).

One real local tritonserver (``--model-control-mode=explicit``) serves three targets from a
repository built from ``ensembles/densenet.yaml`` and ``ensembles/arr_coc.yaml`` (cpu variants):
``densenet_onnx``, the ARR-COC scorer ``propositional_scorer`` and the ``arr_coc`` ensemble
(composing models tuned jointly, measured end to end with a real PNG image). For each target:

1. ``--strategy grid``: every distinct config at every concurrency level (ground truth);
2. the default strategy (hill-climb with saturation early-stop), same windows and stability rule;
3. a head-to-head: the two winners re-measured alternately (``--rounds`` rounds each, confirmation
   settings), so the fraction "default winner / grid winner" is not the luck of one noisy window.

Every run goes through the model-repository API on the one server: its pid is checked after each
run (server restarts must be 0). Records measurements, wall-clock, restarts and the fraction in
``benchmarks/results/tune.json`` (with the exact command) and ``tune.png``. Target: fraction
>= 0.95 with <= 25% of the grid's measurements.

    .venv/bin/python benchmarks/tune.py [--targets densenet_onnx,propositional_scorer,arr_coc]
        [--screen-window-ms 300] [--confirm-window-ms 500] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tritonkit.perf.inputs import encode_image_png  # noqa: E402
from tritonkit.repository import build_spec  # noqa: E402
from tritonkit.server import LocalTritonServer  # noqa: E402
from tritonkit.tune import Dimension, Space, TuneResult, TuneSettings, tune  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"

#: the spaces: modest grids (24-48 points) so 25% of them is a meaningful number of measurements
SPACES: dict[str, Space] = {
    "densenet_onnx": Space(
        target="densenet_onnx",
        dimensions=(
            Dimension("densenet_onnx", "instance_count", (1, 2)),
            Dimension("densenet_onnx", "max_batch_size", (8, 32)),
            Dimension("densenet_onnx", "dynamic_batching", (False, True)),
            Dimension("densenet_onnx", "max_queue_delay_microseconds", (0, 2000)),
        ),
        concurrency=(1, 2, 4, 8),
    ),
    "propositional_scorer": Space(
        target="propositional_scorer",
        dimensions=(
            Dimension("propositional_scorer", "instance_count", (1, 2)),
            Dimension("propositional_scorer", "dynamic_batching", (False, True)),
            Dimension("propositional_scorer", "max_queue_delay_microseconds", (0, 2000)),
        ),
        concurrency=(1, 2, 4, 8),
    ),
    "arr_coc": Space(
        target="arr_coc",
        dimensions=(
            Dimension("texture_array", "instance_count", (1, 2)),
            Dimension("propositional_scorer", "dynamic_batching", (False, True)),
            Dimension("perspectival_scorer", "dynamic_batching", (False, True)),
            Dimension("query_encoder", "instance_count", (1, 2)),
        ),
        concurrency=(1, 2, 4),
    ),
}


def _log(m: Any) -> None:
    print(
        f"     [{m.index}] {m.phase} c={m.concurrency} {m.outcome.throughput:.1f}/s "
        f"{'ok' if m.feasible else m.violation} {dict(m.settings)}",
        flush=True,
    )


def _settings(args: argparse.Namespace, url: str, repo: Path, model: str, **kw: Any) -> TuneSettings:
    return TuneSettings(
        model=model,
        url=url,
        repository=repo,
        screen_window_ms=args.screen_window_ms,
        confirm_window_ms=args.confirm_window_ms,
        max_trials=args.max_trials,
        warmup_s=args.warmup_s,
        input_data=str(args.image) if model == "arr_coc" else "random",
        **kw,
    )


def _summary(r: TuneResult) -> dict[str, Any]:
    w = r.winner
    return {
        "measurements": len(r.measurements),
        "screening": sum(1 for m in r.measurements if m.phase == "screen"),
        "confirmations": sum(1 for m in r.measurements if m.phase == "confirm"),
        "configs_tried": len({m.signature for m in r.measurements}),
        "wall_s": round(r.wall_s, 1),
        "config_loads": r.config_loads,
        "server_restarts": r.server_restarts,
        "stopped_by": r.search.stopped_by,
        "winner": None if w is None else {"settings": dict(w.settings), "concurrency": w.concurrency},
        "winner_confirmed_throughput": None if w is None else round(w.outcome.throughput, 2),
        "within_noise_of_runner_up": r.search.within_noise,
        "restore_problems": list(r.restore_problems),
        "measurement_log": [m.to_dict() for m in r.measurements],
    }


def _grid_fraction(grid: TuneResult, default: TuneResult) -> float | None:
    """The grid's own screening value at the default winner's (config, concurrency) over the
    grid's best feasible screening value: both from the same run, so the same conditions."""
    if default.winner is None:
        return None
    screened = [m for m in grid.measurements if m.phase == "screen" and m.feasible]
    best = max((m.value for m in screened), default=0.0)
    same = [
        m.value
        for m in screened
        if m.signature == default.winner.signature and m.concurrency == default.winner.concurrency
    ]
    return round(same[0] / best, 3) if same and best else None


def _fixed_space(space: Space, settings: dict[str, Any], concurrency: int) -> Space:
    dims = tuple(Dimension(d.model, d.name, (settings[d.key],)) for d in space.dimensions)
    return Space(target=space.target, dimensions=dims, concurrency=(concurrency,))


def _head_to_head(
    args: argparse.Namespace,
    url: str,
    repo: Path,
    model: str,
    space: Space,
    grid: TuneResult,
    default: TuneResult,
) -> dict[str, Any]:
    """Alternate confirmation-grade measurements of both winners; fraction of the medians."""
    assert grid.winner is not None and default.winner is not None
    pairs = {
        "grid": _fixed_space(space, dict(grid.winner.settings), grid.winner.concurrency),
        "default": _fixed_space(space, dict(default.winner.settings), default.winner.concurrency),
    }
    values: dict[str, list[float]] = {"grid": [], "default": []}
    for i in range(args.rounds):
        order = ["grid", "default"] if i % 2 == 0 else ["default", "grid"]
        for name in order:
            r = tune(_settings(args, url, repo, model, space=pairs[name], strategy="grid", finalists=1))
            confirm = [m for m in r.measurements if m.phase == "confirm"]
            values[name].append(confirm[-1].outcome.throughput if confirm else 0.0)
    med = {k: statistics.median(v) for k, v in values.items()}
    same = (
        grid.winner.signature == default.winner.signature
        and grid.winner.concurrency == default.winner.concurrency
    )
    return {
        "rounds": args.rounds,
        "throughput": {k: [round(x, 2) for x in v] for k, v in values.items()},
        "median": {k: round(x, 2) for k, x in med.items()},
        "fraction_of_grid_best": 1.0
        if same
        else (round(med["default"] / med["grid"], 3) if med["grid"] else 0.0),
        "same_config": same,
        "spread_pct": {
            k: round((max(v) - min(v)) / statistics.median(v) * 100, 1)
            if v and statistics.median(v)
            else None
            for k, v in values.items()
        },
    }


def _plot(records: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    names = [r["target"] for r in records]
    x = np.arange(len(names))
    ax1.bar(x - 0.2, [r["grid"]["measurements"] for r in records], 0.4, label="grid", color="#98c1d9")
    ax1.bar(x + 0.2, [r["default"]["measurements"] for r in records], 0.4, label="default", color="#3d5a80")
    ax1.set_xticks(x, names, fontsize=8)
    ax1.set_ylabel("measurements")
    ax1.set_title("measurements made")
    ax1.legend()
    fr = [r["head_to_head"]["fraction_of_grid_best"] if r.get("head_to_head") else 0 for r in records]
    ax2.bar(x, fr, 0.5, color="#ee6c4d")
    ax2.axhline(0.95, color="k", lw=1, ls="--", label="target 0.95")
    ax2.set_xticks(x, names, fontsize=8)
    ax2.set_ylim(0, max(1.2, max(fr, default=1) + 0.1))
    ax2.set_ylabel("default winner / grid winner (median throughput)")
    ax2.set_title("objective as a fraction of grid-best")
    ax2.legend()
    fig.suptitle("tritonkit tune: default strategy vs grid (local CPU tritonserver, shared 2-core box)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--targets", default="densenet_onnx,propositional_scorer,arr_coc")
    p.add_argument("--screen-window-ms", type=int, default=300)
    p.add_argument("--confirm-window-ms", type=int, default=500)
    p.add_argument("--max-trials", type=int, default=6)
    p.add_argument("--warmup-s", type=float, default=0.3)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", type=Path, default=RESULTS / "tune.json")
    args = p.parse_args()
    targets = [t for t in args.targets.split(",") if t]
    records: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tune-bench-") as tmp:
        repo = Path(tmp) / "repo"
        build_spec(ROOT / "ensembles" / "densenet.yaml", repo)
        build_spec(ROOT / "ensembles" / "arr_coc.yaml", repo)
        args.image = Path(tmp) / "image.png"
        rng = np.random.default_rng(0)
        args.image.write_bytes(encode_image_png(rng.integers(0, 256, size=(96, 96, 3), dtype=np.uint8)))
        server = LocalTritonServer(
            repo,
            model_config_name="auto",
            extra_args=["--model-control-mode=explicit", *(f"--load-model={t}" for t in targets)],
            startup_timeout=300,
        )
        with server:
            pid = server.pid
            url = server.http_url
            for target in targets:
                space = SPACES[target]
                print(f"== {target}: grid of {space.size} measurements", flush=True)
                t0 = time.monotonic()
                grid = tune(_settings(args, url, repo, target, space=space, strategy="grid"), progress=_log)
                print(
                    f"   grid: {len(grid.measurements)} measurements, {time.monotonic() - t0:.0f}s",
                    flush=True,
                )
                t0 = time.monotonic()
                default = tune(_settings(args, url, repo, target, space=space), progress=_log)
                print(
                    f"   default: {len(default.measurements)} measurements, {time.monotonic() - t0:.0f}s",
                    flush=True,
                )
                rec: dict[str, Any] = {
                    "target": target,
                    "space": space.to_dict(),
                    "grid": _summary(grid),
                    "default": _summary(default),
                    "measurement_ratio": round(len(default.measurements) / len(grid.measurements), 3),
                    "fraction_of_grid_best_in_grid_data": _grid_fraction(grid, default),
                }
                if grid.winner is not None and default.winner is not None:
                    rec["head_to_head"] = _head_to_head(args, url, repo, target, space, grid, default)
                    print(f"   head-to-head: {rec['head_to_head']}", flush=True)
                rec["server_restarts"] = 0 if (server.running and server.pid == pid) else 1
                records.append(rec)
                _write(args, records, pid == server.pid and server.running)
    _write(args, records, True)


def _write(args: argparse.Namespace, records: list[dict[str, Any]], alive: bool) -> None:
    doc = {
        "benchmark": "tune",
        "command": "PYTHONPATH=. .venv/bin/python " + " ".join(shlex.quote(a) for a in sys.argv),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "note": "2 CPU cores shared with other engineers' tests: windows are short and noisy; the "
        "head-to-head medians are the fair comparison, the per-run numbers show the noise",
        "server_alive_at_end": alive,
        "results": records,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    if records:
        _plot(records, args.out.with_suffix(".png"))


if __name__ == "__main__":
    main()
