"""The healer's liveness probe: which models get one, what it sends, and what counts as dead."""

from __future__ import annotations

import json

from tritonkit.server._probe import dead_reason, probe_for

LLM = {
    "name": "llm",
    "backend": "vllm",
    "input": [
        {"name": "text_input", "data_type": "TYPE_STRING", "dims": [1]},
        {"name": "sampling_parameters", "data_type": "TYPE_STRING", "dims": [1], "optional": True},
    ],
    "output": [{"name": "text_output", "data_type": "TYPE_STRING", "dims": [-1]}],
}
ECHO = {
    "name": "echo",
    "backend": "python",
    "max_batch_size": 8,
    "input": [
        {"name": "TEXT", "data_type": "TYPE_STRING", "dims": [1]},
        {"name": "PIXELS", "data_type": "TYPE_FP32", "dims": [2, -1]},
        {"name": "HINT", "data_type": "TYPE_INT32", "dims": [1], "optional": True},
    ],
    "output": [{"name": "ANSWER", "data_type": "TYPE_STRING", "dims": [1]}],
}


def test_probe_asks_an_llm_stage_for_one_token_through_generate() -> None:
    probe = probe_for("llm", LLM, named=False)
    assert probe is not None and probe.path == "/v2/models/llm/generate"
    assert json.loads(probe.body) == {"text_input": "ping", "parameters": {"max_tokens": 1, "temperature": 0}}


def test_probe_leaves_other_models_alone_unless_named_then_sends_zeros_shaped_by_the_config() -> None:
    assert probe_for("echo", ECHO, named=False) is None  # it would run the model's code
    probe = probe_for("echo", ECHO, named=True)
    assert probe is not None and probe.path == "/v2/models/echo/infer"
    assert json.loads(probe.body) == {
        "inputs": [
            {"name": "TEXT", "shape": [1, 1], "datatype": "BYTES", "data": [""]},
            {"name": "PIXELS", "shape": [1, 2, 1], "datatype": "FP32", "data": [0.0, 0.0]},
        ]
    }  # the batch dimension added, -1 made 1, the optional input left out


def test_probe_is_not_made_when_an_input_has_a_type_it_cannot_fill() -> None:
    odd = {**ECHO, "input": [{"name": "X", "data_type": "TYPE_BF16", "dims": [1]}]}
    assert probe_for("echo", odd, named=True) is None


def test_dead_reason_is_the_servers_words_for_a_lost_process_and_none_for_anything_else() -> None:
    stub = json.dumps({"error": "Stub process 'echo_0_0' is not healthy."}).encode()
    assert dead_reason(500, stub) == "Stub process 'echo_0_0' is not healthy."
    engine = json.dumps({"error": "Model is unavailable due to unhealthy vLLM engine"}).encode()
    assert dead_reason(400, engine) is not None  # NVIDIA's backend; generate says 400 for it
    assert dead_reason(200, b'{"text_output": "pong"}') is None
    # the model's own code refused the zeros: it ran, so its process is alive
    assert dead_reason(400, json.dumps({"error": "PIXELS must not be all zeros"}).encode()) is None
    assert dead_reason(500, b"not json at all") is None
