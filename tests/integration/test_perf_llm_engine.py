"""LLM load and engine tuning on the real tiny vLLM engine (tritonkit's local vllm backend).

One tritonserver for the module (explicit model control: the tune test loads candidates on it),
serving the tiny Llama made in code (ensembles/llm/tiny_llm.py, made by the llm venv's Python)
as a ``backend: vllm`` stage. Needs the llm venv (``make llm-venv``; ``make test`` builds it).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tritonkit.perf import PerfSettings, run_perf
from tritonkit.perf.llm import Length, LlmLoad, PromptTokenizer

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
LLM_PYTHON = Path(os.environ.get("TRITONKIT_LLM_ENV", ROOT / ".venv-llm")) / "bin" / "python"
MODEL = "tiny_llm"


@pytest.fixture(scope="module")
def tiny_engine(tmp_path_factory: pytest.TempPathFactory, triton_server_factory: Callable[..., Any]) -> Any:
    if not LLM_PYTHON.exists():
        pytest.skip("no llm venv: run `make llm-venv`")
    from tritonkit.repository import build_spec

    tmp = tmp_path_factory.mktemp("llm")
    hf = tmp / "tiny_llm_hf"
    subprocess.run([str(LLM_PYTHON), str(ROOT / "ensembles" / "llm" / "tiny_llm.py"), str(hf)], check=True)
    spec = tmp / "llm.yaml"
    spec.write_text(
        "name: llm_load\nmodels:\n"
        f"  - name: {MODEL}\n    backend: vllm\n    model: {hf}\n"
        "    engine: {max_model_len: 256, enforce_eager: true, dtype: float32, max_num_seqs: 8}\n"
        "    additional_outputs: [num_input_tokens, num_output_tokens]\n"
    )
    repo = tmp / "repo"
    build_spec(spec, repo)
    server = triton_server_factory(
        repo, extra_args=["--model-control-mode=explicit", f"--load-model={MODEL}"]
    )
    server.repo = repo
    server.tokenizer = hf / "tokenizer.json"
    return server


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_llm_load_on_the_engine_gets_exact_lengths_counted_by_the_engine(
    tiny_engine: Any, protocol: str
) -> None:
    url = tiny_engine.grpc_url if protocol == "grpc" else tiny_engine.http_url
    settings = PerfSettings(
        url=url,
        model=MODEL,
        protocol=protocol,
        levels=(2.0,),
        measurement_interval_ms=1500,
        max_trials=3,
        warmup_s=0.5,
        tokenizer=str(tiny_engine.repo),  # found as <model>/<version>/hf_model/tokenizer.json
        llm=LlmLoad(prompt_tokens=Length(24), output_tokens=Length(12, 3), seed=4, prompts=16),
    )
    (step,) = run_perf(settings).steps
    st = step.stream
    assert step.error_count == 0, step.errors
    assert step.requests > 0 and st is not None
    assert st.token_counting == "engine"
    # every request generated exactly what it asked for (12 +- 3, drawn per request)
    assert st.output_length_misses == 0 and st.output_length_error_avg == 0.0
    assert st.asked_output_tokens is not None and st.asked_output_tokens.std_us > 0
    # the engine's own prompt count agrees with the load generator's: 24 for every prompt
    assert st.input_tokens is not None and st.input_tokens.min_us == st.input_tokens.max_us == 24
    assert st.ttft is not None and st.output_tokens_per_s > 0


def test_prompts_made_for_the_engine_are_exact_in_its_packed_tokenizer(tiny_engine: Any) -> None:
    tok = PromptTokenizer(tiny_engine.tokenizer)
    import random

    text = tok.make(40, random.Random(1))
    assert tok.count(text) == 40


def test_tune_engine_loads_a_candidate_with_a_model_json_override_and_restores_the_stage(
    tiny_engine: Any, tmp_path: Path
) -> None:
    from tritonkit.tune.control import ModelControl
    from tritonkit.tune.engine import EngineSpace, tune_engine

    url = tiny_engine.grpc_url
    result = tune_engine(
        url=url,
        model=MODEL,
        model_dir=tiny_engine.repo / MODEL,
        levels=(2.0,),
        llm=LlmLoad(prompt_tokens=Length(16), output_tokens=Length(8)),
        budget="ttft_p99=30s",
        space=EngineSpace({"max_num_seqs": (2,)}),
        max_candidates=2,
        duration_s=2.0,
        warmup_s=0.3,
        tokenizer=str(tiny_engine.tokenizer),
    )
    assert [dict(t.settings) for t in result.trials] == [{}, {"max_num_seqs": 2}]
    assert all(t.error is None and t.output_tokens_per_s > 0 for t in result.trials)
    assert result.best(2.0) is not None and result.gain(2.0) is not None
    data = result.to_dict()
    assert json.dumps(data)  # JSON-able, per-level answer and front included
    assert data["per_level"][0]["pareto"]
    control = ModelControl(url, protocol="grpc")
    try:
        assert control.is_ready(MODEL)  # the stage's own files are loaded back
    finally:
        control.close()
