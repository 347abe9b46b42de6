"""How much does `tritonkit tune` gain over a vLLM stage's engine defaults? Tiny model, with repeats.

Builds the tiny Llama-style model made in code as a ``backend: vllm`` stage (as
llm_accuracy.py does), serves it with explicit model control, runs the engine tuner
(``tritonkit.tune.engine.tune_engine``: engine arguments and instance count, loaded with a
``model.json`` file override, no restart) at one load under a TTFT/ITL budget, then re-measures
the defaults and the winner alternately ``--repeats`` times (each reloaded through the same file
override) so the gain is not one noisy window. Honest figures even when the CPU surface is flat:
the tiny model on a shared 2-core box is not a GPU serving a real model. Writes
benchmarks/results/tune_engine.json and .png with the load average.

    .venv/bin/python benchmarks/tune_engine.py [--concurrency 4] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _perf_common import RESULTS, command_line, machine, now, write_result  # noqa: E402
from llm_accuracy import MODEL, build_stage  # noqa: E402

from tritonkit.perf.llm import Length, LlmLoad  # noqa: E402
from tritonkit.perf.stream_metrics import parse_stream_budget  # noqa: E402
from tritonkit.tune.engine import _EngineFiles, _measure_level, tune_engine  # noqa: E402


def plot(data: dict[str, Any], path: Path) -> None:
    from tritonkit.perf.plot import pyplot, save_figure

    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.8))
    trials = data["tune"]["trials"]
    ok = [t for t in trials if t["error"] is None and t["ttft_p99_us"] is not None]
    ax1.scatter(
        [t["ttft_p99_us"] / 1000 for t in ok],
        [t["output_tokens_per_s"] for t in ok],
        c=["#2a9d8f" if t["meets_budget"] else "#bbbbbb" for t in ok],
    )
    for t in ok:
        label = " ".join(f"{k}={v}" for k, v in t["settings"].items()) or "defaults"
        ax1.annotate(label, (t["ttft_p99_us"] / 1000, t["output_tokens_per_s"]), fontsize=6)
    ax1.set_xlabel("TTFT p99 (ms)")
    ax1.set_ylabel("output tokens/s")
    ax1.set_title(f"candidates (green: within {data['settings']['budget']})")
    reps = data["repeats"]
    for i, (name, color) in enumerate((("defaults", "#3d5a80"), ("winner", "#ee6c4d"))):
        vals = [r[name] for r in reps if r.get(name) is not None]
        ax2.scatter([i] * len(vals), vals, color=color)
        if vals:
            ax2.hlines(statistics.median(vals), i - 0.2, i + 0.2, color=color)
    ax2.set_xticks([0, 1], ["engine defaults", "tuned"])
    ax2.set_ylabel("output tokens/s")
    gain = data.get("gain_median")
    ax2.set_title(f"repeats (median gain {gain:.2f}x)" if gain else "repeats")
    fig.suptitle(
        "tritonkit tune on the tiny vLLM stage "
        f"(load avg {data['load_avg'][0]:.1f}-{data['load_avg'][1]:.1f})"
    )
    save_figure(fig, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--concurrency", type=float, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--budget", default="ttft_p99=5s,itl_p99=2s")
    ap.add_argument("--prompt-tokens", type=int, default=64)
    ap.add_argument("--output-tokens", type=int, default=32)
    ap.add_argument("--duration", type=float, default=8.0)
    ap.add_argument("--max-candidates", type=int, default=8)
    ap.add_argument("--tag", default="")
    args = ap.parse_args()
    started = now()
    before = os.getloadavg()[0]
    llm = LlmLoad(prompt_tokens=Length(args.prompt_tokens), output_tokens=Length(args.output_tokens))
    with tempfile.TemporaryDirectory() as tmp:
        repo, hf = build_stage(Path(tmp))
        from tritonkit.server import LocalTritonServer
        from tritonkit.tune.control import ModelControl

        with LocalTritonServer(
            repo, extra_args=["--model-control-mode=explicit", f"--load-model={MODEL}"]
        ) as server:
            url = server.grpc_url
            result = tune_engine(
                url=url,
                model=MODEL,
                model_dir=repo / MODEL,
                levels=(args.concurrency,),
                llm=llm,
                budget=args.budget,
                protocol="grpc",
                max_candidates=args.max_candidates,
                duration_s=args.duration,
                tokenizer=str(hf / "tokenizer.json"),
                progress=lambda t: print(t, flush=True),
            )
            best = result.best(args.concurrency)
            winner = dict(best.settings) if best else {}
            stage = _EngineFiles(repo / MODEL)
            control = ModelControl(url, protocol="grpc")
            original = control.config(MODEL)
            limits = parse_stream_budget(args.budget)
            repeats = []
            loaded: dict[str, Any] = {}  # what the server serves now: tune_engine left the defaults
            for r in range(args.repeats):
                row: dict[str, Any] = {"round": r}
                order = (
                    (("defaults", {}), ("winner", winner))
                    if r % 2 == 0
                    else (("winner", winner), ("defaults", {}))
                )
                for name, settings in order:
                    cfg = original
                    if "instance_count" in settings:
                        from tritonkit.tune.space import apply_settings

                        cfg = apply_settings(original, {"instance_count": settings["instance_count"]})
                    if loaded != settings:  # an engine reload costs a minute here: only when needed
                        control.load(MODEL, cfg, files=stage.files(settings))
                        loaded = dict(settings)
                    trial = _measure_level(
                        url,
                        MODEL,
                        "grpc",
                        "concurrency",
                        args.concurrency,
                        llm,
                        settings,
                        limits,
                        args.duration,
                        1.0,
                        str(hf / "tokenizer.json"),
                    )
                    row[name] = trial.output_tokens_per_s if trial.error is None else None
                    row[f"{name}_trial"] = trial.to_dict()
                row["gain"] = (
                    row["winner"] / row["defaults"] if row.get("winner") and row.get("defaults") else None
                )
                repeats.append(row)
                print(row["gain"], flush=True)
            control.load(MODEL, original, files=stage.files({}))
            control.close()
    gains = [r["gain"] for r in repeats if r["gain"]]
    data = {
        "benchmark": "tune_engine",
        "command": command_line(),
        "started_at": started,
        "finished_at": now(),
        "machine": {**machine(), "load_avg_at_end": list(os.getloadavg())},
        "load_avg": [before, os.getloadavg()[0]],
        "settings": vars(args),
        "tune": result.to_dict(),
        "winner": winner,
        "repeats": repeats,
        "note": (
            "the tuner's answer is the stage's defaults: the repeats measure the defaults against "
            "themselves (this box's run-to-run spread), not a gain"
            if not winner
            else "repeats: the winner against the defaults, alternating which goes first"
        ),
        "gain_median": statistics.median(gains) if gains else None,
        "gain_range": [min(gains), max(gains)] if gains else None,
    }
    path = write_result(f"tune_engine{args.tag}", data)
    plot(data, RESULTS / f"tune_engine{args.tag}.png")
    print(f"wrote {path}; winner {winner or 'the defaults'}; median gain {data['gain_median']}")


if __name__ == "__main__":
    main()
