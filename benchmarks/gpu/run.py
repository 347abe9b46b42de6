"""The GPU benchmark (issue #33): a torch and an ONNX stage on one local tritonserver, ~5 minutes.

On any box with an NVIDIA GPU, offline, from wheels (``pip install --no-index --find-links
WHEELS 'tritonkit[server,plot]'`` plus torch; see docs/gpu.md):

1. builds a torch Python stage (``resnet_torch``: a small ResNet-like model made in code, FP16 on
   ``KIND_GPU``, benchmarks/gpu/resnet_stage.py) and the ONNX example (``densenet_onnx`` from
   ensembles/densenet.yaml, its GPU config: TensorRT FP16), each with and without dynamic
   batching, through ``tritonkit.repository.build_spec``;
2. serves them on one ``LocalTritonServer`` (explicit model control, for tune) and records which
   execution provider each ONNX instance really runs (the backend's log line and gauge);
3. records dynamic batching ratios (with / without) at concurrency 1, 16, 64 (``tritonkit.perf``);
4. compares tritonkit perf with perf_analyzer (when installed: $PERF_ANALYZER or PATH) at 16, 64;
5. runs a short ``tritonkit.tune.tune`` of the torch stage (instances x dynamic batching);
6. writes benchmarks/results/gpu/gpu.json (with GPU, driver, CUDA and package versions) and
   gpu.png.

``--dry-run`` runs the same code on the CPU (``KIND_CPU``, a tiny model and input, concurrency
1 and 4, short windows) into dry_run.json: what CI covers (tests/integration/
test_gpu_benchmark_dry_run.py). The torch stage needs torch in its stub's environment: the
running venv, ``--torch-env DIR`` or $TRITONKIT_LLM_ENV (a venv with torch and numpy<2); without
one it is skipped and the JSON says so.

    python benchmarks/gpu/run.py [--dry-run] [--out DIR] [--torch-env DIR]
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from tritonkit.config import read_config, write_config
from tritonkit.perf import PerfRun, PerfSettings, run_perf
from tritonkit.repository import build_spec
from tritonkit.server import LocalTritonServer
from tritonkit.tune import Dimension, Space, TuneResult, TuneSettings, tune

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "gpu"
TORCH, ONNX = "resnet_torch", "densenet_onnx"
PROVIDER_METRIC = "tritonkit_onnx_execution_provider"


@dataclass(frozen=True)
class Plan:
    """What one run measures: the GPU plan, or the dry run's tiny CPU one."""

    name: str
    kind: str
    image: tuple[int, int, int]
    width: int
    batching_levels: tuple[float, ...]
    compare_levels: tuple[float, ...]
    interval_ms: int
    max_trials: int
    warmup_s: float
    tune_load: float
    tune_dimensions: tuple[tuple[str, tuple[Any, ...]], ...]
    screen_ms: int
    confirm_ms: int
    max_batch_size: int = 64
    finalists: int = 2  # tune's confirmed candidates (each a config load: seconds for torch)


GPU = Plan(
    name="gpu",
    kind="KIND_GPU",
    image=(3, 224, 224),
    width=64,
    batching_levels=(1, 16, 64),
    compare_levels=(16, 64),
    interval_ms=2000,
    max_trials=5,
    warmup_s=2.0,
    tune_load=16,
    tune_dimensions=(("instance_count", (1, 2)), ("dynamic_batching", (False, True))),
    screen_ms=1000,
    confirm_ms=2000,
)
DRY = Plan(
    name="dry_run",
    kind="KIND_CPU",
    image=(3, 32, 32),
    width=4,
    batching_levels=(1, 4),
    compare_levels=(4,),
    interval_ms=150,
    max_trials=3,
    warmup_s=0.2,
    tune_load=4,
    tune_dimensions=(("dynamic_batching", (False, True)),),
    screen_ms=150,
    confirm_ms=200,
    max_batch_size=8,
    finalists=1,
)

_TORCH_SPEC = """name: gpu_benchmark
models:
  - name: {name}
    backend: python
    source: resnet_stage.py
    max_batch_size: {mbs}
    inputs: [{{name: INPUT, data_type: FP32, dims: [{dims}]}}]
    outputs: [{{name: OUTPUT, data_type: FP32, dims: [1000]}}]
    dynamic_batching: {{max_queue_delay_microseconds: 500}}
    instance_group: [{{kind: KIND_CPU, count: 1}}]
"""

_TORCH_PROBE = (
    "import json, numpy, torch; print(json.dumps({'torch': torch.__version__, 'cuda': torch.version.cuda, "
    "'numpy': numpy.__version__, 'cuda_available': torch.cuda.is_available()}))"
)


def _run(cmd: list[str], timeout: float = 60) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout if out.returncode == 0 else ""


def torch_environment(explicit: str | None) -> Path | None:
    """The venv whose python3 has torch: --torch-env, this Python, or $TRITONKIT_LLM_ENV."""
    if explicit:
        return Path(explicit).absolute()
    if importlib.util.find_spec("torch") is not None:
        return Path(sys.prefix)
    env = os.environ.get("TRITONKIT_LLM_ENV")
    if (
        env
        and _run([str(Path(env) / "bin" / "python3"), "-c", "import torch; print('ok')"], 180).strip() == "ok"
    ):
        return Path(env).absolute()
    return None


def environment(torch_env: Path | None) -> dict[str, Any]:
    """GPU, driver, CUDA and the versions the numbers depend on."""
    facts: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }
    smi = shutil.which("nvidia-smi")
    if smi:
        query = _run([smi, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"])
        facts["gpus"] = [line.strip() for line in query.splitlines() if line.strip()]
        cuda = re.search(r"CUDA Version:\s*([\d.]+)", _run([smi]))
        facts["cuda_driver"] = cuda.group(1) if cuda else None
    else:
        facts["gpus"] = []
    for dist in ("tritonkit", "nvidia-pytriton", "onnxruntime", "onnxruntime-gpu", "numpy", "tritonclient"):
        try:
            facts[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            facts[dist] = None
    try:
        import onnxruntime

        facts["onnxruntime_providers"] = list(onnxruntime.get_available_providers())
    except ImportError:
        facts["onnxruntime_providers"] = []
    if torch_env is not None:
        out = _run([str(torch_env / "bin" / "python3"), "-c", _TORCH_PROBE], 180)
        facts["torch_env"] = {
            "path": str(torch_env),
            **(json.loads(out) if out else {"error": "torch not importable"}),
        }
    return facts


def build(repo: Path, plan: Plan, torch_env: Path | None, work: Path, notes: list[str]) -> list[str]:
    """Both stages, each as ``<model>__batched`` and ``<model>__unbatched``; the models served."""
    build_spec(ROOT / "ensembles" / "densenet.yaml", repo)
    models = [ONNX]
    if torch_env is not None:
        spec_dir = work / "torch_spec"
        spec_dir.mkdir()
        shutil.copy2(Path(__file__).with_name("resnet_stage.py"), spec_dir / "resnet_stage.py")
        dims = ", ".join(str(d) for d in plan.image)
        (spec_dir / "spec.yaml").write_text(
            _TORCH_SPEC.format(name=TORCH, mbs=plan.max_batch_size, dims=dims)
        )
        build_spec(spec_dir / "spec.yaml", repo)
        models.insert(0, TORCH)
    else:
        notes.append("no environment with torch (--torch-env, $TRITONKIT_LLM_ENV): torch stage skipped")
    served = []
    for model in models:
        for variant in ("batched", "unbatched"):
            name = f"{model}__{variant}"
            shutil.copytree(repo / model, repo / name, ignore=shutil.ignore_patterns("configs"))
            cfg = read_config(repo / name / "config.pbtxt")
            cfg.name = name
            if variant == "unbatched":
                cfg.ClearField("dynamic_batching")
            for group in cfg.instance_group:
                group.kind = group.Kind.Value(plan.kind)
                group.count = 1
            if model == TORCH:
                cfg.parameters["width"].string_value = str(plan.width)
                if torch_env is not None and torch_env != Path(sys.prefix):
                    cfg.parameters["EXECUTION_ENV_PATH"].string_value = str(torch_env)
            write_config(cfg, repo / name / "config.pbtxt")
            served.append(name)
        shutil.rmtree(repo / model)
    return served


def summarize(run: PerfRun) -> dict[str, Any]:
    return {
        "levels": [s.level for s in run.steps],
        "throughput": [round(s.throughput, 2) for s in run.steps],
        "p50_ms": [round((s.latency_us("p50") or 0) / 1000, 3) for s in run.steps],
        "p99_ms": [round((s.latency_us("p99") or 0) / 1000, 3) for s in run.steps],
        "avg_batch_size": [round(s.server.avg_batch_size, 2) if s.server else None for s in run.steps],
        "stable": [s.stable for s in run.steps],
        "errors": [s.error_count for s in run.steps],
    }


def perf(url: str, model: str, levels: tuple[float, ...], plan: Plan) -> dict[str, Any]:
    settings = PerfSettings(
        url=url,
        model=model,
        protocol="grpc",
        levels=levels,
        measurement_interval_ms=plan.interval_ms,
        max_trials=plan.max_trials,
        warmup_s=plan.warmup_s,
    )
    return summarize(run_perf(settings))


def perf_analyzer(url: str, model: str, level: float, plan: Plan) -> dict[str, Any] | None:
    """perf_analyzer at one concurrency, same windows; None when it is not installed."""
    binary = os.environ.get("PERF_ANALYZER") or shutil.which("perf_analyzer")
    if not binary:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "pa.csv"
        cmd = [
            binary,
            "-m",
            model,
            "-u",
            url.removeprefix("grpc://"),
            "-i",
            "grpc",
            "--concurrency-range",
            f"{int(level)}:{int(level)}",
            "-p",
            str(plan.interval_ms),
            "--max-trials",
            str(max(plan.max_trials, 3)),
            "-f",
            str(out),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
        if proc.returncode != 0 or not out.exists():
            return {"error": " / ".join((proc.stdout + proc.stderr).strip().splitlines()[-3:])}
        row = next(csv.DictReader(out.open()))
    return {"throughput": float(row["Inferences/Second"]), "p50_ms": float(row["p50 latency"]) / 1000}


def tune_summary(result: TuneResult) -> dict[str, Any]:
    winner = result.winner
    return {
        "wall_s": round(result.wall_s, 1),
        "config_loads": result.config_loads,
        "server_restarts": result.server_restarts,
        "measurements": [
            {
                "settings": dict(m.settings),
                "phase": m.phase,
                "load": m.load,
                "throughput": round(m.outcome.throughput, 2),
                "stable": m.outcome.stable,
            }
            for m in result.measurements
        ],
        "winner": None if winner is None else dict(winner.settings),
        "winner_throughput": None if winner is None else round(winner.outcome.throughput, 2),
        "within_noise_of_runner_up": result.search.within_noise,
    }


def provider_metrics(metrics_url: str) -> list[str]:
    with urllib.request.urlopen(metrics_url, timeout=10) as answer:  # noqa: S310 - local server
        text = answer.read().decode()
    return [line for line in text.splitlines() if line.startswith(PROVIDER_METRIC + "{")]


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


def measure(
    plan: Plan,
    torch_env: Path | None,
    work: Path,
    run_notes: list[str],
    save: Callable[[dict[str, Any]], None],
) -> dict[str, Any]:
    """Every phase's figures; ``save`` gets them after each phase, so a run cut short keeps them."""
    repo = work / "repo"
    served = build(repo, plan, torch_env, work, run_notes)
    notes: list[str] = []
    loads = [f"--load-model={name}" for name in served]
    with LocalTritonServer(
        repo,
        model_config_name=None,
        on_progress=notes.append,
        extra_args=["--model-control-mode=explicit", *loads],
    ) as server:
        with urllib.request.urlopen(server.http_url + "/v2", timeout=10) as answer:  # noqa: S310
            triton_version = json.loads(answer.read())["version"]
        data: dict[str, Any] = {
            "tritonserver": triton_version,
            "server_notes": notes,
            "onnx_provider_metric": provider_metrics(server.metrics_url),
        }
        url = server.grpc_url
        batching: dict[str, Any] = {}
        models = sorted({name.split("__")[0] for name in served}, key=lambda m: (m != TORCH, m))
        for model in models:
            on = perf(url, f"{model}__batched", plan.batching_levels, plan)
            off = perf(url, f"{model}__unbatched", plan.batching_levels, plan)
            batching[model] = {
                "batched": on,
                "unbatched": off,
                "ratio": [ratio(a, b) for a, b in zip(on["throughput"], off["throughput"], strict=True)],
            }
            print(
                model,
                "infer/s with / without dynamic batching by concurrency:",
                {
                    level: (a, b)
                    for level, a, b in zip(
                        plan.batching_levels, on["throughput"], off["throughput"], strict=True
                    )
                },
                "ratios",
                dict(zip(plan.batching_levels, batching[model]["ratio"], strict=True)),
                flush=True,
            )
            data["dynamic_batching"] = batching
            save(data)
        target = f"{models[-1] if TORCH not in models else TORCH}__batched"
        compare = []
        for level in plan.compare_levels:
            mine = perf(url, target, (level,), plan)
            theirs = perf_analyzer(url, target, level, plan)
            row: dict[str, Any] = {"concurrency": level, "tritonkit": mine, "perf_analyzer": theirs}
            if theirs and "throughput" in theirs:
                row["throughput_ratio"] = ratio(mine["throughput"][0], theirs["throughput"])
                row["p50_ratio"] = ratio(mine["p50_ms"][0], theirs["p50_ms"])
            compare.append(row)
        data["perf_vs_perf_analyzer"] = {
            "model": target,
            "installed": any(r["perf_analyzer"] for r in compare),
            "levels": compare,
        }
        print("tritonkit perf vs perf_analyzer:", json.dumps(compare), flush=True)
        save(data)
        space = Space(
            target=target,
            dimensions=tuple(Dimension(target, n, v) for n, v in plan.tune_dimensions),
            loads=(plan.tune_load,),
        )
        settings = TuneSettings(
            model=target,
            url=url,
            protocol="grpc",
            repository=repo,
            space=space,
            strategy="grid",
            screen_window_ms=plan.screen_ms,
            confirm_window_ms=plan.confirm_ms,
            max_trials=plan.max_trials,
            warmup_s=plan.warmup_s,
            finalists=plan.finalists,
        )
        data["tune"] = {"model": target, **tune_summary(tune(settings))}
    return data


def plot(data: dict[str, Any], path: Path) -> str | None:
    """Batching ratios per model and level, and tritonkit / perf_analyzer; None when written."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib missing (pip install 'tritonkit[plot]'): no plot"
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for model, entry in data["dynamic_batching"].items():
        levels = entry["batched"]["levels"]
        left.plot(levels, [r or 0 for r in entry["ratio"]], marker="o", label=model)
    left.set_xscale("log", base=2)
    left.set_xlabel("concurrency")
    left.set_ylabel("throughput with / without dynamic batching")
    left.axhline(1, color="grey", lw=0.5)
    left.legend()
    rows = data["perf_vs_perf_analyzer"]["levels"]
    xs = [str(int(r["concurrency"])) for r in rows]
    right.bar(xs, [r.get("throughput_ratio") or 0 for r in rows])
    right.axhline(1, color="grey", lw=0.5)
    right.set_title(
        "tritonkit / perf_analyzer throughput"
        + ("" if data["perf_vs_perf_analyzer"]["installed"] else " (perf_analyzer not installed)")
    )
    gpus = data["environment"].get("gpus") or ["CPU (dry run)"]
    fig.suptitle(f"tritonkit GPU benchmark: {gpus[0]}")
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(path)
    return None


def main(argv: list[str] | None = None) -> Path:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dry-run", action="store_true", help="the same code on the CPU, tiny and fast")
    ap.add_argument("--out", default=str(RESULTS), help="directory for <plan>.json and <plan>.png")
    ap.add_argument("--torch-env", default=None, help="a venv with torch and numpy<2 for the torch stage")
    args = ap.parse_args(argv)
    plan = DRY if args.dry_run else GPU
    run_notes: list[str] = []
    torch_env = torch_environment(args.torch_env)
    started = time.monotonic()
    data: dict[str, Any] = {
        "benchmark": "gpu",
        "plan": plan.name,
        "command": " ".join(sys.argv),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "environment": environment(torch_env),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{plan.name}.json"

    def save(phases: dict[str, Any], complete: bool = False) -> None:
        # after every phase: a run cut short (a lease running out) still leaves its figures
        record = {**data, **phases, "complete": complete, "notes": run_notes}
        tmp_path = path.with_suffix(".json.tmp")
        tmp_path.write_text(json.dumps(record, indent=2) + "\n")
        tmp_path.replace(path)

    with tempfile.TemporaryDirectory(prefix="tritonkit-gpu-bench-") as tmp:
        data.update(measure(plan, torch_env, Path(tmp), run_notes, save))
    data["wall_s"] = round(time.monotonic() - started, 1)
    note = plot(data, out / f"{plan.name}.png")
    run_notes.extend([note] if note else [])
    save({}, complete=True)
    print(f"wrote {path} in {data['wall_s']} s", flush=True)
    return path


if __name__ == "__main__":
    main()
