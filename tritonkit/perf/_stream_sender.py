"""The streaming sender: every response of every streamed request stamped as it arrives.

gRPC: long-lived ``ModelStreamInfer`` calls, each carrying many pre-serialized requests told
apart by request id; requests ask for a flags-only final response
(``triton_enable_empty_final_response``, as perf_analyzer does for decoupled models), so the
end of each request's stream is known exactly and the final-response tail can be measured.
HTTP: ``generate_stream`` (server-sent events, one ``data:`` event per response) through httpx;
the end of the response body is the end of the stream.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from tritonkit._timeouts import within
from tritonkit.client.connection import close_channels, grpc_channels
from tritonkit.errors import PerfError, StreamError
from tritonkit.perf._sse import SseStreams
from tritonkit.perf._target import Arrivals, Record, SenderBase, Target, error_kind, grpc_infer_request
from tritonkit.perf.inputs import Array
from tritonkit.perf.stream_metrics import TokenCounter, shared_stamps, texts_of


def _json_value(arr: Array) -> Any:
    """A request tensor as generate's JSON: a scalar for one element, else a flat list."""
    flat = arr.reshape(-1)
    values = [v.decode("utf-8", errors="replace") if isinstance(v, bytes) else v for v in flat.tolist()]
    return values[0] if len(values) == 1 else values


class _Pending(Arrivals):
    """One request in flight: where its responses are stamped and its tokens counted."""

    def __init__(self) -> None:
        super().__init__()
        self.engine = [0, -1]  # [output tokens so far, input tokens] from the engine's own counts
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def fail(self, exc: BaseException) -> None:
        if not self.done.done():
            self.done.set_exception(exc)


class _GrpcStream:
    """One long-lived ModelStreamInfer call carrying many requests, told apart by request id
    (as perf_analyzer and tritonclient stream): a request pays no stream set-up, so its TTFT
    is the server's, not the cost of opening a call."""

    def __init__(self, sender: StreamSender, factory: Any) -> None:
        self.sender = sender
        self.metadata = sender._metadata
        self.call = factory(metadata=self.metadata)
        self.pending: dict[str, _Pending] = {}
        # grpc.aio takes one write at a time on a call: a second write while the first is still
        # in progress fails the whole call (GRPC_CALL_ERROR_TOO_MANY_OPERATIONS -> INTERNAL for
        # every request on it). Concurrent requests sharing a stream queue here.
        self._writing = asyncio.Lock()
        self.broken = False
        self.retiring = False
        self.reader = asyncio.get_running_loop().create_task(self._read())

    async def send(self, rid: str, body: bytes, pending: _Pending) -> None:
        self.pending[rid] = pending
        try:
            async with self._writing:
                await self.call.write(body)
        except Exception as exc:
            self.broken = True
            self.pending.pop(rid, None)
            raise exc

    def forget(self, rid: str) -> None:
        self.pending.pop(rid, None)
        if self.retiring and not self.pending:
            self.close()

    def retire(self) -> None:
        """No new requests: close once the ones in flight are answered."""
        self.retiring = True
        if not self.pending:
            self.close()

    def close(self) -> None:
        self.broken = True
        if not self.call.done():
            self.call.cancel()
        self.reader.cancel()

    async def _read(self) -> None:
        sender = self.sender
        parse = sender._pb.ModelStreamInferResponse.FromString
        eof = sender._eof
        try:
            while True:
                raw = await self.call.read()
                now = time.monotonic_ns()
                if raw is eof:
                    break
                msg = parse(raw)
                resp = msg.infer_response
                pending = self.pending.get(resp.id)
                if msg.error_message:
                    if pending is None and self.pending:  # an error without an id: the oldest request
                        pending = next(iter(self.pending.values()))
                    if pending is not None:
                        pending.fail(StreamError(msg.error_message, kind="stream error"))
                    continue
                if pending is None:
                    continue  # a late response of a request that already timed out
                if resp.outputs:
                    pending.outputs.append(now)
                    sender._count(pending, resp)
                param = resp.parameters.get("triton_final_response")
                if param is not None and param.bool_param:
                    if not resp.outputs:
                        pending.final.append(now)
                    if not pending.done.done():
                        pending.done.set_result(None)
            exc: BaseException = StreamError(
                "the stream closed before its final response", kind="stream ended early"
            )
        except asyncio.CancelledError:
            exc = StreamError("the stream was closed", kind="cancelled")
        except Exception as err:  # the call failed: every request on it fails with its status
            exc = err
        self.broken = True
        for pending in list(self.pending.values()):
            pending.fail(exc)


def _add_engine_counts(engine: list[int], resp: Any) -> None:
    """Add a vLLM response's ``num_output_tokens`` (tokens it carries) and note its
    ``num_input_tokens`` (UINT32, raw little-endian contents)."""
    for i, out in enumerate(resp.outputs):
        if out.name == "num_output_tokens" and i < len(resp.raw_output_contents):
            raw = resp.raw_output_contents[i]
            engine[0] += sum(int.from_bytes(raw[j : j + 4], "little") for j in range(0, len(raw) - 3, 4))
        elif out.name == "num_input_tokens" and i < len(resp.raw_output_contents):
            raw = resp.raw_output_contents[i]
            if len(raw) >= 4:
                engine[1] = int.from_bytes(raw[:4], "little")


def _event_count(value: Any) -> int:
    """A count from a generate_stream event (a number or a list of numbers)."""
    if isinstance(value, list):
        return sum(int(v) for v in value)
    return int(value)


class StreamSender(SenderBase):
    """Sends streamed requests and turns each into a record with its :class:`Timeline`."""

    def __init__(self, *, target: Target, requests: Sequence[Mapping[str, Array]], conn_limit: int) -> None:
        super().__init__(target=target, requests=requests, conn_limit=conn_limit)
        self._payloads: list[bytes] = []
        self._turn = 0
        self._channels: list[Any] = []
        self._calls: list[Any] = []
        self._url = ""
        self._counter: TokenCounter | None = TokenCounter(target.tokenizer) if target.tokenizer else None
        self._pb: Any = None
        self._eof: Any = None
        self._seq = 0
        self._n_streams = 1
        self._streams: list[_GrpcStream | None] = []
        self._sse: SseStreams | None = None  # HTTP
        self._uri = ""

    def _open_grpc(self) -> None:
        t = self.target
        self._open_grpc_streams()
        for request in self._requests:
            self._payloads.append(
                self._stream_request(request, model=t.model, model_version=t.model_version, outputs=t.outputs)
            )

    def _open_grpc_streams(self) -> None:
        """The channels and the long-lived streams requests go out on (none opened yet)."""
        import grpc
        from tritonclient.grpc import service_pb2

        self._pb = service_pb2
        self._eof = grpc.aio.EOF
        t = self.target
        for channel in grpc_channels(t.client_url, ssl_on=t.ssl, cacert=t.cacert, count=t.grpc_channels):
            self._channels.append(channel)
            self._calls.append(channel.stream_stream("/inference.GRPCInferenceService/ModelStreamInfer"))
        self._n_streams = max(1, t.grpc_streams)
        self._streams = [None] * self._n_streams

    @staticmethod
    def _stream_request(
        request: Mapping[str, Array], *, model: str, model_version: str, outputs: Sequence[str]
    ) -> bytes:
        """One streamed request, serialized, asking for the flags-only final response."""
        msg = grpc_infer_request(request, model=model, model_version=model_version, outputs=outputs)
        msg.parameters["triton_enable_empty_final_response"].bool_param = True
        return bytes(msg.SerializeToString())

    def _open_http(self) -> None:
        t = self.target
        scheme = "https" if t.ssl else "http"
        version = f"/versions/{quote(t.model_version)}" if t.model_version else ""
        self._uri = f"{t.path_prefix}/v2/models/{quote(t.model)}{version}/generate_stream"
        self._url = f"{scheme}://{t.host}:{t.port}{self._uri}"
        for request in self._requests:
            body = {name: _json_value(arr) for name, arr in request.items()}
            self._payloads.append(json.dumps(body).encode("utf-8"))
        # plain HTTP: kernel-stamped responses on raw sockets (see _kstamp); TLS: httpx
        self._sse = SseStreams(t, conn_limit=self._conn_limit)

    async def close(self) -> None:
        for stream in self._streams:
            if stream is not None:
                stream.close()
        self._streams = [None] * self._n_streams
        if self._sse is not None:
            await self._sse.close()
            self._sse = None
        await close_channels(self._channels)
        self._channels, self._calls = [], []

    async def send(self) -> Record:
        """Stream the next request of the data set; never raises (errors become the record's kind)."""
        index, prompt, asked = self._next_request()
        sse = self._sse
        send_ns = time.monotonic_ns()
        got = _Pending()
        error: str | None = None
        try:
            body = await self._body(index)
            if self._calls:
                left = self.target.timeout_s - (time.monotonic_ns() - send_ns) / 1e9
                await self._grpc(body, got, left)
            elif sse is None:
                raise PerfError("the sender is not open")
            elif sse.kernel_stamped:
                send_ns = await within(self._kernel_stamped(sse, body, got), self.target.timeout_s)
            else:  # --timeout bounds the whole stream, as on gRPC (httpx's timeouts are per read)
                await within(self._http(sse, body, got), self.target.timeout_s)
        except asyncio.CancelledError:
            raise
        except StreamError as exc:
            error = exc.kind
        except Exception as exc:  # every failure is data for 'errors by kind'
            error = error_kind(exc, self.target.protocol)
        shared = shared_stamps([*got.outputs, *got.final]) if got.delays else (0, False)
        tokens = got.tokens
        if self.target.engine_counts:
            tokens = [got.engine[0]]
            prompt = got.engine[1] if got.engine[1] >= 0 else prompt
        if not (self._counter or self.target.engine_counts):
            tokens = []
        return got.record(
            send_ns=send_ns, error=error, tokens=tuple(tokens), counts=(prompt, asked), shared=shared
        )

    async def _body(self, index: int) -> bytes:
        """The bytes of the data set's request ``index`` (a composed sender first asks for them:
        the time that takes is the request's)."""
        return self._payloads[index]

    async def _grpc(self, body: bytes, pending: _Pending, timeout_s: float) -> None:
        self._seq += 1
        rid = f"tk{self._seq}"
        self._turn = (self._turn + 1) % self._n_streams
        stream = self._streams[self._turn]
        if stream is None or stream.broken or stream.metadata != self._metadata:
            if stream is not None:
                stream.retire()
            stream = _GrpcStream(self, self._calls[self._turn % len(self._calls)])
            self._streams[self._turn] = stream
        await stream.send(rid, body + self._id_field(rid), pending)
        try:
            await within(pending.done, max(timeout_s, 0.0))
        except asyncio.TimeoutError:
            message = f"no final response within {self.target.timeout_s:g}s"
            raise StreamError(message, kind="timeout") from None
        finally:
            stream.forget(rid)

    def _id_field(self, rid: str) -> bytes:
        # a later occurrence of a scalar field wins when protobuf parses: the pre-serialized
        # request gets its id appended instead of being serialized again
        return bytes(self._pb.ModelInferRequest(id=rid).SerializeToString())

    def _count(self, pending: _Pending, resp: Any) -> None:
        """Tokens of one output response: the engine's own count, else the tokenizer's."""
        if self.target.engine_counts:
            _add_engine_counts(pending.engine, resp)
        elif self._counter is not None:
            pending.tokens.append(self._counter.count(self._grpc_text(resp)))

    @staticmethod
    def _grpc_text(resp: Any) -> str:
        from tritonclient.utils import deserialize_bytes_tensor

        parts = []
        for i, out in enumerate(resp.outputs):
            if out.datatype == "BYTES" and i < len(resp.raw_output_contents):
                parts.append(texts_of(deserialize_bytes_tensor(resp.raw_output_contents[i]).tolist()))
        return "".join(parts)

    def _count_event(self, event: Mapping[str, Any], got: _Pending) -> None:
        """Tokens of one generate_stream event: the engine's own count, else the tokenizer's."""
        if self.target.engine_counts:
            got.engine[0] += _event_count(event.get("num_output_tokens", 0))
            if "num_input_tokens" in event:
                got.engine[1] = _event_count(event["num_input_tokens"])
        elif self._counter is not None:
            names = self.target.outputs or tuple(event)
            got.tokens.append(self._counter.count(texts_of([event.get(n) for n in names])))

    async def _kernel_stamped(self, sse: SseStreams, body: bytes, got: _Pending) -> int:
        """One plain-HTTP stream with kernel receive stamps; returns when it was sent."""

        def on_event(arrival: int, seen: int, event: dict[str, Any]) -> None:
            got.outputs.append(arrival)
            got.delays.append(seen - arrival)
            self._count_event(event, got)

        send_ns, end_ns = await sse.post_stamped(self._uri, self._headers, body, on_event)
        got.final.append(end_ns)
        return send_ns

    async def _http(self, sse: SseStreams, body: bytes, got: _Pending) -> None:
        def on_read(read_ns: int, event: Any) -> None:
            got.outputs.append(read_ns)
            if isinstance(event, dict):
                self._count_event(event, got)

        # generate_stream sends no event for a flags-only final response: the body ends
        got.final.append(await sse.post_tls(self._url, self._headers, body, on_read))
