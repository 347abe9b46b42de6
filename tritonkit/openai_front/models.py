"""The models the front serves, found from the server's own answers (so a remote Triton works).

Every loaded model is looked at once (its metadata and config through tritonkit's client): an
LLM stage (the vLLM backend's tensor contract) or a pipeline whose config carries an
``openai.*`` mapping is served; others are not listed. An unknown id makes the front look again
(a model loaded since), at most once per ``rescan_after`` seconds.

A model served once and gone since (unloaded after its engine died, being reloaded, Triton
restarting) is not a client's mistake: asking for it is a 503 (with Retry-After), never a 404,
and the front's readiness lists it until Triton calls it ready again.

The registry keeps what it last saw of each served model's readiness (:meth:`ModelRegistry.watch`
asks Triton every ``period`` seconds, ``/health/ready`` and requests Triton refused as down tell it
too): a request for a model that is down is refused 503 at once, from that state, without a
request to Triton that would wait on the reload.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tritonkit._timeouts import within
from tritonkit.client import AsyncTritonClient
from tritonkit.errors import ClientError, SpecError, TritonKitError
from tritonkit.llm_pipeline import ComposedPipeline, composed_pipeline
from tritonkit.openai_front.errors import RETRY_AFTER_S, OpenAIError
from tritonkit.openai_front.mapping import LlmEngine, PipelineMapping, llm_engine, pipeline_mapping
from tritonkit.openai_front.templates import ChatTemplate, template_from_repository
from tritonkit.signature import ModelSignature

__all__ = ["ModelRegistry", "Target"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Target:
    """One model the front serves: an LLM stage or a mapped pipeline."""

    name: str
    signature: ModelSignature
    created: int
    engine: LlmEngine | None = None
    pipeline: PipelineMapping | None = None
    template: ChatTemplate | None = None
    #: how ``tool_choice: auto`` answers are parsed (``--tool-parser``, else the template's format)
    tool_parser: str | None = None
    #: a pipeline the front composes itself (its prompt model, then its LLM stage's stream), and
    #: that stage's abilities; None: the pipeline model answers (see ``client/composed.py``)
    composed: ComposedPipeline | None = None
    composed_engine: LlmEngine | None = None

    @property
    def kind(self) -> str:
        return "llm-engine" if self.engine is not None else "pipeline"

    @property
    def counts_tokens(self) -> bool:
        """True when answers carry the model's own token counts (``usage``)."""
        if self.engine is not None:
            return self.engine.token_counts
        return self.pipeline is not None and self.pipeline.counts_tokens

    def card(self) -> dict[str, object]:
        """The model object of ``GET /v1/models``, with what the front knows of it: its kind and
        whether its answers carry ``usage`` (``"engine"``: the LLM stage's own counts; ``"none"``:
        the model counts no tokens, so ``usage`` is null rather than a guess)."""
        return {
            "id": self.name,
            "object": "model",
            "created": self.created,
            "owned_by": "tritonkit",
            "tritonkit": {"kind": self.kind, "usage": "engine" if self.counts_tokens else "none"},
        }


#: seconds a model's last readiness answer stands while its checks time out (a busy server is
#: not a down one); past it, no answer reads as down
STALE_AFTER_S = 10.0


class ModelRegistry:
    """Model id -> :class:`Target`, read from the server and refreshed on a miss."""

    def __init__(
        self,
        client: AsyncTritonClient,
        *,
        templates: Mapping[str, ChatTemplate] | None = None,
        tool_parsers: Mapping[str, str] | None = None,
        repository: Path | None = None,
        only: Sequence[str] = (),
        rescan_after: float = 5.0,
        compose: bool = True,
    ) -> None:
        self._client = client
        self._templates = dict(templates or {})
        self._tool_parsers = dict(tool_parsers or {})
        self._repository = repository
        self._only = frozenset(only)
        self._rescan_after = rescan_after
        self._compose = compose
        self._targets: dict[str, Target] = {}
        #: every model this front has served (a model missing now was unloaded: 503, not 404)
        self._known: set[str] = set()
        self._scanned: float | None = None
        self._lock = asyncio.Lock()
        #: served models Triton did not call ready when last asked (refused at once by get())
        self._down: set[str] = set()
        #: model -> when a readiness check of it last got an answer (ready, not ready, or refused)
        self._answered: dict[str, float] = {}
        #: when Triton last answered that a model is ready (what a probe that times out falls back on)
        self._ready_at: float | None = None
        #: model -> why it is not served although it looks meant to be (shown by the CLI)
        self.skipped: dict[str, str] = {}

    async def scan(self) -> dict[str, Target]:
        """Look at every loaded model now."""
        async with self._lock:
            stats = await self._client.statistics()
            names = sorted({str(s.get("name")) for s in stats.get("model_stats", []) if s.get("name")})
            if self._only:
                names = [n for n in names if n in self._only]
            targets: dict[str, Target] = {}
            skipped: dict[str, str] = {}
            for name in names:
                try:
                    target = await self._target(name)
                except (ClientError, SpecError) as exc:
                    skipped[name] = exc.message
                    log.warning("model %s is not served: %s", name, exc.message)
                    continue
                if target is not None:
                    targets[name] = target
            self._targets, self.skipped, self._scanned = targets, skipped, time.monotonic()
            self._known |= set(targets)
            return dict(targets)

    async def _target(self, name: str) -> Target | None:
        self._client.forget(name)
        signature = await self._client.model_info(name)
        created = self._targets[name].created if name in self._targets else int(time.time())
        engine = llm_engine(signature)
        if engine is not None:
            template = self._templates.get(name)
            if template is None and self._repository is not None:
                template = template_from_repository(self._repository, name)
            parser = self._tool_parsers.get(name) or (template.tool_parser if template is not None else None)
            return Target(name, signature, created, engine=engine, template=template, tool_parser=parser)
        config = await self._client.model_config(name)
        mapping = pipeline_mapping(config, signature)
        if mapping is None:
            return None
        composed, engine = await self._composition(config, mapping) if self._compose else (None, None)
        return Target(name, signature, created, pipeline=mapping, composed=composed, composed_engine=engine)

    async def _composition(
        self, config: Mapping[str, object], mapping: PipelineMapping
    ) -> tuple[ComposedPipeline | None, LlmEngine | None]:
        """The composition of a streamed LLM-decoder pipeline whose LLM stage is loaded and keeps
        the vLLM contract; (None, None) otherwise (the pipeline model then answers)."""
        composed = composed_pipeline(config)
        if composed is None or not mapping.stream:
            return None, None
        try:
            engine = llm_engine(await self._client.model_info(composed.llm_model))
        except ClientError as exc:
            log.warning("pipeline %s is served through its own model: %s", composed.name, exc.message)
            return None, None
        return (composed, engine) if engine is not None else (None, None)

    async def not_ready(self) -> list[str]:
        """The models this front served that Triton does not call ready now (sorted)."""
        if self._scanned is None:
            await self.scan()
        down = []
        for name in sorted(self._known | set(self._targets)):
            try:
                ready = await self._client.is_ready(name)
            except ClientError:
                ready = False
            self.seen(name, ready=ready)
            if not ready:
                down.append(name)
        return down

    def seen(self, name: str, *, ready: bool) -> None:
        """Note what was just seen of ``name``'s readiness (a request Triton refused as down says
        not ready too). Back from down, its cached signature is dropped: a reload may change it."""
        if name not in self._known:
            return
        now = self._answered[name] = time.monotonic()
        if not ready:
            if name not in self._down:
                log.warning("model %s is not ready: refusing its requests 503 until it is back", name)
            self._down.add(name)
            return
        self._ready_at = now
        if name in self._down:
            self._down.discard(name)
            self._client.forget(name)
            log.info("model %s is ready again", name)

    def is_down(self, name: str) -> bool:
        return name in self._down

    def down(self) -> list[str]:
        """The served models last seen not ready (sorted): the state requests are refused from."""
        return sorted(self._down)

    def ready_recently(self) -> bool:
        """Triton said a model is ready within the last STALE_AFTER_S seconds."""
        return self._ready_at is not None and time.monotonic() - self._ready_at < STALE_AFTER_S

    async def watch(self, period: float, check_timeout: float) -> None:
        """Ask Triton every ``period`` seconds whether each served model is ready (until
        cancelled): the state :meth:`get` refuses from, kept without any request in flight.

        An answer sets the state: ready, not ready, or an error (Triton refused or cannot be
        reached: down). A check that does not answer within ``check_timeout`` is no answer: a busy
        server (or this front's own busy event loop) is not a model that is down, and refusing
        its requests 503 would fail the very load that slowed the check. The state seen last
        stands until no check of that model has answered for STALE_AFTER_S seconds; then it is
        down (a server that hangs)."""
        while True:
            if self._scanned is None:  # nothing served yet to look at: find it first
                try:
                    await self.scan()
                except TritonKitError as exc:
                    log.debug("models not found yet: %s", exc.message)
            for name in sorted(self._known):
                try:
                    ready = await within(self._client.is_ready(name), check_timeout)
                except TritonKitError:
                    ready = False
                except asyncio.TimeoutError:
                    since = time.monotonic() - self._answered.setdefault(name, time.monotonic())
                    if since < STALE_AFTER_S:
                        continue
                    if name not in self._down:
                        log.warning("model %s: no readiness answer for %.0f s", name, since)
                        self._down.add(name)
                    continue
                self.seen(name, ready=ready)
            await asyncio.sleep(period)

    async def targets(self) -> list[Target]:
        if self._scanned is None:
            await self.scan()
        return [self._targets[n] for n in sorted(self._targets)]

    async def get(self, name: str) -> Target:
        """The target ``name`` (404 in OpenAI's shape when the server serves no such model; 503
        at once, from the state last seen, when it is down)."""
        if name in self._down:
            raise _unavailable(name)
        target = self._targets.get(name)
        since = None if self._scanned is None else time.monotonic() - self._scanned
        # a model that went away is looked for again each second: it is back as soon as it loads
        wait = min(self._rescan_after, 1.0) if name in self._known else self._rescan_after
        if target is None and (since is None or since >= wait):
            target = (await self.scan()).get(name)
        if target is None and name in self._known:
            raise _unavailable(name)
        if target is not None and target.composed is not None and target.composed.llm_model in self._down:
            raise _unavailable(name)  # composed here: its LLM stage is what answers
        if target is None:
            why = self.skipped.get(name)
            raise OpenAIError(
                f"the model '{name}' does not exist" + (f" here: {why}" if why else ""),
                status=404,
                param="model",
                code="model_not_found",
                hint="GET /v1/models lists the models this server answers for",
            )
        return target


def _unavailable(name: str) -> OpenAIError:
    return OpenAIError(
        f"the model '{name}' is not ready: it is being loaded again (its engine or its server "
        "stopped); retry in a few seconds",
        status=503,
        code="model_unavailable",
        hint=f"Retry-After says {RETRY_AFTER_S} s; GET /health/ready says when it is back",
    )
