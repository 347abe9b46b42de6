"""A real vLLM engine behind the real tritonserver 2.51, through tritonkit's vllm backend.

One engine start serves the whole module (it takes 15 s on a quiet 2-core box, minutes on a busy
one): the tiny LLM made in code (ensembles/llm/tiny_llm.py) built by `tritonkit build` from a
`backend: vllm` spec, served by LocalTritonServer with the ``llm`` venv (make llm-venv). vLLM's
own offline ``LLM.generate`` on the same directory runs beside it, in the llm venv, as the
reference for greedy generation. Calls go through plain tritonclient (gRPC streaming, the way
NVIDIA's backend is called) and Triton's HTTP generate endpoint.
"""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from tests._examples import load_example
from tests.conftest import ROOT
from tests.integration.test_server_local import processes_mentioning

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

#: a streaming client tritonkit did not write, and its reader of the decoders' metrics
plain = load_example("ensembles/plain_streams.py")
MODEL = "llm"
#: the engine arguments of the stage and of the offline reference (same model, same numerics);
#: max_model_len is the tiny model's whole context, so a cancelled answer can run long (below)
ENGINE = {"max_model_len": 2048, "dtype": "float32", "enforce_eager": True, "seed": 0, "max_num_seqs": 16}
#: tokens a stream that its client cancels asks for: under two CPU hogs the client read its first
#: token up to 0.56 s after it was sent, while the engine made 240 tokens in 0.48 s; 2,000 take
#: about 4 s there, so the cancel reaches a request that is still generating
LONG_ANSWER = {"temperature": 0, "max_tokens": 2000, "ignore_eos": True}
PROMPTS = (
    "The image shows",
    "A blue sky over green hills",
    "Triton serves the model;",
    "The query asks what colour the car is",
    "An orange sunset",
    "Every request carries a prompt",
    "The forest is dark green",
    "Relevance realisation weighs each patch",
)
MAX_TOKENS = 16
#: greedy, every token's id returned through logprobs (0 = only the sampled token's)
GREEDY = {"temperature": 0, "max_tokens": MAX_TOKENS, "logprobs": 0}
ENGINE_READY_S = 900


def _llm_python() -> Path:
    from tritonkit.errors import MissingExtraError
    from tritonkit.server._vllm import find_llm_env

    try:
        env = find_llm_env()
    except MissingExtraError as exc:
        pytest.skip(f"no llm venv (make llm-venv): {exc}")
    return env.path / "bin" / "python"


@pytest.fixture(scope="module")
def llm_python() -> Path:
    return _llm_python()


@pytest.fixture(scope="module")
def tiny_llm(tmp_path_factory: pytest.TempPathFactory, llm_python: Path) -> Path:
    out = tmp_path_factory.mktemp("tiny-llm") / "tiny_llm_hf"
    subprocess.run(
        [str(llm_python), str(ROOT / "ensembles" / "llm" / "tiny_llm.py"), str(out)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return out


class _Offline:
    """vLLM's offline LLM.generate on the tiny model, started now, read when first needed."""

    def __init__(self, llm_python: Path, model: Path, work: Path) -> None:
        job = work / "offline-job.json"
        job.write_text(
            json.dumps({"model": str(model), "engine": ENGINE, "prompts": list(PROMPTS), "sampling": GREEDY}),
            encoding="utf-8",
        )
        self._process = subprocess.Popen(
            [str(llm_python), str(Path(__file__).with_name("_vllm_offline.py")), str(job)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._result: dict[str, Any] | None = None
        self._lock = threading.Lock()

    def result(self) -> dict[str, Any]:
        with self._lock:
            if self._result is None:
                out, err = self._process.communicate(timeout=ENGINE_READY_S)
                if self._process.returncode != 0 or not out.strip():
                    raise AssertionError(f"offline vLLM failed ({self._process.returncode}):\n{err[-3000:]}")
                self._result = json.loads(out.strip().splitlines()[-1])
            return self._result

    def by_prompt(self) -> dict[str, dict[str, Any]]:
        return {r["prompt"]: r for r in self.result()["results"]}

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait(timeout=30)


@pytest.fixture(scope="module")
def engine_server(
    tiny_llm: Path, llm_python: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Any, _Offline]]:
    """The built vLLM stage on a real tritonserver, and the offline reference started beside it."""
    from tritonkit.repository import build_spec
    from tritonkit.server import LocalTritonServer

    work = tmp_path_factory.mktemp("vllm-stage")
    spec = work / "llm.yaml"
    spec.write_text(
        json.dumps(
            {
                "name": "llm",
                "models": [{"name": MODEL, "backend": "vllm", "model": str(tiny_llm), "engine": ENGINE}],
            }
        ),
        encoding="utf-8",
    )
    repository = work / "model_repository"
    build_spec(spec, repository)
    offline = _Offline(llm_python, tiny_llm, work)
    progress: list[str] = []
    server = LocalTritonServer(repository, on_progress=progress.append, startup_timeout=600)
    began = time.monotonic()
    try:
        server.start()
        server.engine_start_s = time.monotonic() - began  # type: ignore[attr-defined]
        server.progress = progress  # type: ignore[attr-defined]
        yield server, offline
    finally:
        sockets = _engine_socket_folder(server.pid)
        server.stop()
        offline.stop()
    assert sockets is None or not sockets.exists(), f"the vLLM engine's sockets were left in {sockets}"


def _engine_socket_folder(server: int | None) -> Path | None:
    """Where MODEL's vLLM engine names its ZMQ sockets: VLLM_RPC_BASE_PATH in the environment of
    ``server``'s stub (None: no stub runs). Only this server's: a stub another test's server left
    behind (known issues) has a folder of its own."""
    from tests.integration._faults import descends_from

    stubs = processes_mentioning(f"/{MODEL}/1/model.py")
    for pid in [p for p in stubs if server is not None and descends_from(p, server)]:
        try:
            environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:  # the process ended while we looked
            continue
        for item in environment:
            if item.startswith(b"VLLM_RPC_BASE_PATH="):
                return Path(item.split(b"=", 1)[1].decode())
    return None


# -- calling it ---------------------------------------------------------------------------


def _inputs(prompt: str, params: dict[str, Any] | str, *, stream: bool, flags: dict[str, bool]) -> list[Any]:
    import tritonclient.grpc as grpcclient

    def tensor(name: str, value: Any, datatype: str) -> Any:
        array = np.array([value], dtype=np.object_ if datatype == "BYTES" else bool)
        item = grpcclient.InferInput(name, [1], datatype)
        item.set_data_from_numpy(array)
        return item

    raw = params if isinstance(params, str) else json.dumps(params)
    items = [
        tensor("text_input", prompt.encode("utf-8"), "BYTES"),
        tensor("stream", stream, "BOOL"),
        tensor("sampling_parameters", raw.encode("utf-8"), "BYTES"),
    ]
    items += [tensor(name, value, "BOOL") for name, value in flags.items()]
    return items


def _generate(
    server: Any,
    prompt: str,
    params: dict[str, Any] | str = GREEDY,
    *,
    stream: bool = False,
    cancel_after: int | None = None,
    deadline_s: float | None = None,
    **flags: bool,
) -> list[dict[str, Any]]:
    """Every response of one request, each a dict of outputs (or {"error": message}).

    ``cancel_after``: the client cancels after that many responses; ``deadline_s``: the stream's
    gRPC deadline (the server ends the call then)."""
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(server.grpc_address)
    responses: queue.Queue[tuple[Any, Any]] = queue.Queue()
    client.start_stream(
        callback=lambda result, error: responses.put((result, error)), stream_timeout=deadline_s
    )
    out: list[dict[str, Any]] = []
    try:
        client.async_stream_infer(
            MODEL, _inputs(prompt, params, stream=stream, flags=flags), enable_empty_final_response=True
        )
        while True:
            result, error = responses.get(timeout=120)
            if error is not None:
                out.append({"error": error.message()})
                break
            response = result.get_response()
            item: dict[str, Any] = {o.name: result.as_numpy(o.name) for o in response.outputs}
            if item:
                out.append(item)
            if response.parameters["triton_final_response"].bool_param:
                break
            if cancel_after is not None and len(out) >= cancel_after:
                client.stop_stream(cancel_requests=True)
                break
    finally:
        client.stop_stream()
        client.close()
    return out


def _text(responses: list[dict[str, Any]]) -> str:
    return "".join(r["text_output"][0].decode("utf-8") for r in responses if "text_output" in r)


#: what the backend logs when it aborts a request whose client went away: it noticed the
#: cancellation (is_cancelled), or sending to the client's closed stream failed first
_ABORTED = re.compile(
    r"request \w+ (?:cancelled by the client|dropped by the client[^;]*); aborted in the engine"
)


def _aborted(server: Any) -> int:
    return len(_ABORTED.findall(server.logs()))


def _in_engine(server: Any) -> float | None:
    """The backend's gauge of requests in the engine now (None: the gauge is not exported)."""
    return plain.decoder_counters(server.metrics_url).get(("tritonkit_generation_active", MODEL))


def _token_ids(responses: list[dict[str, Any]]) -> list[int]:
    ids: list[int] = []
    for response in responses:
        for step in json.loads(response["logprobs"][0]):
            ids.append(int(next(iter(step))))
    return ids


# -- greedy generation equals vLLM offline ------------------------------------------------


def test_vllm_stage_greedy_text_and_tokens_equal_vllm_offline_when_not_streamed(engine_server: Any) -> None:
    server, offline = engine_server
    reference = offline.by_prompt()
    for prompt in PROMPTS[:3]:
        responses = _generate(
            server,
            prompt,
            exclude_input_in_output=True,
            return_logprobs=True,
            return_num_input_tokens=True,
            return_num_output_tokens=True,
            return_finish_reason=True,
            return_cumulative_logprob=True,
        )
        assert len(responses) == 1 and "error" not in responses[0], responses
        want = reference[prompt]
        assert _text(responses) == want["text"]
        assert _token_ids(responses) == want["token_ids"]
        (only,) = responses
        assert int(only["num_input_tokens"][0]) == len(want["prompt_token_ids"])
        assert int(only["num_output_tokens"][0]) == len(want["token_ids"])
        assert only["finish_reason"][0].decode() == want["finish_reason"]
        assert np.isfinite(only["cumulative_logprob"][0]) and only["cumulative_logprob"][0] <= 0


def test_vllm_stage_prepends_the_prompt_when_exclude_input_in_output_is_unset(engine_server: Any) -> None:
    server, offline = engine_server
    prompt = PROMPTS[0]
    responses = _generate(server, prompt)
    assert _text(responses) == prompt + offline.by_prompt()[prompt]["text"]


def test_vllm_stage_streams_one_response_per_token_equal_to_vllm_offline(engine_server: Any) -> None:
    server, offline = engine_server
    prompt = PROMPTS[1]
    want = offline.by_prompt()[prompt]
    responses = _generate(server, prompt, stream=True, return_logprobs=True, return_num_output_tokens=True)
    assert "error" not in responses[-1], responses[-1]
    assert _text(responses) == want["text"]
    assert _token_ids(responses) == want["token_ids"]
    assert [int(r["num_output_tokens"][0]) for r in responses] == [1] * len(want["token_ids"])


def test_vllm_stage_batched_concurrent_streams_each_equal_vllm_offline(engine_server: Any) -> None:
    """8 streams at once: the engine batches them; each must still be its own greedy sequence."""
    server, offline = engine_server
    results: dict[str, list[dict[str, Any]]] = {}

    def one(prompt: str) -> None:
        results[prompt] = _generate(server, prompt, stream=True, return_logprobs=True)

    threads = [threading.Thread(target=one, args=(p,)) for p in PROMPTS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    reference = offline.by_prompt()
    for prompt in PROMPTS:
        assert _token_ids(results[prompt]) == reference[prompt]["token_ids"], prompt
        assert _text(results[prompt]) == reference[prompt]["text"], prompt


def test_vllm_stage_accepts_numbers_and_booleans_sent_as_strings_like_genai_perf(engine_server: Any) -> None:
    server, _ = engine_server
    params = {"max_tokens": "5", "temperature": "0", "ignore_eos": "true", "top_p": "1.0"}
    responses = _generate(server, PROMPTS[2], params, stream=True, return_num_output_tokens=True)
    assert "error" not in responses[-1], responses[-1]
    assert sum(int(r["num_output_tokens"][0]) for r in responses) == 5


def test_vllm_stage_answers_the_http_generate_endpoint(engine_server: Any) -> None:
    server, offline = engine_server
    prompt = PROMPTS[3]
    body = {"text_input": prompt, "sampling_parameters": json.dumps(GREEDY), "exclude_input_in_output": True}
    reply = httpx.post(f"{server.http_url}/v2/models/{MODEL}/generate", json=body, timeout=120)
    assert reply.status_code == 200, reply.text
    assert reply.json()["text_output"] == offline.by_prompt()[prompt]["text"]


def test_vllm_engine_sockets_live_in_a_folder_the_server_removes(engine_server: Any) -> None:
    # vLLM's default is the system temp folder, where engines killed with the server left their
    # sockets (thousands after a day of tests); the fixture checks that stop() removes the folder.
    import tempfile

    folder = _engine_socket_folder(engine_server[0].pid)
    assert folder is not None and folder.name.startswith("tritonkit-ipc-"), folder
    assert folder.parent == Path(tempfile.gettempdir())
    assert any(path.is_socket() for path in folder.iterdir()), list(folder.iterdir())


# -- cancellation -------------------------------------------------------------------------


def test_vllm_stage_aborts_the_engine_request_when_the_client_cancels_mid_stream(engine_server: Any) -> None:
    server, _ = engine_server
    # The client's stream ends at its gRPC deadline, which the server enforces: Triton cancels
    # the request as for a client's cancel, and the backend sees it at the engine's next output.
    # Not on the client's first token: on a 2-core box, while the CPU engine generated, processes
    # outside the server's session got no CPU for seconds (docs/known-issues.md), and the client
    # read its first token after the whole answer. LONG_ANSWER takes 3.5-5 s, idle or beside two
    # CPU hogs; a deadline that passes after it ended leaves nothing to abort and is halved.
    deadline_s = 1.0
    for _ in range(4):
        before = _aborted(server)
        got = _generate(server, PROMPTS[4], LONG_ANSWER, stream=True, deadline_s=deadline_s)
        errors = [r["error"] for r in got if "error" in r]
        assert all("deadline" in e.lower() for e in errors), errors
        waited = time.monotonic() + 120
        while _in_engine(server) != 0 and _aborted(server) == before:
            assert time.monotonic() < waited, "the cancelled request never left the engine"
            time.sleep(0.2)
        # The abort's log line and the gauge travel separately from the stub: give the line a moment.
        settle = time.monotonic() + 5
        while _aborted(server) == before and time.monotonic() < settle:
            time.sleep(0.2)
        if _aborted(server) > before:
            break
        deadline_s /= 2
    assert _aborted(server) > before, "in 4 tries no cancelled request was aborted in the engine"
    assert server.is_ready()
    after = _generate(server, PROMPTS[0], {"temperature": 0, "max_tokens": 3}, stream=True)
    assert "error" not in after[-1], after[-1]


# -- untrusted input ----------------------------------------------------------------------

BAD_REQUESTS = [
    pytest.param("hi", "not json", "not valid JSON", id="sampling_parameters-not-json"),
    pytest.param("hi", "[1, 2]", "must be a JSON object", id="sampling_parameters-not-an-object"),
    pytest.param("hi", '{"max_tokens": -1}', "max_tokens must be between 1", id="negative-max_tokens"),
    pytest.param("hi", '{"max_tokens": 10000000000000}', "max_tokens must be between", id="huge-max_tokens"),
    pytest.param("hi", '{"bogus": 1}', "unknown sampling parameter(s) 'bogus'", id="unknown-key"),
    pytest.param("hi", '{"temperature": "hot"}', "'temperature' must be a number", id="wrong-type"),
    pytest.param("hi", '{"n": 0}', "invalid sampling_parameters", id="refused-by-SamplingParams"),
    pytest.param("hi", '{"lora_name": "colours"}', "LoRA feature is not enabled", id="lora-not-enabled"),
    pytest.param("   ", "{}", "text_input is empty", id="empty-prompt"),
    pytest.param(
        "word " * 1200, "{}", "maximum context length is 2048 tokens", id="prompt-past-max_model_len"
    ),
]


@pytest.mark.parametrize(("prompt", "params", "says"), BAD_REQUESTS)
def test_vllm_stage_refuses_a_bad_request_with_a_clear_error_for_it_alone(
    engine_server: Any, prompt: str, params: str, says: str
) -> None:
    server, offline = engine_server
    good: dict[str, list[dict[str, Any]]] = {}

    def neighbour_call() -> None:
        good["out"] = _generate(server, PROMPTS[5], stream=True, return_logprobs=True)

    neighbour = threading.Thread(target=neighbour_call)
    neighbour.start()
    responses = _generate(server, prompt, params)
    neighbour.join(timeout=300)
    assert len(responses) == 1 and "error" in responses[0], responses
    assert says in responses[0]["error"]
    # gRPC streams carry only the message; Triton's HTTP generate endpoint shows the code.
    body = {"text_input": prompt, "sampling_parameters": params}
    reply = httpx.post(f"{server.http_url}/v2/models/{MODEL}/generate", json=body, timeout=120)
    assert reply.status_code == 400 and says in reply.json()["error"], reply.text
    assert _token_ids(good["out"]) == offline.by_prompt()[PROMPTS[5]]["token_ids"]
    assert server.is_ready()


def test_vllm_stage_refuses_exclude_input_false_when_streaming(engine_server: Any) -> None:
    server, _ = engine_server
    responses = _generate(server, "hi", {}, stream=True, exclude_input_in_output=False)
    assert "exclude_input_in_output = false is not allowed" in responses[0]["error"]


# -- start-up -----------------------------------------------------------------------------


def test_vllm_stage_reports_engine_start_up_progress_and_its_own_kv_cache_size(engine_server: Any) -> None:
    server, _ = engine_server
    said = "\n".join(server.progress)
    assert "starting the vLLM engine for model 'llm'" in said
    assert re.search(r"vLLM engine for model 'llm' ready in \d+\.\d s", said)
    assert re.search(r"KV cache \d+ MiB", said)  # the spec left it unsized
    assert "/models/llm/1/hf_model is not on this machine" in said  # the model-path rule
    print(
        f"engine start (server start to ready): {server.engine_start_s:.1f} s, load {os.getloadavg()}",
        file=sys.stderr,
    )


# -- a hostile mix ------------------------------------------------------------------------


def test_vllm_stage_survives_a_hostile_mix_of_good_bad_and_vanishing_clients(engine_server: Any) -> None:
    """24 clients at once: 12 good streams, 8 malformed requests, 4 that cancel after 1 piece.

    Every good stream is the offline greedy sequence, every bad one one INVALID_ARG; every
    request leaves the engine (its gauge back to 0); the engine then still answers.
    """
    server, offline = engine_server
    reference = offline.by_prompt()
    bad = [tuple(b.values) for b in BAD_REQUESTS][:8]
    aborted_before = _aborted(server)
    results: dict[str, Any] = {}

    def good(i: int) -> None:
        prompt = PROMPTS[i % len(PROMPTS)]
        results[f"good{i}"] = (prompt, _generate(server, prompt, stream=True, return_logprobs=True))

    def malformed(i: int) -> None:
        prompt, params, _ = bad[i]
        results[f"bad{i}"] = _generate(server, prompt, params, stream=True)

    def vanishing(i: int) -> None:
        params = {"temperature": 0, "max_tokens": 240, "ignore_eos": True}
        results[f"gone{i}"] = _generate(server, PROMPTS[i], params, stream=True, cancel_after=1)

    threads = [threading.Thread(target=good, args=(i,)) for i in range(12)]
    threads += [threading.Thread(target=malformed, args=(i,)) for i in range(len(bad))]
    threads += [threading.Thread(target=vanishing, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    for i in range(12):
        prompt, responses = results[f"good{i}"]
        assert _token_ids(responses) == reference[prompt]["token_ids"], prompt
    for i in range(len(bad)):
        (only,) = results[f"bad{i}"]
        assert bad[i][2] in only.get("error", ""), only
    deadline = time.monotonic() + 60
    while _in_engine(server) != 0:
        said = [line for line in server.logs().splitlines() if "[tritonkit vllm]" in line][-12:]
        assert time.monotonic() < deadline, ("requests stayed in the engine", _in_engine(server), said)
        time.sleep(0.5)
    # How many of the 4 were aborted rather than run to their end is not asserted: on the 2-core
    # CI box 0 or 1 were (the test process's 24 client threads wait for CPUs the engine holds),
    # 4 on a quiet one. The abort itself is the single-client test's.
    print(f"vanished clients' requests aborted in the engine: {_aborted(server) - aborted_before} of 4")
    assert server.running and server.is_ready()
    after = _generate(server, PROMPTS[0], stream=True, return_logprobs=True)
    assert _token_ids(after) == reference[PROMPTS[0]]["token_ids"]


# -- shutdown (last: it stops the module's server) ------------------------------------------


def test_vllm_stage_stops_its_engine_cleanly_when_the_server_stops(engine_server: Any) -> None:
    server, _ = engine_server
    server.stop()
    logs = server.logs()
    # finalize() ran to its end, and Triton did not have to give up on the stub: the state of a
    # clean stop (how long it took on a loaded box is not the test's business)
    assert "model 'llm': vLLM engine stopped" in logs, logs[-3000:]
    assert "Exit timeout expired" not in logs
    assert not server.running
