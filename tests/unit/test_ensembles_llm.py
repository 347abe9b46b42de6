"""The LLM-decoder pipelines' own stages: the prompt stage and the decoupled front (no engine).

``llm_prompt.py`` turns the stand-in decoder's findings and the question into the prompt;
``llm_front.py`` fetches it through BLS, streams the vLLM stage through BLS and forwards each
step's text. Here a stand-in for ``triton_python_backend_utils`` (which exists only in Triton's
stub process) plays the prompt ensemble and the engine, and records what the front sends; the
real server and engine run the same files in tests/integration/test_llm_pipelines.py.
"""

from __future__ import annotations

import ast
import gc
import json
import sys
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests._examples import load_example
from tritonkit.config import config_to_dict, read_config
from tritonkit.repository import build_spec, load_spec
from tritonkit.triton_side import TRITON_SIDE_DIR

ENSEMBLES = Path(__file__).resolve().parents[2] / "ensembles"
reference = load_example("ensembles/reference.py")
if str(TRITON_SIDE_DIR) not in sys.path:  # bls_streams.py, shipped beside the front by its spec
    sys.path.insert(0, str(TRITON_SIDE_DIR))
prompt_stage = reference.load_stage("common/llm_prompt.py")
front = reference.load_stage("common/llm_front.py")


# -- the prompt stage ---------------------------------------------------------------------------


def test_prompt_holds_the_findings_then_the_question_and_an_open_answer() -> None:
    prompt = prompt_stage.build_prompt("Red  covers\nthe top.", "  Where is   red? ", "Found:")
    assert prompt == "Found:\nRed covers the top.\nQuestion: Where is red?\nAnswer:"
    assert "Question: Describe the image." in prompt_stage.build_prompt("x", " ")


def test_prompt_refuses_a_question_that_would_overflow_the_engine_context_naming_text_query() -> None:
    fits = prompt_stage.build_prompt("findings", "q" * 10, "P:", max_bytes=60)
    assert len(fits.encode()) <= 60
    with pytest.raises(prompt_stage.PromptError, match=r"TEXT_QUERY makes a prompt of \d+ bytes") as info:
        prompt_stage.build_prompt("findings", "é" * 40, "P:", max_bytes=60)  # 80 bytes of UTF-8
    assert "at most 30 bytes" in str(info.value)  # 60 - len("P:\nfindings\nQuestion: \nAnswer:")


# -- the front, with a stand-in for Triton's pb_utils ---------------------------------------------


class _Tensor:
    def __init__(self, name: str, value: np.ndarray) -> None:
        self.name, self.value = name, np.asarray(value)

    def as_numpy(self) -> np.ndarray:
        return self.value


class _Error:
    INVALID_ARG, CANCELLED, INTERNAL = "INVALID_ARG", "CANCELLED", "INTERNAL"

    def __init__(self, message: str, code: str = "INTERNAL") -> None:
        self._message, self._code = message, code

    def message(self) -> str:
        return self._message

    def code(self) -> str:
        return self._code


class _Response:
    def __init__(self, tensors: list[_Tensor] | None = None, error: _Error | None = None) -> None:
        self.tensors, self._error = tensors or [], error

    def has_error(self) -> bool:
        return self._error is not None

    def error(self) -> _Error | None:
        return self._error


class _Sender:
    """Records responses; reports cancellation once ``cancel_after`` responses were sent.

    Like Triton 2.51's stub, it drops the outputs its request did not ask for, and records them:
    the stub drops them with the GIL released, so the front must never send one."""

    def __init__(self, cancel_after: int | None = None) -> None:
        self.sent: list[tuple[_Response | None, int]] = []
        self.cancel_after = cancel_after
        self.done = threading.Event()
        self.requested: set[str] | None = None  # None: every output
        self.unrequested: list[str] = []

    def is_cancelled(self) -> bool:
        return self.cancel_after is not None and len(self.sent) >= self.cancel_after

    def send(self, response: _Response | None = None, flags: int = 0) -> None:
        if response is not None and self.requested is not None:
            self.unrequested += [t.name for t in response.tensors if t.name not in self.requested]
        self.sent.append((response, flags))
        if flags:
            self.done.set()


class _Request:
    def __init__(
        self, inputs: dict[str, np.ndarray], sender: _Sender, requested: tuple[str, ...] = ()
    ) -> None:
        self.inputs, self.sender, self.requested = inputs, sender, requested
        sender.requested = set(requested) if requested else None

    def get_response_sender(self) -> _Sender:
        return self.sender

    def requested_output_names(self) -> list[str]:
        return list(self.requested)  # Triton names every output when the client named none


class _Logger:
    lines: list[str] = []

    @classmethod
    def log_info(cls, line: str) -> None:
        cls.lines.append(line)

    log_error = log_info


class _Engine:
    """Plays the prompt ensemble (unary) and the vLLM stage (a stream of text_output responses)."""

    def __init__(self, tokens: list[str], *, cancellable: bool = False, fail_at: int | None = None) -> None:
        self.tokens, self.cancellable, self.fail_at = tokens, cancellable, fail_at
        self.requests: list[tuple[str, dict[str, np.ndarray]]] = []
        self.streams: list[weakref.ref[_Stream]] = []  # each BLS stream, alive while referenced
        self.generated = 0
        self.prompt_error: _Error | None = None
        self.fail_message = "engine out of blocks"

    def run(self, model: str, inputs: dict[str, np.ndarray], decoupled: bool) -> Any:
        self.requests.append((model, inputs))
        if not decoupled:
            if self.prompt_error is not None:
                return _Response(error=self.prompt_error)
            return _Response([_Tensor("PROMPT", np.array([b"the prompt"], dtype=object))])
        stream = _Stream(self, inputs)
        self.streams.append(weakref.ref(stream))
        return stream


class _Stream:
    def __init__(self, engine: _Engine, inputs: dict[str, np.ndarray]) -> None:
        self.engine, self.cancelled, self.inputs = engine, False, inputs
        self.finished = False  # read to its end
        if not engine.cancellable:
            self.cancel = None  # Triton 2.51: the BLS response iterator has no cancel()

    def cancel(self) -> None:  # type: ignore[no-redef]
        self.cancelled = True

    def __iter__(self) -> Iterator[_Response]:
        for i, token in enumerate(self.engine.tokens):
            if self.cancelled:
                yield _Response(error=_Error("Request was cancelled", _Error.CANCELLED))
                return
            if i == self.engine.fail_at:
                yield _Response(error=_Error(self.engine.fail_message))
                return
            self.engine.generated += 1
            tensors = [_Tensor("text_output", np.array([token.encode()], dtype=object))]
            if "return_num_input_tokens" in self.inputs:  # as the vLLM stage counts: prompt on each
                tensors.append(_Tensor("num_input_tokens", np.array([11], np.uint32)))
            if "return_num_output_tokens" in self.inputs:  # ...and the tokens of this response
                tensors.append(_Tensor("num_output_tokens", np.array([len(token) or 1], np.uint32)))
            if "return_finish_reason" in self.inputs:
                last = i == len(self.engine.tokens) - 1
                tensors.append(_Tensor("finish_reason", np.array([b"length" if last else b"None"], object)))
            yield _Response(tensors)
        yield _Response()  # the flags-only final response of a BLS stream
        self.finished = True


def _pb(engine: _Engine) -> Any:
    class InferenceRequest:
        def __init__(self, model_name: str, inputs: list[_Tensor], requested_output_names: list[str]) -> None:
            self.model, self.inputs = model_name, {t.name: t.value for t in inputs}

        def exec(self, decoupled: bool = False) -> Any:
            return engine.run(self.model, self.inputs, decoupled)

    class Pb:
        TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
        Tensor, TritonError, InferenceResponse, Logger = _Tensor, _Error, _Response, _Logger
        TritonModelException = RuntimeError

        @staticmethod
        def get_input_tensor_by_name(request: _Request, name: str) -> _Tensor | None:
            value = request.inputs.get(name)
            return None if value is None else _Tensor(name, value)

        @staticmethod
        def get_output_tensor_by_name(response: _Response, name: str) -> _Tensor | None:
            return next((t for t in response.tensors if t.name == name), None)

    Pb.InferenceRequest = InferenceRequest  # type: ignore[attr-defined]
    return Pb


def _front(engine: _Engine, outputs: tuple[str, ...] = ("GENERATED_TEXT",), **params: str) -> Any:
    parameters = {
        "PROMPT_MODEL": "vlm_llm_prompt",
        "PROMPT_INPUTS": "RAW_IMAGE,TEXT_QUERY",
        "LLM_MODEL": "tiny_llm",
        "MAX_TOKENS_LIMIT": "16",
        "DEFAULT_MAX_TOKENS": "8",
        **params,
    }
    config = {
        "name": "vlm_llm",
        "input": [{"name": n} for n in ("RAW_IMAGE", "TEXT_QUERY", "MAX_TOKENS", "SAMPLING_PARAMETERS")],
        "output": [{"name": name} for name in outputs],
        "parameters": {k: {"string_value": v} for k, v in parameters.items()},
    }
    return front.LlmFront({"model_instance_name": "vlm_llm_0"}, config, _pb(engine))


def _request(
    sender: _Sender, max_tokens: int | None = None, requested: tuple[str, ...] = (), sampling: Any = None
) -> _Request:
    inputs = {"RAW_IMAGE": np.zeros(4, np.uint8), "TEXT_QUERY": np.array([b"What?"], dtype=object)}
    if max_tokens is not None:
        inputs["MAX_TOKENS"] = np.array([max_tokens], np.int32)
    if sampling is not None:
        inputs["SAMPLING_PARAMETERS"] = np.array(
            [sampling if isinstance(sampling, bytes) else json.dumps(sampling).encode()], dtype=object
        )
    return _Request(inputs, sender, requested)


def _run(
    engine: _Engine,
    sender: _Sender,
    max_tokens: int | None = None,
    outputs: tuple[str, ...] = ("GENERATED_TEXT",),
    requested: tuple[str, ...] = (),
    sampling: Any = None,
    **params: str,
) -> Any:
    model = _front(engine, outputs, **params)
    model.stream([_request(sender, max_tokens, requested, sampling)])
    assert sender.done.wait(5)
    model.finalize()
    return model


def _texts(sender: _Sender) -> list[str]:
    return [
        r.tensors[0].value[0].decode()
        for r, _ in sender.sent
        if r is not None and r.tensors and r.tensors[0].name == "GENERATED_TEXT"
    ]


def test_front_forwards_each_engine_step_as_one_response_then_a_final_flag() -> None:
    engine, sender = _Engine(["Hel", "lo", "", " world"]), _Sender()
    _run(engine, sender, max_tokens=12)
    assert _texts(sender) == ["Hel", "lo", "", " world"]  # one response per engine step
    assert sender.sent[-1] == (None, 1) and all(flags == 0 for _, flags in sender.sent[:-1])
    (prompt_model, prompt_inputs), (llm_model, llm_inputs) = engine.requests
    assert prompt_model == "vlm_llm_prompt" and set(prompt_inputs) == {"RAW_IMAGE", "TEXT_QUERY"}
    assert llm_model == "tiny_llm" and llm_inputs["text_input"].tolist() == [b"the prompt"]
    assert llm_inputs["stream"].tolist() == [True]
    assert llm_inputs["exclude_input_in_output"].tolist() == [True]
    assert json.loads(llm_inputs["sampling_parameters"][0]) == {"temperature": 0, "max_tokens": 12}


def test_front_relays_the_engines_counts_and_finish_reason_with_the_last_piece_when_declared() -> None:
    engine, sender = _Engine(["Hel", "lo", "", " world"]), _Sender()
    usage = ("PROMPT_TOKENS", "COMPLETION_TOKENS", "FINISH_REASON")
    _run(engine, sender, max_tokens=12, outputs=("GENERATED_TEXT", *usage))
    llm_inputs = engine.requests[1][1]
    assert all(
        llm_inputs[flag].tolist() == [True]
        for flag in ("return_num_input_tokens", "return_num_output_tokens", "return_finish_reason")
    )
    assert _texts(sender) == ["Hel", "lo", "", " world"]
    assert sender.sent[-1] == (None, 1) and all(flags == 0 for _, flags in sender.sent[:-1])
    pieces = [r for r, _ in sender.sent[:-1]]
    assert all([t.name for t in r.tensors] == ["GENERATED_TEXT"] for r in pieces[:-1])
    last = {t.name: t.value.tolist() for t in pieces[-1].tensors}
    # the prompt as the engine counted it; every response's tokens summed; the engine's last reason
    expected = {"PROMPT_TOKENS": [11], "COMPLETION_TOKENS": [3 + 2 + 1 + 6], "FINISH_REASON": [b"length"]}
    assert last == {"GENERATED_TEXT": [b" world"], **expected}
    assert pieces[-1].tensors[1].value.dtype == np.int32


@pytest.mark.parametrize(
    ("requested", "relayed"),
    [
        (("GENERATED_TEXT",), []),  # a plain gRPC or generate_stream client
        (("GENERATED_TEXT", "COMPLETION_TOKENS"), ["COMPLETION_TOKENS"]),
        (("PROMPT_TOKENS",), ["PROMPT_TOKENS"]),  # no text asked: pieces without GENERATED_TEXT
    ],
)
def test_front_sends_only_the_outputs_the_request_asked_for(
    requested: tuple[str, ...], relayed: list[str]
) -> None:
    """Triton 2.51's stub drops unrequested outputs with the GIL released: a count sent to a client
    that asked for GENERATED_TEXT alone crashed the stub under the hostile soak (known issues)."""
    engine, sender = _Engine(["Hel", "lo", " world"]), _Sender()
    usage = ("PROMPT_TOKENS", "COMPLETION_TOKENS", "FINISH_REASON")
    _run(engine, sender, max_tokens=12, outputs=("GENERATED_TEXT", *usage), requested=requested)
    assert sender.unrequested == []
    assert sender.sent[-1] == (None, 1) and len(sender.sent) == 4  # still one response per step
    last = [t.name for t in sender.sent[-2][0].tensors]
    assert last == [n for n in ("GENERATED_TEXT", *usage) if n in requested]
    assert [n for n in last if n in usage] == relayed
    # counts are asked of the engine only when the request wants one
    assert any(name.startswith("return_") for name in engine.requests[1][1]) == bool(relayed)


def test_front_streams_in_execute_and_lets_go_of_the_engine_stream_after_a_round_trip() -> None:
    """Triton 2.51's stub: threads reading BLS streams can deadlock it, and a finished stream let
    go of before the stub's cleanup has run is freed without the GIL (bls_streams.py). The front
    answers in execute itself, then asks the sender is_cancelled() (queued behind that cleanup)
    before it drops the stream."""
    engine, sender = _Engine(["Hel", "lo"]), _Sender()
    events: list[str] = []
    original = sender.is_cancelled

    def is_cancelled() -> bool:
        streams = [ref() for ref in engine.streams]
        events.append(", ".join("finished" if s.finished else "open" for s in streams if s is not None))
        return original()

    sender.is_cancelled = is_cancelled  # type: ignore[method-assign]
    model = _front(engine)
    model.stream([_request(sender)])
    assert sender.sent[-1] == (None, 1)  # answered before stream() returned: no worker thread
    gc.collect()
    (stream,) = engine.streams
    assert stream() is None  # let go of by the front itself...
    assert events[-1] == "finished"  # ...only after a round trip made once the stream had ended
    model.finalize()


def test_front_asks_the_engine_for_no_counts_when_it_declares_no_usage_outputs() -> None:
    engine, sender = _Engine(["a"]), _Sender()
    _run(engine, sender)
    assert not any(name.startswith("return_") for name in engine.requests[1][1])
    assert sender.sent[-1] == (None, 1)


def test_front_asks_for_the_default_token_count_when_the_request_names_none() -> None:
    engine, sender = _Engine(["a"]), _Sender()
    _run(engine, sender, SAMPLING_PARAMETERS='{"temperature": 0.7, "seed": 3}')
    sampling = json.loads(engine.requests[1][1]["sampling_parameters"][0])
    assert sampling == {"temperature": 0.7, "seed": 3, "max_tokens": 8}


def test_front_hands_the_requests_own_sampling_to_the_engine_over_its_configured_one() -> None:
    engine, sender = _Engine(["{}"]), _Sender()
    own = {"temperature": 0.9, "structured_outputs": '{"json_object": true}', "stop": ["x"]}
    _run(engine, sender, max_tokens=5, sampling=own, SAMPLING_PARAMETERS='{"temperature": 0, "top_p": 0.5}')
    sampling = json.loads(engine.requests[1][1]["sampling_parameters"][0])
    assert sampling == {"temperature": 0.9, "top_p": 0.5, "structured_outputs": '{"json_object": true}',
                        "stop": ["x"], "max_tokens": 5}  # fmt: skip
    assert _texts(sender) == ["{}"]


@pytest.mark.parametrize(
    ("sampling", "message"),
    [
        (b"{not json", "SAMPLING_PARAMETERS is not JSON"),
        (b"\xff\xfe", "SAMPLING_PARAMETERS is not JSON"),
        ([1, 2], "must be a JSON object, got list"),
        ({"max_tokens": 99}, "may not set max_tokens: send it in MAX_TOKENS"),
        ({"temperature": 1, "best_of": 4, "n": 2}, "not best_of, n"),
        (b" " * (1 << 20) + b"{}", "at most 1048576"),
    ],
    ids=["malformed", "not-utf8", "not-an-object", "max-tokens", "unknown-keys", "too-big"],
)
def test_front_refuses_a_malformed_request_sampling_as_the_clients_before_calling_anything(
    sampling: Any, message: str
) -> None:
    engine, sender = _Engine(["a"]), _Sender()
    _run(engine, sender, sampling=sampling)
    ((response, flags),) = sender.sent
    assert flags == 1 and response.error().code() == "INVALID_ARG", response.error().message()
    assert message in response.error().message() and engine.requests == []


@pytest.mark.parametrize(
    ("own", "code"),
    [
        ({"structured_outputs": '{"json": {"type": "nope"}}'}, "INVALID_ARG"),  # its sampling: its fault
        (None, "INTERNAL"),  # the pipeline's own sampling refused: ours
    ],
)
def test_front_relays_the_engines_refusal_of_a_requests_sampling_as_invalid_argument(
    own: Any, code: str
) -> None:
    engine, sender = _Engine(["a"], fail_at=0), _Sender()
    engine.fail_message = "the request was refused: structured_outputs: unknown type 'nope'"
    _run(engine, sender, sampling=own)
    final, flags = sender.sent[-1]
    assert flags == 1 and final.error().code() == code and "unknown type 'nope'" in final.error().message()


@pytest.mark.parametrize(("max_tokens", "message"), [(0, "at least 1"), (17, "at most 16")])
def test_front_refuses_a_token_count_outside_its_limits_before_calling_anything(
    max_tokens: int, message: str
) -> None:
    engine, sender = _Engine(["a"]), _Sender()
    _run(engine, sender, max_tokens=max_tokens)
    ((response, flags),) = sender.sent
    assert flags == 1 and response is not None and response.error().code() == "INVALID_ARG"
    assert message in response.error().message() and engine.requests == []


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (_Error("in ensemble 'vlm_llm_prompt', RAW_IMAGE is not a readable image"), "INVALID_ARG"),
        (_Error("vision_encoder failed: out of memory"), "INTERNAL"),
    ],
)
def test_front_refuses_bad_input_as_the_clients_and_other_failures_as_internal(
    error: _Error, code: str
) -> None:
    engine, sender = _Engine(["a"]), _Sender()
    engine.prompt_error = error
    _run(engine, sender)
    ((response, flags),) = sender.sent
    assert flags == 1 and response.error().code() == code and error.message() in response.error().message()
    assert [model for model, _ in engine.requests] == ["vlm_llm_prompt"]  # the engine never ran


def test_front_ends_the_stream_with_an_internal_error_when_the_engine_fails_mid_answer() -> None:
    engine, sender = _Engine(["a", "b", "c"], fail_at=2), _Sender()
    _run(engine, sender)
    assert _texts(sender) == ["a", "b"]
    final, flags = sender.sent[-1]
    assert flags == 1 and final.error().code() == "INTERNAL"
    assert "after 2 tokens" in final.error().message() and "engine out of blocks" in final.error().message()


def test_front_stops_forwarding_and_drains_what_the_engine_makes_when_bls_cannot_cancel() -> None:
    """Triton 2.51: the BLS iterator has no cancel(); the engine finishes the answer for nobody."""
    engine, sender = _Engine([f"t{i}" for i in range(10)]), _Sender(cancel_after=3)
    _run(engine, sender)
    assert _texts(sender) == ["t0", "t1", "t2"]
    final, flags = sender.sent[-1]
    assert flags == 1 and final.error().code() == "CANCELLED"
    assert engine.generated == 10  # every token was still generated
    assert any(
        "cancelled after 3 tokens; the engine generated 7 more (Triton's BLS could not" in line
        for line in _Logger.lines
    )


def test_front_tells_the_engine_to_stop_when_the_bls_iterator_can_cancel() -> None:
    """Triton's Python backend after 2.51 (python_backend PR #398): cancel() on the iterator."""
    engine, sender = _Engine([f"t{i}" for i in range(10)], cancellable=True), _Sender(cancel_after=2)
    _run(engine, sender)
    assert _texts(sender) == ["t0", "t1"]
    assert engine.generated == 3  # the step read when the client was found gone, then no more
    assert sender.sent[-1][0].error().code() == "CANCELLED"
    assert any("the engine was told to stop" in line for line in _Logger.lines)


@pytest.mark.parametrize(
    "params",
    [
        {"LLM_MODEL": ""},
        {"SAMPLING_PARAMETERS": '{"max_tokens": 3}'},
        {"SAMPLING_PARAMETERS": "[1]"},
        {"DEFAULT_MAX_TOKENS": "40"},
    ],
)
def test_front_refuses_to_load_with_parameters_it_cannot_honour(params: dict[str, str]) -> None:
    with pytest.raises(RuntimeError, match="vlm_llm: "):
        _front(_Engine([]), **params)


# -- the specs ------------------------------------------------------------------------------------

#: spec -> (its decoupled front, the unary ensemble that makes the prompt)
LLM_SPECS = {
    "vlm_llm.yaml": ("vlm_llm", "vlm_llm_prompt"),
    "arr_coc_llm.yaml": ("arr_coc_llm", "arr_coc_llm_prompt"),
}


@pytest.fixture(scope="module")
def llm_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The two LLM-decoder pipelines built after the unary specs they read back (no engine needed:
    the vLLM stage is reached through BLS only)."""
    out = tmp_path_factory.mktemp("llm_specs") / "model_repository"
    for spec in ("vlm.yaml", "arr_coc.yaml", *LLM_SPECS):
        build_spec(ENSEMBLES / spec, out)
    return out


def test_llm_pipelines_build_a_decoupled_front_over_a_unary_prompt_ensemble(llm_repository: Path) -> None:
    for front_name, prompt_name in LLM_SPECS.values():
        config = dict(config_to_dict(read_config(llm_repository / front_name / "config.pbtxt")))
        assert config["model_transaction_policy"] == {"decoupled": True}
        names = [i["name"] for i in config["input"]]
        assert names == ["RAW_IMAGE", "TEXT_QUERY", "MAX_TOKENS", "SAMPLING_PARAMETERS"]
        assert config["input"][2].get("optional") is True and config["input"][3].get("optional") is True
        params = {k: v["string_value"] for k, v in config["parameters"].items()}
        assert params["PROMPT_MODEL"] == prompt_name and params["LLM_MODEL"] == "tiny_llm"
        assert json.loads(params["SAMPLING_PARAMETERS"]) == {"temperature": 0}
        assert (llm_repository / front_name / "1" / "text_stream.py").is_file()
        assert (llm_repository / front_name / "1" / "bls_streams.py").is_file()
        assert config["instance_group"][0]["count"] == 8  # one stream per instance at a time
        ensemble = dict(config_to_dict(read_config(llm_repository / prompt_name / "config.pbtxt")))
        assert [o["name"] for o in ensemble["output"]] == ["PROMPT"]
        assert "model_transaction_policy" not in ensemble  # unary: BLS exec() without decoupled


def test_llm_pipeline_stages_import_only_numpy_the_stdlib_and_their_shipped_files() -> None:
    for spec in LLM_SPECS:
        for entry in load_spec(ENSEMBLES / spec).models:
            if entry.kind.value != "python":
                continue
            assert entry.source is not None
            shipped = {f.stem for f in entry.files if f.suffix == ".py"}
            for source in (entry.source, *(f for f in entry.files if f.suffix == ".py")):
                for node in ast.walk(ast.parse(source.read_text())):
                    names = (
                        [a.name for a in node.names]
                        if isinstance(node, ast.Import)
                        else [node.module or ""]
                        if isinstance(node, ast.ImportFrom)
                        else []
                    )
                    for name in names:
                        top = name.split(".")[0]
                        allowed = {"numpy", "triton_python_backend_utils", "__future__", *shipped}
                        assert top in allowed or top in sys.stdlib_module_names, (source, name)
