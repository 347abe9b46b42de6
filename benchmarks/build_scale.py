"""How long `tritonkit build` + `tritonkit validate` take as a repository grows.

Generates a pipeline spec of N models (half ONNX models read from a file, whose config is
auto-derived from the ONNX graph; half Python-backend models with a declared signature; both
cross-checked against their model files by build and validate),
builds it into a fresh repository and validates that repository, for several N. Records
wall-clock seconds (best of --repeats) to benchmarks/results/build_scale.json and a plot to
build_scale.png. Target: build + validate of 1,000 models under 5 s on the 2-core dev box.

    .venv/bin/python benchmarks/build_scale.py --sizes 250 500 1000 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import onnx
from onnx import TensorProto, helper

from tritonkit.repository import build_spec, validate_repository

RESULTS = Path(__file__).resolve().parent / "results"

PY_MODEL = textwrap.dedent(
    """
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            out = []
            for request in requests:
                x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
                out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x)]))
            return out
    """
)


def make_sources(root: Path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 16])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, root / "relu.onnx")
    (root / "identity.py").write_text(PY_MODEL)


def write_spec(root: Path, n: int) -> Path:
    lines = ["name: scale", "models:"]
    for i in range(n):
        if i % 2 == 0:
            lines += [
                f"  - name: onnx_{i:05d}",
                "    source: relu.onnx",
                "    dynamic_batching: {preferred_batch_size: [4, 8], max_queue_delay_microseconds: 100}",
                "    instance_group: [{kind: KIND_CPU, count: 1}]",
            ]
        else:
            lines += [
                f"  - name: python_{i:05d}",
                "    source: identity.py",
                "    max_batch_size: 8",
                "    inputs: [{name: IN, data_type: FP32, dims: [16]}]",
                "    outputs: [{name: OUT, data_type: FP32, dims: [16]}]",
                "    instance_group: [{kind: KIND_CPU, count: 1}]",
            ]
    spec = root / f"scale_{n}.yaml"
    spec.write_text("\n".join(lines) + "\n")
    return spec


def measure(n: int, repeats: int, work: Path) -> dict[str, float | int]:
    spec = write_spec(work, n)
    builds, validates = [], []
    for r in range(repeats):
        repo = work / f"repo_{n}_{r}"
        t0 = time.perf_counter()
        result = build_spec(spec, repo)
        t1 = time.perf_counter()
        report = validate_repository(repo)
        t2 = time.perf_counter()
        if len(result.models) != n or not report.valid:
            raise SystemExit(f"unexpected result at n={n}: {len(result.models)} models, valid={report.valid}")
        builds.append(t1 - t0)
        validates.append(t2 - t1)
        shutil.rmtree(repo)
    best_build, best_validate = min(builds), min(validates)
    totals = [b + v for b, v in zip(builds, validates, strict=True)]
    return {
        "models": n,
        "build_s": round(best_build, 4),
        "validate_s": round(best_validate, 4),
        "total_s": round(min(totals), 4),
        "total_median_s": round(statistics.median(totals), 4),
        "per_model_ms": round(1000 * min(totals) / n, 3),
    }


def plot(rows: list[dict[str, float | int]], path: Path, target_s: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = [r["models"] for r in rows]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.plot(ns, [r["build_s"] for r in rows], "o-", label="build")
    ax.plot(ns, [r["validate_s"] for r in rows], "s-", label="validate")
    ax.plot(ns, [r["total_s"] for r in rows], "^-", label="build + validate")
    ax.axhline(target_s, color="red", linestyle="--", linewidth=1, label=f"target {target_s:g} s @ 1000")
    ax.set_xlabel("models in the repository")
    ax.set_ylabel("seconds (best of repeats)")
    ax.set_title("tritonkit build + validate vs repository size")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _relative(path: str) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return path


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[250, 500, 1000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--target", type=float, default=5.0, help="seconds allowed for 1000 models")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="tritonkit-build-scale-") as tmp:
        work = Path(tmp)
        make_sources(work)
        measure(50, 1, work)  # warm imports and caches so the first size is not penalised
        for n in args.sizes:
            row = measure(n, args.repeats, work)
            rows.append(row)
            print(json.dumps(row))
    at_1000 = next((r for r in rows if r["models"] == 1000), None)
    record = {
        "benchmark": "build_scale",
        "command": shlex.join([_relative(sys.executable), _relative(sys.argv[0]), *sys.argv[1:]]),
        "description": "build_spec + validate_repository of N models (half ONNX-from-file with auto-config, "
        "half Python backend); best of repeats, wall clock",
        "machine": {
            "cpus": os.cpu_count(),
            "load_average_1_5_15_min_at_end": [round(x, 2) for x in os.getloadavg()],
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "repeats": args.repeats,
        "target_s_for_1000": args.target,
        "meets_target": None if at_1000 is None else at_1000["total_s"] < args.target,
        "results": rows,
    }
    (args.out / "build_scale.json").write_text(json.dumps(record, indent=2) + "\n")
    plot(rows, args.out / "build_scale.png", args.target)
    print(f"wrote {args.out / 'build_scale.json'} and build_scale.png")


if __name__ == "__main__":
    main()
