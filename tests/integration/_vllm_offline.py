"""vLLM's own offline generation, the reference the served engine is held to (run in the llm venv).

Reads one JSON object from the file named by its argument: ``model`` (a Hugging Face
directory), ``engine`` (engine arguments, as in model.json), ``prompts`` and ``sampling``
(SamplingParams keywords); prints one JSON object whose ``results`` hold, per prompt, the text,
token ids, prompt token ids and finish reason of ``LLM.generate``. Run by
tests/integration/test_vllm_engine.py with the ``llm`` venv's Python (the test venv has no vLLM).
"""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as handle:
        job = json.load(handle)
    # One process: the engine core in this one (a second would import torch and vLLM again).
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from vllm import LLM, SamplingParams

    began = time.monotonic()
    llm = LLM(model=job["model"], **job["engine"])
    ready = time.monotonic() - began
    outputs = llm.generate(job["prompts"], SamplingParams(**job["sampling"]), use_tqdm=False)
    results = [
        {
            "prompt": out.prompt,
            "text": out.outputs[0].text,
            "token_ids": list(out.outputs[0].token_ids),
            "prompt_token_ids": list(out.prompt_token_ids or ()),
            "finish_reason": out.outputs[0].finish_reason,
        }
        for out in outputs
    ]
    sys.stdout.write(json.dumps({"engine_start_s": ready, "results": results}) + "\n")
    sys.stdout.flush()
    os._exit(0)  # skip the engine's slow interpreter-exit teardown; everything is written


if __name__ == "__main__":
    main()
