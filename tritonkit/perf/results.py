"""What a benchmark produced: per-step results, and their JSON and CSV forms.

The CSV uses perf_analyzer's header exactly (latencies in microseconds, one row per step), so
tooling written for perf_analyzer reads tritonkit's output unchanged.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritonkit._files import atomic_write_bytes
from tritonkit._records import JsonRecord, from_record, to_record
from tritonkit.errors import PerfError
from tritonkit.perf.stage_results import StageStats
from tritonkit.perf.stats import LatencySummary
from tritonkit.perf.stream_metrics import StreamSummary
from tritonkit.perf.worker_load import WorkerLoad

#: perf_analyzer's CSV header (concurrency mode). Kept exactly: other tools parse it.
CSV_HEADER: tuple[str, ...] = (
    "Concurrency",
    "Inferences/Second",
    "Client Send",
    "Network+Server Send/Recv",
    "Server Queue",
    "Server Compute Input",
    "Server Compute Infer",
    "Server Compute Output",
    "Client Recv",
    "p50 latency",
    "p90 latency",
    "p95 latency",
    "p99 latency",
)
#: perf_analyzer names the first column "Request Rate" in request-rate mode.
RATE_COLUMN = "Request Rate"

JSON_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class ServerStats(JsonRecord):
    """Triton's own view of the requests of one step (statistics API deltas, per request)."""

    success_count: int
    inference_count: int
    execution_count: int
    queue_us: float
    compute_input_us: float
    compute_infer_us: float
    compute_output_us: float
    request_us: float  # server-side total per request (Triton's "success" duration)

    @property
    def avg_batch_size(self) -> float:
        """Average executed batch size: shows whether dynamic batching is batching."""
        return self.inference_count / self.execution_count if self.execution_count else 0.0

    def to_dict(self) -> dict[str, Any]:
        return to_record(self, after={"execution_count": {"avg_batch_size": self.avg_batch_size}})


@dataclass(frozen=True)
class WindowSummary(JsonRecord):
    """One measurement window, kept so a reader can see how the stability check went."""

    duration_s: float
    requests: int
    throughput: float
    avg_latency_us: float
    errors: int


@dataclass(frozen=True)
class StepResult:
    """One load level (a concurrency or a request rate), measured until stable or out of windows."""

    mode: str
    level: float
    throughput: float  # successful inferences per second
    latency: LatencySummary | None
    requests: int  # completed successfully in the reported windows
    errors: dict[str, int]
    stable: bool
    stability: str  # why (not) stable, in words
    duration_s: float  # measured time the reported numbers cover
    windows: tuple[WindowSummary, ...]
    server: ServerStats | None
    client_cpu_us_per_request: float
    client_send_us: float
    client_recv_us: float
    delayed_requests: int = 0  # request-rate mode: sends that started late (client overloaded)
    stream: StreamSummary | None = None  # streamed requests: TTFT, ITL, tokens, goodput
    stages: tuple[StageStats, ...] = ()  # a pipeline's composing models (tritonkit.perf.stages)
    #: --workers/--kube: each load worker's share, CPU, late sends and clock offset (empty, and
    #: left out of the record, for a run from one process)
    load_workers: tuple[WorkerLoad, ...] = ()

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    @property
    def level_label(self) -> str:
        return f"{self.level:g}" if self.mode == "request_rate" else str(int(self.level))

    def latency_us(self, stat: str) -> float | None:
        return self.latency.get(stat) if self.latency else None

    def network_us(self) -> float:
        """Client latency not spent inside Triton (network, HTTP/gRPC handling, client work)."""
        if self.latency is None:
            return 0.0
        inside = self.server.request_us if self.server else 0.0
        return max(self.latency.avg_us - inside - self.client_send_us - self.client_recv_us, 0.0)

    def to_dict(self) -> dict[str, Any]:
        client = {
            "cpu_us_per_request": self.client_cpu_us_per_request,
            "send_us": self.client_send_us,
            "recv_us": self.client_recv_us,
        }
        return to_record(
            self,
            keys={"latency": "latency_us"},
            skip=("client_cpu_us_per_request", "client_send_us", "client_recv_us")
            + (() if self.load_workers else ("load_workers",)),
            after={
                "errors": {"error_count": self.error_count},
                "server": {"network_us": self.network_us(), "client": client},
            },
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StepResult:
        client = data.get("client") or {}
        return from_record(
            cls,
            data,
            keys={"latency": "latency_us"},
            defaults={"errors": {}, "stability": "", "duration_s": 0.0, "windows": ()},
            values={
                "client_cpu_us_per_request": float(client.get("cpu_us_per_request", 0.0)),
                "client_send_us": float(client.get("send_us", 0.0)),
                "client_recv_us": float(client.get("recv_us", 0.0)),
            },
        )


@dataclass(frozen=True)
class TokenCost(JsonRecord):
    """What a million tokens cost at one load level of a streamed run, on one replica.

    Each figure prices the whole replica-hour against that one stream of tokens (input, output,
    or both together), as a platform bills a dedicated replica: ``usd_per_hour / (tokens/s *
    3600) * 1e6``. None where the step carried no such tokens (or they were not counted).
    """

    level: float
    label: str
    stable: bool
    meets_budget: bool
    input_tokens_per_s: float | None
    output_tokens_per_s: float
    usd_per_million_input_tokens: float | None
    usd_per_million_output_tokens: float | None
    usd_per_million_tokens: float | None  # input and output tokens together


@dataclass(frozen=True)
class CostEstimate(JsonRecord):
    """What the best step that meets the latency budget costs on one VM size."""

    sku: str
    pricing: str  # "pay-as-you-go", "spot" or "--price"
    usd_per_hour: float
    budget: str  # e.g. "p99<=50ms"
    step_level: float | None  # None when no step met the budget
    throughput: float
    usd_per_million: float | None
    price_date: str
    price_source: str
    note: str = ""
    output_tokens_per_s: float = 0.0  # streamed runs: the priced step's output tokens/s
    usd_per_million_output_tokens: float | None = None
    #: streamed runs: the token prices at every load level, so a user picks the cheapest one
    #: within the latency budget (the best step above is that pick)
    levels: tuple[TokenCost, ...] = ()

    _record_keys = {"usd_per_million": "usd_per_million_inferences"}
    _record_defaults = {"price_date": "", "price_source": ""}

    def to_dict(self) -> dict[str, Any]:
        tokens = ("output_tokens_per_s", "usd_per_million_output_tokens")
        return {
            **{name: getattr(self, name) for name in tokens},
            **to_record(self, keys=self._record_keys, skip=tokens),
        }


@dataclass(frozen=True)
class PerfRun:
    """A whole benchmark: where, what, how, and one StepResult per load level."""

    url: str
    model: str
    protocol: str
    mode: str
    steps: tuple[StepResult, ...]
    settings: dict[str, Any] = field(default_factory=dict)
    started_at: str = ""
    command: str = ""
    tool: str = "tritonkit perf"
    cost: CostEstimate | None = None

    @property
    def all_stable(self) -> bool:
        return all(s.stable for s in self.steps)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": JSON_SCHEMA_VERSION,
            "tool": self.tool,
            "url": self.url,
            "model": self.model,
            "protocol": self.protocol,
            "mode": self.mode,
            "started_at": self.started_at,
            "command": self.command,
            "settings": self.settings,
            "all_stable": self.all_stable,
            "steps": [s.to_dict() for s in self.steps],
            "cost": self.cost.to_dict() if self.cost else None,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = "<dict>") -> PerfRun:
        try:
            if int(data.get("schema_version", 0)) != JSON_SCHEMA_VERSION:
                raise PerfError(
                    f"{source}: schema_version {data.get('schema_version')!r} is not {JSON_SCHEMA_VERSION}",
                    hint="re-run the benchmark with this tritonkit version to get a comparable file",
                )
            return cls(
                url=str(data["url"]),
                model=str(data["model"]),
                protocol=str(data["protocol"]),
                mode=str(data["mode"]),
                steps=tuple(StepResult.from_dict(s) for s in data["steps"]),
                settings=dict(data.get("settings") or {}),
                started_at=str(data.get("started_at", "")),
                command=str(data.get("command", "")),
                tool=str(data.get("tool", "tritonkit perf")),
                cost=CostEstimate.from_dict(data["cost"]) if data.get("cost") else None,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise PerfError(
                f"{source}: not a tritonkit perf result ({type(exc).__name__}: {exc})",
                hint="give a file written by `tritonkit perf --json FILE`",
            ) from exc

    def with_cost(self, cost: CostEstimate | None) -> PerfRun:
        return PerfRun(
            url=self.url,
            model=self.model,
            protocol=self.protocol,
            mode=self.mode,
            steps=self.steps,
            settings=self.settings,
            started_at=self.started_at,
            command=self.command,
            tool=self.tool,
            cost=cost,
        )


# --- files -------------------------------------------------------------------------------------


def atomic_write(path: Path, data: bytes | str) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename (no half-written files)."""
    path = Path(path)
    if path.parent and not path.parent.exists():
        raise PerfError(f"cannot write {path}: directory {path.parent} does not exist")
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        atomic_write_bytes(path, raw)
    except OSError as exc:
        raise PerfError(f"cannot write {path}: {exc}") from exc


def to_json(run: PerfRun) -> str:
    return json.dumps(run.to_dict(), indent=2) + "\n"


def write_json(run: PerfRun, path: Path) -> None:
    atomic_write(path, to_json(run))


def read_json(path: Path) -> PerfRun:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise PerfError(
            f"{path}: no such file", hint="give a file written by `tritonkit perf --json`"
        ) from exc
    except (OSError, ValueError) as exc:
        raise PerfError(f"{path}: not readable JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise PerfError(f"{path}: not a tritonkit perf result (top level is not an object)")
    return PerfRun.from_dict(data, source=str(path))


def _us(value: float | None) -> int:
    return int(round(value or 0.0))


#: columns a streamed run adds after perf_analyzer's (times in us, like theirs)
STREAM_CSV_HEADER: tuple[str, ...] = (
    *(f"TTFT {k}" for k in ("avg", "p50", "p90", "p95", "p99")),
    *(f"ITL {k}" for k in ("avg", "p50", "p90", "p95", "p99")),
    *(f"Output Tokens {k}" for k in ("avg", "p50", "p90", "p95", "p99")),
    "Output Tokens/Second",
    "Requests/Second",
    "Final Response Tail p50",
    "Goodput Requests/Second",
    "Client CPU per Response",
)


def _stream_cells(s: StepResult) -> list[str]:
    st = s.stream
    if st is None:
        return [""] * len(STREAM_CSV_HEADER)
    cells: list[str] = []
    for summary, fmt in ((st.ttft, _us), (st.itl, _us), (st.output_tokens, None)):
        for k in ("avg", "p50", "p90", "p95", "p99"):
            if summary is None:
                cells.append("")
            elif fmt is None:
                cells.append(f"{summary.get(k):.2f}")
            else:
                cells.append(str(fmt(summary.get(k))))
    cells += [
        f"{st.output_tokens_per_s:.2f}",
        f"{st.requests_per_s:.2f}",
        str(_us(st.final_tail.p50_us)) if st.final_tail else "",
        f"{st.goodput.requests_per_s:.2f}" if st.goodput else "",
        f"{st.client_cpu_us_per_response:.1f}",
    ]
    return cells


def csv_rows(run: PerfRun) -> list[list[str]]:
    """perf_analyzer-style rows: header first, then one row per step (latencies in us); streamed
    runs add the streaming columns after perf_analyzer's."""
    header = list(CSV_HEADER)
    if run.mode == "request_rate":
        header[0] = RATE_COLUMN
    stream = any(s.stream is not None for s in run.steps)
    if stream:
        header += STREAM_CSV_HEADER
    rows = [header]
    for s in run.steps:
        srv = s.server
        extra = _stream_cells(s) if stream else []
        rows.append(
            [
                s.level_label,
                f"{s.throughput:.2f}",
                str(_us(s.client_send_us)),
                str(_us(s.network_us())),
                str(_us(srv.queue_us if srv else 0.0)),
                str(_us(srv.compute_input_us if srv else 0.0)),
                str(_us(srv.compute_infer_us if srv else 0.0)),
                str(_us(srv.compute_output_us if srv else 0.0)),
                str(_us(s.client_recv_us)),
                str(_us(s.latency_us("p50"))),
                str(_us(s.latency_us("p90"))),
                str(_us(s.latency_us("p95"))),
                str(_us(s.latency_us("p99"))),
                *extra,
            ]
        )
    return rows


def to_csv(run: PerfRun) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerows(csv_rows(run))
    return buf.getvalue()


def write_csv(run: PerfRun, path: Path) -> None:
    atomic_write(path, to_csv(run))
