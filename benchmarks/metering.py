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

Writes benchmarks/results/metering.{json,png}.

    .venv/bin/python benchmarks/metering.py [--concurrency 1,2,4] [--rounds 2] [--aiperf PATH]
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
) -> dict[str, Any]:
    art = tmp / f"aiperf-{conc}-{len(list(tmp.glob('aiperf-*')))}"
    cmd = [
        str(exe), "profile", "--model", "vlm_llm", "--url", front_url, "--endpoint-type", "chat",
        "--streaming", "--use-server-token-count", "--tokenizer", str(hf), "--api-key", key,
        "--input-file", str(dataset), "--custom-dataset-type", "single_turn",
        "--concurrency", str(conc), "--benchmark-duration", str(args.duration),
        "--benchmark-grace-period", "30",
        "--random-seed", "0", "--artifact-dir", str(art), "--ui-type", "none",
    ]  # fmt: skip
    # no HF_HUB_OFFLINE: in offline mode AIPerf 0.13 looks a tokenizer up in the hub's cache only
    # (snapshot_download), even a local directory; a path is loaded from disk without it
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    before = _front_completion_tokens(front_url)
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    counted = _front_completion_tokens(front_url) - before  # no warm-up: every request is AIPerf's
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
        # the front's own counter over the whole AIPerf run: the same tokens, counted by the server
        "front_counted_tokens": counted,
    }


def _front_completion_tokens(front_url: str) -> float:
    text = httpx.get(front_url + "/metrics").text
    found = re.findall(
        r'tritonkit_openai_tokens_total\{model="vlm_llm",kind="completion",key="[^"]*"\} (\d+)', text
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
    args = parser.parse_args()
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
