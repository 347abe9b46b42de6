"""What reading a token from Triton costs a Python process, by transport: the floor under the
OpenAI front's CPU per token (issue #40, docs/openai.md "Second pass").

Against ``clock_llm`` (benchmarks/clock_llm.yaml) served by ``tritonkit serve``, a reader process
holds ``c`` streams open at a time (a new request as soon as one ends) and does nothing with a
piece but read it and take its text out; its process CPU time (all threads) over a window,
divided by the pieces read in it, is the floor that transport puts under any relay. Each
(transport, concurrency) runs in a fresh child process on uvloop (asyncio's loop with
``--loop asyncio``):

- ``grpc_aio``: one grpc.aio channel, ``ModelStreamInfer`` as a server stream (one request per
  call, as tritonkit's stream client does), each message parsed as ``ModelStreamInferResponse``
  and its ``text_output`` read from the raw contents;
- ``http_raw``: Triton's HTTP generate extension, ``POST /v2/models/clock_llm/generate_stream``,
  one keep-alive HTTP/1.1 connection per stream, read by an asyncio Protocol with httptools'
  response parser (chunked body in C), each SSE event's JSON decoded for ``text_output``;
- ``httpx``: the same request read with httpx.AsyncClient's ``aiter_lines`` (what tritonkit's
  stream client does over HTTP today);
- ``grpc_sync``: grpc's sync streaming API, one thread per stream handing each message to the
  event loop (``call_soon_threadsafe``);
- ``wakeup``: no Triton at all: the event loop woken by one byte per piece on a socket pair
  (written by another process, ``concurrency`` x 100 a second, evenly apart): the machine's
  floor for any process woken per piece.

    flock /tmp/tritonkit-heavy.lock python benchmarks/transport_floor.py --http 127.0.0.1:8000 \\
        --grpc 127.0.0.1:8001 [--transports grpc_aio,http_raw] [--concurrency 16,48,128]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import struct
import subprocess
import sys
import threading
import time
from typing import Any

MODEL = "clock_llm"
BODY = json.dumps(
    {
        "text_input": "Count the ticks.",
        "stream": True,
        "exclude_input_in_output": True,
        "sampling_parameters": json.dumps({"max_tokens": 32}),
    }
).encode()
_LEN = struct.Struct("<I")


class Counter:
    def __init__(self, start: float, end: float) -> None:
        self.start, self.end = start, end
        self.pieces = 0
        self.errors = 0
        self.chars = 0

    def piece(self, text: str) -> None:
        if self.start <= time.monotonic() < self.end:
            self.pieces += 1
            self.chars += len(text)


def _grpc_request() -> Any:
    from tritonclient.grpc import service_pb2

    req = service_pb2.ModelInferRequest(model_name=MODEL)
    body = json.loads(BODY)
    for name, value in body.items():
        t = req.inputs.add()
        t.name = name
        t.shape.append(1)
        if isinstance(value, bool):
            t.datatype = "BOOL"
            req.raw_input_contents.append(b"\x01" if value else b"\x00")
        else:
            t.datatype = "BYTES"
            raw = value.encode()
            req.raw_input_contents.append(_LEN.pack(len(raw)) + raw)
    req.parameters["triton_enable_empty_final_response"].bool_param = True
    return req


def _grpc_text(message: Any) -> str | None:
    resp = message.infer_response
    if not resp.raw_output_contents:
        return None
    raw = resp.raw_output_contents[0]
    return raw[4 : 4 + _LEN.unpack_from(raw)[0]].decode()


async def run_grpc_aio(grpc: str, conc: int, c: Counter) -> None:
    import grpc as g
    from tritonclient.grpc import service_pb2

    async with g.aio.insecure_channel(grpc) as channel:
        stub = channel.unary_stream(
            "/inference.GRPCInferenceService/ModelStreamInfer",
            request_serializer=service_pb2.ModelInferRequest.SerializeToString,
            response_deserializer=service_pb2.ModelStreamInferResponse.FromString,
        )
        req = _grpc_request()

        async def one() -> None:
            while time.monotonic() < c.end:
                async for m in stub(req):
                    text = _grpc_text(m)
                    if text is not None:
                        c.piece(text)

        await asyncio.gather(*(one() for _ in range(conc)))


class _SseProtocol(asyncio.Protocol):
    """One keep-alive connection: a POST at a time, its chunked SSE body parsed by httptools."""

    def __init__(self, c: Counter) -> None:
        import httptools

        self.c = c
        self.parser = httptools.HttpResponseParser(self)
        self.buf = b""
        self.done: asyncio.Future[None] | None = None
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_body(self, body: bytes) -> None:
        buf = self.buf + body
        *events, self.buf = buf.split(b"\n\n")
        for ev in events:
            if ev.startswith(b"data: "):
                text = json.loads(ev[6:]).get("text_output")
                if text is not None:
                    self.c.piece(text)

    def on_message_complete(self) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_exception(ConnectionError("closed"))


async def run_http_raw(http: str, conc: int, c: Counter) -> None:
    host, port = http.rsplit(":", 1)
    loop = asyncio.get_running_loop()
    head = (
        f"POST /v2/models/{MODEL}/generate_stream HTTP/1.1\r\nHost: {http}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(BODY)}\r\n\r\n"
    ).encode() + BODY

    async def one() -> None:
        _, proto = await loop.create_connection(lambda: _SseProtocol(c), host, int(port))
        while time.monotonic() < c.end:
            proto.done = loop.create_future()
            assert proto.transport is not None
            proto.transport.write(head)
            await proto.done
        assert proto.transport is not None
        proto.transport.close()

    await asyncio.gather(*(one() for _ in range(conc)))


async def run_httpx(http: str, conc: int, c: Counter) -> None:
    import httpx

    url = f"http://{http}/v2/models/{MODEL}/generate_stream"
    async with httpx.AsyncClient(timeout=None, limits=httpx.Limits(max_connections=conc)) as client:

        async def one() -> None:
            while time.monotonic() < c.end:
                async with client.stream("POST", url, content=BODY) as r:
                    async for line in r.aiter_lines():
                        if line.startswith("data: "):
                            text = json.loads(line[6:]).get("text_output")
                            if text is not None:
                                c.piece(text)

        await asyncio.gather(*(one() for _ in range(conc)))


async def run_grpc_sync(grpc: str, conc: int, c: Counter) -> None:
    import grpc as g
    from tritonclient.grpc import service_pb2

    loop = asyncio.get_running_loop()
    channel = g.insecure_channel(grpc)
    stub = channel.unary_stream(
        "/inference.GRPCInferenceService/ModelStreamInfer",
        request_serializer=service_pb2.ModelInferRequest.SerializeToString,
        response_deserializer=service_pb2.ModelStreamInferResponse.FromString,
    )
    req = _grpc_request()

    def one(done: asyncio.Future[None]) -> None:
        while time.monotonic() < c.end:
            for m in stub(req):
                text = _grpc_text(m)
                if text is not None:
                    loop.call_soon_threadsafe(c.piece, text)
        loop.call_soon_threadsafe(done.set_result, None)

    futures = []
    for _ in range(conc):
        f: asyncio.Future[None] = loop.create_future()
        threading.Thread(target=one, args=(f,), daemon=True).start()
        futures.append(f)
    await asyncio.gather(*futures)
    channel.close()


_SENDER = """
import socket, sys, time
s = socket.socket(fileno=int(sys.argv[1])); gap = float(sys.argv[2]); end = float(sys.argv[3])
due = time.monotonic()
while due < end:
    due += gap
    time.sleep(max(0.0, due - time.monotonic()))
    s.send(b"x")
"""


class _Wakeups(asyncio.Protocol):
    def __init__(self, c: Counter) -> None:
        self.c = c

    def data_received(self, data: bytes) -> None:
        for _ in range(len(data)):
            self.c.piece("")


async def run_wakeup(_: str, conc: int, c: Counter) -> None:
    """No Triton, no parsing: another process writes one byte every 10/``conc`` ms (``conc``
    streams' pieces, evenly interleaved) on a socket pair, and the loop wakes to read it. What
    any process that is woken per piece pays on this machine, before it does anything."""
    import socket

    ours, theirs = socket.socketpair()
    sender = subprocess.Popen(
        [sys.executable, "-c", _SENDER, str(theirs.fileno()), str(0.010 / conc), str(c.end + 0.2)],
        pass_fds=(theirs.fileno(),),
    )
    theirs.close()
    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_unix_connection(lambda: _Wakeups(c), sock=ours)
    await asyncio.sleep(max(0.0, c.end + 0.1 - time.monotonic()))  # past the window's last mark
    transport.close()
    ours.close()
    sender.kill()  # it may be blocked on a full socket by now
    sender.wait()


RUNNERS = {
    "grpc_aio": run_grpc_aio,
    "http_raw": run_http_raw,
    "httpx": run_httpx,
    "grpc_sync": run_grpc_sync,
    "wakeup": run_wakeup,
}


def child(args: argparse.Namespace) -> None:
    if args.loop == "uvloop":
        import uvloop

        uvloop.install()

    async def main() -> dict[str, Any]:
        now = time.monotonic()
        c = Counter(now + args.warmup, now + args.warmup + args.window)
        marks: dict[str, float] = {}
        loop = asyncio.get_running_loop()
        loop.call_at(c.start, lambda: marks.update(cpu0=time.process_time(), w0=time.monotonic()))
        loop.call_at(c.end, lambda: marks.update(cpu1=time.process_time(), w1=time.monotonic()))
        target = args.http if args.child == "http_raw" or args.child == "httpx" else args.grpc
        await RUNNERS[args.child](target, args.c, c)
        cpu = marks["cpu1"] - marks["cpu0"]
        wall = marks["w1"] - marks["w0"]
        return {
            "transport": args.child,
            "concurrency": args.c,
            "loop": args.loop,
            "pieces": c.pieces,
            "pieces_per_s": c.pieces / wall,
            "cpu_s": cpu,
            "cores": cpu / wall,
            "cpu_us_per_piece": cpu / c.pieces * 1e6 if c.pieces else None,
        }

    print(json.dumps(asyncio.run(main())))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--http", default="127.0.0.1:8000")
    ap.add_argument("--grpc", default="127.0.0.1:8001")
    ap.add_argument("--transports", default="grpc_aio,http_raw,httpx,grpc_sync")
    ap.add_argument("--concurrency", default="16,48,128")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--warmup", type=float, default=1.5)
    ap.add_argument("--window", type=float, default=5.0)
    ap.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    ap.add_argument("--out", help="write the rows as JSON here")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--c", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    rows = []
    for rnd in range(args.rounds):
        for conc in (int(x) for x in args.concurrency.split(",")):
            for t in args.transports.split(","):
                cmd = [
                    sys.executable, __file__, "--child", t, "--c", str(conc), "--http", args.http,
                    "--grpc", args.grpc, "--warmup", str(args.warmup), "--window", str(args.window),
                    "--loop", args.loop,
                ]  # fmt: skip
                out = subprocess.run(cmd, capture_output=True, text=True, check=False)
                if out.returncode != 0:
                    print(t, conc, "failed:", out.stderr[-800:], file=sys.stderr)
                    continue
                row = json.loads(out.stdout.strip().splitlines()[-1])
                row["round"] = rnd
                rows.append(row)
                print(
                    f"{t:10s} c={conc:4d} {row['pieces_per_s']:8.0f} pieces/s  {row['cores']:.2f} cores  "
                    f"{row['cpu_us_per_piece'] or 0:6.1f} us/piece",
                    flush=True,
                )
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"argv": sys.argv, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
