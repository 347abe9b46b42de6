"""The coordinator/worker wire over real loopback TCP: frames, closed streams, silence."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from tritonkit.errors import PerfError
from tritonkit.perf import wire
from tritonkit.perf._target import Target


async def _pair(
    serve: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, asyncio.base_events.Server]:
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    return reader, writer, server


def test_frames_arrive_whole_and_in_order_when_sent_over_tcp() -> None:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(2):
            msg = await wire.read_frame(reader, timeout_s=5, waiting_for="a test frame")
            await wire.write_frame(writer, {**msg, "echo": True})
        writer.close()

    async def go() -> list[dict[str, object]]:
        reader, writer, server = await _pair(echo)
        async with server:
            await wire.write_frame(writer, {"op": "ping", "big": "x" * 300_000})
            writer.write(wire.frame({"op": "drain"}))
            got = [await wire.read_frame(reader, timeout_s=5, waiting_for="echo") for _ in range(2)]
            with pytest.raises(wire.WireClosedError, match="closed while waiting for more"):
                await wire.read_frame(reader, timeout_s=5, waiting_for="more")
            writer.close()
            return got

    got = asyncio.run(go())
    assert [m["op"] for m in got] == ["ping", "drain"] and all(m["echo"] for m in got)
    assert len(str(got[0]["big"])) == 300_000


def test_read_frame_names_what_it_waited_for_when_the_other_side_is_silent() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # says nothing until the client hangs up
        writer.close()

    async def go() -> None:
        reader, writer, server = await _pair(silent)
        async with server:
            with pytest.raises(PerfError, match="waiting for the worker's records"):
                await wire.read_frame(reader, timeout_s=0.05, waiting_for="the worker's records")
            writer.close()
            await writer.wait_closed()

    asyncio.run(go())


def test_read_frame_refuses_a_frame_without_an_op_when_one_arrives() -> None:
    async def bad(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(wire.frame({"nop": 1}))
        await writer.drain()
        await reader.read()
        writer.close()

    async def go() -> None:
        reader, writer, server = await _pair(bad)
        async with server:
            with pytest.raises(wire.WireClosedError, match="without an 'op'"):
                await wire.read_frame(reader, timeout_s=5, waiting_for="hello")
            writer.close()
            await writer.wait_closed()

    asyncio.run(go())


def test_target_crosses_the_wire_unchanged_when_it_carries_tuples() -> None:
    target = Target(
        client_url="h:1",
        ssl=False,
        protocol="http",
        model="m",
        model_version="",
        outputs=("a", "b"),
        stream=True,
        prompt_counts=((3, 8), (4, -1)),
    )
    import json

    assert wire.decode_target(json.loads(json.dumps(wire.encode_target(target)))) == target


def test_records_move_onto_the_coordinators_clock_when_read_from_the_wire() -> None:
    rows = [[5_000, 300, None, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]], [6_000, 200, "http 500", None]]
    got = wire.records_from_wire(rows, offset_ns=1_000)
    assert got == [(4_000, 300, None, (1, 2, 3, 4, 5, 6, 7, 8, 9, 10)), (5_000, 200, "http 500", None)]


def test_target_crosses_the_wire_unchanged_when_it_carries_a_composed_pipeline() -> None:
    import dataclasses
    import json

    from tests.unit.test_perf_composition import PIPELINE, TARGET

    pipeline = dataclasses.replace(PIPELINE, sampling={"temperature": 0, "stop": ["\n"]}, front_instances=8)
    target = dataclasses.replace(
        TARGET, pipeline=pipeline, stage_inputs=("text_input", "return_num_output_tokens")
    )
    assert wire.decode_target(json.loads(json.dumps(wire.encode_target(target)))) == target
