"""The OpenAI front under a long soak: no stream is left without progress past the idle limit (#53).

Serves the clock model (benchmarks/clock_llm.yaml: 32 pieces, the first 20 ms after arrival, then
one every 10 ms) on a real tritonserver 2.51 with the front before it as `serve --openai-port`
deploys it (`tritonkit openai` in its own process, answers streamed over Triton's HTTP
``generate_stream``, the transport where 2.51's HTTP frontend was seen losing a stream's last
pieces), and runs ``--concurrency`` clients for ``--minutes``: each sends a streamed
``/v1/completions`` over its own keep-alive connection and reads it to ``[DONE]``, or (one in
``--leave-every``) leaves after 3 pieces by closing its connection.

Every stream's longest wait between two reads that brought bytes is recorded. Verdicts:

- **no stream without progress past the idle limit**: no stream waited longer than the front's
  ``--stream-idle-timeout`` (``--idle-limit``, default the documented 60 s) plus 5 s of grace,
  and no stream was still open at the end of the run;
- **every stall is ended, counted and logged**: the streams that ended with the front's
  ``stream_stalled`` error event equal the front's ``tritonkit_openai_stalled_streams_total`` and
  its log's "stalled and was ended" lines, each naming the model and the answer's id;
- **0 wrong answers**: a stream read to its end holds pieces tick0..tick31 in order.

``--transport grpc`` reads the answers over Triton's gRPC streams instead (``--stream-url`` left
out): the two transports' stall counts and the front's CPU per token side by side.

``--target triton`` runs the same clients straight against Triton's HTTP
``/v2/models/clock_llm/generate_stream``, no front: whether a wrong or stalled answer is Triton's
own or the front's. With no front to end a stall, a client ends a stream that brought nothing for
``--idle-limit`` seconds itself and counts it stalled. ``--target triton-grpc`` does the same over
Triton's gRPC ``ModelStreamInfer`` (one grpc.aio channel, a call per answer, as tritonkit's client
and the front's gRPC transport make them; a leaving client cancels its call): the two transports'
own stall and loss rates, side by side.

``--finish-reason`` serves the clock with the vLLM stage's whole contract
(``clock_tiny_llm.yaml``): its last piece carries its finish reason, which the front asks for,
so an answer whose tail Triton lost ends with the front's ``answer_cut_short`` error event
(counted under errors) instead of coming whole but wrong.

Writes benchmarks/results/front_soak.json and .png.

    flock /tmp/tritonkit-heavy.lock .venv/bin/python benchmarks/front_soak.py [--minutes 10]
        [--concurrency 128] [--idle-limit 60]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._front_load import clock_stream_request, stream_stub, tree_cpu_seconds  # noqa: E402
from benchmarks._perf_common import RESULTS, ROOT, command_line, machine, now, write_result  # noqa: E402
from tritonkit._timeouts import within  # noqa: E402

MODEL = "clock_llm"
#: --finish-reason: the clock with the vLLM stage's whole contract (benchmarks/clock_tiny_llm.yaml),
#: whose last piece carries its finish reason, so the front can tell an answer cut short
SPECS = {"clock_llm": "clock_llm.yaml", "tiny_llm": "clock_tiny_llm.yaml"}
PIECES = 32
LEAVE_AFTER = 3
GRACE_S = 5.0
#: the front's log line for a stall it ended (service.py: "<model>: answer <id> stalled and was ended")
STALL_LINE = re.compile(r"(?P<model>\S+): answer (?P<answer>\S+) stalled and was ended")
ANSWER = "".join(f"tick{i} " for i in range(PIECES))
TICK = re.compile(rb"tick(\d+) ")


@dataclass
class Tally:
    """What the clients saw, in total and per 10-second bucket."""

    start: float
    done: int = 0
    left: int = 0
    stalled: int = 0
    #: of the stalls: requests that got no HTTP head at all within the idle limit
    no_head: int = 0
    #: answers whose connection brought bytes after the answer's end, before the next head
    after_end: int = 0
    after_end_samples: list[str] = field(default_factory=list)
    wrong: int = 0
    #: the first wrong answers: which pieces were missing, which were extra
    wrong_samples: list[dict[str, Any]] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    longest_gaps: list[float] = field(default_factory=list)
    open_streams: int = 0
    tokens: int = 0
    buckets: dict[int, dict[str, int]] = field(default_factory=dict)

    def mark(self, what: str) -> None:
        bucket = self.buckets.setdefault(int((time.monotonic() - self.start) // 10), {})
        bucket[what] = bucket.get(what, 0) + 1

    def ended(self, body: bytes) -> None:
        """An answer read to its end: right, wrong (sampled), or ended by an error event (counted by
        its code)."""
        failed = re.search(rb'\{"error":.*?"code":\s*"(\w+)"', body[-600:])
        if failed:
            self.error(f"error event: {failed.group(1).decode()}")
            return
        self.judged(_text(body), body)

    def judged(self, text: str, body: bytes) -> None:
        """An answer's whole text: right, or wrong (sampled with the tail of what carried it)."""
        if text == ANSWER:
            self.done += 1
            self.mark("done")
            return
        self.wrong += 1
        self.mark("wrong")
        if len(self.wrong_samples) < 10:
            self.wrong_samples.append(_difference(text, body))

    def error(self, text: str) -> None:
        self.errors[text] = self.errors.get(text, 0) + 1
        self.mark("error")


def _request(port: int, target: str) -> bytes:
    if target == "triton":  # the vLLM contract over Triton's own HTTP streaming endpoint
        sampling = json.dumps({"max_tokens": PIECES})
        body = json.dumps({"text_input": "Count the ticks.", "stream": True, "sampling_parameters": sampling})
        path = f"/v2/models/{MODEL}/generate_stream"
    else:
        body = json.dumps(
            {"model": MODEL, "prompt": "Count the ticks.", "max_tokens": PIECES, "stream": True}
        )
        path = "/v1/completions"
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body.encode()


def _text(body: bytes) -> str:
    """The answer's text in an SSE body (chunked transfer encoding left in: events are lines):
    the choices' text from the front, ``text_output`` from Triton's generate_stream."""
    out = []
    for line in body.split(b"\n"):
        if line.startswith(b"data: {"):
            try:
                event = json.loads(line[6:])
            except ValueError:
                continue
            out.extend(c.get("text", "") for c in event.get("choices", []))
            out.append(event.get("text_output", ""))
    return "".join(out)


def _ended(body: bytes, target: str) -> bool:
    """The stream's whole body is in: the chunked body's last chunk (after ``[DONE]`` from the front)."""
    # an error event ends a front's stream too (answer_cut_short: no [DONE] after it)
    last = body[-600:]
    if not body.endswith(b"\r\n0\r\n\r\n"):
        return False
    return target == "triton" or b"[DONE]" in last or b'{"error"' in last


def _difference(text: str, body: bytes) -> dict[str, Any]:
    """What a wrong answer lacked and held: piece numbers, and the tail of its SSE body."""
    got = [int(p[4:]) for p in text.split() if p.startswith("tick") and p[4:].isdigit()]
    return {
        "pieces": len(got),
        "missing": sorted(set(range(PIECES)) - set(got)),
        "repeated": sorted({n for n in got if got.count(n) > 1}),
        "in_order": got == sorted(got),
        "finish": re.findall(rb'"finish_reason":\s*"?(\w+)', body)[-1:],
        "tail": body[-400:].decode(errors="replace"),
    }


async def _head(reader: asyncio.StreamReader, idle_s: float, t: Tally) -> bytes | None:
    """An answer's HTTP head (None, counted a stall, when none came within ``idle_s``); bytes
    before it, which belong to the connection's last answer after that answer's end, are counted
    and sampled."""
    try:
        head = await within(reader.readuntil(b"\r\n\r\n"), idle_s)
    except asyncio.TimeoutError:
        t.stalled += 1
        t.no_head += 1
        t.mark("stalled")
        return None
    if not head.startswith(b"HTTP/1.1 "):
        t.after_end += 1
        if len(t.after_end_samples) < 10:
            t.after_end_samples.append(head[:600].decode(errors="replace"))
        if b"HTTP/1.1 " in head:
            head = head[head.find(b"HTTP/1.1 ") :]
    return head


async def _client(
    port: int, payload: bytes, t: Tally, stop: float, leave_every: int, seed: int, target: str, idle_s: float
) -> None:
    rng = random.Random(seed)
    reader: asyncio.StreamReader | None = None
    writer: asyncio.StreamWriter | None = None
    while time.monotonic() < stop:
        leave = leave_every > 0 and rng.randrange(leave_every) == 0
        try:
            if writer is None:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            assert reader is not None
            writer.write(payload)
            t.open_streams += 1
            last = time.monotonic()
            gap = 0.0
            body = b""
            try:
                head = await _head(reader, idle_s, t)
                if head is None:  # no head within the idle limit: a stall, counted
                    writer.close()
                    reader = writer = None
                    continue
                gap = time.monotonic() - last
                last = time.monotonic()
                if not head.startswith(b"HTTP/1.1 200"):
                    raise RuntimeError(head.split(b"\r\n", 1)[0].decode(errors="replace")[:80])
                while True:
                    try:
                        data = await within(reader.read(65536), idle_s)
                    except asyncio.TimeoutError:
                        data = b"stream_stalled"  # nothing for the idle limit: ended here, counted
                    now_ = time.monotonic()
                    gap, last = max(gap, now_ - last), now_
                    if not data:
                        raise RuntimeError("the front closed the connection mid-stream")
                    body += data
                    if leave and body.count(b"tick") >= LEAVE_AFTER:
                        writer.close()
                        reader = writer = None
                        t.left += 1
                        t.mark("left")
                        break
                    if b"stream_stalled" in body:
                        t.stalled += 1
                        t.mark("stalled")
                        # the error event ends the answer: a fresh connection for the next one
                        # (what is left of this one, its last chunk, is not read)
                        writer.close()
                        reader = writer = None
                        break
                    if _ended(body, target):
                        t.ended(body)
                        break
            finally:
                t.open_streams -= 1
                t.longest_gaps.append(gap)
                t.tokens += body.count(b"tick")
        except Exception as exc:  # noqa: BLE001 - recorded, the load goes on with a new connection
            t.error(f"{type(exc).__name__}: {exc}"[:160])
            if writer is not None:
                writer.close()
            reader = writer = None
            await asyncio.sleep(0.05)
    if writer is not None:
        writer.close()


def _grpc_piece(message: bytes) -> tuple[list[int], bool, str]:
    """One raw ``ModelStreamInferResponse``: the piece numbers it carries, whether it is the final
    response, and its error message."""
    from tritonclient.grpc import service_pb2

    resp = service_pb2.ModelStreamInferResponse.FromString(message)
    if resp.error_message:
        return [], True, resp.error_message
    numbers = [int(n) for n in TICK.findall(b"".join(resp.infer_response.raw_output_contents))]
    final = resp.infer_response.parameters["triton_final_response"].bool_param
    return numbers, final, ""


async def _grpc_client(
    stub: Any, request: Any, t: Tally, stop: float, leave_every: int, seed: int, idle_s: float
) -> None:
    """A caller of Triton's gRPC ``ModelStreamInfer``, one call per answer as tritonkit's client
    makes them: a leaving client cancels its call after 3 pieces; a call that brings no message
    for ``idle_s`` is cancelled here and counted stalled (``no_head``: not even a first piece)."""
    import grpc

    rng = random.Random(seed)
    while time.monotonic() < stop:
        leave = leave_every > 0 and rng.randrange(leave_every) == 0
        call = stub(request)
        t.open_streams += 1
        last = time.monotonic()
        gap = 0.0
        numbers: list[int] = []
        final = False
        messages = 0
        try:
            while True:
                try:
                    message = await within(call.read(), idle_s)
                except asyncio.TimeoutError:
                    call.cancel()
                    t.stalled += 1
                    t.no_head += messages == 0
                    t.mark("stalled")
                    break
                now_ = time.monotonic()
                gap, last = max(gap, now_ - last), now_
                if message is grpc.aio.EOF:
                    # the call ended: whole when the final flag came, cut short when it did not
                    text = "".join(f"tick{n} " for n in numbers)
                    t.judged(text, b"" if final else b"no final response before the call ended")
                    break
                messages += 1
                got, final, error = _grpc_piece(message)
                if error:
                    call.cancel()
                    t.error(f"error response: {error}"[:160])
                    break
                numbers.extend(got)
                if leave and len(numbers) >= LEAVE_AFTER:
                    call.cancel()
                    t.left += 1
                    t.mark("left")
                    break
        except Exception as exc:  # noqa: BLE001 - recorded, the load goes on with a new call
            t.error(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:160])
            call.cancel()
            await asyncio.sleep(0.05)
        finally:
            t.open_streams -= 1
            t.longest_gaps.append(gap)
            t.tokens += len(numbers)


def _stalled_metric(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return sum(
        int(float(line.rsplit(" ", 1)[1]))
        for line in text.splitlines()
        if line.startswith("tritonkit_openai_stalled_streams_total{")
    )


async def _soak(
    port: int, concurrency: int, seconds: float, leave_every: int, target: str, idle_s: float
) -> Tally:
    t = Tally(start=time.monotonic())
    stop = t.start + seconds
    if target == "triton-grpc":
        import grpc

        request = clock_stream_request(MODEL, PIECES)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = stream_stub(channel)
            await asyncio.gather(
                *(_grpc_client(stub, request, t, stop, leave_every, i, idle_s) for i in range(concurrency))
            )
        return t
    payload = _request(port, target)
    await asyncio.gather(
        *(_client(port, payload, t, stop, leave_every, i, target, idle_s) for i in range(concurrency))
    )
    return t


def plot(data: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    buckets = data["per_10s"]
    xs = [b["t_s"] for b in buckets]
    fig, ax = plt.subplots(figsize=(10, 4))
    for key, color in (
        ("done", "#4c72b0"),
        ("left", "#999999"),
        ("stalled", "#c44e52"),
        ("error", "#dd8452"),
    ):
        ax.plot(xs, [b.get(key, 0) / 10 for b in buckets], label=f"{key} /s", color=color)
    ax.set_xlabel("seconds into the soak")
    ax.set_ylabel("streams per second")
    v = data["verdicts"]
    ax.set_title(
        f"front soak, {data['settings']['concurrency']} clients, {data['settings']['minutes']} min: "
        f"longest wait {data['longest_gap_s']:.1f} s (limit {data['settings']['idle_limit_s']:.0f} s), "
        f"stalls {data['stalled_streams']} (metric {data['stalled_metric']}, log {data['stalled_logged']}), "
        f"{'PASS' if all(v.values()) else 'FAIL'}",
        fontsize=9,
    )
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--leave-every", type=int, default=4, help="one client in N leaves after 3 pieces")
    parser.add_argument("--idle-limit", type=float, default=60.0, help="the front's --stream-idle-timeout")
    parser.add_argument(
        "--transport",
        choices=("http", "grpc"),
        default="http",
        help="how the front reads answers from Triton: HTTP generate_stream (--stream-url, as "
        "serve --openai-port and deploy aks run it) or gRPC streams",
    )
    parser.add_argument(
        "--target",
        choices=("front", "triton", "triton-grpc"),
        default="front",
        help="front: through tritonkit openai; triton: straight to Triton's HTTP generate_stream; "
        "triton-grpc: straight to Triton's gRPC ModelStreamInfer",
    )
    parser.add_argument(
        "--finish-reason",
        action="store_true",
        help="serve the clock with the vLLM stage's whole contract (clock_tiny_llm.yaml: its last "
        "piece says its finish reason), so the front refuses an answer whose tail Triton lost",
    )
    parser.add_argument("--name", default="front_soak")
    args = parser.parse_args()
    global MODEL
    MODEL = "tiny_llm" if args.finish_reason else "clock_llm"
    from benchmarks.openai_front import start_front, stop_front
    from tritonkit.repository import build_spec
    from tritonkit.server import LocalTritonServer

    data: dict[str, Any] = {
        "command": command_line(),
        "started": now(),
        "machine": machine(),
        "settings": {
            "minutes": args.minutes,
            "concurrency": args.concurrency,
            "leave_every": args.leave_every,
            "idle_limit_s": args.idle_limit,
            "grace_s": GRACE_S,
            "model": f"{MODEL} ({PIECES} pieces, 20 ms then 10 ms apart)",
            "target": args.target,
            "front": "tritonkit openai, own process" if args.target == "front" else "none",
            "transport": {
                "front": args.transport,
                "triton": "http (Triton's generate_stream)",
                "triton-grpc": "grpc (Triton's ModelStreamInfer, one call per answer)",
            }[args.target],
            "triton": "2.51 (nvidia-pytriton wheel)",
        },
    }
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "model_repository"
        build_spec(ROOT / "benchmarks" / SPECS[MODEL], repo)
        log_path = Path(tmp) / "front.log"
        with LocalTritonServer(repo) as server:
            assert server.pid is not None
            server_cpu_before = tree_cpu_seconds(server.pid)
            if args.target != "front":
                url = server.http_url if args.target == "triton" else server.grpc_url
                port = int(url.rsplit(":", 1)[1])
                tally = asyncio.run(
                    _soak(
                        port,
                        args.concurrency,
                        args.minutes * 60,
                        args.leave_every,
                        args.target,
                        args.idle_limit,
                    )
                )
                front_cpu, metric, front_alive, log = 0.0, tally.stalled, True, ""
            else:
                front, port = start_front(
                    server.grpc_url,
                    1,
                    None,
                    stream_url=server.http_url if args.transport == "http" else None,
                    extra=["--stream-idle-timeout", str(args.idle_limit)],
                    log_path=log_path,
                )
                try:
                    cpu_before = tree_cpu_seconds(front.pid)
                    # the client waits past the front's own limit: a stall the front ends is its
                    idle_s = args.idle_limit + 2 * GRACE_S
                    seconds = args.minutes * 60
                    tally = asyncio.run(
                        _soak(port, args.concurrency, seconds, args.leave_every, "front", idle_s)
                    )
                    front_cpu = tree_cpu_seconds(front.pid) - cpu_before
                    time.sleep(1.0)
                    metric = _stalled_metric(port)
                    front_alive = front.poll() is None
                finally:
                    stop_front(front)
                log = log_path.read_text(errors="replace")
            server_alive = server.running
            server_cpu = tree_cpu_seconds(server.pid) - server_cpu_before if server_alive else 0.0
            # a server that died: its last words (the temporary directory goes with the run)
            server_tail = "" if server_alive else "\n".join(server.logs().splitlines()[-60:])
    logged = [m.groupdict() for m in STALL_LINE.finditer(log)]
    longest = max(tally.longest_gaps, default=0.0)
    data.update(
        {
            "finished": now(),
            "streams": len(tally.longest_gaps),
            "done": tally.done,
            "left": tally.left,
            "stalled_streams": tally.stalled,
            "stalled_without_head": tally.no_head,
            "bytes_after_an_answers_end": tally.after_end,
            "after_end_samples": tally.after_end_samples,
            "wrong_answers": tally.wrong,
            "wrong_samples": [
                {**w, "finish": [f.decode() for f in w["finish"]]} for w in tally.wrong_samples
            ],
            "errors": tally.errors,
            "open_at_end": tally.open_streams,
            "tokens": tally.tokens,
            "tokens_per_s": round(tally.tokens / (args.minutes * 60), 1),
            "front_cpu_s": round(front_cpu, 2),
            "front_cpu_us_per_token": round(1e6 * front_cpu / tally.tokens, 1) if tally.tokens else None,
            # tritonserver and its stubs: what each transport costs the server side per token
            "server_cpu_s": round(server_cpu, 2),
            "server_cpu_us_per_token": round(1e6 * server_cpu / tally.tokens, 1) if tally.tokens else None,
            "longest_gap_s": round(longest, 3),
            "gaps_over_1s": sum(g > 1.0 for g in tally.longest_gaps),
            "stalled_metric": metric,
            "stalled_logged": len(logged),
            "stalls_logged": logged[:50],
            "front_alive": front_alive,
            "server_log_tail": server_tail,
            "server_alive": server_alive,
            "per_10s": [{"t_s": 10 * k, **v} for k, v in sorted(tally.buckets.items())],
        }
    )
    data["verdicts"] = {
        "no_stream_past_idle_limit": longest <= args.idle_limit + GRACE_S and tally.open_streams == 0,
        "every_stall_ended_counted_logged": args.target != "front"  # no front to count or log them
        or (
            tally.stalled == metric == len(logged)
            and all(e["model"] == MODEL and e["answer"] != "-" for e in logged)
        ),
        "no_wrong_answers": tally.wrong == 0,
        "front_and_server_up": front_alive and server_alive,
    }
    if args.target != "front":  # no front's limit to end them: any stall is Triton's own
        data["verdicts"]["no_stalls"] = tally.stalled == 0
    path = write_result(args.name, data)
    plot(data, RESULTS / f"{args.name}.png")
    print(f"wrote {path}")  # noqa: T201
    keys = ("streams", "done", "left", "stalled_streams", "wrong_answers", "errors", "front_cpu_us_per_token",
            "server_cpu_us_per_token")  # fmt: skip
    summary = {k: data[k] for k in keys}
    print(json.dumps({**summary, "longest_gap_s": data["longest_gap_s"], "verdicts": data["verdicts"]}))  # noqa: T201
    if not all(data["verdicts"].values()):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
