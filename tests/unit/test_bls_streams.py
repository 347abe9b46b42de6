"""``tritonkit/triton_side/bls_streams.py``: how Python models read BLS streams on Triton 2.51
(the real stub runs it in tests/integration/test_bls_gil.py and the LLM pipelines' tests)."""

from __future__ import annotations

import gc
import importlib.util
import threading
import weakref
from typing import Any

import pytest

from tritonkit.triton_side import TRITON_SIDE_DIR

_spec = importlib.util.spec_from_file_location("bls_streams", TRITON_SIDE_DIR / "bls_streams.py")
assert _spec is not None and _spec.loader is not None
bls_streams = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bls_streams)


class _Iterator:
    """A finished BLS stream's iterator: its responses, no cancel() (as on 2.51)."""

    def __init__(self) -> None:
        self.responses = ["a", "b", "final"]

    def __iter__(self) -> Any:
        return iter(self.responses)


class _Request:
    def __init__(self, names: tuple[str, ...] = ()) -> None:
        self.names, self.streams = names, []

    def exec(self, decoupled: bool = False) -> _Iterator:
        assert decoupled
        stream = _Iterator()
        self.streams.append(weakref.ref(stream))
        return stream

    def requested_output_names(self) -> list[str]:
        return list(self.names)


class _Sender:
    def __init__(self, request: _Request, fails: bool = False) -> None:
        self.request, self.fails, self.alive_at_round_trip = request, fails, []

    def is_cancelled(self) -> bool:
        self.alive_at_round_trip += [ref() is not None for ref in self.request.streams]
        if self.fails:
            raise RuntimeError("the stub's utility thread is gone")
        return False


def test_a_stream_is_let_go_of_only_after_a_round_trip_through_the_stubs_utility_thread() -> None:
    request = _Request()
    sender = _Sender(request)
    with bls_streams.BlsStream(request, sender) as stream:
        assert list(stream) == ["a", "b", "final"] and stream.cancel is None
    gc.collect()
    assert sender.alive_at_round_trip == [True]  # the round trip came first, with the stream held
    assert request.streams[0]() is None  # then the last reference went, here


def test_a_stream_whose_round_trip_fails_is_kept_rather_than_left_to_the_stub() -> None:
    request = _Request()
    with bls_streams.BlsStream(request, _Sender(request, fails=True)):
        pass
    gc.collect()
    assert request.streams[0]() is not None  # parked for the process's life
    bls_streams._PARKED.clear()


def test_a_stream_closed_after_its_client_left_is_kept_until_a_round_trip_that_answered_false() -> None:
    """Triton 2.51's stub answers is_cancelled() from a cache once it was true (PbCancel): no round
    trip through the utility thread, so the stream's cleanup may not have run yet. The stream is
    let go of only after a later is_cancelled() answered false (that one did make the trip)."""
    left, next_request = _Request(), _Request()
    gone = _Sender(left)
    gone.is_cancelled = lambda: True  # type: ignore[method-assign]  # the cached answer
    with bls_streams.BlsStream(left, gone):
        pass
    gc.collect()
    assert left.streams[0]() is not None  # kept: its cleanup may still be queued
    with bls_streams.BlsStream(next_request, _Sender(next_request)):
        pass
    gc.collect()
    assert left.streams[0]() is None and next_request.streams[0]() is None  # both, after the trip
    assert bls_streams._PENDING == []


def test_release_pending_lets_go_of_streams_closed_after_their_client_left() -> None:
    left = _Request()
    gone = _Sender(left)
    gone.is_cancelled = lambda: True  # type: ignore[method-assign]
    with bls_streams.BlsStream(left, gone):
        pass
    gc.collect()
    assert left.streams[0]() is not None
    bls_streams.release_pending()  # after a request's first is_cancelled(): a round trip
    gc.collect()
    assert left.streams[0]() is None


def test_a_second_thread_may_not_open_a_stream_while_one_is_open() -> None:
    """Two threads reading BLS streams can deadlock Triton 2.51's stub: refused, not risked."""
    request = _Request()
    refused: list[str] = []
    with bls_streams.BlsStream(request, _Sender(request)):
        with bls_streams.BlsStream(request, _Sender(request)):  # the same thread: fine
            pass

        def other() -> None:
            with pytest.raises(RuntimeError, match="another thread") as info:
                bls_streams.BlsStream(request, _Sender(request))
            refused.append(str(info.value))

        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    assert len(refused) == 1
    thread = threading.Thread(target=lambda: bls_streams.BlsStream(request, _Sender(request)).close())
    thread.start()
    thread.join()  # once closed, another thread may
    assert len(request.streams) == 3


@pytest.mark.parametrize(
    ("asked", "wanted"),
    [((), {"text_output", "cum_log_probs"}), (("text_output", "other"), {"text_output"})],
)
def test_requested_outputs_are_those_asked_for_or_all_when_none_is_named(
    asked: tuple[str, ...], wanted: set[str]
) -> None:
    assert bls_streams.requested_outputs(_Request(asked), ("text_output", "cum_log_probs")) == wanted
