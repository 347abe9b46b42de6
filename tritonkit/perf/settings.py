"""What defines one benchmark run (:class:`PerfSettings`) and the live updates a run reports
(:class:`Progress`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tritonkit._records import to_record
from tritonkit.errors import PerfError
from tritonkit.perf._openai_sender import OPENAI_APIS
from tritonkit.perf.llm import LlmLoad
from tritonkit.perf.stream_metrics import StreamLimit, parse_stream_budget

__all__ = ["STABLE_WINDOWS", "PerfSettings", "Progress", "ProgressCallback"]

#: windows the stability rule compares (perf_analyzer's three)
STABLE_WINDOWS = 3


@dataclass(frozen=True)
class PerfSettings:
    """Everything that defines one benchmark run."""

    url: str
    model: str
    protocol: str = "http"
    model_version: str = ""
    mode: str = "concurrency"  # or "request_rate"
    levels: tuple[float, ...] = (1.0,)
    poisson: bool = False
    #: concurrency mode: the slots' first requests start spread over the first request's latency
    #: (at most 1 s) instead of all at once, so arrivals begin desynchronised as independent
    #: clients' do (perf_analyzer starts one thread per slot, one after another); a config
    #: whose throughput needs every request to arrive in lock-step shows what it falls to
    stagger: bool = False
    measurement_interval_ms: int = 3000
    requests_per_window: int | None = None
    duration_s: float | None = None
    stability_percentage: float = 10.0
    max_trials: int = 10
    warmup_s: float = 1.0
    #: with a value, the warm-up ends early once two warm-up windows in a row (each at least
    #: this long, and at least three times the latency seen so far) agree within
    #: ``stability_percentage``: the model is past its slow first requests. ``warmup_s`` is then
    #: the most it lasts. None: the warm-up lasts ``warmup_s``
    warmup_settle_ms: int | None = None
    input_data: str = "random"  # random | zero | a path
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    workers: int = 0
    timeout_s: float = 30.0
    server_stats: bool = True
    latency_stat: str = "avg"  # which latency the stability rule compares
    cacert: str | None = None
    #: stream each request (gRPC ModelStreamInfer / HTTP generate_stream); None: when the
    #: model's config says it is decoupled
    stream: bool | None = None
    tokenizer: str | None = None  # local tokenizer file counting output tokens (streaming)
    stream_budget: str | None = None  # e.g. "ttft_p99=200ms,itl_p99=40ms": goodput per step
    #: the pipeline's composing models by hand (--composing); empty: found from the served
    #: ensemble configs and, with ``repository``, the BLS calls of its Python models
    composing: tuple[str, ...] = ()
    repository: str | None = None  # the model repository the server serves (BLS sources)
    #: LLM-shaped requests (--prompt-tokens, --output-tokens, --dataset, --seed); None: input_data
    llm: LlmLoad | None = None
    text_input: str | None = None  # the input prompts go to (default: text_input, TEXT_QUERY, ...)
    #: ``url`` is an OpenAI-compatible server (``tritonkit openai``): "chat" or "completions"
    openai: str | None = None
    #: a streamed run over gRPC on an LLM-decoder pipeline's front door (``vlm_llm``,
    #: ``arr_coc_llm``) measures it composed, as its callers compose it: the prompt model unary,
    #: then the LLM stage's stream straight from Triton, timed as one request
    #: (:mod:`tritonkit.llm_pipeline`). False (the library's default, and ``tune``'s): the front
    #: door answers, one answer per instance; ``tritonkit perf`` composes unless --no-compose
    compose: bool = False
    #: HOST:PORT where ``workers`` load workers started elsewhere connect (a ``--kube`` run's
    #: coordinator pod); None: ``workers`` processes are started here, over loopback TCP
    listen: str | None = None

    def stream_limits(self) -> tuple[StreamLimit, ...]:
        return parse_stream_budget(self.stream_budget) if self.stream_budget else ()

    def validate(self) -> None:
        if self.protocol not in ("http", "grpc"):
            raise PerfError(f"unknown protocol '{self.protocol}'", hint="use --protocol http or grpc")
        if self.mode not in ("concurrency", "request_rate"):
            raise PerfError(f"unknown load mode '{self.mode}'")
        if not self.levels:
            raise PerfError("no load levels to measure")
        if self.measurement_interval_ms < 100:
            raise PerfError("--measurement-interval must be at least 100 ms")
        if self.requests_per_window is not None and self.requests_per_window < 1:
            raise PerfError("--requests must be at least 1")
        if self.duration_s is not None and self.duration_s <= 0:
            raise PerfError("--duration must be positive")
        if self.duration_s is not None and self.requests_per_window is not None:
            raise PerfError("give --duration or --requests, not both")
        if self.max_trials < STABLE_WINDOWS:
            raise PerfError(f"--max-trials must be at least {STABLE_WINDOWS} (the stability rule needs them)")
        if not 0 < self.stability_percentage < 100:
            raise PerfError("--stability-percentage must be between 0 and 100")
        self._validate_workers()
        self._validate_warmup()
        if self.stream is False and self.llm is None and (self.tokenizer or self.stream_budget):
            raise PerfError("--tokenizer and streaming --latency-budget limits apply to --stream runs only")
        self.stream_limits()
        self._validate_openai()
        if self.llm is not None:
            self.llm.validate()
            if self.input_data not in ("random", "zero"):
                raise PerfError("give --input-data or LLM load (--prompt-tokens/--dataset), not both")

    def _validate_workers(self) -> None:
        if self.workers < 0:
            raise PerfError("--workers must be 0 (in-process) or more")
        if self.listen is not None:
            self.listen_address()
            if self.workers < 1:
                raise PerfError("--listen waits for --workers N workers started elsewhere: give N")

    def _validate_warmup(self) -> None:
        if self.warmup_s < 0:
            raise PerfError("--warmup must not be negative")
        if self.warmup_settle_ms is not None and self.warmup_settle_ms < 10:
            raise PerfError("a settling warm-up's windows must be at least 10 ms")

    def _validate_openai(self) -> None:
        if self.openai is None:
            return
        if self.openai not in OPENAI_APIS:
            raise PerfError(f"unknown --openai API '{self.openai}'", hint="use --openai chat or completions")
        if self.protocol != "http" or self.stream is False:
            raise PerfError("--openai streams over HTTP: drop --protocol grpc and --no-stream")
        if self.input_data not in ("random", "zero") or self.shapes or self.composing:
            raise PerfError(
                "--openai sends prompts, not tensors: drop --input-data, --shape and --composing",
                hint="shape the prompts with --prompt-tokens/--output-tokens or --dataset",
            )

    def listen_address(self) -> tuple[str, int]:
        """``listen`` as (host, port)."""
        host, _, port = (self.listen or "").rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise PerfError(f"--listen '{self.listen}' is not HOST:PORT", hint="e.g. --listen 0.0.0.0:7070")
        return host.strip("[]"), int(port)

    def to_dict(self) -> dict[str, Any]:
        """What a result file records of the run's settings (where and what it called aside)."""
        return to_record(self, skip=_NOT_RECORDED)


#: PerfSettings fields a result file does not keep under "settings" (it has url, model,
#: protocol and mode at its top level; a CA path and the prompt input are not results)
_NOT_RECORDED = ("url", "model", "protocol", "mode", "server_stats", "cacert", "text_input", "listen")


@dataclass(frozen=True)
class Progress:
    """A live update for displays: one finished window of one step."""

    step: int  # 1-based
    steps: int
    mode: str
    level: float
    window: int
    max_windows: int
    throughput: float
    avg_latency_us: float
    errors: int
    stability: str
    done: bool = False
    stream: bool = False
    ttft_p50_us: float = 0.0  # streaming only
    itl_p50_us: float = 0.0
    output_tokens_per_s: float = 0.0


ProgressCallback = Callable[[Progress], None]
