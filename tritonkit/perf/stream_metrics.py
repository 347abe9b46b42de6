"""Streaming metrics: what one streamed request's response timeline says, and a step's summary.

Definitions (all times on the client's monotonic clock, from the moment the request is sent):

- **TTFT**: send -> first response that carries outputs.
- **ITL** of one request: (last output response - first output response) / (output responses - 1),
  only for requests with more than one output response (a one-response answer has no gaps).
- **Request latency**: send -> last response that carries outputs (perf_analyzer 2.51's rule).
  A trailing flags-only final response (``triton_final_response`` with no outputs, which the
  vLLM and TensorRT-LLM backends send) is not a token; the time from the last output response
  to it is reported separately as the **final-response tail** (genai-perf counts it into its
  request latency).
- **Output tokens** of one request: the engine's own count when its responses carry one
  (``num_output_tokens``, NVIDIA's vllm backend with ``return_num_output_tokens``), else the
  tokens a local tokenizer file finds in the text of its responses, else one per output response.
- **Input tokens** of one request: the engine's ``num_input_tokens`` when returned, else the
  prompt's length as the load generator made it (``--prompt-tokens``/``--dataset``), else unknown.
- A request that fails mid-stream (an error response, a broken connection, a timeout, a
  cancellation) counts once under its error kind and adds nothing to any distribution: its
  partial timeline would bias TTFT low and latency short.

A finished stream becomes a :data:`StreamInfo` tuple (small and picklable: worker processes
send them to the parent) attached to its load-generator record.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tritonkit._records import JsonRecord
from tritonkit.errors import PerfError
from tritonkit.perf.saturation import ClientCheck, check_client
from tritonkit.perf.stats import LatencySummary, summarize_ns, summarize_values

#: (ttft_ns, itl_ns or -1, output responses, output tokens, final-response tail ns or -1,
#: input tokens or -1, asked output tokens or -1, client delay ns or -1: how long after its
#: kernel-stamped arrival the client got round to a response, on average; -1 when unstamped,
#: responses whose kernel stamp another response shares, 1 if the first response's is shared)
StreamInfo = tuple[int, int, int, int, int, int, int, int, int, int]

#: a step's load generator is called the bottleneck past this share of its CPU time
CLIENT_BOUND_SHARE = 0.8


@dataclass(frozen=True)
class Timeline:
    """One streamed request as the client saw it (monotonic ns)."""

    send_ns: int
    output_ns: tuple[int, ...]  # arrival of each response that carries outputs
    tokens: tuple[int, ...] = ()  # tokens in each output response (default: one each)
    final_ns: int | None = None  # arrival of a flags-only final response, if one came
    error: str | None = None  # error kind when the stream did not end normally
    input_tokens: int = -1  # prompt tokens (engine's count, else the load generator's), -1: unknown
    asked_tokens: int = -1  # output tokens the request asked for, -1: none asked
    client_delay_ns: int = -1  # mean (seen - kernel arrival) of its responses; -1: not stamped
    #: kernel stamps shared by consecutive responses: the reader fell behind and the kernel
    #: merged their packets, giving all of them the newest packet's stamp (an upper bound)
    shared_stamps: int = 0
    first_shared: bool = False


def shared_stamps(stamps: Sequence[int]) -> tuple[int, bool]:
    """How many of a request's kernel stamps another consecutive one shares, and whether the
    first response's is among them (equal stamps: packets merged while the reader was behind)."""
    shared = [False] * len(stamps)
    for i in range(1, len(stamps)):
        if stamps[i] == stamps[i - 1]:
            shared[i] = shared[i - 1] = True
    return sum(shared), bool(shared and shared[0])


def timeline_record(t: Timeline) -> tuple[int, int, str | None, StreamInfo | None]:
    """The load-generator record of one finished stream: (end_ns, latency_ns, error, info).

    ``end_ns`` (which window the request falls in) is when the stream ended: the final
    response, or the last output response when that was final.
    """
    end = max((t.final_ns or 0), t.output_ns[-1] if t.output_ns else 0, t.send_ns)
    if t.error is not None:
        return (end, end - t.send_ns, t.error, None)
    if not t.output_ns:
        # a stream that ended without a single output: a success with no token and no TTFT
        return (
            end,
            end - t.send_ns,
            None,
            (-1, -1, 0, 0, -1, t.input_tokens, t.asked_tokens, t.client_delay_ns, 0, 0),
        )
    first, last = t.output_ns[0], t.output_ns[-1]
    n = len(t.output_ns)
    itl = (last - first) // (n - 1) if n > 1 else -1
    tokens = sum(t.tokens) if t.tokens else n
    tail = t.final_ns - last if t.final_ns is not None else -1
    return (
        end,
        last - t.send_ns,
        None,
        (
            first - t.send_ns,
            itl,
            n,
            tokens,
            tail,
            t.input_tokens,
            t.asked_tokens,
            t.client_delay_ns,
            t.shared_stamps,
            int(t.first_shared),
        ),
    )


# --- budgets ----------------------------------------------------------------------------------

_LIMIT = re.compile(
    r"^\s*(ttft|itl|latency|e2e)_(avg|p50|p90|p95|p99|max)\s*(?:=|<=|<)\s*([0-9]*\.?[0-9]+)\s*(us|µs|ms|s)?\s*$",
    re.I,
)
_UNIT_US = {"us": 1.0, "µs": 1.0, "ms": 1000.0, "s": 1_000_000.0}
#: genai-perf's name for request latency
_METRIC_ALIASES = {"e2e": "latency"}


@dataclass(frozen=True)
class StreamLimit:
    """One constraint, e.g. ttft_p99 <= 200 ms."""

    metric: str  # ttft | itl | latency
    stat: str  # avg | p50 | p90 | p95 | p99 | max
    limit_us: float

    def __str__(self) -> str:
        value = f"{self.limit_us / 1000:g}ms" if self.limit_us >= 1000 else f"{self.limit_us:g}us"
        return f"{self.metric}_{self.stat}<={value}"


def is_stream_budget(text: str) -> bool:
    """Whether a --latency-budget names streaming metrics (ttft_/itl_/latency_ prefixes)."""
    return bool(re.match(r"^\s*(ttft|itl|latency|e2e)_", text, re.I))


def parse_stream_budget(text: str) -> tuple[StreamLimit, ...]:
    """``ttft_p99=200ms,itl_p99=40ms`` (unit defaults to ms)."""
    limits = []
    for part in (p for p in text.split(",") if p.strip()):
        m = _LIMIT.match(part)
        if not m:
            raise PerfError(
                f"--latency-budget '{text}': '{part.strip()}' is not METRIC_STAT=VALUE[us|ms|s]",
                hint="e.g. --latency-budget ttft_p99=200ms,itl_p99=40ms "
                "(METRIC: ttft, itl, latency; STAT: avg, p50, p90, p95, p99, max)",
            )
        value = float(m.group(3))
        if value <= 0:
            raise PerfError(f"--latency-budget '{part.strip()}': the limit must be positive")
        limits.append(
            StreamLimit(
                _METRIC_ALIASES.get(m.group(1).lower(), m.group(1).lower()),
                m.group(2).lower(),
                value * _UNIT_US[(m.group(4) or "ms").lower()],
            )
        )
    if not limits:
        raise PerfError("--latency-budget is empty", hint="e.g. --latency-budget ttft_p99=200ms,itl_p99=40ms")
    metrics = [lim.metric for lim in limits]
    if len(set(metrics)) != len(metrics):
        raise PerfError(f"--latency-budget '{text}' limits one metric twice")
    return tuple(limits)


# --- a step's summary ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Goodput(JsonRecord):
    """Requests (and their tokens) per second that met every limit, request by request
    (genai-perf's goodput), and whether the step's own percentiles meet the budget."""

    budget: str
    requests_per_s: float
    output_tokens_per_s: float
    good_requests: int
    meets_budget: bool


@dataclass(frozen=True)
class StreamSummary(JsonRecord):
    """The streaming figures of one step (times in microseconds)."""

    ttft: LatencySummary | None
    itl: LatencySummary | None
    output_tokens: LatencySummary | None  # tokens per request (the "_us" fields hold tokens)
    output_tokens_per_s: float
    requests_per_s: float
    responses: int  # output responses received by the completed requests
    final_tail: LatencySummary | None  # last output response -> flags-only final response
    token_counting: str  # "responses", "tokenizer:PATH" or "engine" (num_output_tokens)
    client_cpu_us_per_response: float
    client_cpu_share: float  # load generator CPU seconds per second per process (1.0 = one core busy)
    client_bound: bool
    goodput: Goodput | None = None
    input_tokens: LatencySummary | None = None  # prompt tokens per request (when known)
    asked_output_tokens: LatencySummary | None = None  # output tokens requests asked for
    #: requests that asked for N output tokens and got another number, and the mean of
    #: (got - asked) over the requests that asked (0.0: every length exact)
    output_length_misses: int = 0
    output_length_error_avg: float = 0.0
    client: ClientCheck | None = None  # how much of the figures may be the client's own delay
    #: output tokens/s as the server itself counted them over the same windows (an OpenAI
    #: front's token counter), beside the load generator's own figure; None: not counted there
    server_output_tokens_per_s: float | None = None

    _record_keys = {
        "ttft": "ttft_us",
        "itl": "itl_us",
        "final_tail": "final_response_tail_us",
        "client": "client_check",
    }
    # files written before a figure existed read it as "none measured"
    _record_defaults = {
        "responses": 0,
        "token_counting": "responses",
        "client_cpu_us_per_response": 0.0,
        "client_cpu_share": 0.0,
        "client_bound": False,
    }

    def get(self, metric: str, stat: str) -> float | None:
        """A figure by metric (ttft, itl, latency is not here) and stat (avg, p50, ...)."""
        summary = {"ttft": self.ttft, "itl": self.itl}.get(metric)
        return summary.get(stat) if summary else None


def _request_value(metric: str, info: StreamInfo, latency_ns: int) -> int:
    if metric == "ttft":
        return info[0]
    if metric == "itl":
        return info[1]
    return latency_ns


def summarize_stream(
    infos: Sequence[StreamInfo],
    latencies_ns: Sequence[int],
    *,
    duration_s: float,
    client_cpu_s: float,
    processes: int = 1,
    token_counting: str = "responses",
    limits: Sequence[StreamLimit] = (),
    latency: LatencySummary | None = None,
    loop_lag_ns: Sequence[int] = (),
    cpu_wait_s: float | None = None,
    asked_concurrency: float | None = None,
) -> StreamSummary:
    """The streaming summary of the completed requests of one step (``infos[i]`` and
    ``latencies_ns[i]`` describe the same request)."""
    duration_s = max(duration_s, 1e-9)
    ttft = summarize_ns([i[0] for i in infos if i[0] >= 0])
    itl = summarize_ns([i[1] for i in infos if i[1] >= 0])
    tokens = summarize_values([i[3] for i in infos])
    tail = summarize_ns([i[4] for i in infos if i[4] >= 0])
    total_tokens = sum(i[3] for i in infos)
    responses = sum(i[2] for i in infos)
    share = client_cpu_s / duration_s / max(processes, 1)
    goodput = None
    if limits:
        good = good_tokens = 0
        for info, lat in zip(infos, latencies_ns, strict=True):
            ok = True
            for lim in limits:
                value = _request_value(lim.metric, info, lat)
                # a request without the metric (one response: no ITL) cannot break that limit
                if value >= 0 and value / 1000.0 > lim.limit_us:
                    ok = False
                    break
            if ok:
                good += 1
                good_tokens += info[3]
        by_metric = {"ttft": ttft, "itl": itl, "latency": latency}
        meets = True
        for lim in limits:
            summary = by_metric[lim.metric]
            if summary is not None and summary.get(lim.stat) > lim.limit_us:
                meets = False
        meets = meets and ttft is not None
        goodput = Goodput(
            budget=",".join(str(lim) for lim in limits),
            requests_per_s=good / duration_s,
            output_tokens_per_s=good_tokens / duration_s,
            good_requests=good,
            meets_budget=meets,
        )
    asked = [(i[3], i[6]) for i in infos if len(i) > 6 and i[6] >= 0]
    stamped = [i for i in infos if len(i) > 9 and i[7] >= 0]
    client = check_client(
        delays_ns=[i[7] for i in stamped],
        shared_share=sum(i[8] for i in stamped) / max(sum(i[2] for i in stamped), 1),
        first_shared_share=sum(i[9] for i in stamped) / max(len(stamped), 1),
        itl_p50_us=itl.p50_us if itl else None,
        asked_concurrency=asked_concurrency,
        # a request holds its slot until its stream ends: the flags-only final tail included
        busy_ns=sum(latencies_ns) + sum(i[4] for i in infos if i[4] > 0),
        lags_ns=loop_lag_ns,
        cpu_wait_s=cpu_wait_s,
        cpu_share=share,
        duration_s=duration_s,
        ttft_p50_us=ttft.p50_us if ttft else None,
    )
    return StreamSummary(
        input_tokens=summarize_values([i[5] for i in infos if len(i) > 5 and i[5] >= 0]),
        asked_output_tokens=summarize_values([a for _, a in asked]),
        output_length_misses=sum(1 for got, a in asked if got != a),
        output_length_error_avg=sum(got - a for got, a in asked) / len(asked) if asked else 0.0,
        ttft=ttft,
        itl=itl,
        output_tokens=tokens,
        output_tokens_per_s=total_tokens / duration_s,
        requests_per_s=len(infos) / duration_s,
        responses=responses,
        final_tail=tail,
        token_counting=token_counting,
        client_cpu_us_per_response=client_cpu_s * 1e6 / responses if responses else 0.0,
        client_cpu_share=share,
        client_bound=client.bound,
        goodput=goodput,
        client=client,
    )


# --- counting tokens ----------------------------------------------------------------------------


class TokenCounter:
    """Counts the tokens of response text with a local tokenizer file (``tokenizers`` package).

    Only a file on disk: nothing is ever downloaded (air-gapped clusters are the point).
    """

    def __init__(self, path: str) -> None:
        import os

        if not os.path.isfile(path):
            raise PerfError(
                f"--tokenizer {path}: no such file",
                hint="give a local tokenizer.json (a Hugging Face `tokenizers` file); nothing is downloaded",
            )
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise PerfError(
                "--tokenizer needs the 'tokenizers' package", hint="pip install 'tritonkit[tokens]'"
            ) from exc
        try:
            self._tok: Any = Tokenizer.from_file(path)
        except Exception as exc:  # the tokenizers library raises plain Exception subclasses
            raise PerfError(f"--tokenizer {path}: not a tokenizer file this library reads: {exc}") from exc
        self.path = path

    def count(self, text: str) -> int:
        if not text:
            return 0
        return len(self._tok.encode(text, add_special_tokens=False).ids)


def texts_of(values: Sequence[Any]) -> str:
    """The text of one response's BYTES/str outputs, joined (what a tokenizer counts)."""
    parts = []
    for value in values:
        if isinstance(value, bytes):
            parts.append(value.decode("utf-8", errors="replace"))
        elif isinstance(value, str):
            parts.append(value)
        elif isinstance(value, list | tuple):
            parts.append(texts_of(value))
    return "".join(parts)
