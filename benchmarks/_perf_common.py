"""Shared helpers for the benchmark scripts: machine facts, result files, perf_analyzer."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
ENSEMBLES = ROOT / "ensembles"

#: The last tritonclient wheel that ships Triton's perf_analyzer binary (data/bin/perf_analyzer).
#: The PyPI package `perf-analyzer` is only a placeholder (version 0.1.0 prints "hello").
PA_WHEEL = "tritonclient==2.41.0"
PA_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tritonkit" / "perf_analyzer"


def machine() -> dict[str, Any]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu_model": cpu,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_avg_at_start": list(os.getloadavg()),
    }


def command_line() -> str:
    return " ".join(shlex.quote(a) for a in [".venv/bin/python", *sys.argv])


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def write_result(name: str, data: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(path)
    return path


def verdict(ratio: float | None, tolerance: float) -> dict[str, Any]:
    """One accuracy verdict: the tritonkit / reference ratio and whether it is within tolerance."""
    within = ratio is not None and abs(ratio - 1) <= tolerance
    return {"ratio": ratio, f"within_{round(tolerance * 100)}pct": within}


def finish_accuracy(
    name: str,
    data: dict[str, Any],
    verdicts: dict[str, dict[str, Any]],
    plot: Callable[[Path], None],
    tolerance: float,
) -> None:
    """Write an accuracy benchmark's JSON and plot under results/, then print its verdicts."""
    path = write_result(name, data)
    plot(RESULTS / f"{name}.png")
    print(f"wrote {path}")
    key = f"within_{round(tolerance * 100)}pct"
    for k, v in verdicts.items():
        print(f"  {k}: ratio {v['ratio']}, within {round(tolerance * 100)}%: {v[key]}")


def _pytriton_libs() -> Path:
    import pytriton

    return Path(pytriton.__file__).resolve().parent.parent / "nvidia_pytriton.libs"


def perf_analyzer(version: str = PA_WHEEL.split("==")[1]) -> tuple[list[str], dict[str, str]]:
    """The perf_analyzer command and the environment it needs (fetched once into a cache).

    Looks at $PERF_ANALYZER and PATH first (default version only); otherwise downloads the
    tritonclient wheel of ``version`` with pip (no install), extracts the binary and links the
    two shared libraries it needs (libb64, libcudart) from the nvidia-pytriton wheel already
    installed. 2.51.0 is the one whose ``--profile-export-file`` holds per-response timestamps.
    """
    env = dict(os.environ)
    given = os.environ.get("PERF_ANALYZER") or shutil.which("perf_analyzer")
    if given and version == PA_WHEEL.split("==")[1]:
        return [given], env
    cache = PA_CACHE if version == PA_WHEEL.split("==")[1] else PA_CACHE.with_name(f"perf_analyzer_{version}")
    binary = cache / "perf_analyzer"
    libdir = cache / "lib"
    if not binary.exists():
        cache.mkdir(parents=True, exist_ok=True)
        wheels = list(cache.glob(f"tritonclient-{version}-*.whl"))
        if not wheels:
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "-q",
                    "--no-deps",
                    f"tritonclient=={version}",
                    "-d",
                    str(cache),
                ],
                check=True,
            )
            wheels = list(cache.glob(f"tritonclient-{version}-*.whl"))
        with zipfile.ZipFile(wheels[0]) as zf:
            member = next(n for n in zf.namelist() if n.endswith("data/bin/perf_analyzer"))
            binary.write_bytes(zf.read(member))
        binary.chmod(0o755)
        wheels[0].unlink()
    libdir.mkdir(exist_ok=True)
    libs = _pytriton_libs()
    for pattern, name in (("libb64-*.so.0d", "libb64.so.0d"), ("libcudart-*.so.12*", "libcudart.so.12")):
        link = libdir / name
        if not link.exists():
            link.symlink_to(next(libs.glob(pattern)))
    env["LD_LIBRARY_PATH"] = f"{libdir}:{env.get('LD_LIBRARY_PATH', '')}".rstrip(":")
    return [str(binary)], env


def build_repository(out: Path, specs: tuple[str, ...]) -> Path:
    from tritonkit.repository import build_spec

    for spec in specs:
        build_spec(ENSEMBLES / spec, out)
    return out
