"""Metering through the OpenAI front: every token counted, per request, per key and per pipeline.

Builds ``ensembles/demo.py``'s LLM repository (tiny_llm, vlm_llm, arr_coc_llm: the pipelines relay
their vLLM stage's counts, ``openai: prompt_tokens_output ...``), serves it on one tritonserver
2.51 with one front before it holding two API keys, and records:

1. **usage = the stage's own count**: for each pipeline and question, the official ``openai``
   client's ``usage`` (unary, and streamed with ``include_usage``) beside what the vLLM stage
   reports over gRPC for the pipeline's prompt (``num_input_tokens``/``num_output_tokens``);
2. **per key**: requests with each key, then the front's ``/metrics`` by key id (and no key text);
3. **tritonkit perf vs AIPerf**: output tokens/s through the front on ``vlm_llm`` (chat, the
   sample image with every request, streamed), tritonkit perf (its own count: the last chunk's
   ``usage``; and the front's counter between the same windows) against AIPerf
   ``--use-server-token-count`` (from ``/work/aiperf-venv`` or ``$AIPERF``; skipped without it),
   alternating, the same concurrency and answer length;
4. **cost**: ``perf --sku`` at each concurrency: dollars per million input, output and all tokens.

``--agreement`` instead measures tritonkit perf against AIPerf like for like (issue 45's 5% on
output tokens/s, issue 40's on request latency and requests/s): ``/v1/completions`` streamed
through the front, the same prompt and ``max_tokens``, on ``clock_llm_counted``
(benchmarks/clock_llm_counted.yaml: answers by the clock and counts its tokens, no compute, so no
engine competes with the clients for the CPU) and on ``tiny_llm`` (the CPU vLLM engine),
alternating, each AIPerf run after a warm-up of its own. AIPerf's rates are over its whole run
(total / (last response - first request sent)); perf's over its measured windows after its
warm-up; both are closed loops at the same concurrency. Writes
benchmarks/results/metering_agreement.{json,png}.

    .venv/bin/python benchmarks/metering.py [--concurrency 1,2,4] [--rounds 2] [--aiperf PATH]
    .venv/bin/python benchmarks/metering.py --agreement [--models clock_llm_counted,tiny_llm]
        [--concurrency 1,4] [--rounds 2] [--duration 8]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _perf_common import RESULTS, command_line, machine, now, write_result  # noqa: E402

from tests._examples import load_example  # noqa: E402
from tritonkit.client import TritonClient, llm_inputs  # noqa: E402
from tritonkit.openai_front import ApiKeys, FrontServer, FrontSettings  # noqa: E402
from tritonkit.openai_front.auth import key_id  # noqa: E402
from tritonkit.perf import PerfSettings, run_perf  # noqa: E402
from tritonkit.perf.cost import estimate_cost  # noqa: E402
from tritonkit.perf.llm import LlmLoad  # noqa: E402
from tritonkit.perf.plot import pyplot, save_figure  # noqa: E402

demo = load_example("ensembles/demo.py")

PIPELINES = ("vlm_llm", "arr_coc_llm")
QUESTIONS = ("Describe the image.", "Where is the sun?", "What colour is the sky?")
KEYS = {"sk-bench-alpha-0001": None, "sk-bench-beta-0002": "team-b"}
SKU = "Standard_NC24ads_A100_v4"


def _stage_counts(server: Any, model: str, question: str, max_tokens: int) -> dict[str, Any]:
    with TritonClient(server.grpc_url, protocol="grpc", request_timeout=300) as client:
        prompt = client.infer(
            f"{model}_prompt",
            {
                "RAW_IMAGE": np.frombuffer(demo.SAMPLE.read_bytes(), dtype=np.uint8),
                "TEXT_QUERY": np.array([question.encode()], dtype=np.object_),
            },
        )["PROMPT"].reshape(-1)[0]
        request = llm_inputs(
            prompt.decode(),
            sampling={"temperature": 0, "max_tokens": max_tokens},
            outputs=["num_input_tokens", "num_output_tokens"],
            exclude_input_in_output=True,
        )
        responses = [r for r in client.stream("tiny_llm", request) if "num_output_tokens" in r.outputs]
    return {
        "prompt_tokens": int(responses[0]["num_input_tokens"].reshape(-1)[0]),
        "completion_tokens": sum(int(r["num_output_tokens"].sum()) for r in responses),
    }


def _image_url() -> str:
    return "data:image/png;base64," + base64.b64encode(demo.SAMPLE.read_bytes()).decode()


def usage_agreement(server: Any, front_url: str, key: str, max_tokens: int) -> list[dict[str, Any]]:
    import openai

    client = openai.OpenAI(base_url=front_url + "/v1", api_key=key, max_retries=0, timeout=600)
    rows = []
    for model in PIPELINES:
        for question in QUESTIONS:
            messages = [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": question},
                        {"type": "image_url", "image_url": {"url": _image_url()}},
                    ],
                }
            ]
            unary = client.chat.completions.create(model=model, messages=messages, max_tokens=max_tokens)
            chunks = list(
                client.chat.completions.create(
                    model=model,
                    messages=messages,
                    max_tokens=max_tokens,
                    stream=True,
                    stream_options={"include_usage": True},
                )
            )
            streamed = chunks[-1].usage
            stage = _stage_counts(server, model, question, max_tokens)
            got = {
                "unary": [unary.usage.prompt_tokens, unary.usage.completion_tokens] if unary.usage else None,
                "streamed": [streamed.prompt_tokens, streamed.completion_tokens] if streamed else None,
            }
            want = [stage["prompt_tokens"], stage["completion_tokens"]]
            rows.append(
                {
                    "model": model,
                    "question": question,
                    "stage": want,
                    **got,
                    "equal": got["unary"] == want and got["streamed"] == want,
                }
            )
            print(f"  usage {model} {question!r}: stage {want}, front {got}")
    return rows


def per_key(front_url: str) -> dict[str, Any]:
    import openai

    sent: dict[str, int] = {}
    for key, name in KEYS.items():
        client = openai.OpenAI(base_url=front_url + "/v1", api_key=key, max_retries=0, timeout=600)
        answer = client.completions.create(model="tiny_llm", prompt="Once upon a time", max_tokens=6)
        ident = name or key_id(key)
        sent[ident] = sent.get(ident, 0) + (answer.usage.completion_tokens if answer.usage else 0)
    text = httpx.get(front_url + "/metrics").text
    rows = re.findall(
        r'tritonkit_openai_tokens_total\{model="([^"]+)",kind="([^"]+)",key="([^"]+)"\} (\d+)', text
    )
    return {
        "completion_tokens_sent_by_key": sent,
        "metrics_rows": [list(r) for r in rows],
        "key_text_in_metrics": any(key in text for key in KEYS),
    }


def _dataset(tmp: Path, output_tokens: int) -> tuple[Path, Path]:
    image = tmp / "sample.png"
    image.write_bytes(demo.SAMPLE.read_bytes())
    ours = tmp / "vlm.jsonl"
    ours.write_text(
        "".join(
            json.dumps({"prompt": q, "output_tokens": output_tokens, "image": image.name}) + "\n"
            for q in QUESTIONS
        )
    )
    theirs = tmp / "aiperf.jsonl"
    theirs.write_text(
        "".join(
            json.dumps({"text": q, "image": str(image), "output_length": output_tokens}) + "\n"
            for q in QUESTIONS
        )
    )
    return ours, theirs


def run_tritonkit(front_url: str, key: str, conc: int, args: argparse.Namespace, dataset: Path) -> Any:
    settings = PerfSettings(
        url=front_url,
        model="vlm_llm",
        protocol="http",
        levels=(float(conc),),
        duration_s=args.duration,
        warmup_s=1.0,
        stream=True,
        llm=LlmLoad(dataset=str(dataset)),
        openai="chat",
        server_stats=False,
    )
    (step,) = run_perf(settings, headers={"Authorization": f"Bearer {key}"}).steps
    return step


def run_aiperf(
    exe: Path,
    front_url: str,
    key: str,
    conc: int,
    args: argparse.Namespace,
    dataset: Path,
    hf: Path,
    tmp: Path,
    *,
    model: str = "vlm_llm",
    endpoint: str = "chat",
    extra: tuple[str, ...] = (),
) -> dict[str, Any]:
    art = tmp / f"aiperf-{conc}-{len(list(tmp.glob('aiperf-*')))}"
    cmd = [
        str(exe), "profile", "--model", model, "--url", front_url, "--endpoint-type", endpoint,
        "--streaming", "--use-server-token-count", "--tokenizer", str(hf), "--api-key", key,
        "--input-file", str(dataset), "--custom-dataset-type", "single_turn",
        "--concurrency", str(conc), "--benchmark-duration", str(args.duration),
        "--benchmark-grace-period", "30",
        "--random-seed", "0", "--artifact-dir", str(art), "--ui-type", "none", *extra,
    ]  # fmt: skip
    # no HF_HUB_OFFLINE: in offline mode AIPerf 0.13 looks a tokenizer up in the hub's cache only
    # (snapshot_download), even a local directory; a path is loaded from disk without it
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    before = _front_completion_tokens(front_url, model)
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    counted = _front_completion_tokens(front_url, model) - before
    exports = sorted(art.rglob("profile_export_aiperf.json"))
    shown = "aiperf " + " ".join(cmd[1:]).replace(key, "$KEY")  # the key stays out of the record
    if proc.returncode != 0 or not exports:
        log = art / "logs" / "aiperf.log"
        lines = log.read_text(errors="replace").splitlines() if log.exists() else []
        why = [line for line in lines if "ERROR" in line or "Error" in line][-6:]
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-4:]
        return {"ok": False, "error": " / ".join(why or tail).replace(key, "$KEY"), "command": shown}
    doc = json.loads(exports[0].read_text())

    def avg(name: str) -> float | None:
        entry = doc.get(name)
        if isinstance(entry, dict):
            return entry.get("avg")
        return None

    return {
        "ok": True,
        "command": shown,
        "output_tokens_per_s": avg("output_token_throughput"),
        "requests_per_s": avg("request_throughput"),
        "request_latency_ms": avg("request_latency"),
        "ttft_ms": avg("time_to_first_token"),
        "itl_ms": avg("inter_token_latency"),
        "output_length_avg": avg("output_sequence_length"),
        "total_output_tokens": avg("total_output_tokens"),
        "benchmark_duration_s": avg("benchmark_duration"),
        "request_count": avg("request_count"),
        # the front's own counter over the whole AIPerf run (its warm-up included, if any)
        "front_counted_tokens": counted,
    }


AGREEMENT_PROMPT = "Once upon a time in a small town by the sea there lived an old clock maker"
CLOCK_SPEC = Path(__file__).resolve().parent / "clock_llm_counted.yaml"


def _agreement_datasets(tmp: Path, output_tokens: int) -> tuple[Path, Path]:
    ours, theirs = tmp / "agree-ours.jsonl", tmp / "agree-aiperf.jsonl"
    ours.write_text(json.dumps({"prompt": AGREEMENT_PROMPT, "output_tokens": output_tokens}) + "\n")
    theirs.write_text(json.dumps({"text": AGREEMENT_PROMPT, "output_length": output_tokens}) + "\n")
    return ours, theirs


def _children_cpu_s() -> float:
    import resource

    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def _perf_row(step: Any) -> dict[str, Any]:
    st = step.stream
    return {
        "output_tokens_per_s": st.output_tokens_per_s if st else None,
        "requests_per_s": st.requests_per_s if st else step.throughput,
        "request_latency_ms": step.latency.avg_us / 1000 if step.latency else None,
        "ttft_ms": st.ttft.avg_us / 1000 if st and st.ttft else None,
        "output_length_avg": st.output_tokens.avg_us if st and st.output_tokens else None,
        "requests": step.requests,
        "duration_s": step.duration_s,
        "client_cpu_share": st.client_cpu_share if st else None,
        "client_bound": st.client_bound if st else None,
    }


AGREED = ("output_tokens_per_s", "requests_per_s", "request_latency_ms", "ttft_ms")


def _race(
    front_url: str, model: str, conc: int, args: argparse.Namespace, files: tuple[Path, Path, Path]
) -> dict[str, Any]:
    """perf and AIPerf in turn (order alternating by round) at one concurrency on one model."""
    ours, theirs, tmp = files
    key = next(iter(KEYS))
    perf_runs: list[dict[str, Any]] = []
    ai_runs: list[dict[str, Any]] = []
    for r in range(args.rounds):
        for who in ("tk", "ai") if r % 2 == 0 else ("ai", "tk"):
            if who == "tk":
                perf = PerfSettings(
                    url=front_url, model=model, protocol="http", levels=(float(conc),),
                    duration_s=args.duration, warmup_s=2.0, stream=True,
                    llm=LlmLoad(dataset=str(ours)), openai="completions", server_stats=False,
                )  # fmt: skip
                (step,) = run_perf(perf, headers={"Authorization": f"Bearer {key}"}).steps
                perf_runs.append(_perf_row(step))
                continue
            cpu = _children_cpu_s()
            run = run_aiperf(
                Path(args.aiperf), front_url, key, conc, args, theirs, demo.TINY_LLM_DIR, tmp,
                model=model, endpoint="completions", extra=("--warmup-request-count", str(2 * conc)),
            )  # fmt: skip
            run["cpu_s_all_processes"] = _children_cpu_s() - cpu
            ai_runs.append(run)
    row: dict[str, Any] = {"model": model, "concurrency": conc}
    for name in AGREED:
        tk = _median([p[name] for p in perf_runs])
        ai = _median([a.get(name) for a in ai_runs if a.get("ok")])
        row[name] = {"perf": tk, "aiperf": ai, "diff": (tk / ai - 1) if tk and ai else None}
    return {**row, "load_avg": os.getloadavg()[0], "perf_runs": perf_runs, "aiperf_runs": ai_runs}


def agreement(args: argparse.Namespace) -> dict[str, Any]:
    """tritonkit perf against AIPerf through the front, like for like, per model and concurrency."""
    from tritonkit.repository import build_spec
    from tritonkit.server import LocalTritonServer

    models = [m for m in args.models.split(",") if m]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tk-agreement-") as tmpdir:
        tmp = Path(tmpdir)
        repository = tmp / "model_repository"
        build_spec(CLOCK_SPEC, repository)
        if "tiny_llm" in models:
            python = demo.llm_python()
            if python is None:
                raise SystemExit("tiny_llm needs the llm environment: make llm-venv")
            demo.make_tiny_llm(python, quiet=True)
            build_spec(demo.HERE / "tiny_llm.yaml", repository, force=True)
        ours, theirs = _agreement_datasets(tmp, args.output_tokens)
        with LocalTritonServer(repository) as server:
            keys = ApiKeys(list(KEYS))
            with FrontServer(
                FrontSettings(triton_url=server.grpc_url, repository=repository, api_keys=keys)
            ) as front:
                for model in models:
                    for conc in (int(c) for c in args.concurrency.split(",")):
                        row = _race(front.url, model, conc, args, (ours, theirs, tmp))
                        rows.append(row)
                        print(f"  {model} c{conc}: {json.dumps({k: row[k] for k in AGREED})}", flush=True)
                        _write_agreement(args, rows)  # each row as it comes: a run cut short keeps them
    return _write_agreement(args, rows)


def _write_agreement(args: argparse.Namespace, rows: list[dict[str, Any]]) -> dict[str, Any]:
    result = {
        "benchmark": "metering_agreement",
        "when": now(),
        "command": command_line(),
        "machine": machine(),
        "aiperf": args.aiperf,
        "output_tokens": args.output_tokens,
        "duration_s": args.duration,
        "rows": rows,
    }
    write_result("metering_agreement", result)
    plot_agreement(result, RESULTS / "metering_agreement.png")
    return result


def plot_agreement(result: dict[str, Any], path: Path) -> None:
    plt = pyplot()
    rows = result["rows"]
    metrics = (
        ("output_tokens_per_s", "output tokens/s"),
        ("requests_per_s", "requests/s"),
        ("request_latency_ms", "request latency avg (ms)"),
        ("ttft_ms", "TTFT avg (ms)"),
    )
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 4.6))
    labels = [f"{r['model'].replace('_counted', '')}\nc{r['concurrency']}" for r in rows]
    x = np.arange(len(rows))
    for ax, (name, title) in zip(axes, metrics, strict=True):
        for off, who, color in ((-0.2, "perf", "#3d5a80"), (0.2, "aiperf", "#ee6c4d")):
            ax.bar(x + off, [r[name][who] or 0.0 for r in rows], 0.4, color=color,
                   label="tritonkit perf" if who == "perf" else "AIPerf 0.13")  # fmt: skip
        for i, r in enumerate(rows):
            if r[name]["diff"] is not None:
                top = max(r[name]["perf"] or 0.0, r[name]["aiperf"] or 0.0)
                ax.annotate(f"{100 * r[name]['diff']:+.1f}%", (i, top), ha="center", va="bottom", fontsize=7)
        ax.set_xticks(x, labels, fontsize=7)
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3, axis="y")
    axes[0].legend(fontsize=7)
    fig.suptitle("tritonkit perf vs AIPerf through the OpenAI front (perf - AIPerf, % of AIPerf)")
    save_figure(fig, path)


def _front_completion_tokens(front_url: str, model: str = "vlm_llm") -> float:
    text = httpx.get(front_url + "/metrics").text
    found = re.findall(
        rf'tritonkit_openai_tokens_total\{{model="{re.escape(model)}",kind="completion",key="[^"]*"\}} (\d+)',
        text,
    )
    return float(sum(int(v) for v in found))


def _median(values: list[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return statistics.median(got) if got else None


def plot(result: dict[str, Any], path: Path) -> None:
    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.8))
    races = result["race"]
    labels = [str(r["concurrency"]) for r in races]
    x = np.arange(len(races))
    for off, key, name, color in (
        (-0.25, "tritonkit_tokens_per_s", "tritonkit perf (usage)", "#3d5a80"),
        (0.0, "server_tokens_per_s", "front's own counter", "#98c1d9"),
        (0.25, "aiperf_tokens_per_s", "AIPerf --use-server-token-count", "#ee6c4d"),
    ):
        vals = [r.get(key) or 0.0 for r in races]
        ax1.bar(x + off, vals, 0.25, label=name, color=color)
    ax1.set_xticks(x, labels)
    ax1.set_xlabel("concurrency")
    ax1.set_ylabel("output tokens/s (vlm_llm through the front)")
    ax1.set_title("three counts of one stream")
    ax1.legend(fontsize=8)
    ax1.grid(alpha=0.3, axis="y")
    levels = result["cost"]["levels"]
    for attr, name, color in (
        ("usd_per_million_input_tokens", "input", "#2a9d8f"),
        ("usd_per_million_output_tokens", "output", "#e76f51"),
        ("usd_per_million_tokens", "all tokens", "#264653"),
    ):
        ax2.plot(
            [lv["label"] for lv in levels], [lv[attr] for lv in levels], marker="o", label=name, color=color
        )
    ax2.set_yscale("log")
    ax2.set_xlabel("concurrency")
    ax2.set_ylabel("USD per million tokens")
    ax2.set_title(f"vlm_llm on {result['cost']['sku']} prices (CPU-measured rates)")
    ax2.legend(fontsize=8)
    ax2.grid(alpha=0.3, which="both")
    fig.suptitle("tritonkit metering: usage through pipelines, per key, and cost")
    save_figure(fig, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--concurrency", default="1,2,4")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--duration", type=float, default=12.0, help="seconds measured per run")
    parser.add_argument("--output-tokens", type=int, default=24)
    parser.add_argument("--aiperf", default=os.environ.get("AIPERF", "/work/aiperf-venv/bin/aiperf"))
    parser.add_argument("--agreement", action="store_true", help="perf vs AIPerf like for like only")
    parser.add_argument("--models", default="clock_llm_counted,tiny_llm", help="--agreement's models")
    args = parser.parse_args()
    if args.agreement:
        if not Path(args.aiperf).exists():
            raise SystemExit(f"AIPerf not found: {args.aiperf}")
        agreement(args)
        print(f"wrote {RESULTS / 'metering_agreement.json'}")
        return
    levels = [int(c) for c in args.concurrency.split(",")]
    from tritonkit.server import LocalTritonServer

    aiperf = Path(args.aiperf) if args.aiperf and Path(args.aiperf).exists() else None
    with tempfile.TemporaryDirectory(prefix="tk-metering-") as tmpdir:
        tmp = Path(tmpdir)
        repository = tmp / "model_repository"
        demo.build_llm_repository(repository, quiet=True)
        hf = demo.TINY_LLM_DIR  # the tiny model and its tokenizer, made in code
        ours, theirs = _dataset(tmp, args.output_tokens)
        keys_file = tmp / "keys"
        keys_file.write_text("".join(f"{name + ' ' if name else ''}{key}\n" for key, name in KEYS.items()))
        key = next(iter(KEYS))
        with LocalTritonServer(repository) as server:
            settings = FrontSettings(
                triton_url=server.grpc_url, repository=repository, api_keys=ApiKeys.from_file(keys_file)
            )
            with FrontServer(settings) as front:
                print("usage through the pipelines")
                usage = usage_agreement(server, front.url, key, args.output_tokens)
                keys = per_key(front.url)
                races = []
                steps = []
                for conc in levels:
                    ours_runs: list[Any] = []
                    theirs_runs: list[dict[str, Any]] = []
                    for r in range(args.rounds):
                        order = ("tk", "ai") if r % 2 == 0 else ("ai", "tk")
                        for who in order:
                            if who == "tk":
                                ours_runs.append(run_tritonkit(front.url, key, conc, args, ours))
                            elif aiperf is not None:
                                theirs_runs.append(
                                    run_aiperf(aiperf, front.url, key, conc, args, theirs, hf, tmp)
                                )
                    st = [s.stream for s in ours_runs if s.stream is not None]
                    tk = _median([s.output_tokens_per_s for s in st])
                    server_count = _median([s.server_output_tokens_per_s for s in st])
                    ai = _median([t.get("output_tokens_per_s") for t in theirs_runs if t.get("ok")])
                    race = {
                        "concurrency": conc,
                        "tritonkit_tokens_per_s": tk,
                        "server_tokens_per_s": server_count,
                        "aiperf_tokens_per_s": ai,
                        "tritonkit_vs_aiperf": (tk / ai - 1) if tk and ai else None,
                        # AIPerf's total output tokens (server usage) == what the front counted
                        "aiperf_total_equals_front_count": [
                            t.get("total_output_tokens") == t.get("front_counted_tokens")
                            for t in theirs_runs
                            if t.get("ok")
                        ],
                        "tritonkit_runs": [s.to_dict() for s in st],
                        "aiperf_runs": theirs_runs,
                        "load_avg": os.getloadavg()[0],
                    }
                    races.append(race)
                    steps.append(
                        max(ours_runs, key=lambda s: s.stream.output_tokens_per_s if s.stream else 0)
                    )
                    print(f"  c{conc}: tritonkit {tk} tok/s, front counter {server_count}, aiperf {ai}")
        shutil.rmtree(tmp / "model_repository", ignore_errors=True)
    from tritonkit.perf.results import PerfRun

    run = PerfRun(url="front", model="vlm_llm", protocol="http", mode="concurrency", steps=tuple(steps))
    cost = estimate_cost(run, sku=SKU, budget=None)
    result = {
        "benchmark": "metering",
        "when": now(),
        "command": command_line(),
        "machine": machine(),
        "usage_agreement": usage,
        "usage_all_equal": all(r["equal"] for r in usage),
        "per_key": keys,
        "race": races,
        "aiperf": str(aiperf) if aiperf else None,
        "cost": cost.to_dict(),
    }
    path = write_result("metering", result)
    plot(result, RESULTS / "metering.png")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
