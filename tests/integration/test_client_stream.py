"""Streaming (decoupled models) on a real tritonserver 2.51, directly and through a TLS gateway.

One server per module serves the decoupled models of ``_stream_models`` with the inference API
restricted (HTTP header ``tk-admin``, gRPC metadata ``triton-grpc-protocol-tk-admin``), so every
stream carries a credential. Our client is checked against clients we did not write: plain
tritonclient's gRPC streaming API and raw server-sent events read with httpx. Cancellation is
proven on the server side: the model writes how many pieces it sent and whether Triton told it
the request was cancelled.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from tests.integration._gateway import UNAVAILABLE, NginxGateway, find_nginx
from tests.integration._stream_models import MODELS, wait_for_record, write_stream_repository
from tritonkit.client import (
    AsyncTritonClient,
    CombinedAuth,
    DeploymentRouting,
    KeyAuth,
    RestrictedApiAuth,
    RetryPolicy,
    TritonClient,
)
from tritonkit.errors import (
    AuthenticationError,
    EndpointUnreachableError,
    InferenceError,
    InputMismatchError,
    RequestTimeoutError,
    ServerUnavailableError,
)

pytestmark = pytest.mark.integration

KEY = "tk-admin"
SECRET = f"s3cr3t-{secrets.token_hex(8)}"
GATEWAY_KEY = f"aml-key-{secrets.token_hex(8)}"
PROTOCOLS = ["http", "grpc"]
FAST = RetryPolicy(max_attempts=3, base_delay=0.05, max_delay=0.1)


class Served:
    def __init__(self, server: Any, log_dir: Path) -> None:
        self.server = server
        self.log_dir = log_dir

    def url(self, protocol: str) -> str:
        return str(self.server.http_url if protocol == "http" else self.server.grpc_url)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, triton_server_factory: Callable[..., Any]) -> Served:
    root = tmp_path_factory.mktemp("stream_repo")
    log_dir = tmp_path_factory.mktemp("stream_log")
    server = triton_server_factory(
        write_stream_repository(root, log_dir),
        http_restricted_api=[f"inference:{KEY}={SECRET}"],
        grpc_restricted_protocol=[f"inference:{KEY}={SECRET}"],
    )
    return Served(server, log_dir)


def client(served: Served, protocol: str, **kwargs: Any) -> TritonClient:
    kwargs.setdefault("auth", RestrictedApiAuth(KEY, SECRET))
    return TritonClient(served.url(protocol), protocol=protocol, **kwargs)


def rid() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def expected_pieces(n: int) -> list[str]:
    return [f"p{i} " for i in range(n)]


# -- what arrives -------------------------------------------------------------------------------


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_stream_yields_every_piece_in_order_with_or_without_a_flags_only_final(
    served: Served, protocol: str, model: str
) -> None:
    with client(served, protocol) as c:
        stream = c.stream(model, N=[5], request_id="ids-are-echoed")
        responses = list(stream)
    assert [r.text("PIECE") for r in responses] == expected_pieces(5)
    assert [int(r["INDEX"][0]) for r in responses] == [0, 1, 2, 3, 4]
    assert [r.index for r in responses] == [0, 1, 2, 3, 4]
    # SSE sends GRID flat; the client gives it the model's shape back.
    assert all(r["GRID"].shape == (2, 3) and r["GRID"].dtype == np.float32 for r in responses)
    assert float(responses[3]["GRID"][1, 2]) == 3.0
    assert {r.request_id for r in responses} == {"ids-are-echoed"}
    assert {r.model for r in responses} == {model}
    assert stream.stats.responses == 5
    assert stream.stats.time_to_first is not None and stream.stats.time_to_first > 0
    if protocol == "grpc" and MODELS[model] == "with_last":
        assert [r.final for r in responses] == [False] * 4 + [True]
    else:  # the end is a flags-only response (gRPC) or the end of the body (SSE): not a piece
        assert not any(r.final for r in responses)


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_async_stream_yields_the_same_pieces_as_the_sync_one(
    served: Served, protocol: str, model: str
) -> None:
    async def run() -> list[str]:
        async with AsyncTritonClient(
            served.url(protocol), protocol=protocol, auth=RestrictedApiAuth(KEY, SECRET)
        ) as c:
            async with c.stream(model, N=[4], outputs=["PIECE"]) as stream:
                pieces = []
                async for r in stream:
                    assert set(r.outputs) == {"PIECE"}
                    pieces.append(r.text("PIECE"))
                return pieces

    assert asyncio.run(run()) == expected_pieces(4)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_stream_of_zero_pieces_ends_without_a_response(served: Served, protocol: str) -> None:
    with client(served, protocol) as c:
        assert list(c.stream("pieces_flagged", N=[0])) == []


def test_plain_tritonclient_grpc_stream_sees_what_ours_sees(served: Served) -> None:
    """tritonclient's own streaming API (start_stream / async_stream_infer), not our code."""
    import queue

    import tritonclient.grpc as grpcclient

    received: queue.Queue[Any] = queue.Queue()
    plain = grpcclient.InferenceServerClient(served.server.grpc_address)
    plain.start_stream(
        callback=lambda result, error: received.put((result, error)),
        headers={f"triton-grpc-protocol-{KEY}": SECRET},
    )
    n_input = grpcclient.InferInput("N", [1], "INT32")
    n_input.set_data_from_numpy(np.array([4], np.int32))
    plain.async_stream_infer("pieces_flagged", [n_input], enable_empty_final_response=True)
    theirs = []
    while True:
        result, error = received.get(timeout=10)
        assert error is None
        response = result.get_response()
        if response.outputs:
            theirs.append(result.as_numpy("PIECE")[0].decode())
        if response.parameters["triton_final_response"].bool_param:
            break
    plain.stop_stream()
    plain.close()
    with client(served, "grpc") as c:
        ours = [r.text("PIECE") for r in c.stream("pieces_flagged", N=[4])]
    assert theirs == ours == expected_pieces(4)


def test_raw_sse_read_with_httpx_sees_what_ours_sees(served: Served) -> None:
    """The generate_stream body as any SSE client reads it (split on blank lines, no tritonkit)."""
    url = f"{served.server.http_url}/v2/models/pieces/generate_stream"
    with httpx.stream("POST", url, json={"N": 3}, headers={KEY: SECRET}, timeout=10) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        body = response.read().decode()
    events = [json.loads(chunk.removeprefix("data: ")) for chunk in body.split("\n\n") if chunk.strip()]
    with client(served, "http") as c:
        ours = list(c.stream("pieces", N=[3]))
    assert [e["PIECE"] for e in events] == [r.text("PIECE") for r in ours] == expected_pieces(3)
    assert [e["GRID"] for e in events] == [r["GRID"].reshape(-1).tolist() for r in ours]


# -- leaving early cancels on the server -------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_break_cancels_the_request_on_the_server(served: Served, protocol: str) -> None:
    request_id = rid()
    with client(served, protocol) as c:
        for r in c.stream("pieces", N=[200], DELAY=[0.02], request_id=request_id):
            if r.index == 2:
                break
        record = wait_for_record(served.log_dir, request_id)
    assert record["cancelled"] is True
    assert 3 <= record["sent"] < 200


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_close_and_ctrl_c_cancel_the_request_on_the_server(served: Served, protocol: str) -> None:
    closed, interrupted = rid(), rid()
    with client(served, protocol) as c:
        stream = c.stream("pieces", N=[200], DELAY=[0.02], request_id=closed)
        next(stream)
        stream.close()
        with pytest.raises(KeyboardInterrupt):
            for _ in c.stream("pieces", N=[200], DELAY=[0.02], request_id=interrupted):
                raise KeyboardInterrupt  # what Ctrl-C raises inside the loop
        for request_id in (closed, interrupted):
            record = wait_for_record(served.log_dir, request_id)
            assert record["cancelled"] is True and record["sent"] < 200


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_cancelling_the_asyncio_task_cancels_the_request_on_the_server(served: Served, protocol: str) -> None:
    request_id = rid()
    first = asyncio.Event()

    async def consume(c: AsyncTritonClient) -> None:
        async for _ in c.stream("pieces", N=[200], DELAY=[0.02], request_id=request_id):
            first.set()

    async def run() -> None:
        async with AsyncTritonClient(
            served.url(protocol), protocol=protocol, auth=RestrictedApiAuth(KEY, SECRET)
        ) as c:
            task = asyncio.create_task(consume(c))
            await asyncio.wait_for(first.wait(), 10)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(run())
    record = wait_for_record(served.log_dir, request_id)
    assert record["cancelled"] is True and record["sent"] < 200


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_bare_break_out_of_async_for_cancels_the_request_on_the_server(served: Served, protocol: str) -> None:
    request_id = rid()

    async def run() -> None:
        async with AsyncTritonClient(
            served.url(protocol), protocol=protocol, auth=RestrictedApiAuth(KEY, SECRET)
        ) as c:
            async for r in c.stream("pieces", N=[200], DELAY=[0.02], request_id=request_id):
                if r.index == 1:
                    break
            await asyncio.sleep(0.5)  # asyncio's async-generator finaliser closes it meanwhile

    asyncio.run(run())
    record = wait_for_record(served.log_dir, request_id)
    assert record["cancelled"] is True and record["sent"] < 200


# -- errors and timeouts -------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_error_event_ends_the_stream_with_inference_error_after_pieces(served: Served, protocol: str) -> None:
    got = []
    with client(served, protocol) as c:
        with pytest.raises(InferenceError, match=r"after 2 response\(s\): piece 2 failed on purpose"):
            for r in c.stream("pieces", N=[5], FAIL_AT=[2]):
                got.append(r.text("PIECE"))
        with pytest.raises(InferenceError, match=r"after 0 response\(s\): piece 0 failed on purpose"):
            list(c.stream("pieces", N=[5], FAIL_AT=[0]))
    assert got == expected_pieces(2)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_each_stream_timeout_ends_the_stream_and_names_itself(served: Served, protocol: str) -> None:
    with client(served, protocol, retry=FAST) as c:
        with pytest.raises(RequestTimeoutError, match="no first response within 0.3s"):
            list(c.stream("pieces", N=[2], WAIT=[2.0], first_response_timeout=0.3))
        with pytest.raises(RequestTimeoutError, match="no response for 0.3s after response 1"):
            list(c.stream("pieces", N=[3], DELAY=[2.0], response_timeout=0.3))
        pieces = []
        with pytest.raises(RequestTimeoutError, match="total_timeout=0.5s"):
            for piece in c.stream("pieces", N=[50], DELAY=[0.1], response_timeout=5, total_timeout=0.5):
                pieces.append(piece)
        # ended by the total, not after the whole answer (50 pieces 0.1 s apart: 5 s)
        assert len(pieces) < 50
        # A slow but steady stream is fine: the gap timeout is per response (0.2 s gaps, a 10 s
        # limit a loaded box cannot reach).
        assert len(list(c.stream("pieces", N=[4], DELAY=[0.2], response_timeout=10))) == 4


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_stream_without_the_restricted_key_is_an_authentication_error(served: Served, protocol: str) -> None:
    with client(served, protocol, auth=None) as c:
        with pytest.raises(AuthenticationError, match="restricted"):
            list(c.stream("pieces", N=[2]))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_infer_on_a_decoupled_model_says_to_stream(served: Served, protocol: str) -> None:
    with client(served, protocol) as c:
        with pytest.raises(InferenceError, match="decoupled") as caught:
            c.infer("pieces", N=[2])
    assert "stream" in str(caught.value.hint)


def test_http_stream_refuses_values_json_cannot_carry_before_sending(served: Served) -> None:
    with client(served, "http") as c:
        with pytest.raises(InputMismatchError, match="NaN"):
            c.stream("pieces", N=[1], DELAY=[float("nan")])


# -- through a TLS gateway like Azure ML's --------------------------------------------------------


@pytest.fixture(scope="module")
def gateway(served: Served, tmp_path_factory: pytest.TempPathFactory) -> Iterator[NginxGateway]:
    if find_nginx() is None:
        pytest.skip("nginx missing: run scripts/system-deps.sh (make test does)")
    http = served.server.http_address
    with NginxGateway(
        tmp_path_factory.mktemp("stream_gateway"),
        {"blue": http, "green": http},
        key=GATEWAY_KEY,
        grpc_deployments={"blue": served.server.grpc_address},
        buffering=False,
    ) as gw:
        yield gw


def gateway_client(gw: NginxGateway, protocol: str, **kwargs: Any) -> TritonClient:
    kwargs.setdefault("auth", CombinedAuth(KeyAuth(GATEWAY_KEY), RestrictedApiAuth(KEY, SECRET)))
    url = gw.url + "/score" if protocol == "http" else gw.grpc_url
    return TritonClient(url, protocol=protocol, cacert=gw.ca_cert, retry=FAST, **kwargs)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_stream_through_tls_gateway_arrives_piece_by_piece(
    served: Served, gateway: NginxGateway, protocol: str
) -> None:
    request_id = rid()
    with gateway_client(gateway, protocol, deployment="blue") as c:
        stream = c.stream("pieces", N=[4], DELAY=[0.4], request_id=request_id)
        arrivals = []
        for r in stream:
            arrivals.append((time.monotonic(), r.text("PIECE")))
    assert [p for _, p in arrivals] == expected_pieces(4)
    # Pieces come as the model makes them (0.4 s apart), not all at once at the end (the gateway
    # must not buffer; see test_buffering_gateway_holds_sse_pieces_until_the_end).
    assert arrivals[-1][0] - arrivals[0][0] > 1.0


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_async_stream_through_tls_gateway_with_key_and_routing(gateway: NginxGateway, protocol: str) -> None:
    async def run() -> list[str]:
        url = gateway.url + "/score" if protocol == "http" else gateway.grpc_url
        auth = CombinedAuth(KeyAuth(GATEWAY_KEY), RestrictedApiAuth(KEY, SECRET))
        async with AsyncTritonClient(
            url, protocol=protocol, auth=auth, deployment="blue", cacert=gateway.ca_cert
        ) as c:
            async with c.stream("pieces_flagged", N=[3]) as stream:
                return [r.text("PIECE") async for r in stream]

    assert asyncio.run(run()) == expected_pieces(3)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_stream_through_gateway_with_a_wrong_key_is_refused(gateway: NginxGateway, protocol: str) -> None:
    with gateway_client(gateway, protocol) as good:
        good.model_info("pieces")  # cached, so the stream itself meets the gateway's refusal
        good.auth = KeyAuth("not-the-key")
        with pytest.raises(AuthenticationError):
            list(good.stream("pieces", N=[2]))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_stream_through_gateway_without_its_ca_is_a_tls_error(gateway: NginxGateway, protocol: str) -> None:
    with gateway_client(gateway, protocol) as good:
        info = good.model_info("pieces")
    url = gateway.url if protocol == "http" else gateway.grpc_url
    with TritonClient(url, protocol=protocol, auth=KeyAuth(GATEWAY_KEY), retry=FAST) as c:
        c._models[("pieces", "")] = info  # the stream itself meets the unknown CA
        with pytest.raises(EndpointUnreachableError, match="TLS"):
            list(c.stream("pieces", N=[1]))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_stream_refused_by_the_gateway_is_retried_before_the_first_response(
    served: Served, gateway: NginxGateway, protocol: str
) -> None:
    with gateway_client(gateway, protocol) as c:
        c.model_info("pieces")
        start = len(gateway.access_log())
        c.auth = CombinedAuth(
            KeyAuth(GATEWAY_KEY), RestrictedApiAuth(KEY, SECRET), DeploymentRouting(UNAVAILABLE)
        )
        with pytest.raises(ServerUnavailableError, match="gave up after 3 attempts"):
            list(c.stream("pieces", N=[2]))
    # Earlier tests' streams may log their lines late: count this deployment's only.
    assert gateway.wait_for_log(start, 3, deployment=UNAVAILABLE) == [(UNAVAILABLE, 503)] * 3


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_gateway_dying_mid_stream_ends_it_without_retry_and_the_server_stops(
    served: Served, protocol: str, tmp_path: Path
) -> None:
    if find_nginx() is None:
        pytest.skip("nginx missing: run scripts/system-deps.sh (make test does)")
    request_id = rid()
    http, grpc_address = served.server.http_address, served.server.grpc_address
    gw = NginxGateway(
        tmp_path / "gw",
        {"blue": http},
        key=GATEWAY_KEY,
        grpc_deployments={"blue": grpc_address},
        buffering=False,
    )
    with gw, gateway_client(gw, protocol) as c:
        got = []
        with pytest.raises(EndpointUnreachableError, match=r"broke after 2 response\(s\)"):
            for r in c.stream("pieces", N=[200], DELAY=[0.02], request_id=request_id):
                got.append(r.index)
                if r.index == 1:
                    gw.kill()
    assert got == [0, 1]  # no retry: nothing was repeated
    record = wait_for_record(served.log_dir, request_id)
    assert record["cancelled"] is True and record["sent"] < 200  # nginx's upstream side closed too


def test_buffering_gateway_holds_sse_pieces_until_the_end(served: Served, tmp_path: Path) -> None:
    """nginx's default (proxy_buffering on) delivers a generate_stream answer in one piece at the
    end: what a user behind such a gateway sees. gRPC (grpc_pass) is not buffered."""
    if find_nginx() is None:
        pytest.skip("nginx missing: run scripts/system-deps.sh (make test does)")
    http = served.server.http_address
    with NginxGateway(tmp_path / "gw", {"blue": http}, key=GATEWAY_KEY) as gw:
        with gateway_client(gw, "http") as c:
            stream = c.stream("pieces", N=[3], DELAY=[0.3])
            assert len(list(stream)) == 3
    assert stream.stats.time_to_first is not None and stream.stats.time_to_first > 0.5


# -- tritonkit infer --stream ---------------------------------------------------------------------


def run_cli(argv: list[str]) -> int:
    from tritonkit.cli.app import main

    try:
        main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


@pytest.fixture()
def key_env(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setenv("TK_TEST_RESTRICTED", SECRET)
    return ["--restricted-header", f"{KEY}=TK_TEST_RESTRICTED"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_cli_stream_prints_text_pieces_inline_then_the_timings(
    served: Served, protocol: str, key_env: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["infer", served.url(protocol), "pieces", "-p", protocol, "-i", "N=[4]", "-o", "PIECE", "--stream"]
    assert run_cli(argv + key_env) == 0
    captured = capsys.readouterr()
    assert captured.out == "p0 p1 p2 p3 \n"
    assert "4 piece(s), first after" in captured.err and "pieces/s" in captured.err


def test_cli_stream_prints_other_tensors_one_line_per_response(
    served: Served, key_env: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["infer", served.url("http"), "pieces_flagged", "-i", "N=[2]", "-o", "INDEX", "--stream"]
    assert run_cli(argv + key_env) == 0
    assert capsys.readouterr().out.splitlines() == ["[0] INDEX=0", "[1] INDEX=1"]


def test_cli_stream_json_prints_one_object_per_response_then_a_summary(
    served: Served, key_env: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["infer", served.url("grpc"), "pieces", "-p", "grpc", "-i", "N=[3]", "--stream", "--json"]
    assert run_cli(argv + key_env) == 0
    objects = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [o["outputs"]["PIECE"]["data"] for o in objects[:3]] == [["p0 "], ["p1 "], ["p2 "]]
    assert objects[1]["outputs"]["GRID"]["shape"] == [2, 3]
    assert objects[3]["summary"]["responses"] == 3 and objects[3]["summary"]["time_to_first_s"] > 0


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_cli_infer_on_a_decoupled_model_without_stream_says_to_add_it(
    served: Served, protocol: str, key_env: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["infer", served.url(protocol), "pieces", "-p", protocol, "-i", "N=[2]"]
    assert run_cli(argv + key_env) == 1
    err = capsys.readouterr().err
    assert "decoupled" in err and "--stream" in err
    assert "Traceback" not in err


def test_cli_stream_error_event_is_a_clean_error(
    served: Served, key_env: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "infer",
        served.url("http"),
        "pieces",
        "-i",
        "N=[3]",
        "-i",
        "FAIL_AT=[1]",
        "-o",
        "PIECE",
        "--stream",
    ]
    assert run_cli(argv + key_env) == 1
    captured = capsys.readouterr()
    assert captured.out.startswith("p0 ")
    assert "piece 1 failed on purpose" in captured.err and "1 piece(s)" in captured.err


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_ctrl_c_on_infer_stream_cancels_the_request_on_the_server(served: Served, protocol: str) -> None:
    """A real SIGINT to a real `tritonkit infer --stream` process."""
    import os
    import signal
    import subprocess
    import sys

    env = {**os.environ, "TK_TEST_RESTRICTED": SECRET, "PYTHONUNBUFFERED": "1"}
    argv = [sys.executable, "-m", "tritonkit", "infer", served.url(protocol), "pieces", "-p", protocol]
    argv += ["-i", "N=[300]", "-i", "DELAY=[0.02]", "-o", "PIECE", "--stream"]
    argv += ["--restricted-header", f"{KEY}=TK_TEST_RESTRICTED"]
    # The CLI has no --request-id: find the request by the pieces the model recorded instead.
    before = set(served.log_dir.glob("*.json"))
    # SIGINT as a terminal delivers it: a runner that started the suite in the background (a
    # non-interactive shell's `cmd &`) leaves SIGINT ignored, and children inherit that.
    process = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509 - no threads run it
    )
    try:
        assert process.stdout is not None
        assert process.stdout.read(3) == b"p0 "  # streaming has begun
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, err.decode()
    assert b"Traceback" not in err
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        new = [
            p for p in set(served.log_dir.glob("*.json")) - before if json.loads(p.read_text())["n"] == 300
        ]
        if new:
            break
        time.sleep(0.05)
    assert len(new) == 1, "the model wrote no record for the interrupted request"
    record = json.loads(new[0].read_text())
    assert record["cancelled"] is True and record["sent"] < 300
