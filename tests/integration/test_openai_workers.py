"""`tritonkit openai --workers 2` and `serve --openai-workers 2` before clock_llm
(benchmarks/clock_llm.yaml: an LLM stage's tensors answered by the clock, 32 pieces).

The official client is the caller: keys, streamed answers joining to unary ones, a disconnect
cancelling, /metrics summed over the workers, and SIGTERM stopping every worker.
"""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_server_cli import ServeProcess
from tests.integration.test_server_local import wait_until

openai = pytest.importorskip("openai")

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-workers-key"
ANSWER = "".join(f"tick{i} " for i in range(32))


@pytest.fixture(scope="module")
def clock_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tritonkit.repository import build_spec

    out = tmp_path_factory.mktemp("clock") / "model_repository"
    build_spec(ROOT / "benchmarks" / "clock_llm.yaml", out)
    return out


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _metrics(url: str) -> str:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        return str(response.read().decode())


def _count(text: str, endpoint: str, status: int) -> int:
    pattern = (
        rf'tritonkit_openai_requests_total{{model="clock_llm",endpoint="{endpoint}",status="{status}",'
        r'key="[^"]*"} (\d+)'
    )
    return sum(int(found) for found in re.findall(pattern, text))  # every key's requests


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health/ready", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


async def _calls(url: str) -> None:
    client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)
    unary = await client.completions.create(model="clock_llm", prompt="tick", max_tokens=32)
    # clock_llm counts no tokens: the front cannot tell max_tokens was reached, so "stop"
    assert unary.choices[0].text == ANSWER and unary.choices[0].finish_reason == "stop"

    async def streamed() -> tuple[str, list[str | None]]:
        stream = await client.completions.create(model="clock_llm", prompt="tick", max_tokens=32, stream=True)
        texts, reasons = [], []
        async for chunk in stream:
            texts.append(chunk.choices[0].text)
            reasons.append(chunk.choices[0].finish_reason)
        return "".join(texts), reasons

    # 16 at once, each on its own connection: the kernel spreads them over the workers
    answers = await asyncio.gather(*(streamed() for _ in range(16)))
    for text, reasons in answers:
        assert text == unary.choices[0].text
        assert reasons[-1] == unary.choices[0].finish_reason and all(r is None for r in reasons[:-1])

    # leaving after the first piece cancels the request (499 in the front's metrics)
    stream = await client.completions.create(model="clock_llm", prompt="tick", max_tokens=32, stream=True)
    async for _ in stream:
        break
    await stream.response.aclose()
    await client.close()

    refused = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="sk-wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        await refused.completions.create(model="clock_llm", prompt="tick", max_tokens=2)
    await refused.close()


def _check_front(url: str) -> None:
    asyncio.run(_calls(url))
    # every worker's requests are in the sum, whichever worker answers the scrape
    assert wait_until(lambda: _count(_metrics(url), "completions", 200) == 17, 30), _metrics(url)
    assert wait_until(lambda: _count(_metrics(url), "completions", 499) == 1, 30), _metrics(url)
    assert wait_until(lambda: "tritonkit_openai_requests_active 0" in _metrics(url), 30)


def test_openai_workers_share_the_port_keys_and_metrics_and_stop_on_sigterm(
    clock_repo: Path, triton_server_factory: Any, tmp_path: Path
) -> None:
    server = triton_server_factory(clock_repo)
    keys = tmp_path / "keys"
    keys.write_text(KEY + "\n")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    front = subprocess.Popen(
        [sys.executable, "-m", "tritonkit", "openai", server.grpc_url, "--port", str(port)]
        + ["--workers", "2", "--openai-api-key-file", str(keys)],
    )
    try:
        assert wait_until(lambda: _ready(url) or front.poll() is not None, 60) and front.poll() is None
        workers = _children(front.pid)
        assert len(workers) == 2
        _check_front(url)
    finally:
        front.send_signal(signal.SIGTERM)
        code = front.wait(timeout=60)
    assert code == 0
    assert not any(Path(f"/proc/{pid}").exists() for pid in workers)


def test_serve_openai_workers_runs_the_workers_beside_the_server_and_stops_them(
    clock_repo: Path, tmp_path: Path
) -> None:
    keys = tmp_path / "keys"
    keys.write_text(KEY + "\n")
    port = _free_port()
    serve = ServeProcess(
        str(clock_repo),
        "--openai-port",
        str(port),
        "--openai-workers",
        "2",
        "--openai-api-key-file",
        str(keys),
    )
    url = f"http://127.0.0.1:{port}"
    try:
        serve.wait_for(r"OpenAI +http://\S+/v1 \(2 workers\)", timeout=180)
        _check_front(url)
    finally:
        code = serve.stop(signal.SIGTERM)
    assert code == 0, serve.output
    assert not _ready(url)
