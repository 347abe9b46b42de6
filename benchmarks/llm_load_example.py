"""The README's LLM benchmark, recorded: `tritonkit perf` with LLM load on the tiny vLLM stage.

Builds the tiny Llama made in code as a ``backend: vllm`` stage (as llm_accuracy.py does), serves
it, and runs the CLI exactly as a user would: prompts of 32+-8 tokens of the stage's own packed
tokenizer, exactly 16 tokens out, a request-rate sweep, a streaming budget (goodput) and a price
per million output tokens. Writes benchmarks/results/llm_load_example.{json,png,md} (the load
average is in the JSON's ``load_avg``; the 2-core box is shared).

    .venv/bin/python benchmarks/llm_load_example.py [--request-rate 2,4,8]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _perf_common import RESULTS, ROOT  # noqa: E402
from llm_accuracy import MODEL, build_stage  # noqa: E402

from tritonkit.server import LocalTritonServer  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--request-rate", default="2,4,8")
    args = ap.parse_args()
    out = RESULTS / "llm_load_example"
    with tempfile.TemporaryDirectory() as tmp:
        repo, _ = build_stage(Path(tmp))
        with LocalTritonServer(repo) as server:
            before = os.getloadavg()[0]
            argv = [
                str(ROOT / ".venv" / "bin" / "tritonkit"), "perf", server.grpc_url, MODEL, "-p", "grpc", "-q",
                "--tokenizer", str(repo), "--prompt-tokens", "32,8", "--output-tokens", "16", "--seed", "1",
                "--request-rate", args.request_rate, "--measurement-interval", "3000", "--max-trials", "5",
                "--latency-budget", "ttft_p99=1s,itl_p99=100ms,e2e_p99=2s", "--sku", "Standard_D4s_v5",
                "--json", f"{out}.json", "--plot", f"{out}.png", "--report", f"{out}.md",
            ]  # fmt: skip
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=900)
            print(proc.stdout[-4000:], proc.stderr[-2000:])
            after = os.getloadavg()[0]
    data = json.loads(Path(f"{out}.json").read_text())
    data["load_avg"] = [before, after]
    data["command"] = "tritonkit perf GRPC_URL " + " ".join(argv[4:])
    Path(f"{out}.json").write_text(json.dumps(data, indent=2) + "\n")


if __name__ == "__main__":
    main()
