"""The decoders' shared serving code (ensembles/common/text_stream.py) and lazy generation.

The pieces joined are the answer; a fragment is computed only when the stream reaches it; the
Triton-facing ``TextGenerator`` joins pieces (unary), or streams them, stops at MAX_TOKENS and
on cancellation. The real server runs the same code in tests/integration/test_streaming.py;
here a stand-in for ``triton_python_backend_utils`` (which exists only inside Triton's stub
process) records what the model sends.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests._examples import load_example

reference = load_example("ensembles/reference.py")
text_stream = reference.load_stage("common/text_stream.py")
head = reference.load_stage("vlm/vlm_model.py")
decoder = reference.load_stage("arr_coc/decoder.py")


@given(st.lists(st.text(alphabet=" \nab.,(", max_size=8), max_size=12))
def test_word_pieces_join_to_the_fragments_when_split_anywhere(fragments: list[str]) -> None:
    pieces = list(text_stream.word_pieces(fragments))
    assert "".join(pieces) == "".join(fragments)
    assert all(piece for piece in pieces)
    # a piece is one word with the whitespace before it (or trailing whitespace alone)
    assert all(len(piece.split()) <= 1 for piece in pieces)


def test_word_pieces_ask_for_a_fragment_only_when_the_previous_word_is_taken() -> None:
    pulled: list[str] = []

    def fragments() -> Iterator[str]:
        for fragment in ("The dominant ", "colours are ", "red (50%)", " and blue."):
            pulled.append(fragment)
            yield fragment

    pieces = text_stream.word_pieces(fragments())
    assert [next(pieces), next(pieces)] == ["The", " dominant"]
    assert pulled == ["The dominant "]
    assert list(pieces) == [" colours", " are", " red", " (50%)", " and", " blue."]


def test_vlm_answer_computes_later_sentences_only_when_the_stream_reaches_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[bool] = []
    real = head.extreme_zone

    def spy(values: np.ndarray, *, highest: bool) -> str:
        calls.append(highest)
        return str(real(values, highest=highest))

    monkeypatch.setattr(head, "extreme_zone", spy)
    colours = np.full((3, 16, 16), 0.5, dtype=np.float32)
    colours[0, :, :8] = 0.9
    detail = np.zeros((16, 16), dtype=np.float32)
    stream = text_stream.word_pieces(head.answer_fragments("Describe the image.", colours, detail))
    first = list(itertools.islice(stream, 4))
    assert "".join(first) == "The dominant colours are" and calls == []  # brightness comes last
    rest = list(stream)
    assert calls == [True, False]
    assert "".join(first + rest) == head.answer("Describe the image.", colours, detail)


def test_decoder_checks_its_inputs_before_the_first_piece_when_shapes_disagree() -> None:
    fragments = decoder.decode_fragments("q", np.zeros((14, 14)), np.zeros((7, 7)), np.ones(3) / 3,
                                         np.zeros((13, 224, 224)))
    with pytest.raises(decoder.StageError, match="same square grid"):
        next(fragments)


@pytest.mark.parametrize(
    ("value", "message"),
    [(np.array([0], np.int32), "at least 1"), (np.array([1, 2], np.int32), "one INT32 value")],
)
def test_max_tokens_refuses_values_that_cannot_limit_a_stream(value: np.ndarray, message: str) -> None:
    with pytest.raises(text_stream.StageError, match=message):
        text_stream.max_tokens(value)
    assert text_stream.max_tokens(None) is None
    assert text_stream.max_tokens(np.array([7], np.int32)) == 7


# -- TextGenerator, with a stand-in for Triton's pb_utils ----------------------------------------


class _Tensor:
    def __init__(self, name: str, value: np.ndarray) -> None:
        self.name, self.value = name, value

    def as_numpy(self) -> np.ndarray:
        return self.value


class _Error:
    INVALID_ARG, CANCELLED, INTERNAL = "INVALID_ARG", "CANCELLED", "INTERNAL"

    def __init__(self, message: str, code: str) -> None:
        self.message, self.code = message, code


class _Response:
    def __init__(self, tensors: list[_Tensor] | None = None, error: _Error | None = None) -> None:
        self.tensors, self.error = tensors or [], error


class _Sender:
    """Records responses; reports cancellation once ``cancel_after`` pieces were sent."""

    def __init__(self, cancel_after: int | None = None) -> None:
        self.sent: list[tuple[_Response | None, int]] = []
        self.cancel_after = cancel_after
        self.done = threading.Event()

    def is_cancelled(self) -> bool:
        return self.cancel_after is not None and len(self.sent) >= self.cancel_after

    def send(self, response: _Response | None = None, flags: int = 0) -> None:
        self.sent.append((response, flags))
        if flags:
            self.done.set()


class _Request:
    def __init__(self, inputs: dict[str, np.ndarray], sender: _Sender | None = None) -> None:
        self.inputs, self.sender = inputs, sender

    def get_response_sender(self) -> _Sender | None:
        return self.sender


class _Logger:
    lines: list[str] = []

    @classmethod
    def log_info(cls, line: str) -> None:
        cls.lines.append(line)

    log_error = log_info


class _PbUtils:
    TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
    Tensor, TritonError, InferenceResponse, Logger = _Tensor, _Error, _Response, _Logger
    TritonModelException = RuntimeError

    @staticmethod
    def using_decoupled_model_transaction_policy(config: dict[str, Any]) -> bool:
        return bool(config.get("model_transaction_policy", {}).get("decoupled", False))

    @staticmethod
    def get_input_tensor_by_name(request: _Request, name: str) -> _Tensor | None:
        value = request.inputs.get(name)
        return None if value is None else _Tensor(name, value)


def _generator(decoupled: bool) -> Any:
    config: dict[str, Any] = {
        "name": "words",
        "input": [{"name": "TEXT"}, {"name": "MAX_TOKENS"}],
        "parameters": {"MAX_STREAMS": {"string_value": "4"}},
    }
    if decoupled:
        config["model_transaction_policy"] = {"decoupled": True}
    computed: list[str] = []

    def fragments(inputs: dict[str, np.ndarray]) -> Iterator[str]:
        text = inputs["TEXT"].ravel()[0].decode()
        if not text:
            raise text_stream.StageError("TEXT is empty")
        for word in text.split(" "):
            computed.append(word)
            yield word + " "

    generator = text_stream.TextGenerator({"model_instance_name": "words_0"}, config, _PbUtils, fragments)
    generator.computed = computed
    return generator


def _text(value: str) -> np.ndarray:
    return np.array([value.encode()], dtype=np.object_)


def _pieces(sender: _Sender) -> list[str]:
    return [r.tensors[0].value[0].decode() for r, _ in sender.sent if r is not None and r.tensors]


def test_text_generator_joins_the_pieces_when_the_model_is_unary() -> None:
    generator = _generator(decoupled=False)
    ok, bad = generator.respond([_Request({"TEXT": _text("one two three")}), _Request({"TEXT": _text("")})])
    assert ok.tensors[0].value[0] == b"one two three "
    assert (bad.error.code, bad.error.message) == ("INVALID_ARG", "TEXT is empty")


def test_text_generator_streams_each_piece_then_a_final_flag_when_decoupled() -> None:
    generator = _generator(decoupled=True)
    sender = _Sender()
    generator.stream([_Request({"TEXT": _text("one two three")}, sender)])
    assert sender.done.wait(5)
    generator.finalize()
    assert _pieces(sender) == ["one", " two", " three", " "]
    assert sender.sent[-1] == (None, 1) and [f for _, f in sender.sent[:-1]] == [0, 0, 0, 0]


def test_text_generator_stops_computing_when_max_tokens_pieces_were_sent() -> None:
    generator = _generator(decoupled=True)
    sender = _Sender()
    limited = {"TEXT": _text("a b c d e f g"), "MAX_TOKENS": np.array([2], np.int32)}
    generator.stream([_Request(limited, sender)])
    assert sender.done.wait(5)
    generator.finalize()
    assert _pieces(sender) == ["a", " b"] and sender.sent[-1] == (None, 1)
    assert generator.computed == ["a", "b"]  # nothing after the last piece is computed


def test_text_generator_stops_computing_and_ends_the_stream_when_the_client_cancels() -> None:
    generator = _generator(decoupled=True)
    sender = _Sender(cancel_after=2)
    generator.stream([_Request({"TEXT": _text(" ".join(f"w{i}" for i in range(100)))}, sender)])
    assert sender.done.wait(5)
    generator.finalize()
    assert _pieces(sender) == ["w0", " w1"]
    final, flags = sender.sent[-1]
    assert flags == 1 and final is not None and final.error.code == "CANCELLED"
    assert len(generator.computed) <= 3
    assert any("cancelled the stream after 2 pieces" in line for line in _Logger.lines)


def test_text_generator_ends_only_that_stream_with_invalid_argument_when_input_is_bad() -> None:
    generator = _generator(decoupled=True)
    bad, good = _Sender(), _Sender()
    generator.stream([
        _Request({"TEXT": _text("x"), "MAX_TOKENS": np.array([0], np.int32)}, bad),
        _Request({"TEXT": _text("fine")}, good),
    ])
    assert bad.done.wait(5) and good.done.wait(5)
    generator.finalize()
    (response, flags), = bad.sent
    assert flags == 1 and response is not None and response.error.code == "INVALID_ARG"
    assert "MAX_TOKENS must be at least 1" in response.error.message
    assert _pieces(good) == ["fine", " "]
