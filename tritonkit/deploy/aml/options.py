"""The settings of an Azure ML deployment (`tritonkit deploy --target aml`) and their offline checks.

No file or network access here: names, counts, auth mode, traffic and request settings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from tritonkit.deploy.checks import aml_name_problems
from tritonkit.errors import DeployValidationError

FEATURE = "tritonkit deploy --target aml"
AUTH_MODES = ("key", "aml_token", "aad_token")
#: Azure ML's upper bound for request_timeout_ms.
MAX_REQUEST_TIMEOUT_MS = 180_000
#: request_timeout_ms covers the queue and the network as well as the answer (Azure ML deprecated
#: max_queue_wait for managed endpoints: "increase request_timeout_ms to account for any
#: networking/queue delays", OnlineRequestSettings), so a generation gets this much headroom.
GENERATION_HEADROOM = 1.25


@dataclass(frozen=True)
class ProbeOptions:
    """Azure ML probe settings (seconds); Triton's no-code image probes its /v2/health endpoints."""

    initial_delay: int
    period: int = 10
    timeout: int = 2
    failure_threshold: int = 30
    success_threshold: int = 1


@dataclass(frozen=True)
class AmlOptions:
    """Everything `tritonkit deploy --target aml` takes (see the README's deploy section)."""

    repository: Path
    endpoint: str
    deployment: str
    instance_type: str
    instance_count: int = 1
    auth_mode: str = "key"
    traffic: dict[str, int] | None = None
    subscription_id: str | None = None
    resource_group: str | None = None
    workspace: str | None = None
    model_name: str | None = None
    model_version: str = "1"
    max_concurrent_requests: int | None = None
    request_timeout_ms: int = 90_000
    #: the longest one answer takes (s); checked against request_timeout_ms when given
    generation_s: float | None = None
    liveness_probe: ProbeOptions = ProbeOptions(initial_delay=120)
    readiness_probe: ProbeOptions = ProbeOptions(initial_delay=10, period=10, failure_threshold=60)
    output_dir: Path = Path("deploy/aml")
    description: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    wait_timeout_s: float = 1800.0
    connection_timeout_s: float = 10.0
    read_timeout_s: float = 120.0
    retry_total: int = 3
    smoke_test: bool = True

    @property
    def registered_model_name(self) -> str:
        return self.model_name or f"{self.endpoint}-triton"


def settings_problems(o: AmlOptions) -> list[str]:
    """Names, counts, auth mode, traffic and request settings; no file or network access."""
    problems = aml_name_problems("endpoint", o.endpoint) + aml_name_problems("deployment", o.deployment)
    if o.instance_count < 1:
        problems.append(f"--instance-count must be >= 1, got {o.instance_count}")
    if not o.instance_type.strip():
        problems.append("--instance-type is empty (e.g. Standard_NC4as_T4_v3)")
    if o.auth_mode not in AUTH_MODES:
        problems.append(f"--auth-mode must be one of {', '.join(AUTH_MODES)}, got {o.auth_mode!r}")
    if not 1 <= o.request_timeout_ms <= MAX_REQUEST_TIMEOUT_MS:
        problems.append(
            f"--request-timeout-ms must be 1..{MAX_REQUEST_TIMEOUT_MS}, got {o.request_timeout_ms}"
        )
    problems += generation_problems(o.generation_s, o.request_timeout_ms)
    if o.max_concurrent_requests is not None and o.max_concurrent_requests < 1:
        problems.append(f"--max-concurrent-requests must be >= 1, got {o.max_concurrent_requests}")
    if o.traffic is not None:
        problems += traffic_problems(o.traffic)
    if o.wait_timeout_s <= 0:
        problems.append("--timeout must be positive")
    return problems


def generation_problems(generation_s: float | None, request_timeout_ms: int) -> list[str]:
    """A unary answer of ``generation_s`` seconds must fit the request timeout, with headroom."""
    if generation_s is None:
        return []
    if generation_s <= 0:
        return [f"--generation-s must be positive, got {generation_s}"]
    need_ms = math.ceil(generation_s * 1000 * GENERATION_HEADROOM)
    if need_ms > MAX_REQUEST_TIMEOUT_MS:
        return [
            f"an answer taking {generation_s:g} s needs a request timeout of {need_ms} ms (with "
            f"{GENERATION_HEADROOM:g}x headroom for queueing and network), more than Azure ML's "
            f"{MAX_REQUEST_TIMEOUT_MS} ms limit: cap the generation (fewer tokens), or stream it from "
            "AKS (`tritonkit deploy --target aks`), where pieces arrive as they are made"
        ]
    if need_ms > request_timeout_ms:
        return [
            f"an answer taking {generation_s:g} s would be cut off by --request-timeout-ms "
            f"{request_timeout_ms}: raise it to at least {need_ms} (at most {MAX_REQUEST_TIMEOUT_MS})"
        ]
    return []


def parse_traffic(text: str) -> dict[str, int]:
    """``blue=90,green=10`` -> {"blue": 90, "green": 10}; DeployValidationError on bad syntax."""
    out: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, sep, value = part.partition("=")
        if not sep or not value.strip().isdigit():
            raise DeployValidationError(
                f"--traffic {text!r}: {part!r} is not NAME=PERCENT",
                hint="e.g. --traffic blue=90,green=10",
            )
        out[name.strip()] = int(value)
    if not out:
        raise DeployValidationError("--traffic is empty", hint="e.g. --traffic blue=90,green=10")
    return out


def traffic_problems(traffic: dict[str, int]) -> list[str]:
    problems: list[str] = []
    for name, pct in traffic.items():
        problems += aml_name_problems("deployment", name)
        if not 0 <= pct <= 100:
            problems.append(f"traffic for {name!r} must be 0..100, got {pct}")
    total = sum(traffic.values())
    if total not in (0, 100):
        problems.append(f"traffic percentages must add up to 100 (or all be 0), got {total}")
    return problems


def traffic_text(traffic: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(traffic.items()))
