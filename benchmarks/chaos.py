"""Chaos under load: engines, stubs and the server killed while 16 clients keep asking (issue #41).

`tritonkit serve REPO --openai-port 0` (healing on, its default) serves either the two Python
pipelines of tests/integration/test_openai_serve_cli.py (``--python``) or the tiny LLM on a vLLM
engine (``--llm DIR``, the directory ensembles/llm/tiny_llm.py makes). Sixteen client threads
send requests without pause, half through the OpenAI front (a streamed chat or completion), half
straight to Triton (HTTP /infer of the unary pipeline; a gRPC stream to the vLLM stage). Every
request has a 60 s timeout. Meanwhile each fault is applied several times, one after the other,
each once the previous one healed: ``SIGKILL`` to the vLLM EngineCore (``engine``), to a Python
stub (``stub``), to tritonserver (``server``).

Every request is classed: right (the answer equals the one asked alone before any fault), wrong
(an answer, not that one), server error (5xx, an SSE error event of type server_error, a gRPC
error that says the server failed, a connection refused while the server restarts), unloaded
(Triton's own 404 "no available versions" for a model being reloaded: straight to Triton only),
client error (a 4xx: the wrong class for a good request), hung (no end within its timeout).
Per fault: the counts of requests that ended between it and the next, the seconds until the
front's /health/ready said not ready, and until answers were right again on both routes.

``--soak N`` then sends N requests (good and hostile mixed, 4 of 5 good) through the front and
straight to Triton, recording the resident memory of the serve process (the front runs in it)
and of tritonserver every N/20 requests: the second half must grow less than 5%.

``--pipelines`` (#53) serves the LLM-decoder pipelines (``vlm_llm``, ``arr_coc_llm``: the demo's
repository, ``make llm-venv``) with the front as its own process (``tritonkit openai``, as on AKS:
the benchmark restarts it when it dies, as the kubelet would). The front route is a streamed chat
with the image (the front composes the pipeline: prompt ensemble, then the engine's stream), the
Triton route a gRPC stream on the pipeline's name (its front door), each alternating between the
two pipelines. Its faults: ``engine``, ``stub`` (the vision stage ``image_preprocessor``),
``server``, and ``front`` (the front's process killed). ``--hogs 2`` runs two busy loops beside
it all. Per fault also the reload-refusal figures: of the requests sent while not ready, how many
were refused (server error) within 1 s, and how many were held longer than 5 s.

Each scenario runs alone (each under the machine's heavy-run lock, well under 8 minutes), then
``--merge`` puts their faults into one table:

    python benchmarks/chaos.py --python --faults stub,server --kills 3 --name python
    python benchmarks/chaos.py --python --faults none --soak 20000 --name soak
    python benchmarks/chaos.py --llm /tmp/tiny_llm_hf --faults engine,stub --kills 3 --name llm_engine
    python benchmarks/chaos.py --llm /tmp/tiny_llm_hf --faults server --kills 3 --name llm_server
    python benchmarks/chaos.py --pipelines --faults engine,stub,server,front --kills 2 --hogs 2 \
        --name pipelines
    python benchmarks/chaos.py --merge python,llm_engine,llm_server,soak --name all

Results: benchmarks/results/chaos_<name>.json and .png (serve's own output: <work>/serve-<name>.log).
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import random
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.integration._faults import (  # noqa: E402
    engine_core_pids,
    kill,
    status,
    stub_pids,
    triton_generate,
    tritonserver_pid,
    wait_for,
)
from tritonkit.openai_front.errors import server_side  # noqa: E402
from tritonkit.server._heal import stub_processes  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
TIMEOUT_S = 60.0
CONCURRENCY = 16
LLM_PROMPT, LLM_SAMPLING = "The image shows", {"temperature": 0, "max_tokens": 8}
WORDS = "one two three"
#: serve's lines about healing (not the front's "request failed" lines, which name models too)
HEAL_LINE = r"(warning: )?(model '|tritonserver (stopped|is serving))"


@dataclass
class Outcome:
    began: float
    ended: float
    route: str
    kind: str  # right, wrong, server_error, unloaded, client_error, hung
    detail: str = ""


@dataclass
class Scenario:
    name: str
    repo: Path
    model: str  # the model whose stub is killed
    front: Any = None  # (base) -> (kind, detail)
    triton: Any = None  # (http, grpc) -> (kind, detail)
    #: the right answers (one per pipeline the route alternates between)
    right_front: set[str] = field(default_factory=set)
    right_triton: set[str] = field(default_factory=set)
    outcomes: list[Outcome] = field(default_factory=list)
    #: the front runs as its own process (FrontProcess), not inside serve
    own_front: bool = False
    #: how many distinct right answers each route has
    answers: int = 1
    front_process: FrontProcess | None = None


class Serve:
    """`tritonkit serve` as a subprocess, its output collected."""

    def __init__(self, repo: Path, *, openai: bool = True) -> None:
        command = [sys.executable, "-m", "tritonkit", "serve", str(repo), "--startup-timeout", "900"]
        if openai:
            command += ["--openai-port", "0"]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        threading.Thread(target=lambda: self.lines.extend(self.process.stdout or []), daemon=True).start()

    def find(self, pattern: str, timeout: float = 900) -> str:
        found: list[str] = []

        def seen() -> bool:
            match = re.search(pattern, "".join(self.lines))
            if match:
                found.append(match.group(1) if match.groups() else match.group(0))
            return bool(found) or self.process.poll() is not None

        wait_for(seen, timeout, 0.2)
        if not found:
            raise SystemExit(f"serve never printed {pattern!r}:\n{''.join(self.lines)[-3000:]}")
        return found[0]

    def tail(self, lines: int = 60) -> str:
        return "".join(self.lines[-lines:])

    def stop(self) -> None:
        self.process.send_signal(2)
        try:
            self.process.wait(90)
        except subprocess.TimeoutExpired:
            self.process.kill()


class FrontProcess:
    """``tritonkit openai`` as its own process on a fixed port, as on AKS (its own container):
    started again 1 s after it dies, as the kubelet restarts a container, until ``stop``."""

    def __init__(self, grpc: str, http: str) -> None:
        from tests.integration._faults import free_port

        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}/v1"
        self.command = [
            sys.executable, "-m", "tritonkit", "openai", f"grpc://{grpc}", "--port", str(self.port),
            "--stream-url", http,
        ]  # fmt: skip
        self.restarts = 0
        self.lines: list[str] = []
        self._stopping = threading.Event()
        self.process = self._start()
        threading.Thread(target=self._watch, daemon=True).start()
        if (
            wait_for(lambda: status(self.base.removesuffix("/v1") + "/health/ready", 1.0) == 200, 300, 0.2)
            is None
        ):
            raise SystemExit(f"the front never got ready:\n{''.join(self.lines)[-3000:]}")

    @property
    def pid(self) -> int:
        return self.process.pid

    def _start(self) -> subprocess.Popen[str]:
        process = subprocess.Popen(self.command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        threading.Thread(target=lambda: self.lines.extend(process.stdout or []), daemon=True).start()
        return process

    def _watch(self) -> None:
        while not self._stopping.is_set():
            if self.process.poll() is not None and not self._stopping.is_set():
                time.sleep(1.0)
                self.process = self._start()
                self.restarts += 1
            time.sleep(0.1)

    def stop(self) -> None:
        self._stopping.set()
        self.process.send_signal(2)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()


def start_hogs(count: int) -> list[subprocess.Popen[bytes]]:
    """``count`` busy loops (one core each), as a busy node's other pods."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


# -- one request each way -----------------------------------------------------------------------


def _http_kind(code: int, detail: str) -> str:
    if code == 0:
        return "server_error"  # refused or reset: the server is away
    if code >= 500:
        return "server_error"
    if code == 404 and "no available versions" in detail:
        return "unloaded"
    return "client_error"


_local = threading.local()


def _client() -> httpx.Client:
    """This thread's HTTP client: its connections are kept (a new client per request costs the
    client more CPU than the server spends answering, on this two-core box)."""
    client: httpx.Client | None = getattr(_local, "client", None)
    if client is None:
        client = _local.client = httpx.Client(timeout=TIMEOUT_S)
    return client


def _front_stream(base: str, path: str, body: dict[str, Any], piece: Any) -> tuple[str, str]:
    try:
        with _client().stream("POST", f"{base}{path}", json={**body, "stream": True}) as reply:
            if reply.status_code != 200:
                reply.read()
                kind = _http_kind(reply.status_code, reply.text)
                if reply.status_code == 503 and not reply.headers.get("retry-after"):
                    kind = "client_error"  # a 503 must say when to come back
                return kind, f"{reply.status_code} {reply.text[:120]}"
            text = []
            for line in reply.iter_lines():
                if line.startswith("data: {"):
                    event = json.loads(line[6:])
                    if "error" in event:
                        kind = "server_error" if event["error"]["type"] == "server_error" else "client_error"
                        return kind, json.dumps(event["error"])[:160]
                    text += [piece(c) for c in event["choices"]]
            return "text", "".join(text)
    except httpx.TimeoutException:
        return "hung", "timeout"
    except httpx.HTTPError as exc:
        return "server_error", type(exc).__name__


def python_front(base: str) -> tuple[str, str]:
    body = {"model": "echo_stream", "messages": [{"role": "user", "content": WORDS}]}
    return _front_stream(base, "/chat/completions", body, lambda c: c["delta"].get("content") or "")


def llm_front(base: str) -> tuple[str, str]:
    body = {"model": "llm", "prompt": LLM_PROMPT, **LLM_SAMPLING}
    return _front_stream(base, "/completions", body, lambda c: c.get("text") or "")


def python_triton(http: str, grpc: str) -> tuple[str, str]:
    body = {"inputs": [{"name": "TEXT", "shape": [1], "datatype": "BYTES", "data": ["hi"]}]}
    try:
        reply = _client().post(f"{http}/v2/models/echo_unary/infer", json=body)
    except httpx.TimeoutException:
        return "hung", "timeout"
    except httpx.HTTPError as exc:
        return "server_error", type(exc).__name__
    if reply.status_code != 200:
        return _http_kind(reply.status_code, reply.text), f"{reply.status_code} {reply.text[:120]}"
    return "text", str(reply.json()["outputs"][0]["data"][0])


def llm_triton(http: str, grpc: str) -> tuple[str, str]:
    text, error = triton_generate(grpc, "llm", LLM_PROMPT, LLM_SAMPLING)
    if error is None:
        return "text", text
    if "no final response" in error:
        return "hung", error
    if "no available versions" in error or "unknown model" in error.lower():
        return "unloaded", error[:160]
    return ("server_error" if server_side(error) or _transport(error) else "client_error"), error[:160]


#: the LLM-decoder pipelines and their questions (the demo's); each route alternates between them
PIPELINE_QUESTIONS = {"vlm_llm": "Describe the image.", "arr_coc_llm": "Where is the sun?"}
PIPELINE_TOKENS = 8
_turns = {"front": itertools.count(), "triton": itertools.count()}


def _pipeline(route: str) -> str:
    """The next pipeline this route asks (each route takes them in turn)."""
    return list(PIPELINE_QUESTIONS)[next(_turns[route]) % len(PIPELINE_QUESTIONS)]


@functools.cache
def _sample() -> bytes:
    return (ROOT / "ensembles" / "assets" / "sample.png").read_bytes()


@functools.cache
def _plain_streams() -> Any:
    """ensembles/plain_streams.py: streaming clients tritonkit did not write (loaded once)."""
    from tests._examples import load_example

    return load_example("ensembles/plain_streams.py")


def pipeline_front(base: str) -> tuple[str, str]:
    import base64

    model = _pipeline("front")
    image = base64.b64encode(_sample()).decode()
    content = [
        {"type": "text", "text": PIPELINE_QUESTIONS[model]},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{image}"}},
    ]
    body = {"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": PIPELINE_TOKENS}
    kind, detail = _front_stream(base, "/chat/completions", body, lambda c: c["delta"].get("content") or "")
    return kind, f"{model}: {detail}" if kind == "text" else detail


def pipeline_triton(http: str, grpc: str) -> tuple[str, str]:
    import numpy as np
    import tritonclient.grpc as grpcclient

    plain = _plain_streams()
    model = _pipeline("triton")
    inputs = {
        "RAW_IMAGE": np.frombuffer(_sample(), dtype=np.uint8),
        "TEXT_QUERY": np.array([PIPELINE_QUESTIONS[model].encode()], dtype=np.object_),
        "MAX_TOKENS": np.array([PIPELINE_TOKENS], dtype=np.int32),
    }
    try:
        client = grpcclient.InferenceServerClient(grpc)
    except Exception as exc:  # noqa: BLE001 - no server to talk to: that is the answer
        return "server_error", str(exc)[:160]
    try:
        stream = plain.stream_grpc(client, model, inputs)
    finally:
        client.close()
    if stream.error is None and stream.final:
        return "text", f"{model}: {''.join(stream.pieces)}"
    error = stream.error or "the stream ended without its final response"
    if "no response within" in error:
        return "hung", error
    if "no available versions" in error or "unknown model" in error.lower():
        return "unloaded", error[:160]
    return ("server_error" if server_side(error) or _transport(error) else "client_error"), error[:160]


#: what tritonclient says when the server went away under a gRPC stream (gRPC UNAVAILABLE, or the
#: stream it broke): no server answered, so not a client's mistake
_TRANSPORT = ("connect", "stream removed", "socket closed", "no longer in valid state")


def _transport(error: str) -> bool:
    return any(words in error.lower() for words in _TRANSPORT)


# -- load and faults ----------------------------------------------------------------------------


class Load:
    """CONCURRENCY threads asking without pause, half through the front, half straight to Triton."""

    def __init__(self, sc: Scenario, base: str, http: str, grpc: str) -> None:
        self.sc, self.base, self.http, self.grpc = sc, base, http, grpc
        self.stop = threading.Event()
        self.threads = [
            threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(CONCURRENCY)
        ]

    def one(self, route: str) -> Outcome:
        began = time.monotonic()
        if route == "front":
            kind, detail = self.sc.front(self.base)
            right = self.sc.right_front
        else:
            kind, detail = self.sc.triton(self.http, self.grpc)
            right = self.sc.right_triton
        if kind == "text":
            kind = "right" if detail in right else "wrong"
        ended = time.monotonic()
        if ended - began > TIMEOUT_S + 5:
            kind = "hung"
        return Outcome(began, ended, route, kind, "" if kind == "right" else detail)

    def _run(self, index: int) -> None:
        route = "front" if index % 2 == 0 else "triton"
        while not self.stop.is_set():
            self.sc.outcomes.append(self.one(route))

    def __enter__(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(TIMEOUT_S + 10)


def _targets(kind: str, sc: Scenario) -> list[int]:
    if kind == "engine":  # this server's engines only (another vLLM may run on the machine)
        server = tritonserver_pid(sc.repo)
        return engine_core_pids(under=server)
    if kind == "stub":
        return stub_pids(sc.model)
    if kind == "front":
        assert sc.front_process is not None, "--faults front needs the front as its own process"
        return [sc.front_process.pid]
    return [tritonserver_pid(sc.repo)]


def _counted(sc: Scenario, record: dict[str, Any], start: float, end: float) -> None:
    """The requests that ended between a fault and the end of its window, by class and route."""
    ended = [o for o in list(sc.outcomes) if start <= o.ended < end]
    record["requests"] = dict(Counter(o.kind for o in ended))
    record["by_route"] = {
        r: dict(Counter(o.kind for o in ended if o.route == r)) for r in ("front", "triton")
    }
    record["examples"] = sorted({f"{o.route} {o.kind}: {o.detail}" for o in ended if o.kind != "right"})[:8]


def _refusals(sc: Scenario, record: dict[str, Any], down: float | None, up: float) -> None:
    """The requests sent while not ready (from readiness going false to right answers again): how
    many were refused (server error, or Triton's own "unloaded") within 1 s, and how many were
    held longer than 5 s, whatever their end."""
    if down is None:
        return
    sent = [o for o in list(sc.outcomes) if down <= o.began < up]
    record.update(_refusal_figures(sent))
    # the front refuses from its own readiness state, Triton from its model state: each route's own
    record["refusals_by_route"] = {
        route: _refusal_figures([o for o in sent if o.route == route]) for route in ("front", "triton")
    }


def _refusal_figures(sent: list[Outcome]) -> dict[str, Any]:
    refused = [o for o in sent if o.kind in ("server_error", "unloaded")]
    return {
        "sent_while_down": len(sent),
        "refused_within_1s": sum(o.ended - o.began <= 1.0 for o in refused),
        "refused_later": sum(o.ended - o.began > 1.0 for o in refused),
        "held_over_5s": sum(o.ended - o.began > 5.0 for o in sent),
        "longest_while_down_s": round(max((o.ended - o.began for o in sent), default=0.0), 3),
    }


def run_faults(
    sc: Scenario,
    serve: Serve,
    urls: tuple[str, str, str],
    faults: list[str],
    kills: int,
    on_record: Any = None,
) -> list[dict[str, Any]]:
    """Each fault ``kills`` times under load; ``on_record(records)`` after each (a run cut short by
    its time limit keeps the faults it finished)."""
    base, http, grpc = urls
    ready = base.removesuffix("/v1") + "/health/ready"
    probe = Load(sc, base, http, grpc)
    records: list[dict[str, Any]] = []
    load = Load(sc, base, http, grpc).__enter__()
    try:
        time.sleep(3)
        for kind in faults:
            for n in range(kills):
                killed = kill(_targets(kind, sc))
                not_ready = wait_for(lambda: status(ready, 1.0) != 200, 15, 0.05)
                down_at = killed + not_ready if not_ready is not None else None

                def right() -> bool:
                    if serve.process.poll() is not None:
                        raise SystemExit(f"serve ended ({serve.process.returncode}):\n{serve.tail()}")
                    return probe.one("front").kind == "right" and probe.one("triton").kind == "right"

                back = wait_for(right, 900, 0.2)
                up_at = time.monotonic()
                record = {"fault": kind, "n": n + 1, "not_ready_s": not_ready, "right_again_s": back}
                time.sleep(3)  # the answers after healing are counted with this fault too
                _counted(sc, record, killed, time.monotonic())
                _refusals(sc, record, down_at, up_at)
                records.append(record)
                print(f"{kind} #{n + 1}: not ready after {not_ready}, right again after {back}", flush=True)
                if on_record is not None:
                    on_record(records)
    except KeyboardInterrupt:
        print(f"interrupted after {len(records)} faults", flush=True)
        load.stop.set()
        return records
    load.__exit__()
    return records


# -- soak ---------------------------------------------------------------------------------------

HOSTILE = [
    ("front", b"{not json", 400),
    ("front", json.dumps({"model": "nope", "messages": [{"role": "user", "content": "x"}]}).encode(), 404),
    ("front", json.dumps({"model": "echo_stream", "messages": "not a list"}).encode(), 400),
    (
        "triton",
        json.dumps(
            {"inputs": [{"name": "WRONG", "shape": [1], "datatype": "BYTES", "data": ["x"]}]}
        ).encode(),
        400,
    ),
]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def soak(sc: Scenario, serve: Serve, base: str, http: str, grpc: str, total: int) -> dict[str, Any]:
    load = Load(sc, base, http, grpc)
    counts: Counter[str] = Counter()
    samples: list[dict[str, float]] = []
    lock = threading.Lock()
    done = [0]
    server = tritonserver_pid(sc.repo)

    def sample() -> None:
        stubs = sum(rss_mib(pid) for pid in stub_processes(server))  # the Python stages' processes
        samples.append(
            {
                "requests": done[0],
                "front_mib": rss_mib(serve.process.pid),
                "triton_mib": rss_mib(server),
                "stubs_mib": stubs,
            }
        )

    def worker(seed: int) -> None:
        rnd = random.Random(seed)
        client = _client()
        while True:
            with lock:
                if done[0] >= total:
                    return
                done[0] += 1
                if done[0] % max(1, total // 20) == 0:
                    sample()
            if rnd.random() < 0.8:
                outcome = load.one("front" if rnd.random() < 0.5 else "triton")
                with lock:
                    counts[f"good {outcome.kind}"] += 1
                continue
            route, body, want = rnd.choice(HOSTILE)
            url = f"{base}/chat/completions" if route == "front" else f"{http}/v2/models/echo_unary/infer"
            try:
                got = client.post(url, content=body, headers={"content-type": "application/json"}).status_code
            except httpx.HTTPError:
                got = 0
            with lock:
                counts["hostile refused right" if got == want else f"hostile got {got} (wanted {want})"] += 1

    sample()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(CONCURRENCY)]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    sample()
    half = samples[len(samples) // 2]
    growth = {k: (samples[-1][k] - half[k]) / half[k] for k in ("front_mib", "triton_mib", "stubs_mib")}
    return {
        "requests": total,
        "seconds": time.monotonic() - began,
        "counts": dict(counts),
        "memory": samples,
        "second_half_growth": growth,
    }


# -- report -------------------------------------------------------------------------------------


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    faults = result.get("faults") or []
    soak_result = result.get("soak")
    panels = [p for p, on in (("faults", faults), ("soak", soak_result)) if on]
    fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 4.5), squeeze=False)
    for ax, panel in zip(axes[0], panels, strict=True):
        if panel == "faults":
            labels = [f"{f.get('scenario', '')} {f['fault']} {f['n']}".strip() for f in faults]
            xs = range(len(faults))
            ax.bar(
                [x - 0.2 for x in xs],
                [f["not_ready_s"] or 0 for f in faults],
                0.4,
                label="until not ready (s)",
            )
            ax.bar(
                [x + 0.2 for x in xs],
                [f["right_again_s"] or 0 for f in faults],
                0.4,
                label="until right again (s)",
            )
            ax.set_xticks(list(xs), labels, rotation=45, ha="right", fontsize=7)
            ax.set_title(
                f"{result['scenario']}: hung {result['hung']}, wrong {result['wrong']}, "
                f"wrong class {result['wrong_class']}",
                fontsize=9,
            )
            ax.legend()
        else:
            assert soak_result is not None
            n = [s["requests"] for s in soak_result["memory"]]
            ax.plot(n, [s["front_mib"] for s in soak_result["memory"]], label="serve + front RSS (MiB)")
            ax.plot(n, [s["triton_mib"] for s in soak_result["memory"]], label="tritonserver RSS (MiB)")
            if "stubs_mib" in soak_result["memory"][0]:
                stubs = [s["stubs_mib"] for s in soak_result["memory"]]
                ax.plot(n, stubs, label="its Python stubs' RSS, summed (MiB)")
            ax.set_xlabel("requests")
            ax.set_ylim(bottom=0)
            ax.set_title(
                "soak: second half growth "
                + ", ".join(f"{k} {v:+.1%}" for k, v in soak_result["second_half_growth"].items()),
                fontsize=9,
            )
            ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def _write(result: dict[str, Any], name: str) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"chaos_{name}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    plot(result, out.with_suffix(".png"))


def merge(names: list[str]) -> dict[str, Any]:
    """One table of every fault from the scenarios run one by one (each under the lock alone)."""
    faults: list[dict[str, Any]] = []
    totals: Counter[str] = Counter()
    soak_result = None
    for name in names:
        part = json.loads((RESULTS / f"chaos_{name}.json").read_text())
        faults += [{"scenario": part["scenario"], **f} for f in part.get("faults", [])]
        totals.update(part.get("totals", {}))
        soak_result = part.get("soak", soak_result)
    summary: dict[str, dict[str, Any]] = {}
    for f in faults:
        row = summary.setdefault(f"{f['scenario']} {f['fault']}", {"kills": 0, "requests": Counter()})
        row["kills"] += 1
        row["requests"].update(f["requests"])
        for key in ("not_ready_s", "right_again_s"):
            row.setdefault(key, []).append(f[key])
    for row in summary.values():
        for key in ("not_ready_s", "right_again_s"):
            seen = [v for v in row[key] if v is not None]
            row[key] = {
                "min": min(seen, default=None),
                "max": max(seen, default=None),
                "missed": len(row[key]) - len(seen),
            }
        row["requests"] = dict(row["requests"])
    result: dict[str, Any] = {
        "scenario": "all",
        "parts": names,
        "concurrency": CONCURRENCY,
        "timeout_s": TIMEOUT_S,
        "summary": summary,
        "faults": faults,
        "totals": dict(totals),
        "hung": totals["hung"],
        "wrong": totals["wrong"],
        "wrong_class": totals["client_error"],
    }
    if soak_result is not None:
        result["soak"] = soak_result
    return result


def _scenario(args: argparse.Namespace) -> tuple[Scenario, list[str]]:
    if args.pipelines:
        from tests._examples import load_example

        repo = args.work / "pipelines-repo"
        if not repo.exists():
            load_example("ensembles/demo.py").build_llm_repository(repo, quiet=True)
        sc = Scenario("pipelines", repo, "image_preprocessor", pipeline_front, pipeline_triton)
        sc.own_front, sc.answers = True, len(PIPELINE_QUESTIONS)
        return sc, (args.faults or "engine,stub,server,front").split(",")
    if args.python:
        from tests.integration.test_openai_serve_cli import _repository

        repo = args.work / "python-repo"
        if not repo.exists():
            _repository(repo)
        sc = Scenario("python", repo, "echo_unary", python_front, python_triton)
        return sc, (args.faults or "stub,server").split(",")
    from tests.integration.test_vllm_engine import ENGINE
    from tritonkit.repository import build_spec

    repo = args.work / "llm-repo"
    if not repo.exists():
        spec = args.work / "llm.yaml"
        # ensembles/tiny_llm.yaml's one stage: the LLM pipelines' decoder, on the vLLM engine
        stage = {"name": "llm", "backend": "vllm", "model": str(args.llm.resolve()), "engine": ENGINE}
        spec.write_text(json.dumps({"name": "llm", "models": [stage]}))
        build_spec(spec, repo)
    sc = Scenario("llm", repo, "llm", llm_front, llm_triton)
    return sc, (args.faults or "engine,stub,server").split(",")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--python", action="store_true", help="the two Python pipelines")
    which.add_argument("--llm", type=Path, help="the tiny LLM's Hugging Face directory")
    which.add_argument("--pipelines", action="store_true", help="vlm_llm and arr_coc_llm (llm venv)")
    which.add_argument("--merge", help="comma-separated result names (chaos_<name>.json) to merge")
    parser.add_argument(
        "--faults", default=None, help="comma-separated: engine, stub, server, front (--pipelines); none"
    )
    parser.add_argument("--hogs", type=int, default=0, help="busy loops beside the run")
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--soak", type=int, default=0)
    parser.add_argument("--name", default=None, help="results: chaos_<name>.json (default: the scenario)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/tritonkit-chaos"))
    args = parser.parse_args()
    if args.merge:
        merged = merge(args.merge.split(","))
        _write(merged, args.name or "all")
        print(json.dumps({k: merged[k] for k in ("summary", "hung", "wrong", "wrong_class")}, indent=1))
        return
    args.work.mkdir(parents=True, exist_ok=True)
    sc, faults = _scenario(args)
    faults = [] if faults == ["none"] else faults
    name = args.name or sc.name
    hogs = start_hogs(args.hogs)
    serve = Serve(sc.repo, openai=not sc.own_front)
    try:
        http = serve.find(r"HTTP\s+(http://127\.0\.0\.1:\d+)")
        grpc = serve.find(r"gRPC\s+grpc://(127\.0\.0\.1:\d+)")
        if sc.own_front:
            serve.find("serving; press Ctrl-C")
            sc.front_process = FrontProcess(grpc, http)
            base = sc.front_process.base
        else:
            base = serve.find(r"OpenAI\s+(http://127\.0\.0\.1:\d+/v1)")
            serve.find("serving; press Ctrl-C")
        for _ in range(sc.answers):  # each route's right answers, asked alone before any fault
            for ask, right in (
                (lambda: sc.front(base), sc.right_front),
                (lambda: sc.triton(http, grpc), sc.right_triton),
            ):
                kind, text = ask()
                assert kind == "text", (kind, text)
                right.add(text)
        assert len(sc.right_front) == len(sc.right_triton) == sc.answers, (sc.right_front, sc.right_triton)

        def summary(records: list[dict[str, Any]]) -> dict[str, Any]:
            totals: Counter[str] = Counter()
            for record in records:
                totals.update(record["requests"])
            return {
                "scenario": sc.name,
                "hogs": args.hogs,
                "front_restarts": sc.front_process.restarts if sc.front_process is not None else None,
                "concurrency": CONCURRENCY,
                "timeout_s": TIMEOUT_S,
                "faults": records,
                "totals": dict(totals),
                "hung": totals["hung"],
                "wrong": totals["wrong"],
                "wrong_class": totals["client_error"],
                "heal_log": [line.strip() for line in serve.lines if re.match(HEAL_LINE, line.strip())],
            }

        def save(records: list[dict[str, Any]]) -> None:
            _write(summary(records), name)  # after each fault: a run cut short keeps what it did

        records = run_faults(sc, serve, (base, http, grpc), faults, args.kills, save) if faults else []
        result = summary(records)
        if records:
            _write(result, name)  # the faults' figures stay, whatever the soak does
        if args.soak:
            sc.outcomes = []
            result["soak"] = soak(sc, serve, base, http, grpc, args.soak)
    finally:
        if sc.front_process is not None:
            sc.front_process.stop()
            (args.work / f"front-{name}.log").write_text("".join(sc.front_process.lines))
        serve.stop()
        for hog in hogs:
            hog.kill()
        (args.work / f"serve-{name}.log").write_text("".join(serve.lines))
    _write(result, name)
    print(json.dumps({k: result[k] for k in ("totals", "hung", "wrong", "wrong_class")}))
    if "soak" in result:
        print(json.dumps({k: result["soak"][k] for k in ("counts", "second_half_growth", "seconds")}))


if __name__ == "__main__":
    main()
