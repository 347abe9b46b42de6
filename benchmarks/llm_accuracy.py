"""tritonkit perf's LLM load against genai-perf 0.0.8 on the same running tiny vLLM stage.

Builds the tiny Llama-style model made in code (``ensembles/llm/tiny_llm.py``: nothing is
downloaded) into a repository as a ``backend: vllm`` stage, serves it on one local tritonserver
and measures it, alternating the tool order every round, at two concurrencies, with:

- genai-perf 0.0.8 in its own venv (``.venv-genai``, made on first use: ``pip install
  genai-perf==0.0.8``), ``--service-kind triton --backend vllm --streaming``, the tiny model's own
  directory as ``--tokenizer`` (a local path: genai-perf loads it with transformers, offline),
  synthetic prompts and ``--output-tokens-mean N --output-tokens-mean-deterministic``; its
  perf_analyzer is 2.51 (the project's, see _perf_common.perf_analyzer) on PATH;
- tritonkit perf with ``--prompt-tokens`` / ``--output-tokens`` (exact lengths, engine counts),
  over gRPC as genai-perf (``--tritonkit-protocol http``: plain HTTP ``generate_stream``, where
  tritonkit stamps each response with the kernel's receive time). On this 2-core box the engine
  keeps both cores busy and every client waits for a CPU: tritonkit's client check flags its
  steps client-bound, and genai-perf's own TTFT spread 7.5x across runs (docs/perf.md).

Compared: TTFT p50, ITL p50, output tokens/s (target: within 5%), and each tool's output-length
error (what it reports against what was asked: tritonkit's should be 0). ITL definitions differ
(genai-perf 0.0.8: (request latency - TTFT) / (output tokens - 1), its request latency including
the flags-only final response; tritonkit: between the first and last output response), so both
are recorded with tritonkit's final-response tail. Writes benchmarks/results/llm_accuracy.json
and .png with the load average around every measurement (the 2-core box is shared).

    .venv/bin/python benchmarks/llm_accuracy.py [--concurrency 1,4] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _perf_common import RESULTS, ROOT, command_line, machine, now, perf_analyzer, write_result  # noqa: E402

from tritonkit.perf import PerfSettings, run_perf  # noqa: E402
from tritonkit.perf.llm import Length, LlmLoad  # noqa: E402

GENAI_VERSION = "0.0.8"
GENAI_VENV = ROOT / ".venv-genai"
MODEL = "tiny_llm"
KEYS = ("ttft_p50_us", "itl_p50_us", "output_tokens_per_s")


def genai_perf() -> Path:
    """genai-perf 0.0.8 in its own venv (its pins must not touch the project's)."""
    exe = GENAI_VENV / "bin" / "genai-perf"
    if not exe.exists():
        subprocess.run([sys.executable, "-m", "venv", str(GENAI_VENV)], check=True)
        pip = [
            str(GENAI_VENV / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
        ]
        subprocess.run([*pip, f"genai-perf=={GENAI_VERSION}"], check=True)
    return exe


def _pa_path(tmp: Path) -> dict[str, str]:
    """An environment whose PATH finds perf_analyzer 2.51 (genai-perf runs it by name)."""
    cmd, env = perf_analyzer("2.51.0")
    bindir = tmp / "pa-bin"
    bindir.mkdir(exist_ok=True)
    wrapper = bindir / "perf_analyzer"
    wrapper.write_text(
        f'#!/bin/sh\nexport LD_LIBRARY_PATH="{env.get("LD_LIBRARY_PATH", "")}"\nexec {cmd[0]} "$@"\n'
    )
    wrapper.chmod(0o755)
    env = dict(env)
    env["PATH"] = f"{bindir}:{env.get('PATH', '')}"
    env["HF_HUB_OFFLINE"] = "1"  # the tokenizer is a local directory: never a download
    env["TRANSFORMERS_OFFLINE"] = "1"
    return env


def _stat(doc: dict[str, Any], metric: str, stat: str) -> float | None:
    value = (doc.get(metric) or {}).get(stat)
    return float(value) if value is not None else None


def run_genai(
    exe: Path, env: dict[str, str], url: str, tokenizer: Path, conc: int, args: argparse.Namespace, tmp: Path
) -> dict[str, Any]:
    art = tmp / f"genai-{conc}-{len(list(tmp.glob('genai-*')))}"
    cmd = [
        str(exe),
        "profile",
        "-m",
        MODEL,
        "--service-kind",
        "triton",
        "--backend",
        "vllm",
        "-u",
        url,
        "--streaming",
        "--tokenizer",
        str(tokenizer),
        "--synthetic-input-tokens-mean",
        str(args.prompt_tokens),
        "--synthetic-input-tokens-stddev",
        "0",
        "--output-tokens-mean",
        str(args.output_tokens),
        "--output-tokens-stddev",
        "0",
        "--output-tokens-mean-deterministic",
        "--concurrency",
        str(conc),
        "--measurement-interval",
        str(args.interval_ms),
        "--random-seed",
        "0",
        "--artifact-dir",
        str(art),
    ]
    load_before = os.getloadavg()[0]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    exports = sorted(art.rglob("*genai_perf.json"))
    if proc.returncode != 0 or not exports:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-4:]
        return {"ok": False, "error": " / ".join(tail), "command": " ".join(cmd[1:])}
    doc = json.loads(exports[0].read_text())
    osl = _stat(doc, "output_sequence_length", "avg")
    return {
        "ok": True,
        "command": "genai-perf " + " ".join(cmd[1:]),
        # genai-perf 0.0.8's export holds times in ms (its "unit" fields say so)
        "ttft_p50_us": (_stat(doc, "time_to_first_token", "p50") or 0) * 1000,
        "itl_p50_us": (_stat(doc, "inter_token_latency", "p50") or 0) * 1000,
        "itl_avg_us": (_stat(doc, "inter_token_latency", "avg") or 0) * 1000,
        "latency_p50_us": (_stat(doc, "request_latency", "p50") or 0) * 1000,
        "output_tokens_per_s": _stat(doc, "output_token_throughput", "avg"),
        "requests_per_s": _stat(doc, "request_throughput", "avg"),
        "output_length_avg": osl,
        "output_length_error_avg": None if osl is None else osl - args.output_tokens,
        "input_length_avg": _stat(doc, "input_sequence_length", "avg"),
        "load_avg": [load_before, os.getloadavg()[0]],
    }


def run_tritonkit(url: str, tokenizer: Path, conc: int, args: argparse.Namespace) -> dict[str, Any]:
    settings = PerfSettings(
        url=url,
        model=MODEL,
        protocol=args.tritonkit_protocol,
        levels=(float(conc),),
        measurement_interval_ms=args.interval_ms,
        max_trials=args.max_trials,
        warmup_s=1.0,
        stream=True,
        tokenizer=str(tokenizer),
        llm=LlmLoad(prompt_tokens=Length(args.prompt_tokens), output_tokens=Length(args.output_tokens)),
    )
    load_before = os.getloadavg()[0]
    (step,) = run_perf(settings).steps
    st = step.stream
    if st is None or step.requests == 0:
        return {"ok": False, "error": f"no request completed: {step.errors}"}
    return {
        "ok": True,
        "ttft_p50_us": st.get("ttft", "p50"),
        "itl_p50_us": st.get("itl", "p50"),
        "output_tokens_per_s": st.output_tokens_per_s,
        "requests_per_s": st.requests_per_s,
        "itl_avg_us": st.get("itl", "avg"),
        "latency_p50_us": step.latency_us("p50"),
        "output_length_avg": st.output_tokens.avg_us if st.output_tokens else None,
        "output_length_error_avg": st.output_length_error_avg,
        "output_length_misses": st.output_length_misses,
        "input_length_avg": st.input_tokens.avg_us if st.input_tokens else None,
        "final_tail_p50_us": st.final_tail.p50_us if st.final_tail else None,
        "token_counting": st.token_counting,
        "client_check": st.client.to_dict() if st.client else None,
        "protocol": args.tritonkit_protocol,
        "requests": step.requests,
        "errors": step.error_count,
        "load_avg": [load_before, os.getloadavg()[0]],
    }


def _median(samples: list[dict[str, Any]], key: str) -> float | None:
    values = [s[key] for s in samples if s.get("ok") and s.get(key) is not None]
    return statistics.median(values) if values else None


def build_stage(tmp: Path) -> tuple[Path, Path]:
    """The tiny model (made in code) as a vLLM stage in a fresh repository; (repo, hf dir)."""
    from tritonkit.repository import build_spec

    # made by the llm venv's Python (torch, transformers): the benchmark's venv has no engine
    hf = tmp / "tiny_llm_hf"
    llm_python = Path(os.environ.get("TRITONKIT_LLM_ENV", ROOT / ".venv-llm")) / "bin" / "python"
    subprocess.run([str(llm_python), str(ROOT / "ensembles" / "llm" / "tiny_llm.py"), str(hf)], check=True)
    spec = tmp / "llm.yaml"
    spec.write_text(
        "name: llm_accuracy\nmodels:\n"
        f"  - name: {MODEL}\n    backend: vllm\n    model: {hf}\n"
        "    engine: {max_model_len: 256, enforce_eager: true, dtype: float32}\n"
        "    additional_outputs: [num_input_tokens, num_output_tokens]\n"
    )
    repo = tmp / "repo"
    build_spec(spec, repo)
    return repo, Path(hf)


def plot(cases: list[dict[str, Any]], path: Path) -> None:
    from tritonkit.perf.plot import pyplot, save_figure

    plt = pyplot()
    fig, axes = plt.subplots(1, len(KEYS) + 1, figsize=(17, 4.6))
    labels = [f"c={c['concurrency']}" for c in cases]
    xs = list(range(len(cases)))
    w = 0.38
    for ax, key in zip(axes, KEYS, strict=False):
        scale = 1.0 if key == "output_tokens_per_s" else 1000.0
        for off, tool, color in ((-w / 2, "genai_perf", "#3d5a80"), (w / 2, "tritonkit", "#ee6c4d")):
            vals = [(c[tool][key] or 0) / scale for c in cases]
            ax.bar([x + off for x in xs], vals, w, label=tool, color=color)
        for x, c in zip(xs, cases, strict=True):
            r = c["ratio"][key]
            if r is not None:
                ax.annotate(
                    f"{r:.3f}x", (x, (c["tritonkit"][key] or 0) / scale), ha="center", va="bottom", fontsize=8
                )
        ax.set_xticks(xs, labels)
        ax.set_title(key.replace("_us", " (ms)").replace("_", " "))
        ax.legend(fontsize=7)
    ax = axes[-1]
    for off, tool, color in ((-w / 2, "genai_perf", "#3d5a80"), (w / 2, "tritonkit", "#ee6c4d")):
        vals = [c[tool]["output_length_error_avg"] or 0 for c in cases]
        ax.bar([x + off for x in xs], vals, w, label=tool, color=color)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(xs, labels)
    ax.set_title("output length error (tokens, reported - asked)")
    ax.legend(fontsize=7)
    loads = ", ".join(f"c={c['concurrency']}: {c['load_avg'][0]:.1f}-{c['load_avg'][1]:.1f}" for c in cases)
    fig.suptitle(
        f"tritonkit perf vs genai-perf {GENAI_VERSION} on the tiny vLLM stage (load avg {loads})", fontsize=9
    )
    save_figure(fig, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--concurrency", default="1,4")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--prompt-tokens", type=int, default=32)
    ap.add_argument("--output-tokens", type=int, default=16)
    ap.add_argument("--interval-ms", type=int, default=4000)
    ap.add_argument("--max-trials", type=int, default=6)
    ap.add_argument("--tag", default="")
    ap.add_argument("--tritonkit-protocol", choices=("grpc", "http"), default="grpc")
    args = ap.parse_args()
    started = now()
    exe = genai_perf()
    cases = []
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        env = _pa_path(tmp)
        repo, hf = build_stage(tmp)
        from tritonkit.server import LocalTritonServer

        with LocalTritonServer(repo) as server:
            for conc in (int(c) for c in args.concurrency.split(",")):
                before = os.getloadavg()[0]
                samples: dict[str, list[dict[str, Any]]] = {"genai_perf": [], "tritonkit": []}
                for r in range(args.rounds):
                    order = ("genai_perf", "tritonkit") if r % 2 == 0 else ("tritonkit", "genai_perf")
                    for tool in order:
                        if tool == "genai_perf":
                            samples[tool].append(
                                run_genai(exe, env, server.grpc_address, hf, conc, args, tmp)
                            )
                        else:
                            samples[tool].append(
                                run_tritonkit(
                                    server.http_url if args.tritonkit_protocol == "http" else server.grpc_url,
                                    hf / "tokenizer.json",
                                    conc,
                                    args,
                                )
                            )
                        print(f"c={conc} {tool}: {samples[tool][-1]}", flush=True)
                case: dict[str, Any] = {"concurrency": conc, "load_avg": [before, os.getloadavg()[0]]}
                for tool, runs in samples.items():
                    case[tool] = {
                        k: _median(runs, k)
                        for k in (
                            *KEYS,
                            "requests_per_s",
                            "latency_p50_us",
                            "itl_avg_us",
                            "output_length_avg",
                            "output_length_error_avg",
                            "input_length_avg",
                        )
                    }
                    case[tool]["samples"] = runs
                case["ratio"] = {
                    k: (case["tritonkit"][k] / case["genai_perf"][k])
                    if case["tritonkit"][k] and case["genai_perf"][k]
                    else None
                    for k in (*KEYS, "requests_per_s", "latency_p50_us")
                }
                # genai-perf's tokens/s counts its tokenizer's re-count of the text; at the engine's
                # own count (every request generating the N it asked, as min_tokens = max_tokens
                # makes it) its tokens/s would be requests/s * N
                g = case["genai_perf"]
                g["output_tokens_per_s_at_asked_length"] = (
                    g["requests_per_s"] * args.output_tokens if g["requests_per_s"] else None
                )
                cases.append(case)
    shutil.rmtree(RESULTS / "genai-artifacts", ignore_errors=True)
    verdicts = {
        f"c={c['concurrency']} {k}": {
            "ratio": c["ratio"][k],
            "within_5pct": c["ratio"][k] is not None and abs(c["ratio"][k] - 1) <= 0.05,
        }
        for c in cases
        for k in KEYS
    }
    data = {
        "benchmark": "llm_accuracy",
        "command": command_line(),
        "started_at": started,
        "finished_at": now(),
        "machine": {**machine(), "load_avg_at_end": list(os.getloadavg())},
        "genai_perf": f"genai-perf=={GENAI_VERSION} in {GENAI_VENV.name}, perf_analyzer 2.51 on PATH",
        "settings": vars(args),
        "verdicts": verdicts,
        "cases": cases,
    }
    path = write_result(f"llm_accuracy{args.tag}", data)
    plot(cases, RESULTS / f"llm_accuracy{args.tag}.png")
    print(f"wrote {path}")
    for k, v in verdicts.items():
        print(f"  {k}: {v}")


if __name__ == "__main__":
    main()
